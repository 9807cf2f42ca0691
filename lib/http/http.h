/* SPDX-License-Identifier: MIT */
/*
 * http: the HTTP front on libmicrohttpd. It owns the listening socket, the
 * route table with each route's policy (methods, Host and Origin
 * allow-lists, bearer auth, request content types, body limit, CORS), the
 * transport-level checks every request gets (header and body framing, slow
 * clients) and the mapping of failures to HTTP statuses. MCP semantics live
 * in mcp.c; file lookup lives behind the files hook; other modules add
 * routes (OAuth endpoints, /metrics) with http_server_add_route. One thread
 * per connection, so a handler may block (a POST waiting for a quick
 * result, a stream waiting for events) without holding up anyone else.
 *
 * A request refused on its head (404, 405, 401, 403, 415, 406, 413, or a
 * framing error) is answered at once and its body is never read: the
 * connection is closed after the answer, with a short lingering read
 * capped in time and bytes so that a client still sending reads the answer
 * instead of a reset.
 */
#ifndef MCPSD_HTTP_H
#define MCPSD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "http/auth.h"
#include "mcp/mcp.h"

struct http_server;
struct http_request;

/* ---- the server ---------------------------------------------------- */

/* A file to serve, filled in by the files hook. */
struct http_file {
	int fd; /* open, regular; the server closes it */
	uint64_t size;
	time_t mtime;
	const char *content_type; /* static string */
	bool inline_ok;           /* raster image or plain text */
	char etag[80];            /* quoted strong validator */
	char filename[256];       /* base name, for Content-Disposition */
};

/*
 * Resolves the part of a /files/ URL after "/files/" (still
 * percent-encoded). Returns 0 with *out filled, or an HTTP status (400,
 * 404, ...) with a message for the client in err.
 */
typedef int (*http_files_fn)(void *data, const char *path,
                             struct http_file *out, char *err, size_t errlen);

/* Adds fields to the /healthz document; returns false if degraded. */
typedef bool (*http_health_fn)(void *data, cJSON *health);

/*
 * Binds the configured address without serving yet, so that routes and
 * hooks can be added first; http_server_start serves. cfg and mcp are
 * borrowed and must outlive the server. On failure returns a negative
 * errno and a message for a person in err; *out is NULL.
 */
__attribute__((warn_unused_result)) int
http_server_bind(const struct config *cfg, struct mcp_server *mcp,
                 struct http_server **out, char *err, size_t errlen);

/* Starts serving a bound server. -EIO with a message in err. */
__attribute__((warn_unused_result)) int
http_server_start(struct http_server *hs, char *err, size_t errlen);

/* http_server_bind and http_server_start in one call. */
__attribute__((warn_unused_result)) int
http_server_create(const struct config *cfg, struct mcp_server *mcp,
                   struct http_server **out, char *err, size_t errlen);

/* Hooks; set before traffic arrives. data is borrowed. */
void http_server_set_files(struct http_server *hs, http_files_fn fn,
                           void *data);
void http_server_add_health(struct http_server *hs, http_health_fn fn,
                            void *data);

/*
 * Bearer tokens that match no static token go to hook (OAuth access
 * tokens). Before http_server_start; hook is copied, hook->data borrowed.
 * Returns 0, or -EBUSY once serving.
 */
__attribute__((warn_unused_result)) int
http_server_set_auth(struct http_server *hs, const struct auth_hook *hook);

struct stats;

/*
 * Counts every finished request in s (by the path of its route, "none"
 * for unmatched, and its status) and serves s at GET /metrics. Before
 * traffic arrives; s outlives the server.
 */
void http_server_set_stats(struct http_server *hs, struct stats *s);

/* The port actually bound (useful when configured as 0). */
unsigned http_server_port(const struct http_server *hs);

/*
 * Waits up to timeout_ms until no request is in progress (every response
 * sent), so a shutdown does not cut answers already produced. Returns the
 * number still in progress. Open event streams count: end them first
 * (mcp_server_close_sessions).
 */
unsigned http_server_wait_idle(struct http_server *hs, unsigned timeout_ms);

/* Stops serving, closing every connection, and frees. NULL-safe. */
void http_server_destroy(struct http_server *hs);

/* ---- routes --------------------------------------------------------- */

/* Methods, as a bit set. */
enum {
	HTTP_GET = 1u << 0,
	HTTP_HEAD = 1u << 1,
	HTTP_POST = 1u << 2,
	HTTP_PUT = 1u << 3,
	HTTP_DELETE = 1u << 4,
	HTTP_OPTIONS = 1u << 5,
	HTTP_PATCH = 1u << 6,
	HTTP_ANY_METHOD = 0x7f,
};

