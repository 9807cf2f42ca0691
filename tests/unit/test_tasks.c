/* SPDX-License-Identifier: MIT */
/*
 * test_tasks: the task records. A created task is found by its tenant only;
 * it ends once, with a result or an error that comes back as stored; a
 * result over the limit fails the task with a message; a tenant at its cap
 * makes room by dropping its oldest ended task and is refused when none has
 * ended; a tenant's ended tasks hold at most MCP_TASK_RESULT_BYTES_PER_TENANT
 * bytes, its oldest ended ones (never a running one, never another
 * tenant's) making room; ids are unguessable and distinct; expired tasks are
 * swept. The same contract holds for both backends: in memory and in the store
 * (test_tasks_db covers what only the store does: restarts, crashes).
 * Replicas sharing one store (two connections, as two daemons): each
 * record names its replica, a cancel asked through one reaches the other,
 * a replica's start leaves the other's running tasks alone, and those of a
 * replica gone past its lease are failed by the one left. The store is
 * SQLite in a temporary directory, or the PostgreSQL server that
 * MCPSD_TEST_PG_URL names (tests/lib/pg.sh run, suite pg).
 */
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"
#include "tasks/tasks.h"

static struct config cfg;

static void contract(struct store *st)
{
	struct task_record a, b, c, g;
	struct tasks *t;
	char err[256];
	char *big;

	printf("# backend: %s\n", st ? "store" : "memory");
	cfg.task_retention_s = 60;
	cfg.task_result_max_bytes = 4096;
	cfg.task_max_per_tenant = 2;
	is_int(tasks_open(&cfg, st, &t, err, sizeof(err)), 0, "records open");
	ok(tasks_durable(t) == (st != NULL),
	   "durable exactly when a store is behind them");

	is_int(tasks_create(t, "alice", "slow", &a), 0, "task created");
	is_int(strlen(a.id), TASK_ID_LEN, "id has 32 hex digits");
	ok(strspn(a.id, "0123456789abcdef") == TASK_ID_LEN, "id is hex");
	is_int(a.status, TASK_WORKING, "a new task is working");
	ok(a.created_ms > 1600000000000LL, "created on the wall clock");
	is_int(a.ttl_ms, 60000, "ttl is the retention");

	is_int(tasks_get(t, "alice", a.id, &g), 0, "found by its tenant");
	is_str(task_status_name(g.status), "working", "status name");
	task_record_finish(&g);
	is_int(tasks_get(t, "mallory", a.id, &g), -ENOENT,
	       "another tenant does not find it");
	is_int(tasks_get(t, "alice", "0123", &g), -ENOENT, "unknown id");

	is_int(tasks_finish(t, a.id, TASK_COMPLETED, NULL,
	                    "{\"content\":[],\"isError\":false}", NULL),
	       0, "task ends completed");
	is_int(tasks_finish(t, a.id, TASK_FAILED, NULL, NULL, "{}"), -ENOENT,
	       "a task ends once");
	is_int(tasks_get(t, "alice", a.id, &g), 0, "ended task still found");
	is_int(g.status, TASK_COMPLETED, "status completed");
	is_str(g.result, "{\"content\":[],\"isError\":false}",
	       "result as stored");
	ok(g.error == NULL, "no error on a completed task");
	ok(g.ttl_ms >= 60000, "kept the retention after it ended");
	task_record_finish(&g);

	is_int(tasks_create(t, "alice", "slow", &b), 0, "second task");
	ok(strcmp(a.id, b.id) != 0, "ids differ");
	big = malloc(5000);
	memset(big, 'x', 4999);
	big[4999] = '\0';
	is_int(tasks_finish(t, b.id, TASK_COMPLETED, NULL, big, NULL), 0,
	       "an oversized result is recorded");
	free(big);
	is_int(tasks_get(t, "alice", b.id, &g), 0, "found");
	is_int(g.status, TASK_FAILED, "oversized result fails the task");
	ok(g.error && strstr(g.error, "MCP_TASK_RESULT_MAX_BYTES"),
	   "the error names the setting");
	task_record_finish(&g);

	/* At the cap of 2: the oldest ended task makes room. */
	is_int(tasks_create(t, "alice", "slow", &c), 0, "third task fits");
	is_int(tasks_get(t, "alice", a.id, &g), -ENOENT,
	       "the oldest ended task made room");
	task_record_finish(&g);
	task_record_finish(&b);
	is_int(tasks_create(t, "alice", "slow", &b), 0, "fourth task fits");
	task_record_finish(&g);
	is_int(tasks_create(t, "alice", "slow", &g), -EBUSY,
	       "refused when no task of the tenant has ended");
	is_int(tasks_create(t, "bob", "slow", &g), 0,
	       "another tenant is not affected");
	task_record_finish(&g);

	is_int(tasks_finish(t, c.id, TASK_CANCELLED, "stopped", NULL, NULL), 0,
	       "cancelled");
	is_int(tasks_get(t, "alice", c.id, &g), 0, "found");
	is_str(g.message, "stopped", "status message kept");
	ok(g.result == NULL && g.error == NULL,
	   "a cancelled task has neither result nor error");
	task_record_finish(&g);

	(void)tasks_job_sweep(t, LLONG_MAX);
	is_int(tasks_get(t, "alice", c.id, &g), 0,
	       "a task within its retention survives the sweep");
	task_record_finish(&g);

	task_record_finish(&a);
	task_record_finish(&b);
	task_record_finish(&c);
	tasks_close(t);
}

