/* SPDX-License-Identifier: MIT */
/*
 * oneoff: a run in a box of its own, made for it and removed after it: the
 * code written to a fresh directory mounted read-only at /sandbox, the box
 * created and attached before it starts (so no output is lost), its stream
 * driven with caps (capture.h), the time limit counted from the start, a
 * kill at the limit or a cancel (after closing the stream: moby#41827),
 * the engine asked how it ended. Used when warm sessions are off or cannot
 * be had, for runs with network, and by every backend that has no warm
 * boxes.
 *
 * Threads: thread-safe; a run's state lives on the calling thread.
 */
#ifndef MCPSD_ONEOFF_H
#define MCPSD_ONEOFF_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "config/config.h"
#include "run/catalog.h"
#include "run/request.h"

/*
 * What one-off runs need; filled by the runner, read-only afterwards but for
 * the sweep's place, which only oneoff_sweep touches.
 */
struct egress;

struct oneoff_context {
	const struct config *cfg;
	struct backend *be;
	struct egress *egress;   /* runs with network go through it; or NULL */
	char runs_dir[PATH_MAX]; /* SANDBOX_ROOT/runs */
	char runs_host_dir[PATH_MAX]; /* ... as the engine's host sees it */
	DIR *sweep_dir;               /* a walk of runs_dir left unfinished */
	unsigned sweep_removed;       /* ... and what it removed so far */
};

/*
 * Runs req in a fresh box of img and fills res. Returns -ENOENT when the
 * image vanished before the box was made (res says so; the caller may
 * retry with a fresh catalog), else 0.
 */
__attribute__((warn_unused_result)) int
oneoff_run(const struct oneoff_context *env, const struct runner_request *req,
           const struct catalog_image *img, struct runner_result *res);

/*
 * Opens the code directory at path and holds it: while the returned
 * descriptor is open, oneoff_sweep leaves the directory alone whatever its
 * age (a shared flock, which the sweep must take exclusively first; it goes
 * with the process, so a crash leaves nothing held). Caller owns the
 * descriptor (close it to let go). -errno on failure.
 */
__attribute__((warn_unused_result)) int oneoff_dir_hold(const char *path);

/*
 * Removes code directories under runs/ that nobody holds and that are
 * older than SANDBOX_RUNS_SWEEP_SECONDS (by default, than any run can be):
 * what a crash left. Stops once deadline_ms (mono_ms; LLONG_MAX for a whole
 * pass) has passed, after one directory at least, and returns true when
 * the walk has more to go: the next call goes on where this one stopped.
 * One caller at a time (start-up, then the housekeeping thread).
 */
bool oneoff_sweep(struct oneoff_context *env, long long deadline_ms);

/* Forgets an unfinished sweep (closes its walk). */
void oneoff_sweep_finish(struct oneoff_context *env);

/* Everything that varies between one-off runs, for oneoff_box_spec. */
struct oneoff_spec {
	const struct catalog_image *image;
	const char *run_id;              /* 16 hex */
	const char *code_host_dir;       /* mounted read-only at /sandbox */
	const char *workspace_host_path; /* mounted at /data, or NULL */
	const char *file_base_url;       /* or NULL */
	const char *tenant_fp;           /* or NULL */
	const char *const *env;
	size_t n_env;
	bool network;
	/* Through the egress proxy: the box's network, its variables. */
	const struct box_egress *egress;
	const char *const *egress_env;
	size_t n_egress_env;
	unsigned timeout_s;
	unsigned memory_mb; /* 0: SANDBOX_MEMORY_MB */
	double cpus;        /* 0: SANDBOX_CPUS */
	/* The variable that loads /sandbox/inputs.json, or NULL. */
	const char *inputs_env;
	time_t deadline; /* unix seconds, for the label */
	/* The image's sandbox.check instead of its command; no /data. */
	bool check;
	/* A package installer (packages.h): argv instead of the command,
	 * on the installers' network, without the runs' package paths. */
	const char *const *argv;
	size_t n_argv;
	bool install;
	/* An installer's own writable directory, mounted at
	 * ONEOFF_STAGE_PATH, or NULL. */
	const char *stage_host_dir;
};

/* Where an installer box has its staging directory (packages.c). */
#define ONEOFF_STAGE_PATH "/stage"

/*
 * How a program of a language gets run_code's inputs as a ready variable
 * `inputs` besides /sandbox/inputs.json: a helper file written next to the
 * code (in /sandbox) and a variable that makes the runtime load it first.
 * Python: sitecustomize.py on PYTHONPATH sets builtins.inputs; TypeScript
 * and JavaScript (Bun): a --preload in BUN_OPTIONS sets globalThis.inputs.
 * Other languages: all NULL (the file only).
 */
struct oneoff_inputs {
	const char *file; /* helper file name in /sandbox */
	const char *text; /* its contents */
	const char *env;  /* "NAME=value" */
};
void oneoff_inputs_for(const char *language, struct oneoff_inputs *out);

#define ONEOFF_INPUTS_FILE "inputs.json"

/*
 * The variables that put the conversation's package cache (docs/runners.md)
 * and the inputs' helper (inputs_env: oneoff_inputs_for's env, or NULL) on
 * the path of a program of img: *pkg, PYTHONPATH or R's R_LIBS (R leaves
 * out a directory that does not exist), NULL when packages do not apply;
 * *inputs, inputs_env unless *pkg carries it (one PYTHONPATH, /sandbox
 * first). Caller frees *pkg. 0 or -ENOMEM.
 */
__attribute__((warn_unused_result)) int
oneoff_path_env(const struct config *cfg, const struct catalog_image *img,
                const char *inputs_env, char **pkg, const char **inputs);

/* Storage for what oneoff_box_spec's box_spec points to. */
struct oneoff_spec_store {
	const char *cmd[CATALOG_COMMAND_MAX + 80];
	char limit_arg[24];
	const char **env;
	char *base_url_env;
	char *pythonpath_env;
};

/*
 * The box of a one-off run of spec: the image's command behind its
 * watchdog, HOME, LANG, FILE_BASE_URL and the caller's variables, the code
 * directory read-only at /sandbox, the workspace at /data, labels. Pure;
 * out points into st and spec (release st with oneoff_spec_store_finish).
 * -EINVAL, -ENOMEM.
 */
__attribute__((warn_unused_result)) int
oneoff_box_spec(const struct config *cfg, const struct oneoff_spec *spec,
                struct box_spec *out, struct oneoff_spec_store *st);
void oneoff_spec_store_finish(struct oneoff_spec_store *st);

#endif
