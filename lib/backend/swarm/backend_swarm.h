/* SPDX-License-Identifier: MIT */
/*
 * backend_swarm: the execution backend (backend.h) on a Docker Swarm, for
 * more than one host. DOCKER_HOST is a manager's engine; a box is a
 * service of one replica with restart policy none (swarm_spec.h), placed
 * by Swarm on a sandbox node (SWARM_CONSTRAINTS) when the node has room
 * for its reservations: Swarm is the queue across the cluster.
 *
 * What one-off runs need, in Swarm's terms:
 *   create        checks the image on the manager; nothing is made yet
 *   start         creates the service and reads its spec back, refusing to
 *                 run when a security field was dropped
 *   wait_running  waits (cancellable, SWARM_QUEUE_TIMEOUT_SECONDS) while
 *                 the task is pending, and while another service holds the
 *                 conversation's name (409): the cluster-wide lock
 *   attach        GET /services/{id}/logs?follow=1, demultiplexed like an
 *                 attach stream; follow never ends by itself (moby#36626),
 *                 so the task's state is polled, and once it is terminal
 *                 the whole log is read again without follow and what
 *                 follow had not delivered yet is handed on, per stream,
 *                 byte for byte
 *   inspect       the task's state and Status.ContainerStatus.ExitCode
 *   signal        scales the service to 0 (the name, and so the lock, stays
 *                 until the task is terminal)
 *   release       in the background: removes the service once its task is
 *                 terminal, or at the latest when the run's hard deadline
 *                 (the in-task watchdog's) has passed on a node that was
 *                 lost, then checks that no task is left
 * There is no stdin stream (one-off runs pass stdin as a file of the code
 * directory), no warm box, no network (and so no packages): of
 * backend.h's capabilities it has BACKEND_CAN_REPLICAS only. A worker
 * marked down mid-run ends the run with an error naming the node. Its
 * settings are checked by swarm_spec_configure.
 *
 * Every service carries the labels of backend_docker (managed, owner,
 * boot, deadline); reaping removes those of an earlier boot of this
 * instance and those past their deadline, whoever made them. A node check
 * runs at start-up and every ten minutes: a global service of the
 * preamble alone reports, per eligible node, whether its engine supplies
 * what a service cannot carry (/healthz "swarm").
 *
 * Threads: see backend.h. One removal thread and one node-check thread.
 */
#ifndef MCPSD_BACKEND_SWARM_H
#define MCPSD_BACKEND_SWARM_H

#include "backend/backend.h"
#include "config/config.h"

/* The backend's table, for the registry (backend.c): "swarm". */
extern const struct backend_impl backend_swarm_impl;

/*
 * Creates the backend: a Docker client of cfg->docker_host (a manager),
 * the threads. boot is this process's boot id (copied). Does not contact
 * the engine. Caller owns *out (backend_destroy). -errno with a message.
 */
__attribute__((warn_unused_result)) int
backend_swarm_create(const struct config *cfg, const char *boot,
                     struct backend **out, char *err, size_t errlen);

#endif
