/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_headers: the parsers this project applies to request heads
 * (Range, Accept, Content-Type, Origin/Host allow-lists, Authorization with
 * and without a token hook, route paths, method names). The first byte
 * picks the parser; the rest is the header value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "http.h"

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
	switch (data[0] % 6) {
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
	}
	free(s);
	return 0;
}
