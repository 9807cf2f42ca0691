/* SPDX-License-Identifier: MIT */
/*
 * http: libmicrohttpd in thread-per-connection mode. Each request gets a
 * context on its first callback; checks that need only headers run then, so
 * a refused request never has its body buffered. A watchdog thread enforces
 * the header and body deadlines that libmicrohttpd lacks (it only knows an
 * idle timeout, which a client sending one byte at a time never trips) by
 * shutting the socket down, which the connection's thread then notices.
 */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "auth.h"
#include "buf.h"
#include "build_config.h"
#include "log.h"
#include "rpc.h"
#include "util/mono.h"
#include "util/num.h"

#define MAX_HEALTH_HOOKS 8
#define MAX_HEADER_COUNT 100
#define LINGER_MS 2000
#define SSE_BLOCK 32768
#define THREAD_STACK (512 * 1024)

enum phase {
	PHASE_HEADERS,    /* waiting for a request line and headers */
	PHASE_BODY,       /* reading a body */
	PHASE_RESPONDING, /* our turn; no client deadline */
	PHASE_KILLED,
};

struct conn_track {
	struct conn_track *next, *prev;
	int fd;
	enum phase phase;
	time_t deadline;
};

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
	} health[MAX_HEALTH_HOOKS];
	size_t n_health;

	pthread_mutex_t track_lock;
	pthread_cond_t track_cond;
	struct conn_track *tracks;
	unsigned inflight; /* requests begun and not yet completed */
	pthread_t watchdog;
	bool stopping;
};

enum route {
	ROUTE_NONE = 0,
	ROUTE_HEALTH,
	ROUTE_MCP,
	ROUTE_SSE,
	ROUTE_MESSAGES,
	ROUTE_FILES,
	ROUTE_WELL_KNOWN,
	ROUTE_ROOT,
	ROUTE_BAD_ESCAPE, /* an escaped /files/ prefix (see unescape) */
};

/* What unescape() leaves of a path whose /files/ prefix was escaped. */
#define BAD_FILES_ESCAPE "/files!"

struct request {
	enum route route;
	const char *tenant;
	struct buf body;
	bool too_big;
	size_t discarded; /* body bytes dropped after too_big */
	bool answered;    /* a response was queued early */
	bool linger;      /* refused with body bytes still on the way */
};

/* ------------------------------------------------------------------ */
/* pure helpers */

int http_parse_range(const char *h, uint64_t size, uint64_t *first,
                     uint64_t *last)
{
	const char *p, *end;
	uint64_t a, b;

	*first = *last = 0;
	if (!h)
		return 0;
	while (*h == ' ')
		h++;
	if (strncasecmp(h, "bytes=", 6) != 0)
		return 0;
	p = h + 6;
	while (*p == ' ')
		p++;
	if (strchr(p, ','))
		return 0; /* several ranges: send the whole file */
	if (*p == '-') {
		/* Suffix: the last N bytes. */
		end = num_scan_u64(p + 1, UINT64_MAX, &b);
		if (!end)
			return 0;
		while (*end == ' ')
			end++;
		if (*end)
			return 0;
		if (b == 0 || size == 0)
			return -1;
		*first = b >= size ? 0 : size - b;
		*last = size - 1;
		return 1;
	}
	end = num_scan_u64(p, UINT64_MAX, &a);
	if (!end || *end != '-')
		return 0;
	p = end + 1;
	while (*p == ' ')
		p++;
	if (*p == '\0') {
		b = size ? size - 1 : 0;
	} else {
		end = num_scan_u64(p, UINT64_MAX, &b);
		if (!end)
			return 0;
		while (*end == ' ')
			end++;
		if (*end || b < a)
			return 0;
		if (b >= size)
			b = size ? size - 1 : 0;
	}
	if (a >= size)
		return -1;
	*first = a;
	*last = b;
	return 1;
}

/* The weight of a "q=" parameter (RFC 9110: 0 to 1); 1 if malformed. */
static double qvalue(const char *s)
{
	char tok[8];
	size_t n = strcspn(s, " \t,;");
	double q = 1;

	if (n == 0 || n >= sizeof(tok))
		return 1;
	memcpy(tok, s, n);
	tok[n] = '\0';
	return num_double(tok, 0, 1, &q) == 0 ? q : 1;
}

/* Compares one media range (no params) against a type. */
static bool media_match(const char *range, size_t rl, const char *type)
{
	size_t tl = strlen(type);
	const char *slash = strchr(type, '/');

	if (rl == 3 && strncmp(range, "*/*", 3) == 0)
		return true;
	if (slash && rl == (size_t)(slash - type) + 2 &&
	    strncasecmp(range, type, (size_t)(slash - type) + 1) == 0 &&
	    range[rl - 1] == '*')
		return true;
	return rl == tl && strncasecmp(range, type, tl) == 0;
}

