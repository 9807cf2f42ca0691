/* SPDX-License-Identifier: MIT */
/*
 * warm_agent: one warm box and the daemon's side of the agent protocol
 * (docs/agent-protocol.md): installing the agent, starting a box with it,
 * claiming a pool box for a conversation (the backend hands the box its
 * workspace: box_hand_over), and driving one call: exec, output,
 * interrupt, kill. The agent speaks over the box's lasting channel
 * (box_channel). The
 * table of boxes, the pool and their limits are warm.c's; this file knows
 * one box at a time.
 *
 * Whatever a box sends is hostile: frames are bounded by
 * AGENTFRAME_MAX, JSON is parsed only from whole frames of that size, ids
 * must match the exec, and any violation ends the box (and only it).
 *
 * Threads: a box is used by one thread at a time; the environment is
 * read-only after warm_context_init.
 */
#ifndef MCPSD_WARM_AGENT_H
#define MCPSD_WARM_AGENT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend/backend.h"
#include "config/config.h"
#include "run/catalog.h"
#include "run/request.h"
#include "run/warm/agentframe.h"

#define WARM_KEY_LEN (64 + 1 + CATALOG_NAME_MAX + 1) /* "<ws>.<lang>" */
#define WARM_REASON_LEN 24
#define WARM_TENANT_LEN 65 /* AUTH_TENANT_MAX + 1 */

struct workspace;

/* What every box needs to know, fixed at start-up. */
struct egress;

struct warm_context {
	const struct config *cfg;
	struct backend *be;
	char boot[17];
	char agent_dir[PATH_MAX];      /* SANDBOX_ROOT/agent/<hash> */
	char agent_host_dir[PATH_MAX]; /* ... as the engine's host sees it */
	char runs_dir[PATH_MAX];       /* SANDBOX_ROOT/runs */
	char runs_host_dir[PATH_MAX];  /* ... as the engine's host sees it */
	/* Runs with network (egress.h; borrowed), or NULL: none warm. */
	struct egress *egress;
};

struct warm_box {
	struct warm_box *next;  /* in warm.c's lists */
	char key[WARM_KEY_LEN]; /* "" while in the pool */
	char lang[CATALOG_NAME_MAX + 1];
	char image_id[80];
	char id[17]; /* names runs/w-<id> and pool/<id> */
	struct box *box;
	struct box_stream *stream;
	struct agentframe_decoder dec;
	char dir[PATH_MAX];      /* runs/w-<id>, mounted at /sandbox */
	int dir_fd;              /* dir, held (oneoff_dir_hold), or -1 */
	char host_dir[PATH_MAX]; /* ... as the engine's host sees it */
	struct workspace *hold;  /* keeps the workspace open and mounted */
	bool kernel;             /* the language keeps state (Python) */
	bool ready;              /* the agent can take an exec */
	bool busy;               /* warm.c: a run has it */
	bool dead;               /* it cannot run anything more */
	char dead_reason[WARM_REASON_LEN];
	char dead_detail[200];      /* what the engine said, or "" */
	char lost[WARM_REASON_LEN]; /* state lost while idle (from R) */
	/* Durable sessions: the next exec loads the saved state first. */
	bool restore_next;
	bool restoring; /* the exec running now loads the saved state */
	/* One one-off run (warm_run_once): set before the claim, which ends
	 * the kernel (its program runs as a process); no state saved. */
	bool once;
	unsigned calls;
	long long oom_kills_seen; /* the cgroup's OOM kills at the last D */
	uint64_t next_id;
	long long last_used_ms; /* mono_ms */
	long long ready_ms;     /* how long the start took */
	long long started_ms;   /* mono_ms of the start */
	long long ready_by;     /* a pool box's deadline for its R */
	time_t expires_at;      /* wall clock: the maximum lifetime */
	/* warm.c: the run its state is saved under after its last call
	 * (durable sessions; 0: unknown), for a hand-over to wait for */
	unsigned long long save_run;
	/*
	 * warm.c's accounting: the tenant whose conversation claimed the box
	 * ("" in the pool and without authentication), and the box's CPU
	 * time (the engine host's cgroup, out of the box's reach) already
	 * charged to it: -1 while unknown. bg_cpu_ms: charged by the
	 * housekeeping tick since the last run, told with the next one.
	 */
	char tenant[WARM_TENANT_LEN];
	long long cpu_base_ms;
	long long bg_cpu_ms;
};

