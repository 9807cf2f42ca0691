/* SPDX-License-Identifier: MIT */
/*
 * OAuth server tests at the module's API, with a real store: metadata,
 * registration (good and hostile), authorization with the consent form
 * (CSRF, origin, wrong tokens, deny), the token endpoint (codes, PKCE,
 * client authentication, refresh rotation and reuse, replayed codes),
 * revocation, token checks (audience, scope, tenant token rotation) and
 * the purge. The HTTP glue and real clients are tested in
 * tests/integration/oauth.test.mjs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "oauth/oauth.h"
#include "oauth/oauth_db.h"
#include "oauth/oauth_page.h"
#include "schema.h"
#include "tap.h"

#define ISS "https://sandbox.example.com"
#define CLAUDE_CB "https://claude.ai/api/mcp/auth_callback"
#define ALICE "alice-token-0123456789abcdef"
#define BOB "bob-token-0123456789abcdef00"
#define VERIFIER "verifier-0123456789-0123456789-0123456789-abcdef"

static char dir[256];

static int load(struct config *cfg, const char *tokens)
{
	char err[512] = "", root[300];
	int r;

	snprintf(root, sizeof(root), "%s/root", dir);
	setenv("PUBLIC_BASE_URL", ISS, 1);
	setenv("MCP_API_TOKENS", tokens, 1);
	setenv("FILE_SECRET", "0123456789abcdef0123456789abcdef", 1);
	setenv("SANDBOX_ROOT", root, 1);
	setenv("STORE_PATH", "/nonexistent/unused.db", 1);
	r = config_load(cfg, NULL, err, sizeof(err));
	if (r < 0)
		printf("# config: %s\n", err);
	return r;
}

/* BASE64URL(SHA-256(v)) without padding. */
static void challenge_of(const char *v, char out[64])
{
	unsigned char md[32], b64[48];
	unsigned len = 0;

	EVP_Digest(v, strlen(v), md, &len, EVP_sha256(), NULL);
	EVP_EncodeBlock(b64, md, 32);
	for (int i = 0; i < 43; i++)
		out[i] = b64[i] == '+'   ? '-'
		         : b64[i] == '/' ? '_'
		                         : (char)b64[i];
	out[43] = '\0';
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

static cJSON *json_of(const struct oauth_resp *r)
{
	return r->body ? cJSON_Parse(r->body) : NULL;
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The value="..." of a hidden field named name in a page. */
static void field(const char *page, const char *name, char *out, size_t n)
{
	char pat[64];
	const char *p, *e;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "name=\"%s\" value=\"", name);
	p = page ? strstr(page, pat) : NULL;
	if (!p)
		return;
	p += strlen(pat);
	e = strchr(p, '"');
	if (e && (size_t)(e - p) < n) {
		memcpy(out, p, (size_t)(e - p));
		out[e - p] = '\0';
	}
}

/* The query parameters of a Location into f. */
static void location_params(const char *loc, struct oauth_form *f)
{
	const char *q = loc ? strchr(loc, '?') : NULL;

	oauth_form_init(f);
	if (q && oauth_form_parse(f, q + 1, strlen(q + 1), NULL, 0) < 0)
		printf("# bad location %s\n", loc);
}

struct client {
	char id[64];
	char secret[128];
};

static int reg(struct oauth *o, const char *body, struct client *c,
               struct oauth_resp *out)
{
	struct oauth_req rq = {
	    .body = body, .body_len = strlen(body), .client_addr = "192.0.2.1"};
	cJSON *j;

	memset(out, 0, sizeof(*out));
	oauth_register(o, &rq, out);
	if (c && out->status == 201 && (j = json_of(out))) {
		snprintf(c->id, sizeof(c->id), "%s",
		         jstr(j, "client_id") ? jstr(j, "client_id") : "");
		snprintf(c->secret, sizeof(c->secret), "%s",
		         jstr(j, "client_secret") ? jstr(j, "client_secret")
		                                  : "");
		cJSON_Delete(j);
	}
	return (int)out->status;
}

/* GET /authorize with extra parameters (NULL-terminated pairs). */
static void authorize(struct oauth *o, const struct client *c,
                      const char *redirect, const char *const *extra,
                      struct oauth_resp *out)
{
	struct oauth_form q;
	char ch[64];
	struct oauth_req rq = {0};

	challenge_of(VERIFIER, ch);
	oauth_form_init(&q);
	(void)!oauth_form_add(&q, "client_id", c->id, NULL, 0);
	if (redirect)
		(void)!oauth_form_add(&q, "redirect_uri", redirect, NULL, 0);
	for (size_t i = 0; extra && extra[i]; i += 2)
		(void)!oauth_form_add(&q, extra[i], extra[i + 1], NULL, 0);
	if (!oauth_form_get(&q, "response_type"))
		(void)!oauth_form_add(&q, "response_type", "code", NULL, 0);
	if (!oauth_form_get(&q, "code_challenge_method"))
		(void)!oauth_form_add(&q, "code_challenge_method", "S256", NULL,
		                      0);
	if (!oauth_form_get(&q, "code_challenge"))
		(void)!oauth_form_add(&q, "code_challenge", ch, NULL, 0);
	(void)!oauth_form_add(&q, "state", "st-42", NULL, 0);
	rq.query = &q;
	memset(out, 0, sizeof(*out));
	oauth_authorize(o, &rq, out);
	oauth_form_finish(&q);
}

/* POSTs the consent form of a page; cookie and origin as given. */
static void consent(struct oauth *o, const struct oauth_resp *page,
                    const char *token, const char *action, const char *cookie,
                    const char *origin, struct oauth_resp *out)
{
	char req[64], csrf[128], body[1024], ck[200];
	struct oauth_req rq = {.client_addr = "192.0.2.7"};

	field(page->body, "request", req, sizeof(req));
	field(page->body, "csrf", csrf, sizeof(csrf));
	snprintf(body, sizeof(body), "request=%s&csrf=%s&action=%s&token=%s",
	         req, csrf, action, token ? token : "");
	if (!cookie && page->set_cookie) {
		snprintf(ck, sizeof(ck), "%.*s",
		         (int)strcspn(page->set_cookie, ";"), page->set_cookie);
		cookie = ck;
	}
	rq.body = body;
	rq.body_len = strlen(body);
	rq.cookie = cookie;
	rq.origin = origin;
	memset(out, 0, sizeof(*out));
	oauth_consent(o, &rq, out);
}

/* A whole authorization: returns the code in code (empty on failure). */
static void get_code(struct oauth *o, const struct client *c,
                     const char *redirect, const char *token, char *code,
                     size_t n)
{
	struct oauth_resp page, res;
	struct oauth_form f;

	code[0] = '\0';
	authorize(o, c, redirect, NULL, &page);
	consent(o, &page, token, "approve", NULL, ISS, &res);
	location_params(res.location, &f);
	if (oauth_form_get(&f, "code"))
		snprintf(code, n, "%s", oauth_form_get(&f, "code"));
	oauth_form_finish(&f);
	oauth_resp_finish(&page);
	oauth_resp_finish(&res);
}

/* POST /token with a form body; Basic header optional. */
static cJSON *token(struct oauth *o, const char *body, const char *basic,
                    struct oauth_resp *out)
{
	struct oauth_req rq = {
	    .body = body, .body_len = strlen(body), .authorization = basic};

	memset(out, 0, sizeof(*out));
	oauth_token(o, &rq, out);
	return json_of(out);
}

static void test_metadata(struct oauth *o)
{
	struct oauth_resp r = {0};
	cJSON *j;
	const cJSON *m;

	oauth_metadata(o, &r);
	j = json_of(&r);
	is_int(r.status, 200, "metadata: 200");
	is_str(jstr(j, "issuer"), ISS, "issuer is the bare origin");
	is_str(jstr(j, "token_endpoint"), ISS "/token", "token endpoint");
	m = cJSON_GetObjectItem(j, "code_challenge_methods_supported");
	ok(cJSON_GetArraySize(m) == 1 &&
	       strcmp(cJSON_GetArrayItem(m, 0)->valuestring, "S256") == 0,
	   "S256 only");
	ok(cJSON_IsTrue(cJSON_GetObjectItem(
	       j, "authorization_response_iss_parameter_supported")),
	   "iss parameter advertised");
	ok(cJSON_IsFalse(
	       cJSON_GetObjectItem(j, "client_id_metadata_document_supported")),
	   "metadata documents off by default");
	m = cJSON_GetObjectItem(j, "token_endpoint_auth_methods_supported");
	is_int(cJSON_GetArraySize(m), 3, "three client auth methods");
	cJSON_Delete(j);
	oauth_resp_finish(&r);

	oauth_resource_metadata(o, "/mcp", &r);
	j = json_of(&r);
	is_str(jstr(j, "resource"), ISS "/mcp",
	       "resource is the URL people paste");
	is_str(cJSON_GetArrayItem(
	           cJSON_GetObjectItem(j, "authorization_servers"), 0)
	           ->valuestring,
	       ISS, "authorization server = issuer");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	oauth_resource_metadata(o, "", &r);
	j = json_of(&r);
	is_str(jstr(j, "resource"), ISS "/mcp", "the root document too");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	oauth_resource_metadata(o, "/etc/passwd", &r);
	is_int(r.status, 404, "other paths: 404");
	oauth_resp_finish(&r);
}

static void test_register(struct oauth *o, struct client *claude,
                          struct client *local)
{
	struct oauth_resp r;
	struct client again;
	cJSON *j;
	char big[20000];

	is_int(reg(o,
	           "{\"redirect_uris\":[\"" CLAUDE_CB "\"],"
	           "\"token_endpoint_auth_method\":\"client_secret_post\","
	           "\"grant_types\":[\"authorization_code\",\"refresh_"
	           "token\"],\"client_name\":\"Claude\",\"scope\":\"claudeai\","
	           "\"unknown_field\":{\"x\":[1,2]}}",
	           claude, &r),
	       201, "claude.ai's registration: 201");
	j = json_of(&r);
	is_str(jstr(j, "token_endpoint_auth_method"), "client_secret_post",
	       "the stored method is echoed");
	ok(strlen(claude->secret) == 64, "a secret for client_secret_post");
	ok(cJSON_GetObjectItem(j, "client_secret_expires_at") != NULL,
	   "client_secret_expires_at present");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	is_int(reg(o,
	           "{\"redirect_uris\":[\"" CLAUDE_CB "\"],"
	           "\"token_endpoint_auth_method\":\"client_secret_post\"}",
	           &again, &r),
	       201, "a second registration right after");
	ok(strcmp(again.id, claude->id) != 0, "gets another id");
	oauth_resp_finish(&r);
	is_int(reg(o,
	           "{\"redirect_uris\":[\"http://127.0.0.1:33333/callback\"],"
	           "\"token_endpoint_auth_method\":\"none\",\"grant_types\":"
	           "[\"authorization_code\",\"refresh_token\"],"
	           "\"client_name\":\"<script>alert(1)</script>\"}",
	           local, &r),
	       201, "a public loopback client");
	ok(local->secret[0] == '\0', "no secret for a public client");
	oauth_resp_finish(&r);

	static const struct {
		const char *body, *error, *name;
	} bad[] = {
	    {"{\"redirect_uris\":[\"https://evil.example/cb\"]}",
	     "invalid_redirect_uri", "a host not allowed"},
	    {"{\"redirect_uris\":[\"http://claude.ai/cb\"]}",
	     "invalid_redirect_uri", "http to a public host"},
	    {"{\"redirect_uris\":[\"https://claude.ai/cb#frag\"]}",
	     "invalid_redirect_uri", "a fragment"},
	    {"{\"redirect_uris\":[\"https://user@claude.ai/cb\"]}",
	     "invalid_redirect_uri", "user information"},
	    {"{\"redirect_uris\":[\"javascript:alert(1)\"]}",
	     "invalid_redirect_uri", "a javascript: URI"},
	    {"{\"redirect_uris\":[]}", "invalid_redirect_uri", "no URI"},
	    {"{\"redirect_uris\":[\"" CLAUDE_CB
	     "\"],\"grant_types\":[\"client_credentials\"]}",
	     "invalid_client_metadata", "an unsupported grant type"},
	    {"{\"redirect_uris\":[\"" CLAUDE_CB
	     "\"],\"token_endpoint_auth_method\":\"private_key_jwt\"}",
	     "invalid_client_metadata", "an unsupported auth method"},
	    {"{\"redirect_uris\":[\"" CLAUDE_CB
	     "\"],\"client_name\":\"a\\nb\"}",
	     "invalid_client_metadata", "a control character in the name"},
	    {"[1,2]", "invalid_client_metadata", "not an object"},
	    {"{\"redirect_uris\":", "invalid_client_metadata", "truncated"},
	    {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
	     "invalid_client_metadata", "deep nesting"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int st = reg(o, bad[i].body, NULL, &r);

		j = json_of(&r);
		ok(st == 400 && jstr(j, "error") &&
		       strcmp(jstr(j, "error"), bad[i].error) == 0,
		   "registration refused: %s (%d %s)", bad[i].name, st,
		   jstr(j, "error") ? jstr(j, "error") : "?");
		cJSON_Delete(j);
		oauth_resp_finish(&r);
	}
	memset(big, ' ', sizeof(big) - 1);
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	big[sizeof(big) - 1] = '\0';
	is_int(reg(o, big, NULL, &r), 400, "an oversized body is refused");
	oauth_resp_finish(&r);
}

static void test_authorize(struct oauth *o, const struct client *claude,
                           const struct client *local)
{
	struct oauth_resp r, r2;
	struct oauth_form f;
	struct client unknown = {.id = "0123456789abcdef0123456789abcdef"};
	static const char *const redirects[] = {
	    CLAUDE_CB "x",
	    "https://claude.ai/api/mcp/auth_callbacK",
	    "https://claude.ai/api/mcp/other",
	    "http://claude.ai/api/mcp/"
	    "auth_callback",
	    "https://claude.com/api/mcp/auth_callback",
	    "https://evil.example/api/mcp/auth_callback",
	    CLAUDE_CB "?x=1",
	    "https://claude.ai.evil.example/api/mcp/"
	    "auth_callback"};

	authorize(o, claude, CLAUDE_CB,
	          (const char *const[]){"resource", ISS "/mcp", "scope",
	                                "claudeai offline_access", NULL},
	          &r);
	is_int(r.status, 200, "authorize: the consent page");
	ok(r.page && r.body && strstr(r.body, "<strong>claude.ai</strong>"),
	   "the page shows the redirect host prominently");
	ok(r.body && strstr(r.body, "Claude"), "and the client's name");
	ok(r.set_cookie && strstr(r.set_cookie, "__Host-mcpsd_consent=") &&
	       strstr(r.set_cookie, "Secure") &&
	       strstr(r.set_cookie, "SameSite=Strict") &&
	       strstr(r.set_cookie, "HttpOnly"),
	   "a __Host- cookie: %s", r.set_cookie ? r.set_cookie : "none");
	ok(!r.body || !strstr(r.body, "<script"), "no script in the page");
	oauth_resp_finish(&r);

	authorize(o, local, "http://127.0.0.1:45678/callback", NULL, &r);
	is_int(r.status, 200, "a loopback redirect on another port matches");
	ok(r.body && strstr(r.body, "&lt;script&gt;") &&
	       !strstr(r.body, "<script>"),
	   "a hostile client name is escaped");
	oauth_resp_finish(&r);

	for (size_t i = 0; i < sizeof(redirects) / sizeof(redirects[0]); i++) {
		authorize(o, claude, redirects[i], NULL, &r);
		ok(r.status == 400 && r.page && !r.location,
		   "redirect %s: an error page, no redirect", redirects[i]);
		oauth_resp_finish(&r);
	}
	authorize(o, local, "http://127.0.0.2:45678/callback", NULL, &r);
	ok(r.status == 400 && !r.location, "another loopback host: refused");
	oauth_resp_finish(&r);
	authorize(o, &unknown, CLAUDE_CB, NULL, &r);
	ok(r.status == 400 && r.page && !r.location,
	   "unknown client: an error page");
	oauth_resp_finish(&r);

	authorize(o, claude, CLAUDE_CB,
	          (const char *const[]){"code_challenge_method", "plain", NULL},
	          &r);
	location_params(r.location, &f);
	ok(r.status == 303 &&
	       strcmp(nz(oauth_form_get(&f, "error")), "invalid_request") ==
	           0 &&
	       strcmp(nz(oauth_form_get(&f, "state")), "st-42") == 0 &&
	       strcmp(nz(oauth_form_get(&f, "iss")), ISS) == 0,
	   "PKCE plain: invalid_request redirect with state and iss");
	oauth_form_finish(&f);
	oauth_resp_finish(&r);
	authorize(o, claude, CLAUDE_CB,
	          (const char *const[]){"resource", "https://other.example/mcp",
	                                NULL},
	          &r);
	location_params(r.location, &f);
	is_str(oauth_form_get(&f, "error"), "invalid_target",
	       "another server's resource: invalid_target");
	oauth_form_finish(&f);
	oauth_resp_finish(&r);
	authorize(o, claude, CLAUDE_CB,
	          (const char *const[]){"response_type", "token", NULL}, &r);
	location_params(r.location, &f);
	is_str(oauth_form_get(&f, "error"), "unsupported_response_type",
	       "response_type token: refused");
	oauth_form_finish(&f);
	oauth_resp_finish(&r);

	/* The consent form. */
	authorize(o, claude, CLAUDE_CB, NULL, &r);
	consent(o, &r, ALICE, "approve", NULL, "https://evil.example", &r2);
	ok(r2.status == 403 && !r2.location, "a cross-site POST: 403");
	oauth_resp_finish(&r2);
	consent(o, &r, ALICE, "approve", "__Host-mcpsd_consent=00ff", ISS, &r2);
	ok(r2.status == 403 && !r2.location, "a wrong cookie: 403");
	oauth_resp_finish(&r2);
	consent(o, &r, ALICE, "approve", "", ISS, &r2);
	ok(r2.status == 403 && !r2.location, "no cookie: 403");
	oauth_resp_finish(&r2);
	{
		struct oauth_req rq = {.origin = ISS};
		char body[256], req[64], ck[200];

		field(r.body, "request", req, sizeof(req));
		snprintf(body, sizeof(body),
		         "request=%s&csrf=%064d&action=approve&token=%s", req,
		         0, ALICE);
		snprintf(ck, sizeof(ck), "%.*s",
		         (int)strcspn(r.set_cookie, ";"), r.set_cookie);
		rq.body = body;
		rq.body_len = strlen(body);
		rq.cookie = ck;
		memset(&r2, 0, sizeof(r2));
		oauth_consent(o, &rq, &r2);
		ok(r2.status == 403 && !r2.location, "a wrong CSRF token: 403");
		oauth_resp_finish(&r2);
	}
	consent(o, &r, "not-a-token-of-this-server", "approve", NULL, ISS, &r2);
	ok(r2.status == 403 && r2.body && strstr(r2.body, "not an API token"),
	   "a wrong API token: the page again with the error");
	oauth_resp_finish(&r2);
	consent(o, &r, NULL, "deny", NULL, ISS, &r2);
	location_params(r2.location, &f);
	ok(r2.status == 303 &&
	       strcmp(nz(oauth_form_get(&f, "error")), "access_denied") == 0 &&
	       strcmp(nz(oauth_form_get(&f, "iss")), ISS) == 0 &&
	       strncmp(r2.location, CLAUDE_CB "?", sizeof(CLAUDE_CB)) == 0,
	   "deny: 303 to the callback with access_denied and iss");
	oauth_form_finish(&f);
	oauth_resp_finish(&r2);
	consent(o, &r, ALICE, "approve", NULL, ISS, &r2);
	ok(r2.status == 400 && !r2.location, "a used page cannot approve");
	oauth_resp_finish(&r2);
	oauth_resp_finish(&r);

	/* Five wrong tokens end a page. */
	authorize(o, claude, CLAUDE_CB, NULL, &r);
	for (int i = 0; i < 5; i++) {
		consent(o, &r, "wrong-wrong-wrong-wrong", "approve", NULL, ISS,
		        &r2);
		oauth_resp_finish(&r2);
	}
	consent(o, &r, ALICE, "approve", NULL, ISS, &r2);
	ok(r2.status == 400 && !r2.location,
	   "after five wrong tokens the page is dead");
	oauth_resp_finish(&r2);
	oauth_resp_finish(&r);
}

static void test_tokens(struct oauth *o, const struct client *claude,
                        const struct client *local)
{
	struct oauth_resp r;
	char code[128], body[1024], access[128], refresh[128], basic[320];
	const char *tenant = NULL;
	cJSON *j;

	get_code(o, claude, CLAUDE_CB, ALICE, code, sizeof(code));
	ok(strlen(code) == 64, "approve: a code");
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s&client_secret=%s&resource=%s",
	         code, CLAUDE_CB, "wrong-verifier-0123456789-0123456789-012345",
	         claude->id, claude->secret, ISS "/mcp");
	j = token(o, body, NULL, &r);
	is_str(jstr(j, "error"), "invalid_grant", "a wrong verifier");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s&client_secret=%s",
	         code, CLAUDE_CB, VERIFIER, claude->id, claude->secret);
	j = token(o, body, NULL, &r);
	is_str(jstr(j, "error"), "invalid_grant",
	       "the code is burned by a wrong verifier");
	cJSON_Delete(j);
	oauth_resp_finish(&r);

	get_code(o, claude, CLAUDE_CB, ALICE, code, sizeof(code));
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s&client_secret=%s",
	         code, CLAUDE_CB, VERIFIER, claude->id, "wrong");
	j = token(o, body, NULL, &r);
	ok(r.status == 401 && jstr(j, "error") &&
	       strcmp(jstr(j, "error"), "invalid_client") == 0,
	   "a wrong client secret: 401 invalid_client");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s&client_secret=%s",
	         code, CLAUDE_CB, VERIFIER, claude->id, claude->secret);
	j = token(o, body, NULL, &r);
	is_int(r.status, 200, "the code for tokens");
	ok(jstr(j, "access_token") &&
	       strncmp(jstr(j, "access_token"), OAUTH_ACCESS_PREFIX, 9) == 0,
	   "an access token");
	ok(jstr(j, "refresh_token") != NULL, "a refresh token");
	is_str(jstr(j, "token_type"), "Bearer", "token_type Bearer");
	is_int(cJSON_GetObjectItem(j, "expires_in")
	           ? cJSON_GetObjectItem(j, "expires_in")->valueint
	           : 0,
	       3600, "expires_in 3600");
	is_str(r.cache_control, "no-store", "Cache-Control: no-store");
	snprintf(access, sizeof(access), "%s", nz(jstr(j, "access_token")));
	snprintf(refresh, sizeof(refresh), "%s", nz(jstr(j, "refresh_token")));
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	is_int(oauth_verify(o, access, strlen(access), &tenant), OAUTH_TOKEN_OK,
	       "the access token is accepted");
	is_str(tenant, "alice", "as tenant alice");
	{
		char client[OAUTH_URI_MAX + 1] = "x";

		is_int(oauth_verify_client(o, access, strlen(access), &tenant,
		                           client, sizeof(client)),
		       OAUTH_TOKEN_OK, "the access token, with its client");
		is_str(client, claude->id, "names the client it was issued to");
		is_int(oauth_verify_client(o, "mcpsd_at_x", 10, &tenant, client,
		                           sizeof(client)),
		       OAUTH_TOKEN_NOT_OURS, "a malformed token");
		is_str(client, "", "names no client");
	}
	is_int(oauth_verify(o, "mcpsd_at_x", 10, &tenant), OAUTH_TOKEN_NOT_OURS,
	       "a malformed token is not ours");
	is_int(oauth_verify(NULL, access, strlen(access), &tenant),
	       OAUTH_TOKEN_NOT_OURS, "OAuth off: not ours");

	/* Replaying the code revokes what it gave. */
	j = token(o, body, NULL, &r);
	is_str(jstr(j, "error"), "invalid_grant", "the code replayed");
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	is_int(oauth_verify(o, access, strlen(access), &tenant),
	       OAUTH_TOKEN_INVALID, "revokes the tokens issued with it");

	/* Refresh rotation and reuse, with Basic client auth. */
	get_code(o, claude, CLAUDE_CB, ALICE, code, sizeof(code));
	{
		char raw[200];
		unsigned char b64[300];

		snprintf(raw, sizeof(raw), "%s:%s", claude->id, claude->secret);
		EVP_EncodeBlock(b64, (const unsigned char *)raw,
		                (int)strlen(raw));
		snprintf(basic, sizeof(basic), "Basic %s", (const char *)b64);
	}
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s",
	         code, CLAUDE_CB, VERIFIER);
	j = token(o, body, basic, &r);
	is_int(r.status, 200, "client_secret_basic works too");
	snprintf(access, sizeof(access), "%s", nz(jstr(j, "access_token")));
	snprintf(refresh, sizeof(refresh), "%s", nz(jstr(j, "refresh_token")));
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	snprintf(body, sizeof(body),
	         "grant_type=refresh_token&refresh_token=%s", refresh);
	j = token(o, body, basic, &r);
	is_int(r.status, 200, "refresh: 200");
	ok(jstr(j, "refresh_token") &&
	       strcmp(jstr(j, "refresh_token"), refresh) != 0,
	   "refresh: a new refresh token");
	{
		char access2[128];

		snprintf(access2, sizeof(access2), "%s",
		         nz(jstr(j, "access_token")));
		is_int(oauth_verify(o, access2, strlen(access2), &tenant),
		       OAUTH_TOKEN_OK, "the new access token works");
		cJSON_Delete(j);
		oauth_resp_finish(&r);
		j = token(o, body, basic, &r);
		is_str(jstr(j, "error"), "invalid_grant",
		       "the old refresh token again: invalid_grant");
		is_int(oauth_verify(o, access2, strlen(access2), &tenant),
		       OAUTH_TOKEN_INVALID, "and the grant is revoked");
		cJSON_Delete(j);
		oauth_resp_finish(&r);
	}

	/* A public client; parameters in the URL; revocation. */
	get_code(o, local, "http://127.0.0.1:5555/callback", BOB, code,
	         sizeof(code));
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s",
	         code, "http://127.0.0.1:5555/callback", VERIFIER, local->id);
	{
		struct oauth_form q;
		struct oauth_req rq = {.body = body, .body_len = strlen(body)};

		oauth_form_init(&q);
		(void)!oauth_form_add(&q, "code", code, NULL, 0);
		rq.query = &q;
		memset(&r, 0, sizeof(r));
		oauth_token(o, &rq, &r);
		j = json_of(&r);
		is_str(jstr(j, "error"), "invalid_request",
		       "parameters in the query: invalid_request");
		cJSON_Delete(j);
		oauth_resp_finish(&r);
		oauth_form_finish(&q);
	}
	j = token(o, body, NULL, &r);
	is_int(r.status, 200, "a public client gets tokens");
	snprintf(access, sizeof(access), "%s", nz(jstr(j, "access_token")));
	snprintf(refresh, sizeof(refresh), "%s", nz(jstr(j, "refresh_token")));
	cJSON_Delete(j);
	oauth_resp_finish(&r);
	is_int(oauth_verify(o, access, strlen(access), &tenant), OAUTH_TOKEN_OK,
	       "as bob");
	is_str(tenant, "bob", "tenant bob");
	{
		struct oauth_req rq = {0};

		snprintf(body, sizeof(body), "token=%s&client_id=%s", refresh,
		         local->id);
		rq.body = body;
		rq.body_len = strlen(body);
		rq.authorization = basic;
		memset(&r, 0, sizeof(r));
		oauth_revoke(o, &rq, &r);
		is_int(r.status, 400,
		       "revoke with two client credentials: 400");
		oauth_resp_finish(&r);
		snprintf(body, sizeof(body), "token=%s", refresh);
		rq.body = body;
		rq.body_len = strlen(body);
		memset(&r, 0, sizeof(r));
		oauth_revoke(o, &rq, &r);
		is_int(r.status, 200, "another client's token: 200");
		oauth_resp_finish(&r);
		is_int(oauth_verify(o, access, strlen(access), &tenant),
		       OAUTH_TOKEN_OK, "and left alone");
		snprintf(body, sizeof(body), "token=%s&client_id=%s", refresh,
		         local->id);
		rq.body = body;
		rq.body_len = strlen(body);
		rq.authorization = NULL;
		memset(&r, 0, sizeof(r));
		oauth_revoke(o, &rq, &r);
		is_int(r.status, 200, "revoking the refresh token: 200");
		oauth_resp_finish(&r);
		is_int(oauth_verify(o, access, strlen(access), &tenant),
		       OAUTH_TOKEN_INVALID, "revokes the grant");
	}
}