/* A task of tenant ended with a result of n bytes; its id in id. */
static void ended(struct tasks *t, const char *tenant, size_t n,
                  char id[TASK_ID_LEN + 1])
{
	struct task_record a;
	char *res = malloc(n + 1);

	id[0] = '\0';
	if (!res || tasks_create(t, tenant, "run_code", &a) < 0) {
		ok(false, "task of %s created", tenant);
		free(res);
		return;
	}
	memset(res, 'r', n);
	res[n] = '\0';
	ok(tasks_finish(t, a.id, TASK_COMPLETED, NULL, res, NULL) == 0,
	   "a task of %s ends with %zu bytes", tenant, n);
	memcpy(id, a.id, TASK_ID_LEN + 1);
	task_record_finish(&a);
	free(res);
}

static bool found(struct tasks *t, const char *tenant, const char *id)
{
	struct task_record g;
	bool there = tasks_get(t, tenant, id, &g) == 0;

	task_record_finish(&g);
	return there;
}

/*
 * MCP_TASK_RESULT_BYTES_PER_TENANT: a token's ended tasks hold at most that
 * many bytes; the oldest ended ones make room, never a running one, never
 * another token's.
 */
static void byte_bound(struct store *st)
{
	struct config saved = cfg;
	char a[TASK_ID_LEN + 1], b[TASK_ID_LEN + 1], c[TASK_ID_LEN + 1],
	    d[TASK_ID_LEN + 1], f[TASK_ID_LEN + 1], x[TASK_ID_LEN + 1];
	struct task_record e, g;
	struct tasks *t;
	char err[256];

	printf("# result bytes per tenant, backend: %s\n",
	       st ? "store" : "memory");
	cfg.task_retention_s = 60;
	cfg.task_result_max_bytes = 4096;
	cfg.task_max_per_tenant = 100;
	cfg.task_result_bytes_per_tenant = 10000;
	is_int(tasks_open(&cfg, st, &t, err, sizeof(err)), 0, "records open");
	ended(t, "carol", 3000, a);
	ended(t, "carol", 3000, b);
	ended(t, "carol", 3000, c);
	ok(found(t, "carol", a) && found(t, "carol", b) && found(t, "carol", c),
	   "9000 bytes of 10000: all three kept");
	ended(t, "dave", 3000, x);
	ended(t, "carol", 3000, d);
	ok(!found(t, "carol", a),
	   "a fourth of 3000 bytes: the oldest ended one made room");
	ok(found(t, "carol", b) && found(t, "carol", c) && found(t, "carol", d),
	   "the three newest stay (9000 bytes)");
	ok(found(t, "dave", x), "another token's task is not touched");

	is_int(tasks_create(t, "carol", "run_code", &e), 0,
	       "a task that runs on");
	ended(t, "carol", 4096, f);
	ok(!found(t, "carol", b) && !found(t, "carol", c),
	   "4096 more bytes: the two oldest ended ones made room");
	ok(found(t, "carol", d) && found(t, "carol", f),
	   "the newest two stay (7096 bytes)");
	is_int(tasks_get(t, "carol", e.id, &g), 0,
	       "the running task is never dropped");
	is_int(g.status, TASK_WORKING, "and still works");
	task_record_finish(&g);
	is_int(tasks_finish(t, e.id, TASK_FAILED, "it broke", NULL,
	                    "{\"code\":-32603,\"message\":\"it broke\"}"),
	       0, "it fails with a short error");
	ok(found(t, "carol", d) && found(t, "carol", f) &&
	       found(t, "carol", e.id),
	   "a small error makes no one leave (7096 + its bytes)");
	task_record_finish(&e);
	tasks_close(t);
	cfg = saved;
}

