/* SPDX-License-Identifier: MIT */
/*
 * slots: see slots.h. One mutex guards the counters, the tenants and the
 * queue; each waiter sleeps in poll(2) on an eventfd of its own (with its
 * cancellation eventfd beside it), written when it is granted a slot or
 * refused. The queue is kept in arrival order; granting scans it for the
 * fairest waiter, which is cheap at the queue's bounded length.
 *
 * Invariant, after every operation under the lock: no slot is free while a
 * waiter could take it (its tenant under its own cap). So a new caller
 * that finds a free slot and room under its tenant's cap overtakes no one.
 */
#include "run/slots.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"

#define SLOTS_AVG_INIT_MS 2000

/* A tenant running or waiting; freed when it does neither. */
struct slots_tenant {
	struct slots_tenant *next;
	unsigned running, queued;
	unsigned long long last_grant; /* grant_seq of its latest slot */
	char *name;
};

struct slots_waiter {
	struct slots_waiter *next;
	struct slots_tenant *tenant;
	int fd; /* eventfd written when granted or refused */
	bool granted, refused;
};

struct slots {
	unsigned max_running, queue_length;
	unsigned tenant_max_running, tenant_max_queued;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot became free (drain) */
	unsigned running, queued, n_tenants;
	struct slots_waiter *qhead, *qtail;
	struct slots_tenant *tenants;
	bool draining;
	unsigned long long runs_total, grant_seq;
	double avg_run_ms;
};

struct slots *slots_create(unsigned max_running, unsigned queue_length,
                           unsigned tenant_max_running,
                           unsigned tenant_max_queued)
{
	struct slots *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->max_running = max_running ? max_running : 1;
	s->queue_length = queue_length;
	s->tenant_max_running = tenant_max_running;
	if (queue_length >= 2 &&
	    (tenant_max_queued == 0 || tenant_max_queued > queue_length - 1))
		tenant_max_queued = queue_length - 1;
	else if (queue_length < 2)
		tenant_max_queued = queue_length;
	s->tenant_max_queued = tenant_max_queued;
	s->avg_run_ms = SLOTS_AVG_INIT_MS;
	pthread_mutex_init(&s->lock, NULL);
	mono_cond_init(&s->cond);
	return s;
}

