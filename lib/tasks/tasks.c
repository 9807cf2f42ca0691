/* SPDX-License-Identifier: MIT */
/*
 * tasks: task records (task_record.c) behind a backend interface, and the
 * memory backend (the store's is tasks_db.c).
 * The module owns ids (random, unguessable), the rules (per-tenant cap,
 * result size, retention, what a restart does to a running task) and the
 * mutex; a backend only stores and finds. Thread-safety: one mutex around
 * every backend call.
 */
#include "tasks/tasks.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "tasks/tasks_backend.h"
#include "tasks/tasks_db.h"
#include "util/hex.h"
#include "util/log.h"

#define POLL_MS 1000

struct tasks {
	pthread_mutex_t lock;
	const struct config *cfg;
	const struct tasks_backend *be;
	void *bd; /* the backend's data */
};

long long tasks_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* the memory backend */

struct mem_task {
	struct mem_task *next;
	struct task_record r;
	char *tenant;
};

struct mem {
	struct mem_task *head;
};

static struct mem_task *mem_find(struct mem *m, const char *id)
{
	for (struct mem_task *t = m->head; t; t = t->next) {
		if (strcmp(t->r.id, id) == 0)
			return t;
	}
	return NULL;
}

static void mem_free(struct mem_task *t)
{
	task_record_finish(&t->r);
	free(t->tenant);
	free(t);
}

static char *dup_or_null(const char *s, int *r)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*r = -ENOMEM;
	return d;
}

static int mem_insert(void *bd, const struct task_record *rec,
                      const char *tenant, const char *tool)
{
	struct mem *m = bd;
	struct mem_task *t = calloc(1, sizeof(*t));
	int r = 0;

	(void)tool;
	if (!t)
		return -ENOMEM;
	t->r = *rec;
	t->r.message = dup_or_null(rec->message, &r);
	t->r.result = NULL;
	t->r.error = NULL;
	t->tenant = dup_or_null(tenant, &r);
	if (r < 0) {
		mem_free(t);
		return r;
	}
	t->next = m->head;
	m->head = t;
	return 0;
}

/* Drops tenant's oldest ended tasks but keep while they hold over max. */
static unsigned mem_trim(struct mem *m, const char *tenant,
                         const struct mem_task *keep, size_t max)
{
	unsigned dropped = 0;

	for (;;) {
		struct mem_task **oldest = NULL;
		long long total = 0;

		for (struct mem_task **pp = &m->head; *pp; pp = &(*pp)->next) {
			struct mem_task *t = *pp;

			if (strcmp(t->tenant, tenant) != 0 ||
			    !task_status_final(t->r.status))
				continue;
			total += task_record_bytes(&t->r);
			/* Newest first: on a tie the later one is older. */
			if (t != keep &&
			    (!oldest ||
			     t->r.updated_ms <= (*oldest)->r.updated_ms))
				oldest = pp;
		}
		if (total <= (long long)max || !oldest)
			return dropped;
		struct mem_task *gone = *oldest;

		*oldest = gone->next;
		mem_free(gone);
		dropped++;
	}
}

static int mem_finish(void *bd, const struct task_record *rec, size_t max_bytes,
                      unsigned *dropped)
{
	struct mem_task *t = mem_find(bd, rec->id);
	char *msg, *res, *err;
	int r = 0;

	*dropped = 0;
	if (!t || task_status_final(t->r.status))
		return -ENOENT;
	msg = dup_or_null(rec->message, &r);
	res = dup_or_null(rec->result, &r);
	err = dup_or_null(rec->error, &r);
	if (r < 0) {
		free(msg);
		free(res);
		free(err);
		return r;
	}
	free(t->r.message);
	t->r.message = msg;
	t->r.result = res;
	t->r.error = err;
	t->r.status = rec->status;
	t->r.updated_ms = rec->updated_ms;
	/* Kept for the retention after it ended. */
	t->r.ttl_ms = rec->updated_ms - t->r.created_ms + rec->ttl_ms;
	if (max_bytes)
		*dropped = mem_trim(bd, t->tenant, t, max_bytes);
	return 0;
}

