/* SPDX-License-Identifier: MIT */
/*
 * runner: runs untrusted code in fresh Docker containers. A struct runner
 * owns
 *   - the catalog of runner images (catalog.h), discovered by label
 *     (sandbox.runner=true) every SANDBOX_DISCOVERY_INTERVAL_SECONDS and on
 *     demand, with a callback when it changes (so MCP clients can be told
 *     tools/list changed);
 *   - the container create body, which follows ../shared/SECURITY.md: no
 *     network unless allowed and asked for, memory with equal swap, CPU and
 *     pids limits, all capabilities dropped, no-new-privileges, the seccomp
 *     profile of seccomp.h, read-only root with a capped /tmp, Init, private
 *     IPC, ulimits, no logging, an unprivileged uid:gid, bind Mounts only;
 *   - one execution: create (attached) -> start -> stdin -> output with
 *     caps -> wait -> inspect, with the time limit counted from container
 *     start, then removal off the caller's critical path;
 *   - a global cap on running containers with a bounded FIFO queue;
 *   - a reaper that removes containers of earlier boots of this instance
 *     and any managed container past its deadline label.
 * The container lifecycle (runner.c) and driving one execution's stream
 * (attachio.h) are separate layers, so a container can later outlive a
 * run (warm containers with docker exec).
 *
 * Threads: every function is thread-safe. runner_create starts three
 * threads (housekeeping: discovery and reaping; removal of finished
 * containers). Catalog snapshots are immutable and reference-counted.
 */
#ifndef MCPSD_RUNNER_H
#define MCPSD_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "catalog.h"
#include "config.h"
#include "docker.h"

#define RUNNER_LABEL_PREFIX "sandbox."
#define RUNNER_WATCHDOG_GRACE_S 5 /* in-container deadline after ours */
#define RUNNER_REAP_GRACE_S 60    /* past sandbox.deadline before reaping */

struct runner;
struct runner_cancel;

/* ---- the catalog ----------------------------------------------------------
 */

/*
 * Takes a reference to the current catalog of runner images (see
 * catalog.h); release with catalog_put. Never NULL after runner_create.
 */
struct catalog *runner_catalog_get(struct runner *r);

/* ---- environment variables ---------------------------------------------- */

/*
 * Checks one caller variable: the name matches [A-Za-z_][A-Za-z0-9_]{0,127}
 * and is not injected by the server (HOME, LANG, FILE_BASE_URL) nor one
 * that would subvert the container's own programs (LD_*, any name starting
 * with SANDBOX_). -EINVAL with the rule in err.
 */
__attribute__((warn_unused_result)) int
runner_env_check(const char *name, const char *value, char *err, size_t errlen);

/*
 * Turns a JSON object of string -> string into "NAME=value" strings after
 * runner_env_check on each, with the total of name, '=', value and a NUL
 * over all variables at most max_bytes. NULL or JSON null gives none.
 * *out is a NULL-terminated array (caller frees with runner_env_free).
 */
__attribute__((warn_unused_result)) int
runner_env_from_json(const cJSON *obj, size_t max_bytes, char ***out, size_t *n,
                     char *err, size_t errlen);
void runner_env_free(char **env);

/* ---- one run ------------------------------------------------------------ */

enum runner_status {
	RUNNER_COMPLETED = 0, /* exited 0 */
	RUNNER_FAILED,        /* exited non-zero */
	RUNNER_TIMED_OUT,
	RUNNER_OOM_KILLED, /* also when a child was killed, main exit 0 */
	RUNNER_OUTPUT_LIMIT,
	RUNNER_CANCELLED,
	RUNNER_BUSY,  /* queue full; see retry_after_s */
	RUNNER_ERROR, /* engine trouble; see message */
};

/* "completed", "failed", "timed_out", ... */
const char *runner_status_name(enum runner_status s);

enum runner_event {
	RUNNER_EVENT_QUEUED,  /* arg: position in the queue, from 1 */
	RUNNER_EVENT_STARTED, /* the container started; arg 0 */
};

