/* SPDX-License-Identifier: MIT */
/*
 * egress_policy: parsing, narrowing and rendering of egress allow-lists;
 * see egress_policy.h. Everything here is pure over caller memory.
 */
#include "config/egress_policy.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "util/netaddr.h"

static bool ep_is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n';
}

/* Checks name (already lower case) label by label. */
static int ep_name_check(const char *name, size_t n, const char *shown,
                         char *err, size_t errlen)
{
	size_t label = 0;

	if (n == 0 || n > EGRESS_NAME_MAX) {
		snprintf(err, errlen,
		         "'%.80s' is not a domain name: it must have 1 to %d "
		         "characters, e.g. api.example.com",
		         shown, EGRESS_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i <= n; i++) {
		char c = i < n ? name[i] : '.';

		if (c == '.') {
			if (label == 0 || label > 63 || name[i - 1] == '-' ||
			    name[i - label] == '-') {
				snprintf(err, errlen,
				         "'%.80s' is not a domain name: every "
				         "label between dots needs 1 to 63 "
				         "letters, digits or inner hyphens "
				         "(no empty label, no trailing dot)",
				         shown);
				return -EINVAL;
			}
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-')) {
			snprintf(
			    err, errlen,
			    "'%.80s' is not a domain pattern: only letters, "
			    "digits, '-', '.', a leading '*.' and a "
			    "':port' may appear",
			    shown);
			return -EINVAL;
		}
		label++;
	}
	return 0;
}

static int ep_port_parse(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;

	if (n == 0 || n > 5 || s[0] == '0')
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*out = v;
	return 0;
}

int egress_rule_parse(const char *s, size_t n, struct egress_rule *out,
                      char *err, size_t errlen)
{
	char shown[96], low[EGRESS_NAME_MAX + 8];
	const char *colon;
	size_t nl;

	memset(out, 0, sizeof(*out));
	snprintf(shown, sizeof(shown), "%.*s", (int)(n < 80 ? n : 80), s);
	for (size_t i = 0; i < strlen(shown); i++)
		if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f)
			shown[i] = '?';
	colon = memchr(s, ':', n);
	nl = colon ? (size_t)(colon - s) : n;
	if (colon && ep_port_parse(colon + 1, n - nl - 1, &out->port) < 0) {
		snprintf(err, errlen,
		         "'%s' has a bad port: write a number from 1 to 65535 "
		         "after the name, e.g. api.example.com:8443",
		         shown);
		return -EINVAL;
	}
	if (nl >= 2 && s[0] == '*' && s[1] == '.') {
		out->wildcard = true;
		s += 2;
		nl -= 2;
	}
	if (nl > EGRESS_NAME_MAX)
		nl = EGRESS_NAME_MAX + 1; /* refused below */
	for (size_t i = 0; i < nl; i++)
		low[i] =
		    (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
	low[nl] = '\0';
	if (ep_name_check(low, nl, shown, err, errlen) < 0)
		return -EINVAL;
	if (out->wildcard && !strchr(low, '.')) {
		snprintf(err, errlen,
		         "'%s' is too wide: a wildcard needs a name with at "
		         "least two labels after '*.', e.g. *.example.com",
		         shown);
		return -EINVAL;
	}
	memcpy(out->name, low, nl + 1);
	return 0;
}

static bool ep_rule_same(const struct egress_rule *a,
                         const struct egress_rule *b)
{
	return a->wildcard == b->wildcard && a->port == b->port &&
	       strcmp(a->name, b->name) == 0;
}

int egress_list_parse(const char *s, const char *what, struct egress_list *out,
                      char *err, size_t errlen)
{
	char why[384];

	memset(out, 0, sizeof(*out));
	while (s && *s) {
		size_t n = 0;
		struct egress_rule r;
		bool dup = false;

		while (ep_is_sep(*s))
			s++;
		while (s[n] && !ep_is_sep(s[n]))
			n++;
		if (n == 0)
			break;
		if (egress_rule_parse(s, n, &r, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s: %s", what, why);
			return -EINVAL;
		}
		for (size_t i = 0; i < out->n && !dup; i++)
			dup = ep_rule_same(&out->rules[i], &r);
		if (!dup) {
			if (out->n == EGRESS_RULES_MAX) {
				snprintf(err, errlen,
				         "%s has more than %d patterns; use "
				         "wildcards such as *.example.com",
				         what, EGRESS_RULES_MAX);
				return -EINVAL;
			}
			out->rules[out->n++] = r;
		}
		s += n;
	}
	return 0;
}

int egress_ports_parse(const char *s, struct egress_ports *out, char *err,
                       size_t errlen)
{
	memset(out, 0, sizeof(*out));
	while (s && *s) {
		size_t n = 0;
		unsigned p;

		while (ep_is_sep(*s))
			s++;
		while (s[n] && !ep_is_sep(s[n]))
			n++;
		if (n == 0)
			break;
		if (ep_port_parse(s, n, &p) < 0 || out->n == EGRESS_PORTS_MAX) {
			snprintf(err, errlen,
			         "SANDBOX_EGRESS_PORTS must be up to %d port "
			         "numbers from 1 to 65535, e.g. 80,443; "
			         "'%.*s' is not",
			         EGRESS_PORTS_MAX, (int)(n < 16 ? n : 16), s);
			return -EINVAL;
		}
		out->port[out->n++] = p;
		s += n;
	}
	if (out->n == 0) {
		snprintf(
		    err, errlen,
		    "SANDBOX_EGRESS_PORTS is empty: name the ports runs may "
		    "connect to, e.g. 80,443");
		return -EINVAL;
	}
	return 0;
}

/* Whether name is below base ("a.b.x.com" below "x.com"). */
static bool ep_below(const char *name, const char *base)
{
	size_t n = strlen(name), b = strlen(base);

	return n > b + 1 && name[n - b - 1] == '.' &&
	       strcmp(name + n - b, base) == 0;
}

bool egress_rule_matches_name(const struct egress_rule *r, const char *host)
{
	return r->wildcard ? ep_below(host, r->name)
	                   : strcmp(host, r->name) == 0;
}

static bool ep_port_in(unsigned p, const struct egress_ports *ports)
{
	for (size_t i = 0; ports && i < ports->n; i++)
		if (ports->port[i] == p)
			return true;
	return false;
}

bool egress_rule_covers(const struct egress_rule *outer,
                        const struct egress_rule *inner,
                        const struct egress_ports *ports)
{
	bool names;

	if (outer->wildcard)
		names =
		    ep_below(inner->name, outer->name) ||
		    (inner->wildcard && strcmp(inner->name, outer->name) == 0);
	else
		names =
		    !inner->wildcard && strcmp(inner->name, outer->name) == 0;
	if (!names)
		return false;
	if (outer->port == 0)
		return inner->port == 0 || ep_port_in(inner->port, ports);
	return inner->port == outer->port;
}

void egress_rule_format(const struct egress_rule *r, char *buf, size_t len)
{
	char port[16] = "";

	if (r->port)
		snprintf(port, sizeof(port), ":%u", r->port);
	snprintf(buf, len, "%s%s%s", r->wildcard ? "*." : "", r->name, port);
}

int egress_list_narrow(const struct egress_list *allowed,
                       const struct egress_list *asked,
                       const struct egress_ports *ports,
                       struct egress_list *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < asked->n; i++) {
		bool ok = false;

		for (size_t j = 0; j < allowed->n && !ok; j++)
			ok = egress_rule_covers(&allowed->rules[j],
			                        &asked->rules[i], ports);
		if (!ok) {
			char a[EGRESS_NAME_MAX + 16], list[512];
			size_t n = 0;

			egress_rule_format(&asked->rules[i], a, sizeof(a));
			list[0] = '\0';
			for (size_t j = 0;
			     j < allowed->n && n + 2 < sizeof(list); j++) {
				char r[EGRESS_NAME_MAX + 16];
				int w;

				egress_rule_format(&allowed->rules[j], r,
				                   sizeof(r));
				w = snprintf(list + n, sizeof(list) - n, "%s%s",
				             j ? ", " : "", r);
				if (w < 0)
					break;
				n += (size_t)w;
				if (n >= sizeof(list))
					n = sizeof(list) - 1;
			}
			snprintf(
			    err, errlen,
			    "network: '%s' is not in this tenant's egress "
			    "allow-list; ask only for names it allows (%s), "
			    "or ask the operator to add it",
			    a, allowed->n ? list : "none: no network");
			return -EPERM;
		}
		out->rules[out->n++] = asked->rules[i];
	}
	return 0;
}

static int ep_put(char *buf, size_t len, size_t *at,
                  const struct egress_rule *r, unsigned port)
{
	int w = snprintf(buf + *at, len - *at, "%s%s %u\n",
	                 r->wildcard ? "*." : "", r->name, port);

	if (w < 0 || (size_t)w >= len - *at)
		return -ENOSPC;
	*at += (size_t)w;
	return 0;
}

int egress_list_render(const struct egress_list *l,
                       const struct egress_ports *ports, char *buf, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return -ENOSPC;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		const struct egress_rule *r = &l->rules[i];

		if (r->port) {
			if (ep_put(buf, len, &at, r, r->port) < 0)
				goto full;
			continue;
		}
		for (size_t p = 0; ports && p < ports->n; p++)
			if (ep_put(buf, len, &at, r, ports->port[p]) < 0)
				goto full;
	}
	return (int)at;
full:
	buf[0] = '\0';
	return -ENOSPC;
}

