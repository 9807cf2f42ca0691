/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for lib/util/cron: the housekeeping loops with real threads and
 * short periods: the order jobs run in, their periods, a budget and where a
 * job resumes, a slow lane never delaying a prompt one, the metrics, the
 * errors of cron_add, and stopping. Each test owns its loop; the jobs share
 * a struct with the test under its mutex. Bounds on timing leave room for
 * a loaded machine (the checks are run many times in a row under load).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "util/buf.h"
#include "util/cron.h"
#include "util/mono.h"
#include "util/stats.h"

#define LOG_MAX 4096

/* What the jobs of one test record. */
struct trace {
	pthread_mutex_t mu;
	char order[LOG_MAX];   /* one letter per run, in the order they ran */
	long long at[LOG_MAX]; /* mono_ms of each run of the prompt job */
	int n_at;
	int items_left, next_item, items_done, bad_order;
	int runs, empty_runs, max_per_run;
	long long first_run; /* mono_ms of the walk's first run */
	unsigned sleep_ms;
	bool in_job, finished;
};

static void trace_init(struct trace *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void note(struct trace *t, char c)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	n = strlen(t->order);
	if (n + 1 < sizeof(t->order))
		t->order[n] = c;
	pthread_mutex_unlock(&t->mu);
}

static enum cron_next job_a(void *arg, long long deadline_ms)
{
	(void)deadline_ms;
	note(arg, 'a');
	return CRON_DONE;
}

static enum cron_next job_b(void *arg, long long deadline_ms)
{
	(void)deadline_ms;
	note(arg, 'b');
	return CRON_DONE;
}

static enum cron_next job_c(void *arg, long long deadline_ms)
{
	(void)deadline_ms;
	note(arg, 'c');
	return CRON_DONE;
}

/* A prompt job: records when it ran. */
static enum cron_next job_tick(void *arg, long long deadline_ms)
{
	struct trace *t = arg;

	(void)deadline_ms;
	pthread_mutex_lock(&t->mu);
	if (t->n_at < LOG_MAX)
		t->at[t->n_at++] = mono_ms();
	pthread_mutex_unlock(&t->mu);
	return CRON_DONE;
}

/* A slow job: blocks for t->sleep_ms each run (a disk walk, the engine). */
static enum cron_next job_slow(void *arg, long long deadline_ms)
{
	struct trace *t = arg;
	unsigned ms;

	(void)deadline_ms;
	pthread_mutex_lock(&t->mu);
	t->in_job = true;
	t->finished = false;
	ms = t->sleep_ms;
	pthread_mutex_unlock(&t->mu);
	sleep_ms(ms);
	pthread_mutex_lock(&t->mu);
	t->in_job = false;
	t->finished = true;
	t->runs++;
	pthread_mutex_unlock(&t->mu);
	return CRON_DONE;
}

/*
 * A budgeted job over items 0..n-1, each taking 2 ms: it goes on from
 * next_item, stops once the deadline has passed (after one item at least),
 * and says whether items are left.
 */
static enum cron_next job_walk(void *arg, long long deadline_ms)
{
	struct trace *t = arg;
	int done = 0;
	bool left, had;

	pthread_mutex_lock(&t->mu);
	had = t->items_left > 0;
	if (!t->first_run)
		t->first_run = mono_ms();
	pthread_mutex_unlock(&t->mu);
	for (;;) {
		pthread_mutex_lock(&t->mu);
		left = t->items_left > 0;
		if (left) {
			if (t->next_item != t->items_done)
				t->bad_order++;
			t->next_item++;
			t->items_done++;
			t->items_left--;
			done++;
		}
		left = t->items_left > 0;
		pthread_mutex_unlock(&t->mu);
		if (!left)
			break;
		sleep_ms(2);
		if (cron_past(deadline_ms))
			break;
	}
	pthread_mutex_lock(&t->mu);
	t->runs++;
	t->empty_runs += had && done == 0;
	if (done > t->max_per_run)
		t->max_per_run = done;
	pthread_mutex_unlock(&t->mu);
	return left ? CRON_MORE : CRON_DONE;
}

/* Waits up to ms for cond(t) (checked under the lock). */
static bool wait_for(struct trace *t, bool (*cond)(struct trace *), unsigned ms)
{
	long long until = mono_ms() + ms;
	bool yes;

	for (;;) {
		pthread_mutex_lock(&t->mu);
		yes = cond(t);
		pthread_mutex_unlock(&t->mu);
		if (yes || mono_ms() >= until)
			return yes;
		sleep_ms(2);
	}
}

static bool three_ran(struct trace *t)
{
	return strlen(t->order) >= 3;
}

static bool walk_done(struct trace *t)
{
	return t->items_left == 0;
}

static bool slow_in_job(struct trace *t)
{
	return t->in_job;
}

