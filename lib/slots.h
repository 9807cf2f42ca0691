/* SPDX-License-Identifier: MIT */
/*
 * slots: the cap on runs at once and the bounded FIFO queue in front of it.
 * A run takes a slot before it starts and gives it back when it ends; when
 * every slot is taken, callers wait in arrival order, up to the queue's
 * length, after which they are refused at once with an estimate of when
 * to retry. A waiting caller can be cancelled (its eventfd) and draining
 * refuses the waiters and waits for the running. Scheduling knows nothing
 * of what a run is.
 *
 * Threads: every function is thread-safe.
 */
#ifndef MCPSD_SLOTS_H
#define MCPSD_SLOTS_H

#include <stdbool.h>

struct slots;

struct slots_stats {
	unsigned running;
	unsigned queued;
	unsigned max_running;
	unsigned queue_length;
	unsigned long long runs_total;
	unsigned avg_run_ms; /* recent runs, for retry estimates */
	bool draining;
};

/* Caller owns; free with slots_destroy. NULL when out of memory. */
struct slots *slots_create(unsigned max_running, unsigned queue_length);

/* Frees; nothing may be waiting. NULL-safe. */
void slots_destroy(struct slots *s);

/*
 * Takes a slot, waiting in FIFO order behind earlier callers. When it has
 * to wait it calls on_queued(arg, position from 1) once first (may be
 * NULL). Returns 0 (release with slots_release), -EBUSY when the queue is
 * full (*retry_s estimates when to try again), -ECANCELED when cancel_fd
 * became readable while waiting (-1 for none), -ESHUTDOWN when draining,
 * or another negative errno.
 */
__attribute__((warn_unused_result)) int
slots_acquire(struct slots *s, int cancel_fd,
              void (*on_queued)(void *arg, unsigned pos), void *arg,
              unsigned *retry_s);

/*
 * Gives a slot back: to the first waiter, or free. run_ms > 0 feeds the
 * average run time behind retry estimates and counts a run.
 */
void slots_release(struct slots *s, long long run_ms);

/*
 * Refuses everyone waiting and every later caller, then waits up to
 * timeout_ms for the running. Returns how many still run.
 */
unsigned slots_drain(struct slots *s, unsigned timeout_ms);

void slots_stats(struct slots *s, struct slots_stats *out);

#endif
