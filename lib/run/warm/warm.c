/* SPDX-License-Identifier: MIT */
/*
 * warm: warm sessions; see warm.h. The table (sessions and the pool, the
 * counters, the notes of why state was lost) is guarded by w->lock. A
 * session taken by a run is marked busy and used by that run's thread
 * alone, without the lock; housekeeping skips busy sessions. Engine calls
 * and agent I/O happen without the lock. One box and the protocol with its
 * agent are in warm_agent.c, warm_io.c and warm_exec.c; this file is the
 * table, the pool and their limits.
 */
#include "run/warm/warm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run/budget.h"
#include "run/warm/warm_agent.h"
#include "run/warm/warm_exec.h"
#include "run/warm/warm_io.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"
#include "run/warm/warm_state.h"
#include "workspace/workspace.h"

#define WARM_NOTES_MAX 4096
#define WARM_MEM_RESERVE_MB 512 /* MemAvailable kept free for the host */
/*
 * CPU an idle box used that the housekeeping tick charges to its tenant at
 * once; less waits for the next tick or run (an idle kernel uses next to
 * none, a thread left spinning passes it within a tick).
 */
#define WARM_IDLE_CHARGE_MS 200

/* Why a conversation's state was lost, told with its next run. */
struct warm_note {
	struct warm_note *next;
	char key[WARM_KEY_LEN];
	char reason[WARM_REASON_LEN];
};

struct warm {
	const struct config *cfg;
	struct backend *be;
	char boot[17];
	struct warm_context env; /* paths and settings the agent side needs */
	bool pool_enabled;

	pthread_mutex_t lock;
	struct warm_box *sessions; /* claimed, keyed */
	struct warm_box *pool;     /* ready, unclaimed */
	/* warm_run_once's boxes after their run, for warm_tick to end (still
	 * counted in n_starting): the answer does not wait for the engine. */
	struct warm_box *ending;
	unsigned n_sessions, n_pool, n_busy, n_starting;
	struct warm_note *notes;
	unsigned n_notes;
	unsigned long long started, reused, evicted, expired;
	/* CPU charged for idle boxes; sessions ended over the budget */
	unsigned long long idle_cpu_ms, cpu_ended;
	struct budget *budget; /* borrowed, or NULL */
	bool stopping;
	/* the housekeeping thread's own */
	unsigned pool_failures;  /* pool starts failed in a row */
	long long pool_retry_ms; /* mono_ms before which none is tried */
};

/* ---- notes: why state was lost ----------------------------------------- */

static void warm_key(char out[WARM_KEY_LEN], const char *ws, const char *lang)
{
	snprintf(out, WARM_KEY_LEN, "%s.%s", ws, lang);
}

/* Records reason for key (replacing an older one). Lock held. */
static void warm_note_put(struct warm *w, const char *key, const char *reason)
{
	struct warm_note **pp = &w->notes, *n;

	for (n = w->notes; n; n = n->next)
		if (strcmp(n->key, key) == 0) {
			snprintf(n->reason, sizeof(n->reason), "%s", reason);
			return;
		}
	if (w->n_notes >= WARM_NOTES_MAX) {
		/* Drop the oldest: the list is newest first. */
		while ((*pp)->next)
			pp = &(*pp)->next;
		free(*pp);
		*pp = NULL;
		w->n_notes--;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return;
	snprintf(n->key, sizeof(n->key), "%s", key);
	snprintf(n->reason, sizeof(n->reason), "%s", reason);
	n->next = w->notes;
	w->notes = n;
	w->n_notes++;
}

/* Takes the note of key into reason ("" when none). Lock held. */
static void warm_note_take(struct warm *w, const char *key,
                           char reason[WARM_REASON_LEN])
{
	struct warm_note **pp, *n;

	reason[0] = '\0';
	for (pp = &w->notes; (n = *pp); pp = &n->next)
		if (strcmp(n->key, key) == 0) {
			snprintf(reason, WARM_REASON_LEN, "%s", n->reason);
			*pp = n->next;
			free(n);
			w->n_notes--;
			return;
		}
}

/*
 * Marker files: SANDBOX_ROOT/sessions/<key> holds the boot id of the live
 * session of key, so that after this process ends, by a crash or a clean
 * stop, the next run of that conversation can say its state was lost to a
 * restart. A note not yet told when the daemon stops (idle_expired,
 * evicted, ...) is kept the same way: the boot id, then the reason on a
 * line of its own. With live false the marker goes.
 */
/*
 * Where the markers are: SANDBOX_ROOT/sessions, or, for a replica
 * (MCP_REPLICA_NAME) whose SANDBOX_ROOT other replicas share,
 * SANDBOX_ROOT/sessions-<name>: each replica tells only its own losses.
 */
static void warm_markers_dir(const struct warm *w, char *out, size_t n)
{
	const char *r = w->cfg->replica_name ? w->cfg->replica_name : "";

	snprintf(out, n, "%s/sessions%s%s", w->cfg->sandbox_root,
	         r[0] ? "-" : "", r);
}

static void warm_marker_put(struct warm *w, const char *key, bool live,
                            const char *reason)
{
	char path[PATH_MAX], text[20 + WARM_REASON_LEN];
	int fd, n;

	char dir[PATH_MAX];

	warm_markers_dir(w, dir, sizeof(dir));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, key) >=
	    sizeof(path))
		return;
	if (!live) {
		if (unlink(path) < 0 && errno != ENOENT)
			log_warn("removing %s", path);
		return;
	}
	n = snprintf(text, sizeof(text), "%s%s%s", w->boot, reason ? "\n" : "",
	             reason ? reason : "");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	          0600);
	if (fd < 0 || n < 0 || (size_t)n >= sizeof(text) ||
	    write(fd, text, (size_t)n) != n)
		log_warn("writing %s", path);
	if (fd >= 0)
		close(fd);
}

static void warm_marker(struct warm *w, const char *key, bool live)
{
	warm_marker_put(w, key, live, NULL);
}

/* Whether s is a reason as this file writes them: [a-z_], shorter than
 * WARM_REASON_LEN. */
