/* SPDX-License-Identifier: MIT */
/*
 * What the files of the http module share, and nothing else includes:
 * http.c (libmicrohttpd glue, connection tracking, lifecycle),
 * http_route.c (the route table and the policy checked on a request's
 * head), http_request.c (what handlers see and how they answer),
 * http_mcp.c (the MCP routes and their event streams), http_files.c
 * (/files/ and /healthz) and http_parse.c (pure header parsers).
 *
 * Threads: the server struct is written only before serving starts; after
 * that, connection threads read it, and the tracking fields are guarded by
 * track_lock. A struct http_request belongs to its connection's thread.
 */
#ifndef MCPSD_HTTP_INTERNAL_H
#define MCPSD_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "http/auth.h"
#include "http/http.h"
#include "util/buf.h"

#define HTTP_MAX_ROUTES 32
/*
 * What http.c's unescape leaves of a path whose /files/ prefix was itself
 * escaped ("/%66iles/..."), so that http_route.c refuses it.
 */
#define HTTP_BAD_FILES_ESCAPE "/files!"
#define HTTP_MAX_HEALTH_HOOKS 8

/*
 * What a person must do when a request has no valid token and OAuth is not
 * offered. It travels in 401 bodies, in WWW-Authenticate error_description
 * (so no '"' or '\\') and in the OAuth-shaped answers of the OAuth paths,
 * where OAuth-capable clients end up after a 401 and whose error they show.
 */
#define HTTP_TOKEN_HINT                                                        \
	"this server takes a static bearer token: set the header "             \
	"'Authorization: Bearer <token>' in your client, with the token "      \
	"from the server's .env (MCP_API_TOKEN); see the README, "             \
	"'Connecting a client'"

struct conn_track;

struct http_server {
	const struct config *cfg;
	struct mcp_server *mcp;
	struct MHD_Daemon *daemon;
	int listen_fd;
	unsigned port;
	time_t started;
	http_files_fn files;
	void *files_data;
	struct {
		http_health_fn fn;
		void *data;
	} health[HTTP_MAX_HEALTH_HOOKS];
	size_t n_health;
	struct auth_hook auth;
	struct stats *stats;             /* for /metrics; NULL: none */
	struct stats_metric *m_requests; /* by route and status */
	struct http_route routes[HTTP_MAX_ROUTES]; /* added, matched first */
	size_t n_routes;

	pthread_mutex_t track_lock;
	pthread_cond_t track_cond;
	struct conn_track *tracks;
	unsigned inflight; /* requests begun and not yet completed */
	pthread_t watchdog;
	bool watchdog_started;
	bool stopping;
};

/* One request, from its request line to its completion. */
struct http_request {
	struct http_server *hs;
	struct MHD_Connection *conn;
	char *raw_uri;     /* as sent (owned) */
	const char *query; /* into raw_uri, after '?'; "" if none */
	const char *method;
	const char *url; /* the decoded path (libmicrohttpd's) */
	const char *subpath;
	const struct http_route *route; /* NULL until routed */
	struct auth_result auth;
	bool authed;  /* auth holds who the request is */
	bool started; /* the first handler callback ran */
	bool counted; /* counted in hs->inflight */
	struct buf body;
	bool too_big;
	size_t discarded; /* body bytes dropped after too_big */
	bool answered;    /* a response was queued */
	bool ready;       /* answered on the head; sent at the request's end */
	bool linger;      /* refused with body bytes still on the way */
	struct MHD_Response *resp; /* the answer being built (owned) */
	unsigned status;
	char peer[64];   /* the socket peer */
	char client[64]; /* the client behind trusted proxies, else peer */
};

/* ---- http_parse.c ---- */

/*
 * Host header against MCP_ALLOWED_HOSTS, with the port stripped and with
 * it; true when the list is empty.
 */
bool http_host_allowed(const struct config *cfg, const char *host);

/* ---- http_route.c ---- */

/*
 * Routes rq (sets route and subpath) and checks its head against the
 * route's policy. Returns true when the request may go on to its body;
 * false when an answer has been set in rq (a refusal, or an early route's
 * answer), which the caller sends at once.
 */
bool http_route_head(struct http_request *rq);

/* Runs the route's handler (or a preflight) once the body is in. */
void http_route_dispatch(struct http_request *rq);

/* The body limit of rq's route, in bytes. */
size_t http_route_body_limit(const struct http_request *rq);

/* ---- http_request.c ---- */

/*
 * Makes r (owned whatever the result) the answer to rq with status.
 * -EALREADY when rq has one (r is destroyed), -ENOMEM when r is NULL.
 */
int http_reply_take(struct http_request *rq, unsigned status,
                    struct MHD_Response *r);

/*
 * Queues rq's answer with the headers every answer gets; a request its
 * handler left unanswered gets a 500. Returns libmicrohttpd's verdict.
 */
enum MHD_Result http_send(struct http_request *rq);

/* A 204 preflight for the route's methods. */
int http_reply_preflight(struct http_request *rq);

/* Frees what rq holds (not rq). */
void http_request_finish(struct http_request *rq);

/* ---- http_mcp.c ---- */

void http_mcp_handle(void *data, struct http_request *rq);
void http_mcp_sse_handle(void *data, struct http_request *rq);
void http_mcp_messages_handle(void *data, struct http_request *rq);
/* Accept must allow what the MCP route answers with (406 otherwise). */
bool http_mcp_head(void *data, struct http_request *rq);

/* ---- http_files.c ---- */

void http_files_handle(void *data, struct http_request *rq);
void http_health_handle(void *data, struct http_request *rq);

/* ---- http_metrics.c ---- */

/* GET /metrics: the stats' text exposition, for METRICS_TOKEN or loopback. */
void http_metrics_handle(void *data, struct http_request *rq);

#endif