void slots_destroy(struct slots *s)
{
	if (!s)
		return;
	while (s->tenants) {
		struct slots_tenant *t = s->tenants;

		s->tenants = t->next;
		free(t->name);
		free(t);
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The tenant's entry, or NULL. Lock held. */
static struct slots_tenant *slots_find(const struct slots *s, const char *name)
{
	struct slots_tenant *t;

	for (t = s->tenants; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

/* The tenant's entry, made when absent; NULL when out of memory. */
static struct slots_tenant *slots_get(struct slots *s, const char *name)
{
	struct slots_tenant *t = slots_find(s, name);

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->name = strdup(name))) {
		free(t);
		return NULL;
	}
	t->next = s->tenants;
	s->tenants = t;
	s->n_tenants++;
	return t;
}

/* Frees the tenant's entry once it neither runs nor waits. Lock held. */
static void slots_put(struct slots *s, struct slots_tenant *t)
{
	struct slots_tenant **pp;

	if (t->running || t->queued)
		return;
	for (pp = &s->tenants; *pp && *pp != t; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = t->next;
		s->n_tenants--;
	}
	free(t->name);
	free(t);
}

/* Whether tenant t may take one more slot. */
static bool slots_under_cap(const struct slots *s, const struct slots_tenant *t)
{
	return s->tenant_max_running == 0 || t->running < s->tenant_max_running;
}

/* Seconds until `ahead` more runs would have had a slot each. */
static unsigned slots_estimate(const struct slots *s, unsigned ahead,
                               unsigned width)
{
	double waves = (double)ahead / (double)(width ? width : 1);
	double secs = ceil(waves * s->avg_run_ms / 1000.0);

	return secs < 1 ? 1 : secs > 600 ? 600 : (unsigned)secs;
}

/* Seconds until a new caller would likely get a slot. Lock held. */
static unsigned slots_retry_estimate(const struct slots *s)
{
	/* Every queued run ahead of a new caller needs one slot-time. */
	return slots_estimate(s, s->queued + 1, s->max_running);
}

/* The same for a tenant at its own queue's bound. Lock held. */
static unsigned slots_tenant_retry(const struct slots *s,
                                   const struct slots_tenant *t)
{
	unsigned width = s->max_running;

	if (s->tenant_max_running && s->tenant_max_running < width)
		width = s->tenant_max_running;
	return slots_estimate(s, t->queued + 1, width);
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
		w->tenant->queued--;
	}
}

/* Whether tenant a deserves the next slot before tenant b. */
static bool slots_fairer(const struct slots_tenant *a,
                         const struct slots_tenant *b)
{
	if (a->running != b->running)
		return a->running < b->running;
	return a->last_grant < b->last_grant;
}

/*
 * The waiter a free slot goes to: among those whose tenant is under its
 * cap, the one whose tenant runs the fewest, then whose tenant was served
 * least recently (tenants take turns), the oldest among equals. NULL when
 * none may take it. Lock held.
 */
static struct slots_waiter *slots_pick(const struct slots *s)
{
	struct slots_waiter *w, *best = NULL;

	for (w = s->qhead; w; w = w->next) {
		if (!slots_under_cap(s, w->tenant))
			continue;
		if (!best || slots_fairer(w->tenant, best->tenant))
			best = w;
	}
	return best;
}

/* Gives tenant t a slot. Lock held. */
static void slots_grant(struct slots *s, struct slots_tenant *t)
{
	s->running++;
	t->running++;
	t->last_grant = ++s->grant_seq;
}

/* Hands free slots to waiters while any may take one. Lock held. */
static void slots_dispatch(struct slots *s)
{
	uint64_t one = 1;
	struct slots_waiter *w;

	while (s->running < s->max_running && (w = slots_pick(s))) {
		slots_unlink(s, w);
		slots_grant(s, w->tenant);
		w->granted = true;
		if (write(w->fd, &one, sizeof(one)) < 0)
			log_warn("waking a queued run");
	}
}

/* Queues w for tenant t; returns its position. Lock held. */
static unsigned slots_enqueue(struct slots *s, struct slots_waiter *w,
                              struct slots_tenant *t)
{
	w->tenant = t;
	if (s->qtail)
		s->qtail->next = w;
	else
		s->qhead = w;
	s->qtail = w;
	t->queued++;
	return ++s->queued;
}

/* Waits until w is granted, refused or cancel_fd fires. */
static int slots_wait(struct slots *s, struct slots_waiter *w, int cancel_fd)
{
	struct slots_tenant *t = w->tenant;
	int rc;

	for (;;) {
		struct pollfd p[2] = {{.fd = w->fd, .events = POLLIN},
		                      {.fd = cancel_fd, .events = POLLIN}};
		int n = poll(p, cancel_fd >= 0 ? 2 : 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents || (cancel_fd >= 0 && p[1].revents))
			break;
	}
	pthread_mutex_lock(&s->lock);
	if (w->granted) {
		rc = 0;
	} else if (w->refused) {
		rc = -ESHUTDOWN;
		slots_put(s, t);
	} else {
		slots_unlink(s, w); /* cancelled while waiting */
		rc = -ECANCELED;
		slots_put(s, t);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int slots_acquire(struct slots *s, const char *tenant, int cancel_fd,
                  void (*on_queued)(void *arg, unsigned pos), void *arg,
                  unsigned *retry_s)
{
	struct slots_waiter w = {.fd = -1};
	struct slots_tenant *t;
	unsigned pos;
	int rc;

	*retry_s = 0;
	pthread_mutex_lock(&s->lock);
	if (s->draining) {
		rc = -ESHUTDOWN;
		goto unlock;
	}
	t = slots_get(s, tenant ? tenant : "");
	if (!t) {
		rc = -ENOMEM;
		goto unlock;
	}
	/* By the invariant, nobody waiting could take this slot. */
	if (s->running < s->max_running && slots_under_cap(s, t)) {
		slots_grant(s, t);
		rc = 0;
		goto unlock;
	}
	if (t->queued >= s->tenant_max_queued && t->queued < s->queue_length) {
		*retry_s = slots_tenant_retry(s, t);
		rc = -EDQUOT;
		goto refuse;
	}
	if (s->queued >= s->queue_length) {
		*retry_s = slots_retry_estimate(s);
		rc = -EBUSY;
		goto refuse;
	}
	w.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w.fd < 0) {
		rc = -errno;
		goto refuse;
	}
	pos = slots_enqueue(s, &w, t);
	pthread_mutex_unlock(&s->lock);

	if (on_queued)
		on_queued(arg, pos);
	rc = slots_wait(s, &w, cancel_fd);
	close(w.fd);
	return rc;
refuse:
	slots_put(s, t);
unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void slots_release(struct slots *s, const char *tenant, long long run_ms)
{
	struct slots_tenant *t;

	pthread_mutex_lock(&s->lock);
	if (run_ms > 0) {
		s->avg_run_ms = 0.8 * s->avg_run_ms + 0.2 * (double)run_ms;
		s->runs_total++;
	}
	t = slots_find(s, tenant ? tenant : "");
	if (t && t->running > 0 && s->running > 0) {
		t->running--;
		s->running--;
		slots_put(s, t);
	} else {
		log_warnx("slots: a release without a slot (a bug)");
	}
	slots_dispatch(s);
	if (s->running < s->max_running)
		pthread_cond_broadcast(&s->cond);
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
		w->tenant->queued--;
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
	out->tenant_max_running = s->tenant_max_running;
	out->tenant_max_queued = s->tenant_max_queued;
	out->tenants = s->n_tenants;
	out->runs_total = s->runs_total;
	out->avg_run_ms = (unsigned)s->avg_run_ms;
	out->draining = s->draining;
	pthread_mutex_unlock(&s->lock);
}

void slots_tenant(struct slots *s, const char *tenant, unsigned *running,
                  unsigned *queued)
{
	const struct slots_tenant *t;

	pthread_mutex_lock(&s->lock);
	t = slots_find(s, tenant ? tenant : "");
	*running = t ? t->running : 0;
	*queued = t ? t->queued : 0;
	pthread_mutex_unlock(&s->lock);
}
