/* SPDX-License-Identifier: MIT */
/*
 * oauth_uri: redirect URIs, the part of OAuth where one character decides
 * whether a code reaches its client or an attacker. A URI is accepted only
 * in a narrow form (absolute http or https, a host and an optional port, no
 * user information, no fragment, printable ASCII, bounded length), and two
 * URIs match only when they are the same string, except that for loopback
 * hosts the port may differ (RFC 8252 section 7.3: native clients listen on
 * a port they are given at run time). Which hosts a client may register is
 * an allow-list: https hosts named by the operator, and loopback when
 * allowed. Stateless and thread-safe.
 */
#ifndef MCPSD_OAUTH_URI_H
#define MCPSD_OAUTH_URI_H

#include <stdbool.h>
#include <stddef.h>

#define OAUTH_URI_MAX 2000

struct oauth_uri {
	bool https;
	char host[256]; /* lower case; an IPv6 literal keeps its brackets */
	unsigned port;  /* 0 when absent */
	size_t host_off, host_len; /* the host's span in the original */
	size_t port_off, port_len; /* the ":port" span (len 0 if absent) */
	size_t path_off;           /* where the path (or query) starts */
};

/* Which redirect hosts clients may register. Borrowed pointers. */
struct oauth_uri_policy {
	char *const *hosts; /* NULL-terminated https host names, or NULL */
	bool loopback;      /* http or https to 127.0.0.1, [::1], localhost */
};

/*
 * Parses s. Returns 0, or -EINVAL with a message for the client (what is
 * wrong, what a good one looks like) in err.
 */
__attribute__((warn_unused_result)) int
oauth_uri_parse(const char *s, struct oauth_uri *out, char *err, size_t errlen);

/* Whether the host is 127.0.0.0/8, [::1] or localhost. */
bool oauth_uri_is_loopback(const struct oauth_uri *u);

/*
 * Whether a parsed URI may be registered under the policy: https to a
 * listed host (exact, case-insensitive), or loopback when allowed. On false
 * err says why.
 */
bool oauth_uri_allowed(const struct oauth_uri *u,
                       const struct oauth_uri_policy *pol, char *err,
                       size_t errlen);

/*
 * Whether a redirect_uri from a request matches a registered one: the same
 * string, or, for loopback URIs, the same but for the port.
 */
bool oauth_uri_match(const char *registered, const char *requested);

/*
 * base with parameters appended to its query ('?' or '&'), each name and
 * value percent-encoded; kv is a NULL-terminated list of name, value pairs
 * (a NULL value ends the list too). Caller frees; NULL when out of memory.
 */
char *oauth_uri_with_params(const char *base, const char *const *kv);

#endif
