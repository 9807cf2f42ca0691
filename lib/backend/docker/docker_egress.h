/* SPDX-License-Identifier: MIT */
/*
 * docker_egress: the egress proxy container and the per-run egress
 * networks on the Docker engine, for backend_docker's egress operations
 * (backend.h, BACKEND_CAN_EGRESS; the policy is lib/egress's).
 *
 * The proxy is Squid from the mcp-sandboxd/egress image, run unprivileged
 * (its own uid, no capability, no-new-privileges, read-only root, bounded
 * memory and pids) on the network with a route out. A run's network is an
 * internal bridge with a small subnet of its own and no host address: the
 * box on it reaches the proxy and nothing else, not the host, not the
 * engine's other networks, not other runs' boxes.
 *
 * Thread-safe (each call is its own engine requests); errors as docker.h.
 */
#ifndef MCPSD_DOCKER_EGRESS_H
#define MCPSD_DOCKER_EGRESS_H

#include <stddef.h>

#include "backend/backend.h"
#include "backend/docker/docker.h"

/* Removes a container of p->name if any, then creates and starts it. */
__attribute__((warn_unused_result)) int
docker_egress_proxy_start(struct docker *d,
                          const struct backend_egress_proxy *p, char *err,
                          size_t errlen);

/* Removes the proxy container name (forced). Logged, not returned. */
void docker_egress_proxy_stop(struct docker *d, const char *name);

/*
 * Creates n's network and joins the proxy at n->proxy_ip. -EADDRINUSE
 * when the name or subnet is taken (by another daemon on the engine, or
 * a leftover). On any failure nothing is left.
 */
__attribute__((warn_unused_result)) int
docker_egress_net_open(struct docker *d, const struct backend_egress_net *n,
                       char *err, size_t errlen);

/* Takes the proxy off n's network and removes it. Logged, not returned. */
void docker_egress_net_close(struct docker *d,
                             const struct backend_egress_net *n);

#endif
