/* SPDX-License-Identifier: MIT */
/*
 * slots: the cap on runs at once and the bounded queue in front of it,
 * shared fairly between tenants. A run takes a slot before it starts and
 * gives it back when it ends. Each tenant may hold at most a number of
 * slots (tenant_max_running, 0: no cap of its own) and keep at most a
 * number of runs waiting (tenant_max_queued); past the latter it is refused
 * at once, whatever room the shared queue has, so no tenant fills the queue
 * for the others. When a slot frees, it goes to the waiter whose tenant
 * runs the fewest runs at that moment, then whose tenant was served least
 * recently, the oldest among equals: tenants take turns, so one that
 * queued many runs cannot make another wait behind all of them. Past
 * the shared queue's length callers are refused with an estimate of when
 * to retry. A waiting caller can be cancelled (its eventfd) and draining
 * refuses the waiters and waits for the running. Scheduling knows nothing
 * of what a run is; a tenant is an opaque name.
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
	unsigned tenant_max_running; /* 0: none of its own */
	unsigned tenant_max_queued;  /* as applied (see slots_create) */
	unsigned tenants;            /* tenants running or waiting */
	unsigned long long runs_total;
	unsigned avg_run_ms; /* recent runs, for retry estimates */
	bool draining;
};

/*
 * Caller owns; free with slots_destroy. NULL when out of memory.
 * max_running 0 counts as 1. tenant_max_queued is applied as at most
 * queue_length - 1 when the queue has two places or more, so one place
 * always stays for another tenant; 0 means that bound.
 */
struct slots *slots_create(unsigned max_running, unsigned queue_length,
                           unsigned tenant_max_running,
                           unsigned tenant_max_queued);

/* Frees; nothing may be waiting. NULL-safe. */
void slots_destroy(struct slots *s);

/*
 * Takes a slot for tenant (NULL counts as ""; copied), waiting when every
 * slot is taken or the tenant holds its share. When it has to wait it
 * calls on_queued(arg, position from 1 in the shared queue) once first
 * (may be NULL). Returns 0 (release with slots_release and the same
 * tenant), -EBUSY when the shared queue is full, -EDQUOT when the tenant
 * already has tenant_max_queued runs waiting (for both *retry_s estimates
 * when to try again), -ECANCELED when cancel_fd became readable while
 * waiting (-1 for none), -ESHUTDOWN when draining, or another negative
 * errno (-ENOMEM).
 */
__attribute__((warn_unused_result)) int
slots_acquire(struct slots *s, const char *tenant, int cancel_fd,
              void (*on_queued)(void *arg, unsigned pos), void *arg,
              unsigned *retry_s);

/*
 * Gives tenant's slot back; it goes to the fairest waiter (see above) or
 * becomes free. run_ms > 0 feeds the average run time behind retry
 * estimates and counts a run.
 */
void slots_release(struct slots *s, const char *tenant, long long run_ms);

/*
 * Refuses everyone waiting and every later caller, then waits up to
 * timeout_ms for the running. Returns how many still run.
 */
unsigned slots_drain(struct slots *s, unsigned timeout_ms);

void slots_stats(struct slots *s, struct slots_stats *out);

/* What tenant holds now: runs running and waiting (0 for a stranger). */
void slots_tenant(struct slots *s, const char *tenant, unsigned *running,
                  unsigned *queued);

#endif