/*
 * Fills env: writes the embedded agent and kernel into
 * SANDBOX_ROOT/agent/<hash>/ (once per content), the run directory.
 * -errno with a message for a person.
 */
__attribute__((warn_unused_result)) int
warm_context_init(struct warm_context *env, const struct config *cfg,
                  struct backend *be, const char *boot, char *err,
                  size_t errlen);

/*
 * Readies the backend to hand pool boxes their workspace later
 * (backend_handover_prepare). -errno with why in err (the pool is then
 * off).
 */
__attribute__((warn_unused_result)) int
warm_pool_prepare(struct warm_context *env, char *err, size_t errlen);

/*
 * Starts a box of img running the agent. For a conversation (req and key
 * given) its workspace is /data and is held open, and the call waits until
 * the agent is ready. For the pool (both NULL) /data is an empty pool
 * directory, a Python kernel preloads SANDBOX_POOL_PRELOAD, and the call
 * returns once the box runs: b->ready turns true when a later
 * warm_box_poll reads the agent's R, which must come by b->ready_by.
 * Caller owns *out (warm_box_destroy).
 */
__attribute__((warn_unused_result)) int
warm_box_start(const struct warm_context *env, const struct catalog_image *img,
               const struct runner_request *req, const char *key,
               struct warm_box **out, char *err, size_t errlen);

/* Where a run works in a box: /data, or /tmp for a syntax check, which
 * gets no workspace (the checker must not see or touch it). */
static inline const char *warm_exec_dir(const struct runner_request *req)
{
	return req->check ? "/tmp" : "/data";
}

/*
 * Gives a pool box to the conversation of req: the backend hands the box
 * its workspace at /data (box_hand_over) and the agent is told to change
 * to it. For a one-off run (b->once) the agent also ends its kernel for
 * good and answers once it is gone; b->kernel turns false. A syntax check
 * (b->once and req->check) gets no workspace: the box keeps its empty pool
 * /data and the agent changes to /tmp.
 */
__attribute__((warn_unused_result)) int
warm_box_claim(const struct warm_context *env, struct warm_box *b,
               const struct runner_request *req, const char *key, char *err,
               size_t errlen);

/*
 * Reads what an idle box sent (a new kernel's R, the end of its stream)
 * without waiting and without asking the engine anything. 0 when it is
 * alive, -EPIPE when its stream ended, another -errno when it broke the
 * protocol. See warm_box_ended.
 */
__attribute__((warn_unused_result)) int warm_box_poll(struct warm_box *b);

/*
 * b's stream ended (rc -EPIPE: asks the engine why) or broke the protocol
 * (any other rc): kills the box and marks it dead with the reason.
 */
void warm_box_ended(struct warm_box *b, int rc);

/*
 * Whether an idle box is still alive (warm_box_poll, then warm_box_ended
 * when not). Returns false with b->dead_reason set when it died.
 */
bool warm_box_alive(const struct warm_context *env, struct warm_box *b);

/*
 * Whether the host side of b is whole: its code directory is still the one
 * mounted at /sandbox, and what the backend keeps for it is (box_intact:
 * an unclaimed pool box's mount point; what the agent and container do is
 * warm_box_poll's). Cheap (no engine
 * call, no wait); when false, detail says what is damaged.
 */
bool warm_box_intact(const struct warm_box *b, char *detail, size_t len);

/* Stops and removes the box and releases all it holds. */
void warm_box_destroy(const struct warm_context *env, struct warm_box *b);

#endif
