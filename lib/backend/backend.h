/* SPDX-License-Identifier: MIT */
/*
 * backend: the seam between running code and the engine that runs it, and
 * the registry of engines chosen by name (SANDBOX_BACKEND). An execution
 * backend makes *boxes* (a container on one Docker engine, a service of a
 * Docker Swarm) from a spec that says what to run and with which limits,
 * and gives access to a box's standard streams. The hardening that turns a
 * spec into the engine's own terms (capabilities, seccomp, read-only root,
 * user, tmpfs, ulimits, logging) is the backend's job and never the
 * caller's, so every backend applies all of it.
 *
 * A box's lifecycle (create, start, signal, wait, inspect, release) is
 * separate from what runs inside it: a one-off run attaches to the box's
 * main process; a warm session keeps a box, a lasting channel to it
 * (box_channel) and hands it its workspace while it runs (box_hand_over).
 *
 * Modelled on curl's struct Curl_ssl and available_backends[] (a table of
 * operations per backend, chosen by name, with capability bits the callers
 * ask instead of testing which backend it is), wlroots' wlr_backend_impl
 * (every object begins with a pointer to its implementation's table, and
 * the inline functions below call through it) and redis's per-type
 * configure hook (each backend checks its own settings). Generic code asks
 * backend_has(be, BACKEND_CAN_...) and never names a backend.
 *
 * Errors: negative errno with a message for a person in err: -ENOENT (the
 * image or box is gone), -ECONNREFUSED / -ETIMEDOUT (the engine is not
 * answering), -EBUSY, -EINVAL, -ENOMEM, -EIO, -EPROTO.
 *
 * Threads: the registry is constant. A backend is shared by all threads and
 * its functions are thread-safe. A box belongs to one thread at a time,
 * except box_signal, which may be called from any thread while another
 * uses the box. A stream belongs to one thread at a time.
 */
#ifndef MCPSD_BACKEND_H
#define MCPSD_BACKEND_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>

#define BOX_MOUNTS_MAX 4
#define BOX_LABELS_MAX 8

struct backend;
struct box;
struct box_stream;
struct config;
struct stats;

struct box_label {
	const char *key; /* "sandbox.<name>" */
	const char *value;
};

struct box_mount {
	const char *source; /* path on the engine's host; must exist */
	const char *target; /* path in the box */
	bool read_only;
	/*
	 * Mounts made later below source on the host appear in the box
	 * (bind propagation "rslave"). source must then be on a shared mount.
	 */
	bool follow_host_mounts;
};

/*
 * A run's way out through the egress proxy (lib/egress/egress.h): the
 * network of its own it joins (internal, no host address, only the proxy
 * besides it) and its address there, which the proxy knows its policy by.
 */
struct box_egress {
	const char *network;
	const char *ip;
};

