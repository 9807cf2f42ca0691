/* SPDX-License-Identifier: MIT */
/*
 * cron: see cron.h. One mutex guards the job table's schedule and the stop
 * flag; the thread sleeps on a condition variable until the earliest job
 * is due, a job is woken, or the loop is stopped.
 */
#include "util/cron.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/mono.h"

struct cron_job {
	const char *name;
	unsigned interval_ms;
	cron_fn fn;
	void *arg;
	long long due; /* mono_ms */
};

struct cron {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct cron_job jobs[CRON_JOBS_MAX];
	int n;
	bool started, stop;
	pthread_t thread;
};

struct cron *cron_create(void)
{
	struct cron *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	mono_cond_init(&c->cond);
	return c;
}

int cron_add(struct cron *c, const char *name, unsigned interval_ms, cron_fn fn,
             void *arg)
{
	int id;

	pthread_mutex_lock(&c->lock);
	if (c->started) {
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	if (c->n >= CRON_JOBS_MAX) {
		pthread_mutex_unlock(&c->lock);
		return -ENOSPC;
	}
	id = c->n++;
	c->jobs[id] =
	    (struct cron_job){.name = name,
	                      .interval_ms = interval_ms ? interval_ms : 1000,
	                      .fn = fn,
	                      .arg = arg};
	pthread_mutex_unlock(&c->lock);
	return id;
}

static void *cron_main(void *arg)
{
	struct cron *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		long long now = mono_ms(), next = now + 60000;
		int due = -1;

		for (int i = 0; i < c->n; i++) {
			if (c->jobs[i].due <= now && due < 0)
				due = i;
			if (c->jobs[i].due < next)
				next = c->jobs[i].due;
		}
		if (due < 0) {
			struct timespec ts;

			mono_timespec(&ts, next);
			pthread_cond_timedwait(&c->cond, &c->lock, &ts);
			continue;
		}
		/* Rescheduled before it runs, so a wake during it counts. */
		c->jobs[due].due = now + c->jobs[due].interval_ms;
		pthread_mutex_unlock(&c->lock);
		c->jobs[due].fn(c->jobs[due].arg);
		{
			long long took = mono_ms() - now;

			if (took > 5000)
				log_info("housekeeping job %s took %lld ms",
				         c->jobs[due].name, took);
		}
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int cron_start(struct cron *c)
{
	long long now = mono_ms();
	int rc;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->n; i++)
		c->jobs[i].due = now + c->jobs[i].interval_ms;
	c->started = true;
	pthread_mutex_unlock(&c->lock);
	rc = pthread_create(&c->thread, NULL, cron_main, c);
	if (rc != 0) {
		pthread_mutex_lock(&c->lock);
		c->started = false;
		pthread_mutex_unlock(&c->lock);
		return -rc;
	}
	return 0;
}

void cron_wake(struct cron *c, int job)
{
	pthread_mutex_lock(&c->lock);
	if (job >= 0 && job < c->n) {
		c->jobs[job].due = 0;
		pthread_cond_signal(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
}

void cron_destroy(struct cron *c)
{
	bool started;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	started = c->started;
	c->stop = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (started)
		pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