/* One "tenant=patterns" entry of n bytes: its tenant matched, its list. */
static int ep_tenant_entry(const char *s, size_t n, const char *tenant,
                           struct egress_list *out, bool *matched, char *err,
                           size_t errlen)
{
	const char *eq = memchr(s, '=', n);
	char what[96], *pats;
	size_t tn;
	int r;

	*matched = false;
	tn = eq ? (size_t)(eq - s) : 0;
	while (tn && ep_is_sep(s[tn - 1]))
		tn--;
	while (tn && ep_is_sep(*s)) {
		s++;
		tn--;
		n--;
	}
	if (!eq || tn == 0 || tn > 64) {
		snprintf(err, errlen,
		         "SANDBOX_EGRESS_TENANTS: '%.*s' must be "
		         "tenant=patterns, e.g. team-a=api.example.com "
		         "*.github.com;team-b=pypi.org",
		         (int)(n < 60 ? n : 60), s);
		return -EINVAL;
	}
	eq = memchr(s, '=', n);
	snprintf(what, sizeof(what), "SANDBOX_EGRESS_TENANTS (tenant %.*s)",
	         (int)tn, s);
	pats = strndup(eq + 1, n - (size_t)(eq + 1 - s));
	if (!pats)
		return -ENOMEM;
	r = egress_list_parse(pats, what, out, err, errlen);
	free(pats);
	if (r < 0)
		return r;
	*matched = tenant && strlen(tenant) == tn && memcmp(s, tenant, tn) == 0;
	return 0;
}

