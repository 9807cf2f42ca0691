/* SPDX-License-Identifier: MIT */
/*
 * http: libmicrohttpd in thread-per-connection mode. Each request gets a
 * context when its request line arrives; the checks of its route's policy
 * run on its first callback, with only the head in, so a refused request
 * never has its body read: it is answered at once and its connection
 * closed after a lingering read capped in time and bytes. A watchdog thread
 * enforces the header and body deadlines that libmicrohttpd lacks (it only
 * knows an idle timeout, which a client sending one byte at a time never
 * trips) by shutting the socket down, which the connection's thread then
 * notices. Routing and the policy live in http_route.c, answers in
 * http_request.c.
 */
#include "http/http.h"

#include <arpa/inet.h>
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
#include <time.h>
#include <unistd.h>

#include "http/http_internal.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/netaddr.h"
#include "util/stats.h"

#define THREAD_STACK (512 * 1024)
/* X-Forwarded-For headers read; more and none is believed. */
#define HTTP_XFF_HEADERS_MAX 16

/*
 * The lingering read after a refusal whose body is still coming: at most
 * this long, and at most this many body bytes read and thrown away.
 */
#define LINGER_MS 2000
#define LINGER_BYTES (1024 * 1024)
/* The receive buffer while lingering: no room for more to pile up. */
#define LINGER_RCVBUF (64 * 1024)

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
	const char *uri; /* the current request line's target (unescape) */
};

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
 * A refusal sent while the client was still sending its body. Closing the
 * socket with unread bytes in it makes the kernel answer with a reset, and
 * a client that is still writing then fails on its next write, usually
 * before it has read the answer waiting in its buffer (undici's fetch
 * reports EPIPE instead of the 413). So our side is finished first (FIN
 * after the answer) and what still arrives is read and dropped, until the
 * client closes or LINGER_BYTES were dropped. Past that nothing more is
 * read: the client's writes stall on a closed window, which leaves it free
 * to read the answer, until it goes away or LINGER_MS have passed. A
 * client streaming a huge body thus reads "401: send a token" and sees the
 * connection close, having sent LINGER_BYTES and what socket buffers hold;
 * a client of any kind costs this thread at most LINGER_MS.
 */