/* What to run. Every pointer is borrowed for the duration of box_create. */
struct box_spec {
	const char *image;      /* image id */
	const char *name;       /* unique name for the engine, or NULL */
	const char *const *cmd; /* argv of the main process */
	size_t n_cmd;
	const char *const *env; /* "NAME=value" */
	size_t n_env;
	const char *workdir;
	/* sandbox.kind, .run, .tenant ...; the backend adds its own. */
	struct box_label labels[BOX_LABELS_MAX];
	size_t n_labels;
	struct box_mount mounts[BOX_MOUNTS_MAX];
	size_t n_mounts;
	bool open_stdin; /* the main process reads the stream */
	/*
	 * Backends whose backend_channel_path is not NULL: the main process
	 * connects to that path at start, and box_channel gives that
	 * connection instead of the attach stream (open_stdin is then
	 * not needed). The box then needs a name.
	 */
	bool channel;
	/*
	 * Backends with BACKEND_CAN_WARM: the path in the box of a
	 * directory that is empty until box_hand_over gives it one (a pool
	 * box's /data), or NULL. The box then needs a name.
	 */
	const char *handover;
	/*
	 * The main process is the box's init (PID 1, reaps orphans) instead
	 * of running under the engine's init: the warm agent, which code in
	 * the box then can neither signal nor reach through /proc.
	 */
	bool main_is_init;
	/*
	 * Backends without BACKEND_CAN_STDIN: the path in the box of a file the
	 * main process reads as its standard input (a file of the code
	 * directory), or NULL for none (/dev/null).
	 */
	const char *stdin_path;
	/*
	 * Boxes with the same key never run at once, across every daemon
	 * that shares the engine (the conversation's workspace name), for
	 * backends that can hold such a lock (a Swarm service name); or NULL.
	 */
	const char *exclusive;
	bool network; /* only when the operator allows it */
	/*
	 * With BACKEND_CAN_EGRESS and network: the egress network the box
	 * is on instead (and nothing else), or NULL.
	 */
	const struct box_egress *egress;
	/*
	 * With BACKEND_CAN_EGRESS: the box starts without any network (as
	 * none) but box_join can put it on an egress network later (a warm
	 * box whose conversation may ask for network in a run).
	 */
	bool joinable;
	/* A package installer: SANDBOX_PACKAGES_NETWORK when packages are
	 * on (packages.h), whatever network says. */
	bool install;
	unsigned memory_mb; /* 0: SANDBOX_MEMORY_MB */
	double cpus;        /* 0: SANDBOX_CPUS */
	time_t deadline;    /* unix time after which it may be reaped */
	/*
	 * Account the box's usage so that box_usage can tell it after the
	 * box stopped (a one-off run's peak memory and CPU time).
	 */
	bool measure;
};

/* What a box used, from the kernel's accounting; -1 when unknown. */
struct box_usage {
	long long memory_peak_bytes; /* highest memory use, page cache too */
	long long cpu_ms;            /* CPU time of all its processes */
};

/* A box as the engine last reported it. */
struct box_state {
	bool running;
	bool oom_killed; /* the main process was killed by the OOM killer */
	int exit_code;
	char status[16]; /* "created", "running", "exited", ... */
	char error[256];
};

/* One piece of output: which is 1 (stdout) or 2 (stderr). */
typedef int (*box_output_fn)(void *arg, int which, const char *p, size_t n);

/*
 * What a backend can do besides create, start, wait, signal, release: the
 * bits of backend_impl.features, asked with backend_has.
 */
/* stdin travels through the attach stream (else: spec.stdin_path) */
#define BACKEND_CAN_STDIN 0x01u
/* warm sessions: box_channel, box_hand_over and handover_prepare */
#define BACKEND_CAN_WARM 0x02u
/* installer boxes (spec.install) reach the package indexes */
#define BACKEND_CAN_PACKAGES 0x04u
/* boxes may have a network (spec.network, SANDBOX_ALLOW_NETWORK) */
#define BACKEND_CAN_NETWORK 0x08u
/*
 * spec.exclusive holds across daemons: replicas (MCP_REPLICA_NAME) need no
 * conversation leases (lib/run/lease.h) to keep a conversation's runs apart
 */
#define BACKEND_CAN_REPLICAS 0x10u
/* boxes run on the daemon's host and see mounts it makes (loop quotas) */
#define BACKEND_CAN_HOST_MOUNTS 0x20u
/* an egress proxy and per-run egress networks (egress_* below) */
#define BACKEND_CAN_EGRESS 0x40u

/* The egress proxy container (lib/egress): Squid from its own image. */
struct backend_egress_proxy {
	const char *name;     /* container name, replaced if it exists */
	const char *image;    /* SANDBOX_EGRESS_IMAGE */
	const char *dir;      /* host directory mounted read-only at /egress */
	const char *log_dir;  /* host directory mounted at /egress/log */
	const char *network;  /* the network with a route out */
	unsigned uid;         /* the user Squid runs as */
	const char *instance; /* labels */
};

/*
 * The name the proxy has on every run's egress network (the engine's DNS
 * answers it in the box; other names it does not resolve there).
 */
#define BACKEND_EGRESS_PROXY_ALIAS "mcpsd-egress"

