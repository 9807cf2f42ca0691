/* SPDX-License-Identifier: MIT */
/*
 * test_http: the header parsers, route matching, auth results (static
 * tokens, MCP_AUTH=none, a token hook), and a server on 127.0.0.1 with
 * routes added the way other modules add them: methods, content types,
 * body limits, prefix paths, auth with a scope and a hook, a head hook, an
 * early route, a built-in route replaced, a handler that answers nothing.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "http/auth.h"
#include "http/http.h"
#include "tap.h"
#include "util/log.h"

static void test_parsers(void)
{
	uint64_t a, b;
	char o1[] = "http://localhost:*", o2[] = "https://claude.ai";
	char star[] = "*";
	char *origins[] = {o1, o2, NULL};
	char *any[] = {star, NULL};

	is_int(http_parse_range("bytes=0-9", 100, &a, &b), 1, "simple range");
	ok(a == 0 && b == 9, "simple range bounds");
	is_int(http_parse_range("bytes=90-", 100, &a, &b), 1, "open range");
	ok(a == 90 && b == 99, "open range bounds");
	is_int(http_parse_range("bytes=-10", 100, &a, &b), 1, "suffix range");
	ok(a == 90 && b == 99, "suffix range bounds");
	is_int(http_parse_range("bytes=-1000", 100, &a, &b), 1,
	       "suffix larger than the file");
	ok(a == 0 && b == 99, "clamped to the file");
	is_int(http_parse_range("bytes=50-1000", 100, &a, &b), 1,
	       "end past the file");
	ok(b == 99, "end clamped");
	is_int(http_parse_range("bytes=100-", 100, &a, &b), -1,
	       "start at the end is unsatisfiable");
	is_int(http_parse_range("bytes=-0", 100, &a, &b), -1,
	       "empty suffix is unsatisfiable");
	is_int(http_parse_range("bytes=9-3", 100, &a, &b), 0,
	       "reversed range ignored");
	is_int(http_parse_range("bytes=0-1,5-6", 100, &a, &b), 0,
	       "several ranges ignored");
	is_int(http_parse_range("items=0-1", 100, &a, &b), 0,
	       "other unit ignored");
	is_int(http_parse_range("bytes=18446744073709551616-", 100, &a, &b), 0,
	       "overflowing start ignored");
	is_int(http_parse_range(NULL, 100, &a, &b), 0, "no header");

	ok(http_accepts("application/json, text/event-stream",
	                "text/event-stream"),
	   "accept list");
	ok(http_accepts("text/event-stream;q=0.9, application/json",
	                "application/json"),
	   "accept with params");
	ok(!http_accepts("text/event-stream;q=0", "text/event-stream"),
	   "q=0 is a refusal");
	ok(http_accepts("*/*", "application/json"), "wildcard");
	ok(http_accepts("application/*", "application/json"), "type wildcard");
	ok(!http_accepts("application/jsonx", "application/json"),
	   "no prefix match");
	ok(!http_accepts(NULL, "application/json"), "absent Accept");

	ok(http_media_type_is("application/json; charset=utf-8",
	                      "application/json"),
	   "content type with params");
	ok(!http_media_type_is("application/json-seq", "application/json"),
	   "content type prefix is not a match");
	ok(!http_media_type_is("text/plain", "application/json"),
	   "other content type");

	ok(http_allowed("http://localhost:6274", origins, true),
	   "origin with any port");
	ok(!http_allowed("http://localhost.evil.com:80", origins, true),
	   "look-alike origin refused");
	ok(!http_allowed("http://localhost:", origins, true),
	   "empty port refused");
	ok(!http_allowed("http://localhost:80x", origins, true),
	   "non-numeric port refused");
	ok(http_allowed("HTTPS://CLAUDE.AI", origins, true),
	   "case-insensitive match");
	ok(http_allowed("http://evil.example.com", any, true), "* allows all");
	ok(!http_allowed("http://evil.example.com", origins, true),
	   "other origin refused");
}