static void linger_close(struct conn_track *t)
{
	char sink[16384];
	int rcvbuf = LINGER_RCVBUF;
	size_t dropped = 0;
	long long until, left;

	if (!t || t->fd < 0 || shutdown(t->fd, SHUT_WR) != 0)
		return;
	/* Stops the kernel from growing the window for what is dropped. */
	setsockopt(t->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	until = mono_ms() + LINGER_MS;
	for (;;) {
		bool capped = dropped >= LINGER_BYTES;
		/* Capped: poll only for a reset or an error. */
		struct pollfd p = {.fd = t->fd, .events = capped ? 0 : POLLIN};
		ssize_t n;

		left = until - mono_ms();
		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (capped && (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
			break;
		if (capped || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(t->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (n > 0)
			dropped += (size_t)n;
	}
	if (dropped >= LINGER_BYTES)
		log_debug("closed a refused connection after dropping %zu "
		          "bytes of its body",
		          dropped);
}

/* ------------------------------------------------------------------ */
/* requests */

/*
 * The request line has arrived: its target as sent (before libmicrohttpd
 * splits and decodes it) is the only place the raw query string exists.
 * What this returns is the request's context in later callbacks.
 */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_server *hs = cls;
	struct http_request *rq = calloc(1, sizeof(*rq));
	struct conn_track *t = track_of(conn);
	const char *q;

	if (t)
		t->uri = uri;
	if (!rq)
		return NULL;
	rq->hs = hs;
	rq->conn = conn;
	rq->raw_uri = strdup(uri ? uri : "");
	if (!rq->raw_uri) {
		free(rq);
		return NULL;
	}
	q = strchr(rq->raw_uri, '?');
	rq->query = q ? q + 1 : "";
	pthread_mutex_lock(&hs->track_lock);
	hs->inflight++;
	rq->counted = true;
	pthread_mutex_unlock(&hs->track_lock);
	return rq;
}

/* Collects the values of X-Forwarded-For headers, in order. */
struct xff_values {
	const char *v[HTTP_XFF_HEADERS_MAX];
	size_t n;
	bool over;
};

static enum MHD_Result collect_xff(void *cls, enum MHD_ValueKind kind,
                                   const char *key, const char *value)
{
	struct xff_values *x = cls;

	(void)kind;
	if (!key || strcasecmp(key, "X-Forwarded-For") != 0)
		return MHD_YES;
	if (x->n == HTTP_XFF_HEADERS_MAX) {
		x->over = true;
		return MHD_NO;
	}
	x->v[x->n++] = value ? value : "";
	return MHD_YES;
}

static enum MHD_Result count_cf(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
	(void)kind;
	(void)value;
	if (key && strcasecmp(key, "CF-Connecting-IP") == 0)
		(*(unsigned *)cls)++;
	return MHD_YES;
}

/*
 * The socket peer, and the client: the peer itself, or, when the peer is
 * one of MCP_TRUSTED_PROXIES, the address its CF-Connecting-IP or
 * X-Forwarded-For header names (netaddr.h says how; which of the two may
 * is MCP_TRUSTED_PROXY_HEADER). A CF-Connecting-IP sent twice is not
 * believed; neither are more than HTTP_XFF_HEADERS_MAX X-Forwarded-For.
 */
static void set_peer(struct http_request *rq)
{
	const struct config *cfg = rq->hs->cfg;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
	    rq->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	struct xff_values xff = {.n = 0};
	const char *cf = NULL;
	unsigned n_cf = 0;
	enum netaddr_from from;

	rq->peer[0] = '\0';
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		          rq->peer, sizeof(rq->peer));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
		          &((const struct sockaddr_in6 *)sa)->sin6_addr,
		          rq->peer, sizeof(rq->peer));
	snprintf(rq->client, sizeof(rq->client), "%s", rq->peer);
	if (cfg->n_trusted_proxies == 0)
		return;
	/* MCP_TRUSTED_PROXY_HEADER: which of the two may name the client. */
	if (strcmp(cfg->trusted_proxy_header, "x-forwarded-for") != 0) {
		MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, count_cf,
		                          &n_cf);
		if (n_cf == 1)
			cf = http_request_header(rq, "CF-Connecting-IP");
	}
	if (strcmp(cfg->trusted_proxy_header, "cf-connecting-ip") != 0)
		MHD_get_connection_values(rq->conn, MHD_HEADER_KIND,
		                          collect_xff, &xff);
	from = netaddr_client(cfg->trusted_proxies, cfg->n_trusted_proxies,
	                      rq->peer, cf, xff.v, xff.over ? 0 : xff.n,
	                      rq->client, sizeof(rq->client));
	if (from == NETADDR_FROM_PEER && !rq->client[0])
		snprintf(rq->client, sizeof(rq->client), "%s", rq->peer);
	if (from == NETADDR_FROM_PROXY && (cf || xff.n))
		log_debug("trusted proxy %s sent no usable client address "
		          "(CF-Connecting-IP or X-Forwarded-For); counting the "
		          "request under %s",
		          rq->peer, rq->client);
}

/* The first callback: only the head is in. */
static enum MHD_Result on_head(struct http_server *hs, struct http_request *rq,
                               const char *url, const char *method)
{
	rq->started = true;
	rq->url = url;
	rq->method = method;
	set_peer(rq);
	/*
	 * Any method may carry a body (GET and DELETE too), so every
	 * request is on the body clock until its last callback.
	 */
	track_set(hs, track_of(rq->conn), PHASE_BODY, hs->cfg->body_timeout_s);
	if (http_route_head(rq)) {
		buf_init(&rq->body, http_route_body_limit(rq));
		return MHD_YES;
	}
	/*
	 * Refused, or answered from the head. libmicrohttpd 0.9 reads no
	 * body and closes the connection after an answer queued now: right
	 * when a body is on its way, wasteful when none is, so then the
	 * answer waits for the (immediate) end-of-request callback and the
	 * connection stays open for the next request.
	 */
	if (rq->linger)
		return http_send(rq);
	rq->ready = true;
	return MHD_YES;
}

/* A piece of the body. */
static enum MHD_Result on_body(struct http_request *rq, const char *upload,
                               size_t n)
{
	if (!rq->too_big && buf_append(&rq->body, upload, n) == 0)
		return MHD_YES;
	/*
	 * Over the limit (a chunked body, or one longer than its
	 * Content-Length said). libmicrohttpd 0.9 queues a response only
	 * before the body or after its end, so the rest is discarded to
	 * answer 413 then; past twice the limit the connection is cut.
	 */
	if (!rq->too_big) {
		rq->too_big = true;
		buf_finish(&rq->body);
	}
	rq->discarded += n;
	if (rq->discarded > http_route_body_limit(rq)) {
		log_info("cut a connection sending a body far over the limit "
		         "of %zu bytes",
		         http_route_body_limit(rq));
		return MHD_NO;
	}
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
	struct http_server *hs = cls;
	struct http_request *rq = *req_cls;
	size_t n;

	(void)version;
	if (!rq)
		return MHD_NO; /* out of memory when the request line came */
	rq->conn = conn;
	if (!rq->started)
		return on_head(hs, rq, url, method);
	if (rq->answered) {
		/* Refused already: libmicrohttpd reads no more of it. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		n = *upload_size;
		*upload_size = 0;
		return on_body(rq, upload, n);
	}
	track_set(hs, track_of(conn), PHASE_RESPONDING, 0);
	rq->linger = false; /* the body was read to its end */
	if (rq->ready)
		return http_send(rq);
	if (rq->too_big)
		(void)http_reply_error(rq, MHD_HTTP_CONTENT_TOO_LARGE,
		                       "request body is over the limit of %zu "
		                       "bytes; send less",
		                       http_route_body_limit(rq));
	else
		http_route_dispatch(rq);
	return http_send(rq);
}

/* Counts a finished request by its route's path and status (stats.h). */
static void http_count(struct http_server *hs, const struct http_request *rq)
{
	char status[8];
	const char *const labels[] = {rq->route ? rq->route->path : "none",
	                              status, NULL};

	if (!hs->m_requests)
		return;
	snprintf(status, sizeof(status), "%u", rq->status);
	stats_add(hs->m_requests, labels, 1);
}

void http_server_set_stats(struct http_server *hs, struct stats *s)
{
	static const char *const labels[] = {"route", "status", NULL};

	hs->stats = s;
	hs->m_requests =
	    stats_counter(s, "mcpsd_http_requests_total",
	                  "HTTP requests by route and status", labels);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http_server *hs = cls;
	struct http_request *rq = *req_cls;
	struct conn_track *t = track_of(conn);

	if (rq && rq->linger && rq->answered &&
	    toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		linger_close(t);
	if (rq) {
		http_count(hs, rq);
		if (rq->counted) {
			pthread_mutex_lock(&hs->track_lock);
			hs->inflight--;
			pthread_cond_broadcast(&hs->track_cond);
			pthread_mutex_unlock(&hs->track_lock);
		}
		http_request_finish(rq);
		free(rq);
		*req_cls = NULL;
	}
	if (t)
		t->uri = NULL;
	/* Between requests a keep-alive connection owes us headers. */
	track_set(hs, t, PHASE_HEADERS, hs->cfg->header_timeout_s);
}

/* ------------------------------------------------------------------ */
/* lifecycle */

/*
 * libmicrohttpd decodes percent-escapes in the path and the query before
 * the handler sees them. /files/ paths must reach the files hook still
 * encoded, so they are decoded exactly once, there, with the strict rules
 * of fsname; a second decoding would turn "%2520" into a space and let
 * "%00" cut a name. Query keys and values are decoded as usual: the path
 * is told apart by being the string on_uri saw.
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	struct conn_track *t = track_of(conn);
	size_t n;

	(void)cls;
	if (t ? s != t->uri : s[0] != '/')
		return MHD_http_unescape(s);
	if (strncmp(s, "/files/", 7) == 0)
		return strlen(s);
	n = MHD_http_unescape(s);
	/*
	 * "/%66iles/..." decodes to a /files/ path that would be decoded a
	 * second time by the files hook: mark it so it is refused instead.
	 */
	if (strncmp(s, "/files/", 7) == 0) {
		memcpy(s, HTTP_BAD_FILES_ESCAPE, sizeof(HTTP_BAD_FILES_ESCAPE));
		n = sizeof(HTTP_BAD_FILES_ESCAPE) - 1;
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

/* Frees a server that is not serving. */
static void free_unstarted(struct http_server *hs)
{
	if (hs->watchdog_started) {
		pthread_mutex_lock(&hs->track_lock);
		hs->stopping = true;
		pthread_cond_broadcast(&hs->track_cond);
		pthread_mutex_unlock(&hs->track_lock);
		pthread_join(hs->watchdog, NULL);
	}
	if (hs->listen_fd >= 0)
		close(hs->listen_fd);
	pthread_mutex_destroy(&hs->track_lock);
	pthread_cond_destroy(&hs->track_cond);
	free(hs);
}

int http_server_bind(const struct config *cfg, struct mcp_server *mcp,
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
	hs->listen_fd = -1;
	hs->started = mono_s();
	pthread_mutex_init(&hs->track_lock, NULL);
	mono_cond_init(&hs->track_cond);
	fd = open_listener(cfg, &hs->port, err, errlen);
	if (fd < 0) {
		free_unstarted(hs);
		return fd;
	}
	hs->listen_fd = fd;
	*out = hs;
	return 0;
}

int http_server_start(struct http_server *hs, char *err, size_t errlen)
{
	const struct config *cfg = hs->cfg;

	if (hs->daemon)
		return 0;
	if (!hs->watchdog_started) {
		if (pthread_create(&hs->watchdog, NULL, watchdog_main, hs) !=
		    0) {
			snprintf(err, errlen, "cannot start a thread");
			return -EAGAIN;
		}
		hs->watchdog_started = true;
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
	    hs, MHD_OPTION_LISTEN_SOCKET, hs->listen_fd,
	    MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
	    MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)(cfg->max_header_bytes + 4096),
	    MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, hs,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, hs,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, hs,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, hs,
	    MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_END);
	if (!hs->daemon) {
		snprintf(err, errlen,
		         "libmicrohttpd failed to start on %s (see the log "
		         "with MCP_LOG_LEVEL=debug)",
		         cfg->http_addr);
		return -EIO;
	}
	if (!cfg->metrics_token[0] && cfg->public_remote)
		log_warnx("/metrics is closed: PUBLIC_BASE_URL %s is not "
		          "loopback, so it needs METRICS_TOKEN (set one to "
		          "scrape)",
		          cfg->public_base_url);
	return 0;
}

int http_server_create(const struct config *cfg, struct mcp_server *mcp,
                       struct http_server **out, char *err, size_t errlen)
{
	int r = http_server_bind(cfg, mcp, out, err, errlen);

	if (r < 0)
		return r;
	r = http_server_start(*out, err, errlen);
	if (r < 0) {
		free_unstarted(*out);
		*out = NULL;
	}
	return r;
}

void http_server_set_files(struct http_server *hs, http_files_fn fn, void *data)
{
	hs->files = fn;
	hs->files_data = data;
}

void http_server_add_health(struct http_server *hs, http_health_fn fn,
                            void *data)
{
	if (hs->n_health < HTTP_MAX_HEALTH_HOOKS) {
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
	if (hs->daemon)
		MHD_stop_daemon(hs->daemon);
	free_unstarted(hs);
}
