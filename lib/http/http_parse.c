/* SPDX-License-Identifier: MIT */
/*
 * http_parse: the pure parsers the HTTP front applies to request heads
 * (Range, Accept, Content-Type, Host and Origin allow-lists, route paths,
 * method names). No state; thread-safe; fuzzed by fuzz_http_headers.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/http_internal.h"
#include "util/num.h"

int http_parse_range(const char *h, uint64_t size, uint64_t *first,
                     uint64_t *last)
{
	const char *p, *end;
	uint64_t a, b;

	*first = *last = 0;
	if (!h)
		return 0;
	while (*h == ' ')
		h++;
	if (strncasecmp(h, "bytes=", 6) != 0)
		return 0;
	p = h + 6;
	while (*p == ' ')
		p++;
	if (strchr(p, ','))
		return 0; /* several ranges: send the whole file */
	if (*p == '-') {
		/* Suffix: the last N bytes. */
		end = num_scan_u64(p + 1, UINT64_MAX, &b);
		if (!end)
			return 0;
		while (*end == ' ')
			end++;
		if (*end)
			return 0;
		if (b == 0 || size == 0)
			return -1;
		*first = b >= size ? 0 : size - b;
		*last = size - 1;
		return 1;
	}
	end = num_scan_u64(p, UINT64_MAX, &a);
	if (!end || *end != '-')
		return 0;
	p = end + 1;
	while (*p == ' ')
		p++;
	if (*p == '\0') {
		b = size ? size - 1 : 0;
	} else {
		end = num_scan_u64(p, UINT64_MAX, &b);
		if (!end)
			return 0;
		while (*end == ' ')
			end++;
		if (*end || b < a)
			return 0;
		if (b >= size)
			b = size ? size - 1 : 0;
	}
	if (a >= size)
		return -1;
	*first = a;
	*last = b;
	return 1;
}

/* The weight of a "q=" parameter (RFC 9110: 0 to 1); 1 if malformed. */
static double qvalue(const char *s)
{
	char tok[8];
	size_t n = strcspn(s, " \t,;");
	double q = 1;

	if (n == 0 || n >= sizeof(tok))
		return 1;
	memcpy(tok, s, n);
	tok[n] = '\0';
	return num_double(tok, 0, 1, &q) == 0 ? q : 1;
}

/* Compares one media range (no params) against a type. */
static bool media_match(const char *range, size_t rl, const char *type)
{
	size_t tl = strlen(type);
	const char *slash = strchr(type, '/');

	if (rl == 3 && strncmp(range, "*/*", 3) == 0)
		return true;
	if (slash && rl == (size_t)(slash - type) + 2 &&
	    strncasecmp(range, type, (size_t)(slash - type) + 1) == 0 &&
	    range[rl - 1] == '*')
		return true;
	return rl == tl && strncasecmp(range, type, tl) == 0;
}

bool http_accepts(const char *accept, const char *type)
{
	const char *p = accept;

	if (!accept)
		return false;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		const char *semi;
		size_t rl;

		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		semi = memchr(p, ';', len);
		rl = semi ? (size_t)(semi - p) : len;
		while (rl && (p[rl - 1] == ' ' || p[rl - 1] == '\t'))
			rl--;
		if (media_match(p, rl, type)) {
			/* q=0 means "not acceptable". */
			const char *q = semi ? strstr(semi, "q=") : NULL;

			if (!q || q >= p + len || qvalue(q + 2) > 0)
				return true;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

bool http_media_type_is(const char *ct, const char *type)
{
	size_t tl = strlen(type);

	if (!ct)
		return false;
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, type, tl) != 0)
		return false;
	ct += tl;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

bool http_allowed(const char *value, char *const *patterns, bool is_origin)
{
	size_t vl;

	if (!value || !patterns)
		return false;
	vl = strlen(value);
	for (char *const *p = patterns; *p; p++) {
		const char *pat = *p;
		size_t pl = strlen(pat);

		if (strcmp(pat, "*") == 0)
			return true;
		if (pl == vl && strcasecmp(pat, value) == 0)
			return true;
		/* "http://localhost:*": that origin on any port. */
		if (is_origin && pl > 2 && strcmp(pat + pl - 2, ":*") == 0 &&
		    vl > pl - 1 && strncasecmp(pat, value, pl - 1) == 0) {
			const char *port = value + pl - 1;

			if (*port && strspn(port, "0123456789") == strlen(port))
				return true;
		}
	}
	return false;
}

/* Host header: compare with the port stripped, and with it. */
bool http_host_allowed(const struct config *cfg, const char *host)
{
	char name[300];
	const char *colon;

	if (!cfg->allowed_hosts || !cfg->allowed_hosts[0])
		return true;
	if (!host || !*host || strlen(host) >= sizeof(name))
		return false;
	if (http_allowed(host, cfg->allowed_hosts, false))
		return true;
	if (host[0] == '[') {
		const char *rb = strchr(host, ']');

		if (!rb)
			return false;
		snprintf(name, sizeof(name), "%.*s", (int)(rb - host + 1),
		         host);
	} else {
		colon = strrchr(host, ':');
		snprintf(name, sizeof(name), "%.*s",
		         (int)(colon ? (size_t)(colon - host) : strlen(host)),
		         host);
	}
	return http_allowed(name, cfg->allowed_hosts, false);
}

bool http_path_match(const char *route_path, enum http_match match,
                     const char *url, const char **rest)
{
	size_t n = strlen(route_path);

	*rest = "";
	if (strncmp(url, route_path, n) != 0)
		return false;
	if (url[n] == '\0') {
		*rest = url + n;
		return true;
	}
	if (match != HTTP_MATCH_PREFIX)
		return false;
	/* "/a" matches "/a/b" but not "/ab"; "/a/" matches "/a/b". */
	if (n && route_path[n - 1] != '/' && url[n] != '/')
		return false;
	*rest = url + n;
	return true;
}

static const struct {
	const char *name;
	unsigned bit;
} methods[] = {
    {"GET", HTTP_GET},     {"HEAD", HTTP_HEAD},     {"POST", HTTP_POST},
    {"PUT", HTTP_PUT},     {"DELETE", HTTP_DELETE}, {"OPTIONS", HTTP_OPTIONS},
    {"PATCH", HTTP_PATCH},
};

unsigned http_method_bit(const char *method)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(method, methods[i].name) == 0)
			return methods[i].bit;
	return 0;
}

void http_methods_text(unsigned set, char *out, size_t outlen)
{
	size_t used = 0;

	if (outlen == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		int n;

		if (!(set & methods[i].bit))
			continue;
		n = snprintf(out + used, outlen - used, "%s%s",
		             used ? ", " : "", methods[i].name);
		if (n < 0 || (size_t)n >= outlen - used)
			break;
		used += (size_t)n;
	}
}

bool http_body_type_ok(const char *content_type, unsigned types)
{
	if (types == 0)
		return true;
	if ((types & HTTP_BODY_JSON) &&
	    http_media_type_is(content_type, "application/json"))
		return true;
	return (types & HTTP_BODY_FORM) &&
	       http_media_type_is(content_type,
	                          "application/x-www-form-urlencoded");
}