/* One run's egress network: the proxy joins it at proxy_ip. */
struct backend_egress_net {
	const char *name;
	const char *subnet;
	const char *gateway;
	const char *proxy; /* the proxy container's name */
	const char *proxy_ip;
	const char *instance; /* labels */
};

struct backend_impl {
	const char *name;  /* SANDBOX_BACKEND's value */
	unsigned features; /* BACKEND_CAN_* */
	/*
	 * Checks the backend's own settings once the table of settings was
	 * parsed; chosen tells whether SANDBOX_BACKEND names it (a backend
	 * checks the form of its settings either way, and their use only
	 * when chosen). Optional. 0 or -EINVAL with a message.
	 */
	int (*configure)(const struct config *cfg, bool chosen, char *err,
	                 size_t errlen);
	/*
	 * Makes the backend (backend_create). Does not contact the engine.
	 * Caller owns *out.
	 */
	int (*create)(const struct config *cfg, const char *boot,
	              struct backend **out, char *err, size_t errlen);
	/*
	 * Why a capability it lacks is missing, as a phrase for a person
	 * ("its sandbox nodes have no network"), or NULL. Optional.
	 */
	const char *(*lacks)(unsigned feature);
	void (*destroy)(struct backend *be);
	/* Image summaries carrying label (Id, RepoTags, Labels, Created). */
	int (*images)(struct backend *be, const char *label, cJSON **out,
	              char *err, size_t errlen);
	/* Removes boxes left by earlier boots or past their deadline. */
	int (*reap)(struct backend *be, char *err, size_t errlen);
	/* Removes every box of this boot (shutdown). */
	void (*sweep_own)(struct backend *be);
	/* Adds the engine's state to a /healthz document; false if down. */
	bool (*health)(struct backend *be, cJSON *health);
	/* The engine's state in one line for logs and errors. */
	int (*ping)(struct backend *be, char *err, size_t errlen);
	/* Registers the backend's own metrics. Optional. */
	void (*stats)(struct backend *be, struct stats *s);
	/*
	 * With BACKEND_CAN_WARM: readies handing directories to running
	 * boxes (box_hand_over), before the first box with spec.handover.
	 */
	int (*handover_prepare)(struct backend *be, char *err, size_t errlen);
	/*
	 * With BACKEND_CAN_EGRESS (NULL otherwise). proxy_start (re)makes
	 * and starts the proxy; proxy_stop removes it. net_open makes a
	 * run's network and joins the proxy to it: -EADDRINUSE when the
	 * subnet or name is taken (the caller tries another); net_close
	 * undoes it, whatever is left. box_join/box_leave put a running
	 * box on a network and take it off (warm sessions).
	 */
	int (*egress_proxy_start)(struct backend *be,
	                          const struct backend_egress_proxy *p,
	                          char *err, size_t errlen);
	void (*egress_proxy_stop)(struct backend *be, const char *name);
	int (*egress_net_open)(struct backend *be,
	                       const struct backend_egress_net *n, char *err,
	                       size_t errlen);
	void (*egress_net_close)(struct backend *be,
	                         const struct backend_egress_net *n);
	int (*box_join)(struct box *b, const struct box_egress *e, char *err,
	                size_t errlen);
	int (*box_leave)(struct box *b, const struct box_egress *e, char *err,
	                 size_t errlen);
	/*
	 * With BACKEND_CAN_WARM, optional: the path in a box where its main
	 * process finds the socket of its channel (spec.channel), or NULL
	 * when box_channel gives the attach stream (NULL op: always).
	 */
	const char *(*channel_path)(struct backend *be);

