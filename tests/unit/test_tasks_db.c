/* SPDX-License-Identifier: MIT */
/*
 * test_tasks_db: what only task records in the store do (test_tasks runs
 * the common contract on both backends). Ended tasks keep their result,
 * error and message, byte for byte, across a restart and across a SIGKILL
 * of the process that wrote them; a task left working by a daemon that
 * stopped is failed at the next open with a message saying why, once, and
 * cannot be ended afterwards; tenants stay apart after a restart; a task
 * past its retention is not found and the sweep deletes it, while a
 * running one is never swept; a store written before the tasks table
 * existed (schema 1) is upgraded in place.
 */
#include <limits.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "oauth/oauth_db.h"
#include "run/budget.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"
#include "tasks/tasks.h"
#include "tasks/tasks_db.h"

static struct config cfg;
static char dir[64];

static const char result_a[] =
    "{\"content\":[{\"type\":\"text\",\"text\":\"h\\u00e9llo \\\"w\\\"\\n"
    "\xc3\xa9\"}],\"isError\":false}";
static const char error_b[] = "{\"code\":-32603,\"message\":\"it broke\"}";

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* Opens the store at name and the records in it, or fails the test. */
static struct tasks *open_both(const char *name, struct store **st)
{
	char p[128], err[512] = "";
	struct tasks *t = NULL;

	path_of(p, sizeof(p), name);
	*st = NULL;
	if (schema_open(p, st, err, sizeof(err)) < 0 ||
	    tasks_open(&cfg, *st, &t, err, sizeof(err)) < 0) {
		ok(false, "store and records open: %s", err);
		store_close(*st);
		*st = NULL;
		return NULL;
	}
	return t;
}

static void close_both(struct tasks *t, struct store *st)
{
	tasks_close(t);
	store_close(st);
}

/* Rows of task_records with id, or -1. */
static long long rows_of(struct store *st, const char *id)
{
	static const char sql[] =
	    "SELECT count(*) FROM task_records WHERE id = ?";
	struct store_tx *tx;
	struct store_stmt *s;
	long long v = -1;

	if (store_begin(st, false, &tx) < 0)
		return -1;
	s = store_stmt(tx, sql);
	if (s) {
		store_bind_text(s, 1, id);
		if (store_step(tx, s) == 1)
			v = store_col_int64(s, 0);
	}
	store_rollback(tx);
	return v;
}

/* Whether r is the failure a daemon's stop leaves, as the tests expect. */
static bool failed_by_stop(const struct task_record *r)
{
	cJSON *e;
	bool good;

	if (r->status != TASK_FAILED || !r->message || !r->error ||
	    !strstr(r->message, "stopped"))
		return false;
	e = cJSON_Parse(r->error);
	good = cJSON_IsObject(e) &&
	       cJSON_GetNumberValue(cJSON_GetObjectItem(e, "code")) == -32603 &&
	       cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
	       strstr(cJSON_GetObjectItem(e, "message")->valuestring,
	              "run it again");
	cJSON_Delete(e);
	return good;
}