static int mem_get(void *bd, const char *tenant, const char *id,
                   struct task_record *out)
{
	struct mem_task *t = mem_find(bd, id);
	int r = 0;

	if (!t || strcmp(t->tenant, tenant) != 0)
		return -ENOENT;
	*out = t->r;
	out->message = dup_or_null(t->r.message, &r);
	out->result = dup_or_null(t->r.result, &r);
	out->error = dup_or_null(t->r.error, &r);
	if (r < 0)
		task_record_finish(out);
	return r;
}

static int mem_make_room(void *bd, const char *tenant, unsigned max)
{
	struct mem *m = bd;

	for (;;) {
		struct mem_task **oldest = NULL;
		unsigned n = 0;

		for (struct mem_task **pp = &m->head; *pp; pp = &(*pp)->next) {
			struct mem_task *t = *pp;

			if (strcmp(t->tenant, tenant) != 0)
				continue;
			n++;
			/* Newest first: on a tie the later one is older. */
			if (task_status_final(t->r.status) &&
			    (!oldest ||
			     t->r.updated_ms <= (*oldest)->r.updated_ms))
				oldest = pp;
		}
		if (n < max)
			return 0;
		if (!oldest)
			return -EBUSY;
		struct mem_task *gone = *oldest;

		*oldest = gone->next;
		mem_free(gone);
	}
}

static int mem_purge(void *bd, long long now_ms, unsigned max,
                     unsigned *deleted)
{
	struct mem *m = bd;

	*deleted = 0;
	for (struct mem_task **pp = &m->head; *pp && *deleted < max;) {
		struct mem_task *t = *pp;

		if (task_status_final(t->r.status) &&
		    t->r.created_ms + t->r.ttl_ms < now_ms) {
			*pp = t->next;
			mem_free(t);
			(*deleted)++;
		} else {
			pp = &t->next;
		}
	}
	return 0;
}

static int mem_fail_running(void *bd, const struct task_record *rec)
{
	/* Memory starts empty: nothing can have been left running. */
	(void)bd;
	(void)rec;
	return 0;
}

static void mem_destroy(void *bd)
{
	struct mem *m = bd;

	while (m && m->head) {
		struct mem_task *t = m->head;

		m->head = t->next;
		mem_free(t);
	}
	free(m);
}

static const struct tasks_backend mem_backend = {
    .name = "memory",
    .durable = false,
    .insert = mem_insert,
    .finish = mem_finish,
    .get = mem_get,
    .make_room = mem_make_room,
    .purge = mem_purge,
    .fail_running = mem_fail_running,
    .destroy = mem_destroy,
};

/* ------------------------------------------------------------------ */
/* the records */

/* What a task left running by a daemon that stopped says. */
#define STOPPED_MSG                                                            \
	"The server stopped (restarted or crashed) while this task was "       \
	"running, so its result is lost; run it again."

/* What a task of a replica that went away says. */
#define GONE_MSG                                                               \
	"The server replica running this task stopped answering (it was "      \
	"stopped, crashed or cut off), so its result is lost; run it again."

/* This daemon's name among replicas, "" for the only daemon. */
/*
 * Records deleted in one transaction: a long purge never holds the store
 * (and the tasks lock) for long at a time.
 */
#define TASKS_PURGE_BATCH 256

/*
 * Deletes ended records past their retention (at now_ms) in batches until
 * none is left or deadline_ms (mono_ms) has passed, after one batch at
 * least; *more (when not NULL) says whether it stopped with some left.
 */
static int tasks_purge(struct tasks *t, long long now_ms, long long deadline_ms,
                       bool *more)
{
	unsigned n = 0;
	int r;

	do {
		pthread_mutex_lock(&t->lock);
		r = t->be->purge(t->bd, now_ms, TASKS_PURGE_BATCH, &n);
		pthread_mutex_unlock(&t->lock);
	} while (r == 0 && n == TASKS_PURGE_BATCH && !cron_past(deadline_ms));
	if (more)
		*more = r == 0 && n == TASKS_PURGE_BATCH;
	return r;
}

