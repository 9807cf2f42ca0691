/* SPDX-License-Identifier: MIT */
/*
 * cron: see cron.h. One mutex guards every lane's schedule and the stop
 * flag; each lane's thread sleeps on its own condition variable until the
 * earliest of its jobs is due or the loops are stopped. A job's own fields
 * (name, fn, arg) never change after cron_start and are read unlocked.
 */
#include "util/cron.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/mono.h"
#include "util/stats.h"

#define CRON_LOG_SLOW_MS 5000

struct cron_job {
	const char *name;
	unsigned interval_ms;
	cron_fn fn;
	void *arg;
	long long due; /* mono_ms */
};

struct cron_lane_run {
	struct cron *c;
	pthread_cond_t cond;
	struct cron_job jobs[CRON_JOBS_MAX];
	int n;
	bool running; /* its thread was started */
	pthread_t thread;
};

struct cron {
	pthread_mutex_t lock;
	unsigned budget_ms;
	bool started, stop;
	struct cron_lane_run lanes[CRON_LANES];
	struct stats_metric *m_seconds, *m_overruns, *m_unfinished;
};

bool cron_past(long long deadline_ms)
{
	return mono_ms() >= deadline_ms;
}

struct cron *cron_create(unsigned budget_ms)
{
	struct cron *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->budget_ms = budget_ms ? budget_ms : 1;
	for (int i = 0; i < CRON_LANES; i++) {
		c->lanes[i].c = c;
		mono_cond_init(&c->lanes[i].cond);
	}
	return c;
}

void cron_set_stats(struct cron *c, struct stats *s)
{
	static const char *const job[] = {"job", NULL};
	static const double bounds[] = {0.001, 0.01, 0.05, 0.1, 0.25,
	                                0.5,   1,    5,    30};

	c->m_seconds =
	    stats_histogram(s, "mcpsd_housekeeping_seconds",
	                    "How long each run of a housekeeping job took", job,
	                    bounds, sizeof(bounds) / sizeof(bounds[0]));
	c->m_overruns = stats_counter(
	    s, "mcpsd_housekeeping_overruns_total",
	    "Runs of a housekeeping job that took longer than the budget of "
	    "a run",
	    job);
	c->m_unfinished = stats_counter(
	    s, "mcpsd_housekeeping_unfinished_total",
	    "Runs of a housekeeping job that stopped at their budget with "
	    "work left (resumed on a later run)",
	    job);
}

int cron_add(struct cron *c, enum cron_lane lane, const char *name,
             unsigned interval_ms, cron_fn fn, void *arg)
{
	struct cron_lane_run *l;
	int rc = 0;

	if ((unsigned)lane >= CRON_LANES)
		return -EINVAL;
	l = &c->lanes[lane];
	pthread_mutex_lock(&c->lock);
	if (c->started)
		rc = -EBUSY;
	else if (l->n >= CRON_JOBS_MAX)
		rc = -ENOSPC;
	else
		l->jobs[l->n++] = (struct cron_job){
		    .name = name,
		    .interval_ms = interval_ms ? interval_ms : 1000,
		    .fn = fn,
		    .arg = arg};
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* The job due first (the first registered on a tie), and when. Locked. */
static struct cron_job *cron_first(struct cron_lane_run *l, long long *due)
{
	struct cron_job *first = NULL;

	for (int i = 0; i < l->n; i++)
		if (!first || l->jobs[i].due < first->due)
			first = &l->jobs[i];
	*due = first ? first->due : mono_ms() + 60000;
	return first;
}

/* Records a run that began at start and said next. Unlocked. */
static void cron_record(struct cron *c, const struct cron_job *j,
                        long long start, long long end, enum cron_next next)
{
	const char *const values[] = {j->name, NULL};
	long long took = end - start;

	stats_observe(c->m_seconds, values, (double)took / 1000.0);
	if (took > (long long)c->budget_ms)
		stats_add(c->m_overruns, values, 1);
	if (next == CRON_MORE)
		stats_add(c->m_unfinished, values, 1);
	if (took > CRON_LOG_SLOW_MS)
		log_info("housekeeping job %s took %lld ms", j->name, took);
}

static void *cron_main(void *arg)
{
	struct cron_lane_run *l = arg;
	struct cron *c = l->c;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		long long due, start = mono_ms(), end;
		struct cron_job *j = cron_first(l, &due);
		enum cron_next next;

		if (!j || due > start) {
			struct timespec ts;

			mono_timespec(&ts, due);
			pthread_cond_timedwait(&l->cond, &c->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&c->lock);
		next = j->fn(j->arg, start + c->budget_ms);
		end = mono_ms();
		cron_record(c, j, start, end, next);
		pthread_mutex_lock(&c->lock);
		/* Resumed after a pause, so the lane's other jobs get turns;
		 * otherwise on its period, counted from when this run began. */
		j->due = next == CRON_MORE ? end + c->budget_ms
		                           : start + j->interval_ms;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Stops and joins the threads started so far. */
static void cron_stop(struct cron *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	for (int i = 0; i < CRON_LANES; i++)
		pthread_cond_signal(&c->lanes[i].cond);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < CRON_LANES; i++)
		if (c->lanes[i].running) {
			pthread_join(c->lanes[i].thread, NULL);
			c->lanes[i].running = false;
		}
}

int cron_start(struct cron *c)
{
	long long now = mono_ms();

	pthread_mutex_lock(&c->lock);
	if (c->started) {
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	for (int i = 0; i < CRON_LANES; i++)
		for (int k = 0; k < c->lanes[i].n; k++)
			c->lanes[i].jobs[k].due =
			    now + c->lanes[i].jobs[k].interval_ms;
	c->started = true;
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < CRON_LANES; i++) {
		struct cron_lane_run *l = &c->lanes[i];
		int rc;

		if (!l->n)
			continue;
		rc = pthread_create(&l->thread, NULL, cron_main, l);
		if (rc != 0) {
			cron_stop(c);
			return -rc;
		}
		l->running = true;
	}
	return 0;
}

void cron_destroy(struct cron *c)
{
	if (!c)
		return;
	cron_stop(c);
	for (int i = 0; i < CRON_LANES; i++)
		pthread_cond_destroy(&c->lanes[i].cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
