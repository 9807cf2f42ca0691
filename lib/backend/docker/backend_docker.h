/* SPDX-License-Identifier: MIT */
/*
 * backend_docker: the execution backend (backend.h) on the local Docker
 * engine. A box is one container created with the hardened body that
 * docs/security.md ("The sandbox") explains: no network unless allowed and
 * asked for, memory with equal swap, CPU and pids limits, all capabilities
 * dropped, no-new-privileges, the seccomp profile of seccomp.h, a read-only
 * root with a capped /tmp, Init, private IPC, ulimits, no logging, an
 * unprivileged uid:gid, bind Mounts only. Every container carries the labels
 * sandbox.managed, sandbox.owner (the instance), sandbox.boot (this process)
 * and sandbox.deadline, so the reaper can remove what an earlier boot left
 * and what outlived its deadline even if no daemon is watching. Released
 * containers are removed by a background thread that retries while the
 * engine is away.
 *
 * It can do everything backend.h asks (BACKEND_CAN_* but REPLICAS: its
 * conversation locks are one daemon's), and it needs the daemon and the
 * engine on one host: code and workspaces are bind-mounted from the
 * daemon's directories, and box_hand_over mounts a workspace into a running
 * box through a shared mount (docker_handover.h). The channel of a warm box
 * is a unix socket its agent connects to once, off the engine's path
 * (docker_channel.h), or its attach stream with stdin
 * (SANDBOX_WARM_CHANNEL=attach).
 *
 * Threads: see backend.h. One removal thread per backend.
 */
#ifndef MCPSD_BACKEND_DOCKER_H
#define MCPSD_BACKEND_DOCKER_H

#include <stdbool.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/docker/docker.h"
#include "config/config.h"

/* The backend's table, for the registry (backend.c): "docker". */
extern const struct backend_impl backend_docker_impl;

/*
 * Creates the backend: a Docker client of cfg->docker_host, the seccomp
 * profile, the removal thread. boot is this process's boot id (copied).
 * Does not contact the engine. Caller owns *out (backend_destroy). -errno
 * with a message for a person in err.
 */
__attribute__((warn_unused_result)) int
backend_docker_create(const struct config *cfg, const char *boot,
                      struct backend **out, char *err, size_t errlen);

/* The Docker client of a backend made here (borrowed). */
struct docker *backend_docker_client(struct backend *be);

/*
 * The JSON body of POST /containers/create for spec under cfg, with the
 * given SecurityOpt seccomp entry and identity labels (spec.handover's
 * mount is box_create's, not here). Pure, for tests and benchmarks. Caller
 * owns; NULL on allocation failure or a spec the body cannot carry.
 */
cJSON *backend_docker_create_body(const struct config *cfg,
                                  const char *seccomp_opt, const char *owner,
                                  const char *boot,
                                  const struct box_spec *spec);

/*
 * The reaper's decision for one container summary of GET /containers/json:
 * true when it carries sandbox.managed=true and either belongs to owner
 * with a boot id other than boot, or its sandbox.deadline plus grace_s
 * (SANDBOX_REAP_GRACE_SECONDS) is before now. Pure.
 */
bool backend_docker_reap_wanted(const cJSON *summary, const char *owner,
                                const char *boot, time_t now, unsigned grace_s);

#endif
