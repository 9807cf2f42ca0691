/* SPDX-License-Identifier: MIT */
/*
 * docker_channel: a warm box's channel to its agent that does not pass
 * through the engine (SANDBOX_WARM_CHANNEL=socket). Before the box is
 * created, the daemon makes SANDBOX_ROOT/chan/<box name>/ (root's, the
 * parent root-only), listens there on a unix socket named "channel", and
 * the box mounts that one directory read-only at DOCKER_CHANNEL_DIR; the
 * agent, the box's PID 1, connects out to DOCKER_CHANNEL_PATH before it
 * starts anything else. The daemon accepts exactly one connection, checks
 * that the peer is a process of this container (SO_PEERCRED: the sandbox
 * uid, and /proc/<pid>/cgroup naming the container's id when its pid is
 * visible to us), then closes and unlinks the listener: nothing else can
 * reach the agent's channel, and code only ever runs after that, on the
 * agent's word. From then on the frames flow over that connection, and a
 * restart of the engine (live-restore) does not touch it.
 *
 * The daemon never connects anywhere here and never follows a path a box
 * can write: the directory is made by the daemon below a root-only parent,
 * the socket is bound through the directory's descriptor, and the box's
 * mount of it is read-only (connect(2) to a socket needs no write access
 * to the mount).
 *
 * Threads: docker_channel_dir_* are thread-safe (the first use sweeps what
 * an earlier boot left, once, under the dir's lock); a listener and its
 * stream belong to one thread at a time, like the box.
 */
#ifndef MCPSD_DOCKER_CHANNEL_H
#define MCPSD_DOCKER_CHANNEL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "config/config.h"

#define DOCKER_CHANNEL_DIR "/run/mcpsd"
#define DOCKER_CHANNEL_PATH DOCKER_CHANNEL_DIR "/channel"

/* SANDBOX_ROOT/chan, as the daemon and as the engine's host see it. */
struct docker_channel_dir {
	pthread_mutex_t lock;
	char dir[PATH_MAX];
	char host_dir[PATH_MAX];
	bool ready; /* made and swept (guarded by lock) */
};

/* One box's listener: made before the box, handed to its stream. */
struct docker_channel_slot {
	char dir[PATH_MAX]; /* SANDBOX_ROOT/chan/<name>, "" for none */
	int dir_fd;         /* held open: the socket is bound through it */
	int listen_fd;      /* -1 once accepted or given to a stream */
};

/* Names the directory (nothing is made until the first slot). */
void docker_channel_dir_init(struct docker_channel_dir *d,
                             const struct config *cfg);
void docker_channel_dir_finish(struct docker_channel_dir *d);

/*
 * Makes SANDBOX_ROOT/chan/<name>/ and a listener on its "channel", and
 * writes the host path the engine must mount read-only at
 * DOCKER_CHANNEL_DIR into host_path. name is the box's name (one path
 * component). 0, or -errno with a message in err.
 */
__attribute__((warn_unused_result)) int
docker_channel_slot_open(struct docker_channel_dir *d, const char *name,
                         struct docker_channel_slot *slot, char *host_path,
                         size_t host_len, char *err, size_t errlen);

/* Closes the listener if still held and removes the slot's directory. */
void docker_channel_slot_release(struct docker_channel_slot *slot);

/*
 * The box's channel: a stream that accepts the agent's one connection on
 * the slot's listener (when the first pump sees it), checks the peer
 * against the container cid (64 hex digits) and uid, closes and unlinks
 * the listener, then carries frames both ways (everything it reads is
 * handed on as stdout; the agent's stderr does not travel here). Takes the
 * slot's listener. Caller owns *out (box_stream_close).
 */
__attribute__((warn_unused_result)) int
docker_channel_stream(struct docker_channel_slot *slot, const char *cid,
                      uid_t uid, struct box_stream **out, char *err,
                      size_t errlen);

/*
 * Whether the process pid is in the container cid, by its
 * /proc/<pid>/cgroup (a line whose path names cid as a whole component,
 * "/<cid>" or "docker-<cid>.scope"). Exposed for the unit test; text is
 * the file's content.
 */
bool docker_channel_cgroup_names(const char *text, size_t n, const char *cid);

/*
 * SANDBOX_WARM_CHANNEL=auto: whether an engine, by its GET /info, can
 * carry the socket channel: not with a user namespace remap or rootless
 * (SecurityOptions "name=userns", "name=rootless": the agent's uid is not
 * the sandbox user's here), nor Docker Desktop (OperatingSystem: the
 * engine runs in a VM whose bind mounts of this host's directories do not
 * carry unix sockets). Says why in why either way. Pure.
 */
struct cJSON;
bool docker_channel_auto(const struct cJSON *info, char *why, size_t whylen);

#endif