/* Two replicas, r1 and r2, on two connections to the store at where. */
static void replicas(const char *where)
{
	struct config c1 = cfg, c2 = cfg;
	char n1[] = "r1", n2[] = "r2", err[512] = "";
	char ids[TASKS_MAX_CANCELS][TASK_ID_LEN + 1];
	struct store *s1 = NULL, *s2 = NULL;
	struct tasks *t1 = NULL, *t2 = NULL;
	struct task_record a, b, g;

	c1.replica_name = n1;
	c2.replica_name = n2;
	c1.replica_lease_s = c2.replica_lease_s = 2;
	c1.task_max_per_tenant = c2.task_max_per_tenant = 100;
	if (schema_open(where, &s1, err, sizeof(err)) < 0 ||
	    schema_open(where, &s2, err, sizeof(err)) < 0 ||
	    tasks_open(&c1, s1, &t1, err, sizeof(err)) < 0) {
		ok(false, "replicas: store and records open (%s)", err);
		goto out;
	}
	(void)tasks_job_replica(t1, LLONG_MAX);
	is_int(tasks_create(t1, "alice", "run_code", &a), 0, "r1 runs task a");
	is_int(tasks_create(t1, "alice", "run_code", &b), 0, "r1 runs task b");
	is_int(tasks_open(&c2, s2, &t2, err, sizeof(err)), 0,
	       "r2 starts on the same store");
	(void)tasks_job_replica(t2, LLONG_MAX);
	is_int(tasks_get(t2, "alice", a.id, &g), 0,
	       "r2 finds r1's task, still working");
	is_int(g.status, TASK_WORKING, "r2's start left it running");
	is_str(g.owner, "r1", "the record names r1");
	task_record_finish(&g);

	is_int(tasks_take_cancels(t1, ids, TASKS_MAX_CANCELS), 0,
	       "no cancel asked yet");
	is_int(tasks_request_cancel(t2, "mallory", a.id), -ENOENT,
	       "another tenant cannot cancel it");
	is_int(tasks_request_cancel(t2, "alice", a.id), 0,
	       "alice cancels it through r2");
	is_int(tasks_take_cancels(t2, ids, TASKS_MAX_CANCELS), 0,
	       "r2 does not take r1's cancels");
	is_int(tasks_take_cancels(t1, ids, TASKS_MAX_CANCELS), 1,
	       "r1 takes the cancel");
	is_str(ids[0], a.id, "of task a");
	is_int(tasks_take_cancels(t1, ids, TASKS_MAX_CANCELS), 0, "once");
	is_int(tasks_finish(t1, a.id, TASK_CANCELLED, "cancelled", NULL, NULL),
	       0, "r1 stops it");
	is_int(tasks_request_cancel(t2, "alice", a.id), -ENOENT,
	       "an ended task cannot be cancelled again");

	/* r1 beats once more, then stays silent past its lease (2 s; the
	 * check right after its beat has that long even under valgrind);
	 * r2's next beat fails b. */
	(void)tasks_job_replica(t1, LLONG_MAX);
	(void)tasks_job_replica(t2, LLONG_MAX);
	is_int(tasks_get(t2, "alice", b.id, &g), 0, "b found");
	is_int(g.status, TASK_WORKING, "within r1's lease b runs on");
	task_record_finish(&g);
	usleep(2500 * 1000);
	(void)tasks_job_replica(t2, LLONG_MAX);
	is_int(tasks_get(t2, "alice", b.id, &g), 0, "b found after the lease");
	is_int(g.status, TASK_FAILED, "r1 gone past its lease: b failed");
	ok(g.message && strstr(g.message, "replica") && g.error &&
	       strstr(g.error, "-32603"),
	   "saying that its replica stopped answering: %s",
	   g.message ? g.message : "(none)");
	task_record_finish(&g);
	is_int(tasks_finish(t1, b.id, TASK_COMPLETED, NULL, "{}", NULL),
	       -ENOENT, "r1 coming back late cannot overwrite that");
	is_int(tasks_create(t2, "alice", "run_code", &g), 0, "r2 runs task c");
	(void)tasks_job_replica(t2, LLONG_MAX);
	is_int(tasks_get(t1, "alice", g.id, &b), 0, "r1 sees task c");
	is_int(b.status, TASK_WORKING, "r2's own beat leaves its task alone");
	task_record_finish(&b);
	task_record_finish(&g);
	task_record_finish(&a);
out:
	tasks_close(t1);
	tasks_close(t2);
	store_close(s1);
	store_close(s2);
}

int main(void)
{
	char dir[] = "/tmp/mcpsd-tasks-test-XXXXXX", p[64], cmd[96];
	char err[512] = "";
	struct store *st = NULL;

	if (getenv("MCPSD_TEST_PG_URL")) {
		const char *url = getenv("MCPSD_TEST_PG_URL");

		printf("# PostgreSQL\n");
		ok(schema_open(url, &st, err, sizeof(err)) == 0,
		   "store opens (%s)", err);
		if (st) {
			contract(st);
			byte_bound(st);
		}
		store_close(st);
		replicas(url);
		return tap_done();
	}
	contract(NULL);
	byte_bound(NULL);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(p, sizeof(p), "%s/state.db", dir);
	is_int(schema_open(p, &st, err, sizeof(err)), 0, "store opens");
	if (st) {
		contract(st);
		byte_bound(st);
	} else {
		printf("# %s\n", err);
	}
	store_close(st);
	replicas(p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
	return tap_done();
}
