/* SPDX-License-Identifier: MIT */
/*
 * http_route: the route table and the policy each route's request head is
 * checked against before any of its body is read. Routes other modules add
 * are matched first, then the built-in ones below. While OAuth is off, the
 * OAuth paths are built-in rows that answer an OAuth-shaped error saying
 * what to do instead: that is where OAuth-capable clients (mcp-remote, the
 * Inspector, Claude Code) end up after a 401, and it is their parsers that
 * show the description to a person. Registration happens before serving;
 * afterwards the table is read-only and any thread may route.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_internal.h"
#include "util/log.h"
#include "util/num.h"

#define MAX_HEADER_COUNT 100

/* Sets a refusal for rq and evaluates to false (to go no further). */
#define REFUSE(rq, status, ...)                                                \
	((void)http_reply_error((rq), (status), __VA_ARGS__), false)

/* ------------------------------------------------------------------ */
/* built-in handlers */

static void root_handle(void *data, struct http_request *rq)
{
	static const char text[] =
	    "mcp-sandboxd: an MCP server that runs code in sandboxes.\n"
	    "MCP endpoint: /mcp (Streamable HTTP), /sse (HTTP+SSE). "
	    "Health: /healthz\n";

	(void)data;
	(void)http_reply(rq, MHD_HTTP_OK, "text/plain; charset=utf-8", text,
	                 sizeof(text) - 1);
}

static void not_found_handle(void *data, struct http_request *rq)
{
	(void)data;
	(void)http_reply_error(rq, MHD_HTTP_NOT_FOUND,
	                       "no such path; the MCP endpoint is /mcp");
}

static void bad_escape_handle(void *data, struct http_request *rq)
{
	(void)data;
	(void)http_reply_error(rq, MHD_HTTP_BAD_REQUEST,
	                       "percent-escapes are not accepted in the "
	                       "/files/ prefix; use the URL as given");
}

/*
 * An OAuth path while OAuth is off. 404, as the endpoint does not exist,
 * with an RFC 6749/7591 error body: clients skip a 404 on metadata and show
 * the error_description of a failed registration or token request, where
 * a JSON-RPC body failed their schemas ("Invalid OAuth error response").
 * mcp-remote sends its configured header along, so a wrong token can be
 * named as such.
 */
static void oauth_off_handle(void *data, struct http_request *rq)
{
	const char *h = http_request_header(rq, "Authorization");
	struct auth_result who;
	const char *what = "OAuth is not enabled on this server";
	char desc[512];

	(void)data;
	if (h && auth_check(rq->hs->cfg, NULL, h, &who) == AUTH_OK)
		what = "OAuth is not enabled on this server, and the bearer "
		       "token your client sent is valid: no sign-in is needed";
	else if (h)
		what = "OAuth is not enabled on this server, and the bearer "
		       "token your client sent is not one of its tokens";
	snprintf(desc, sizeof(desc), "%s; %s", what, HTTP_TOKEN_HINT);
	(void)http_reply_oauth_error(rq, MHD_HTTP_NOT_FOUND, "invalid_request",
	                             desc);
}

#define MCP_METHODS (HTTP_GET | HTTP_POST | HTTP_DELETE)

/* Rows for OAuth's paths while it is off: any method, answered at once. */
#define OAUTH_OFF(p, m)                                                        \
	{                                                                      \
		.path = (p), .match = (m), .methods = HTTP_ANY_METHOD,         \
		.cors = HTTP_CORS_ANY, .early = true,                          \
		.handler = oauth_off_handle,                                   \
	}

/* Streamable HTTP, at /mcp and /mcp/. */
#define MCP_ROUTE(p)                                                           \
	{                                                                      \
		.path = (p), .methods = MCP_METHODS, .auth = true,             \
		.guard = true, .body_types = HTTP_BODY_JSON,                   \
		.max_body = HTTP_BODY_MCP, .cors = HTTP_CORS_PREFLIGHT,        \
		.head = http_mcp_head, .handler = http_mcp_handle,             \
	}

