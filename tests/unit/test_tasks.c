/* SPDX-License-Identifier: MIT */
/*
 * test_tasks: the task records. A created task is found by its tenant only;
 * it ends once, with a result or an error that comes back as stored; a
 * result over the limit fails the task with a message; a tenant at its cap
 * makes room by dropping its oldest ended task and is refused when none has
 * ended; ids are unguessable and distinct; expired tasks are swept. The
 * same contract holds for both backends: in memory and in the store
 * (test_tasks_db covers what only the store does: restarts, crashes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "store.h"
#include "tap.h"
#include "tasks.h"

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

	tasks_job_sweep(t);
	is_int(tasks_get(t, "alice", c.id, &g), 0,
	       "a task within its retention survives the sweep");
	task_record_finish(&g);

	task_record_finish(&a);
	task_record_finish(&b);
	task_record_finish(&c);
	tasks_close(t);
}

int main(void)
{
	char dir[] = "/tmp/mcpsd-tasks-test-XXXXXX", p[64], cmd[96];
	char err[512] = "";
	struct store *st = NULL;

	contract(NULL);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(p, sizeof(p), "%s/state.db", dir);
	is_int(store_open(p, &st, err, sizeof(err)), 0, "store opens");
	if (st)
		contract(st);
	else
		printf("# %s\n", err);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
	return tap_done();
}
