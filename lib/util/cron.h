/* SPDX-License-Identifier: MIT */
/*
 * cron: the daemon's housekeeping loops (redis's serverCron). Modules expose
 * their periodic work as jobs and cmd/ registers them here, each on a lane:
 * one thread per lane runs the lane's jobs one at a time, the earliest due
 * first, so housekeeping never competes with itself within a lane and a
 * slow lane never delays a prompt one. The daemon's jobs, by lane:
 *
 *   CRON_PROMPT  jobs that keep a promise to the second and touch only
 *                memory and short store statements: task-cancels (a cancel
 *                sent to another replica stops the task within a second),
 *                replica (the heartbeat of MCP_REPLICA_NAME, late past the
 *                lease and other replicas fail this one's tasks), sessions
 *                (idle sessions end).
 *   CRON_SLOW    jobs that wait on the engine or walk disks and tables:
 *                discovery, reaper, runs (leftover code directories), warm
 *                (warm box expiry and the pool), workspaces (retention),
 *                tasks (expired task records), oauth (expired rows).
 *   CRON_WRITES  deferred writes people wait to see, which must wait neither
 *                on the engine nor behind a slow walk: notebook (the
 *                notebooks' copies in /data, workspace_job_deferred).
 *
 * Each run of a job has a budget (redis's activeExpireCycle): a deadline it
 * is handed, budget_ms after it starts. A job that walks an unbounded set
 * does at least one item, stops once the deadline has passed, keeps where it
 * stopped, and returns CRON_MORE: it runs again budget_ms later (or later
 * still when other jobs of its lane are due first) rather than a whole
 * period later, so a lane spends at most about half its time on one long
 * job. Short jobs ignore the deadline and return CRON_DONE. A run that
 * takes longer than the budget is an overrun (one item was slow, or the
 * engine was); overruns are counted, and runs past 5 s are logged.
 *
 * Metrics (cron_set_stats): mcpsd_housekeeping_seconds{job} (histogram of
 * each run's duration), mcpsd_housekeeping_overruns_total{job} and
 * mcpsd_housekeeping_unfinished_total{job} (runs that stopped at their
 * budget with work left).
 *
 * Jobs run without any lock of cron's held and may block (an engine call
 * has its own timeout). Timing that must hold to the second whatever the
 * engine does (the HTTP slow-client watchdog) does not belong here.
 *
 * Threads: cron_set_stats and cron_add before cron_start; cron_destroy from
 * one thread, not from a job.
 */
#ifndef MCPSD_CRON_H
#define MCPSD_CRON_H

#include <stdbool.h>

#define CRON_JOBS_MAX 16
#define CRON_BUDGET_MS 100 /* the daemon's budget of one run of a job */

struct cron;
struct stats;

enum cron_lane {
	CRON_PROMPT,
	CRON_SLOW,
	CRON_WRITES,
	CRON_LANES,
};

/* What a job says when it returns. */
enum cron_next {
	CRON_DONE, /* nothing left: run again one period after this run began */
	CRON_MORE, /* stopped at the deadline with work left: resume soon */
};

/*
 * A job. deadline_ms (mono_ms) is when this run's budget ends; a job that
 * walks an unbounded set checks it with cron_past after each item.
 */
typedef enum cron_next (*cron_fn)(void *arg, long long deadline_ms);

/*
 * Caller owns; free with cron_destroy. budget_ms (at least 1) is each
 * run's budget and the pause before a job that returned CRON_MORE resumes.
 * NULL when out of memory.
 */
struct cron *cron_create(unsigned budget_ms);

/* Registers the metrics above in s (borrowed, must outlive c). */
void cron_set_stats(struct cron *c, struct stats *s);

/*
 * Registers fn(arg) on lane to run every interval_ms (first run one
 * interval after cron_start). name is static, for logs and metrics.
 * Returns 0, -EINVAL for an unknown lane, -ENOSPC past CRON_JOBS_MAX jobs
 * on a lane, -EBUSY after cron_start.
 */
__attribute__((warn_unused_result)) int
cron_add(struct cron *c, enum cron_lane lane, const char *name,
         unsigned interval_ms, cron_fn fn, void *arg);

/* Starts a thread for each lane that has jobs. 0 or -errno. */
__attribute__((warn_unused_result)) int cron_start(struct cron *c);

/* Whether deadline_ms (mono_ms) has passed: a budgeted job stops then. */
bool cron_past(long long deadline_ms);

/*
 * Stops the threads (a job running finishes first; a job that returned
 * CRON_MORE is not resumed) and frees. NULL-safe.
 */
void cron_destroy(struct cron *c);

#endif