static bool warm_reason_ok(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz_");

	return n > 0 && n < WARM_REASON_LEN && s[n] == '\0';
}

/*
 * Notes the sessions of earlier boots as ended by a restart, or by the
 * reason their marker kept.
 */
static void warm_markers_load(struct warm *w)
{
	char dir[PATH_MAX], text[20 + WARM_REASON_LEN];
	struct dirent *e;
	DIR *d;

	warm_markers_dir(w, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		log_warn("creating %s", dir);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char *reason;
		int fd;
		ssize_t n = -1;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= WARM_KEY_LEN)
			continue;
		fd = openat(dirfd(d), e->d_name,
		            O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, text, sizeof(text) - 1);
			close(fd);
		}
		text[n > 0 ? n : 0] = '\0';
		reason = strchr(text, '\n');
		if (reason)
			*reason++ = '\0';
		if (reason && warm_reason_ok(reason))
			warm_note_put(w, e->d_name, reason);
		else if (strcmp(text, w->boot) != 0)
			warm_note_put(w, e->d_name, "server_restarted");
		(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	if (w->n_notes)
		log_info("warm sessions: %u ended by the restart; their next "
		         "runs will say so",
		         w->n_notes);
}

/* ---- capacity ---------------------------------------------------------- */

/* MemAvailable of /proc/meminfo in MiB, or -1. */
static long long warm_mem_available_mb(void)
{
	char line[128];
	long long kb = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

/* The warm boxes that count: sessions, pool, and those starting. */
static unsigned warm_count(const struct warm *w)
{
	return w->n_sessions + w->n_pool + w->n_starting;
}

/* How many sessions tenant holds, busy or not. Lock held. */
static unsigned warm_held(const struct warm *w, const char *tenant)
{
	unsigned n = 0;

	for (const struct warm_box *b = w->sessions; b; b = b->next)
		n += strcmp(b->tenant, tenant) == 0;
	return n;
}

/*
 * A tenant's fair share of SANDBOX_WARM_MAX: the maximum divided by the
 * tenants that hold sessions, tenant (who asks for one) included; at
 * least 1. Lock held.
 */
static unsigned warm_share(const struct warm *w, const char *tenant)
{
	unsigned tenants = 1, share;

	for (const struct warm_box *b = w->sessions; b; b = b->next) {
		const struct warm_box *e;

		if (strcmp(b->tenant, tenant) == 0)
			continue;
		/* Counted once: at its first session in the list. */
		for (e = w->sessions; e != b; e = e->next)
			if (strcmp(e->tenant, b->tenant) == 0)
				break;
		tenants += e == b;
	}
	share = w->cfg->warm_max / tenants;
	return share ? share : 1;
}

/* Whether a is a better eviction victim than best: used less recently. */
static bool warm_older(const struct warm_box *a, const struct warm_box *best)
{
	return !best || a->last_used_ms < best->last_used_ms;
}

/*
 * The idle session to evict for a new session of tenant, or NULL. Lock
 * held. Fair shares: a tenant at or over its share (warm_share) gives up
 * its own least recently used idle session, never another tenant's; one
 * under its share takes the least recently used idle session of a tenant
 * over its share, else the least recently used of all. *spared is set
 * when NULL is returned although another tenant had an idle session.
 */
static struct warm_box *warm_lru_idle(struct warm *w, const char *tenant,
                                      bool *spared)
{
	unsigned share = warm_share(w, tenant);
	bool over = warm_held(w, tenant) >= share;
	struct warm_box *b, *own = NULL, *greedy = NULL, *any = NULL;

	for (b = w->sessions; b; b = b->next) {
		if (b->busy)
			continue;
		if (strcmp(b->tenant, tenant) == 0 && warm_older(b, own))
			own = b;
		if (warm_older(b, any))
			any = b;
		if (!over && warm_older(b, greedy) &&
		    warm_held(w, b->tenant) > share)
			greedy = b;
	}
	*spared = over && !own && any;
	if (over)
		return own;
	return greedy ? greedy : any;
}

/* Unlinks b from the session table. Lock held. */
static void warm_unlink(struct warm *w, struct warm_box *b)
{
	struct warm_box **pp;

	for (pp = &w->sessions; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			w->n_sessions--;
			return;
		}
	for (pp = &w->pool; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			w->n_pool--;
			return;
		}
}

/*
 * Ends a session (unlinked already): notes why for its next run, removes
 * its marker, and stops its box. Without the lock.
 */
static void warm_end(struct warm *w, struct warm_box *b, const char *reason)
{
	if (b->key[0]) {
		pthread_mutex_lock(&w->lock);
		if (reason)
			warm_note_put(w, b->key, reason);
		pthread_mutex_unlock(&w->lock);
		warm_marker(w, b->key, false);
		log_info("warm session %.12s/%s ended (%s) after %u run(s)",
		         b->key, b->lang, reason ? reason : "-", b->calls);
	}
	warm_box_destroy(&w->env, b);
}

/*
 * Makes room for one more warm box: evicts pool boxes, then idle sessions
 * (warm_lru_idle: the tenant's own first when it holds its fair share)
 * while the count or the memory budget would be passed, or the host is
 * short of memory, when evict is true (a box for a conversation of tenant;
 * the pool never pushes a session out). 0 with a slot reserved
 * (n_starting), or -EAGAIN with why in reason. Takes the lock.
 */
static int warm_reserve(struct warm *w, unsigned mem_mb, bool evict,
                        const char *tenant, char reason[WARM_REASON_LEN])
{
	const struct config *cfg = w->cfg;

	for (;;) {
		struct warm_box *victim;
		unsigned long long used;
		long long avail = warm_mem_available_mb();
		bool full, spared = false;

		pthread_mutex_lock(&w->lock);
		used = (unsigned long long)warm_count(w) * cfg->memory_mb;
		full = warm_count(w) >= cfg->warm_max ||
		       used + mem_mb > cfg->warm_memory_mb ||
		       (avail >= 0 &&
		        avail < (long long)mem_mb + WARM_MEM_RESERVE_MB);
		if (!full) {
			w->n_starting++;
			pthread_mutex_unlock(&w->lock);
			return 0;
		}
		/* A pool box costs a future first run its speed; an idle
		 * session costs its conversation the state: pool first. */
		victim = !evict ? NULL
		         : w->pool
		             ? w->pool
		             : warm_lru_idle(w, tenant ? tenant : "", &spared);
		if (!victim) {
			snprintf(reason, WARM_REASON_LEN, "%s",
			         spared ? "tenant_share"
			         : warm_count(w) >= cfg->warm_max ? "capacity"
			                                          : "memory");
			pthread_mutex_unlock(&w->lock);
			return -EAGAIN;
		}
		warm_unlink(w, victim);
		if (victim->key[0])
			w->evicted++;
		pthread_mutex_unlock(&w->lock);
		warm_end(w, victim, "evicted");
	}
}

static void warm_unreserve(struct warm *w)
{
	pthread_mutex_lock(&w->lock);
	w->n_starting--;
	pthread_mutex_unlock(&w->lock);
}

/* ---- CPU accounting ---------------------------------------------------- */

/*
 * A box's CPU time so far in ms, from the engine host's cgroup (code in
 * the box cannot change it), or -1 when the backend cannot tell.
 */
static long long warm_cpu_now(struct warm_box *b)
{
	struct box_usage u;
	char err[256];

	if (!b->box || box_usage(b->box, &u, err, sizeof(err)) < 0)
		return -1;
	return u.cpu_ms;
}

/*
 * A new session's box becomes tenant's: its CPU time from now on is
 * charged to tenant (what it used before, a pool box's start, is not).
 * Before the box is in the table.
 */
static void warm_adopt(struct warm_box *b, const char *tenant)
{
	snprintf(b->tenant, sizeof(b->tenant), "%s", tenant ? tenant : "");
	b->cpu_base_ms = warm_cpu_now(b);
	b->bg_cpu_ms = 0;
	if (b->cpu_base_ms < 0)
		log_debug("warm box %s: its CPU time cannot be read on the "
		          "host; runs are charged what the agent measured",
		          b->box ? b->box->id : "-");
}

/*
 * After a run of busy box b: what to charge the tenant (the box's whole
 * CPU time since the last charge, what it used between runs included) and
 * what the session did besides the run, into res.
 */
static void warm_account_run(struct warm *w, struct warm_box *b,
                             struct runner_result *res)
{
	long long now = warm_cpu_now(b), between;

	pthread_mutex_lock(&w->lock);
	res->session.background_cpu_ms = b->bg_cpu_ms;
	b->bg_cpu_ms = 0;
	if (now >= 0 && b->cpu_base_ms >= 0) {
		res->cpu_charge_known = true;
		res->cpu_charge_ms =
		    now > b->cpu_base_ms ? now - b->cpu_base_ms : 0;
		b->cpu_base_ms = now;
		/* The agent's figure is the run's own; the rest was not. */
		between =
		    res->cpu_charge_ms - (res->cpu_ms > 0 ? res->cpu_ms : 0);
		if (between > 0)
			res->session.background_cpu_ms += between;
	} else if (b->cpu_base_ms < 0) {
		res->session.background_cpu_ms = -1;
	}
	pthread_mutex_unlock(&w->lock);
}

/* One idle box's CPU charged by the tick. */
struct warm_charge {
	struct warm_box *b; /* compared only, never followed unlocked */
	char id[17];
	char tenant[WARM_TENANT_LEN];
	long long ms;
};

/*
 * Takes the ended session c names out of the table, if it is still there
 * and idle, or NULL. Lock held.
 */
static struct warm_box *warm_charged_take(struct warm *w,
                                          const struct warm_charge *c)
{
	for (struct warm_box *b = w->sessions; b; b = b->next)
		if (b == c->b && strcmp(b->id, c->id) == 0 && !b->busy) {
			warm_unlink(w, b);
			return b;
		}
	return NULL;
}

/*
 * Charges idle sessions' CPU time (threads left running between calls) to
 * their tenants, and ends the sessions that kept using CPU once their
 * tenant is over its budget: the next run of the conversation says so
 * (cpu_budget). Without a budget only the figures are kept.
 */
static void warm_charge_idle(struct warm *w)
{
	struct warm_charge *c;
	size_t n = 0, cap;
	long long now_s = (long long)time(NULL);

	pthread_mutex_lock(&w->lock);
	/* Every session each tick: a cap would let some never be charged. */
	cap = w->n_sessions;
	c = cap ? calloc(cap, sizeof(*c)) : NULL;
	for (struct warm_box *b = c ? w->sessions : NULL; b && n < cap;
	     b = b->next) {
		long long now;

		if (b->busy || b->dead || b->cpu_base_ms < 0)
			continue;
		now = warm_cpu_now(b);
		if (now < b->cpu_base_ms + WARM_IDLE_CHARGE_MS)
			continue;
		c[n].b = b;
		snprintf(c[n].id, sizeof(c[n].id), "%s", b->id);
		snprintf(c[n].tenant, sizeof(c[n].tenant), "%s", b->tenant);
		c[n].ms = now - b->cpu_base_ms;
		b->cpu_base_ms = now;
		b->bg_cpu_ms += c[n].ms;
		w->idle_cpu_ms += (unsigned long long)c[n].ms;
		n++;
	}
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < n && w->budget; i++) {
		struct budget_state bs;
		struct warm_box *b;
		int rc = budget_add(w->budget, c[i].tenant, c[i].ms, 0, now_s);

		if (rc < 0) {
			log_warnx("budget: cannot charge %lld ms of a warm "
			          "box's idle CPU to a tenant (%s)",
			          c[i].ms, strerror(-rc));
			continue;
		}
		log_debug("budget: charged %lld ms of idle CPU of warm box %s "
		          "to tenant %.64s",
		          c[i].ms, c[i].id, c[i].tenant);
		if (!budget_limited(w->budget) ||
		    budget_check(w->budget, c[i].tenant, now_s, &bs) != -EDQUOT)
			continue;
		pthread_mutex_lock(&w->lock);
		b = warm_charged_take(w, &c[i]);
		if (b)
			w->cpu_ended++;
		pthread_mutex_unlock(&w->lock);
		if (!b)
			continue;
		log_info("warm session %.12s/%s kept using CPU between runs "
		         "(%lld ms since its last charge) while its tenant is "
		         "over its CPU budget; ending it",
		         b->key, b->lang, c[i].ms);
		warm_end(w, b, "cpu_budget");
	}
	free(c);
}

