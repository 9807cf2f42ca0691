/* SPDX-License-Identifier: MIT */
/*
 * egress_policy: allow-lists of destinations for runs with network, as
 * the operator (SANDBOX_EGRESS_ALLOW), a tenant (SANDBOX_EGRESS_TENANTS)
 * and a call (run_code's `network: ["api.example.com", "*.github.com"]`)
 * write them: domain patterns with an optional port. A pattern is a
 * lower-case DNS name ("api.example.com") or "*." and a name, which
 * matches every name below it ("*.github.com" matches "api.github.com" and
 * "a.b.github.com", not "github.com"). Without ":port" a pattern means the
 * operator's ports (SANDBOX_EGRESS_PORTS). An IPv4 literal is a name like
 * any other: allowed only when a list names it.
 *
 * The rendered form (egress_list_render) is what the proxy's ACL helper
 * reads (runners/egress/mcpsd-egress-acl): one "pattern port" a line,
 * where the only glob character is the leading '*'.
 *
 * Pure functions over caller memory; thread-safe.
 */
#ifndef MCPSD_EGRESS_POLICY_H
#define MCPSD_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#define EGRESS_NAME_MAX 253 /* a DNS name's text, without the "*." */
#define EGRESS_RULES_MAX 64 /* rules of one list */
#define EGRESS_PORTS_MAX 16 /* SANDBOX_EGRESS_PORTS */

struct egress_rule {
	bool wildcard; /* "*." + name: the names below name */
	char name[EGRESS_NAME_MAX + 1];
	unsigned port; /* 0: the operator's ports */
};

struct egress_list {
	struct egress_rule rules[EGRESS_RULES_MAX];
	size_t n;
};

/* The operator's ports (SANDBOX_EGRESS_PORTS), e.g. {80, 443}. */
struct egress_ports {
	unsigned port[EGRESS_PORTS_MAX];
	size_t n;
};

/*
 * Parses one pattern of n bytes ("api.example.com", "*.github.com:8443").
 * Upper case is folded. -EINVAL with a message naming what is wrong.
 */
__attribute__((warn_unused_result)) int
egress_rule_parse(const char *s, size_t n, struct egress_rule *out, char *err,
                  size_t errlen);

/*
 * Parses a list of patterns separated by commas and/or spaces; what names
 * the list in messages ("SANDBOX_EGRESS_ALLOW"). Duplicates are kept once.
 * An empty list is valid (nothing allowed). -EINVAL with a message.
 */
__attribute__((warn_unused_result)) int
egress_list_parse(const char *s, const char *what, struct egress_list *out,
                  char *err, size_t errlen);

/* Parses "80,443" into ports: 1-65535, at most EGRESS_PORTS_MAX. */
__attribute__((warn_unused_result)) int
egress_ports_parse(const char *s, struct egress_ports *out, char *err,
                   size_t errlen);

/* Whether host (lower case, no trailing dot) is matched by r's name. */
bool egress_rule_matches_name(const struct egress_rule *r, const char *host);

/*
 * Whether everything inner allows, outer allows too (under the operator's
 * ports): "*.x.com" covers "a.x.com" and "*.a.x.com"; a pattern without a
 * port covers one with a port among ports.
 */
bool egress_rule_covers(const struct egress_rule *outer,
                        const struct egress_rule *inner,
                        const struct egress_ports *ports);

/*
 * out = asked, after checking that every rule of asked is covered by a rule
 * of allowed under the operator's ports. -EPERM with a message naming the
 * first rule that is not (and what the tenant may ask for).
 */
__attribute__((warn_unused_result)) int
egress_list_narrow(const struct egress_list *allowed,
                   const struct egress_list *asked,
                   const struct egress_ports *ports, struct egress_list *out,
                   char *err, size_t errlen);

/* Writes r as a caller would ("*.github.com:8443") into buf. */
void egress_rule_format(const struct egress_rule *r, char *buf, size_t len);

/*
 * The policy file for the proxy's ACL helper: "pattern port\n" for every
 * rule and, for a rule without a port, every port of ports. Returns the
 * length written, or -ENOSPC when len is too small (buf then holds "").
 */
__attribute__((warn_unused_result)) int
egress_list_render(const struct egress_list *l,
                   const struct egress_ports *ports, char *buf, size_t len);

/*
 * SANDBOX_EGRESS_TENANTS: "tenant=pattern pattern;tenant2=pattern". Looks
 * up tenant's list into out: 1 when the setting names the tenant, 0 when
 * not (out is then empty), -EINVAL with a message when the setting is
 * malformed (config_derive checks it once at start-up with tenant NULL).
 */
__attribute__((warn_unused_result)) int
egress_tenant_list(const char *setting, const char *tenant,
                   struct egress_list *out, char *err, size_t errlen);

/*
 * The one destination of an http(s) URL (a package index): its host with
 * its port (80 or 443 when the URL has none), as a one-rule list. -EINVAL
 * with a message for a URL without such a host (an IPv6 literal, say).
 */
__attribute__((warn_unused_result)) int egress_url_list(const char *url,
                                                        struct egress_list *out,
                                                        char *err,
                                                        size_t errlen);

/* One SANDBOX_EGRESS_HOSTS entry: a name the proxy resolves itself. */
struct egress_host {
	char name[EGRESS_NAME_MAX + 1];
	char ip[16];
};

/*
 * Calls fn for each "name=IPv4" of SANDBOX_EGRESS_HOSTS (separated by
 * spaces or commas); fn may be NULL to only check. -EINVAL with a message.
 */
__attribute__((warn_unused_result)) int
egress_hosts_parse(const char *s,
                   void (*fn)(void *arg, const struct egress_host *h),
                   void *arg, char *err, size_t errlen);

/*
 * The IPv4 range SANDBOX_EGRESS_SUBNET ("10.213.0.0/16", prefix 8 to 24)
 * as a host-order base address and prefix. -EINVAL with a message.
 */
__attribute__((warn_unused_result)) int
egress_subnet_parse(const char *s, unsigned *base, unsigned *prefix, char *err,
                    size_t errlen);

/*
 * Checks every egress setting at start-up (config_derive): the lists,
 * the per-tenant lists, the ports, the private ranges, the hosts and the
 * subnet. 0 or -EINVAL with a message naming the setting.
 */
__attribute__((warn_unused_result)) int
egress_settings_check(const char *allow, const char *tenants, const char *ports,
                      const char *private_cidrs, const char *hosts,
                      const char *subnet, char *err, size_t errlen);

#endif
