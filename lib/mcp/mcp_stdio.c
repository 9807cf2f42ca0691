/* SPDX-License-Identifier: MIT */
/*
 * mcp_stdio: newline-delimited JSON-RPC on stdin/stdout over one session
 * of the MCP core. See mcp_stdio.h.
 */
#include "mcp/mcp_stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp/mcp.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/mono.h"

#define READ_CHUNK 65536
#define WAIT_MS 250
/* The longest SSE event this transport reassembles (the core's own bound). */
#define EVENT_MAX (64u * 1024 * 1024)

struct mcp_stdio {
	struct mcp_server *srv;
	struct mcp_stdio_opts o;
	struct mcp_stream *stream;
	char session_id[80];
	pthread_t reader, writer;
	bool reader_started, writer_started;
	int wake[2]; /* self-pipe: stop the reader's poll */
	atomic_bool stopping;
	atomic_llong writer_deadline_ms; /* 0: none yet */
	pthread_mutex_t out_lock;
	bool out_broken;
};

/* Writes all of p, then a newline, as one message. Out lock held. */
static void out_line(struct mcp_stdio *t, const char *p, size_t n)
{
	const char nl = '\n';

	pthread_mutex_lock(&t->out_lock);
	for (int part = 0; part < 2 && !t->out_broken; part++) {
		const char *q = part ? &nl : p;
		size_t left = part ? 1 : n;

		while (left) {
			ssize_t w = write(t->o.out_fd, q, left);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				log_warn("stdio: writing to standard output");
				t->out_broken = true;
				break;
			}
			q += w;
			left -= (size_t)w;
		}
	}
	pthread_mutex_unlock(&t->out_lock);
}

/* A JSON-RPC error about a line the core never saw (id unknown: null). */
static void out_error(struct mcp_stdio *t, int code, const char *msg)
{
	char *s = buf_asprintf("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
	                       "{\"code\":%d,\"message\":\"%s\"}}",
	                       code, msg);

	if (s)
		out_line(t, s, strlen(s));
	free(s);
}

/*
 * One SSE event (without its blank line): the "data:" lines of a message
 * event go to stdout as one line. Other events (the endpoint) and comments
 * are the HTTP transport's business.
 */
static void out_event(struct mcp_stdio *t, char *ev, size_t n)
{
	struct buf data;
	bool message = true;
	char *p = ev, *end = ev + n;

	buf_init(&data, EVENT_MAX);
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (len >= 6 && strncmp(p, "event:", 6) == 0) {
			const char *v = p + 6;
			size_t vl = len - 6;

			if (vl && *v == ' ')
				v++, vl--;
			message = vl == 7 && strncmp(v, "message", 7) == 0;
		} else if (len >= 5 && strncmp(p, "data:", 5) == 0) {
			const char *v = p + 5;
			size_t vl = len - 5;

			if (vl && *v == ' ')
				v++, vl--;
			if ((data.len && buf_append(&data, "\n", 1) < 0) ||
			    buf_append(&data, v, vl) < 0) {
				log_warnx("stdio: an event over %u bytes was "
				          "dropped",
				          EVENT_MAX);
				buf_finish(&data);
				return;
			}
		}
		p += len + (nl ? 1 : 0);
	}
	if (message && data.len)
		out_line(t, data.data, data.len);
	buf_finish(&data);
}