static void test_order(void)
{
	struct cron *c = cron_create(50);
	struct trace t;

	trace_init(&t);
	/* Same period: the first registered first; shorter periods earlier. */
	ok(cron_add(c, CRON_SLOW, "a", 60, job_a, &t) == 0 &&
	       cron_add(c, CRON_SLOW, "b", 60, job_b, &t) == 0 &&
	       cron_add(c, CRON_SLOW, "c", 30, job_c, &t) == 0,
	   "order: three jobs added");
	ok(cron_start(c) == 0, "order: started");
	ok(wait_for(&t, three_ran, 2000), "order: all three ran");
	cron_destroy(c);
	ok(strncmp(t.order, "cab", 3) == 0,
	   "order: earliest due first, then by registration (got %.3s)",
	   t.order);
}

static void test_periods(void)
{
	struct cron *c = cron_create(50);
	struct trace t;
	long long start;
	int n;

	trace_init(&t);
	ok(cron_add(c, CRON_PROMPT, "tick", 20, job_tick, &t) == 0,
	   "periods: added");
	start = mono_ms();
	ok(cron_start(c) == 0, "periods: started");
	sleep_ms(400);
	cron_destroy(c);
	n = t.n_at;
	/* Ideally 20; a loaded machine may lose some, never gain. */
	ok(n >= 8 && n <= 21, "periods: a 20 ms job ran %d times in 400 ms", n);
	ok(n > 0 && t.at[0] - start >= 20,
	   "periods: first run one period after the start (%lld ms)",
	   n > 0 ? t.at[0] - start : -1);
}

static void test_budget(void)
{
	struct cron *c = cron_create(10);
	struct trace t;
	long long took;

	trace_init(&t);
	t.items_left = 100; /* 200 ms of work, 10 ms a run */
	/* Resumed on its period (150 ms) the walk would take 3 s: only
	 * CRON_MORE brings it back sooner. */
	ok(cron_add(c, CRON_SLOW, "walk", 150, job_walk, &t) == 0 &&
	       cron_add(c, CRON_SLOW, "tick", 5, job_tick, &t) == 0,
	   "budget: added");
	ok(cron_start(c) == 0, "budget: started");
	ok(wait_for(&t, walk_done, 10000), "budget: every item done");
	took = mono_ms() - t.first_run;
	cron_destroy(c);
	is_int(t.items_done, 100, "budget: each item exactly once");
	is_int(t.bad_order, 0,
	       "budget: each run resumed where the last stopped");
	ok(t.runs >= 5,
	   "budget: the walk took %d runs (budget 10 ms, 200 ms of work)",
	   t.runs);
	ok(t.max_per_run <= 20,
	   "budget: at most %d items in a run (about 5 fit in one budget)",
	   t.max_per_run);
	is_int(t.empty_runs, 0, "budget: every run made progress");
	ok(took < 2000,
	   "budget: resumed soon, not a period later (%lld ms in all)", took);
	/* A pause as long as the budget after each run: the walk takes at
	 * most about half the lane, and the lane's other job keeps its turns.
	 */
	ok(took >= 250 + 10 * (t.runs - 1) / 2,
	   "budget: paused between runs (%lld ms for 200 ms of work in %d "
	   "runs)",
	   took, t.runs);
	ok(t.n_at >= 10, "budget: the lane's other job ran %d times meanwhile",
	   t.n_at);
}

static void test_lanes(void)
{
	struct cron *c = cron_create(50);
	struct trace slow, fast;
	long long max_gap = 0;

	trace_init(&slow);
	trace_init(&fast);
	slow.sleep_ms = 400;
	ok(cron_add(c, CRON_SLOW, "slow", 10, job_slow, &slow) == 0 &&
	       cron_add(c, CRON_PROMPT, "fast", 20, job_tick, &fast) == 0,
	   "lanes: added");
	ok(cron_start(c) == 0, "lanes: started");
	sleep_ms(1300);
	cron_destroy(c);
	for (int i = 1; i < fast.n_at; i++)
		if (fast.at[i] - fast.at[i - 1] > max_gap)
			max_gap = fast.at[i] - fast.at[i - 1];
	ok(slow.runs >= 2, "lanes: the slow job ran %d times", slow.runs);
	ok(fast.n_at >= 20, "lanes: the prompt job ran %d times", fast.n_at);
	/* On one thread the prompt job would wait 400 ms behind each run. */
	ok(max_gap < 250,
	   "lanes: the prompt job never waited for the slow one (longest gap "
	   "%lld ms, period 20 ms, slow runs 400 ms)",
	   max_gap);
}

