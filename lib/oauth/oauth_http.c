/* SPDX-License-Identifier: MIT */
/*
 * oauth_http: the routes are public (no bearer token: a client discovers,
 * registers and fetches tokens before it has one) and not behind the
 * Host/Origin guard of the MCP routes; the consent form checks Origin
 * against the issuer itself, which is stricter. Metadata, registration,
 * token and revocation answer any origin (browser-based clients use them
 * with PKCE); the authorization endpoint answers no cross-origin reads.
 */
#include "oauth/oauth_http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "oauth/oauth_form.h"
#include "oauth/oauth_page.h"
#include "util/errmsg.h"
#include "util/log.h"

/* Sends what the oauth module decided. */
static void reply(struct http_request *rq, struct oauth_resp *r)
{
	char ra[16];

	if (!r->status) {
		r->status = 500;
		r->content_type = "text/plain; charset=utf-8";
	}
	if (http_reply(
	        rq, r->status, r->content_type ? r->content_type : "text/plain",
	        r->body ? r->body : "", r->body ? strlen(r->body) : 0) < 0)
		goto out;
	(void)http_reply_header(rq, "Cache-Control",
	                        r->cache_control ? r->cache_control
	                                         : "no-store");
	if (!r->cache_control || strcmp(r->cache_control, "no-store") == 0)
		(void)http_reply_header(rq, "Pragma", "no-cache");
	if (r->location)
		(void)http_reply_header(rq, "Location", r->location);
	if (r->set_cookie)
		(void)http_reply_header(rq, "Set-Cookie", r->set_cookie);
	if (r->www_authenticate)
		(void)http_reply_header(rq, "WWW-Authenticate",
		                        r->www_authenticate);
	if (r->retry_after) {
		snprintf(ra, sizeof(ra), "%u", r->retry_after);
		(void)http_reply_header(rq, "Retry-After", ra);
	}
	if (r->page || r->location) {
		/* Pages and redirects of the authorization endpoint. */
		(void)http_reply_header(rq, "Content-Security-Policy",
		                        oauth_page_csp());
		(void)http_reply_header(rq, "X-Frame-Options", "DENY");
		/*
		 * same-origin, not no-referrer: under no-referrer browsers
		 * send "Origin: null" with the consent form, and the form's
		 * origin is one of its checks. Other sites, the client's
		 * callback included, still get no Referer.
		 */
		(void)http_reply_header(rq, "Referrer-Policy", "same-origin");
	}
out:
	oauth_resp_finish(r);
}

/* The request as the oauth module reads it. */
static void read_request(struct http_request *rq, struct oauth_req *orq,
                         struct oauth_form *query, char *why, size_t whylen)
{
	const char *qs = http_request_query_string(rq);

	memset(orq, 0, sizeof(*orq));
	oauth_form_init(query);
	if (qs && *qs &&
	    oauth_form_parse(query, qs, strlen(qs), why, whylen) < 0)
		orq->query_error = why;
	orq->query = query;
	orq->body = http_request_body(rq, &orq->body_len);
	orq->authorization = http_request_header(rq, "Authorization");
	orq->cookie = http_request_header(rq, "Cookie");
	orq->origin = http_request_header(rq, "Origin");
	orq->client_addr = http_request_client(rq);
}

static void as_metadata(void *data, struct http_request *rq)
{
	struct oauth_resp r = {0};

	/* The issuer has no path, so nothing may follow the well-known one. */
	if (*http_request_subpath(rq)) {
		(void)http_reply_oauth_error(rq, 404, "not_found",
		                             "no authorization server at this "
		                             "path; the issuer is the origin");
		return;
	}
	oauth_metadata(data, &r);
	reply(rq, &r);
}

static void resource_metadata(void *data, struct http_request *rq)
{
	struct oauth_resp r = {0};

	oauth_resource_metadata(data, http_request_subpath(rq), &r);
	reply(rq, &r);
}

typedef void (*endpoint_fn)(struct oauth *o, const struct oauth_req *rq,
                            struct oauth_resp *out);

static void run(struct oauth *o, struct http_request *rq, endpoint_fn fn)
{
	struct oauth_req orq;
	struct oauth_form query;
	struct oauth_resp r = {0};
	char why[300];

	read_request(rq, &orq, &query, why, sizeof(why));
	fn(o, &orq, &r);
	oauth_form_finish(&query);
	reply(rq, &r);
}

static void register_handle(void *data, struct http_request *rq)
{
	run(data, rq, oauth_register);
}