	int (*box_create)(struct backend *be, const struct box_spec *spec,
	                  struct box **out, char *err, size_t errlen);
	int (*box_attach)(struct box *b, struct box_stream **out, char *err,
	                  size_t errlen);
	/* With BACKEND_CAN_WARM (NULL otherwise). */
	int (*box_channel)(struct box *b, struct box_stream **out, char *err,
	                   size_t errlen);
	int (*box_hand_over)(struct box *b, int dirfd, char *err,
	                     size_t errlen);
	/* Optional (NULL: what the backend keeps on the host is whole). */
	bool (*box_intact)(const struct box *b, char *detail, size_t len);
	int (*box_start)(struct box *b, char *err, size_t errlen);
	/* Optional (NULL: a started box runs at once). */
	int (*box_wait_running)(struct box *b, int cancel_fd, char *err,
	                        size_t errlen);
	int (*box_wait)(struct box *b, unsigned timeout_ms, char *err,
	                size_t errlen);
	int (*box_inspect)(struct box *b, struct box_state *out, char *err,
	                   size_t errlen);
	int (*box_signal)(struct box *b, const char *sig, char *err,
	                  size_t errlen);
	void (*box_release)(struct box *b);
	/* Optional (NULL: usage is never known). */
	int (*box_usage)(struct box *b, struct box_usage *out, char *err,
	                 size_t errlen);
	/* Optional (NULL: the limits a box was made with are its for good). */
	int (*box_limits)(struct box *b, unsigned memory_mb, double cpus,
	                  char *err, size_t errlen);
};

struct box_stream_impl {
	int (*fd)(const struct box_stream *s);
	bool (*pending)(const struct box_stream *s);
	int (*pump)(struct box_stream *s, box_output_fn fn, void *arg,
	            char *err, size_t errlen);
	ssize_t (*write)(struct box_stream *s, const void *p, size_t n);
	void (*close_write)(struct box_stream *s);
	void (*close)(struct box_stream *s);
};

struct backend {
	const struct backend_impl *impl;
};

struct box {
	const struct backend_impl *impl;
	struct backend *be;
	char id[16]; /* short id for logs and results */
};

struct box_stream {
	const struct box_stream_impl *impl;
};

/* ---- the registry ----------------------------------------------------- */

/*
 * The backend named name ("docker", "swarm"), or NULL when there is none by
 * that name (or name is NULL). The tables are static.
 */
const struct backend_impl *backend_find(const char *name);

/* The backend table i (0, 1, ...), or NULL past the last one. */
const struct backend_impl *backend_at(size_t i);

/*
 * The names of the backends whose features include all of the bits in
 * features (0: every backend), joined by sep: "docker or swarm". Returns
 * out; it is "" when none has them.
 */
const char *backend_names(unsigned features, const char *sep, char *out,
                          size_t len);

/* Whether the backend bi has every bit of feature (BACKEND_CAN_*). */
static inline bool backend_impl_has(const struct backend_impl *bi,
                                    unsigned feature)
{
	return (bi->features & feature) == feature;
}

/*
 * Why bi lacks feature, as a phrase for a person: its own words, or "the
 * <name> backend cannot" when it has none. Static.
 */
const char *backend_lacks(const struct backend_impl *bi, unsigned feature);

/*
 * Checks the choice and every backend's settings after config_load: that
 * SANDBOX_BACKEND names a backend (an unknown name's message lists those
 * there are), each backend's configure hook, and the settings that need a
 * capability the chosen one lacks (SANDBOX_ALLOW_NETWORK,
 * MCP_REPLICA_NAME). 0 or -EINVAL with a message for a person in err.
 */
__attribute__((warn_unused_result)) int
backend_configure(const struct config *cfg, char *err, size_t errlen);

/*
 * Makes the backend SANDBOX_BACKEND names, after backend_configure (run
 * again here). boot is this process's boot id (copied). Does not contact
 * the engine. Caller owns *out (backend_destroy). -errno with a message.
 */
__attribute__((warn_unused_result)) int
backend_create(const struct config *cfg, const char *boot, struct backend **out,
               char *err, size_t errlen);

/* ---- the backend ------------------------------------------------------ */

/* Frees the backend. No box may be left. NULL-safe. */
static inline void backend_destroy(struct backend *be)
{
	if (be)
		be->impl->destroy(be);
}

/* Whether the backend has every bit of feature (BACKEND_CAN_*). */
static inline bool backend_has(const struct backend *be, unsigned feature)
{
	return backend_impl_has(be->impl, feature);
}