void warm_set_budget(struct warm *w, struct budget *b)
{
	w->budget = b;
}

/* ---- taking a session for a run ---------------------------------------- */

/* Puts ready box b into the pool. Lock held. */
static void warm_pool_add(struct warm *w, struct warm_box *b)
{
	b->next = w->pool;
	w->pool = b;
	w->n_pool++;
}

/* The pool box for img, taken out of the pool, or NULL. Lock held. */
static struct warm_box *warm_pool_take(struct warm *w,
                                       const struct catalog_image *img)
{
	struct warm_box **pp, *b;

	for (pp = &w->pool; (b = *pp); pp = &b->next)
		if (b->ready && strcmp(b->image_id, img->image_id) == 0) {
			*pp = b->next;
			w->n_pool--;
			return b;
		}
	return NULL;
}

/*
 * Finds the session of key for a run, or decides it must be replaced
 * (image updated, asked for, dead). Returns the session (busy now) or NULL
 * with *old set to a session to end and reason why.
 */
static struct warm_box *warm_find(struct warm *w, const char *key,
                                  const struct catalog_image *img, bool fresh,
                                  struct warm_box **old,
                                  char reason[WARM_REASON_LEN])
{
	struct warm_box *b;

	*old = NULL;
	reason[0] = '\0';
	for (b = w->sessions; b; b = b->next)
		if (strcmp(b->key, key) == 0)
			break;
	if (!b)
		return NULL;
	if (b->dead)
		snprintf(reason, WARM_REASON_LEN, "%s", b->dead_reason);
	else if (strcmp(b->image_id, img->image_id) != 0)
		snprintf(reason, WARM_REASON_LEN, "image_updated");
	else if (fresh)
		snprintf(reason, WARM_REASON_LEN, "requested");
	if (reason[0]) {
		warm_unlink(w, b);
		*old = b;
		return NULL;
	}
	b->busy = true;
	w->n_busy++;
	return b;
}

