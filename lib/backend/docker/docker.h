/* SPDX-License-Identifier: MIT */
/*
 * docker: a client of the Docker Engine API over its unix socket, and the
 * only code in the daemon that talks to the engine. Requests go through
 * libcurl (CURLOPT_UNIX_SOCKET_PATH) with the API version negotiated from
 * GET /version (at least DOCKER_API_MIN; renegotiated after the engine was
 * unreachable), and every call has its own timeout. Failures become
 * messages a person can act on, returned in an explicit err buffer, and
 * update the engine state reported by docker_health(), so the daemon keeps
 * running while the engine is down and notices by itself when it is back.
 *
 * Attaching to a container hijacks an HTTP connection ("Upgrade: tcp") and
 * hands out the raw socket; its multiplexed stream is parsed by docker_stream.
 *
 * Errors: functions return 0 or a negative errno: -ECONNREFUSED (engine not
 * reachable), -ETIMEDOUT (no answer in time), -ENOENT (HTTP 404), -EBUSY
 * (HTTP 409), -EINVAL (HTTP 400), -EPROTO (unexpected answer), -ENOMEM,
 * -EIO (other engine errors). err always holds a message on failure.
 *
 * Threads: a struct docker is shared by all threads; every function is
 * thread-safe. A struct docker_attach belongs to one thread at a time.
 */
#ifndef MCPSD_DOCKER_H
#define MCPSD_DOCKER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>

#define DOCKER_API_MIN "1.41" /* Docker 20.10 */
#define DOCKER_API_MAX "1.43" /* newest this client was written against */
#define DOCKER_ID_LEN 64      /* hex characters of a full container id */

struct docker;
struct docker_attach;

/* The engine as last seen, for /healthz. */
struct docker_health {
	bool reachable;          /* the last call reached the engine */
	char server_version[32]; /* e.g. "20.10.24+dfsg1"; "" if unknown */
	char api_version[16];    /* negotiated, e.g. "1.41"; "" if not yet */
	char last_error[256];    /* the last failure's message; "" for none */
	time_t last_check;       /* unix time of the last call's outcome */
	time_t last_ok;          /* unix time the engine last answered */
};

/*
 * Creates a client of host ("unix:///path"; only unix sockets) whose calls
 * time out after timeout_s unless a call says otherwise. Does not contact
 * the engine. Caller owns; free with docker_destroy. -EINVAL with a message
 * for a bad host, -ENOMEM.
 */
__attribute__((warn_unused_result)) int docker_create(const char *host,
                                                      unsigned timeout_s,
                                                      struct docker **out,
                                                      char *err, size_t errlen);

/* Frees the client. No call may be running. NULL-safe. */
void docker_destroy(struct docker *d);

/* The DOCKER_HOST it was created with (borrowed, valid until destroy). */
const char *docker_host(const struct docker *d);

/*
 * GET /version: checks that the engine answers, (re)negotiates the API
 * version and refreshes the health record. -ENOTSUP when the engine's API
 * is older than DOCKER_API_MIN.
 */
__attribute__((warn_unused_result)) int docker_ping(struct docker *d, char *err,
                                                    size_t errlen);

/* Copies the health record. Never contacts the engine. */
void docker_health(struct docker *d, struct docker_health *out);

/*
 * GET /info: the engine's system information (CgroupDriver, CgroupVersion,
 * ...). Caller owns *out (cJSON_Delete).
 */
__attribute__((warn_unused_result)) int
docker_engine_info(struct docker *d, cJSON **out, char *err, size_t errlen);

/* ---- images ----------------------------------------------------------- */

/*
 * GET /images/json filtered by a label ("key" or "key=value"; NULL for
 * all). *out is the engine's array of image summaries (caller owns, free
 * with cJSON_Delete).
 */
__attribute__((warn_unused_result)) int
docker_images_list(struct docker *d, const char *label, cJSON **out, char *err,
                   size_t errlen);

/* ---- containers --------------------------------------------------------- */

struct docker_kv {
	const char *key;
	const char *value;
};

struct docker_mount {       /* always Type "bind" (never Binds) */
	const char *source; /* path on the Docker host; must exist */
	const char *target;
	bool read_only;
	bool
	    rslave; /* host mounts below source appear inside (else rprivate) */
};

struct docker_ulimit {
	const char *name;
	long long soft, hard;
};

/*
 * What POST /containers/create gets. Every pointer is borrowed for the
 * duration of the call. Zero/NULL fields are left out of the body (the
 * engine's default applies), except the booleans, which are always sent.
 */