bool http_accepts(const char *accept, const char *type)
{
	const char *p = accept;

	if (!accept)
		return false;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		const char *semi;
		size_t rl;

		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		semi = memchr(p, ';', len);
		rl = semi ? (size_t)(semi - p) : len;
		while (rl && (p[rl - 1] == ' ' || p[rl - 1] == '\t'))
			rl--;
		if (media_match(p, rl, type)) {
			/* q=0 means "not acceptable". */
			const char *q = semi ? strstr(semi, "q=") : NULL;

			if (!q || q >= p + len || qvalue(q + 2) > 0)
				return true;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

bool http_media_type_is(const char *ct, const char *type)
{
	size_t tl = strlen(type);

	if (!ct)
		return false;
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, type, tl) != 0)
		return false;
	ct += tl;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

bool http_allowed(const char *value, char *const *patterns, bool is_origin)
{
	size_t vl;

	if (!value || !patterns)
		return false;
	vl = strlen(value);
	for (char *const *p = patterns; *p; p++) {
		const char *pat = *p;
		size_t pl = strlen(pat);

		if (strcmp(pat, "*") == 0)
			return true;
		if (pl == vl && strcasecmp(pat, value) == 0)
			return true;
		/* "http://localhost:*": that origin on any port. */
		if (is_origin && pl > 2 && strcmp(pat + pl - 2, ":*") == 0 &&
		    vl > pl - 1 && strncasecmp(pat, value, pl - 1) == 0) {
			const char *port = value + pl - 1;

			if (*port && strspn(port, "0123456789") == strlen(port))
				return true;
		}
	}
	return false;
}

/* Host header: compare with the port stripped, and with it. */
static bool host_allowed(const struct config *cfg, const char *host)
{
	char name[300];
	const char *colon;

	if (!cfg->allowed_hosts || !cfg->allowed_hosts[0])
		return true;
	if (!host || !*host || strlen(host) >= sizeof(name))
		return false;
	if (http_allowed(host, cfg->allowed_hosts, false))
		return true;
	if (host[0] == '[') {
		const char *rb = strchr(host, ']');

		if (!rb)
			return false;
		snprintf(name, sizeof(name), "%.*s", (int)(rb - host + 1),
		         host);
	} else {
		colon = strrchr(host, ':');
		snprintf(name, sizeof(name), "%.*s",
		         (int)(colon ? (size_t)(colon - host) : strlen(host)),
		         host);
	}
	return http_allowed(name, cfg->allowed_hosts, false);
}

/* ------------------------------------------------------------------ */
/* responses */

static void add_common_headers(struct MHD_Response *r)
{
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Server", "mcp-sandboxd");
}

static void add_cors(struct http_server *hs, struct MHD_Connection *conn,
                     struct MHD_Response *r)
{
	const char *origin =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");

	if (!origin || !http_allowed(origin, hs->cfg->allowed_origins, true))
		return;
	MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
	MHD_add_response_header(r, "Vary", "Origin");
	MHD_add_response_header(r, "Access-Control-Expose-Headers",
	                        "Mcp-Session-Id, WWW-Authenticate, "
	                        "Retry-After");
}

static enum MHD_Result queue(struct MHD_Connection *conn, unsigned status,
                             struct MHD_Response *r)
{
	enum MHD_Result ret = MHD_queue_response(conn, status, r);

	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_text(struct http_server *hs,
                                    struct MHD_Connection *conn,
                                    unsigned status, const char *ctype,
                                    const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    strlen(body), (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	add_common_headers(r);
	add_cors(hs, conn, r);
	return queue(conn, status, r);
}

/*
 * Every transport-level refusal goes through here: a JSON-RPC error body
 * (id null) that says what was wrong and what to do, with the HTTP status.
 */
static enum MHD_Result respond_error(struct http_server *hs,
                                     struct MHD_Connection *conn,
                                     unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int status_rpc_code(unsigned status)
{
	switch (status) {
	case MHD_HTTP_NOT_FOUND:
		return RPC_INVALID_REQUEST;
	case MHD_HTTP_INTERNAL_SERVER_ERROR:
	case MHD_HTTP_SERVICE_UNAVAILABLE:
		return RPC_INTERNAL_ERROR;
	default:
		return RPC_INVALID_REQUEST;
	}
}

/* A JSON-RPC error body (id null) with the headers every refusal has. */
static struct MHD_Response *error_response(struct http_server *hs,
                                           struct MHD_Connection *conn,
                                           unsigned status, const char *msg)
{
	char *body = rpc_error(NULL, status_rpc_code(status), msg, NULL);
	struct MHD_Response *r;

	if (!body)
		return NULL;
	r = MHD_create_response_from_buffer(strlen(body), body,
	                                    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	add_common_headers(r);
	add_cors(hs, conn, r);
	if (status == MHD_HTTP_UNAUTHORIZED) {
		/* RFC 6750: an error code only when a token was presented. */
		MHD_add_response_header(
		    r, "WWW-Authenticate",
		    strncmp(msg, "invalid", 7) == 0
		        ? "Bearer realm=\"mcp\", error=\"invalid_token\""
		        : "Bearer realm=\"mcp\"");
	}
	return r;
}

static enum MHD_Result respond_error(struct http_server *hs,
                                     struct MHD_Connection *conn,
                                     unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	struct MHD_Response *r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r = error_response(hs, conn, status, msg);
	return r ? queue(conn, status, r) : MHD_NO;
}

static enum MHD_Result respond_405(struct http_server *hs,
                                   struct MHD_Connection *conn,
                                   const char *allow)
{
	char msg[128];
	struct MHD_Response *r;

	snprintf(msg, sizeof(msg), "method not allowed here; use %s", allow);
	r = error_response(hs, conn, MHD_HTTP_METHOD_NOT_ALLOWED, msg);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Allow", allow);
	return queue(conn, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

/* ------------------------------------------------------------------ */
/* SSE bodies */

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

static enum MHD_Result respond_mcp(struct http_server *hs,
                                   struct MHD_Connection *conn,
                                   struct mcp_http_resp *mr)
{
	struct MHD_Response *r;
	char ra[16];

	if (mr->stream) {
		struct sse_body *b = calloc(1, sizeof(*b));
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (!b) {
			mcp_http_resp_finish(mr);
			return MHD_NO;
		}
		b->stream = mr->stream;
		b->fd = ci ? ci->connect_fd : -1;
		b->keepalive_s = hs->cfg->keepalive_s;
		r = MHD_create_response_from_callback(
		    MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_reader, b, sse_free);
		if (!r) {
			free(b);
			mcp_http_resp_finish(mr);
			return MHD_NO;
		}
		mr->stream = NULL; /* the response owns it now */
		MHD_add_response_header(r, "Content-Type", "text/event-stream");
		MHD_add_response_header(r, "Cache-Control",
		                        "no-cache, no-transform");
		MHD_add_response_header(r, "X-Accel-Buffering", "no");
	} else if (mr->body) {
		size_t len = strlen(mr->body);

		r = MHD_create_response_from_buffer(len, mr->body,
		                                    MHD_RESPMEM_MUST_FREE);
		if (!r) {
			mcp_http_resp_finish(mr);
			return MHD_NO;
		}
		mr->body = NULL;
		MHD_add_response_header(r, "Content-Type", "application/json");
		MHD_add_response_header(r, "Cache-Control", "no-store");
	} else {
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
	}
	if (mr->session_id[0])
		MHD_add_response_header(r, "Mcp-Session-Id", mr->session_id);
	if (mr->retry_after) {
		snprintf(ra, sizeof(ra), "%u", mr->retry_after);
		MHD_add_response_header(r, "Retry-After", ra);
	}
	add_common_headers(r);
	add_cors(hs, conn, r);
	mcp_http_resp_finish(mr);
	return queue(conn, (unsigned)mr->status, r);
}

/* ------------------------------------------------------------------ */
/* files */

static enum MHD_Result serve_file(struct http_server *hs,
                                  struct MHD_Connection *conn,
                                  const char *method, const char *path)
{
	struct http_file f;
	char err[256] = "";
	char hdr[512];
	const char *h;
	struct MHD_Response *r;
	uint64_t first = 0, last = 0;
	unsigned status = MHD_HTTP_OK;
	int rc, range;
	struct tm tm;

	if (!hs->files)
		return respond_error(hs, conn, MHD_HTTP_NOT_FOUND,
		                     "file serving is not enabled");
	memset(&f, 0, sizeof(f));
	f.fd = -1;
	rc = hs->files(hs->files_data, path, &f, err, sizeof(err));
	if (rc != 0)
		return respond_error(hs, conn, (unsigned)rc, "%s",
		                     err[0] ? err : "file not found");

	gmtime_r(&f.mtime, &tm);
	char lm[64];

	strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);

	/* Conditional requests: ETag first, then dates. */
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
	if ((h && (strstr(h, f.etag) || strcmp(h, "*") == 0)) ||
	    (!h &&
	     (h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                      "If-Modified-Since")) &&
	     strcmp(h, lm) == 0)) {
		close(f.fd);
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, "ETag", f.etag);
		MHD_add_response_header(r, "Last-Modified", lm);
		add_common_headers(r);
		return queue(conn, MHD_HTTP_NOT_MODIFIED, r);
	}

	range = http_parse_range(
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Range"), f.size,
	    &first, &last);
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-Range");
	if (range != 0 && h && strcmp(h, f.etag) != 0 && strcmp(h, lm) != 0)
		range = 0; /* the client's copy is stale: send it all */
	if (range < 0) {
		close(f.fd);
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		snprintf(hdr, sizeof(hdr), "bytes */%llu",
		         (unsigned long long)f.size);
		MHD_add_response_header(r, "Content-Range", hdr);
		add_common_headers(r);
		return queue(conn, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
	}
	if (range == 0) {
		first = 0;
		last = f.size ? f.size - 1 : 0;
	} else {
		status = MHD_HTTP_PARTIAL_CONTENT;
	}
	if (f.size == 0)
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
	else
		r = MHD_create_response_from_fd_at_offset64(last - first + 1,
		                                            f.fd, first);
	if (!r) {
		close(f.fd);
		return MHD_NO;
	}
	if (f.size == 0)
		close(f.fd);
	(void)method; /* MHD leaves the body out of HEAD answers */
	MHD_add_response_header(r, "Content-Type", f.content_type);
	MHD_add_response_header(r, "ETag", f.etag);
	MHD_add_response_header(r, "Last-Modified", lm);
	MHD_add_response_header(r, "Accept-Ranges", "bytes");
	MHD_add_response_header(r, "Cache-Control", "private, max-age=60");
	MHD_add_response_header(r, "Content-Security-Policy",
	                        "sandbox; default-src 'none'; img-src 'self'; "
	                        "style-src 'unsafe-inline'");
	MHD_add_response_header(r, "Cross-Origin-Resource-Policy",
	                        "cross-origin");
	if (status == MHD_HTTP_PARTIAL_CONTENT) {
		snprintf(hdr, sizeof(hdr), "bytes %llu-%llu/%llu",
		         (unsigned long long)first, (unsigned long long)last,
		         (unsigned long long)f.size);
		MHD_add_response_header(r, "Content-Range", hdr);
	}
	/* RFC 6266: an ASCII fallback plus the UTF-8 name, escaped. */
	{
		char ascii[256];
		struct buf enc;
		size_t k = 0;

		for (const char *p = f.filename; *p && k + 1 < sizeof(ascii);
		     p++) {
			unsigned char c = (unsigned char)*p;

			ascii[k++] = (c >= 0x20 && c < 0x7f && c != '"' &&
			              c != '\\' && c != '%')
			                 ? (char)c
			                 : '_';
		}
		ascii[k] = '\0';
		buf_init(&enc, 2048);
		for (const unsigned char *p = (const unsigned char *)f.filename;
		     *p; p++) {
			int e = isalnum(*p) || strchr("-._~", *p)
			            ? buf_putc(&enc, (char)*p)
			            : buf_printf(&enc, "%%%02X", *p);
			if (e < 0)
				break;
		}
		snprintf(hdr, sizeof(hdr),
		         "%s; filename=\"%s\"; filename*=UTF-8''%s",
		         f.inline_ok ? "inline" : "attachment", ascii,
		         enc.data ? enc.data : "");
		buf_finish(&enc);
		MHD_add_response_header(r, "Content-Disposition", hdr);
	}
	add_common_headers(r);
	add_cors(hs, conn, r);
	return queue(conn, status, r);
}

/* ------------------------------------------------------------------ */
/* health */

static enum MHD_Result serve_health(struct http_server *hs,
                                    struct MHD_Connection *conn)
{
	cJSON *h = cJSON_CreateObject();
	struct mcp_stats st;
	bool ok = true;
	char *text;
	enum MHD_Result ret;

	if (!h)
		return MHD_NO;
	mcp_server_stats(hs->mcp, &st);
	cJSON_AddStringToObject(h, "version", MCPSD_VERSION);
	cJSON_AddNumberToObject(h, "uptime_s",
	                        (double)(mono_s() - hs->started));
	cJSON_AddNumberToObject(h, "sessions", st.sessions);
	cJSON_AddNumberToObject(h, "streams_open", st.streams_open);
	cJSON_AddNumberToObject(h, "calls_running", st.calls_running);
	cJSON_AddNumberToObject(h, "calls_total", (double)st.calls_total);
	for (size_t i = 0; i < hs->n_health; i++)
		ok &= hs->health[i].fn(hs->health[i].data, h);
	cJSON_AddStringToObject(h, "status", ok ? "ok" : "degraded");
	text = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	if (!text)
		return MHD_NO;
	ret = respond_text(hs, conn, MHD_HTTP_OK, "application/json", text);
	cJSON_free(text);
	return ret;
}

/* ------------------------------------------------------------------ */
/* connection tracking (slow clients) */

static struct conn_track *track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void track_set(struct http_server *hs, struct conn_track *t,
                      enum phase ph, unsigned timeout_s)
{
	if (!t)
		return;
	pthread_mutex_lock(&hs->track_lock);
	if (t->phase != PHASE_KILLED) {
		t->phase = ph;
		t->deadline = mono_s() + (time_t)timeout_s;
	}
	pthread_mutex_unlock(&hs->track_lock);
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *hs = cls;
	struct conn_track *t;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		t = calloc(1, sizeof(*t));
		if (!t)
			return;
		t->fd = ci ? ci->connect_fd : -1;
		t->phase = PHASE_HEADERS;
		t->deadline = mono_s() + (time_t)hs->cfg->header_timeout_s;
		pthread_mutex_lock(&hs->track_lock);
		t->next = hs->tracks;
		if (hs->tracks)
			hs->tracks->prev = t;
		hs->tracks = t;
		pthread_mutex_unlock(&hs->track_lock);
		*socket_context = t;
		return;
	}
	t = *socket_context;
	if (!t)
		return;
	/* Unlink before MHD closes the fd, so it is never shut twice. */
	pthread_mutex_lock(&hs->track_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		hs->tracks = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&hs->track_lock);
	free(t);
	*socket_context = NULL;
}

static void *watchdog_main(void *arg)
{
	struct http_server *hs = arg;
	struct timespec dl;

	pthread_mutex_lock(&hs->track_lock);
	while (!hs->stopping) {
		time_t now = mono_s();

		for (struct conn_track *t = hs->tracks; t; t = t->next) {
			if ((t->phase == PHASE_HEADERS ||
			     t->phase == PHASE_BODY) &&
			    now > t->deadline && t->fd >= 0) {
				log_debug("closing a connection that was too "
				          "slow sending its %s",
				          t->phase == PHASE_BODY ? "body"
				                                 : "headers");
				shutdown(t->fd, SHUT_RDWR);
				t->phase = PHASE_KILLED;
			}
		}
		mono_deadline(&dl, 1000);
		pthread_cond_timedwait(&hs->track_cond, &hs->track_lock, &dl);
	}
	pthread_mutex_unlock(&hs->track_lock);
	return NULL;
}

/*
 * A refusal sent while the client was still sending its body: libmicrohttpd
 * closes the socket with unread bytes in it, the kernel answers with a
 * reset, and the client loses the response it has not read yet. Finish
 * our side and swallow what still arrives until the client closes or for
 * LINGER_MS, so the client reads "413: send less" instead of "connection
 * reset". A byte cap would bring the reset back on a fast link.
 */
static void linger_close(struct conn_track *t)
{
	char sink[16384];
	long long until, left;

	if (!t || t->fd < 0 || shutdown(t->fd, SHUT_WR) != 0)
		return;
	until = mono_ms() + LINGER_MS;
	for (;;) {
		struct pollfd p = {.fd = t->fd, .events = POLLIN};
		ssize_t n;

		left = until - mono_ms();
		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(t->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_server *hs = cls;
	struct request *rq = *req_cls;

	if (rq && rq->linger && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		linger_close(track_of(conn));
	if (rq) {
		pthread_mutex_lock(&hs->track_lock);
		hs->inflight--;
		pthread_cond_broadcast(&hs->track_cond);
		pthread_mutex_unlock(&hs->track_lock);
		buf_finish(&rq->body);
		free(rq);
		*req_cls = NULL;
	}
	/* Between requests a keep-alive connection owes us headers. */
	track_set(hs, track_of(conn), PHASE_HEADERS, hs->cfg->header_timeout_s);
}

/* ------------------------------------------------------------------ */
/* the request handler */

static enum route route_of(const char *url)
{
	if (strcmp(url, "/mcp") == 0 || strcmp(url, "/mcp/") == 0)
		return ROUTE_MCP;
	if (strcmp(url, "/healthz") == 0)
		return ROUTE_HEALTH;
	if (strcmp(url, "/sse") == 0)
		return ROUTE_SSE;
	if (strcmp(url, "/messages") == 0 || strcmp(url, "/messages/") == 0)
		return ROUTE_MESSAGES;
	if (strncmp(url, "/files/", 7) == 0)
		return ROUTE_FILES;
	if (strcmp(url, BAD_FILES_ESCAPE) == 0)
		return ROUTE_BAD_ESCAPE;
	if (strncmp(url, "/.well-known/", 13) == 0)
		return ROUTE_WELL_KNOWN;
	if (strcmp(url, "/") == 0)
		return ROUTE_ROOT;
	return ROUTE_NONE;
}

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

/*
 * Checks that need only the request head. Returns MHD_YES with
 * rq->answered set when a refusal was queued, MHD_YES otherwise.
 */
static enum MHD_Result check_head(struct http_server *hs,
                                  struct MHD_Connection *conn,
                                  struct request *rq, const char *method)
{
	const struct config *cfg = hs->cfg;
	struct hdr_count hc = {0};
	const char *h;
	enum auth_result ar;

	rq->answered = true;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &hc);
	/* Whatever is refused below, a body may be on its way. */
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                "Content-Length");
	rq->linger = hc.transfer_encoding || (h && strcmp(h, "0") != 0);
	if (hc.total > MAX_HEADER_COUNT)
		return respond_error(
		    hs, conn, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
		    "more than %d header fields; send fewer", MAX_HEADER_COUNT);
	if (hc.content_length > 1)
		return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
		                     "more than one Content-Length header; "
		                     "send exactly one");
	if (hc.content_length && hc.transfer_encoding)
		return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
		                     "conflicting Content-Length and "
		                     "Transfer-Encoding headers; send exactly "
		                     "one of them");
	/* RFC 9112: libmicrohttpd would check only the first one. */
	if (hc.host > 1)
		return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
		                     "more than one Host header; send exactly "
		                     "one");
	/*
	 * libmicrohttpd decodes only a lone "chunked" and reads any other
	 * coding until the client closes; RFC 9112 says refuse and close.
	 */
	if (hc.transfer_encoding > 1 ||
	    (hc.te && strcasecmp(hc.te, "chunked") != 0))
		return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
		                     "unsupported Transfer-Encoding; send "
		                     "'chunked' or a Content-Length");
	if (h) {
		uint64_t cl = 0;

		if (num_u64(h, UINT64_MAX, &cl) < 0)
			return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
			                     "invalid Content-Length");
		if (cl > cfg->max_body_bytes)
			return respond_error(
			    hs, conn, MHD_HTTP_CONTENT_TOO_LARGE,
			    "request body of %llu bytes is over the limit "
			    "of %zu bytes; send less (large files: split "
			    "them or raise MCP_MAX_BODY_BYTES)",
			    (unsigned long long)cl, cfg->max_body_bytes);
	}
	if (rq->route == ROUTE_HEALTH || rq->route == ROUTE_FILES ||
	    rq->route == ROUTE_WELL_KNOWN || rq->route == ROUTE_ROOT ||
	    rq->route == ROUTE_NONE || rq->route == ROUTE_BAD_ESCAPE) {
		rq->answered = false;
		return MHD_YES;
	}
	/* DNS rebinding: a page on another name reaching a local server. */
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
	if (!host_allowed(cfg, h))
		return respond_error(hs, conn, MHD_HTTP_FORBIDDEN,
		                     "Host '%.100s' is not allowed; add it to "
		                     "MCP_ALLOWED_HOSTS if this is intended",
		                     h ? h : "");
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
	if (h && !http_allowed(h, cfg->allowed_origins, true))
		return respond_error(hs, conn, MHD_HTTP_FORBIDDEN,
		                     "Origin '%.100s' is not allowed; add it "
		                     "to MCP_ALLOWED_ORIGINS if this is "
		                     "intended",
		                     h);
	if (strcmp(method, "OPTIONS") == 0) {
		rq->answered = false;
		return MHD_YES;
	}
	/* Wrong methods first: HTTP-first clients probe POST /sse. */
	if (rq->route == ROUTE_SSE && strcmp(method, "GET") != 0)
		return respond_405(hs, conn, "GET");
	if (rq->route == ROUTE_MESSAGES && strcmp(method, "POST") != 0)
		return respond_405(hs, conn, "POST");
	if (rq->route == ROUTE_MCP && strcmp(method, "GET") != 0 &&
	    strcmp(method, "POST") != 0 && strcmp(method, "DELETE") != 0)
		return respond_405(hs, conn, "GET, POST, DELETE");
	/*
	 * libmicrohttpd returns the first of several Authorization headers
	 * and a proxy may honour another: accept none of them.
	 */
	if (hc.authorization > 1 && !cfg->auth_none)
		return respond_error(hs, conn, MHD_HTTP_UNAUTHORIZED,
		                     "invalid credentials: more than one "
		                     "Authorization header; send exactly one");
	ar = auth_check(
	    cfg,
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
	    &rq->tenant);
	if (ar == AUTH_MISSING)
		return respond_error(hs, conn, MHD_HTTP_UNAUTHORIZED,
		                     "missing bearer token; send "
		                     "'Authorization: Bearer <token>'");
	if (ar == AUTH_INVALID) {
		log_info("rejected a request with an invalid token");
		return respond_error(hs, conn, MHD_HTTP_UNAUTHORIZED,
		                     "invalid bearer token; check the token "
		                     "configured in your client");
	}
	if (strcmp(method, "POST") == 0) {
		h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                "Content-Type");
		if (!http_media_type_is(h, "application/json"))
			return respond_error(
			    hs, conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
			    "Content-Type must be application/json, not "
			    "'%.80s'",
			    h ? h : "(none)");
		if (rq->route == ROUTE_MCP) {
			h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
			                                "Accept");
			if (!http_accepts(h, "application/json") ||
			    !http_accepts(h, "text/event-stream"))
				return respond_error(hs, conn,
				                     MHD_HTTP_NOT_ACCEPTABLE,
				                     "Accept must list both "
				                     "application/json and "
				                     "text/event-stream");
		}
	} else if (strcmp(method, "GET") == 0 &&
	           (rq->route == ROUTE_MCP || rq->route == ROUTE_SSE)) {
		h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                "Accept");
		if (!http_accepts(h, "text/event-stream"))
			return respond_error(hs, conn, MHD_HTTP_NOT_ACCEPTABLE,
			                     "Accept must list "
			                     "text/event-stream to open an "
			                     "event stream");
	}
	rq->answered = false;
	return MHD_YES;
}