/* Gives a session back after a run (or ends it when it died). */
static void warm_put(struct warm *w, struct warm_box *b)
{
	pthread_mutex_lock(&w->lock);
	b->busy = false;
	w->n_busy--;
	b->last_used_ms = mono_ms();
	if (b->dead) {
		warm_unlink(w, b);
		pthread_mutex_unlock(&w->lock);
		warm_end(w, b, b->dead_reason);
		return;
	}
	pthread_mutex_unlock(&w->lock);
}

/* Ends a busy session without a note: the caller reports why itself. */
static void warm_drop(struct warm *w, struct warm_box *b)
{
	pthread_mutex_lock(&w->lock);
	b->busy = false;
	w->n_busy--;
	warm_unlink(w, b);
	pthread_mutex_unlock(&w->lock);
	warm_end(w, b, NULL);
}

/* Clears what a run that failed before the code reached it put into res. */
static void warm_result_clear(struct runner_result *res)
{
	runner_result_finish(res);
	res->message[0] = '\0';
	res->status = RUNNER_ERROR;
	res->exit_code = -1;
	res->session.lost = false;
	res->session.lost_reason[0] = '\0';
	res->session.from_pool = false;
}

/*
 * Ends b, whose run failed before the code reached it, and clears what that
 * attempt put into res, for another box to run the code.
 */
static void warm_retry_reset(struct warm *w, struct warm_box *b,
                             struct runner_result *res)
{
	warm_drop(w, b);
	warm_result_clear(res);
}

/*
 * A new session for key: a claimed pool box, else a fresh one. Returns it
 * (busy, in the table) or NULL with res->session.reason saying why not.
 */
static struct warm_box *warm_new(struct warm *w,
                                 const struct runner_request *req,
                                 const struct catalog_image *img,
                                 const char *key, struct runner_result *res,
                                 int *engine_rc)
{
	struct warm_box *b;
	char msg[512] = "";
	int rc;

	*engine_rc = 0;
	pthread_mutex_lock(&w->lock);
	b = warm_pool_take(w, img);
	if (b)
		w->n_starting++; /* counted while it is claimed */
	pthread_mutex_unlock(&w->lock);
	if (b) {
		rc = warm_box_claim(&w->env, b, req, key, msg, sizeof(msg));
		if (rc < 0) {
			log_warnx("claiming a pool box for %.12s: %s", key,
			          msg);
			warm_box_destroy(&w->env, b);
			warm_unreserve(w);
			b = NULL;
		}
	}
	if (!b) {
		rc = warm_reserve(w, w->cfg->memory_mb, true, req->tenant,
		                  res->session.reason);
		if (rc < 0)
			return NULL;
		rc = warm_box_start(&w->env, img, req, key, &b, msg,
		                    sizeof(msg));
		if (rc < 0) {
			warm_unreserve(w);
			log_warnx("starting a warm box for %s: %s",
			          img->language, msg);
			*engine_rc = rc;
			snprintf(res->session.reason,
			         sizeof(res->session.reason), "start_failed");
			snprintf(res->message, sizeof(res->message), "%s", msg);
			return NULL;
		}
	} else {
		res->session.from_pool = true;
	}
	warm_adopt(b, req->tenant);
	/* Durable sessions: a new box takes up the conversation's saved
	 * state, unless the run asked for a fresh one. */
	b->restore_next = b->kernel && w->cfg->state_save && !req->session_new;
	warm_marker(w, key, true);
	pthread_mutex_lock(&w->lock);
	w->n_starting--;
	b->busy = true;
	w->n_busy++;
	b->next = w->sessions;
	w->sessions = b;
	w->n_sessions++;
	w->started++;
	pthread_mutex_unlock(&w->lock);
	return b;
}