/* The legacy transport's POST endpoint, at /messages and /messages/. */
#define MESSAGES_ROUTE(p)                                                      \
	{                                                                      \
		.path = (p), .methods = HTTP_POST, .auth = true,               \
		.guard = true, .body_types = HTTP_BODY_JSON,                   \
		.max_body = HTTP_BODY_MCP, .cors = HTTP_CORS_PREFLIGHT,        \
		.handler = http_mcp_messages_handle,                           \
	}

static const struct http_route builtin[] = {
    MCP_ROUTE("/mcp"),
    MCP_ROUTE("/mcp/"),
    {.path = "/sse",
     .methods = HTTP_GET,
     .auth = true,
     .guard = true,
     .cors = HTTP_CORS_PREFLIGHT,
     .head = http_mcp_head,
     .handler = http_mcp_sse_handle},
    MESSAGES_ROUTE("/messages"),
    MESSAGES_ROUTE("/messages/"),
    {.path = "/healthz",
     .methods = HTTP_GET | HTTP_HEAD,
     .handler = http_health_handle},
    {.path = "/metrics",
     .methods = HTTP_GET | HTTP_HEAD,
     .handler = http_metrics_handle},
    {.path = "/files/",
     .match = HTTP_MATCH_PREFIX,
     .methods = HTTP_GET | HTTP_HEAD,
     .handler = http_files_handle},
    {.path = HTTP_BAD_FILES_ESCAPE,
     .methods = HTTP_ANY_METHOD,
     .early = true,
     .handler = bad_escape_handle},
    {.path = "/", .methods = HTTP_GET | HTTP_HEAD, .handler = root_handle},
    OAUTH_OFF("/.well-known/oauth-protected-resource", HTTP_MATCH_PREFIX),
    OAUTH_OFF("/.well-known/oauth-authorization-server", HTTP_MATCH_PREFIX),
    OAUTH_OFF("/.well-known/openid-configuration", HTTP_MATCH_PREFIX),
    OAUTH_OFF("/register", HTTP_MATCH_EXACT),
    OAUTH_OFF("/authorize", HTTP_MATCH_EXACT),
    OAUTH_OFF("/token", HTTP_MATCH_EXACT),
    OAUTH_OFF("/revoke", HTTP_MATCH_EXACT),
};

static const struct http_route not_found = {
    .path = "",
    .methods = HTTP_ANY_METHOD,
    .early = true,
    .handler = not_found_handle,
};

/* ------------------------------------------------------------------ */
/* registration */

static bool serving(const struct http_server *hs)
{
	return hs->daemon != NULL;
}

int http_server_add_route(struct http_server *hs, const struct http_route *rt,
                          char *err, size_t errlen)
{
	if (serving(hs)) {
		snprintf(err, errlen,
		         "route %s: add routes before the server starts",
		         rt->path ? rt->path : "(null)");
		return -EBUSY;
	}
	if (!rt->path || rt->path[0] != '/' || !rt->handler ||
	    !(rt->methods & HTTP_ANY_METHOD)) {
		snprintf(err, errlen,
		         "route %s: a route needs a path starting with '/', "
		         "methods and a handler",
		         rt->path ? rt->path : "(null)");
		return -EINVAL;
	}
	if (hs->n_routes >= HTTP_MAX_ROUTES) {
		snprintf(err, errlen,
		         "route %s: the table is full (%d routes); raise "
		         "HTTP_MAX_ROUTES",
		         rt->path, HTTP_MAX_ROUTES);
		return -ENOSPC;
	}
	hs->routes[hs->n_routes++] = *rt;
	return 0;
}

int http_server_set_auth(struct http_server *hs, const struct auth_hook *hook)
{
	if (serving(hs))
		return -EBUSY;
	hs->auth = *hook;
	return 0;
}