static enum MHD_Result preflight(struct http_server *hs,
                                 struct MHD_Connection *conn,
                                 const char *methods)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    0, (void *)(uintptr_t) "", MHD_RESPMEM_PERSISTENT);

	if (!r)
		return MHD_NO;
	add_cors(hs, conn, r);
	MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
	MHD_add_response_header(r, "Access-Control-Allow-Headers",
	                        "Authorization, Content-Type, Accept, "
	                        "Mcp-Session-Id, MCP-Protocol-Version, "
	                        "Last-Event-ID");
	MHD_add_response_header(r, "Access-Control-Max-Age", "600");
	add_common_headers(r);
	return queue(conn, MHD_HTTP_NO_CONTENT, r);
}

static enum MHD_Result dispatch(struct http_server *hs,
                                struct MHD_Connection *conn, struct request *rq,
                                const char *url, const char *method)
{
	struct mcp_http_resp mr;
	struct mcp_http_req req = {
	    .tenant = rq->tenant,
	    .body = rq->body.data ? rq->body.data : "",
	    .body_len = rq->body.len,
	    .protocol_version = MHD_lookup_connection_value(
	        conn, MHD_HEADER_KIND, "MCP-Protocol-Version"),
	    .last_event_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                                 "Last-Event-ID"),
	};
	bool get = strcmp(method, "GET") == 0;
	bool head = strcmp(method, "HEAD") == 0;
	bool post = strcmp(method, "POST") == 0;

	switch (rq->route) {
	case ROUTE_HEALTH:
		if (!get && !head)
			return respond_405(hs, conn, "GET, HEAD");
		return serve_health(hs, conn);
	case ROUTE_FILES:
		if (!get && !head)
			return respond_405(hs, conn, "GET, HEAD");
		return serve_file(hs, conn, method, url + 7);
	case ROUTE_WELL_KNOWN:
		return respond_error(hs, conn, MHD_HTTP_NOT_FOUND,
		                     "no OAuth metadata: this server takes a "
		                     "static bearer token");
	case ROUTE_ROOT:
		if (!get && !head)
			return respond_405(hs, conn, "GET, HEAD");
		return respond_text(hs, conn, MHD_HTTP_OK,
		                    "text/plain; charset=utf-8",
		                    "mcp-sandboxd: an MCP server that runs "
		                    "code in sandboxes.\nMCP endpoint: /mcp "
		                    "(Streamable HTTP), /sse (HTTP+SSE). "
		                    "Health: /healthz\n");
	case ROUTE_NONE:
		return respond_error(hs, conn, MHD_HTTP_NOT_FOUND,
		                     "no such path; the MCP endpoint is /mcp");
	case ROUTE_BAD_ESCAPE:
		return respond_error(hs, conn, MHD_HTTP_BAD_REQUEST,
		                     "percent-escapes are not accepted in the "
		                     "/files/ prefix; use the URL as given");
	case ROUTE_MCP:
		if (strcmp(method, "OPTIONS") == 0)
			return preflight(hs, conn, "GET, POST, DELETE");
		req.session_id = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, "Mcp-Session-Id");
		if (post)
			mcp_http_post(hs->mcp, &req, &mr);
		else if (get)
			mcp_http_get(hs->mcp, &req, &mr);
		else if (strcmp(method, "DELETE") == 0)
			mcp_http_delete(hs->mcp, &req, &mr);
		else
			return respond_405(hs, conn, "GET, POST, DELETE");
		return respond_mcp(hs, conn, &mr);
	case ROUTE_SSE:
		if (strcmp(method, "OPTIONS") == 0)
			return preflight(hs, conn, "GET");
		if (!get)
			return respond_405(hs, conn, "GET");
		mcp_http_sse_open(hs->mcp, &req, "/messages", &mr);
		return respond_mcp(hs, conn, &mr);
	case ROUTE_MESSAGES:
		if (strcmp(method, "OPTIONS") == 0)
			return preflight(hs, conn, "POST");
		if (!post)
			return respond_405(hs, conn, "POST");
		req.session_id = MHD_lookup_connection_value(
		    conn, MHD_GET_ARGUMENT_KIND, "sessionId");
		mcp_http_sse_post(hs->mcp, &req, &mr);
		return respond_mcp(hs, conn, &mr);
	}
	return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
	struct http_server *hs = cls;
	struct request *rq = *req_cls;

	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		buf_init(&rq->body, hs->cfg->max_body_bytes);
		rq->route = route_of(url);
		*req_cls = rq;
		pthread_mutex_lock(&hs->track_lock);
		hs->inflight++;
		pthread_mutex_unlock(&hs->track_lock);
		/*
		 * Any method may carry a body (GET and DELETE too), so every
		 * request is on the body clock until its last callback.
		 */
		track_set(hs, track_of(conn), PHASE_BODY,
		          hs->cfg->body_timeout_s);
		return check_head(hs, conn, rq, method);
	}
	if (rq->answered) {
		/* Refused already: discard the body as it arrives. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (!rq->too_big && buf_append(&rq->body, upload, n) == 0)
			return MHD_YES;
		/*
		 * Over the limit (a chunked body, or one longer than its
		 * Content-Length said). libmicrohttpd 0.9 queues a response
		 * only before the body or after its end, so the rest is
		 * discarded to answer 413 then; past twice the limit the
		 * connection is cut instead.
		 */
		if (!rq->too_big) {
			rq->too_big = true;
			buf_finish(&rq->body);
		}
		rq->discarded += n;
		if (rq->discarded > hs->cfg->max_body_bytes) {
			log_info("cut a connection sending a body far over "
			         "the limit of %zu bytes",
			         hs->cfg->max_body_bytes);
			return MHD_NO;
		}
		return MHD_YES;
	}
	track_set(hs, track_of(conn), PHASE_RESPONDING, 0);
	rq->answered = true;
	rq->linger = false; /* the body was read to its end */
	if (rq->too_big)
		return respond_error(hs, conn, MHD_HTTP_CONTENT_TOO_LARGE,
		                     "request body is over the limit of %zu "
		                     "bytes; send less",
		                     hs->cfg->max_body_bytes);
	return dispatch(hs, conn, rq, url, method);
}