static void test_restart(void)
{
	struct task_record a, b, c, d, e, g;
	struct store *st;
	struct tasks *t = open_both("restart.db", &st);
	long long before;

	if (!t)
		return;
	ok(tasks_durable(t), "records in the store are durable");
	is_int(tasks_create(t, "alice", "run_code", &a), 0, "a created");
	is_int(tasks_create(t, "alice", "run_code", &b), 0, "b created");
	is_int(tasks_create(t, "alice", "run_code", &c), 0, "c created");
	is_int(tasks_create(t, "alice", "run_code", &d), 0, "d created");
	is_int(tasks_create(t, "bob", "run_code", &e), 0, "e created");
	is_int(tasks_finish(t, a.id, TASK_COMPLETED, "done", result_a, NULL), 0,
	       "a completed");
	is_int(tasks_finish(t, b.id, TASK_FAILED, "it broke", NULL, error_b), 0,
	       "b failed");
	is_int(tasks_finish(t, c.id, TASK_CANCELLED, "Cancelled.", NULL, NULL),
	       0, "c cancelled");
	/* d and e are still working when the "daemon" stops. */
	close_both(t, st);

	before = (long long)time(NULL) * 1000 - 1000;
	t = open_both("restart.db", &st);
	if (!t)
		return;
	is_int(tasks_get(t, "alice", a.id, &g), 0, "a found after restart");
	is_int(g.status, TASK_COMPLETED, "a still completed");
	is_str(g.result, result_a, "a's result byte for byte");
	is_str(g.message, "done", "a's message");
	ok(g.error == NULL, "a has no error");
	is_int(g.created_ms, a.created_ms, "a's creation time kept");
	task_record_finish(&g);

	is_int(tasks_get(t, "alice", b.id, &g), 0, "b found after restart");
	is_int(g.status, TASK_FAILED, "b still failed");
	is_str(g.error, error_b, "b's error as recorded");
	ok(g.result == NULL, "b has no result");
	task_record_finish(&g);

	is_int(tasks_get(t, "alice", c.id, &g), 0, "c found after restart");
	is_int(g.status, TASK_CANCELLED, "c still cancelled");
	task_record_finish(&g);

	is_int(tasks_get(t, "alice", d.id, &g), 0, "d found after restart");
	ok(failed_by_stop(&g),
	   "a task left working is failed with the reason: %s / %s",
	   g.message ? g.message : "(no message)",
	   g.error ? g.error : "(no error)");
	ok(g.updated_ms >= before, "failed at the restart, not before");
	ok(g.created_ms + g.ttl_ms >= g.updated_ms + 60000,
	   "kept for the retention from its failure");
	task_record_finish(&g);
	is_int(tasks_finish(t, d.id, TASK_COMPLETED, NULL, "{}", NULL), -ENOENT,
	       "a task failed by the restart cannot end again");

	is_int(tasks_get(t, "alice", e.id, &g), -ENOENT,
	       "bob's task is not alice's after a restart");
	is_int(tasks_get(t, "bob", e.id, &g), 0, "bob's task found by bob");
	ok(failed_by_stop(&g), "bob's running task failed too");
	task_record_finish(&g);
	is_int(tasks_get(t, "bob", a.id, &g), -ENOENT,
	       "alice's task is not bob's");
	close_both(t, st);

	/* A second restart changes nothing: the failure is recorded once. */
	t = open_both("restart.db", &st);
	if (!t)
		return;
	is_int(tasks_get(t, "alice", d.id, &g), 0, "d found again");
	ok(failed_by_stop(&g), "d's failure kept as it was");
	task_record_finish(&g);
	close_both(t, st);
	task_record_finish(&a);
	task_record_finish(&b);
	task_record_finish(&c);
	task_record_finish(&d);
	task_record_finish(&e);
}

/*
 * A child records a finished and a running task, reports both ids once the
 * calls returned, and is killed with SIGKILL: nothing is closed, nothing
 * flushed by hand.
 */