static void test_routes(void)
{
	const char *rest = NULL;
	char text[80];

	ok(http_path_match("/mcp", HTTP_MATCH_EXACT, "/mcp", &rest) && !*rest,
	   "exact path");
	ok(!http_path_match("/mcp", HTTP_MATCH_EXACT, "/mcp/x", &rest),
	   "exact path, longer request");
	ok(!http_path_match("/mcp", HTTP_MATCH_EXACT, "/mc", &rest),
	   "exact path, shorter request");
	ok(http_path_match(
	       "/.well-known/oauth-protected-resource", HTTP_MATCH_PREFIX,
	       "/.well-known/oauth-protected-resource/mcp", &rest) &&
	       strcmp(rest, "/mcp") == 0,
	   "prefix path with a resource path after it");
	ok(http_path_match("/a", HTTP_MATCH_PREFIX, "/a", &rest) && !*rest,
	   "prefix path, exactly");
	ok(!http_path_match("/a", HTTP_MATCH_PREFIX, "/ab", &rest),
	   "a prefix matches whole segments only");
	ok(http_path_match("/files/", HTTP_MATCH_PREFIX, "/files/x/y", &rest) &&
	       strcmp(rest, "x/y") == 0,
	   "a prefix ending in / takes what follows");

	is_int(http_method_bit("GET"), HTTP_GET, "GET");
	is_int(http_method_bit("OPTIONS"), HTTP_OPTIONS, "OPTIONS");
	is_int(http_method_bit("get"), 0, "methods are case-sensitive");
	is_int(http_method_bit("PROPFIND"), 0, "unknown method");
	http_methods_text(HTTP_POST | HTTP_GET | HTTP_DELETE, text,
	                  sizeof(text));
	is_str(text, "GET, POST, DELETE", "Allow text in a fixed order");
	http_methods_text(HTTP_ANY_METHOD, text, 12);
	ok(strlen(text) < 12, "Allow text is cut to its buffer");

	ok(http_body_type_ok("application/json; charset=utf-8", HTTP_BODY_JSON),
	   "JSON accepted");
	ok(!http_body_type_ok("application/x-www-form-urlencoded",
	                      HTTP_BODY_JSON),
	   "a form is not JSON");
	ok(http_body_type_ok("application/x-www-form-urlencoded",
	                     HTTP_BODY_JSON | HTTP_BODY_FORM),
	   "a form where forms are accepted");
	ok(!http_body_type_ok(NULL, HTTP_BODY_FORM), "no type is not a form");
	ok(http_body_type_ok("text/plain", 0), "no accepted types: anything");
}

/* ---- auth ---------------------------------------------------------- */

static int hook_calls;

/*
 * Access tokens "at_<tenant>_<scope>"; "at_down" when the store is down;
 * "at__x" accepted without a tenant (which auth_check must refuse).
 */
static enum auth_status verify(void *data, const char *tok, size_t len,
                               struct auth_result *out)
{
	char t[128];
	char *us;

	(void)data;
	hook_calls++;
	if (len >= sizeof(t) || len < 3 || memcmp(tok, "at_", 3) != 0)
		return AUTH_INVALID;
	memcpy(t, tok, len);
	t[len] = '\0';
	if (strcmp(t, "at_down") == 0)
		return AUTH_UNAVAILABLE;
	us = strchr(t + 3, '_');
	if (!us)
		return AUTH_INVALID;
	*us = '\0';
	snprintf(out->tenant, sizeof(out->tenant), "%.64s", t + 3);
	snprintf(out->scopes, sizeof(out->scopes), "%.200s", us + 1);
	snprintf(out->fingerprint, sizeof(out->fingerprint), "fp-oauth");
	return AUTH_OK;
}

static char *challenge(void *data, const char *path, enum auth_status st,
                       bool presented)
{
	char *s = malloc(200);

	(void)data;
	if (s)
		snprintf(s, 200,
		         "Bearer resource_metadata=\"http://x/.well-known/"
		         "oauth-protected-resource%s\"%s%s",
		         path, presented ? ", error=\"invalid_token\"" : "",
		         st == AUTH_SCOPE ? ", scope=\"tools\"" : "");
	return s;
}

