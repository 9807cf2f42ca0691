/* SPDX-License-Identifier: MIT */
/*
 * http_request: what a route handler sees of a request, and how it
 * answers. An answer is one libmicrohttpd response held in the request
 * until the handler returns; http_send then adds the headers every answer
 * gets (in one place, so no route can forget them) and queues it. Runs on
 * the request's connection thread only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_internal.h"
#include "mcp/rpc.h"
#include "util/log.h"

/* ------------------------------------------------------------------ */
/* what a handler sees */

const char *http_request_method(const struct http_request *rq)
{
	return rq->method;
}

const char *http_request_path(const struct http_request *rq)
{
	return rq->url;
}

const char *http_request_subpath(const struct http_request *rq)
{
	return rq->subpath ? rq->subpath : "";
}

const char *http_request_query_string(const struct http_request *rq)
{
	return rq->query ? rq->query : "";
}

const char *http_request_query(const struct http_request *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
	                                   name);
}

const char *http_request_header(const struct http_request *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *http_request_body(const struct http_request *rq, size_t *len)
{
	*len = rq->body.len;
	return rq->body.data ? rq->body.data : "";
}

const struct auth_result *http_request_auth(const struct http_request *rq)
{
	return rq->authed ? &rq->auth : NULL;
}

const char *http_request_peer(const struct http_request *rq)
{
	return rq->peer;
}

const char *http_request_client(const struct http_request *rq)
{
	return rq->client;
}

/* ------------------------------------------------------------------ */
/* answers */

int http_reply_take(struct http_request *rq, unsigned status,
                    struct MHD_Response *r)
{
	if (!r)
		return -ENOMEM;
	if (rq->resp) {
		MHD_destroy_response(r);
		return -EALREADY;
	}
	rq->resp = r;
	rq->status = status;
	return 0;
}

int http_reply(struct http_request *rq, unsigned status,
               const char *content_type, const void *body, size_t len)
{
	struct MHD_Response *r;

	if (rq->resp)
		return -EALREADY;
	r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body,
	                                    MHD_RESPMEM_MUST_COPY);
	if (!r)
		return -ENOMEM;
	if (content_type)
		MHD_add_response_header(r, "Content-Type", content_type);
	return http_reply_take(rq, status, r);
}

/* Takes text (cJSON_Print output) whatever the result. */
static int reply_json_text(struct http_request *rq, unsigned status, char *text)
{
	struct MHD_Response *r;

	if (!text)
		return -ENOMEM;
	if (rq->resp) {
		cJSON_free(text);
		return -EALREADY;
	}
	r = MHD_create_response_from_buffer(strlen(text), text,
	                                    MHD_RESPMEM_MUST_COPY);
	cJSON_free(text);
	if (!r)
		return -ENOMEM;
	MHD_add_response_header(r, "Content-Type", "application/json");
	return http_reply_take(rq, status, r);
}

int http_reply_json(struct http_request *rq, unsigned status, const cJSON *doc)
{
	return reply_json_text(rq, status, cJSON_PrintUnformatted(doc));
}

int http_reply_oauth_error(struct http_request *rq, unsigned status,
                           const char *error, const char *description)
{
	cJSON *o = cJSON_CreateObject();
	int r;

	if (!o || !cJSON_AddStringToObject(o, "error", error) ||
	    (description &&
	     !cJSON_AddStringToObject(o, "error_description", description))) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	r = http_reply_json(rq, status, o);
	cJSON_Delete(o);
	return r;
}

static int status_rpc_code(unsigned status)
{
	switch (status) {
	case MHD_HTTP_INTERNAL_SERVER_ERROR:
	case MHD_HTTP_SERVICE_UNAVAILABLE:
		return RPC_INTERNAL_ERROR;
	default:
		return RPC_INVALID_REQUEST;
	}
}