struct docker_create_opts {
	const char *image;
	const char *const *cmd; /* argv; n_cmd > 0 */
	size_t n_cmd;
	const char *const *env; /* "NAME=value" */
	size_t n_env;
	const struct docker_kv *labels;
	size_t n_labels;
	const char *user; /* "uid:gid" */
	const char *working_dir;
	bool open_stdin; /* OpenStdin, StdinOnce, AttachStdin */

	/* HostConfig */
	long long memory_bytes;
	long long memory_swap_bytes;
	long long nano_cpus;
	long long pids_limit;
	long long shm_size_bytes;
	int oom_score_adj; /* 0 to leave out */
	const char *network_mode;
	/* The address on network_mode's network (a user-defined one with a
	 * subnet of its own), or NULL for the engine's choice. */
	const char *network_ip;
	/* HostConfig.Dns (the resolvers the engine's DNS forwards to). */
	const char *const *dns;
	size_t n_dns;
	bool readonly_rootfs;
	bool init;
	const char *ipc_mode;
	const struct docker_kv *tmpfs; /* path -> mount options */
	size_t n_tmpfs;
	const struct docker_ulimit *ulimits;
	size_t n_ulimits;
	const char *const *cap_drop;
	size_t n_cap_drop;
	const char *const *security_opt;
	size_t n_security_opt;
	const struct docker_mount *mounts;
	size_t n_mounts;
	const char *runtime;    /* NULL or "" for the engine's default */
	const char *log_driver; /* e.g. "none" */
	/*
	 * CgroupParent: the cgroup the container's own cgroup is made in
	 * (cgroupfs driver: a path such as "/mcpsd-runs/x"), or NULL.
	 */
	const char *cgroup_parent;
};

/*
 * The JSON body of POST /containers/create for o (caller owns). Pure, no
 * engine involved; NULL on allocation failure. Always sets Tty false,
 * AttachStdout/AttachStderr true, OomKillDisable false, RestartPolicy "no",
 * Privileged false, PublishAllPorts false.
 */
cJSON *docker_create_body(const struct docker_create_opts *o);

/*
 * POST /containers/create?name=name (name may be NULL). On success id
 * receives the full container id. Warnings from the engine are logged.
 */
__attribute__((warn_unused_result)) int
docker_container_create(struct docker *d, const char *name,
                        const struct docker_create_opts *o,
                        char id[DOCKER_ID_LEN + 1], char *err, size_t errlen);

/*
 * POST /containers/{id}/update: a running container's memory limit (swap
 * none: MemorySwap = Memory) and CPU share (NanoCpus), as
 * docker_container_create sets them. -EINVAL when the engine refuses the
 * figures (a limit below what the container uses, say).
 */
__attribute__((warn_unused_result)) int
docker_container_update(struct docker *d, const char *id,
                        long long memory_bytes, long long nano_cpus, char *err,
                        size_t errlen);

/* POST /containers/{id}/start. */
__attribute__((warn_unused_result)) int docker_container_start(struct docker *d,
                                                               const char *id,
                                                               char *err,
                                                               size_t errlen);

/*
 * POST /containers/{id}/wait?condition=not-running, waiting up to
 * timeout_ms (-ETIMEDOUT after that). *status gets the exit status.
 */
__attribute__((warn_unused_result)) int
docker_container_wait(struct docker *d, const char *id, unsigned timeout_ms,
                      long *status, char *err, size_t errlen);

struct docker_container_state {
	bool running;
	bool oom_killed;
	int exit_code;
	int pid;
	char status[16];     /* "created", "running", "exited", ... */
	char started_at[40]; /* RFC 3339 as the engine wrote it */
	char finished_at[40];
	char error[256]; /* State.Error */
};

/* GET /containers/{id}/json, the State part. */
__attribute__((warn_unused_result)) int
docker_container_inspect(struct docker *d, const char *id,
                         struct docker_container_state *out, char *err,
                         size_t errlen);

/*
 * POST /containers/{id}/kill?signal=sig (e.g. "KILL"). -ESRCH when the
 * container is not running, -ENOENT when it does not exist.
 */
__attribute__((warn_unused_result)) int
docker_container_kill(struct docker *d, const char *id, const char *sig,
                      char *err, size_t errlen);

/*
 * DELETE /containers/{id}?force=1&v=1. -ENOENT when it does not exist,
 * -EBUSY when a removal is already in progress.
 */
__attribute__((warn_unused_result)) int
docker_container_remove(struct docker *d, const char *id, char *err,
                        size_t errlen);

/*
 * GET /containers/json?all=1 filtered by a label ("key" or "key=value").
 * *out is the engine's array of container summaries (caller owns).
 */
__attribute__((warn_unused_result)) int
docker_containers_list(struct docker *d, const char *label, cJSON **out,
                       char *err, size_t errlen);

/* ---- networks ----------------------------------------------------------- */

