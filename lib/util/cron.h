/* SPDX-License-Identifier: MIT */
/*
 * cron: the daemon's one housekeeping loop (redis's serverCron). Modules
 * expose their periodic work as jobs (session expiry, runner discovery,
 * reaping, workspace retention, warm-session expiry and pool refill) and
 * cmd/ registers them here; one thread runs each job when its interval has
 * passed, one job at a time, so housekeeping never competes with itself.
 * A job that must run sooner (discovery after an image vanished) is woken.
 *
 * Jobs run without any lock of cron's held and may block (an engine call
 * has its own timeout); a slow job delays the others, never requests.
 * Timing that must hold to the second whatever the engine does (the HTTP
 * slow-client watchdog) does not belong here.
 *
 * Threads: cron_add before cron_start; everything else is thread-safe.
 */
#ifndef MCPSD_CRON_H
#define MCPSD_CRON_H

#define CRON_JOBS_MAX 16

struct cron;

typedef void (*cron_fn)(void *arg);

/* Caller owns; free with cron_destroy. NULL when out of memory. */
struct cron *cron_create(void);

/*
 * Registers fn(arg) to run every interval_ms (first run one interval after
 * cron_start). name is static, for logs. Returns a job number for
 * cron_wake, or -ENOSPC past CRON_JOBS_MAX, -EBUSY after cron_start.
 */
__attribute__((warn_unused_result)) int cron_add(struct cron *c,
                                                 const char *name,
                                                 unsigned interval_ms,
                                                 cron_fn fn, void *arg);

/* Starts the thread. 0 or -errno. */
__attribute__((warn_unused_result)) int cron_start(struct cron *c);

/* Runs job soon (on the cron thread), whatever its interval says. */
void cron_wake(struct cron *c, int job);

/* Stops the thread (the job running, if any, finishes first) and frees. */
void cron_destroy(struct cron *c);

#endif