static void test_stop(void)
{
	struct cron *c = cron_create(50);
	struct trace t;
	int runs;

	trace_init(&t);
	t.sleep_ms = 150;
	ok(cron_add(c, CRON_SLOW, "slow", 10, job_slow, &t) == 0,
	   "stop: added");
	ok(cron_start(c) == 0, "stop: started");
	ok(wait_for(&t, slow_in_job, 2000), "stop: the job is running");
	cron_destroy(c);
	pthread_mutex_lock(&t.mu);
	ok(t.finished && !t.in_job,
	   "stop: the running job finished before destroy returned");
	runs = t.runs;
	pthread_mutex_unlock(&t.mu);
	sleep_ms(100);
	is_int(t.runs, runs, "stop: nothing runs after destroy");

	/* A job that wants more is not resumed once stopped. */
	c = cron_create(5);
	trace_init(&t);
	t.items_left = 1000000;
	ok(cron_add(c, CRON_SLOW, "walk", 1, job_walk, &t) == 0 &&
	       cron_start(c) == 0,
	   "stop: an endless walk started");
	sleep_ms(50);
	cron_destroy(c);
	runs = t.runs;
	sleep_ms(50);
	ok(runs > 0 && t.runs == runs && t.items_left > 0,
	   "stop: the endless walk stopped with work left (%d runs)", runs);

	/* Never started, and NULL: nothing to join (a hang or a crash). */
	c = cron_create(5);
	ok(cron_add(c, CRON_PROMPT, "a", 10, job_a, &t) == 0,
	   "stop: added, not started");
	cron_destroy(c);
	cron_destroy(NULL);
	is_int(strlen(t.order), 0, "stop: a loop never started ran nothing");
}

static void test_errors(void)
{
	struct cron *c = cron_create(5);
	struct trace t;
	int r = 0, i;

	trace_init(&t);
	is_int(cron_add(c, (enum cron_lane)CRON_LANES, "x", 10, job_a, &t),
	       -EINVAL, "errors: an unknown lane");
	for (i = 0; i < CRON_JOBS_MAX && r == 0; i++)
		r = cron_add(c, CRON_PROMPT, "x", 1000, job_a, &t);
	is_int(r, 0, "errors: CRON_JOBS_MAX jobs fit on a lane");
	is_int(cron_add(c, CRON_PROMPT, "x", 1000, job_a, &t), -ENOSPC,
	       "errors: one more does not");
	is_int(cron_add(c, CRON_SLOW, "x", 1000, job_a, &t), 0,
	       "errors: another lane has room");
	is_int(cron_start(c), 0, "errors: started");
	is_int(cron_add(c, CRON_SLOW, "y", 1000, job_a, &t), -EBUSY,
	       "errors: no job added after the start");
	is_int(cron_start(c), -EBUSY, "errors: started once");
	cron_destroy(c);
}

static void test_metrics(void)
{
	struct stats *s = stats_create();
	struct cron *c = cron_create(10);
	struct trace walk, slow;
	struct buf b;

	trace_init(&walk);
	trace_init(&slow);
	walk.items_left = 30; /* 60 ms of work */
	slow.sleep_ms = 30;
	cron_set_stats(c, s);
	ok(cron_add(c, CRON_SLOW, "walk", 1, job_walk, &walk) == 0 &&
	       cron_add(c, CRON_PROMPT, "slow", 10, job_slow, &slow) == 0 &&
	       cron_start(c) == 0,
	   "metrics: started with metrics");
	ok(wait_for(&walk, walk_done, 5000), "metrics: the walk finished");
	sleep_ms(100);
	cron_destroy(c);
	buf_init(&b, 0);
	is_int(stats_render(s, &b), 0, "metrics: rendered");
	ok(b.data && strstr(b.data, "# TYPE mcpsd_housekeeping_seconds "
	                            "histogram") != NULL,
	   "metrics: the duration histogram");
	ok(b.data &&
	       strstr(b.data,
	              "mcpsd_housekeeping_seconds_count{job=\"walk\"}") &&
	       strstr(b.data, "mcpsd_housekeeping_seconds_count{job=\"slow\"}"),
	   "metrics: a series per job");
	ok(b.data && strstr(b.data, "mcpsd_housekeeping_overruns_total{job="
	                            "\"slow\"}") != NULL,
	   "metrics: the 30 ms job overran its 10 ms budget");
	ok(b.data && strstr(b.data, "mcpsd_housekeeping_unfinished_total{job="
	                            "\"walk\"}") != NULL,
	   "metrics: the walk stopped at its budget with work left");
	ok(b.data && !strstr(b.data, "mcpsd_housekeeping_unfinished_total{job="
	                             "\"slow\"}"),
	   "metrics: the slow job never said it had more");
	buf_finish(&b);
	stats_destroy(s);
}

int main(void)
{
	test_order();
	test_periods();
	test_budget();
	test_lanes();
	test_stop();
	test_errors();
	test_metrics();
	return tap_done();
}