/*
 * session "new": the conversation's saved state goes too (durable
 * sessions), so that no later box brings it back.
 */
static void warm_state_forget(const struct runner_request *req,
                              const struct catalog_image *img)
{
	int rc =
	    warm_state_drop(workspace_dirfd(req->workspace), img->language);

	if (rc < 0)
		log_warnx("cannot drop the saved %s state of a conversation "
		          "for session \"new\": %s",
		          img->language, strerror(-rc));
}

/* Whether session b belongs to the workspace named ws. */
static bool warm_of(const struct warm_box *b, const char *ws)
{
	size_t n = strlen(ws);

	return strncmp(b->key, ws, n) == 0 && b->key[n] == '.';
}

/*
 * The conversation of workspace ws ran on another replica since this one
 * last held it (lease.h): its sessions here hold an older state. They are
 * marked dead, so warm_find ends them, and the notes of the workspace go
 * (what the other replica did supersedes them). Lock held.
 */
static void warm_stale(struct warm *w, const char *ws, const char *key,
                       char why[WARM_REASON_LEN])
{
	for (struct warm_box *b = w->sessions; b; b = b->next)
		if (warm_of(b, ws) && !b->busy && !b->dead) {
			b->dead = true;
			snprintf(b->dead_reason, sizeof(b->dead_reason),
			         "moved");
		}
	warm_note_take(w, key, why);
	why[0] = '\0';
}

/* The run number the kernel saves this call's state under, or 0. */
static unsigned long long warm_save_run(const struct runner_result *res)
{
	cJSON *st = res->state_json ? cJSON_Parse(res->state_json) : NULL;
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(st, "run");
	unsigned long long n = 0;

	if (cJSON_IsNumber(run) && run->valuedouble >= 1 &&
	    run->valuedouble < 1e15)
		n = (unsigned long long)run->valuedouble;
	cJSON_Delete(st);
	return n;
}

int warm_run_once(struct warm *w, const struct runner_request *req,
                  const struct catalog_image *img, struct runner_result *res)
{
	const struct config *cfg = w->cfg;
	unsigned mem = req->memory_mb ? req->memory_mb : cfg->memory_mb;
	double cpus = req->cpus > 0 ? req->cpus : cfg->cpus;
	char key[WARM_KEY_LEN], msg[512] = "";
	struct warm_box *b;
	int rc = 0;

	/* A check has no /data; any other run has its conversation's. */
	if (!req->check && (!req->workspace || !req->workspace_name))
		return -EAGAIN;
	pthread_mutex_lock(&w->lock);
	b = w->stopping ? NULL : warm_pool_take(w, img);
	/* The backend cannot change its limits: it stays in the pool. */
	if (b && (mem != cfg->memory_mb || cpus != cfg->cpus) &&
	    !b->box->impl->box_limits) {
		warm_pool_add(w, b);
		b = NULL;
	}
	if (b)
		w->n_starting++; /* counted while it is claimed */
	pthread_mutex_unlock(&w->lock);
	if (!b)
		return -EAGAIN;
	/* A key of its own: the conversation's session stays as it is. */
	snprintf(key, sizeof(key), "%s.%s",
	         req->check ? "check" : req->workspace_name, "once");
	/*
	 * The claim ends a kernel (the program runs as a process, as in a
	 * container of its own, and the kernel's memory is freed before a
	 * lower limit applies).
	 */
	b->once = true;
	rc = warm_box_claim(&w->env, b, req, key, msg, sizeof(msg));
	if (rc == 0 && (mem != cfg->memory_mb || cpus != cfg->cpus))
		rc = box_limits(b->box, mem, cpus, msg, sizeof(msg));
	if (rc < 0) {
		log_info("a one-off %s run could not use a pool box (%s); it "
		         "starts a box of its own",
		         img->language, msg);
		warm_box_destroy(&w->env, b);
		warm_unreserve(w);
		return -EAGAIN;
	}
	b->restore_next = false;
	warm_adopt(b, req->tenant);
	res->session.from_pool = true;
	rc = warm_exec_run(&w->env, b, req, img, res);
	if (rc == 0)
		warm_account_run(w, b, res);
	else
		warm_result_clear(res); /* nothing ran: a box of its own */
	log_debug("one-off %s %s in pool box %s (%u MB, %.2f CPUs)",
	          img->language, req->check ? "check" : "run", b->id, mem,
	          cpus);
	/* Idle now (the agent ended what the code started): ended later. */
	pthread_mutex_lock(&w->lock);
	b->next = w->ending;
	w->ending = b;
	pthread_mutex_unlock(&w->lock);
	if (rc != 0)
		return -EAGAIN;
	/* A one-off run, whatever box it had: no session to tell of. */
	snprintf(res->session.state, sizeof(res->session.state), "none");
	res->session.warm = false;
	res->session.stateful = false;
	res->session.calls = 0;
	return 0;
}

