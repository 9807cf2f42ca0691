/* SPDX-License-Identifier: MIT */
/*
 * docker_handover: how the Docker backend hands a running container a
 * directory of the host (box_hand_over: a warm pool box gets its
 * conversation's workspace). A box made to take one later mounts
 * SANDBOX_ROOT/pool/<box name>, an empty directory of root's, with
 * propagation rslave; SANDBOX_ROOT/pool is a shared bind mount of itself,
 * so a directory bind-mounted on pool/<box name> later appears inside the
 * box. This needs the daemon and the engine on one host, sharing their
 * mounts, and CAP_SYS_ADMIN (as loop quotas do).
 *
 * Threads: docker_handover_prepare runs once, before any box is made; a
 * slot belongs to the thread that owns its box.
 */
#ifndef MCPSD_DOCKER_HANDOVER_H
#define MCPSD_DOCKER_HANDOVER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

/* The pool directory, as the daemon and as the engine's host see it. */
struct docker_handover {
	char dir[PATH_MAX];
	char host_dir[PATH_MAX];
	bool mounted; /* dir is our shared bind mount */
};

/* One box's place to take a directory: pool/<name>. */
struct docker_handover_slot {
	char dir[PATH_MAX]; /* "" when the box takes none */
	bool given;         /* a directory is mounted on dir */
};

/*
 * Makes SANDBOX_ROOT/pool a shared mount after unmounting and removing what
 * an earlier boot left below it. 0, or -errno with why in err (boxes that
 * take a directory later cannot be made then).
 */
__attribute__((warn_unused_result)) int
docker_handover_prepare(struct docker_handover *h, const struct config *cfg,
                        char *err, size_t errlen);

/* Unmounts the pool directory if we mounted it. */
void docker_handover_finish(struct docker_handover *h);

/*
 * Makes the empty pool/<name> of a box and writes into host_path the path
 * the engine mounts (rslave) where the box takes the directory. -EINVAL
 * before docker_handover_prepare or for a name that is not one path
 * component, other -errno with a message.
 */
__attribute__((warn_unused_result)) int
docker_handover_slot(const struct docker_handover *h, const char *name,
                     struct docker_handover_slot *slot, char *host_path,
                     size_t host_len, char *err, size_t errlen);

/* Bind-mounts the directory open at dirfd on the slot. -errno, message. */
__attribute__((warn_unused_result)) int
docker_handover_give(struct docker_handover_slot *slot, int dirfd, char *err,
                     size_t errlen);

/* Whether an unused slot's directory is still there; detail when not. */
bool docker_handover_intact(const struct docker_handover_slot *slot,
                            char *detail, size_t len);

/* Unmounts what was given and removes the slot's directory. */
void docker_handover_release(struct docker_handover_slot *slot);

#endif
