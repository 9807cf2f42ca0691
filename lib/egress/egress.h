/* SPDX-License-Identifier: MIT */
/*
 * egress: runs with network reach the outside only through the egress
 * proxy (Squid, the mcp-sandboxd/egress image), by policy. A struct egress
 * owns
 *   - the proxy container, made on the first run with network and made
 *     again when it is gone, with a squid.conf written from the settings
 *     (SANDBOX_EGRESS_*) into SANDBOX_ROOT/egress;
 *   - the slots: each run with network gets a network of its own (a /29
 *     of SANDBOX_EGRESS_SUBNET, internal, no host address) that only its
 *     box and the proxy are on, and a policy file named by its box's
 *     address that the proxy's ACL helper reads;
 *   - the proxy's access log, read after each run (egress_log.h) into
 *     the run's facts and the /metrics counters.
 *
 * Which names a run may reach (egress_resolve): the tenant's list
 * (SANDBOX_EGRESS_TENANTS, else SANDBOX_EGRESS_ALLOW), narrowed by the
 * call's network: [...] (network: true takes it whole).
 *
 * Threads: every function is thread-safe; one lock guards the slots, the
 * runs and the log reader and is never held during engine calls.
 */
#ifndef MCPSD_EGRESS_H
#define MCPSD_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "config/config.h"
#include "egress/egress_log.h"
#include "config/egress_policy.h"

struct egress;
struct egress_run;
struct stats;

/*
 * Makes the egress of cfg on be (both borrowed; they must outlive it),
 * ready to start the proxy on the first run. Does not contact the engine.
 * Caller owns *out (egress_destroy). -errno with a message.
 */
__attribute__((warn_unused_result)) int
egress_create(const struct config *cfg, struct backend *be, const char *boot,
              struct egress **out, char *err, size_t errlen);

/* Removes the proxy and what runs left. No run may be open. NULL-safe. */
void egress_destroy(struct egress *eg);

/*
 * The list a run of tenant may reach: the tenant's list when asked is NULL
 * (network: true), else asked after checking it is within the tenant's
 * (-EPERM with a message naming the first pattern that is not).
 */
__attribute__((warn_unused_result)) int
egress_resolve(const struct config *cfg, const char *tenant,
               const struct egress_list *asked, struct egress_list *out,
               char *err, size_t errlen);

/*
 * Opens a way out for one run allowed list: a slot, its network with the
 * proxy on it, the policy file. Starts the proxy if needed. Caller owns
 * *out: end it with egress_run_end whatever happens. -errno with a message
 * (-EAGAIN when every slot is taken).
 */
__attribute__((warn_unused_result)) int
egress_run_begin(struct egress *eg, const struct egress_list *list,
                 struct egress_run **out, char *err, size_t errlen);

/* The network the run's box goes on (borrowed, valid until run_end). */
const struct box_egress *egress_run_box(const struct egress_run *r);

/*
 * The variables that point the run's HTTP clients at the proxy
 * (HTTP_PROXY, HTTPS_PROXY and their lower-case forms); *n gets the
 * count. Borrowed, valid until run_end.
 */
const char *const *egress_run_env(const struct egress_run *r, size_t *n);

/*
 * Ends the run's way out: reads the proxy's log for it (into *facts when
 * not NULL), removes the policy and the network. NULL-safe.
 */
void egress_run_end(struct egress *eg, struct egress_run *r,
                    struct egress_facts *facts);

/* Registers the egress counters (requests allowed and blocked, bytes). */
void egress_stats(struct egress *eg, struct stats *s);

#endif
