/* SPDX-License-Identifier: MIT */
/*
 * netaddr: addresses, CIDR ranges and the client behind trusted proxies.
 * Header values parsed here come from the network: every entry is
 * length-checked before it is copied, nothing is allocated per request,
 * and a value that does not parse is never taken as an address. Stateless
 * and thread-safe.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/errmsg.h"
#include "util/netaddr.h"

static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0,    0,
                                           0, 0, 0, 0, 0xff, 0xff};

int netaddr_parse(const char *s, size_t n, struct netaddr *out)
{
	char buf[NETADDR_TEXT_MAX];
	struct in6_addr a6;
	struct in_addr a4;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!s[i] || !strchr("0123456789abcdefABCDEF:.", s[i]))
			return -EINVAL;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!memchr(buf, ':', n)) {
		/* glibc's inet_pton takes exactly four decimal parts. */
		if (inet_pton(AF_INET, buf, &a4) != 1)
			return -EINVAL;
		out->family = AF_INET;
		memcpy(out->a, &a4, 4);
		return 0;
	}
	if (inet_pton(AF_INET6, buf, &a6) != 1)
		return -EINVAL;
	if (memcmp(a6.s6_addr, v4mapped, sizeof(v4mapped)) == 0) {
		out->family = AF_INET;
		memcpy(out->a, a6.s6_addr + 12, 4);
		return 0;
	}
	out->family = AF_INET6;
	memcpy(out->a, a6.s6_addr, 16);
	return 0;
}

void netaddr_format(const struct netaddr *a, char *out, size_t outlen)
{
	char buf[NETADDR_TEXT_MAX];

	if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->a, buf,
	               sizeof(buf)))
		buf[0] = '\0';
	snprintf(out, outlen, "%s", buf);
}

/* Strips spaces and tabs (HTTP's OWS) around [*s, *s + *n). */
static void trim(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* A decimal number of 1-maxdigits digits, no sign, no leading zero. */
static int parse_small(const char *s, size_t n, size_t maxdigits,
                       unsigned long max, unsigned long *out)
{
	unsigned long v = 0;

	if (n == 0 || n > maxdigits || (n > 1 && s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static bool host_bits_clear(const struct netaddr_cidr *c)
{
	unsigned bits = c->addr.family == AF_INET ? 32 : 128;

	for (unsigned i = c->prefix; i < bits; i++) {
		if (c->addr.a[i / 8] & (0x80u >> (i % 8)))
			return false;
	}
	return true;
}

/* One entry of a list: "addr" or "addr/prefix". */
static int cidr_parse(const char *s, size_t n, struct netaddr_cidr *out)
{
	const char *slash = memchr(s, '/', n);
	size_t alen = slash ? (size_t)(slash - s) : n;
	bool v6text = memchr(s, ':', alen) != NULL;
	unsigned long prefix;

	if (netaddr_parse(s, alen, &out->addr) < 0)
		return -EINVAL;
	out->prefix = out->addr.family == AF_INET ? 32 : 128;
	if (!slash)
		return 0;
	if (parse_small(slash + 1, n - alen - 1, 3, v6text ? 128 : 32,
	                &prefix) < 0)
		return -EINVAL;
	out->prefix = (unsigned)prefix;
	/* "::ffff:10.0.0.0/104" is 10.0.0.0/8. */
	if (out->addr.family == AF_INET && v6text) {
		if (out->prefix < 96)
			return -EINVAL;
		out->prefix -= 96;
	}
	return host_bits_clear(out) ? 0 : -ERANGE;
}

int netaddr_cidrs_parse(const char *setting, const char *s,
                        struct netaddr_cidr **out, size_t *n, char *err,
                        size_t errlen)
{
	struct netaddr_cidr *v = NULL;
	size_t count = 0;
	const char *p = s ? s : "";

	*out = NULL;
	*n = 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		const char *e = p;
		size_t elen = len;
		int r;

		trim(&e, &elen);
		if (elen == 0 && (p[len] == ',' || count > 0)) {
			free(v);
			return errmsg_fail(-EINVAL, err, errlen,
			                   "%s has an empty entry; separate "
			                   "addresses and ranges with single "
			                   "commas, e.g. %s=127.0.0.1,::1",
			                   setting, setting);
		}
		if (elen > 0) {
			if (count == NETADDR_LIST_MAX) {
				free(v);
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s has more than %d entries; name the "
				    "proxies' networks as CIDR ranges, e.g. "
				    "10.0.0.0/8",
				    setting, NETADDR_LIST_MAX);
			}
			if (!v) {
				v = calloc(NETADDR_LIST_MAX, sizeof(*v));
				if (!v)
					return errmsg_fail(-ENOMEM, err, errlen,
					                   "out of memory");
			}
			r = cidr_parse(e, elen, &v[count]);
			if (r == -ERANGE) {
				char net[NETADDR_TEXT_MAX];
				unsigned prefix = v[count].prefix;

				for (unsigned i = prefix;
				     i < sizeof(v[count].addr.a) * 8; i++)
					v[count].addr.a[i / 8] &=
					    (unsigned char)~(0x80u >> (i % 8));
				netaddr_format(&v[count].addr, net,
				               sizeof(net));
				free(v);
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s entry '%.*s' has bits set past its "
				    "prefix; write the network, e.g. %s/%u",
				    setting, (int)(elen > 64 ? 64 : elen), e,
				    net, prefix);
			}
			if (r < 0) {
				free(v);
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s entry '%.*s' is not an IPv4 or IPv6 "
				    "address or CIDR range (no names, ports or "
				    "zones), e.g. %s=127.0.0.1,::1,10.0.0.0/8",
				    setting, (int)(elen > 64 ? 64 : elen), e,
				    setting);
			}
			count++;
		}
		if (!p[len])
			break;
		p += len + 1;
	}
	*out = v;
	*n = count;
	return 0;
}