/* A grant and an access token written straight into the store. */
static void plant(struct store *st, const char *scope, const char *resource,
                  const char *tenant, const unsigned char *binding,
                  const char *client, const char *tok)
{
	struct oauth_db_grant g = {0};
	unsigned char h[32];
	unsigned len = 0;
	struct store_tx *tx;

	snprintf(g.grant_id, sizeof(g.grant_id), "%032x", (unsigned)rand());
	snprintf(g.client_id, sizeof(g.client_id), "%s", client);
	snprintf(g.tenant, sizeof(g.tenant), "%s", tenant);
	memcpy(g.binding, binding, sizeof(g.binding));
	snprintf(g.scope, sizeof(g.scope), "%s", scope);
	snprintf(g.resource, sizeof(g.resource), "%s", resource);
	EVP_Digest(tok, strlen(tok), h, &len, EVP_sha256(), NULL);
	if (store_begin(st, true, &tx) == 0) {
		if (oauth_db_grant_insert(tx, &g) < 0 ||
		    oauth_db_token_insert(tx, h, g.grant_id, OAUTH_DB_ACCESS,
		                          (long long)time(NULL) + 600) < 0) {
			store_rollback(tx);
			return;
		}
		(void)!store_commit(tx);
	}
}

static void test_checks(struct oauth *o, struct store *st,
                        const struct client *local)
{
	const char *tenant;
	char tok[128], *ch;
	unsigned char binding[16];
	struct oauth_resp r;
	char code[128], body[512];
	cJSON *j;

	/* Bob's binding, read back from a real grant. */
	get_code(o, local, "http://127.0.0.1:5555/callback", BOB, code,
	         sizeof(code));
	snprintf(body, sizeof(body),
	         "grant_type=authorization_code&code=%s&redirect_uri=%s&"
	         "code_verifier=%s&client_id=%s",
	         code, "http://127.0.0.1:5555/callback", VERIFIER, local->id);
	j = token(o, body, NULL, &r);
	{
		struct store_tx *tx;
		struct store_stmt *s;
		const void *b;
		size_t bn = 0;

		memset(binding, 0, sizeof(binding));
		if (store_begin(st, false, &tx) == 0) {
			s = store_stmt(tx, "SELECT tenant_binding FROM "
			                   "oauth_grants WHERE tenant = 'bob'");
			if (s && store_step(tx, s) == 1 &&
			    (b = store_col_blob(s, 0, &bn)) != NULL && bn == 16)
				memcpy(binding, b, 16);
			store_rollback(tx);
		}
	}
	cJSON_Delete(j);
	oauth_resp_finish(&r);

	snprintf(tok, sizeof(tok), "%s%064d", OAUTH_ACCESS_PREFIX, 1);
	plant(st, "", ISS "/mcp", "bob", binding, local->id, tok);
	is_int(oauth_verify(o, tok, strlen(tok), &tenant), OAUTH_TOKEN_SCOPE,
	       "a token without the mcp scope: insufficient scope");
	snprintf(tok, sizeof(tok), "%s%064d", OAUTH_ACCESS_PREFIX, 2);
	plant(st, "mcp", "https://other.example/mcp", "bob", binding, local->id,
	      tok);
	is_int(oauth_verify(o, tok, strlen(tok), &tenant), OAUTH_TOKEN_INVALID,
	       "a token for another resource: invalid");
	snprintf(tok, sizeof(tok), "%s%064d", OAUTH_ACCESS_PREFIX, 3);
	plant(st, "mcp", ISS "/mcp", "bob", binding, local->id, tok);
	is_int(oauth_verify(o, tok, strlen(tok), &tenant), OAUTH_TOKEN_OK,
	       "the same planted right: accepted");
	binding[0] ^= 1;
	snprintf(tok, sizeof(tok), "%s%064d", OAUTH_ACCESS_PREFIX, 4);
	plant(st, "mcp", ISS "/mcp", "bob", binding, local->id, tok);
	is_int(oauth_verify(o, tok, strlen(tok), &tenant), OAUTH_TOKEN_INVALID,
	       "another token's fingerprint: invalid");

	ch = oauth_challenge(o, "/mcp", OAUTH_TOKEN_INVALID, true);
	ok(ch &&
	       strstr(ch, "resource_metadata=\"" ISS
	                  "/.well-known/oauth-protected-resource/mcp\"") &&
	       strstr(ch, "scope=\"mcp\"") &&
	       strstr(ch, "error=\"invalid_token\""),
	   "challenge: %s", ch ? ch : "NULL");
	free(ch);
	ch = oauth_challenge(o, "/mcp", OAUTH_TOKEN_INVALID, false);
	ok(ch && !strstr(ch, "error="), "no error without a token");
	free(ch);
	ch = oauth_challenge(o, "/mcp", OAUTH_TOKEN_SCOPE, true);
	ok(ch && strstr(ch, "insufficient_scope"), "insufficient_scope");
	free(ch);
}