int egress_tenant_list(const char *setting, const char *tenant,
                       struct egress_list *out, char *err, size_t errlen)
{
	const char *s = setting;
	struct egress_list *tmp = malloc(sizeof(*tmp));
	int found = 0;

	memset(out, 0, sizeof(*out));
	if (!tmp)
		return -ENOMEM;
	while (s && *s) {
		size_t n = strcspn(s, ";");
		bool only_space = true, matched;
		int r;

		for (size_t i = 0; i < n; i++)
			only_space = only_space && ep_is_sep(s[i]);
		if (!only_space) {
			r = ep_tenant_entry(s, n, tenant, tmp, &matched, err,
			                    errlen);
			if (r < 0) {
				free(tmp);
				return r;
			}
			if (matched && !found) {
				*out = *tmp;
				found = 1;
			}
		}
		s += n;
		if (*s == ';')
			s++;
	}
	free(tmp);
	return found;
}

int egress_hosts_parse(const char *s,
                       void (*fn)(void *arg, const struct egress_host *h),
                       void *arg, char *err, size_t errlen)
{
	while (s && *s) {
		struct egress_host h;
		struct egress_rule r;
		struct netaddr a;
		const char *eq;
		size_t n = 0, nn;
		char why[256];

		while (ep_is_sep(*s))
			s++;
		while (s[n] && !ep_is_sep(s[n]))
			n++;
		if (n == 0)
			break;
		eq = memchr(s, '=', n);
		nn = eq ? (size_t)(eq - s) : 0;
		if (!eq || egress_rule_parse(s, nn, &r, why, sizeof(why)) < 0 ||
		    r.wildcard || r.port ||
		    netaddr_parse(eq + 1, n - nn - 1, &a) < 0 ||
		    a.family != AF_INET) {
			snprintf(
			    err, errlen,
			    "SANDBOX_EGRESS_HOSTS: '%.*s' must be name=IPv4 "
			    "address, e.g. mirror.internal=10.1.2.3",
			    (int)(n < 80 ? n : 80), s);
			return -EINVAL;
		}
		memcpy(h.name, r.name, sizeof(h.name));
		netaddr_format(&a, h.ip, sizeof(h.ip));
		if (fn)
			fn(arg, &h);
		s += n;
	}
	return 0;
}

