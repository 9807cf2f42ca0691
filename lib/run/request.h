/* SPDX-License-Identifier: MIT */
/*
 * request: what a run is asked and what it answers, shared by every part of
 * the run layer: the request (struct runner_request), the result and its
 * status names, the events a caller may follow, the one-shot cancel a run
 * watches, and the two helpers each way of running uses to fill a result
 * (the outputs from its captures, and freeing the texts). The names keep
 * the runner_ prefix their callers (tools/, the tests) know them by: they
 * are the requests and results of runner_run (runner.h).
 *
 * Calls go one way: runner.c (lib/, the dispatcher) -> one-off runs
 * (oneoff.c), warm sessions (warm/) and packages (packages.c) -> this
 * module. It calls none of them. The dispatcher lives above run/ rather
 * than in it because warm/ uses pieces of run/ (one-off helpers, the
 * catalog, captures) while the dispatcher calls warm/: inside run/ the two
 * folders would include each other.
 *
 * Threads: a request and a result belong to the thread of the run; a
 * cancel may be triggered from any thread.
 */
#ifndef MCPSD_REQUEST_H
#define MCPSD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* The container's own deadline (its watchdog), this long after ours. */
#define RUNNER_WATCHDOG_GRACE_S 5

struct capture;
struct egress_facts;
struct egress_list;
struct runner_cancel;
struct workspace;

enum runner_status {
	RUNNER_COMPLETED = 0, /* exited 0 */
	RUNNER_FAILED,        /* exited non-zero */
	RUNNER_TIMED_OUT,
	RUNNER_OOM_KILLED, /* also when a child was killed, main exit 0 */
	RUNNER_OUTPUT_LIMIT,
	RUNNER_CANCELLED,
	RUNNER_BUSY, /* queue full; see retry_after_s */
	/* the tenant passed a limit of its own (message, limit, retry_after_s)
	 */
	RUNNER_RATE_LIMITED,
	RUNNER_ERROR, /* engine trouble; see message */
	/*
	 * Stopped because its workspace passed the quota during the run
	 * (workspaces the file system does not hold to it: set by tools_run,
	 * which watches them; message says how far)
	 */
	RUNNER_QUOTA_EXCEEDED,
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
	/*
	 * network: [...]: the names the call asks for, within its tenant's
	 * egress allow-list (egress_policy.h), or NULL for network: true
	 * (the tenant's whole list). Borrowed.
	 */
	const struct egress_list *network_asked;
	/* Internal (runner.c): the resolved allow-list of a run with network
	 * through the egress proxy, or NULL. */
	const struct egress_list *egress;
	unsigned timeout_s; /* 0: SANDBOX_TIMEOUT_SECONDS */
	unsigned memory_mb; /* 0: SANDBOX_MEMORY_MB */
	double cpus;        /* 0: SANDBOX_CPUS */
	/* A JSON object for /sandbox/inputs.json (and `inputs`), or NULL. */
	const char *inputs_json;
	size_t inputs_len;
	const char *workspace_host_path; /* mounted at /data, or NULL */
	/* The workspace (borrowed): warm sessions keep their own handle. */
	struct workspace *workspace;
	const char *workspace_name; /* keys the warm session, or NULL */
	bool session_new;           /* end the warm session first */
	/* Another replica ran the conversation last (lease.h): what this
	 * one keeps of it is stale. "moved" (handed over) or "server_lost"
	 * (that replica stopped answering); NULL otherwise. */
	const char *moved;
	/* Load the saved state after this earlier run first (0: none). */
	unsigned long long rewind_to;
	/* run_code's fork_from: the conversation whose files and state the
	 * caller copies into this one before the run (borrowed), or NULL;
	 * forked: the copy was made (the first run says so). */
	const char *fork_from;
	bool forked;
	bool one_off;              /* a fresh box even when warm is on */
	const char *file_base_url; /* FILE_BASE_URL, or NULL */
	const char *tenant;        /* fingerprinted into a label, or NULL */
	int stdout_fd, stderr_fd;  /* full copies up to the hard cap; -1 */
	/*
	 * Optional, with stdout_fd and stderr_fd -1: makes the file for the
	 * whole copy of stream which (1 stdout, 2 stderr) only once that
	 * output passes the inline budget (capture_lazy_file); returns its fd,
	 * the caller's to close, or -1.
	 */
	int (*output_file)(void *arg, int which);
	void *output_file_arg;
	struct runner_cancel *cancel; /* or NULL */
	/* Optional; called on the caller's thread; must not block long. */
	void (*on_event)(void *arg, enum runner_event ev, unsigned n);
	/*
	 * Optional; sees output as it arrives (which: 1 stdout, 2 stderr),
	 * on the caller's thread; must not block long. Gets event_arg.
	 */
	void (*on_output)(void *arg, int which, const char *p, size_t n);
	/* Optional; called about once a second while the run goes on. */
	void (*on_tick)(void *arg);
	void *event_arg;
	/*
	 * Run the image's syntax check (catalog.h: sandbox.check) on the
	 * code instead of the code: always one-off, never with /data.
	 */
	bool check;
	/* Packages to install into the conversation's cache first
	 * (packages.h), checked there against the image's manager. */
	const char *const *packages;
	size_t n_packages;
	/*
	 * Internal, for the package installer (packages.c): argv instead of
	 * the image's command, on the installers' network
	 * (SANDBOX_PACKAGES_NETWORK), with the file aux_name (aux_text)
	 * beside the code, and none of the run's package paths.
	 */
	const char *const *argv;
	size_t n_argv;
	bool install;
	const char *aux_name;
	const char *aux_text;
	size_t aux_len;
};

