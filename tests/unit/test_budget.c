/* SPDX-License-Identifier: MIT */
/*
 * test_budget: the window arithmetic (fixed windows from the epoch, time
 * left, a clock before the epoch), what a run is charged (its CPU time, or
 * wall time x cpus when that is unknown), and the budget in the store: a
 * tenant is refused once it used its budget, with the seconds until the
 * window ends, and allowed again in the next window; tenants are counted
 * apart; the counters survive closing and reopening the store; ended
 * windows are forgotten; no budget (0) refuses nothing but still counts;
 * a store of schema 2 is upgraded in place.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oauth/oauth_db.h"
#include "run/budget.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"
#include "tasks/tasks_db.h"

static char dir[64];

static struct store *open_store(const char *name)
{
	char p[128], err[512] = "";
	struct store *st = NULL;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (schema_open(p, &st, err, sizeof(err)) < 0)
		ok(false, "store opens: %s", err);
	return st;
}

/* Rows of budget_usage for tenant, or -1. */
static long long rows_of(struct store *st, const char *tenant)
{
	static const char sql[] =
	    "SELECT count(*) FROM budget_usage WHERE tenant = ?";
	struct store_tx *tx;
	struct store_stmt *s;
	long long v = -1;

	if (store_begin(st, false, &tx) < 0)
		return -1;
	s = store_stmt(tx, sql);
	if (s) {
		store_bind_text(s, 1, tenant);
		if (store_step(tx, s) == 1)
			v = store_col_int64(s, 0);
	}
	if (store_commit(tx) < 0)
		return -1;
	return v;
}

static void test_arithmetic(void)
{
	bool est = true;

	is_int(budget_window_start(7200, 3600), 7200, "on a boundary");
	is_int(budget_window_start(7199, 3600), 3600, "just before one");
	is_int(budget_window_start(1000000123, 60), 1000000080,
	       "minute windows");
	is_int(budget_window_start(-1, 60), -60, "before the epoch: floor");
	is_int(budget_window_start(5, 0), 5, "a zero window counts as 1 s");
	is_int(budget_window_left(7200, 3600), 3600, "a whole window left");
	is_int(budget_window_left(7199, 3600), 1, "one second left");
	is_int(budget_window_left(3700, 3600), 3500, "most of it left");
	is_int(budget_window_left(-1, 60), 1, "before the epoch");

	is_int(budget_charge_ms(1234, 99999, 4, &est), 1234, "known CPU time");
	ok(!est, "is not an estimate");
	is_int(budget_charge_ms(0, 5000, 2, &est), 0, "known zero CPU time");
	ok(!est, "is not an estimate either");
	is_int(budget_charge_ms(-1, 1500, 2, &est), 3000,
	       "unknown: wall time x cpus");
	ok(est, "is an estimate");
	is_int(budget_charge_ms(-1, 1001, 0.5, &est), 501, "rounded up");
	is_int(budget_charge_ms(-1, -5, 1, &est), 0, "no wall time: nothing");
	is_int(budget_charge_ms(-1, 100, 0, &est), 0, "no cpus: nothing");
}