/* Copies the session's events to stdout until the stream ends. */
static void *writer_main(void *arg)
{
	struct mcp_stdio *t = arg;
	struct buf acc;
	char *chunk = malloc(READ_CHUNK);

	buf_init(&acc, EVENT_MAX);
	while (chunk) {
		ssize_t n =
		    mcp_stream_read(t->stream, chunk, READ_CHUNK, WAIT_MS);
		long long dl = atomic_load(&t->writer_deadline_ms);

		if (n < 0)
			break;
		if (n == 0) {
			if (dl && mono_ms() >= dl)
				break;
			continue;
		}
		if (buf_append(&acc, chunk, (size_t)n) < 0) {
			log_warnx(
			    "stdio: an event over %u bytes; the session's "
			    "stream is abandoned",
			    EVENT_MAX);
			break;
		}
		for (;;) {
			char *sep = acc.len
			                ? memmem(acc.data, acc.len, "\n\n", 2)
			                : NULL;
			size_t ev;

			if (!sep)
				break;
			ev = (size_t)(sep - acc.data);
			out_event(t, acc.data, ev);
			buf_consume(&acc, ev + 2);
		}
	}
	free(chunk);
	buf_finish(&acc);
	return NULL;
}

/* Hands one line to the core as one POST of the legacy transport would. */
static void post_line(struct mcp_stdio *t, const char *line, size_t n)
{
	struct mcp_http_req req = {
	    .tenant = t->o.tenant,
	    .client = "stdio",
	    .session_id = t->session_id,
	    .body = line,
	    .body_len = n,
	};
	struct mcp_http_resp resp;

	mcp_http_sse_post(t->srv, &req, &resp);
	/* Refusals (a line that is not JSON-RPC, ...) come back as a body. */
	if (resp.status >= 400 && resp.body)
		out_line(t, resp.body, strlen(resp.body));
	else if (resp.status >= 400)
		out_error(t, -32603, "the server could not take this message");
	mcp_http_resp_finish(&resp);
}

/* Splits stdin into lines and posts each; on its end calls on_eof. */
static void *reader_main(void *arg)
{
	struct mcp_stdio *t = arg;
	struct buf line;
	char *chunk = malloc(READ_CHUNK);
	bool skipping = false; /* inside a line over the limit */
	size_t skipped = 0;
	bool eof = false;

	buf_init(&line, t->o.max_line);
	while (chunk && !atomic_load(&t->stopping)) {
		struct pollfd p[2] = {{t->o.in_fd, POLLIN, 0},
		                      {t->wake[0], POLLIN, 0}};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_warn("stdio: poll");
			break;
		}
		if (p[1].revents)
			break;
		n = read(t->o.in_fd, chunk, READ_CHUNK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			if (n < 0)
				log_warn("stdio: reading standard input");
			eof = true;
			break;
		}
		for (char *p0 = chunk, *end = chunk + n; p0 < end;) {
			char *nl = memchr(p0, '\n', (size_t)(end - p0));
			size_t len =
			    nl ? (size_t)(nl - p0) : (size_t)(end - p0);

			if (skipping) {
				skipped += len;
			} else if (buf_append(&line, p0, len) < 0) {
				skipping = true;
				skipped = line.len + len;
				buf_reset(&line);
			}
			p0 += len + (nl ? 1 : 0);
			if (!nl)
				break;
			if (skipping) {
				char msg[200];

				snprintf(
				    msg, sizeof(msg),
				    "a message of %zu bytes is over the "
				    "limit of %zu (MCP_MAX_BODY_BYTES); it "
				    "was not read",
				    skipped, t->o.max_line);
				out_error(t, -32600, msg);
				skipping = false;
				skipped = 0;
				continue;
			}
			while (line.len && (line.data[line.len - 1] == '\r' ||
			                    line.data[line.len - 1] == ' ' ||
			                    line.data[line.len - 1] == '\t'))
				line.len--;
			if (line.len)
				post_line(t, line.data, line.len);
			buf_reset(&line);
		}
	}
	/* A last message without a newline still counts. */
	if (eof && !skipping && line.len)
		post_line(t, line.data, line.len);
	free(chunk);
	buf_finish(&line);
	if (eof && t->o.on_eof)
		t->o.on_eof(t->o.arg);
	return NULL;
}