static const struct auth_hook hook = {.verify = verify, .challenge = challenge};

static void add_token(struct config_token *t, const char *tenant,
                      const char *token)
{
	unsigned int n = 0;

	t->tenant = (char *)(uintptr_t)tenant;
	EVP_Digest(token, strlen(token), t->digest, &n, EVP_sha256(), NULL);
	log_fingerprint(token, strlen(token), t->fingerprint);
}

static void test_auth(void)
{
	struct config_token toks[2];
	struct config cfg = {.tokens = toks, .n_tokens = 2};
	struct auth_result r;

	add_token(&toks[0], "alice", "tok-alice");
	add_token(&toks[1], "bob", "tok-bob");
	is_int(auth_check(&cfg, NULL, "Bearer tok-bob", &r), AUTH_OK,
	       "a static token");
	ok(r.method == AUTH_METHOD_STATIC && strcmp(r.tenant, "bob") == 0 &&
	       strcmp(r.fingerprint, toks[1].fingerprint) == 0 && !r.scopes[0],
	   "its tenant copied, its fingerprint, no scopes");
	ok(r.tenant != toks[1].tenant, "the tenant is the result's own copy");
	ok(auth_has_scope(&r, "anything"), "a static token has every scope");
	is_int(auth_check(&cfg, NULL, NULL, &r), AUTH_MISSING, "no header");
	is_int(auth_check(&cfg, NULL, "Basic eDp5", &r), AUTH_MISSING,
	       "another scheme");
	is_int(auth_check(&cfg, NULL, "Bearer   ", &r), AUTH_MISSING,
	       "an empty token");
	is_int(auth_check(&cfg, NULL, "Bearer tok-carol", &r), AUTH_INVALID,
	       "an unknown token");
	ok(!r.tenant[0] && r.method == AUTH_METHOD_NONE,
	   "nothing is left in a refused result");

	hook_calls = 0;
	is_int(auth_check(&cfg, &hook, "Bearer tok-alice", &r), AUTH_OK,
	       "a static token with a hook");
	is_int(hook_calls, 0, "the hook is not asked about a static token");
	is_int(auth_check(&cfg, &hook, "Bearer at_carol_mcp tools", &r),
	       AUTH_INVALID, "not a b64token: refused");
	is_int(hook_calls, 0, "and never shown to the hook");
	is_int(auth_check(&cfg, &hook, "Bearer at_carol_mcp", &r), AUTH_OK,
	       "an access token the hook accepts");
	ok(r.method == AUTH_METHOD_OAUTH && strcmp(r.tenant, "carol") == 0 &&
	       strcmp(r.scopes, "mcp") == 0 &&
	       strcmp(r.fingerprint, "fp-oauth") == 0,
	   "its tenant, scopes and fingerprint");
	ok(auth_has_scope(&r, "mcp") && !auth_has_scope(&r, "mc") &&
	       !auth_has_scope(&r, "tools") && auth_has_scope(&r, NULL),
	   "scopes are whole words");
	is_int(auth_check(&cfg, &hook, "Bearer at_down", &r), AUTH_UNAVAILABLE,
	       "the hook cannot check now");
	is_int(auth_check(&cfg, &hook, "Bearer at__mcp", &r), AUTH_INVALID,
	       "accepted without a tenant: refused");
	is_int(auth_check(&cfg, &hook, "Bearer zzz", &r), AUTH_INVALID,
	       "refused by the hook");

	cfg.auth_none = true;
	is_int(auth_check(&cfg, NULL, NULL, &r), AUTH_OK, "MCP_AUTH=none");
	ok(r.method == AUTH_METHOD_NONE && strcmp(r.tenant, "local") == 0,
	   "is the tenant 'local'");
	is_str(auth_method_name(AUTH_METHOD_OAUTH), "oauth", "method names");
}

/* ---- a server with added routes ------------------------------------ */