static const struct http_route *find(const struct http_server *hs,
                                     const char *url, const char **rest)
{
	for (size_t i = 0; i < hs->n_routes; i++)
		if (http_path_match(hs->routes[i].path, hs->routes[i].match,
		                    url, rest))
			return &hs->routes[i];
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (http_path_match(builtin[i].path, builtin[i].match, url,
		                    rest))
			return &builtin[i];
	*rest = "";
	return &not_found;
}

size_t http_route_body_limit(const struct http_request *rq)
{
	size_t m = rq->route ? rq->route->max_body : 0;

	if (m == HTTP_BODY_MCP)
		return rq->hs->cfg->max_body_bytes;
	return m ? m : HTTP_BODY_DEFAULT;
}

/* ------------------------------------------------------------------ */
/* the head */

struct hdr_count {
	unsigned total, content_length, transfer_encoding, authorization, host;
	const char *te; /* the last Transfer-Encoding value */
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value)
{
	struct hdr_count *hc = cls;

	(void)kind;
	hc->total++;
	if (strcasecmp(key, "Content-Length") == 0) {
		hc->content_length++;
	} else if (strcasecmp(key, "Transfer-Encoding") == 0) {
		hc->transfer_encoding++;
		hc->te = value;
	} else if (strcasecmp(key, "Authorization") == 0) {
		hc->authorization++;
	} else if (strcasecmp(key, "Host") == 0) {
		hc->host++;
	}
	return MHD_YES;
}

/* The checks of framing_ok. */
static bool framing_checks(struct http_request *rq, struct hdr_count *hc,
                           uint64_t *cl)
{
	const char *h = http_request_header(rq, "Content-Length");

	*cl = 0;
	MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, count_header, hc);
	/* Whatever is refused below, a body may be on its way. */
	rq->linger = hc->transfer_encoding || (h && strcmp(h, "0") != 0);
	if (hc->total > MAX_HEADER_COUNT)
		return REFUSE(rq, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
		              "more than %d header fields; send fewer",
		              MAX_HEADER_COUNT);
	if (hc->content_length > 1)
		return REFUSE(rq, MHD_HTTP_BAD_REQUEST,
		              "more than one Content-Length header; "
		              "send exactly one");
	if (hc->content_length && hc->transfer_encoding)
		return REFUSE(rq, MHD_HTTP_BAD_REQUEST,
		              "conflicting Content-Length and "
		              "Transfer-Encoding headers; send "
		              "exactly one of them");
	/* RFC 9112: libmicrohttpd would check only the first one. */
	if (hc->host > 1)
		return REFUSE(rq, MHD_HTTP_BAD_REQUEST,
		              "more than one Host header; send "
		              "exactly one");
	/*
	 * libmicrohttpd decodes only a lone "chunked" and reads any other
	 * coding until the client closes; RFC 9112 says refuse and close.
	 */
	if (hc->transfer_encoding > 1 ||
	    (hc->te && strcasecmp(hc->te, "chunked") != 0))
		return REFUSE(rq, MHD_HTTP_BAD_REQUEST,
		              "unsupported Transfer-Encoding; send "
		              "'chunked' or a Content-Length");
	if (h && num_u64(h, UINT64_MAX, cl) < 0)
		return REFUSE(rq, MHD_HTTP_BAD_REQUEST,
		              "invalid Content-Length");
	return true;
}

/*
 * Framing every request must get right whatever its route. Returns false
 * with a refusal set, after which the connection is closed: where this
 * request ends cannot be trusted. *cl is the Content-Length (0 when
 * absent).
 */
static bool framing_ok(struct http_request *rq, struct hdr_count *hc,
                       uint64_t *cl)
{
	if (framing_checks(rq, hc, cl))
		return true;
	rq->linger = true;
	return false;
}