/* "docker", ... (static). */
static inline const char *backend_name(const struct backend *be)
{
	return be->impl->name;
}

/* Image summaries with the label ("key=value"); caller owns *out. */
__attribute__((warn_unused_result)) static inline int
backend_images(struct backend *be, const char *label, cJSON **out, char *err,
               size_t errlen)
{
	return be->impl->images(be, label, out, err, errlen);
}

/* Removes leftovers; the number removed or -errno. */
__attribute__((warn_unused_result)) static inline int
backend_reap(struct backend *be, char *err, size_t errlen)
{
	return be->impl->reap(be, err, errlen);
}

static inline void backend_sweep_own(struct backend *be)
{
	be->impl->sweep_own(be);
}

static inline bool backend_health(struct backend *be, cJSON *health)
{
	return be->impl->health(be, health);
}

/* Whether the engine answers now; 0 or -errno with a message. */
__attribute__((warn_unused_result)) static inline int
backend_ping(struct backend *be, char *err, size_t errlen)
{
	return be->impl->ping(be, err, errlen);
}

/* Registers the backend's own metrics in s, if it has any. */
static inline void backend_stats(struct backend *be, struct stats *s)
{
	if (be->impl->stats)
		be->impl->stats(be, s);
}

/*
 * Readies handing directories to running boxes (box_hand_over): once,
 * before the first box with spec.handover is made. -ENOTSUP without
 * BACKEND_CAN_WARM, another -errno with why it cannot (the caller then
 * makes no such box).
 */
__attribute__((warn_unused_result)) static inline int
backend_handover_prepare(struct backend *be, char *err, size_t errlen)
{
	if (!be->impl->handover_prepare) {
		snprintf(err, errlen,
		         "the %s backend cannot hand a running box a directory",
		         be->impl->name);
		return -ENOTSUP;
	}
	return be->impl->handover_prepare(be, err, errlen);
}

/* ---- egress (BACKEND_CAN_EGRESS) ------------------------------------- */

static inline int backend_egress_unsupported(struct backend *be, char *err,
                                             size_t errlen)
{
	snprintf(err, errlen, "the %s backend has no egress proxy",
	         be->impl->name);
	return -ENOTSUP;
}

__attribute__((warn_unused_result)) static inline int
backend_egress_proxy_start(struct backend *be,
                           const struct backend_egress_proxy *p, char *err,
                           size_t errlen)
{
	if (!be->impl->egress_proxy_start)
		return backend_egress_unsupported(be, err, errlen);
	return be->impl->egress_proxy_start(be, p, err, errlen);
}

static inline void backend_egress_proxy_stop(struct backend *be,
                                             const char *name)
{
	if (be->impl->egress_proxy_stop)
		be->impl->egress_proxy_stop(be, name);
}

__attribute__((warn_unused_result)) static inline int
backend_egress_net_open(struct backend *be, const struct backend_egress_net *n,
                        char *err, size_t errlen)
{
	if (!be->impl->egress_net_open)
		return backend_egress_unsupported(be, err, errlen);
	return be->impl->egress_net_open(be, n, err, errlen);
}

static inline void backend_egress_net_close(struct backend *be,
                                            const struct backend_egress_net *n)
{
	if (be->impl->egress_net_close)
		be->impl->egress_net_close(be, n);
}

/*
 * Where a box's main process connects for its channel (spec.channel), or
 * NULL when the backend's box_channel is the attach stream. Borrowed,
 * constant for the backend's life.
 */
static inline const char *backend_channel_path(struct backend *be)
{
	return be->impl->channel_path ? be->impl->channel_path(be) : NULL;
}

/* ---- boxes ------------------------------------------------------------- */

/*
 * Creates a box (not started). Caller owns *out: release with box_release
 * whatever happens next. -ENOENT when the image is gone.
 */
__attribute__((warn_unused_result)) static inline int
box_create(struct backend *be, const struct box_spec *spec, struct box **out,
           char *err, size_t errlen)
{
	return be->impl->box_create(be, spec, out, err, errlen);
}

