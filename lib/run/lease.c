/* SPDX-License-Identifier: MIT */
/*
 * lease: see lease.h. Every decision is one write transaction of the
 * store, so two replicas that ask at once are serialized by the store's
 * write lock (PostgreSQL's advisory lock, SQLite's BEGIN IMMEDIATE). The
 * local table counts runs in progress per conversation; lease_job holds
 * its mutex while it decides to release or hand over, so a run that
 * begins meanwhile either is counted first (and the lease stays) or comes
 * after the release (and takes the lease again).
 */
#include "run/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cron.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/stats.h"

/* A replica waiting for a conversation asks again well within this. */
#define LEASE_WANT_FRESH_MS 3000
/* Conversations lease_job looks at per run (the rest next second). */
#define LEASE_JOB_BATCH 64

struct lease_run {
	char name[LEASE_NAME_MAX];
	unsigned n;
	bool settling;       /* lease_job is handing it over or releasing it */
	long long confirmed; /* mono ms: lease_acquire's statement began */
	void *watch;         /* lease_watch's handle, or NULL */
	bool fired;          /* the fence fired it */
	struct lease_run *next;
};

struct lease {
	struct store *st;
	char owner[LEASE_OWNER_MAX];
	long long lease_ms;
	pthread_mutex_t lock;
	pthread_cond_t settled; /* an entry's settling ended */
	struct lease_run *runs;
	lease_holds_fn holds;
	lease_hand_off_fn hand_off;
	void *arg;
	struct lease_stats stats;
	/* lease_set_stats's, or NULL (stats_add accepts NULL) */
	struct stats_metric *m_handovers, *m_restores, *m_waits, *m_fenced;
	/* Fencing (lease_set_fence): the last renewal the store confirmed
	 * (mono ms when its statement began), the thread and its stop. */
	long long renewed;
	lease_fire_fn fire;
	pthread_t fencer;
	bool fencer_on, stopping;
	pthread_cond_t wake;
};

long long lease_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lease_create(struct store *st, const char *owner, long long lease_ms,
                 struct lease **out)
{
	struct lease *l;

	*out = NULL;
	if (!st || !owner || !owner[0] || strlen(owner) >= LEASE_OWNER_MAX ||
	    lease_ms <= 0)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->st = st;
	snprintf(l->owner, sizeof(l->owner), "%s", owner);
	l->lease_ms = lease_ms;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->settled, NULL);
	mono_cond_init(&l->wake); /* the fence waits on the lease's clock */
	*out = l;
	return 0;
}

void lease_destroy(struct lease *l)
{
	struct lease_run *r;

	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stopping = true;
	pthread_cond_broadcast(&l->wake);
	pthread_mutex_unlock(&l->lock);
	if (l->fencer_on)
		pthread_join(l->fencer, NULL);
	while ((r = l->runs)) {
		l->runs = r->next;
		free(r);
	}
	pthread_cond_destroy(&l->settled);
	pthread_cond_destroy(&l->wake);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

void lease_set_holder(struct lease *l, lease_holds_fn holds,
                      lease_hand_off_fn hand_off, void *arg)
{
	pthread_mutex_lock(&l->lock);
	l->holds = holds;
	l->hand_off = hand_off;
	l->arg = arg;
	pthread_mutex_unlock(&l->lock);
}

/* ---- runs in progress (lock held) -------------------------------------- */

static struct lease_run *lease_run_find(struct lease *l, const char *name)
{
	for (struct lease_run *r = l->runs; r; r = r->next)
		if (strcmp(r->name, name) == 0)
			return r;
	return NULL;
}

static int lease_run_add(struct lease *l, const char *name)
{
	struct lease_run *r;

	/* A hand-over in progress finishes first: the run then finds the
	 * lease released (and takes it again) or kept. */
	while ((r = lease_run_find(l, name)) && r->settling)
		pthread_cond_wait(&l->settled, &l->lock);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		snprintf(r->name, sizeof(r->name), "%s", name);
		r->next = l->runs;
		l->runs = r;
	}
	r->n++;
	return 0;
}