/* ------------------------------------------------------------------ */
/* lifecycle */

/*
 * libmicrohttpd decodes percent-escapes in the path before the handler
 * sees it. /files/ paths must reach the files hook still encoded, so they
 * are decoded exactly once, there, with the strict rules of fsname; a
 * second decoding would turn "%2520" into a space and let "%00" cut a name.
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	size_t n;

	if (strncmp(s, "/files/", 7) == 0)
		return strlen(s);
	n = MHD_http_unescape(s);
	/*
	 * "/%66iles/..." decodes to a /files/ path that would be decoded a
	 * second time by the files hook: mark it so it is refused instead.
	 */
	if (strncmp(s, "/files/", 7) == 0) {
		memcpy(s, BAD_FILES_ESCAPE, sizeof(BAD_FILES_ESCAPE));
		n = sizeof(BAD_FILES_ESCAPE) - 1;
	}
	return n;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	log_debug("libmicrohttpd: %s", msg);
}

static int open_listener(const struct config *cfg, unsigned *port, char *err,
                         size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL;
	char portstr[16];
	const char *host = cfg->listen_host[0] ? cfg->listen_host : NULL;
	int fd = -1, one = 1, zero = 0, rc;

	snprintf(portstr, sizeof(portstr), "%u", cfg->listen_port);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	hints.ai_family = host ? AF_UNSPEC : AF_INET6;
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0 && !host) {
		hints.ai_family = AF_INET;
		rc = getaddrinfo(host, portstr, &hints, &res);
	}
	if (rc != 0) {
		snprintf(err, errlen,
		         "MCP_HTTP_ADDR=%s: cannot resolve '%s': %s; use an IP "
		         "address, e.g. MCP_HTTP_ADDR=127.0.0.1:8080",
		         cfg->http_addr, host ? host : "", gai_strerror(rc));
		return -EINVAL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		            ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6 && !host)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
			           sizeof(zero));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 1024) == 0)
			break;
		rc = errno;
		close(fd);
		fd = -1;
		errno = rc;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "cannot listen on %s: %s%s",
		         cfg->http_addr, strerror(e),
		         e == EADDRINUSE ? "; another program uses the port: "
		                           "stop it or choose another port in "
		                           "MCP_HTTP_ADDR"
		                         : "");
		return -e;
	}
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			*port =
			    ntohs(ss.ss_family == AF_INET6
			              ? ((struct sockaddr_in6 *)&ss)->sin6_port
			              : ((struct sockaddr_in *)&ss)->sin_port);
	}
	return fd;
}