/*
 * The stream of the box's main process: stdin in, stdout and stderr out.
 * Attach before starting so no output is lost. Caller owns *out (close with
 * box_stream_close, always before killing the box: engines hang a kill
 * while an attach stream is open and unread, moby#41827).
 */
__attribute__((warn_unused_result)) static inline int
box_attach(struct box *b, struct box_stream **out, char *err, size_t errlen)
{
	return b->impl->box_attach(b, out, err, errlen);
}

/*
 * A lasting two-way channel to the box's main process, for the box's whole
 * life (warm sessions speak the agent protocol of docs/agent-protocol.md
 * over it): for a box made with spec.channel, the one connection its main
 * process makes to backend_channel_path (everything it sends comes as
 * stdout; it is taken, and its peer checked, by the first pump that sees
 * it); otherwise the attach stream (what is written reaches its stdin,
 * its stdout and stderr come back). Open it before box_start. Ownership
 * as box_attach's; -ENOTSUP without BACKEND_CAN_WARM.
 */
__attribute__((warn_unused_result)) static inline int
box_channel(struct box *b, struct box_stream **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!b->impl->box_channel) {
		snprintf(err, errlen, "the %s backend has no lasting channel",
		         b->impl->name);
		return -ENOTSUP;
	}
	return b->impl->box_channel(b, out, err, errlen);
}

/*
 * Hands the running box the directory open at dirfd (borrowed; it may be
 * closed afterwards) at spec.handover: the box sees its files from then on,
 * until it is released. Once per box. -EINVAL when the box was made
 * without spec.handover, -EALREADY the second time, -ENOTSUP without
 * BACKEND_CAN_WARM, another -errno with a message.
 */
__attribute__((warn_unused_result)) static inline int
box_hand_over(struct box *b, int dirfd, char *err, size_t errlen)
{
	if (!b->impl->box_hand_over) {
		snprintf(err, errlen,
		         "the %s backend cannot hand a running box a directory",
		         b->impl->name);
		return -ENOTSUP;
	}
	return b->impl->box_hand_over(b, dirfd, err, errlen);
}

/*
 * Whether what the backend keeps on the daemon's host for the box is whole
 * (a hand-over's mount point, say). Cheap: no engine call, no wait. When
 * false, detail says what is damaged.
 */
static inline bool box_intact(const struct box *b, char *detail, size_t len)
{
	return !b->impl->box_intact || b->impl->box_intact(b, detail, len);
}

__attribute__((warn_unused_result)) static inline int
box_start(struct box *b, char *err, size_t errlen)
{
	return b->impl->box_start(b, err, errlen);
}

/*
 * After box_start: waits until the box's program runs (or already ended),
 * for engines that queue a box until there is room for it (a cluster).
 * The time limit of a run starts after it. Returns 0, -ECANCELED when
 * cancel_fd (-1 for none) became readable, -ETIMEDOUT when the engine kept
 * it waiting longer than the backend allows, or another -errno, with a
 * message. 0 at once for backends that do not queue.
 */
__attribute__((warn_unused_result)) static inline int
box_wait_running(struct box *b, int cancel_fd, char *err, size_t errlen)
{
	if (!b->impl->box_wait_running)
		return 0;
	return b->impl->box_wait_running(b, cancel_fd, err, errlen);
}

/* Waits up to timeout_ms until the box stops: 0, -ETIMEDOUT, -errno. */
__attribute__((warn_unused_result)) static inline int
box_wait(struct box *b, unsigned timeout_ms, char *err, size_t errlen)
{
	return b->impl->box_wait(b, timeout_ms, err, errlen);
}

__attribute__((warn_unused_result)) static inline int
box_inspect(struct box *b, struct box_state *out, char *err, size_t errlen)
{
	return b->impl->box_inspect(b, out, err, errlen);
}

/*
 * Sends a signal ("KILL", "INT") to the box's main process; -ESRCH when it
 * is not running, -ENOENT when the box is gone.
 */
__attribute__((warn_unused_result)) static inline int
box_signal(struct box *b, const char *sig, char *err, size_t errlen)
{
	return b->impl->box_signal(b, sig, err, errlen);
}