int http_reply_error(struct http_request *rq, unsigned status, const char *fmt,
                     ...)
{
	char msg[768];
	char *body;
	struct MHD_Response *r;
	va_list ap;

	if (rq->resp)
		return -EALREADY;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	body = rpc_error(NULL, status_rpc_code(status), msg, NULL);
	if (!body)
		return -ENOMEM;
	r = MHD_create_response_from_buffer(strlen(body), body,
	                                    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return -ENOMEM;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	return http_reply_take(rq, status, r);
}

int http_reply_header(struct http_request *rq, const char *name,
                      const char *value)
{
	if (!rq->resp || strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return -EINVAL;
	return MHD_add_response_header(rq->resp, name, value) == MHD_YES
	           ? 0
	           : -ENOMEM;
}

/*
 * The request headers a browser may send: the fixed ones, and the
 * Mcp-Param-* ones (MCP 2026-07-28 mirrors tool arguments into them) it
 * asks for in Access-Control-Request-Headers.
 */
static void allow_headers(struct http_request *rq, char *out, size_t len)
{
	const char *req =
	    http_request_header(rq, "Access-Control-Request-Headers");
	size_t n = (size_t)snprintf(out, len,
	                            "Authorization, Content-Type, Accept, "
	                            "Mcp-Session-Id, MCP-Protocol-Version, "
	                            "Last-Event-ID, Mcp-Method, Mcp-Name");

	while (req && *req && n < len) {
		size_t tok = strcspn(req, ", \t");

		if (tok > 10 && tok < 80 &&
		    strncasecmp(req, "mcp-param-", 10) == 0 &&
		    strspn(req,
		           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
		           "VWXYZ0123456789-") >= tok)
			n += (size_t)snprintf(out + n, len - n, ", %.*s",
			                      (int)tok, req);
		req += tok;
		req += strspn(req, ", \t");
	}
}

int http_reply_preflight(struct http_request *rq)
{
	char methods[80], headers[1024];
	int r = http_reply(rq, MHD_HTTP_NO_CONTENT, NULL, "", 0);

	if (r < 0)
		return r;
	http_methods_text(rq->route->methods | HTTP_OPTIONS, methods,
	                  sizeof(methods));
	MHD_add_response_header(rq->resp, "Access-Control-Allow-Methods",
	                        methods);
	allow_headers(rq, headers, sizeof(headers));
	MHD_add_response_header(rq->resp, "Access-Control-Allow-Headers",
	                        headers);
	MHD_add_response_header(rq->resp, "Access-Control-Max-Age", "600");
	return 0;
}

/* ------------------------------------------------------------------ */
/* sending */

static void add_cors(struct http_request *rq, struct MHD_Response *r)
{
	const char *origin = http_request_header(rq, "Origin");
	enum http_cors cors = rq->route ? rq->route->cors : HTTP_CORS_ALLOWED;

	if (!origin)
		return;
	if (cors == HTTP_CORS_ANY) {
		MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
	} else if (http_allowed(origin, rq->hs->cfg->allowed_origins, true)) {
		MHD_add_response_header(r, "Access-Control-Allow-Origin",
		                        origin);
		MHD_add_response_header(r, "Vary", "Origin");
	} else {
		return;
	}
	MHD_add_response_header(r, "Access-Control-Expose-Headers",
	                        "Mcp-Session-Id, WWW-Authenticate, "
	                        "Retry-After");
}

enum MHD_Result http_send(struct http_request *rq)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!rq->resp) {
		log_warnx("%s %s: the route's handler gave no answer",
		          rq->method, rq->url);
		if (http_reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                     "internal error: no answer was produced; "
		                     "try again, and report it if it "
		                     "persists") < 0)
			return MHD_NO;
	}
	r = rq->resp;
	rq->resp = NULL;
	if (!MHD_get_response_header(r, "Cache-Control"))
		MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (!MHD_get_response_header(r, "Referrer-Policy"))
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Server", "mcp-sandboxd");
	add_cors(rq, r);
	/* Its body is not going to be read: say so, and close after. */
	if (rq->linger)
		MHD_add_response_header(r, "Connection", "close");
	rq->answered = true;
	ret = MHD_queue_response(rq->conn, rq->status, r);
	MHD_destroy_response(r);
	return ret;
}

void http_request_finish(struct http_request *rq)
{
	if (rq->resp)
		MHD_destroy_response(rq->resp);
	rq->resp = NULL;
	buf_finish(&rq->body);
	free(rq->raw_uri);
	rq->raw_uri = NULL;
}
