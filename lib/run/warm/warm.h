/* SPDX-License-Identifier: MIT */
/*
 * warm: warm sessions. A conversation keeps one box per language alive
 * between runs; inside it the agent (docs/agent-protocol.md) runs each
 * call: in a persistent Python kernel (variables, imports and data
 * survive), or as a fresh process for other languages (no box start). A
 * small pool of pre-started boxes per language (Python's with numpy,
 * pandas and matplotlib imported) makes a conversation's first call warm
 * too: a pool box is claimed by exactly one conversation, the backend
 * hands it its workspace (box_hand_over), and it never returns to the pool.
 *
 * Limits: an idle session ends after SANDBOX_WARM_IDLE_SECONDS, every
 * session after SANDBOX_WARM_MAX_SECONDS (a label the reaper enforces even
 * without this process); at most SANDBOX_WARM_MAX boxes, and no more than
 * SANDBOX_WARM_MEMORY_MB of their memory limits, are warm at once (idle
 * ones are evicted least recently used first, never a busy one, and with
 * fair shares between tenants: a tenant that holds SANDBOX_WARM_MAX / the
 * tenants holding sessions evicts only its own); when none can be had, a
 * run goes one-off and says so. A box's whole CPU time, measured on the
 * host, is charged to its tenant's budget, between runs too. A timeout or
 * cancel interrupts first (state kept), kills the kernel after
 * SANDBOX_INTERRUPT_GRACE_MS (state lost), and kills the box when the agent
 * does not answer. Why a session's state was lost is kept per
 * conversation and language and told with the next run, also across a
 * daemon restart (a marker file per live session under SANDBOX_ROOT).
 *
 * Everything a box sends is hostile: frames are bounded and validated and
 * any violation ends only that session.
 *
 * Threads: every function is thread-safe. Runs of one conversation are
 * serialized by the caller (the workspace lock); a session in use is never
 * touched by the housekeeping job.
 */
#ifndef MCPSD_WARM_H
#define MCPSD_WARM_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "config/config.h"
#include "run/catalog.h"
#include "run/request.h"

struct egress;
struct warm;
struct budget;

/*
 * Creates the manager: installs the agent under SANDBOX_ROOT/agent, has
 * the backend ready its hand-over of workspaces to pool boxes
 * (backend_handover_prepare: the pool is disabled, with a log line saying
 * why, when that is not possible) and notes an earlier boot's live
 * sessions as ended by a daemon restart. be is borrowed and must outlive it.
 * Caller owns; free with warm_destroy. -errno with a message for a person in
 * err.
 */
__attribute__((warn_unused_result)) int
warm_create(const struct config *cfg, struct backend *be, const char *boot,
            struct warm **out, char *err, size_t errlen);

/*
 * Lets runs with network use warm sessions through eg (borrowed; it must
 * outlive w): boxes made from now on can join an egress network for one
 * run. Call once, before the first run.
 */
void warm_set_egress(struct warm *w, struct egress *eg);

/*
 * Ends every session and pool box, then frees. Sessions hold workspace
 * handles: call before the workspace manager is destroyed. NULL-safe.
 */
void warm_destroy(struct warm *w);

/*
 * Runs req (which names its workspace) in the warm session of its
 * conversation and img's language, creating or claiming one as needed.
 * Returns 0 with res filled (res->session says what happened to the
 * state), or -EAGAIN when no warm session can be had now (capacity or
 * memory; res->session.reason says which), in which case the caller runs
 * it one-off. Blocks for the run.
 */
__attribute__((warn_unused_result)) int
warm_run(struct warm *w, const struct runner_request *req,
         const struct catalog_image *img, struct runner_result *res);

/*
 * Runs req one-off (limits other than the sessions') in a pool box of img's
 * language instead of a new container: the box's limits become the run's
 * (box_limits), the workspace is handed over as to a session, the code runs as
 * a warm run's does, and the box ends with the run; the conversation's own
 * session, if any, is not touched and no state is saved or loaded. A
 * language with a kernel (Python) only for runs whose memory is at least
 * SANDBOX_MEMORY_MB: its interpreter, started with the pool box, may hold
 * more than a smaller run may use. Returns 0 with res filled (session "none",
 * from_pool), or -EAGAIN when no pool box is ready, the backend cannot change
 * limits, or the box failed before the code reached it: the caller starts a
 * container of its own.
 */
__attribute__((warn_unused_result)) int
warm_run_once(struct warm *w, const struct runner_request *req,
              const struct catalog_image *img, struct runner_result *res);

/*
 * Charges the CPU time of warm boxes to their tenants in b (borrowed; it
 * must outlive w; NULL: counted, not charged). A run's result carries
 * what to charge for it (runner_result.cpu_charge_ms: the box's CPU time
 * since its last charge, between runs included); the housekeeping tick
 * charges idle boxes. Call before the first run.
 */
void warm_set_budget(struct warm *w, struct budget *b);

/*
 * Housekeeping (cron.h, every second): charges the CPU time idle sessions
 * used (measured on the host) to their tenants' budgets, ends those that
 * keep using it while their tenant is over budget, ends idle and over-age
 * sessions and refills the pool from the catalog snapshot cat (borrowed).
 */
void warm_tick(struct warm *w, const struct catalog *cat);

/*
 * Leases between replicas (lease.h): what this daemon keeps of the
 * workspace named ws: 0 no session, 1 idle sessions, 2 a busy one.
 */
int warm_holds(struct warm *w, const char *ws);

/*
 * Hands the workspace ws over to another replica: ends its idle sessions
 * once each one's last state save is written (the box idle for
 * WARM_HAND_OFF_SETTLE_MS and no save in progress; at most
 * WARM_HAND_OFF_WAIT_MS). 0, or -EBUSY when a session became busy.
 */
#define WARM_HAND_OFF_SETTLE_MS 300
#define WARM_HAND_OFF_WAIT_MS 5000
int warm_hand_off(struct warm *w, const char *ws);

struct warm_stats {
	unsigned sessions; /* claimed by a conversation */
	unsigned busy;
	unsigned pool;          /* ready in the pool */
	unsigned pool_starting; /* in the pool, not ready yet */
	unsigned max;
	unsigned long long memory_mb; /* limits of all warm boxes */
	unsigned long long memory_budget_mb;
	unsigned long long started, reused, evicted, expired;
	/* CPU time of idle sessions charged to their tenants (threads left
	 * running between calls), and sessions ended for it */
	unsigned long long idle_cpu_ms, cpu_ended;
	bool pool_enabled;
};
void warm_stats(struct warm *w, struct warm_stats *out);

/* Adds "warm" to a /healthz document. Always true. */
bool warm_health(void *w, cJSON *health);

#endif