int egress_subnet_parse(const char *s, unsigned *base, unsigned *prefix,
                        char *err, size_t errlen)
{
	struct netaddr_cidr *c = NULL;
	size_t n = 0;
	char why[256];
	int r;

	r = netaddr_cidrs_parse("SANDBOX_EGRESS_SUBNET", s, &c, &n, why,
	                        sizeof(why));
	if (r == 0 && (n != 1 || c[0].addr.family != AF_INET ||
	               c[0].prefix < 8 || c[0].prefix > 24))
		r = -EINVAL;
	if (r == 0) {
		const unsigned char *b = c[0].addr.a;

		*base = (unsigned)b[0] << 24 | (unsigned)b[1] << 16 |
		        (unsigned)b[2] << 8 | b[3];
		*prefix = c[0].prefix;
	} else if (r == -EINVAL) {
		snprintf(err, errlen,
		         "SANDBOX_EGRESS_SUBNET='%.64s' must be one IPv4 range "
		         "from /8 to /24 that no network of the host uses, "
		         "e.g. 10.213.0.0/16",
		         s);
	} else {
		snprintf(err, errlen, "out of memory");
	}
	free(c);
	return r;
}

int egress_settings_check(const char *allow, const char *tenants,
                          const char *ports, const char *private_cidrs,
                          const char *hosts, const char *subnet, char *err,
                          size_t errlen)
{
	struct egress_list *l = malloc(sizeof(*l));
	struct egress_ports p;
	struct netaddr_cidr *c = NULL;
	unsigned base, prefix;
	size_t n = 0;
	int r;

	if (!l)
		return -ENOMEM;
	r = egress_list_parse(allow, "SANDBOX_EGRESS_ALLOW", l, err, errlen);
	if (r == 0) {
		r = egress_tenant_list(tenants, NULL, l, err, errlen);
		r = r > 0 ? 0 : r;
	}
	free(l);
	if (r == 0)
		r = egress_ports_parse(ports, &p, err, errlen);
	if (r == 0)
		r = netaddr_cidrs_parse("SANDBOX_EGRESS_PRIVATE", private_cidrs,
		                        &c, &n, err, errlen);
	free(c);
	if (r == 0)
		r = egress_hosts_parse(hosts, NULL, NULL, err, errlen);
	if (r == 0)
		r = egress_subnet_parse(subnet, &base, &prefix, err, errlen);
	return r;
}

int egress_url_list(const char *url, struct egress_list *out, char *err,
                    size_t errlen)
{
	bool tls = strncmp(url, "https://", 8) == 0;
	const char *h, *end, *at;
	char host[EGRESS_NAME_MAX + 8], why[256];
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!tls && strncmp(url, "http://", 7) != 0)
		goto bad;
	h = url + (tls ? 8 : 7);
	end = h + strcspn(h, "/?#");
	at = memchr(h, '@', (size_t)(end - h));
	if (at)
		h = at + 1;
	n = (size_t)(end - h);
	if (n == 0 || n >= sizeof(host) - 6)
		goto bad;
	memcpy(host, h, n);
	host[n] = '\0';
	if (!strchr(host, ':'))
		snprintf(host + n, sizeof(host) - n, ":%d", tls ? 443 : 80);
	if (egress_rule_parse(host, strlen(host), &out->rules[0], why,
	                      sizeof(why)) < 0 ||
	    out->rules[0].wildcard)
		goto bad;
	out->n = 1;
	return 0;
bad:
	snprintf(err, errlen,
	         "'%.120s' has no host the egress proxy can allow (a name or "
	         "IPv4 address, an optional port); use such a URL for the "
	         "package index or registry",
	         url);
	return -EINVAL;
}