/* DNS rebinding: a page on another name reaching a local server. */
static bool guard_ok(struct http_request *rq)
{
	const struct config *cfg = rq->hs->cfg;
	const char *h = http_request_header(rq, "Host");

	if (!http_host_allowed(cfg, h))
		return REFUSE(rq, MHD_HTTP_FORBIDDEN,
		              "Host '%.100s' is not allowed; add it "
		              "to MCP_ALLOWED_HOSTS if this is "
		              "intended",
		              h ? h : "");
	h = http_request_header(rq, "Origin");
	if (h && !http_allowed(h, cfg->allowed_origins, true))
		return REFUSE(rq, MHD_HTTP_FORBIDDEN,
		              "Origin '%.100s' is not allowed; add "
		              "it to MCP_ALLOWED_ORIGINS if this is "
		              "intended",
		              h);
	return true;
}

/*
 * Whether an OPTIONS request to rq's route is a CORS preflight: on a route
 * that allows them, one that does not take OPTIONS itself, or one that
 * names the method it asks about (a route answering any method).
 */
static bool is_preflight(const struct http_request *rq)
{
	return http_method_bit(rq->method) == HTTP_OPTIONS &&
	       rq->route->cors != HTTP_CORS_ALLOWED &&
	       (!(rq->route->methods & HTTP_OPTIONS) ||
	        http_request_header(rq, "Access-Control-Request-Method"));
}

static bool method_ok(struct http_request *rq)
{
	unsigned m = http_method_bit(rq->method);
	char allow[80];

	if ((m & rq->route->methods) || rq->route->methods == HTTP_ANY_METHOD ||
	    is_preflight(rq))
		return true;
	http_methods_text(rq->route->methods, allow, sizeof(allow));
	if (http_reply_error(rq, MHD_HTTP_METHOD_NOT_ALLOWED,
	                     "method not allowed here; use %s", allow) == 0)
		(void)http_reply_header(rq, "Allow", allow);
	return false;
}

/* A refusal of the credentials, with its challenge (RFC 6750 section 3). */
static bool refuse_auth(struct http_request *rq, enum auth_status st,
                        bool presented)
{
	const struct auth_hook *hook = &rq->hs->auth;
	bool oauth = hook->verify != NULL;
	char *ch = hook->challenge
	               ? hook->challenge(hook->data, rq->url, st, presented)
	               : NULL;
	char dflt[600];
	const char *www = dflt;
	unsigned status = MHD_HTTP_UNAUTHORIZED;
	int r;

	switch (st) {
	case AUTH_MISSING:
		/* No error code when no credentials came (RFC 6750 3.1). */
		snprintf(dflt, sizeof(dflt), "Bearer realm=\"mcp\"");
		r = oauth ? http_reply_error(
		                rq, status,
		                "missing bearer token; send 'Authorization: "
		                "Bearer <token>' with an API token of this "
		                "server or an OAuth access token from it")
		          : http_reply_error(rq, status,
		                             "missing bearer token; %s",
		                             HTTP_TOKEN_HINT);
		break;
	case AUTH_SCOPE:
		status = MHD_HTTP_FORBIDDEN;
		snprintf(dflt, sizeof(dflt),
		         "Bearer realm=\"mcp\", error=\"insufficient_scope\", "
		         "scope=\"%s\"",
		         rq->route->scope ? rq->route->scope : "");
		r = http_reply_error(rq, status,
		                     "the token lacks the scope '%s' this "
		                     "path needs; authorize again with it",
		                     rq->route->scope ? rq->route->scope : "");
		break;
	case AUTH_UNAVAILABLE:
		free(ch);
		r = http_reply_error(rq, MHD_HTTP_SERVICE_UNAVAILABLE,
		                     "the token cannot be checked right now; "
		                     "try again in a few seconds");
		if (r == 0)
			(void)http_reply_header(rq, "Retry-After", "5");
		return false;
	default:
		log_info("rejected a request with an invalid token");
		snprintf(dflt, sizeof(dflt),
		         "Bearer realm=\"mcp\", error=\"invalid_token\", "
		         "error_description=\"invalid bearer token: it matches "
		         "none of this server's tokens; %s\"",
		         oauth ? "send an API token of this server or a "
		                 "current OAuth access token from it"
		               : HTTP_TOKEN_HINT);
		r = http_reply_error(rq, status,
		                     "invalid bearer token: it matches none of "
		                     "this server's tokens; %s",
		                     oauth ? "send an API token of this server "
		                             "or a current OAuth access token "
		                             "from it"
		                           : HTTP_TOKEN_HINT);
		break;
	}
	if (ch && !strpbrk(ch, "\r\n"))
		www = ch;
	if (r == 0)
		(void)http_reply_header(rq, "WWW-Authenticate", www);
	free(ch);
	return false;
}