int warm_run(struct warm *w, const struct runner_request *req,
             const struct catalog_image *img, struct runner_result *res)
{
	char key[WARM_KEY_LEN], why[WARM_REASON_LEN] = "";
	struct warm_box *b, *old = NULL;

	if (!req->workspace || !req->workspace_name) {
		snprintf(res->session.reason, sizeof(res->session.reason),
		         "no_workspace");
		return -EAGAIN;
	}
	warm_key(key, req->workspace_name, img->language);
	pthread_mutex_lock(&w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		snprintf(res->session.reason, sizeof(res->session.reason),
		         "shutting_down");
		return -EAGAIN;
	}
	if (req->moved)
		warm_stale(w, req->workspace_name, key, why);
	b = warm_find(w, key, img, req->session_new, &old, why);
	if (!b && !old)
		warm_note_take(w, key, why);
	if (req->moved)
		snprintf(why, sizeof(why), "%s", req->moved);
	pthread_mutex_unlock(&w->lock);
	if (old)
		warm_end(w, old, NULL);
	if (req->session_new)
		warm_state_forget(req, img);
	if (b && !warm_box_alive(&w->env, b)) {
		/* It died while idle (out of memory, killed): say so. */
		snprintf(why, sizeof(why), "%s", b->dead_reason);
		warm_drop(w, b);
		b = NULL;
	}
	if (b) {
		pthread_mutex_lock(&w->lock);
		w->reused++;
		pthread_mutex_unlock(&w->lock);
	}

	if (b) {
		snprintf(res->session.state, sizeof(res->session.state),
		         "continued");
		if (warm_exec_run(&w->env, b, req, img, res) == 0)
			goto done;
		/* Dead before the code reached it: a fresh box. */
		snprintf(why, sizeof(why), "%s", b->dead_reason);
		warm_retry_reset(w, b, res);
		b = NULL;
	}
	/* A fork's first run: its box loads the copied state (if any). */
	if (req->forked && !why[0])
		snprintf(why, sizeof(why), "forked");
	for (int tries = 0;; tries++) {
		int erc;

		b = warm_new(w, req, img, key, res, &erc);
		if (!b && (erc == -ECONNREFUSED || erc == -ETIMEDOUT)) {
			/*
			 * The engine is away: a one-off box would fail the
			 * same way after as long a wait. Say so now.
			 */
			if (why[0]) {
				pthread_mutex_lock(&w->lock);
				warm_note_put(w, key, why);
				pthread_mutex_unlock(&w->lock);
			}
			res->status = RUNNER_ERROR;
			snprintf(res->session.state, sizeof(res->session.state),
			         "none");
			return 0;
		}
		if (!b) {
			if (why[0]) {
				/* Keep it for the run that gets a session. */
				pthread_mutex_lock(&w->lock);
				warm_note_put(w, key, why);
				pthread_mutex_unlock(&w->lock);
			}
			return -EAGAIN;
		}
		snprintf(res->session.state, sizeof(res->session.state), "%s",
		         why[0] ? "restarted" : "new");
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         why);
		if (warm_exec_run(&w->env, b, req, img, res) == 0)
			break;
		if (tries > 0) {
			log_warnx("a second fresh warm box for %.12s (%s) "
			          "failed before its first run (%s)",
			          key, img->language, b->dead_reason);
			break;
		}
		/*
		 * A box that was broken before the code reached it (a
		 * damaged pool box, say) is never the conversation's
		 * problem: another one, once. The conversation lost nothing,
		 * so why stays what it was.
		 */
		log_warnx("a fresh warm box for %.12s (%s) failed before its "
		          "first run (%s); trying another",
		          key, img->language, b->dead_reason);
		warm_retry_reset(w, b, res);
	}
done:
	/* Nothing was lost by a fork: without a state to load, it is new. */
	if (strcmp(res->session.reason, "forked") == 0 &&
	    strcmp(res->session.state, "restarted") == 0)
		snprintf(res->session.state, sizeof(res->session.state), "new");
	warm_account_run(w, b, res);
	b->save_run = warm_save_run(res);
	res->session.calls = b->calls;
	res->session.idle_expires_at = time(NULL) + (time_t)w->cfg->warm_idle_s;
	res->session.expires_at = b->expires_at;
	warm_put(w, b);
	return 0;
}

/* ---- housekeeping ------------------------------------------------------ */

/* Takes out the first idle session past its time, with why, or NULL. */
static struct warm_box *warm_expired(struct warm *w, const char **why)
{
	long long now = mono_ms();
	time_t wall = time(NULL);
	struct warm_box *b;

	for (b = w->sessions; b; b = b->next) {
		if (b->busy)
			continue;
		if (wall >= b->expires_at)
			*why = "max_lifetime";
		else if (now - b->last_used_ms >=
		         (long long)w->cfg->warm_idle_s * 1000)
			*why = "idle_expired";
		else
			continue;
		warm_unlink(w, b);
		w->expired++;
		return b;
	}
	for (b = w->pool; b; b = b->next)
		if (wall >= b->expires_at) {
			*why = NULL;
			warm_unlink(w, b);
			return b;
		}
	return NULL;
}

/*
 * Takes out the first idle session or pool box whose stream ended or broke
 * since it was last used, or whose host side is damaged (-ESTALE), or
 * NULL. Only reads what the boxes sent and looks at two directories (no
 * engine call, no wait), so it runs under the lock; a box that died with
 * the engine's connection, or whose agent ended, then neither holds a
 * place until its idle expiry nor is handed to a run. Lock held.
 */
static struct warm_box *warm_dead_idle(struct warm *w, int *rc)
{
	struct warm_box *lists[2] = {w->sessions, w->pool};
	char what[PATH_MAX + 64];

	for (size_t i = 0; i < 2; i++)
		for (struct warm_box *b = lists[i]; b; b = b->next) {
			bool was_ready = b->ready;

			if (b->busy)
				continue;
			*rc = warm_box_poll(b);
			if (*rc == 0 && !b->key[0] && !was_ready && b->ready) {
				b->ready_ms = mono_ms() - b->started_ms;
				log_debug(
				    "warm pool: %s box %s ready in %lld ms",
				    b->lang, b->box->id, b->ready_ms);
			}
			if (*rc == 0 &&
			    !warm_box_intact(b, what, sizeof(what))) {
				log_warnx("warm %s box %s (%s) is damaged: %s; "
				          "%s",
				          b->key[0] ? "session" : "pool",
				          b->box->id, b->lang, what,
				          b->key[0] ? "ending its session"
				                    : "replacing it");
				snprintf(b->dead_detail, sizeof(b->dead_detail),
				         "%.199s", what);
				*rc = -ESTALE;
			}
			if (*rc == 0 && !b->key[0] && !b->ready &&
			    mono_ms() >= b->ready_by) {
				log_warnx("warm pool: %s box %s was not ready "
				          "in %lld s; replacing it",
				          b->lang, b->box->id,
				          (mono_ms() - b->started_ms) / 1000);
				*rc = -ETIMEDOUT;
			}
			if (*rc == 0)
				continue;
			warm_unlink(w, b);
			return b;
		}
	return NULL;
}