struct resp {
	long status;
	char body[8192];
	size_t blen;
	char hdr[8192];
	size_t hlen;
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	size_t k = sz * n;

	if (r->blen + k < sizeof(r->body)) {
		memcpy(r->body + r->blen, p, k);
		r->blen += k;
		r->body[r->blen] = '\0';
	}
	return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	size_t k = sz * n;

	if (r->hlen + k < sizeof(r->hdr)) {
		memcpy(r->hdr + r->hlen, p, k);
		r->hlen += k;
		r->hdr[r->hlen] = '\0';
	}
	return k;
}

/* One request; headers is a NULL-terminated list of "Name: value". */
static void req(unsigned port, const char *method, const char *path,
                const char *const *headers, const char *body, struct resp *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char url[1024];

	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	for (const char *const *p = headers; p && *p; p++)
		h = curl_slist_append(h, *p);
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

static bool has(const struct resp *r, const char *s)
{
	return strcasestr(r->hdr, s) || strstr(r->body, s);
}

/* What a handler saw, echoed back. */
static void echo(void *data, struct http_request *rq)
{
	const struct auth_result *a = http_request_auth(rq);
	const char *x = http_request_query(rq, "x");
	char text[4096];
	size_t len;
	const char *body = http_request_body(rq, &len);

	snprintf(text, sizeof(text),
	         "route=%s method=%s path=%s sub=%s raw=%s x=%s body=%s "
	         "auth=%s tenant=%s scopes=%s peer=%s client=%s",
	         (const char *)data, http_request_method(rq),
	         http_request_path(rq), http_request_subpath(rq),
	         http_request_query_string(rq), x ? x : "-", body,
	         a ? auth_method_name(a->method) : "-", a ? a->tenant : "-",
	         a ? a->scopes : "-", http_request_peer(rq),
	         http_request_client(rq));
	(void)http_reply(rq, 200, "text/plain", text, strlen(text));
}

static int second_reply, bad_header;

static void early(void *data, struct http_request *rq)
{
	(void)data;
	(void)http_reply(rq, 202, "text/plain", "early", 5);
	second_reply = http_reply(rq, 200, "text/plain", "again", 5);
	bad_header = http_reply_header(rq, "X-Bad", "a\r\nSet-Cookie: x=1");
	(void)http_reply_header(rq, "X-Early", "yes");
}

static void silent(void *data, struct http_request *rq)
{
	(void)data;
	(void)rq;
}

static bool refuse_teapots(void *data, struct http_request *rq)
{
	(void)data;
	if (!http_request_header(rq, "X-Teapot"))
		return true;
	(void)http_reply_oauth_error(rq, 418, "teapot", "refused on the head");
	return false;
}

static char name_form[] = "form", name_p[] = "p", name_head[] = "head",
            name_token[] = "token";

static const struct http_route routes[] = {
    {.path = "/form",
     .methods = HTTP_POST,
     .body_types = HTTP_BODY_FORM,
     .max_body = 64,
     .handler = echo,
     .data = name_form},
    {.path = "/p",
     .match = HTTP_MATCH_PREFIX,
     .methods = HTTP_GET,
     .auth = true,
     .scope = "tools",
     .handler = echo,
     .data = name_p},
    {.path = "/head",
     .methods = HTTP_POST,
     .head = refuse_teapots,
     .handler = echo,
     .data = name_head},
    {.path = "/early",
     .methods = HTTP_ANY_METHOD,
     .early = true,
     .handler = early},
    {.path = "/token",
     .methods = HTTP_POST,
     .body_types = HTTP_BODY_FORM,
     .cors = HTTP_CORS_ANY,
     .handler = echo,
     .data = name_token},
    {.path = "/silent", .methods = HTTP_GET, .handler = silent},
};

static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	unsigned port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

static void test_requests(unsigned port)
{
	static const char *const form[] = {
	    "Content-Type: application/x-www-form-urlencoded", NULL};
	static const char *const json[] = {"Content-Type: application/json",
	                                   NULL};
	static const char *const alice[] = {
	    "Authorization: Bearer tok-alice-0123456789", NULL};
	static const char *const carol[] = {
	    "Authorization: Bearer at_carol_tools", NULL};
	static const char *const dave[] = {"Authorization: Bearer at_dave_mcp",
	                                   NULL};
	static const char *const down[] = {"Authorization: Bearer at_down",
	                                   NULL};
	static const char *const teapot[] = {"X-Teapot: 1", NULL};
	static const char *const xff[] = {
	    "Content-Type: application/x-www-form-urlencoded",
	    "X-Forwarded-For: 6.6.6.6, 203.0.113.5", NULL};
	static const char *const xff_bad[] = {
	    "Content-Type: application/x-www-form-urlencoded",
	    "X-Forwarded-For: 203.0.113.5, 6.6.6.6:99999", NULL};
	static const char *const origin[] = {
	    "Origin: https://elsewhere.example", NULL};
	struct resp r;

	req(port, "POST", "/form?x=1%202&y", form, "a=1&b=2", &r);
	ok(r.status == 200 && has(&r, "route=form method=POST path=/form ") &&
	       has(&r, "raw=x=1%202&y x=1 2 body=a=1&b=2 auth=- ") &&
	       has(&r, "peer=127.0.0.1"),
	   "a form post: raw and decoded query, body, no auth: %s", r.body);
	/* 127.0.0.1 is a trusted proxy here (MCP_TRUSTED_PROXIES below). */
	req(port, "POST", "/form", xff, "a=1", &r);
	ok(r.status == 200 && has(&r, "peer=127.0.0.1 client=203.0.113.5"),
	   "a trusted proxy's X-Forwarded-For names the client: %s", r.body);
	req(port, "POST", "/form", xff_bad, "a=1", &r);
	ok(r.status == 200 && has(&r, "peer=127.0.0.1 client=127.0.0.1"),
	   "one that does not parse leaves the proxy: %s", r.body);
	req(port, "POST", "/form", json, "{}", &r);
	ok(r.status == 415 && has(&r, "application/x-www-form-urlencoded"),
	   "JSON where a form is expected: 415 naming the type (%ld)",
	   r.status);
	req(port, "POST", "/form", form,
	    "a="
	    "012345678901234567890123456789012345678901234567890123456789012345"
	    "67890",
	    &r);
	ok(r.status == 413 && has(&r, "limit of 64 bytes"),
	   "over the route's own body limit: 413 (%ld)", r.status);
	req(port, "GET", "/form", NULL, NULL, &r);
	ok(r.status == 405 && has(&r, "Allow: POST"),
	   "another method: 405 with Allow (%ld)", r.status);

	req(port, "GET", "/p/sub/x?x=y", alice, NULL, &r);
	ok(r.status == 200 && has(&r, "sub=/sub/x ") &&
	       has(&r, "auth=static token tenant=alice scopes= "),
	   "a prefix route with a static token: %s", r.body);
	req(port, "GET", "/p", carol, NULL, &r);
	ok(r.status == 200 && has(&r, "auth=oauth tenant=carol scopes=tools"),
	   "an access token from the hook: %s", r.body);
	req(port, "GET", "/p", dave, NULL, &r);
	ok(r.status == 403 && has(&r, "scope=\"tools\"") &&
	       has(&r, "WWW-Authenticate: Bearer resource_metadata="),
	   "without the route's scope: 403 with the hook's challenge (%ld)",
	   r.status);
	req(port, "GET", "/p", NULL, NULL, &r);
	ok(r.status == 401 &&
	       has(&r, "WWW-Authenticate: Bearer resource_metadata=\"http://x/"
	               ".well-known/oauth-protected-resource/p\"\r"),
	   "no token: 401 with the hook's challenge (%ld)", r.status);
	req(port, "GET", "/p", down, NULL, &r);
	ok(r.status == 503 && has(&r, "Retry-After: 5"),
	   "the hook cannot check: 503 (%ld)", r.status);
	req(port, "GET", "/pq", alice, NULL, &r);
	is_int(r.status, 404, "a prefix is matched by whole segments");

	req(port, "POST", "/head", teapot, "x", &r);
	ok(r.status == 418 && has(&r, "\"error\":\"teapot\""),
	   "a head hook refuses (%ld)", r.status);
	req(port, "POST", "/head", NULL, "x", &r);
	ok(r.status == 200 && has(&r, "body=x "), "and lets others through");

	req(port, "PUT", "/early", NULL, "ignored", &r);
	ok(r.status == 202 && has(&r, "X-Early: yes") &&
	       strcmp(r.body, "early") == 0,
	   "an early route answers from the head (%ld)", r.status);
	is_int(second_reply, -EALREADY, "a second answer is refused");
	is_int(bad_header, -EINVAL, "a header with CR/LF is refused");
	ok(!has(&r, "Set-Cookie"), "and nothing of it was sent");

	req(port, "POST", "/token", form, "grant_type=x", &r);
	ok(r.status == 200 && has(&r, "route=token"),
	   "an added route replaces the built-in /token (%ld)", r.status);
	req(port, "GET", "/.well-known/oauth-authorization-server", origin,
	    NULL, &r);
	ok(r.status == 404 && has(&r, "OAuth is not enabled") &&
	       has(&r, "Access-Control-Allow-Origin: *"),
	   "built-in OAuth rows still answer, readable from any origin");
	req(port, "GET", "/silent", NULL, NULL, &r);
	is_int(r.status, 500, "a handler that answers nothing: 500");
	req(port, "GET", "/healthz", NULL, NULL, &r);
	ok(r.status == 200 && has(&r, "Cache-Control: no-store") &&
	       has(&r, "X-Content-Type-Options: nosniff"),
	   "built-in routes and the common headers");
}

static void test_server(void)
{
	struct config cfg;
	struct mcp_server *mcp = NULL;
	struct http_server *hs = NULL;
	struct http_route bad = {
	    .path = "nope", .methods = HTTP_GET, .handler = silent};
	char err[512], addr[64];
	int r = 0;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", free_port());
	setenv("MCP_HTTP_ADDR", addr, 1);
	setenv("MCP_API_TOKENS", "alice:tok-alice-0123456789", 1);
	setenv("SANDBOX_ROOT", "/tmp", 1);
	setenv(
	    "FILE_SECRET",
	    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	    1);
	setenv("MCP_LOG_LEVEL", "warn", 1);
	setenv("MCP_TRUSTED_PROXIES", "127.0.0.1", 1);
	unsetenv("MCP_API_TOKEN");
	unsetenv("MCP_AUTH");
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		ok(false, "config: %s", err);
		config_finish(&cfg);
		return;
	}
	log_set_level(LOG_LEVEL_WARN);
	mcp = mcp_server_create(&cfg);
	ok(mcp && http_server_bind(&cfg, mcp, &hs, err, sizeof(err)) == 0,
	   "bound (%s)", err);
	if (!hs)
		goto out;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		r |= http_server_add_route(hs, &routes[i], err, sizeof(err));
	is_int(r, 0, "routes added before serving");
	is_int(http_server_add_route(hs, &bad, err, sizeof(err)), -EINVAL,
	       "a route whose path does not start with '/'");
	is_int(http_server_set_auth(hs, &hook), 0, "the token hook set");
	if (http_server_start(hs, err, sizeof(err)) != 0) {
		ok(false, "serving: %s", err);
		goto out;
	}
	is_int(http_server_add_route(hs, &routes[0], err, sizeof(err)), -EBUSY,
	       "no route added once serving");
	is_int(http_server_set_auth(hs, &hook), -EBUSY, "nor a hook");
	test_requests(http_server_port(hs));
out:
	http_server_destroy(hs);
	mcp_server_destroy(mcp);
	config_finish(&cfg);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	test_parsers();
	test_routes();
	test_auth();
	test_server();
	curl_global_cleanup();
	return tap_done();
}
