/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_headers: the parsers this project applies to request heads
 * (Range, Accept, Content-Type, Origin/Host allow-lists, Authorization with
 * and without a token hook, route paths, method names, the client address
 * behind trusted proxies from CF-Connecting-IP and X-Forwarded-For). The
 * first byte picks the parser; the rest is the header value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/http.h"
#include "util/netaddr.h"

/*
 * The client behind trusted proxies: s is "peer\ncf\nxff\nxff...". What
 * comes out is empty or an address in canonical form, and never anything
 * but the peer when the peer is not trusted. s is also a trusted list.
 */
static void check_client(char *s)
{
	static const char trusted_text[] =
	    "127.0.0.0/8,10.0.0.0/8,::1,fd00::/8";
	struct netaddr_cidr *trusted = NULL, *c = NULL;
	const char *xff[8];
	char *peer = s, *cf = NULL, *p, out[NETADDR_TEXT_MAX], again[80];
	size_t n = 0, nc = 0, nx = 0;
	struct netaddr a, pa;
	enum netaddr_from from;
	char err[256];

	if (netaddr_cidrs_parse("X", s, &c, &nc, err, sizeof(err)) == 0 &&
	    nc > NETADDR_LIST_MAX)
		abort();
	free(c);
	if (netaddr_cidrs_parse("X", trusted_text, &trusted, &n, err,
	                        sizeof(err)) < 0)
		abort();
	p = strchr(s, '\n');
	if (p) {
		*p = '\0';
		cf = p + 1;
		p = strchr(cf, '\n');
		while (p && nx < 8) {
			*p = '\0';
			xff[nx++] = p + 1;
			p = strchr(p + 1, '\n');
		}
		if (*cf == '-')
			cf = NULL;
	}
	from = netaddr_client(trusted, n, peer, cf, xff, nx, out, sizeof(out));
	if (out[0] && netaddr_parse(out, strlen(out), &a) < 0)
		abort();
	if (netaddr_parse(peer, strlen(peer), &pa) == 0) {
		bool ours = netaddr_cidrs_contain(trusted, n, &pa);

		if (!ours && from != NETADDR_FROM_PEER)
			abort();
		netaddr_format(&pa, again, sizeof(again));
		if (from == NETADDR_FROM_PEER && strcmp(out, again) != 0)
			abort();
	} else if (out[0]) {
		abort();
	}
	netaddr_source_key(out, again, sizeof(again));
	free(trusted);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A hook that accepts tokens starting with "at_", naming a long tenant. */
static enum auth_status hook_verify(void *d, const char *tok, size_t len,
                                    struct auth_result *out)
{
	(void)d;
	if (len < 3 || memcmp(tok, "at_", 3) != 0)
		return AUTH_INVALID;
	memset(out->tenant, 'x', sizeof(out->tenant)); /* unterminated */
	snprintf(out->scopes, sizeof(out->scopes), "%.*s", (int)len, tok);
	return AUTH_OK;
}

static void check_auth(const struct config *cfg, const char *s)
{
	static const struct auth_hook hook = {.verify = hook_verify};
	struct auth_result res;

	if (auth_check(cfg, NULL, s, &res) == AUTH_OK &&
	    (res.method != AUTH_METHOD_STATIC || strcmp(res.tenant, "t")))
		abort();
	if (auth_check(cfg, &hook, s, &res) == AUTH_OK &&
	    (!res.tenant[0] || strlen(res.tenant) > AUTH_TENANT_MAX ||
	     strlen(res.scopes) > AUTH_SCOPES_MAX))
		abort();
	(void)auth_has_scope(&res, "mcp");
}

static void check_route(const char *s)
{
	static const char *const paths[] = {
	    "/mcp", "/files/", "/.well-known/oauth-protected-resource"};
	const char *rest;
	char text[80];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (int m = HTTP_MATCH_EXACT; m <= HTTP_MATCH_PREFIX; m++) {
			if (http_path_match(paths[i], (enum http_match)m, s,
			                    &rest) &&
			    (rest < s || rest > s + strlen(s) ||
			     (m == HTTP_MATCH_EXACT && *rest)))
				abort();
		}
	}
	http_methods_text(http_method_bit(s) | HTTP_GET, text, sizeof(text));
	if (strlen(text) >= sizeof(text))
		abort();
	(void)http_body_type_ok(s, HTTP_BODY_JSON | HTTP_BODY_FORM);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char p1[] = "http://localhost:*", p2[] = "https://claude.ai";
	static char *pats[] = {p1, p2, NULL};
	static struct config_token tok = {.tenant = (char *)(uintptr_t) "t"};
	static struct config cfg = {.tokens = &tok, .n_tokens = 1};
	char *s;
	uint64_t a, b;
	int r;

	if (size < 1)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 7) {
	case 0: {
		uint64_t fsize = 1000;

		r = http_parse_range(s, fsize, &a, &b);
		if (r == 1 && (a > b || b >= fsize))
			abort();
		break;
	}
	case 1:
		(void)http_accepts(s, "text/event-stream");
		break;
	case 2:
		(void)http_media_type_is(s, "application/json");
		break;
	case 3:
		(void)http_allowed(s, pats, true);
		(void)http_allowed(s, pats, false);
		break;
	case 4:
		check_auth(&cfg, s);
		break;
	case 5:
		check_route(s);
		break;
	case 6:
		check_client(s);
		break;
	}
	free(s);
	return 0;
}