/*
 * Takes out a pool box whose image is no longer the catalog's for its
 * language (the runner image was rebuilt), or NULL. Lock held.
 */
static struct warm_box *warm_pool_stale(struct warm *w,
                                        const struct catalog *cat)
{
	for (struct warm_box *b = w->pool; b; b = b->next) {
		const struct catalog_image *img = catalog_find(cat, b->lang);

		if (!img || strcmp(img->image_id, b->image_id) != 0) {
			warm_unlink(w, b);
			return b;
		}
	}
	return NULL;
}

/* Whether the pool has fewer boxes of img than it keeps. Lock held. */
static bool warm_pool_lacks(const struct warm *w,
                            const struct catalog_image *img)
{
	unsigned have = 0;

	for (const struct warm_box *b = w->pool; b; b = b->next)
		if (strcmp(b->image_id, img->image_id) == 0)
			have++;
	return have < w->cfg->pool_size;
}

/*
 * The language of cat the pool is short of, or NULL: in the order
 * SANDBOX_POOL_LANGUAGES names them, "*" standing for the others in the
 * catalog's order, so the languages named first are ready first after a
 * start. Lock held.
 */
static const struct catalog_image *warm_pool_short(struct warm *w,
                                                   const struct catalog *cat)
{
	for (char **p = w->cfg->pool_languages; p && *p; p++)
		for (size_t i = 0; i < cat->n; i++) {
			const struct catalog_image *img = &cat->items[i];

			if ((strcmp(*p, "*") == 0 ||
			     strcmp(*p, img->language) == 0) &&
			    warm_pool_lacks(w, img))
				return img;
		}
	return NULL;
}

/* Ends the boxes of one-off runs (warm_run_once) that are over. */
static void warm_end_once(struct warm *w)
{
	struct warm_box *b, *next;

	pthread_mutex_lock(&w->lock);
	b = w->ending;
	w->ending = NULL;
	pthread_mutex_unlock(&w->lock);
	for (; b; b = next) {
		next = b->next;
		warm_box_destroy(&w->env, b);
		warm_unreserve(w);
	}
}

void warm_tick(struct warm *w, const struct catalog *cat)
{
	struct warm_box *b;
	const struct catalog_image *img;
	const char *why = NULL;
	char reason[WARM_REASON_LEN], msg[512];

	warm_end_once(w);
	warm_charge_idle(w);
	for (;;) {
		pthread_mutex_lock(&w->lock);
		b = warm_expired(w, &why);
		pthread_mutex_unlock(&w->lock);
		if (!b)
			break;
		warm_end(w, b, why);
	}
	for (;;) {
		int rc = 0;

		pthread_mutex_lock(&w->lock);
		b = warm_dead_idle(w, &rc);
		pthread_mutex_unlock(&w->lock);
		if (!b)
			break;
		if (rc == -ESTALE) {
			warm_io_kill(b, "sandbox_damaged");
		} else if (rc != -ETIMEDOUT) {
			warm_box_ended(b, rc);
			log_info("warm box %s (%s) died while idle (%s)",
			         b->box->id, b->key[0] ? "session" : "pool",
			         b->dead_reason);
		}
		warm_end(w, b, b->key[0] ? b->dead_reason : NULL);
	}
	if (!w->pool_enabled || !w->cfg->pool_size || !cat)
		return;
	for (;;) {
		pthread_mutex_lock(&w->lock);
		b = warm_pool_stale(w, cat);
		pthread_mutex_unlock(&w->lock);
		if (!b)
			break;
		log_info("warm pool: a %s box of an older image is replaced",
		         b->lang);
		warm_end(w, b, NULL);
	}
	/*
	 * One pool box per tick: a start takes a while and a core. After a
	 * failed start (the engine away, a broken image) the next waits
	 * longer, up to a minute, so an outage is not retried every second.
	 */
	if (mono_ms() < w->pool_retry_ms)
		return;
	pthread_mutex_lock(&w->lock);
	img = w->stopping ? NULL : warm_pool_short(w, cat);
	pthread_mutex_unlock(&w->lock);
	if (!img || warm_reserve(w, w->cfg->memory_mb, false, NULL, reason) < 0)
		return;
	if (warm_box_start(&w->env, img, NULL, NULL, &b, msg, sizeof(msg)) <
	    0) {
		unsigned n = w->pool_failures < 6 ? w->pool_failures : 6;

		warm_unreserve(w);
		w->pool_failures++;
		w->pool_retry_ms = mono_ms() + (1000LL << n);
		log_warnx("warm pool: starting a %s box: %s (next try in %lld "
		          "s)",
		          img->language, msg, (1000LL << n) / 1000);
		return;
	}
	w->pool_failures = 0;
	pthread_mutex_lock(&w->lock);
	w->n_starting--;
	warm_pool_add(w, b);
	pthread_mutex_unlock(&w->lock);
	log_debug("warm pool: %s box %s started", img->language, b->box->id);
}

/* ---- create, destroy, stats -------------------------------------------- */

int warm_create(const struct config *cfg, struct backend *be, const char *boot,
                struct warm **out, char *err, size_t errlen)
{
	struct warm *w = calloc(1, sizeof(*w));
	char why[256] = "";
	int rc;

	*out = NULL;
	if (!w)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	w->cfg = cfg;
	w->be = be;
	snprintf(w->boot, sizeof(w->boot), "%s", boot);
	pthread_mutex_init(&w->lock, NULL);
	rc = warm_context_init(&w->env, cfg, be, boot, err, errlen);
	if (rc < 0) {
		warm_destroy(w);
		return rc;
	}
	warm_markers_load(w);
	w->pool_enabled = cfg->pool_size > 0 &&
	                  warm_pool_prepare(&w->env, why, sizeof(why)) == 0;
	if (cfg->pool_size && !w->pool_enabled)
		log_warnx("warm pool disabled: %s (first runs of a "
		          "conversation start a box instead)",
		          why);
	log_info("warm sessions: at most %u boxes and %u MiB, idle %u s, "
	         "lifetime %u s, pool %u per language%s",
	         cfg->warm_max, cfg->warm_memory_mb, cfg->warm_idle_s,
	         cfg->warm_max_s, w->pool_enabled ? cfg->pool_size : 0,
	         w->pool_enabled ? "" : " (off)");
	*out = w;
	return 0;
}