int main(void)
{
	struct config cfg, cfg2;
	struct store *st = NULL;
	struct oauth *o = NULL;
	struct client claude, local;
	char p[300], err[512] = "";
	int r;

	snprintf(dir, sizeof(dir), "/tmp/mcpsd-oauth-test-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	r = load(&cfg, "alice:" ALICE ",bob:" BOB);
	is_int(r, 0, "config loads");
	ok(cfg.oauth, "OAuth is on for an https base URL");
	is_str(cfg.oauth_issuer, ISS, "issuer = PUBLIC_BASE_URL");
	snprintf(p, sizeof(p), "%s/state.db", dir);
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, 0, "store opens");
	r = oauth_create(&cfg, st, &o, err, sizeof(err));
	is_int(r, 0, "oauth_create");
	if (r < 0) {
		printf("# %s\n", err);
		return tap_done();
	}
	test_metadata(o);
	test_register(o, &claude, &local);
	test_authorize(o, &claude, &local);
	test_tokens(o, &claude, &local);
	test_checks(o, st, &local);

	/* Rotating bob's token revokes bob's grants at the next start. */
	{
		char code[128], body[512];
		struct oauth_resp res;
		cJSON *j;
		const char *tenant;
		char access[128];
		struct store_tx *tx;
		long long bob_grants = -1, alice_grants = -1;

		get_code(o, &local, "http://127.0.0.1:5555/callback", BOB, code,
		         sizeof(code));
		snprintf(body, sizeof(body),
		         "grant_type=authorization_code&code=%s&redirect_uri=%s"
		         "&code_verifier=%s&client_id=%s",
		         code, "http://127.0.0.1:5555/callback", VERIFIER,
		         local.id);
		j = token(o, body, NULL, &res);
		snprintf(access, sizeof(access), "%s",
		         nz(jstr(j, "access_token")));
		cJSON_Delete(j);
		oauth_resp_finish(&res);
		get_code(o, &claude, CLAUDE_CB, ALICE, code, sizeof(code));
		oauth_destroy(o);
		o = NULL;
		r = load(&cfg2,
		         "alice:" ALICE ",bob:bob-has-a-new-token-00000");
		r = oauth_create(&cfg2, st, &o, err, sizeof(err));
		is_int(r, 0, "restart with bob's token rotated");
		is_int(oauth_verify(o, access, strlen(access), &tenant),
		       OAUTH_TOKEN_INVALID, "bob's old grant no longer works");
		if (store_begin(st, false, &tx) == 0) {
			(void)!oauth_db_grant_count(tx, "bob", &bob_grants);
			(void)!oauth_db_grant_count(tx, "alice", &alice_grants);
			store_rollback(tx);
		}
		is_int(bob_grants, 0, "bob's grants were deleted");
		ok(alice_grants >= 1, "alice's grant stays (%lld)",
		   alice_grants);
		is_int(oauth_purge(o) >= 0, 1, "purge runs");
		oauth_destroy(o);
		config_finish(&cfg2);
	}
	store_close(st);
	config_finish(&cfg);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		(void)!system(cmd);
	}
	return tap_done();
}