static const char *owner_of(const struct config *cfg)
{
	return cfg->replica_name ? cfg->replica_name : "";
}

int tasks_open(const struct config *cfg, struct store *st, struct tasks **out,
               char *err, size_t errlen)
{
	struct tasks *t;
	struct task_record rec = {.status = TASK_FAILED};
	int r;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->cfg = cfg;
	if (st) {
		t->be = &tasks_db_backend;
		r = tasks_db_open(st, &t->bd);
	} else {
		t->be = &mem_backend;
		t->bd = calloc(1, sizeof(struct mem));
		r = t->bd ? 0 : -ENOMEM;
	}
	if (r < 0) {
		snprintf(err, errlen, "out of memory");
		free(t->bd);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return r;
	}
	rec.updated_ms = tasks_now_ms();
	rec.ttl_ms = (long long)cfg->task_retention_s * 1000;
	snprintf(rec.owner, sizeof(rec.owner), "%s", owner_of(cfg));
	rec.message = (char *)(uintptr_t)STOPPED_MSG;
	rec.error = (char *)(uintptr_t) "{\"code\":-32603,\"message\":"
	                                "\"" STOPPED_MSG "\"}";
	r = t->be->fail_running(t->bd, &rec);
	if (r == 0)
		r = tasks_purge(t, rec.updated_ms, LLONG_MAX, NULL);
	if (r < 0) {
		snprintf(err, errlen,
		         "cannot read the task records in the store (%s); "
		         "check the store file and the disk",
		         strerror(-r));
		tasks_close(t);
		return r;
	}
	*out = t;
	return 0;
}

void tasks_close(struct tasks *t)
{
	if (!t)
		return;
	t->be->destroy(t->bd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

bool tasks_durable(const struct tasks *t)
{
	return t->be->durable;
}

int tasks_create(struct tasks *t, const char *tenant, const char *tool,
                 struct task_record *out)
{
	unsigned char rnd[TASK_ID_LEN / 2];
	int r;

	memset(out, 0, sizeof(*out));
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	hex_encode(rnd, sizeof(rnd), out->id);
	out->status = TASK_WORKING;
	out->created_ms = out->updated_ms = tasks_now_ms();
	out->ttl_ms = (long long)t->cfg->task_retention_s * 1000;
	out->poll_ms = POLL_MS;
	snprintf(out->owner, sizeof(out->owner), "%s", owner_of(t->cfg));
	pthread_mutex_lock(&t->lock);
	r = t->be->make_room(t->bd, tenant, t->cfg->task_max_per_tenant);
	if (r == 0)
		r = t->be->insert(t->bd, out, tenant, tool);
	pthread_mutex_unlock(&t->lock);
	return r;
}

int tasks_finish(struct tasks *t, const char *id, enum task_status status,
                 const char *message, const char *result, const char *error)
{
	struct task_record rec = {.status = status};
	char big[512];
	size_t max = t->cfg->task_result_max_bytes;
	unsigned dropped = 0;
	int r;

	snprintf(rec.id, sizeof(rec.id), "%s", id);
	rec.message = (char *)(uintptr_t)message;
	rec.result =
	    status == TASK_COMPLETED ? (char *)(uintptr_t)result : NULL;
	rec.error = status == TASK_FAILED ? (char *)(uintptr_t)error : NULL;
	if ((rec.result && strlen(rec.result) > max) ||
	    (rec.error && strlen(rec.error) > max)) {
		snprintf(big, sizeof(big),
		         "{\"code\":-32603,\"message\":\"The task's result is "
		         "larger than MCP_TASK_RESULT_MAX_BYTES (%zu bytes); "
		         "ask for less output, or write it to a file in "
		         "/data\"}",
		         max);
		rec.status = TASK_FAILED;
		rec.result = NULL;
		rec.error = big;
		rec.message = (char *)(uintptr_t) "result too large";
	}
	rec.updated_ms = tasks_now_ms();
	rec.ttl_ms = (long long)t->cfg->task_retention_s * 1000;
	pthread_mutex_lock(&t->lock);
	r = t->be->finish(t->bd, &rec, t->cfg->task_result_bytes_per_tenant,
	                  &dropped);
	pthread_mutex_unlock(&t->lock);
	if (r == 0 && dropped)
		log_info("task %.8s...: %u older ended task(s) of its token "
		         "deleted to keep its results within "
		         "MCP_TASK_RESULT_BYTES_PER_TENANT=%zu",
		         id, dropped, t->cfg->task_result_bytes_per_tenant);
	return r;
}

int tasks_get(struct tasks *t, const char *tenant, const char *id,
              struct task_record *out)
{
	int r;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&t->lock);
	r = t->be->get(t->bd, tenant, id, out);
	pthread_mutex_unlock(&t->lock);
	if (r < 0)
		return r;
	/* Past its retention, though the sweep has not deleted it yet. */
	if (task_status_final(out->status) &&
	    out->created_ms + out->ttl_ms < tasks_now_ms()) {
		task_record_finish(out);
		return -ENOENT;
	}
	out->poll_ms = POLL_MS;
	return 0;
}

int tasks_request_cancel(struct tasks *t, const char *tenant, const char *id)
{
	int r;

	if (!t->be->request_cancel)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&t->lock);
	r = t->be->request_cancel(t->bd, tenant, id);
	pthread_mutex_unlock(&t->lock);
	return r;
}