struct runner_request {
	const char *language; /* language or alias */
	const char *code;
	size_t code_len;
	const char *stdin_data; /* may be NULL */
	size_t stdin_len;
	const char *const *env; /* "NAME=value", checked again here */
	size_t n_env;
	bool network;
	unsigned timeout_s;              /* 0: SANDBOX_TIMEOUT_SECONDS */
	const char *workspace_host_path; /* mounted at /data, or NULL */
	const char *file_base_url;       /* FILE_BASE_URL, or NULL */
	const char *tenant;           /* fingerprinted into a label, or NULL */
	int stdout_fd, stderr_fd;     /* full copies up to the hard cap; -1 */
	struct runner_cancel *cancel; /* or NULL */
	/* Optional; called on the caller's thread; must not block long. */
	void (*on_event)(void *arg, enum runner_event ev, unsigned n);
	void *event_arg;
};

struct runner_output {
	char *text;     /* head and tail, valid UTF-8, owned */
	size_t total;   /* bytes the program wrote to the stream */
	bool truncated; /* text is not the whole stream */
	size_t saved;   /* bytes copied to the caller's fd */
};

struct runner_result {
	enum runner_status status;
	int exit_code; /* -1 when the process did not exit by itself */
	bool timed_out;
	bool oom_killed;
	struct runner_output out, err;
	long long duration_ms; /* from container start; 0 if not started */
	long long queue_ms;
	unsigned retry_after_s; /* RUNNER_BUSY */
	unsigned timeout_s;     /* the limit that applied */
	char language[40];
	char image[256];
	char image_id[80];
	char version[64];
	char container[16]; /* short id, "" when none was made */
	char message[512];  /* RUNNER_ERROR, RUNNER_BUSY: what happened */
};

/* Frees the texts of a result. NULL-safe. */
void runner_result_finish(struct runner_result *res);

/*
 * Runs req. Returns 0 with res filled for anything that happened to the
 * run, engine trouble included (status RUNNER_ERROR with a message), and
 * RUNNER_BUSY at once when the queue is full. Returns a negative errno with
 * a message for the caller in res->message when the request was refused
 * before any work: -ENOENT unknown language (the message lists the
 * available ones), -EINVAL bad limits, sizes or variables, -EPERM network
 * asked for but not allowed by the operator, -ESHUTDOWN draining. Blocks
 * for the run; release res with runner_result_finish in every case.
 */
__attribute__((warn_unused_result)) int
runner_run(struct runner *r, const struct runner_request *req,
           struct runner_result *res);

/* ---- cancellation ------------------------------------------------------- */

/* A one-shot cancellation flag a run watches. Caller owns. */
__attribute__((warn_unused_result)) int
runner_cancel_create(struct runner_cancel **out);
void runner_cancel_destroy(struct runner_cancel *c);
/*
 * Cancels: a queued run leaves the queue, a running container is killed.
 * Never blocks; callable from any thread, before or during the run.
 */
void runner_cancel_trigger(void *cancel);
bool runner_cancel_requested(const struct runner_cancel *c);

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
 * the runner. Runs must have ended (see runner_drain). NULL-safe.
 */
void runner_destroy(struct runner *r);

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
 * The reaper's decision for one container summary of GET /containers/json:
 * true when it carries sandbox.managed=true and either belongs to owner
 * with a boot id other than boot, or its sandbox.deadline plus
 * RUNNER_REAP_GRACE_S is before now. Pure.
 */
bool runner_reap_wanted(const cJSON *summary, const char *owner,
                        const char *boot, time_t now);

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

/* The Docker client (borrowed): docker_health() for /healthz. */
struct docker *runner_docker(struct runner *r);

/* The configuration it was created with (borrowed). */
const struct config *runner_config(const struct runner *r);

/* This process's boot id (16 hex characters, borrowed). */
const char *runner_boot_id(const struct runner *r);

/* ---- pieces exposed for tests ------------------------------------------- */

/* Everything that varies between runs, for runner_create_body. */
struct runner_spec {
	const struct catalog_image *image;
	const char *run_id;              /* 16 hex */
	const char *code_host_dir;       /* mounted read-only at /sandbox */
	const char *workspace_host_path; /* mounted at /data, or NULL */
	const char *file_base_url;       /* or NULL */
	const char *tenant_fp;           /* or NULL */
	const char *const *env;
	size_t n_env;
	bool network;
	unsigned timeout_s;
	time_t deadline; /* unix seconds, for the label */
};

/*
 * The JSON body of POST /containers/create for spec under cfg, with the
 * given SecurityOpt seccomp entry and identity labels. Pure. Caller owns;
 * NULL on allocation failure.
 */
cJSON *runner_create_body(const struct config *cfg, const char *seccomp_opt,
                          const char *owner, const char *boot,
                          const struct runner_spec *spec);

#endif