/*
 * What POST /networks/create gets: a bridge network with one IPv4 subnet.
 * internal: no route out; no_host_address: the host takes no address on
 * it (com.docker.network.bridge.inhibit_ipv4), so boxes on it cannot
 * reach the host's services either.
 */
struct docker_network_opts {
	const char *name;
	const char *subnet;  /* "10.213.0.8/29" */
	const char *gateway; /* reserved by the engine's IPAM */
	bool internal;
	bool no_host_address;
	const struct docker_kv *labels;
	size_t n_labels;
};

/* The JSON body of POST /networks/create for o (caller owns). Pure. */
cJSON *docker_network_body(const struct docker_network_opts *o);

/*
 * POST /networks/create. -EBUSY when the name exists, -EADDRINUSE when the
 * subnet overlaps a network the engine has (the engine answers 403 or
 * 400 "Pool overlaps"), other errors as above.
 */
__attribute__((warn_unused_result)) int
docker_network_create(struct docker *d, const struct docker_network_opts *o,
                      char *err, size_t errlen);

/* DELETE /networks/{name}. -ENOENT when it does not exist. */
__attribute__((warn_unused_result)) int docker_network_remove(struct docker *d,
                                                              const char *name,
                                                              char *err,
                                                              size_t errlen);

/*
 * POST /networks/{name}/connect: container (id or name) joins the network,
 * at ip when not NULL, known on it by alias too when not NULL (the
 * engine's DNS answers it to the network's members). Works on a running
 * container.
 */
__attribute__((warn_unused_result)) int
docker_network_connect(struct docker *d, const char *name,
                       const char *container, const char *ip, const char *alias,
                       char *err, size_t errlen);

/* POST /networks/{name}/disconnect with Force. */
__attribute__((warn_unused_result)) int
docker_network_disconnect(struct docker *d, const char *name,
                          const char *container, char *err, size_t errlen);

/*
 * GET /networks?filters={"label":[label]}: *out is the engine's array of
 * network summaries (caller owns).
 */
__attribute__((warn_unused_result)) int
docker_networks_list(struct docker *d, const char *label, cJSON **out,
                     char *err, size_t errlen);

/* ---- any endpoint ------------------------------------------------------ */

/*
 * method path (after the version prefix, e.g. "/services/create") with an
 * optional JSON body, for the endpoints this header has no function for
 * (Swarm services, tasks, nodes). timeout_ms 0 means the client's default.
 * When out is not NULL and the engine answered a body, *out is it parsed
 * (caller owns; NULL for an empty answer). Errors as above.
 */
__attribute__((warn_unused_result)) int
docker_request(struct docker *d, const char *method, const char *path,
               const char *body, unsigned timeout_ms, cJSON **out, char *err,
               size_t errlen);

/*
 * GET path as HTTP/1.0 on a connection of its own, handed out as a
 * stream of the answer's body (no chunking: it ends when the engine
 * closes), e.g. /services/{id}/logs?follow=1. Read it with the
 * docker_attach_* functions below; caller owns *out.
 */
__attribute__((warn_unused_result)) int
docker_stream_get(struct docker *d, const char *path,
                  struct docker_attach **out, char *err, size_t errlen);

/* ---- attach ----------------------------------------------------------- */

/*
 * POST /containers/{id}/attach?stream=1&stdin=1&stdout=1&stderr=1 on a
 * hijacked connection. Call it before starting the container so no output
 * is lost. On success *out is the stream (caller owns, close with
 * docker_attach_close).
 */
__attribute__((warn_unused_result)) int
docker_container_attach(struct docker *d, const char *id,
                        struct docker_attach **out, char *err, size_t errlen);

/* The socket, non-blocking, for poll(). Borrowed; do not close it. */
int docker_attach_fd(const struct docker_attach *a);

/*
 * Whether bytes that arrived with the HTTP response are still buffered:
 * read them before waiting on the socket.
 */
bool docker_attach_pending(const struct docker_attach *a);

/*
 * Reads raw (multiplexed) bytes without blocking. Returns the count, 0 at
 * the end of the stream, -EAGAIN when nothing is available, or another
 * negative errno.
 */
__attribute__((warn_unused_result)) ssize_t
docker_attach_read(struct docker_attach *a, void *buf, size_t n);

/*
 * Writes stdin bytes without blocking. Returns the count written, -EAGAIN,
 * or another negative errno (-EPIPE once the engine stopped reading).
 */
__attribute__((warn_unused_result)) ssize_t
docker_attach_write(struct docker_attach *a, const void *p, size_t n);

/* Ends stdin (shutdown(SHUT_WR)); with StdinOnce the engine closes it. */
void docker_attach_close_write(struct docker_attach *a);

/* Closes the stream and frees it. NULL-safe. */
void docker_attach_close(struct docker_attach *a);

#endif