static void test_crash(void)
{
	char ids[2 * TASK_ID_LEN + 2] = "";
	struct task_record g;
	struct store *st;
	struct tasks *t;
	int fd[2], status = 0;
	pid_t pid;
	size_t got = 0;

	if (pipe(fd) < 0) {
		ok(false, "pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct task_record x, y;

		close(fd[0]);
		t = open_both("crash.db", &st);
		if (!t || tasks_create(t, "alice", "run_code", &x) < 0 ||
		    tasks_finish(t, x.id, TASK_COMPLETED, NULL, result_a,
		                 NULL) < 0 ||
		    tasks_create(t, "alice", "run_code", &y) < 0)
			_exit(3);
		if (write(fd[1], x.id, TASK_ID_LEN) != TASK_ID_LEN ||
		    write(fd[1], y.id, TASK_ID_LEN) != TASK_ID_LEN)
			_exit(4);
		raise(SIGKILL);
		_exit(5);
	}
	close(fd[1]);
	while (got < 2 * TASK_ID_LEN) {
		ssize_t n = read(fd[0], ids + got, 2 * TASK_ID_LEN - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd[0]);
	waitpid(pid, &status, 0);
	ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	   "the writer was killed (status %d)", status);
	if (!is_int(got, 2 * TASK_ID_LEN, "the writer reported its tasks"))
		return;
	ids[TASK_ID_LEN * 2] = '\0';

	t = open_both("crash.db", &st);
	if (!t)
		return;
	{
		char x[TASK_ID_LEN + 1], y[TASK_ID_LEN + 1];

		memcpy(x, ids, TASK_ID_LEN);
		x[TASK_ID_LEN] = '\0';
		memcpy(y, ids + TASK_ID_LEN, TASK_ID_LEN);
		y[TASK_ID_LEN] = '\0';
		is_int(tasks_get(t, "alice", x, &g), 0,
		       "a task finished before SIGKILL is there");
		is_int(g.status, TASK_COMPLETED, "completed");
		is_str(g.result, result_a, "with its result");
		task_record_finish(&g);
		is_int(tasks_get(t, "alice", y, &g), 0,
		       "a task running at SIGKILL is there");
		ok(failed_by_stop(&g), "and failed with the reason");
		task_record_finish(&g);
	}
	close_both(t, st);
}

static void test_expiry(void)
{
	struct task_record z, w, g;
	struct store *st;
	struct tasks *t;
	struct timespec ms5 = {0, 5000000};

	cfg.task_retention_s = 0;
	t = open_both("expiry.db", &st);
	if (!t)
		goto out;
	is_int(tasks_create(t, "alice", "run_code", &z), 0, "z created");
	is_int(tasks_create(t, "alice", "run_code", &w), 0, "w created");
	is_int(tasks_finish(t, z.id, TASK_COMPLETED, NULL, "{}", NULL), 0,
	       "z completed");
	nanosleep(&ms5, NULL);
	is_int(tasks_get(t, "alice", z.id, &g), -ENOENT,
	       "past its retention: not found, though not yet swept");
	is_int(rows_of(st, z.id), 1, "its row is still there");
	(void)tasks_job_sweep(t, LLONG_MAX);
	is_int(rows_of(st, z.id), 0, "the sweep deleted it");
	is_int(rows_of(st, w.id), 1, "a running task is never swept");
	is_int(tasks_get(t, "alice", w.id, &g), 0, "and is found");
	is_int(g.status, TASK_WORKING, "still working");
	task_record_finish(&g);
	close_both(t, st);
	task_record_finish(&z);
	task_record_finish(&w);
out:
	cfg.task_retention_s = 60;
}

/* Rows of task_records, or -1. */
static long long rows_all(struct store *st)
{
	struct store_tx *tx;
	struct store_stmt *s;
	long long v = -1;

	if (store_begin(st, false, &tx) < 0)
		return -1;
	s = store_stmt(tx, "SELECT count(*) FROM task_records");
	if (s && store_step(tx, s) == 1)
		v = store_col_int64(s, 0);
	store_rollback(tx);
	return v;
}

/* The sweep deletes in batches and says when some are left. */
static void test_purge_batches(void)
{
	struct task_record r, w;
	struct timespec ms5 = {0, 5000000};
	struct store *st;
	struct tasks *t;
	char tenant[16];
	int made = 0;

	cfg.task_retention_s = 0;
	t = open_both("batches.db", &st);
	if (!t)
		goto out;
	for (int i = 0; i < 600; i++) {
		snprintf(tenant, sizeof(tenant), "t%d", i % 10);
		if (tasks_create(t, tenant, "run_code", &r) == 0 &&
		    tasks_finish(t, r.id, TASK_COMPLETED, NULL, "{}", NULL) ==
		        0)
			made++;
		task_record_finish(&r);
	}
	is_int(made, 600, "600 tasks ended");
	is_int(tasks_create(t, "t0", "run_code", &w), 0, "one still running");
	nanosleep(&ms5, NULL);
	is_int(tasks_job_sweep(t, 0), CRON_MORE,
	       "a run past its deadline stops after a batch, with more left");
	is_int(rows_all(st), 601 - 256, "one batch of 256 deleted");
	is_int(tasks_job_sweep(t, 0), CRON_MORE, "the next run goes on");
	is_int(rows_all(st), 601 - 512, "another batch deleted");
	is_int(tasks_job_sweep(t, 0), CRON_DONE, "the last batch is short");
	is_int(rows_all(st), 1, "only the running task stays");
	is_int(rows_of(st, w.id), 1, "and it is the running one");
	task_record_finish(&w);
	close_both(t, st);
out:
	cfg.task_retention_s = 60;
}

/* A store from before the tasks table (schema 1: OAuth only). */
static void test_upgrade(void)
{
	static const struct store_migration v1[] = {
	    {1, "oauth", OAUTH_DB_MIGRATION_1, OAUTH_DB_MIGRATION_1_PG},
	};
	char p[128], err[512] = "";
	struct task_record a, g;
	struct store *st = NULL;
	struct tasks *t;

	path_of(p, sizeof(p), "upgrade.db");
	is_int(store_open_with(p, v1, 1, &st, err, sizeof(err)), 0,
	       "a schema-1 store is written");
	store_close(st);
	t = open_both("upgrade.db", &st);
	if (!t)
		return;
	is_int(store_version(st), schema_version(),
	       "upgraded to the newest schema");
	ok(schema_version() >= 2, "the tasks table is a later step");
	is_int(tasks_create(t, "alice", "run_code", &a), 0,
	       "tasks recorded in the upgraded store");
	is_int(tasks_get(t, "alice", a.id, &g), 0, "and found");
	task_record_finish(&g);
	task_record_finish(&a);
	close_both(t, st);
}

/*
 * A store of schema 4 (before task sizes were recorded) with ended tasks:
 * the upgrade gives each row its size in bytes (not characters), so the
 * bound per tenant counts them.
 */
static void test_upgrade_bytes(void)
{
	static const struct store_migration v4[] = {
	    {1, "oauth", OAUTH_DB_MIGRATION_1, OAUTH_DB_MIGRATION_1_PG},
	    {2, "tasks", TASKS_DB_MIGRATION_1, TASKS_DB_MIGRATION_1_PG},
	    {3, "budget", BUDGET_MIGRATION_1, BUDGET_MIGRATION_1_PG},
	    {4, "tasks", TASKS_DB_MIGRATION_2, TASKS_DB_MIGRATION_2_PG},
	};
	static const char ins[] =
	    "INSERT INTO task_records (id, tenant, tool, status, created_ms, "
	    "updated_ms, ttl_ms, message, result) VALUES (?, 'erin', "
	    "'run_code', 'completed', ?, ?, 600000, 'ok', ?)";
	static const char old_id[] = "0123456789abcdef0123456789abcdef";
	static const char sel[] = "SELECT bytes FROM task_records WHERE id = ?";
	/* 3 characters, 6 bytes of UTF-8, in a JSON text. */
	static const char result[] = "{\"t\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}";
	char p[128], err[512] = "", id[TASK_ID_LEN + 1];
	struct config saved = cfg;
	struct store *st = NULL;
	struct store_tx *tx;
	struct store_stmt *s;
	struct tasks *t;
	long long bytes = -1, now = (long long)time(NULL) * 1000;

	path_of(p, sizeof(p), "upgrade-bytes.db");
	is_int(store_open_with(p, v4, 4, &st, err, sizeof(err)), 0,
	       "a schema-4 store is written");
	if (!st)
		return;
	s = NULL;
	if (!ok(store_begin(st, true, &tx) == 0 &&
	            (s = store_stmt(tx, ins)) != NULL,
	        "an old row is inserted")) {
		store_close(st);
		return;
	}
	store_bind_text(s, 1, old_id);
	store_bind_int64(s, 2, now - 1000);
	store_bind_int64(s, 3, now - 1000);
	store_bind_text(s, 4, result);
	ok(store_run(tx, s) == 0 && store_commit(tx) == 0, "and committed");
	store_close(st);

	cfg.task_result_bytes_per_tenant = 4096;
	t = open_both("upgrade-bytes.db", &st);
	if (!t) {
		cfg = saved;
		return;
	}
	if (store_begin(st, false, &tx) == 0) {
		s = store_stmt(tx, sel);
		if (s) {
			store_bind_text(s, 1, old_id);
			if (store_step(tx, s) == 1)
				bytes = store_col_int64(s, 0);
		}
		store_rollback(tx);
	}
	is_int(bytes, 2 + strlen(result),
	       "the old row's size is its message and result in bytes");
	{
		/* 4096 - 16 bytes of the old row leave room for 4080. */
		struct task_record a;
		char *big = malloc(4081);

		if (big && tasks_create(t, "erin", "run_code", &a) == 0) {
			memset(big, 'x', 4080);
			big[4080] = '\0';
			is_int(tasks_finish(t, a.id, TASK_COMPLETED, NULL, big,
			                    NULL),
			       0, "a new result of 4080 bytes");
			memcpy(id, a.id, sizeof(id));
			task_record_finish(&a);
			is_int(rows_of(st, old_id), 1,
			       "4080 + 16 fit in 4096: the old row stays");
			a.id[0] = '\0';
			if (tasks_create(t, "erin", "run_code", &a) == 0) {
				is_int(tasks_finish(t, a.id, TASK_COMPLETED,
				                    NULL, "{}", NULL),
				       0, "one more byte or two");
				task_record_finish(&a);
			}
			is_int(rows_of(st, old_id), 0,
			       "past 4096 the old row made room first");
			is_int(rows_of(st, id), 1, "the newer one stays");
		}
		free(big);
	}
	close_both(t, st);
	cfg = saved;
}

int main(void)
{
	char cmd[96];

	cfg.task_retention_s = 60;
	cfg.task_result_max_bytes = 1 << 20;
	cfg.task_max_per_tenant = 100;
	snprintf(dir, sizeof(dir), "/tmp/mcpsd-tasks-db-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_restart();
	test_crash();
	test_expiry();
	test_purge_batches();
	test_upgrade();
	test_upgrade_bytes();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
	return tap_done();
}