void lease_done(struct lease *l, const char *name)
{
	struct lease_run **pp, *r;

	pthread_mutex_lock(&l->lock);
	for (pp = &l->runs; (r = *pp); pp = &r->next)
		if (strcmp(r->name, name) == 0) {
			if (--r->n == 0) {
				*pp = r->next;
				free(r);
			}
			break;
		}
	pthread_mutex_unlock(&l->lock);
}

/* ---- fencing ------------------------------------------------------------ */

void lease_watch(struct lease *l, const char *name, void *handle)
{
	struct lease_run *r;

	pthread_mutex_lock(&l->lock);
	r = lease_run_find(l, name);
	if (r && !r->watch) {
		r->watch = handle;
		r->fired = false;
	}
	pthread_mutex_unlock(&l->lock);
}

void lease_unwatch(struct lease *l, const char *name, void *handle)
{
	struct lease_run *r;

	pthread_mutex_lock(&l->lock);
	r = lease_run_find(l, name);
	if (r && r->watch == handle)
		r->watch = NULL;
	pthread_mutex_unlock(&l->lock);
}

/* One look at the runs in progress. l->lock held. */
static void lease_fence_scan(struct lease *l, long long now)
{
	for (struct lease_run *r = l->runs; r; r = r->next) {
		long long seen =
		    r->confirmed > l->renewed ? r->confirmed : l->renewed;

		if (!r->watch || r->fired ||
		    now - seen < LEASE_FENCE_MS(l->lease_ms))
			continue;
		r->fired = true;
		l->stats.fenced++;
		stats_add(l->m_fenced, NULL, 1);
		log_warnx("conversation %.12s: the store has not confirmed "
		          "this replica's lease for %lld ms (of %lld): its "
		          "run is stopped before another replica may take "
		          "the conversation over",
		          r->name, now - seen, l->lease_ms);
		l->fire(r->watch);
	}
}