struct runner_output {
	char *text;     /* head and tail, valid UTF-8, owned */
	size_t total;   /* bytes the program wrote to the stream */
	bool truncated; /* text is not the whole stream */
	size_t saved;   /* bytes copied to the caller's fd */
};

/* What happened to the warm session's state (see warm.h). */
struct runner_session {
	bool warm;      /* the run used a warm session */
	char state[12]; /* "new", "continued", "restarted", "none" */
	/* restarted: why the earlier state was lost; none: why no session */
	char reason[24];
	bool from_pool; /* new: a pre-started box was claimed */
	bool stateful;  /* variables survive between runs (Python) */
	bool lost;      /* this run ended the state (see lost_reason) */
	char lost_reason[24];
	unsigned calls;              /* runs in this session so far */
	long long memory_bytes;      /* in use after the run; -1 unknown */
	long long memory_peak_bytes; /* highest so far; -1 unknown */
	long long memory_limit_bytes;
	time_t idle_expires_at; /* wall clock */
	time_t expires_at;      /* the session's maximum lifetime */
	/*
	 * Work the session keeps doing between runs (Python threads left
	 * running): threads other than the kernel's main thread alive after
	 * the run, -1 unknown; bytes they printed outside any run of theirs
	 * (dropped, never mixed into a run's output); CPU time the box used
	 * outside runs since the last result (charged to the tenant), -1
	 * unknown.
	 */
	int background_threads;
	long long background_dropped_bytes;
	long long background_cpu_ms;
};

struct runner_result {
	enum runner_status status;
	int exit_code; /* -1 when the process did not exit by itself */
	bool timed_out;
	bool oom_killed;
	struct runner_output out, err;
	long long duration_ms; /* from container start; 0 if not started */
	/*
	 * A warm run's duration_ms in microseconds (0: not measured so): the
	 * agent's round trip, exec frame written to its done frame read.
	 */
	long long duration_us;
	long long queue_ms;
	unsigned retry_after_s; /* RUNNER_BUSY, RUNNER_RATE_LIMITED */
	/* RUNNER_RATE_LIMITED: "cpu_seconds" or "queued_runs" */
	char limit[16];
	unsigned timeout_s; /* the limit that applied */
	char language[40];
	char image[256];
	char image_id[80];
	char version[64];
	char container[16]; /* short id, "" when none was made */
	char message[512];  /* RUNNER_ERROR, RUNNER_BUSY: what happened */
	struct runner_session session;
	/* The value of the last expression (a JSON object of MIME type to
	 * text), owned, or NULL. */
	char *value_json;
	/* Durable sessions: the kernel's report on saving and loading its
	 * state, checked (warm_state_take), as JSON text; owned, or NULL. */
	char *state_json;
	char error_name[64]; /* an uncaught exception's type, or "" */
	long long cpu_ms;    /* CPU time of the run; -1 unknown */
	/*
	 * What the tenant's CPU budget is charged for this run when known
	 * (a warm box's whole CPU time since its last charge, measured on
	 * the host, between runs included); otherwise cpu_ms or an estimate.
	 */
	bool cpu_charge_known;
	long long cpu_charge_ms;
	bool child_oom; /* a process of the run was OOM-killed */
	/*
	 * Highest memory use: a one-off run's own; in a warm session the
	 * session's so far (this run included). -1 unknown.
	 */
	long long memory_peak_bytes;
	unsigned memory_mb; /* the limits that applied */
	double cpus;
	/* Packages (packages.h): what was installed and reused, as JSON
	 * (owned) and a line for people; NULL and "" when none were asked. */
	char *packages_json;
	char packages_note[160];
	bool install_failed;       /* the code did not run: see message */
	long long packages_cpu_ms; /* the installer's CPU time */
	/*
	 * A run through the egress proxy: what it reached and what was
	 * blocked (egress_log.h; owned, freed by runner_result_finish), or
	 * NULL. The audit trail records it (egress_facts).
	 */
	struct egress_facts *egress;
};

/*
 * Moves a run's two captures (capture.h) into res->out and res->err: their
 * texts (allocated, valid UTF-8, head and tail) and totals, then finishes
 * both captures. A capture never initialized leaves its output empty; out
 * of memory makes res an error that says so.
 */
void runner_output_collect(struct capture *out, struct capture *err,
                           struct runner_result *res);

/* Frees the texts of a result. NULL-safe. */
void runner_result_finish(struct runner_result *res);

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
/*
 * Cancels for the quota watch (tools_run): the run stops as on a cancel and
 * ends RUNNER_QUOTA_EXCEEDED; a warm kernel killed on the way is lost with
 * reason quota_kill. NULL-safe.
 */
void runner_cancel_quota(struct runner_cancel *c);
bool runner_cancel_for_quota(const struct runner_cancel *c);
/*
 * Cancels because this replica may have lost the conversation's lease
 * (lease.h's fence; the handle is the cancel): the run stops as on a
 * cancel and ends RUNNER_ERROR, saying why. NULL-safe; a lease_fire_fn.
 */
void runner_cancel_lease(void *cancel);
bool runner_cancel_for_lease(const struct runner_cancel *c);
bool runner_cancel_requested(const struct runner_cancel *c);
/* A descriptor that becomes readable on cancellation; -1 for NULL. */
int runner_cancel_fd(const struct runner_cancel *c);

#endif