int http_server_create(const struct config *cfg, struct mcp_server *mcp,
                       struct http_server **out, char *err, size_t errlen)
{
	struct http_server *hs;
	int fd;

	*out = NULL;
	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	hs->cfg = cfg;
	hs->mcp = mcp;
	hs->started = mono_s();
	pthread_mutex_init(&hs->track_lock, NULL);
	mono_cond_init(&hs->track_cond);
	fd = open_listener(cfg, &hs->port, err, errlen);
	if (fd < 0) {
		pthread_mutex_destroy(&hs->track_lock);
		pthread_cond_destroy(&hs->track_cond);
		free(hs);
		return fd;
	}
	hs->listen_fd = fd;
	if (pthread_create(&hs->watchdog, NULL, watchdog_main, hs) != 0) {
		close(fd);
		pthread_mutex_destroy(&hs->track_lock);
		pthread_cond_destroy(&hs->track_cond);
		free(hs);
		snprintf(err, errlen, "cannot start a thread");
		return -EAGAIN;
	}
	/*
	 * poll(), not select(): select() cannot watch a descriptor past
	 * FD_SETSIZE (1024), and libmicrohttpd drops such connections at
	 * once, which would cap MCP_MAX_CONNECTIONS well below its range.
	 * The logger goes first so that option parsing logs through it.
	 */
	hs->daemon = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
	        MHD_USE_ERROR_LOG,
	    0, NULL, NULL, on_request, hs, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
	    hs, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
	    cfg->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)(cfg->max_header_bytes + 4096),
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, hs,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, hs,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, hs,
	    MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_END);
	if (!hs->daemon) {
		snprintf(err, errlen,
		         "libmicrohttpd failed to start on %s (see the log "
		         "with MCP_LOG_LEVEL=debug)",
		         cfg->http_addr);
		pthread_mutex_lock(&hs->track_lock);
		hs->stopping = true;
		pthread_cond_broadcast(&hs->track_cond);
		pthread_mutex_unlock(&hs->track_lock);
		pthread_join(hs->watchdog, NULL);
		close(fd);
		pthread_mutex_destroy(&hs->track_lock);
		pthread_cond_destroy(&hs->track_cond);
		free(hs);
		return -EIO;
	}
	*out = hs;
	return 0;
}

