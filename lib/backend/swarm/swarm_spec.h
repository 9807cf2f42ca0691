/* SPDX-License-Identifier: MIT */
/*
 * swarm_spec: what a run is on a Docker Swarm, as pure functions: the
 * ServiceSpec of one run (one replica, restart none, the limits and the
 * hardening a service can carry on engine 20.10 / API 1.41, reservations
 * equal to the limits so Swarm queues what does not fit, placement on
 * sandbox nodes only), the check of a spec read back from the engine (every
 * security field we sent must still be there: an engine that drops a field
 * silently must not run the code), the service name that locks a
 * conversation across daemon replicas, and the shell preamble every task
 * runs first: it checks what a service cannot carry and the sandbox node's
 * engine must supply (no-new-privileges, seccomp, no capabilities, no swap,
 * no network but lo) and refuses to start the code when one is missing,
 * then runs the code with its stdin from a file. Also the backend's own
 * configuration check (SWARM_CONSTRAINTS, and what a service cannot carry).
 *
 * Threads: pure functions, thread-safe.
 */
#ifndef MCPSD_SWARM_SPEC_H
#define MCPSD_SWARM_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "config/config.h"

#define SWARM_NAME_MAX 64
#define SWARM_CONSTRAINT_MAX 256 /* bytes of one placement constraint */
/* What the preamble writes to stderr before its exit status when a node
 * lacks a setting: the prefix, then the missing settings. */
#define SWARM_CHECK_MARK "mcp-sandboxd-node-check:"
#define SWARM_CHECK_EXIT 125

/*
 * The service name of a box: "mcpsd-c-" and 40 hex of a hash of the
 * exclusive key when it has one (the same on every replica: a second
 * service of the conversation is refused with 409 while the first
 * exists), else "mcpsd-r-" and the box's own name's run id. -EINVAL when
 * neither is usable.
 */
__attribute__((warn_unused_result)) int
swarm_spec_name(const struct box_spec *spec, char out[SWARM_NAME_MAX]);

/*
 * The ServiceSpec (POST /services/create body) of spec under cfg, carrying
 * the labels sandbox.managed, .owner, .boot, .deadline (deadline) and the
 * spec's own. global makes it a node check: one task on every eligible
 * node (Mode Global), no reservations. Caller owns; NULL on allocation
 * failure or for a spec a service cannot carry (network, more labels than
 * allowed).
 */
cJSON *swarm_spec_body(const struct config *cfg, const char *name,
                       const char *owner, const char *boot, time_t deadline,
                       const struct box_spec *spec, bool global);

/*
 * Compares the Spec the engine answered for the service (got: the "Spec"
 * of GET /services/{id}) with what was sent: the command (and so the
 * preamble), user, read-only root, init, dropped capabilities, ulimits,
 * mounts, stop signal, limits, restart policy, placement and log driver
 * must be there unchanged. 0, or -EPERM naming the first field that
 * differs.
 */
__attribute__((warn_unused_result)) int swarm_spec_verify(const cJSON *sent,
                                                          const cJSON *got,
                                                          char *err,
                                                          size_t errlen);

/* The shell preamble (static), for tests. */
const char *swarm_spec_preamble(void);

/*
 * The Swarm backend's configure hook (backend.h): SWARM_CONSTRAINTS holds
 * only the characters of placement constraints, always; when the backend
 * is chosen, at least one constraint, each under SWARM_CONSTRAINT_MAX
 * bytes, and no SANDBOX_RUNTIME (a service cannot choose one). 0 or
 * -EINVAL with a message that gives an example.
 */
__attribute__((warn_unused_result)) int
swarm_spec_configure(const struct config *cfg, bool chosen, char *err,
                     size_t errlen);

/*
 * Steps through SWARM_CONSTRAINTS (';'-separated): the next part, spaces
 * trimmed, at *start with *len bytes (0 for an empty part), and advances
 * *s. false at the end.
 */
bool swarm_constraint_next(const char **s, const char **start, size_t *len);

#endif