static bool auth_ok(struct http_request *rq, unsigned n_authorization)
{
	const struct config *cfg = rq->hs->cfg;
	enum auth_status st;

	/*
	 * libmicrohttpd returns the first of several Authorization headers
	 * and a proxy may honour another: accept none of them.
	 */
	if (n_authorization > 1 && !cfg->auth_none)
		return refuse_auth(rq, AUTH_INVALID, true);
	st = auth_check(cfg, &rq->hs->auth,
	                http_request_header(rq, "Authorization"), &rq->auth);
	if (st == AUTH_OK && !auth_has_scope(&rq->auth, rq->route->scope))
		st = AUTH_SCOPE;
	if (st != AUTH_OK) {
		memset(&rq->auth, 0, sizeof(rq->auth));
		return refuse_auth(rq, st, n_authorization > 0);
	}
	rq->authed = true;
	return true;
}

/* Methods whose body has a meaning, and so a content type to check. */
static bool carries_content(const char *method)
{
	return (http_method_bit(method) &
	        (HTTP_POST | HTTP_PUT | HTTP_PATCH)) != 0;
}

static bool content_type_ok(struct http_request *rq)
{
	const char *h = http_request_header(rq, "Content-Type");
	unsigned t = rq->route->body_types;

	if (!carries_content(rq->method) || http_body_type_ok(h, t))
		return true;
	return REFUSE(rq, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
	              "Content-Type must be %s, not '%.80s'",
	              t == HTTP_BODY_JSON ? "application/json"
	              : t == HTTP_BODY_FORM
	                  ? "application/x-www-form-urlencoded"
	                  : "application/json or "
	                    "application/x-www-form-urlencoded",
	              h ? h : "(none)");
}

static bool size_ok(struct http_request *rq, uint64_t cl)
{
	size_t limit = http_route_body_limit(rq);

	if (cl <= limit)
		return true;
	return REFUSE(rq, MHD_HTTP_CONTENT_TOO_LARGE,
	              "request body of %llu bytes is over the limit of %zu "
	              "bytes; send less%s",
	              (unsigned long long)cl, limit,
	              rq->route->max_body == HTTP_BODY_MCP
	                  ? " (large files: split them or raise "
	                    "MCP_MAX_BODY_BYTES)"
	                  : "");
}

bool http_route_head(struct http_request *rq)
{
	struct hdr_count hc = {0};
	const struct http_route *rt;
	uint64_t cl;

	if (!framing_ok(rq, &hc, &cl))
		return false;
	rt = rq->route = find(rq->hs, rq->url, &rq->subpath);
	if (rt->guard && !guard_ok(rq))
		return false;
	if (!method_ok(rq))
		return false;
	if (is_preflight(rq)) {
		/* Read its body, if any, like any other, then answer. */
		if (!rt->early)
			return true;
		(void)http_reply_preflight(rq);
		return false;
	}
	if (rt->auth && !auth_ok(rq, hc.authorization))
		return false;
	if (!content_type_ok(rq))
		return false;
	if (rt->head && !rt->head(rt->data, rq))
		return false;
	if (rt->early) {
		/* Its body is never read, so no limit applies to it. */
		rt->handler(rt->data, rq);
		return false;
	}
	return size_ok(rq, cl);
}

void http_route_dispatch(struct http_request *rq)
{
	if (is_preflight(rq))
		(void)http_reply_preflight(rq);
	else
		rq->route->handler(rq->route->data, rq);
}