void http_server_set_files(struct http_server *hs, http_files_fn fn, void *data)
{
	hs->files = fn;
	hs->files_data = data;
}

void http_server_add_health(struct http_server *hs, http_health_fn fn,
                            void *data)
{
	if (hs->n_health < MAX_HEALTH_HOOKS) {
		hs->health[hs->n_health].fn = fn;
		hs->health[hs->n_health].data = data;
		hs->n_health++;
	}
}

unsigned http_server_port(const struct http_server *hs)
{
	return hs->port;
}

unsigned http_server_wait_idle(struct http_server *hs, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned left;

	mono_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&hs->track_lock);
	while (hs->inflight) {
		if (pthread_cond_timedwait(&hs->track_cond, &hs->track_lock,
		                           &dl) == ETIMEDOUT)
			break;
	}
	left = hs->inflight;
	pthread_mutex_unlock(&hs->track_lock);
	return left;
}

void http_server_destroy(struct http_server *hs)
{
	if (!hs)
		return;
	MHD_stop_daemon(hs->daemon);
	close(hs->listen_fd);
	pthread_mutex_lock(&hs->track_lock);
	hs->stopping = true;
	pthread_cond_broadcast(&hs->track_cond);
	pthread_mutex_unlock(&hs->track_lock);
	pthread_join(hs->watchdog, NULL);
	pthread_mutex_destroy(&hs->track_lock);
	pthread_cond_destroy(&hs->track_cond);
	free(hs);
}