/* Request content types a route accepts on a body, as a bit set. */
enum {
	HTTP_BODY_JSON = 1u << 0, /* application/json */
	HTTP_BODY_FORM = 1u << 1, /* application/x-www-form-urlencoded */
};

enum http_match {
	HTTP_MATCH_EXACT = 0, /* the path, exactly */
	/*
	 * The path, or the path followed by "/..." (RFC 8414 and 9728
	 * insert a resource path after the well-known one). A path that
	 * itself ends in '/' matches whatever follows it.
	 */
	HTTP_MATCH_PREFIX,
};

enum http_cors {
	/* CORS headers for origins in MCP_ALLOWED_ORIGINS; no preflight. */
	HTTP_CORS_ALLOWED = 0,
	/* The same, and OPTIONS answers a preflight for the route's methods. */
	HTTP_CORS_PREFLIGHT,
	/* Any origin may read (public metadata); OPTIONS answers a preflight.
	 */
	HTTP_CORS_ANY,
};

/* The configured MCP_MAX_BODY_BYTES, as a route's max_body. */
#define HTTP_BODY_MCP ((size_t)-1)
/* A route's max_body when it gives none: room for a form, not an upload. */
#define HTTP_BODY_DEFAULT ((size_t)16384)

/*
 * Runs once the body has been read (or on the head, for early routes).
 * Answers with one of the http_reply* functions below; a handler that
 * answers nothing gets a 500. Called on the connection's thread.
 */
typedef void (*http_handler_fn)(void *data, struct http_request *rq);

/*
 * Optional check on the request head, after the route's own policy passed
 * and before any of the body is read. Returns true to go on; to refuse,
 * answer with an http_reply* function and return false (the answer goes
 * out at once and the body is never read).
 */
typedef bool (*http_head_fn)(void *data, struct http_request *rq);

/*
 * One row of the route table: the policy http.c enforces on the head, in
 * this order (each refusal is answered at once, the body unread): Host and
 * Origin allow-lists when guard is set (403), the method (405 with Allow;
 * OPTIONS passes as a preflight when cors allows one), the bearer token
 * when auth is set (401; 403 insufficient_scope; 503 when it cannot be
 * checked), the content type of a body (415), the head hook, then
 * Content-Length against max_body (413; a chunked body over the limit is
 * cut instead). A path no route matches is a 404, also answered at once.
 */
struct http_route {
	const char *path; /* starts with '/'; static or outliving the server */
	enum http_match match;
	unsigned methods;    /* HTTP_GET | ...; 405 with Allow for others */
	bool auth;           /* a valid bearer token is required */
	const char *scope;   /* with auth: a scope the token must carry */
	bool guard;          /* Host and Origin allow-lists (DNS rebinding) */
	unsigned body_types; /* HTTP_BODY_*; 0 accepts any (or none) */
	size_t max_body;     /* bytes; 0 = HTTP_BODY_DEFAULT */
	enum http_cors cors;
	/* The handler needs no body: it runs on the head, the body unread. */
	bool early;
	http_head_fn head; /* optional */
	http_handler_fn handler;
	void *data; /* borrowed; passed to head and handler */
};

/*
 * Adds a route (copied; its strings and data are borrowed). Routes added
 * here are matched before the built-in ones, in the order added, so one
 * with the path of a built-in route (e.g. /token, answered "OAuth is not
 * enabled" by default) replaces it. Before http_server_start. Returns 0,
 * -EBUSY once serving, -ENOSPC past the table's size, -EINVAL for a route
 * without a handler, methods or a path starting with '/', with a message
 * in err.
 */
__attribute__((warn_unused_result)) int
http_server_add_route(struct http_server *hs, const struct http_route *route,
                      char *err, size_t errlen);

/* ---- what a handler sees ---------------------------------------------- */

/*
 * Everything below is valid during the handler (or head hook) call only;
 * returned strings are borrowed from the request.
 */

/* "GET", "POST", ... */
const char *http_request_method(const struct http_request *rq);
/* The path as routed: percent-decoded, except under /files/. */
const char *http_request_path(const struct http_request *rq);
/* For prefix routes, what follows the route's path ("" if nothing). */
const char *http_request_subpath(const struct http_request *rq);
/* The raw query string after '?', still percent-encoded; "" if none. */
const char *http_request_query_string(const struct http_request *rq);
/* A decoded query parameter (the first of that name), or NULL. */
const char *http_request_query(const struct http_request *rq, const char *name);
/* A request header (the first of that name), or NULL. */
const char *http_request_header(const struct http_request *rq,
                                const char *name);