size_t tasks_take_cancels(struct tasks *t, char (*ids)[TASK_ID_LEN + 1],
                          size_t max)
{
	size_t n = 0;
	int r;

	if (!t->be->take_cancels)
		return 0;
	pthread_mutex_lock(&t->lock);
	r = t->be->take_cancels(t->bd, owner_of(t->cfg), ids, max, &n);
	pthread_mutex_unlock(&t->lock);
	if (r < 0) {
		log_warnx("reading cancel requests from the store failed: %s",
		          strerror(-r));
		return 0;
	}
	return n;
}

enum cron_next tasks_job_replica(void *arg, long long deadline_ms)
{
	struct tasks *t = arg;
	struct task_record rec = {.status = TASK_FAILED};
	long long n = 0;
	int r;

	(void)deadline_ms; /* one statement of the store's */
	if (!t->be->heartbeat)
		return CRON_DONE;
	rec.updated_ms = tasks_now_ms();
	rec.ttl_ms = (long long)t->cfg->task_retention_s * 1000;
	rec.message = (char *)(uintptr_t)GONE_MSG;
	rec.error = (char *)(uintptr_t) "{\"code\":-32603,\"message\":"
	                                "\"" GONE_MSG "\"}";
	pthread_mutex_lock(&t->lock);
	r = t->be->heartbeat(t->bd, owner_of(t->cfg), rec.updated_ms,
	                     (long long)t->cfg->replica_lease_s * 1000, &rec,
	                     &n);
	pthread_mutex_unlock(&t->lock);
	if (r < 0)
		log_warnx("recording replica %s as alive in the store failed: "
		          "%s; other replicas will fail its tasks after "
		          "MCP_REPLICA_LEASE_SECONDS=%u",
		          owner_of(t->cfg), strerror(-r),
		          t->cfg->replica_lease_s);
	else if (n > 0)
		log_warnx("%lld task(s) of replicas not seen for %u s marked "
		          "failed",
		          n, t->cfg->replica_lease_s);
	return CRON_DONE;
}

enum cron_next tasks_job_sweep(void *arg, long long deadline_ms)
{
	struct tasks *t = arg;
	bool more = false;
	int r = tasks_purge(t, tasks_now_ms(), deadline_ms, &more);

	if (r < 0)
		log_warnx("deleting expired tasks failed: %s", strerror(-r));
	return more ? CRON_MORE : CRON_DONE;
}
