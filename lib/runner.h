/* SPDX-License-Identifier: MIT */
/*
 * runner: the entrance of the run layer; runner_run takes a request and
 * dispatches it. A struct runner owns
 *   - the catalog of runner images (run/catalog.h), discovered by label
 *     (sandbox.runner=true) by a housekeeping job and on demand, with a
 *     callback when it changes (so MCP clients can be told tools/list
 *     changed);
 *   - the execution backend (backend.h; the local Docker engine today),
 *     which turns what to run into a hardened box;
 *   - the slots (run/slots.h): a cap on runs at once, a bounded queue;
 *   - the choice of where a run goes: its conversation's warm session
 *     (run/warm/warm.h) or a box of its own (run/oneoff.h), after its
 *     packages are installed (run/packages.h).
 * Arguments are checked by run/run_arguments.h before anything starts. The
 * request, the result and the cancel are run/request.h's, which every part
 * of the run layer shares.
 *
 * Why here, in lib/ and not in run/: the dispatcher calls run/ and
 * run/warm/, and run/warm/ uses pieces of run/; with the dispatcher inside
 * run/, the two folders would include each other. Calls go one way:
 * runner -> run/warm -> run.
 *
 * Threads: every function is thread-safe. Catalog snapshots are immutable
 * and reference-counted. Periodic work (discovery, reaping) runs in the
 * job functions below, which cmd/ registers with cron.h.
 */
#ifndef MCPSD_RUNNER_H
#define MCPSD_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "config/config.h"
#include "run/catalog.h"
#include "run/request.h"
#include "util/cron.h"

struct runner;

/* ---- the catalog ----------------------------------------------------------
 */

/*
 * Takes a reference to the current catalog of runner images (see
 * catalog.h); release with catalog_put. Never NULL after runner_create.
 */
struct catalog *runner_catalog_get(struct runner *r);

/* ---- one run ------------------------------------------------------------ */

/*
 * Runs req. Returns 0 with res filled for anything that happened to the
 * run, engine trouble included (status RUNNER_ERROR with a message), and
 * RUNNER_BUSY at once when the queue is full, RUNNER_RATE_LIMITED at once
 * when the tenant has used its CPU budget or has as many runs waiting as it
 * may. Returns a negative errno with
 * a message for the caller in res->message when the request was refused
 * before any work: -ENOENT unknown language (the message lists the
 * available ones), -EOPNOTSUPP a check asked of a runner without one
 * (the message lists those with one), -EINVAL bad limits, sizes or
 * variables, -EPERM network asked for but not allowed by the operator,
 * -ESHUTDOWN draining. Blocks for the run; release res with
 * runner_result_finish in every case.
 */
__attribute__((warn_unused_result)) int
runner_run(struct runner *r, const struct runner_request *req,
           struct runner_result *res);

/* ---- the runner --------------------------------------------------------- */

typedef void (*runner_changed_fn)(void *arg);

/*
 * Creates a runner from cfg (borrowed; must outlive it): a Docker client,
 * the seccomp profile, a random boot id, SANDBOX_ROOT/runs; then discovers
 * images and reaps leftovers once (both fail softly when the engine is
 * down: the threads retry) and starts the threads. Caller owns; free with
 * runner_destroy. -errno with a message for a person in err.
 */
__attribute__((warn_unused_result)) int runner_create(const struct config *cfg,
                                                      struct runner **out,
                                                      char *err, size_t errlen);

/*
 * Stops the threads, removes containers still queued for removal and frees
 * the runner. Runs must have ended (see runner_drain). Warm sessions hold
 * their workspaces open: destroy the runner before the workspace manager.
 * NULL-safe.
 */
void runner_destroy(struct runner *r);

struct stats;

/*
 * Registers the runner's metrics in s (runs by status, language and
 * tenant; run and queue time; runs running and queued; warm boxes) and
 * counts into them from now on. s must outlive r.
 */
void runner_set_stats(struct runner *r, struct stats *s);

struct budget;

/*
 * Applies a per-tenant CPU budget (budget.h; borrowed, must outlive r):
 * runs of a tenant past it are refused with RUNNER_RATE_LIMITED, and every
 * run that started is charged its CPU time when it ends (wall time x cpus
 * when the CPU time is unknown). Call before runs start; NULL for none.
 */
void runner_set_budget(struct runner *r, struct budget *b);

/* Sets the catalog change callback; it runs on a runner thread. */
void runner_set_changed_cb(struct runner *r, runner_changed_fn fn, void *arg);

/*
 * Rediscovers images now (at most once every two seconds; later calls
 * return the last outcome). Calls the change callback if the catalog
 * changed. 0 or -errno with a message.
 */
__attribute__((warn_unused_result)) int
runner_refresh(struct runner *r, char *err, size_t errlen);

/*
 * Removes leftover containers now (see the file comment). Returns the
 * number removed or -errno with a message.
 */
__attribute__((warn_unused_result)) int runner_reap(struct runner *r, char *err,
                                                    size_t errlen);

/*
 * Stops accepting runs (queued ones are refused), then waits up to
 * timeout_ms for running ones. Returns how many are still running.
 */
unsigned runner_drain(struct runner *r, unsigned timeout_ms);

struct runner_stats {
	unsigned running;
	unsigned queued;
	unsigned max_concurrent;
	unsigned queue_length;
	unsigned long long runs_total;
	size_t runners; /* images in the catalog */
	bool draining;
	unsigned avg_run_ms; /* recent runs, for retry estimates */
};
void runner_stats(struct runner *r, struct runner_stats *out);

/*
 * Adds "docker" (engine reachable, versions, last error) and "runs"
 * (running, queued, limits, runners found) to a /healthz document; false
 * when runs cannot happen (engine unreachable or no runner image). The
 * signature matches http_health_fn; data is the runner.
 */
bool runner_health(void *runner, cJSON *health);

/* The execution backend (borrowed, valid until runner_destroy). */
struct backend *runner_backend(struct runner *r);

/* The configuration it was created with (borrowed). */
const struct config *runner_config(const struct runner *r);

/* This process's boot id (16 hex characters, borrowed). */
const char *runner_boot_id(const struct runner *r);

/* ---- housekeeping jobs (cron.h) ---------------------------------------- */

/* Warm sessions: expiry and the pool (every second). */
/*
 * For lease_set_holder (lib/run/lease.h): what this daemon keeps of the
 * workspace named ws (warm_holds; 0 without warm sessions), and handing
 * it over to another replica (warm_hand_off). runner is a struct runner.
 */
int runner_lease_holds(void *runner, const char *ws);
int runner_lease_hand_off(void *runner, const char *ws);

enum cron_next runner_job_warm(void *runner, long long deadline_ms);

/* Rediscovers runner images (SANDBOX_DISCOVERY_INTERVAL_SECONDS). */
enum cron_next runner_job_discover(void *runner, long long deadline_ms);

/* Removes leftover boxes (SANDBOX_REAP_INTERVAL_SECONDS). */
enum cron_next runner_job_reap(void *runner, long long deadline_ms);

/*
 * Removes leftover code directories under runs/ (oneoff_sweep), with a
 * budget: CRON_MORE when it stopped at deadline_ms with more to look at.
 */
enum cron_next runner_job_runs(void *runner, long long deadline_ms);

/* ---- pieces exposed for tests ------------------------------------------- */

#endif
