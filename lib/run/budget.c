/* SPDX-License-Identifier: MIT */
/*
 * budget: see budget.h. Usage is read and charged with one statement each,
 * in a transaction of its own; an upsert adds to the window's row, so
 * concurrent charges of one tenant add up without a read-modify-write.
 */
#include "run/budget.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util/log.h"

struct budget {
	struct store *st;
	long long limit_ms;
	unsigned window_s;
};

long long budget_window_start(long long now_s, unsigned window_s)
{
	long long w = window_s ? window_s : 1;
	long long r = now_s % w;

	/* Floor, also for a clock before the epoch. */
	return now_s - (r < 0 ? r + w : r);
}

unsigned budget_window_left(long long now_s, unsigned window_s)
{
	long long w = window_s ? window_s : 1;
	long long left = budget_window_start(now_s, window_s) + w - now_s;

	return left < 1 ? 1 : (unsigned)left;
}

long long budget_charge_ms(long long cpu_ms, long long wall_ms, double cpus,
                           bool *estimated)
{
	double ms;

	*estimated = false;
	if (cpu_ms >= 0)
		return cpu_ms;
	*estimated = true;
	if (wall_ms <= 0 || !(cpus > 0))
		return 0;
	ms = ceil((double)wall_ms * cpus);
	return ms > 1e15 ? (long long)1e15 : (long long)ms;
}

int budget_create(struct store *st, unsigned cpu_s, unsigned window_s,
                  struct budget **out)
{
	struct budget *b;

	*out = NULL;
	if (!st || window_s == 0)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->st = st;
	b->limit_ms = (long long)cpu_s * 1000;
	b->window_s = window_s;
	*out = b;
	return 0;
}

void budget_destroy(struct budget *b)
{
	free(b);
}

bool budget_limited(const struct budget *b)
{
	return b && b->limit_ms > 0;
}

int budget_check(struct budget *b, const char *tenant, long long now_s,
                 struct budget_state *out)
{
	static const char sql[] = "SELECT cpu_ms, runs FROM budget_usage "
	                          "WHERE tenant = ? AND window_start = ?";
	struct store_tx *tx;
	struct store_stmt *s;
	int r;

	*out = (struct budget_state){.limit_ms = b->limit_ms,
	                             .window_s = b->window_s};
	out->window_start = budget_window_start(now_s, b->window_s);
	r = store_begin(b->st, false, &tx);
	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	if (!s) {
		store_rollback(tx);
		return -EIO;
	}
	store_bind_text(s, 1, tenant ? tenant : "");
	store_bind_int64(s, 2, out->window_start);
	r = store_step(tx, s);
	if (r == 1) {
		long long runs = store_col_int64(s, 1);

		out->used_ms = store_col_int64(s, 0);
		out->runs =
		    runs > 0 && runs < 4000000000LL ? (unsigned)runs : 0;
	}
	if (r < 0) {
		store_rollback(tx);
		out->used_ms = 0;
		out->runs = 0;
		return r;
	}
	r = store_commit(tx);
	if (r < 0)
		return r;
	if (b->limit_ms > 0 && out->used_ms >= b->limit_ms) {
		out->retry_s = budget_window_left(now_s, b->window_s);
		return -EDQUOT;
	}
	return 0;
}

int budget_charge(struct budget *b, const char *tenant, long long ms,
                  long long now_s)
{
	return budget_add(b, tenant, ms, 1, now_s);
}

int budget_add(struct budget *b, const char *tenant, long long ms,
               unsigned runs, long long now_s)
{
	static const char add[] =
	    "INSERT INTO budget_usage (tenant, window_start, cpu_ms, runs) "
	    "VALUES (?, ?, ?, ?) ON CONFLICT (tenant, window_start) DO UPDATE "
	    "SET cpu_ms = CASE WHEN budget_usage.cpu_ms + excluded.cpu_ms < "
	    "1000000000000000 THEN budget_usage.cpu_ms + excluded.cpu_ms "
	    "ELSE 1000000000000000 END, "
	    "runs = budget_usage.runs + excluded.runs";
	static const char forget[] = "DELETE FROM budget_usage "
	                             "WHERE tenant = ? AND window_start < ?";
	long long start = budget_window_start(now_s, b->window_s);
	const char *t = tenant ? tenant : "";
	struct store_tx *tx;
	struct store_stmt *s;
	int r;

	if (!budget_limited(b))
		return 0; /* nothing reads it: budget.h */
	/*
	 * Every run charges: an fsync each (2-3 ms here, more on a busy
	 * disk) was most of the daemon's own time per warm call. A power
	 * cut may lose the last moments' usage, never a half charge.
	 */
	r = store_begin_relaxed(b->st, &tx);
	if (r < 0)
		return r;
	s = store_stmt(tx, add);
	if (!s)
		goto fail;
	store_bind_text(s, 1, t);
	store_bind_int64(s, 2, start);
	store_bind_int64(s, 3, ms > 0 ? ms : 0);
	store_bind_int64(s, 4, runs);
	r = store_run(tx, s);
	if (r < 0)
		goto out;
	s = store_stmt(tx, forget);
	if (!s)
		goto fail;
	store_bind_text(s, 1, t);
	store_bind_int64(s, 2, start);
	r = store_run(tx, s);
	if (r < 0)
		goto out;
	return store_commit(tx);
fail:
	r = -EIO;
out:
	store_rollback(tx);
	return r;
}