static void test_budget(void)
{
	struct store *st = open_store("a.db");
	struct budget *b = NULL;
	struct budget_state bs;
	long long t0 = 1000000000LL - 1000000000LL % 60 + 10; /* 10 s in */
	int rc;

	if (!st)
		return;
	is_int(budget_create(st, 5, 0, &b), -EINVAL,
	       "a window of 0 is refused");
	rc = budget_create(st, 5, 60, &b); /* 5 CPU-s per minute */
	is_int(rc, 0, "budget created");
	if (rc < 0)
		return;
	ok(budget_limited(b), "a limit of 5 s is a limit");
	ok(!budget_limited(NULL), "no budget is none");
	rc = budget_check(b, "alice", t0, &bs);
	is_int(rc, 0, "a new tenant may run");
	ok(bs.used_ms == 0 && bs.limit_ms == 5000 && bs.runs == 0,
	   "nothing used of 5000 ms (%lld of %lld)", bs.used_ms, bs.limit_ms);
	is_int(budget_charge(b, "alice", 3000, t0), 0, "charge 3 s");
	rc = budget_check(b, "alice", t0 + 1, &bs);
	is_int(rc, 0, "3 of 5 s: still under");
	is_int(bs.used_ms, 3000, "3000 ms used");
	is_int(budget_charge(b, "alice", 2500, t0 + 2), 0, "charge 2.5 s more");
	rc = budget_check(b, "alice", t0 + 5, &bs);
	is_int(rc, -EDQUOT, "5.5 of 5 s: over budget");
	is_int(bs.used_ms, 5500, "both charges add up");
	is_int(bs.runs, 2, "two runs counted");
	is_int(bs.retry_s, 45, "retry when the window ends (45 s)");
	rc = budget_check(b, "bob", t0 + 5, &bs);
	is_int(rc, 0, "bob has a budget of his own");
	/* CPU a warm box used between runs: counted, with no run. */
	is_int(budget_add(b, "dave", 60, 0, t0 + 5), 0, "idle CPU added");
	rc = budget_check(b, "dave", t0 + 5, &bs);
	ok(rc == 0 && bs.used_ms == 60 && bs.runs == 0,
	   "60 ms and no run (%lld ms, %u runs)", bs.used_ms, bs.runs);
	is_int(budget_add(b, "dave", -5, 0, t0 + 5), 0, "a negative add");
	rc = budget_check(b, "dave", t0 + 5, &bs);
	is_int(bs.used_ms, 60, "adds nothing");
	is_int(budget_add(b, "dave", 4940, 0, t0 + 5), 0, "more idle CPU");
	rc = budget_check(b, "dave", t0 + 6, &bs);
	is_int(rc, -EDQUOT, "passes the budget without a run");
	ok(bs.used_ms == 5000 && bs.runs == 0, "5000 ms, no run (%lld, %u)",
	   bs.used_ms, bs.runs);
	is_int(budget_charge(b, "dave", 1, t0 + 6), 0, "then a run");
	rc = budget_check(b, "dave", t0 + 6, &bs);
	is_int(bs.runs, 1, "counts one run");
	is_int(budget_charge(b, "bob", 100, t0 + 5), 0, "bob charged");
	rc = budget_check(b, "alice", t0 + 49, &bs);
	is_int(rc, -EDQUOT, "alice still over at the window's last second");
	is_int(bs.retry_s, 1, "one second to go");
	budget_destroy(b);
	store_close(st);

	/* A restart: the same file, a new process's view of it. */
	st = open_store("a.db");
	if (!st)
		return;
	rc = budget_create(st, 5, 60, &b);
	is_int(rc, 0, "budget created again");
	rc = budget_check(b, "alice", t0 + 20, &bs);
	is_int(rc, -EDQUOT, "after a restart alice is still over budget");
	is_int(bs.used_ms, 5500, "with the same usage");
	rc = budget_check(b, "bob", t0 + 20, &bs);
	ok(rc == 0 && bs.used_ms == 100, "bob's usage survived too");

	rc = budget_check(b, "alice", t0 + 60, &bs);
	is_int(rc, 0, "the next window: alice may run again");
	is_int(bs.used_ms, 0, "with nothing used");
	is_int(rows_of(st, "alice"), 1,
	       "the ended window's row is still there");
	is_int(budget_charge(b, "alice", 10, t0 + 60), 0, "charged anew");
	is_int(rows_of(st, "alice"), 1, "the ended window was forgotten");
	budget_destroy(b);

	rc = budget_create(st, 0, 60, &b);
	is_int(rc, 0, "an unlimited budget");
	if (rc == 0) {
		is_int(budget_charge(b, "carol", 1000000000LL, t0), 0,
		       "a huge charge");
		rc = budget_check(b, "carol", t0, &bs);
		is_int(rc, 0, "is never refused");
		is_int(bs.used_ms, 0, "nor counted: nothing would read it");
		is_int(rows_of(st, "carol"), 0, "no row is written");
		is_int(bs.limit_ms, 0, "limit 0 means none");
		ok(!budget_limited(b),
		   "so a run need not read the usage before it starts");
	}
	budget_destroy(b);
	budget_destroy(NULL);
	store_close(st);
}

static void test_upgrade(void)
{
	static const struct store_migration old[] = {
	    {1, "oauth", OAUTH_DB_MIGRATION_1, OAUTH_DB_MIGRATION_1_PG},
	    {2, "tasks", TASKS_DB_MIGRATION_1, TASKS_DB_MIGRATION_1_PG},
	};
	char p[128], err[512] = "";
	struct store *st = NULL;
	struct budget *b = NULL;
	struct budget_state bs;
	int rc;

	snprintf(p, sizeof(p), "%s/old.db", dir);
	rc = store_open_with(p, old, 2, &st, err, sizeof(err));
	is_int(rc, 0, "a store of schema 2");
	is_int(store_version(st), 2, "at version 2");
	store_close(st);
	st = open_store("old.db");
	if (!st)
		return;
	ok(store_version(st) >= 3, "upgraded (to %u)", store_version(st));
	rc = budget_create(st, 1, 60, &b);
	is_int(rc, 0, "budget on the upgraded store");
	if (rc == 0) {
		is_int(budget_charge(b, "alice", 1000, 120), 0, "charged");
		is_int(budget_check(b, "alice", 121, &bs), -EDQUOT,
		       "and counted");
	}
	budget_destroy(b);
	store_close(st);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/test_budget.XXXXXX");
	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return tap_done();
	}
	test_arithmetic();
	test_budget();
	test_upgrade();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		ok(false, "cleanup");
	return tap_done();
}