void warm_set_egress(struct warm *w, struct egress *eg)
{
	w->env.egress = eg;
}

void warm_destroy(struct warm *w)
{
	struct warm_box *b;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_mutex_unlock(&w->lock);
	warm_end_once(w);
	for (;;) {
		pthread_mutex_lock(&w->lock);
		b = w->sessions ? w->sessions : w->pool;
		if (b)
			warm_unlink(w, b);
		pthread_mutex_unlock(&w->lock);
		if (!b)
			break;
		/*
		 * The state is lost all the same: the marker stays, so that
		 * the next boot tells the conversation server_restarted.
		 */
		if (b->key[0])
			log_info(
			    "warm session %.12s/%s ended by the stop after "
			    "%u run(s)",
			    b->key, b->lang, b->calls);
		warm_box_destroy(&w->env, b);
	}
	/* Notes not told yet are told by the next boot. */
	while (w->notes) {
		struct warm_note *n = w->notes;

		w->notes = n->next;
		warm_marker_put(w, n->key, true, n->reason);
		free(n);
	}
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* ---- leases between replicas ------------------------------------------ */

int warm_holds(struct warm *w, const char *ws)
{
	int held = 0;

	pthread_mutex_lock(&w->lock);
	for (struct warm_box *b = w->sessions; b && held < 2; b = b->next)
		if (warm_of(b, ws))
			held = b->busy ? 2 : 1;
	pthread_mutex_unlock(&w->lock);
	return held;
}

/*
 * Whether b's state after its last call is saved: the save of that run is
 * there, or, when the run is not known (a kernel without durable state, a
 * box that runs no kernel), the box was idle long enough for a save to
 * begin and none is being written.
 */
static bool warm_saved(const struct warm_box *b)
{
	int fd = b->hold ? workspace_dirfd(b->hold) : -1;

	if (mono_ms() - b->last_used_ms < WARM_HAND_OFF_SETTLE_MS)
		return false;
	if (!b->kernel || fd < 0)
		return true;
	if (b->save_run)
		return warm_state_saved(fd, b->lang, b->save_run);
	return !warm_state_saving(fd, b->lang);
}

/*
 * The first session of ws when its last save is written: 0 with *out
 * unlinked (or NULL: none left), -EAGAIN not yet, -EBUSY busy. Lock held.
 */
static int warm_settled(struct warm *w, const char *ws, bool late,
                        struct warm_box **out)
{
	struct warm_box *b;

	*out = NULL;
	for (b = w->sessions; b; b = b->next)
		if (warm_of(b, ws))
			break;
	if (!b)
		return 0;
	if (b->busy)
		return -EBUSY;
	if (!late && !warm_saved(b))
		return -EAGAIN;
	warm_unlink(w, b);
	*out = b;
	return 0;
}

int warm_hand_off(struct warm *w, const char *ws)
{
	long long until = mono_ms() + WARM_HAND_OFF_WAIT_MS;
	struct warm_box *b;
	int rc;

	for (;;) {
		pthread_mutex_lock(&w->lock);
		rc = warm_settled(w, ws, mono_ms() > until, &b);
		pthread_mutex_unlock(&w->lock);
		if (rc == -EAGAIN) {
			usleep(50 * 1000);
			continue;
		}
		if (rc < 0 || !b)
			return rc;
		/* No note, no marker: the other replica tells what moved. */
		warm_end(w, b, NULL);
	}
}

void warm_stats(struct warm *w, struct warm_stats *out)
{
	pthread_mutex_lock(&w->lock);
	out->sessions = w->n_sessions;
	out->busy = w->n_busy;
	out->pool = 0;
	for (const struct warm_box *b = w->pool; b; b = b->next)
		out->pool += b->ready;
	out->pool_starting = w->n_pool - out->pool;
	out->max = w->cfg->warm_max;
	out->memory_mb = (unsigned long long)warm_count(w) * w->cfg->memory_mb;
	out->memory_budget_mb = w->cfg->warm_memory_mb;
	out->started = w->started;
	out->reused = w->reused;
	out->evicted = w->evicted;
	out->expired = w->expired;
	out->idle_cpu_ms = w->idle_cpu_ms;
	out->cpu_ended = w->cpu_ended;
	out->pool_enabled = w->pool_enabled;
	pthread_mutex_unlock(&w->lock);
}

bool warm_health(void *arg, cJSON *health)
{
	struct warm_stats s;
	cJSON *o = cJSON_AddObjectToObject(health, "warm");

	warm_stats(arg, &s);
	if (!o)
		return true;
	cJSON_AddNumberToObject(o, "sessions", s.sessions);
	cJSON_AddNumberToObject(o, "busy", s.busy);
	cJSON_AddNumberToObject(o, "pool", s.pool);
	cJSON_AddNumberToObject(o, "pool_starting", s.pool_starting);
	cJSON_AddBoolToObject(o, "pool_enabled", s.pool_enabled);
	cJSON_AddNumberToObject(o, "max", s.max);
	cJSON_AddNumberToObject(o, "memory_mb", (double)s.memory_mb);
	cJSON_AddNumberToObject(o, "memory_budget_mb",
	                        (double)s.memory_budget_mb);
	cJSON_AddNumberToObject(o, "started", (double)s.started);
	cJSON_AddNumberToObject(o, "reused", (double)s.reused);
	cJSON_AddNumberToObject(o, "evicted", (double)s.evicted);
	cJSON_AddNumberToObject(o, "expired", (double)s.expired);
	cJSON_AddNumberToObject(o, "idle_cpu_ms", (double)s.idle_cpu_ms);
	cJSON_AddNumberToObject(o, "cpu_budget_ended", (double)s.cpu_ended);
	return true;
}