static void authorize_handle(void *data, struct http_request *rq)
{
	bool post = strcmp(http_request_method(rq), "POST") == 0;

	run(data, rq, post ? oauth_consent : oauth_authorize);
}

static void token_handle(void *data, struct http_request *rq)
{
	run(data, rq, oauth_token);
}

static void revoke_handle(void *data, struct http_request *rq)
{
	run(data, rq, oauth_revoke);
}

/* ---- the access-token hook -------------------------------------------- */

static enum auth_status verify(void *data, const char *token, size_t len,
                               struct auth_result *out)
{
	const char *tenant = NULL;

	switch (oauth_verify_client(data, token, len, &tenant, out->client,
	                            sizeof(out->client))) {
	case OAUTH_TOKEN_OK:
		snprintf(out->tenant, sizeof(out->tenant), "%s", tenant);
		snprintf(out->scopes, sizeof(out->scopes), "%s", OAUTH_SCOPE);
		log_fingerprint(token, len, out->fingerprint);
		return AUTH_OK;
	case OAUTH_TOKEN_SCOPE:
		return AUTH_SCOPE;
	case OAUTH_TOKEN_UNAVAILABLE:
		return AUTH_UNAVAILABLE;
	case OAUTH_TOKEN_NOT_OURS:
	case OAUTH_TOKEN_INVALID:
		break;
	}
	return AUTH_INVALID;
}

static char *challenge(void *data, const char *path, enum auth_status st,
                       bool presented)
{
	return oauth_challenge(data, path,
	                       st == AUTH_SCOPE ? OAUTH_TOKEN_SCOPE
	                                        : OAUTH_TOKEN_INVALID,
	                       presented);
}

int oauth_http_register(struct oauth *o, struct http_server *hs, char *err,
                        size_t errlen)
{
	const struct http_route routes[] = {
	    {.path = OAUTH_PATH_RESOURCE_METADATA,
	     .match = HTTP_MATCH_PREFIX,
	     .methods = HTTP_GET | HTTP_HEAD,
	     .cors = HTTP_CORS_ANY,
	     .early = true,
	     .handler = resource_metadata,
	     .data = o},
	    {.path = OAUTH_PATH_AS_METADATA,
	     .match = HTTP_MATCH_PREFIX,
	     .methods = HTTP_GET | HTTP_HEAD,
	     .cors = HTTP_CORS_ANY,
	     .early = true,
	     .handler = as_metadata,
	     .data = o},
	    {.path = OAUTH_PATH_OIDC_METADATA,
	     .match = HTTP_MATCH_PREFIX,
	     .methods = HTTP_GET | HTTP_HEAD,
	     .cors = HTTP_CORS_ANY,
	     .early = true,
	     .handler = as_metadata,
	     .data = o},
	    {.path = OAUTH_PATH_REGISTER,
	     .methods = HTTP_POST,
	     .body_types = HTTP_BODY_JSON,
	     .max_body = OAUTH_MAX_BODY,
	     .cors = HTTP_CORS_ANY,
	     .handler = register_handle,
	     .data = o},
	    {.path = OAUTH_PATH_AUTHORIZE,
	     .methods = HTTP_GET | HTTP_HEAD | HTTP_POST,
	     .body_types = HTTP_BODY_FORM,
	     .max_body = OAUTH_MAX_BODY,
	     .cors = HTTP_CORS_ALLOWED,
	     .handler = authorize_handle,
	     .data = o},
	    {.path = OAUTH_PATH_TOKEN,
	     .methods = HTTP_POST,
	     .body_types = HTTP_BODY_FORM,
	     .max_body = OAUTH_MAX_BODY,
	     .cors = HTTP_CORS_ANY,
	     .handler = token_handle,
	     .data = o},
	    {.path = OAUTH_PATH_REVOKE,
	     .methods = HTTP_POST,
	     .body_types = HTTP_BODY_FORM,
	     .max_body = OAUTH_MAX_BODY,
	     .cors = HTTP_CORS_ANY,
	     .handler = revoke_handle,
	     .data = o},
	};
	const struct auth_hook hook = {
	    .verify = verify, .challenge = challenge, .data = o};
	int r;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		r = http_server_add_route(hs, &routes[i], err, errlen);
		if (r < 0)
			return r;
	}
	r = http_server_set_auth(hs, &hook);
	if (r < 0)
		return errmsg_fail(r, err, errlen,
		                   "cannot install the OAuth token check");
	return 0;
}