/* Reads the stream's first event, the endpoint, for the session id. */
static int read_session_id(struct mcp_stdio *t, char *err, size_t errlen)
{
	char first[512];
	size_t have = 0;
	const char *id, *end;
	long long dl = mono_ms() + 5000;

	while (have < sizeof(first) - 1 && !memmem(first, have, "\n\n", 2)) {
		ssize_t n = mcp_stream_read(t->stream, first + have,
		                            sizeof(first) - 1 - have, WAIT_MS);

		if (n < 0 || (n == 0 && mono_ms() >= dl))
			return errmsg_fail(-EIO, err, errlen,
			                   "the MCP session's stream ended "
			                   "before it started");
		have += (size_t)n;
	}
	first[have] = '\0';
	id = strstr(first, "sessionId=");
	if (!id)
		return errmsg_fail(-EPROTO, err, errlen,
		                   "the MCP session announced no id");
	id += strlen("sessionId=");
	end = id + strcspn(id, "\n");
	if ((size_t)(end - id) >= sizeof(t->session_id))
		return errmsg_fail(-EPROTO, err, errlen,
		                   "the MCP session's id is too long");
	memcpy(t->session_id, id, (size_t)(end - id));
	t->session_id[end - id] = '\0';
	return 0;
}

int mcp_stdio_start(struct mcp_server *srv, const struct mcp_stdio_opts *o,
                    struct mcp_stdio **out, char *err, size_t errlen)
{
	struct mcp_stdio *t = calloc(1, sizeof(*t));
	struct mcp_http_req req = {.tenant = o->tenant, .client = "stdio"};
	struct mcp_http_resp resp;
	int r;

	*out = NULL;
	if (!t)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	t->srv = srv;
	t->o = *o;
	t->wake[0] = t->wake[1] = -1;
	atomic_init(&t->stopping, false);
	atomic_init(&t->writer_deadline_ms, 0);
	pthread_mutex_init(&t->out_lock, NULL);
	if (pipe2(t->wake, O_CLOEXEC) < 0) {
		r = errmsg_fail(-errno, err, errlen, "pipe: %s",
		                strerror(errno));
		goto fail;
	}
	mcp_http_sse_open(srv, &req, "/stdio", &resp);
	if (resp.status != 200 || !resp.stream) {
		r = errmsg_fail(-EIO, err, errlen,
		                "the MCP core refused the session (%d): %s",
		                resp.status, resp.body ? resp.body : "");
		mcp_http_resp_finish(&resp);
		goto fail;
	}
	t->stream = resp.stream;
	resp.stream = NULL;
	mcp_http_resp_finish(&resp);
	r = read_session_id(t, err, errlen);
	if (r < 0)
		goto fail;
	r = -pthread_create(&t->writer, NULL, writer_main, t);
	if (r < 0) {
		r = errmsg_fail(r, err, errlen, "cannot start a thread");
		goto fail;
	}
	t->writer_started = true;
	r = -pthread_create(&t->reader, NULL, reader_main, t);
	if (r < 0) {
		r = errmsg_fail(r, err, errlen, "cannot start a thread");
		goto fail;
	}
	t->reader_started = true;
	*out = t;
	return 0;
fail:
	mcp_stdio_stop(t, 0);
	return r;
}

void mcp_stdio_stop(struct mcp_stdio *t, unsigned wait_ms)
{
	if (!t)
		return;
	atomic_store(&t->stopping, true);
	if (t->wake[1] >= 0 && write(t->wake[1], "x", 1) < 0)
		log_warn("stdio: waking the reader");
	if (t->reader_started)
		pthread_join(t->reader, NULL);
	atomic_store(&t->writer_deadline_ms, mono_ms() + (long long)wait_ms);
	if (t->writer_started)
		pthread_join(t->writer, NULL);
	if (t->stream)
		mcp_stream_release(t->stream);
	for (int i = 0; i < 2; i++)
		if (t->wake[i] >= 0)
			close(t->wake[i]);
	pthread_mutex_destroy(&t->out_lock);
	free(t);
}