/*
 * What a box made with spec.measure used, once it has stopped (while it
 * runs: so far). -ENOTSUP when the backend cannot tell (the engine's
 * cgroups are out of this process's reach, the box was not measured),
 * -ENOENT when the accounting is gone; out is then all -1.
 */
__attribute__((warn_unused_result)) static inline int
box_usage(struct box *b, struct box_usage *out, char *err, size_t errlen)
{
	out->memory_peak_bytes = out->cpu_ms = -1;
	if (!b->impl->box_usage) {
		snprintf(err, errlen, "the %s backend does not measure usage",
		         b->impl->name);
		return -ENOTSUP;
	}
	return b->impl->box_usage(b, out, err, errlen);
}

/*
 * Changes a running box's memory limit (MiB, no swap) and CPU share to
 * what a box made with them would have. -ENOTSUP when the backend cannot;
 * a negative errno (the engine refused: the box uses more memory than
 * memory_mb, say) with err.
 */
__attribute__((warn_unused_result)) static inline int
box_limits(struct box *b, unsigned memory_mb, double cpus, char *err,
           size_t errlen)
{
	if (!b->impl->box_limits) {
		snprintf(err, errlen,
		         "the %s backend cannot change a box's "
		         "limits",
		         b->impl->name);
		return -ENOTSUP;
	}
	return b->impl->box_limits(b, memory_mb, cpus, err, errlen);
}

/*
 * Puts a running box on an egress network (join) or takes it off again
 * (leave) (BACKEND_CAN_EGRESS). -ENOTSUP without.
 */
__attribute__((warn_unused_result)) static inline int
box_join(struct box *b, const struct box_egress *e, char *err, size_t errlen)
{
	if (!b->impl->box_join)
		return backend_egress_unsupported(b->be, err, errlen);
	return b->impl->box_join(b, e, err, errlen);
}

__attribute__((warn_unused_result)) static inline int
box_leave(struct box *b, const struct box_egress *e, char *err, size_t errlen)
{
	if (!b->impl->box_leave)
		return backend_egress_unsupported(b->be, err, errlen);
	return b->impl->box_leave(b, e, err, errlen);
}

/*
 * Removes the box (in the background: the caller does not wait) and frees
 * the handle. A running box is killed. What box_hand_over gave it is taken
 * back before this returns (stop the box first: see warm_box_destroy).
 * NULL-safe.
 */
static inline void box_release(struct box *b)
{
	if (b)
		b->impl->box_release(b);
}

/* ---- a box's stream ---------------------------------------------------- */

/* A descriptor to poll(2) for input (and for output room). Borrowed. */
static inline int box_stream_fd(const struct box_stream *s)
{
	return s->impl->fd(s);
}

/* Whether bytes are buffered already: pump before polling. */
static inline bool box_stream_pending(const struct box_stream *s)
{
	return s->impl->pending(s);
}

/*
 * Reads what is available without blocking and hands each piece of output
 * to fn. Returns 1 when something was read, 0 at the end of the stream,
 * -EAGAIN when nothing was there, fn's negative value (which stops it), or
 * another negative errno with a message (-EPROTO, -EMSGSIZE: the stream is
 * malformed). Errors are sticky.
 */
__attribute__((warn_unused_result)) static inline int
box_stream_pump(struct box_stream *s, box_output_fn fn, void *arg, char *err,
                size_t errlen)
{
	return s->impl->pump(s, fn, arg, err, errlen);
}

/* Writes stdin without blocking: the count, -EAGAIN, or -errno (-EPIPE). */
__attribute__((warn_unused_result)) static inline ssize_t
box_stream_write(struct box_stream *s, const void *p, size_t n)
{
	return s->impl->write(s, p, n);
}

/* Ends stdin. */
static inline void box_stream_close_write(struct box_stream *s)
{
	s->impl->close_write(s);
}

/* Closes and frees. NULL-safe. */
static inline void box_stream_close(struct box_stream *s)
{
	if (s)
		s->impl->close(s);
}

#endif