/* The body read (NUL-terminated; "" with *len 0 when there was none). */
const char *http_request_body(const struct http_request *rq, size_t *len);
/* Who the request is, on routes with auth; NULL on others. */
const struct auth_result *http_request_auth(const struct http_request *rq);
/* The socket peer's IP address as text ("" if unknown). */
const char *http_request_peer(const struct http_request *rq);
/*
 * The client's IP address as text, for rate limits and logs: the peer's,
 * or, when the peer is one of MCP_TRUSTED_PROXIES, the client its
 * CF-Connecting-IP or X-Forwarded-For header names ("" if unknown).
 */
const char *http_request_client(const struct http_request *rq);

/*
 * Answers: one per request, the first one wins (-EALREADY after). body is
 * copied; content_type is a static string. Headers every answer gets
 * (nosniff, CORS per the route, and Referrer-Policy: no-referrer and
 * Cache-Control: no-store unless the handler sets its own) are added by the
 * server. 0 or -ENOMEM.
 * Not warn_unused_result, on purpose: a handler need not check, since a
 * request left without an answer is answered 500 by the server.
 */
int http_reply(struct http_request *rq, unsigned status,
               const char *content_type, const void *body, size_t len);

/* A JSON document (serialized; doc stays the caller's). */
int http_reply_json(struct http_request *rq, unsigned status, const cJSON *doc);

/*
 * An OAuth error (RFC 6749 section 5.2, RFC 7591 section 3.2.2):
 * {"error": error, "error_description": description}.
 */
int http_reply_oauth_error(struct http_request *rq, unsigned status,
                           const char *error, const char *description);

/*
 * A transport-level refusal: a JSON-RPC error body (id null) that says what
 * was wrong and what to do, with the HTTP status.
 */
int http_reply_error(struct http_request *rq, unsigned status, const char *fmt,
                     ...) __attribute__((format(printf, 3, 4)));

/*
 * Adds a header to the answer already given (name and value copied).
 * -EINVAL before an answer or for CR/LF in either, -ENOMEM.
 */
int http_reply_header(struct http_request *rq, const char *name,
                      const char *value);

/*
 * Whether an operator's request may go on (the rule of /metrics): with
 * token set, it must bear that token (compared in constant time); without
 * it, only loopback clients, and nobody while PUBLIC_BASE_URL is a public
 * URL. On refusal answers 401 or 403 with a message naming setting (the
 * variable to set) and path, and returns false.
 */
bool http_operator_ok(struct http_request *rq, const char *token,
                      const char *setting, const char *path);

/* ---- pure helpers, exposed for tests and fuzzing -------------------- */

/*
 * Parses a Range header against a file of size bytes. Returns 1 with
 * [*first, *last] for one satisfiable range, 0 to ignore the header (absent,
 * malformed or several ranges: serve the whole file), -1 when unsatisfiable
 * (416).
 */
int http_parse_range(const char *h, uint64_t size, uint64_t *first,
                     uint64_t *last);

/* Whether an Accept header lists the media type (or a matching wildcard). */
bool http_accepts(const char *accept, const char *type);

/* Whether a Content-Type header is exactly the media type (params ok). */
bool http_media_type_is(const char *content_type, const char *type);

/*
 * Whether a Host or Origin value is allowed by a NULL-terminated list of
 * patterns: exact (case-insensitive), "*" for any, and for origins a
 * trailing ":*" matching any port. is_origin selects origin matching.
 */
bool http_allowed(const char *value, char *const *patterns, bool is_origin);

/*
 * Whether a request path matches a route path under the given rule; on a
 * match *rest points at what follows the route's path in url.
 */
bool http_path_match(const char *route_path, enum http_match match,
                     const char *url, const char **rest);

/* The bit of a method name (HTTP_GET, ...), 0 for an unknown method. */
unsigned http_method_bit(const char *method);

/* Writes "GET, HEAD, POST" for a bit set into out (always terminated). */
void http_methods_text(unsigned methods, char *out, size_t outlen);

/*
 * Whether a Content-Type header names one of the HTTP_BODY_* types in
 * types (types 0: any).
 */
bool http_body_type_ok(const char *content_type, unsigned types);

#endif