bool netaddr_cidrs_contain(const struct netaddr_cidr *c, size_t n,
                           const struct netaddr *a)
{
	for (size_t i = 0; i < n; i++) {
		unsigned full = c[i].prefix / 8, rest = c[i].prefix % 8;

		if (c[i].addr.family != a->family ||
		    memcmp(c[i].addr.a, a->a, full) != 0)
			continue;
		if (rest == 0 || ((c[i].addr.a[full] ^ a->a[full]) &
		                  (0xffu << (8 - rest)) & 0xffu) == 0)
			return true;
	}
	return false;
}

/*
 * One X-Forwarded-For entry: an address, "IPv4:port" or "[IPv6]" with an
 * optional ":port" (what some proxies write).
 */
static int xff_entry_parse(const char *s, size_t n, struct netaddr *out)
{
	const char *colon;
	unsigned long port;

	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		size_t alen;

		if (!close)
			return -EINVAL;
		alen = (size_t)(close - s - 1);
		if (netaddr_parse(s + 1, alen, out) < 0 ||
		    !memchr(s + 1, ':', alen))
			return -EINVAL;
		n -= alen + 2;
		if (n == 0)
			return 0;
		if (close[1] != ':')
			return -EINVAL;
		return parse_small(close + 2, n - 1, 5, 65535, &port) == 0 &&
		               port > 0
		           ? 0
		           : -EINVAL;
	}
	colon = memchr(s, ':', n);
	if (colon && !memchr(colon + 1, ':', n - (size_t)(colon - s) - 1)) {
		size_t alen = (size_t)(colon - s);

		if (netaddr_parse(s, alen, out) < 0 ||
		    parse_small(colon + 1, n - alen - 1, 5, 65535, &port) < 0 ||
		    port == 0)
			return -EINVAL;
		return 0;
	}
	return netaddr_parse(s, n, out);
}

/*
 * Walks one X-Forwarded-For value from the right. Returns 1 with the
 * client in *a, 0 when every entry was a trusted hop (the last one in
 * *last), -1 when an entry does not parse or *hops ran out.
 */
static int xff_walk(const struct netaddr_cidr *trusted, size_t n, const char *v,
                    unsigned *hops, struct netaddr *last, struct netaddr *a)
{
	size_t end = strlen(v);

	for (;;) {
		size_t start = end;
		const char *e;
		size_t elen;

		if ((*hops)++ >= NETADDR_XFF_HOPS_MAX)
			return -1;
		while (start > 0 && v[start - 1] != ',')
			start--;
		e = v + start;
		elen = end - start;
		trim(&e, &elen);
		if (xff_entry_parse(e, elen, a) < 0)
			return -1;
		if (!netaddr_cidrs_contain(trusted, n, a))
			return 1;
		*last = *a;
		if (start == 0)
			return 0;
		end = start - 1;
	}
}

enum netaddr_from netaddr_client(const struct netaddr_cidr *trusted, size_t n,
                                 const char *peer, const char *cf,
                                 const char *const *xff, size_t n_xff,
                                 char *out, size_t outlen)
{
	struct netaddr last, a;
	unsigned hops = 0;

	if (outlen)
		out[0] = '\0';
	if (!peer || netaddr_parse(peer, strlen(peer), &last) < 0)
		return NETADDR_FROM_PEER;
	if (!netaddr_cidrs_contain(trusted, n, &last)) {
		netaddr_format(&last, out, outlen);
		return NETADDR_FROM_PEER;
	}
	if (cf) {
		size_t len = strlen(cf);

		trim(&cf, &len);
		if (netaddr_parse(cf, len, &a) == 0) {
			netaddr_format(&a, out, outlen);
			return NETADDR_FROM_CF;
		}
	}
	/* From the right: each hop appended the address it saw. */
	for (size_t i = n_xff; i > 0; i--) {
		int r = xff_walk(trusted, n, xff[i - 1] ? xff[i - 1] : "",
		                 &hops, &last, &a);

		if (r > 0) {
			netaddr_format(&a, out, outlen);
			return NETADDR_FROM_XFF;
		}
		if (r < 0)
			break;
	}
	netaddr_format(&last, out, outlen);
	return NETADDR_FROM_PROXY;
}

void netaddr_source_key(const char *addr, char *out, size_t outlen)
{
	struct netaddr a;
	char text[NETADDR_TEXT_MAX];

	if (!addr || netaddr_parse(addr, strlen(addr), &a) < 0) {
		snprintf(out, outlen, "%s", addr ? addr : "");
		return;
	}
	if (a.family == AF_INET) {
		netaddr_format(&a, out, outlen);
		return;
	}
	memset(a.a + 8, 0, 8);
	netaddr_format(&a, text, sizeof(text));
	snprintf(out, outlen, "%s/64", text);
}