static void *lease_fencer(void *arg)
{
	struct lease *l = arg;
	long long step = l->lease_ms / 12 > 20 ? l->lease_ms / 12 : 20;

	pthread_mutex_lock(&l->lock);
	while (!l->stopping) {
		struct timespec dl;

		lease_fence_scan(l, mono_ms());
		mono_deadline(&dl, step);
		(void)pthread_cond_timedwait(&l->wake, &l->lock, &dl);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int lease_set_fence(struct lease *l, lease_fire_fn fire)
{
	int e;

	if (!fire)
		return -EINVAL;
	pthread_mutex_lock(&l->lock);
	if (l->fencer_on) {
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	l->fire = fire;
	e = pthread_create(&l->fencer, NULL, lease_fencer, l);
	l->fencer_on = e == 0;
	pthread_mutex_unlock(&l->lock);
	return -e;
}

/* ---- the table ---------------------------------------------------------- */

/*
 * The decision of lease_acquire inside its transaction: 0 granted, -EAGAIN
 * another replica holds it (and this one now wants it).
 */
static int lease_decide(struct lease *l, struct store_tx *tx, const char *name,
                        long long now, struct lease_grant *g)
{
	static const char q_sel[] =
	    "SELECT owner, epoch, expires_ms, wanted_by, wanted_ms "
	    "FROM lease_conversations WHERE name = ?";
	static const char q_ins[] =
	    "INSERT INTO lease_conversations (name, owner, epoch, "
	    "expires_ms) VALUES (?, ?, 1, ?)";
	static const char q_mine[] =
	    "UPDATE lease_conversations SET expires_ms = ? WHERE name = ?";
	static const char q_take[] =
	    "UPDATE lease_conversations SET owner = ?, epoch = epoch + 1, "
	    "expires_ms = ?, wanted_by = '', wanted_ms = 0 WHERE name = ?";
	static const char q_want[] =
	    "UPDATE lease_conversations SET wanted_by = ?, wanted_ms = ? "
	    "WHERE name = ?";
	struct store_stmt *s = store_stmt(tx, q_sel);
	char owner[LEASE_OWNER_MAX], wanted[LEASE_OWNER_MAX];
	long long expires, wanted_ms;
	bool live, reserved;
	int r;

	store_bind_text(s, 1, name);
	r = store_step(tx, s);
	if (r < 0)
		return r;
	if (r == 0) {
		s = store_stmt(tx, q_ins);
		store_bind_text(s, 1, name);
		store_bind_text(s, 2, l->owner);
		store_bind_int64(s, 3, now + l->lease_ms);
		g->epoch = 1;
		return store_run(tx, s);
	}
	snprintf(owner, sizeof(owner), "%s",
	         store_col_text(s, 0) ? store_col_text(s, 0) : "");
	g->epoch = store_col_int64(s, 1);
	expires = store_col_int64(s, 2);
	snprintf(wanted, sizeof(wanted), "%s",
	         store_col_text(s, 3) ? store_col_text(s, 3) : "");
	wanted_ms = store_col_int64(s, 4);
	live = expires > now;
	if (strcmp(owner, l->owner) == 0 && live) {
		s = store_stmt(tx, q_mine);
		store_bind_int64(s, 1, now + l->lease_ms);
		store_bind_text(s, 2, name);
		return store_run(tx, s);
	}
	/* A lease handed over is kept for the replica that asked for it. */
	reserved = !live && wanted[0] && strcmp(wanted, l->owner) != 0 &&
	           wanted_ms > now - LEASE_WANT_FRESH_MS;
	if (live || reserved) {
		snprintf(g->from, sizeof(g->from), "%s",
		         reserved ? wanted : owner);
		if (reserved)
			return -EAGAIN;
		s = store_stmt(tx, q_want);
		store_bind_text(s, 1, l->owner);
		store_bind_int64(s, 2, now);
		store_bind_text(s, 3, name);
		r = store_run(tx, s);
		return r < 0 ? r : -EAGAIN;
	}
	if (strcmp(owner, l->owner) != 0) {
		g->moved = true;
		/* Released leases have expires_ms 0; a later one ran out. */
		g->lost = expires != 0;
		snprintf(g->from, sizeof(g->from), "%s", owner);
	}
	s = store_stmt(tx, q_take);
	store_bind_text(s, 1, l->owner);
	store_bind_int64(s, 2, now + l->lease_ms);
	store_bind_text(s, 3, name);
	g->epoch++;
	return store_run(tx, s);
}

/* The metrics of a lease taken from another replica. Lock held. */
static void lease_count_in(struct lease *l, const struct lease_grant *g)
{
	static const char *const in[] = {"in", NULL};
	static const char *const ho[] = {"handover", NULL};
	static const char *const lost[] = {"server_lost", NULL};

	if (!g->moved)
		return;
	if (!g->lost)
		stats_add(l->m_handovers, in, 1);
	stats_add(l->m_restores, g->lost ? lost : ho, 1);
}

int lease_acquire(struct lease *l, const char *name, long long now_ms,
                  struct lease_grant *g)
{
	struct store_tx *tx;
	long long t0;
	int r;

	memset(g, 0, sizeof(*g));
	if (strlen(name) >= LEASE_NAME_MAX)
		return -EINVAL;
	pthread_mutex_lock(&l->lock);
	r = lease_run_add(l, name);
	pthread_mutex_unlock(&l->lock);
	if (r < 0)
		return r;
	t0 = mono_ms();
	r = store_begin(l->st, true, &tx);
	if (r == 0) {
		r = lease_decide(l, tx, name, now_ms, g);
		if (r == 0 || r == -EAGAIN) {
			int c = store_commit(tx);

			r = c < 0 ? c : r;
		} else {
			store_rollback(tx);
		}
	}
	pthread_mutex_lock(&l->lock);
	if (r == 0) {
		struct lease_run *run = lease_run_find(l, name);

		if (run && run->confirmed < t0)
			run->confirmed = t0;
		l->stats.acquired += g->moved || g->epoch == 1;
		l->stats.moved_in += g->moved;
		l->stats.lost_in += g->moved && g->lost;
		lease_count_in(l, g);
	} else if (r == -EAGAIN) {
		l->stats.waits++;
		stats_add(l->m_waits, NULL, 1);
	}
	pthread_mutex_unlock(&l->lock);
	if (r < 0)
		lease_done(l, name);
	return r;
}

/* Runs one statement with name and owner bound, in a transaction. */
static int lease_exec(struct lease *l, const char *sql, long long v,
                      const char *name, long long *changes)
{
	struct store_tx *tx;
	struct store_stmt *s;
	int r = store_begin(l->st, true, &tx);

	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, v);
	store_bind_text(s, 2, l->owner);
	if (name)
		store_bind_text(s, 3, name);
	r = store_run(tx, s);
	if (r == 0 && changes)
		*changes = store_changes(tx);
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	return store_commit(tx);
}

int lease_renew(struct lease *l, long long now_ms)
{
	static const char q[] = "UPDATE lease_conversations SET expires_ms = ? "
	                        "WHERE owner = ? AND expires_ms > 0";
	long long n = 0, t0 = mono_ms();
	int r = lease_exec(l, q, now_ms + l->lease_ms, NULL, &n);

	if (r == 0) {
		pthread_mutex_lock(&l->lock);
		l->stats.held = n > 0 ? (unsigned)n : 0;
		if (l->renewed < t0)
			l->renewed = t0;
		pthread_mutex_unlock(&l->lock);
	}
	return r;
}

/* Releases name (lock held: no run of it may begin meanwhile). */
static int lease_release_one(struct lease *l, const char *name)
{
	static const char q[] = "UPDATE lease_conversations SET expires_ms = ? "
	                        "WHERE owner = ? AND name = ?";

	return lease_exec(l, q, 0, name, NULL);
}

/* The conversations this replica holds: names[i], wanted[i]. */
static int lease_mine(struct lease *l, char (*names)[LEASE_NAME_MAX],
                      bool *wanted, size_t max, size_t *n)
{
	static const char q[] =
	    "SELECT name, wanted_by, wanted_ms FROM lease_conversations "
	    "WHERE owner = ? AND expires_ms > 0 ORDER BY name";
	long long now = lease_now_ms();
	struct store_tx *tx;
	struct store_stmt *s;
	int r = store_begin(l->st, false, &tx);

	*n = 0;
	if (r < 0)
		return r;
	s = store_stmt(tx, q);
	store_bind_text(s, 1, l->owner);
	while (*n < max && (r = store_step(tx, s)) == 1) {
		const char *w = store_col_text(s, 1);

		snprintf(names[*n], LEASE_NAME_MAX, "%s",
		         store_col_text(s, 0) ? store_col_text(s, 0) : "");
		wanted[*n] = w && w[0] && strcmp(w, l->owner) != 0 &&
		             store_col_int64(s, 2) > now - LEASE_WANT_FRESH_MS;
		(*n)++;
	}
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	return store_commit(tx);
}

/*
 * Releases or hands over name when that is due. The entry marked settling
 * keeps runs of name waiting meanwhile (lease_run_add), and only those:
 * handing over waits on the engine, with the lock released.
 */
static void lease_settle(struct lease *l, const char *name, bool wanted)
{
	struct lease_run *e;
	int held = -1, r = 0;

	pthread_mutex_lock(&l->lock);
	if (lease_run_find(l, name) || !l->holds ||
	    lease_run_add(l, name) < 0) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	e = lease_run_find(l, name);
	e->settling = true;
	pthread_mutex_unlock(&l->lock);
	held = l->holds(l->arg, name);
	if (held == 1 && wanted && l->hand_off)
		r = l->hand_off(l->arg, name);
	if ((held == 0 || (held == 1 && wanted)) && r == 0) {
		r = lease_release_one(l, name);
		if (r < 0)
			log_warnx("releasing a conversation's lease failed: %s",
			          strerror(-r));
		else if (held == 1)
			log_info("conversation %.12s handed over to the "
			         "replica that asked for it",
			         name);
	}
	pthread_mutex_lock(&l->lock);
	if (r == 0 && held == 1 && wanted) {
		static const char *const out[] = {"out", NULL};

		l->stats.handovers++;
		stats_add(l->m_handovers, out, 1);
	}
	e->settling = false;
	pthread_cond_broadcast(&l->settled);
	pthread_mutex_unlock(&l->lock);
	lease_done(l, name);
}

enum cron_next lease_job_renew(void *arg, long long deadline_ms)
{
	struct lease *l = arg;
	int r = lease_renew(l, lease_now_ms());

	(void)deadline_ms; /* one statement */
	if (r < 0)
		log_warnx("renewing this replica's conversation leases failed: "
		          "%s; other replicas take them over once they run out",
		          strerror(-r));
	return CRON_DONE;
}

enum cron_next lease_job(void *arg, long long deadline_ms)
{
	struct lease *l = arg;
	static char names[LEASE_JOB_BATCH][LEASE_NAME_MAX];
	bool wanted[LEASE_JOB_BATCH];
	size_t n = 0;

	(void)deadline_ms; /* a bounded batch */
	/* The job runs on one thread: names is this job's alone. */
	if (lease_mine(l, names, wanted, LEASE_JOB_BATCH, &n) < 0)
		return CRON_DONE;
	for (size_t i = 0; i < n; i++)
		lease_settle(l, names[i], wanted[i]);
	return CRON_DONE;
}

int lease_release_all(struct lease *l)
{
	static const char q[] = "UPDATE lease_conversations SET expires_ms = ? "
	                        "WHERE owner = ? AND expires_ms > 0";
	static char names[LEASE_JOB_BATCH][LEASE_NAME_MAX];
	bool wanted[LEASE_JOB_BATCH];
	long long n = 0;
	size_t k = 0, total = 0;
	int r, rounds = 0;

	/*
	 * Each one's state saved and its boxes ended first, as if another
	 * replica asked; a batch at a time (a settled lease leaves the list).
	 */
	do {
		r = lease_mine(l, names, wanted, LEASE_JOB_BATCH, &k);
		for (size_t i = 0; r == 0 && i < k; i++)
			lease_settle(l, names[i], true);
		total += k;
	} while (r == 0 && k == LEASE_JOB_BATCH && ++rounds < 1000);
	r = lease_exec(l, q, 0, NULL, &n);
	if (r < 0)
		return r;
	(void)n; /* busy ones, released as they are: already counted */
	return total > INT32_MAX ? INT32_MAX : (int)total;
}

void lease_stats(struct lease *l, struct lease_stats *out)
{
	pthread_mutex_lock(&l->lock);
	*out = l->stats;
	pthread_mutex_unlock(&l->lock);
}

static void lease_read_held(void *arg, stats_emit_fn emit, void *ctx)
{
	struct lease_stats st;

	lease_stats(arg, &st);
	emit(ctx, NULL, st.held);
}

void lease_set_stats(struct lease *l, struct stats *s)
{
	static const char *const dir[] = {"direction", NULL};
	static const char *const after[] = {"after", NULL};

	stats_gauge_fn(s, "mcpsd_conversations_held",
	               "Conversations whose lease this replica holds (at the "
	               "last renewal)",
	               NULL, lease_read_held, l);
	pthread_mutex_lock(&l->lock);
	l->m_handovers = stats_counter(
	    s, "mcpsd_conversation_handovers_total",
	    "Conversations handed over to another replica (out) or taken "
	    "from one that handed them over (in)",
	    dir);
	l->m_restores = stats_counter(
	    s, "mcpsd_conversation_restores_total",
	    "Conversations taken from another replica, after a hand-over or "
	    "after that replica stopped answering; their state is restored "
	    "here",
	    after);
	l->m_waits = stats_counter(s, "mcpsd_conversation_waits_total",
	                           "Runs that waited for another replica to "
	                           "hand their conversation over",
	                           NULL);
	l->m_fenced = stats_counter(
	    s, "mcpsd_conversation_fenced_total",
	    "Runs this replica stopped because the shared store had not "
	    "confirmed their conversation's lease in time (cut off from it)",
	    NULL);
	pthread_mutex_unlock(&l->lock);
}
