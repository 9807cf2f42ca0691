/* SPDX-License-Identifier: MIT */
/*
 * http_mcp: the routes of the MCP transports. Streamable HTTP on /mcp
 * (POST, GET, DELETE) and the legacy HTTP+SSE pair /sse and /messages hand
 * their bodies to the MCP core and answer with what it returns: JSON, an
 * empty body, or an event stream read from the core a second at a time.
 * Runs on connection threads; the core is thread-safe.
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_internal.h"

#define SSE_BLOCK 32768

/* A stream being sent: the MCP side plus what keep-alives need. */
struct sse_body {
	struct mcp_stream *stream;
	int fd; /* the connection's socket, to notice a client leaving */
	unsigned keepalive_s;
};

/* Whether the client has gone (closed its end or reset). */
static bool peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	if (fd < 0)
		return false;
	return poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/*
 * Waits for events a second at a time, so a client that left is noticed
 * within a second instead of at the next keep-alive, and sends a comment
 * when the stream has been quiet for the keep-alive interval.
 */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	static const char ka[] = ": keepalive\n\n";
	struct sse_body *b = cls;
	unsigned waited = 0;

	(void)pos;
	for (;;) {
		ssize_t n = mcp_stream_read(b->stream, buf, max, 1000);

		if (n > 0)
			return n;
		if (n < 0)
			return (ssize_t)MHD_CONTENT_READER_END_OF_STREAM;
		if (peer_gone(b->fd))
			return (ssize_t)MHD_CONTENT_READER_END_WITH_ERROR;
		if (++waited >= b->keepalive_s && max >= sizeof(ka) - 1) {
			memcpy(buf, ka, sizeof(ka) - 1);
			return (ssize_t)(sizeof(ka) - 1);
		}
	}
}

static void sse_free(void *cls)
{
	struct sse_body *b = cls;

	mcp_stream_release(b->stream);
	free(b);
}

/* An event stream answer; takes mr->stream. NULL when out of memory. */
static struct MHD_Response *stream_response(struct http_request *rq,
                                            struct mcp_http_resp *mr)
{
	struct sse_body *b = calloc(1, sizeof(*b));
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
	    rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct MHD_Response *r;

	if (!b)
		return NULL;
	b->stream = mr->stream;
	b->fd = ci ? ci->connect_fd : -1;
	b->keepalive_s = rq->hs->cfg->keepalive_s;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK,
	                                      sse_reader, b, sse_free);
	if (!r) {
		free(b);
		return NULL;
	}
	mr->stream = NULL; /* the response owns it now */
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache, no-transform");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	return r;
}

/* Answers rq with what the MCP core returned, and finishes mr. */
static void reply_mcp(struct http_request *rq, struct mcp_http_resp *mr)
{
	struct MHD_Response *r;
	char ra[16];

	if (mr->stream) {
		r = stream_response(rq, mr);
	} else if (mr->body) {
		r = MHD_create_response_from_buffer(strlen(mr->body), mr->body,
		                                    MHD_RESPMEM_MUST_FREE);
		if (r) {
			mr->body = NULL;
			MHD_add_response_header(r, "Content-Type",
			                        "application/json");
		}
	} else {
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
	}
	if (r && mr->session_id[0])
		MHD_add_response_header(r, "Mcp-Session-Id", mr->session_id);
	if (r && mr->retry_after) {
		snprintf(ra, sizeof(ra), "%u", mr->retry_after);
		MHD_add_response_header(r, "Retry-After", ra);
	}
	/* Without r, the request is left unanswered: http_send says 500. */
	if (r)
		(void)http_reply_take(rq, (unsigned)mr->status, r);
	mcp_http_resp_finish(mr);
}

/* The core's view of the request's headers (mcp_http_req.header). */
static const char *header_of(void *hctx, const char *name)
{
	return http_request_header(hctx, name);
}

/*
 * Who within the tenant, for the audit trail: the OAuth client, the
 * static token's fingerprint, or "none" (MCP_AUTH=none).
 */
static void principal_of(const struct auth_result *a, char *out, size_t n)
{
	if (a->method == AUTH_METHOD_OAUTH)
		snprintf(out, n, "oauth:%s", a->client);
	else if (a->method == AUTH_METHOD_STATIC)
		snprintf(out, n, "token:%s", a->fingerprint);
	else
		snprintf(out, n, "none");
}

static void fill_req(const struct http_request *rq, struct mcp_http_req *req,
                     char *client, size_t n)
{
	size_t len;

	memset(req, 0, sizeof(*req));
	req->header = header_of;
	req->hctx = (void *)(uintptr_t)rq;
	req->tenant = rq->auth.tenant;
	principal_of(&rq->auth, client, n);
	req->client = client;
	req->body = http_request_body(rq, &len);
	req->body_len = len;
	req->protocol_version = http_request_header(rq, "MCP-Protocol-Version");
	req->last_event_id = http_request_header(rq, "Last-Event-ID");
}

void http_mcp_handle(void *data, struct http_request *rq)
{
	struct mcp_http_req req;
	struct mcp_http_resp mr;
	char client[AUTH_CLIENT_MAX + 8];
	unsigned m = http_method_bit(rq->method);

	(void)data;
	fill_req(rq, &req, client, sizeof(client));
	req.session_id = http_request_header(rq, "Mcp-Session-Id");
	if (m == HTTP_POST)
		mcp_http_post(rq->hs->mcp, &req, &mr);
	else if (m == HTTP_GET)
		mcp_http_get(rq->hs->mcp, &req, &mr);
	else
		mcp_http_delete(rq->hs->mcp, &req, &mr);
	reply_mcp(rq, &mr);
}

void http_mcp_sse_handle(void *data, struct http_request *rq)
{
	struct mcp_http_req req;
	struct mcp_http_resp mr;
	char client[AUTH_CLIENT_MAX + 8];

	(void)data;
	fill_req(rq, &req, client, sizeof(client));
	mcp_http_sse_open(rq->hs->mcp, &req, "/messages", &mr);
	reply_mcp(rq, &mr);
}

void http_mcp_messages_handle(void *data, struct http_request *rq)
{
	struct mcp_http_req req;
	struct mcp_http_resp mr;
	char client[AUTH_CLIENT_MAX + 8];

	(void)data;
	fill_req(rq, &req, client, sizeof(client));
	req.session_id = http_request_query(rq, "sessionId");
	mcp_http_sse_post(rq->hs->mcp, &req, &mr);
	reply_mcp(rq, &mr);
}

bool http_mcp_head(void *data, struct http_request *rq)
{
	const char *accept = http_request_header(rq, "Accept");
	unsigned m = http_method_bit(rq->method);
	/* Only Streamable HTTP answers a POST with JSON or a stream. */
	bool mcp = rq->route->handler == http_mcp_handle;

	(void)data;
	if (m == HTTP_POST && mcp &&
	    (!http_accepts(accept, "application/json") ||
	     !http_accepts(accept, "text/event-stream"))) {
		(void)http_reply_error(rq, MHD_HTTP_NOT_ACCEPTABLE,
		                       "Accept must list both "
		                       "application/json and "
		                       "text/event-stream");
		return false;
	}
	if (m == HTTP_GET && !http_accepts(accept, "text/event-stream")) {
		(void)http_reply_error(rq, MHD_HTTP_NOT_ACCEPTABLE,
		                       "Accept must list text/event-stream "
		                       "to open an event stream");
		return false;
	}
	return true;
}
