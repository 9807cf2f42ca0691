/* SPDX-License-Identifier: MIT */
/*
 * netaddr: IP addresses and CIDR ranges as text, and who the client of a
 * request is behind trusted proxies (MCP_TRUSTED_PROXIES). Parsing is
 * strict: dotted-quad IPv4 without leading zeros, RFC 4291 IPv6 without a
 * zone, an IPv4-mapped IPv6 address counts as its IPv4 address. Stateless
 * and thread-safe.
 */
#ifndef MCPSD_NETADDR_H
#define MCPSD_NETADDR_H

#include <stdbool.h>
#include <stddef.h>

#define NETADDR_TEXT_MAX 46     /* INET6_ADDRSTRLEN */
#define NETADDR_LIST_MAX 64     /* entries of MCP_TRUSTED_PROXIES */
#define NETADDR_XFF_HOPS_MAX 32 /* X-Forwarded-For entries examined */

struct netaddr {
	int family;          /* AF_INET or AF_INET6 */
	unsigned char a[16]; /* IPv4 in the first 4 bytes */
};

struct netaddr_cidr {
	struct netaddr addr;
	unsigned prefix; /* 0-32 for IPv4, 0-128 for IPv6 */
};

/*
 * Parses n bytes at s as one address, without surrounding space. 0, or
 * -EINVAL for anything else (a port, a zone, brackets, a name).
 */
__attribute__((warn_unused_result)) int netaddr_parse(const char *s, size_t n,
                                                      struct netaddr *out);

/* The canonical text of a (inet_ntop's) into out (>= NETADDR_TEXT_MAX). */
void netaddr_format(const struct netaddr *a, char *out, size_t outlen);

/*
 * Parses a comma-separated list of addresses and CIDR ranges
 * ("127.0.0.1, 10.0.0.0/8, ::1, fd00::/8"); spaces around entries are
 * ignored, an empty list is valid. A range with bits set past its prefix
 * is refused (a typo more often than not). On success *out (caller frees
 * with free; NULL for an empty list) and *n are set; on failure -EINVAL
 * with a message naming setting and the entry, or -ENOMEM.
 */
__attribute__((warn_unused_result)) int
netaddr_cidrs_parse(const char *setting, const char *s,
                    struct netaddr_cidr **out, size_t *n, char *err,
                    size_t errlen);

/* Whether a is in one of the n ranges. */
bool netaddr_cidrs_contain(const struct netaddr_cidr *c, size_t n,
                           const struct netaddr *a);

/* Where netaddr_client found the client address. */
enum netaddr_from {
	NETADDR_FROM_PEER = 0, /* the socket peer (not a trusted proxy) */
	NETADDR_FROM_CF,       /* CF-Connecting-IP of a trusted proxy */
	NETADDR_FROM_XFF,      /* X-Forwarded-For through trusted proxies */
	NETADDR_FROM_PROXY,    /* a trusted proxy that named no valid client */
};

/*
 * The client of a request whose socket peer is peer (text), given the
 * value of its CF-Connecting-IP header (cf: NULL when absent or sent more
 * than once) and the values of its X-Forwarded-For headers in the order
 * they came (xff, n_xff; one header may also list several hops). The
 * headers count only when the peer is in the n trusted ranges: then the
 * client is cf when that is one valid address, else the right-most
 * X-Forwarded-For entry that is not a trusted proxy (an entry is an
 * address, IPv4 with an optional :port, or IPv6 in brackets with an
 * optional :port). An entry that does not parse, or more than
 * NETADDR_XFF_HOPS_MAX of them, stops the walk: the client is then the
 * last trusted hop, never anything a client wrote. Writes the canonical
 * text of the client into out (NETADDR_TEXT_MAX bytes; "" when peer does
 * not parse) and says where it came from.
 */
enum netaddr_from netaddr_client(const struct netaddr_cidr *trusted, size_t n,
                                 const char *peer, const char *cf,
                                 const char *const *xff, size_t n_xff,
                                 char *out, size_t outlen);

/*
 * The key a per-source limit counts addr (text) under: an IPv4 address as
 * it is, an IPv6 address by its /64 (one host commonly holds a whole /64,
 * so per-address limits would not bind it), e.g. "2001:db8:1:2::/64".
 * Text that is not an address is copied as it is (cut to outlen).
 */
void netaddr_source_key(const char *addr, char *out, size_t outlen);

#endif
