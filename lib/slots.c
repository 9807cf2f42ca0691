/* SPDX-License-Identifier: MIT */
/*
 * slots: see slots.h. One mutex guards the counters and the queue; each
 * waiter sleeps in poll(2) on an eventfd of its own (with its cancellation
 * eventfd beside it), written when it is granted a slot or refused.
 */
#include "slots.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util/mono.h"

#define SLOTS_AVG_INIT_MS 2000

struct slots_waiter {
	struct slots_waiter *next;
	int fd; /* eventfd written when granted or refused */
	bool granted, refused;
};

struct slots {
	unsigned max_running, queue_length;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot became free (drain) */
	unsigned running, queued;
	struct slots_waiter *qhead, *qtail;
	bool draining;
	unsigned long long runs_total;
	double avg_run_ms;
};

struct slots *slots_create(unsigned max_running, unsigned queue_length)
{
	struct slots *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->max_running = max_running ? max_running : 1;
	s->queue_length = queue_length;
	s->avg_run_ms = SLOTS_AVG_INIT_MS;
	pthread_mutex_init(&s->lock, NULL);
	mono_cond_init(&s->cond);
	return s;
}

void slots_destroy(struct slots *s)
{
	if (!s)
		return;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Seconds until a new caller would likely get a slot. Lock held. */
static unsigned slots_retry_estimate(const struct slots *s)
{
	/* Every queued run ahead of a new caller needs one slot-time. */
	double waves = (double)(s->queued + 1) / (double)s->max_running;
	double secs = ceil(waves * s->avg_run_ms / 1000.0);

	return secs < 1 ? 1 : secs > 600 ? 600 : (unsigned)secs;
}

/* Takes w out of the queue if it is still there. Lock held. */
static void slots_unlink(struct slots *s, struct slots_waiter *w)
{
	struct slots_waiter **pp = &s->qhead, *prev = NULL;

	while (*pp && *pp != w) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = w->next;
		if (s->qtail == w)
			s->qtail = prev;
		s->queued--;
	}
}

int slots_acquire(struct slots *s, int cancel_fd,
                  void (*on_queued)(void *arg, unsigned pos), void *arg,
                  unsigned *retry_s)
{
	struct slots_waiter w = {.fd = -1};
	unsigned pos;
	int rc;

	*retry_s = 0;
	pthread_mutex_lock(&s->lock);
	if (s->draining) {
		pthread_mutex_unlock(&s->lock);
		return -ESHUTDOWN;
	}
	if (s->running < s->max_running && !s->qhead) {
		s->running++;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (s->queued >= s->queue_length) {
		*retry_s = slots_retry_estimate(s);
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	w.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w.fd < 0) {
		rc = -errno;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	if (s->qtail)
		s->qtail->next = &w;
	else
		s->qhead = &w;
	s->qtail = &w;
	pos = ++s->queued;
	pthread_mutex_unlock(&s->lock);

	if (on_queued)
		on_queued(arg, pos);
	for (;;) {
		struct pollfd p[2] = {{.fd = w.fd, .events = POLLIN},
		                      {.fd = cancel_fd, .events = POLLIN}};
		int n = poll(p, cancel_fd >= 0 ? 2 : 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents || (cancel_fd >= 0 && p[1].revents))
			break;
	}
	pthread_mutex_lock(&s->lock);
	if (w.granted) {
		rc = 0;
	} else if (w.refused) {
		rc = -ESHUTDOWN;
	} else {
		slots_unlink(s, &w); /* cancelled while waiting */
		rc = -ECANCELED;
	}
	pthread_mutex_unlock(&s->lock);
	close(w.fd);
	return rc;
}

void slots_release(struct slots *s, long long run_ms)
{
	uint64_t one = 1;

	pthread_mutex_lock(&s->lock);
	if (run_ms > 0) {
		s->avg_run_ms = 0.8 * s->avg_run_ms + 0.2 * (double)run_ms;
		s->runs_total++;
	}
	if (s->qhead) {
		struct slots_waiter *w = s->qhead;

		s->qhead = w->next;
		if (!s->qhead)
			s->qtail = NULL;
		s->queued--;
		w->granted = true; /* the slot passes to it */
		if (write(w->fd, &one, sizeof(one)) < 0)
			log_warn("waking a queued run");
	} else {
		s->running--;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

unsigned slots_drain(struct slots *s, unsigned timeout_ms)
{
	long long end = mono_ms() + timeout_ms;
	uint64_t one = 1;
	unsigned left;

	pthread_mutex_lock(&s->lock);
	s->draining = true;
	while (s->qhead) {
		struct slots_waiter *w = s->qhead;

		s->qhead = w->next;
		s->queued--;
		w->refused = true;
		if (write(w->fd, &one, sizeof(one)) < 0)
			log_warn("refusing a queued run");
	}
	s->qtail = NULL;
	while (s->running > 0 && mono_ms() < end) {
		struct timespec ts;

		mono_timespec(&ts, end);
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	left = s->running;
	pthread_mutex_unlock(&s->lock);
	return left;
}

void slots_stats(struct slots *s, struct slots_stats *out)
{
	pthread_mutex_lock(&s->lock);
	out->running = s->running;
	out->queued = s->queued;
	out->max_running = s->max_running;
	out->queue_length = s->queue_length;
	out->runs_total = s->runs_total;
	out->avg_run_ms = (unsigned)s->avg_run_ms;
	out->draining = s->draining;
	pthread_mutex_unlock(&s->lock);
}
