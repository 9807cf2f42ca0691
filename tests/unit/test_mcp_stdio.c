/* SPDX-License-Identifier: MIT */
/*
 * test_mcp_stdio: the stdio transport (mcp/mcp_stdio.c) driven over two
 * socket pairs, as a local client drives `mcp-sandboxd --stdio`: one
 * message a line in, one a line out, on the real MCP core. Covered: the
 * handshake and a ping, CRLF and blank lines, a line that is not JSON, a
 * line over the limit (answered, and the next line still read), a last
 * message without a newline, and on_eof called once at the end of input.
 * Run one case with `test_mcp_stdio CASE` (`--list` names them).
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "mcp/mcp_stdio.h"
#include "tap.h"
#include "util/log.h"
#include "util/mono.h"

/* One transport and the client's ends of its input and output. */
struct client {
	struct mcp_server *srv;
	struct mcp_stdio *t;
	int in, out; /* we write in, read out */
	char buf[65536];
	size_t len;
	atomic_int eofs;
};

static struct config cfg;

static void on_eof(void *arg)
{
	struct client *c = arg;

	atomic_fetch_add(&c->eofs, 1);
}

static int client_open(struct client *c, size_t max_line)
{
	int in[2], out[2];
	char err[256] = "";
	struct mcp_stdio_opts o = {.tenant = "stdio-test",
	                           .max_line = max_line,
	                           .on_eof = on_eof,
	                           .arg = c};

	memset(c, 0, sizeof(*c));
	c->srv = mcp_server_create(&cfg);
	if (!c->srv || socketpair(AF_UNIX, SOCK_STREAM, 0, in) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, out) < 0)
		return -ENOMEM;
	o.in_fd = in[0];
	o.out_fd = out[1];
	c->in = in[1];
	c->out = out[0];
	if (mcp_stdio_start(c->srv, &o, &c->t, err, sizeof(err)) < 0) {
		printf("# mcp_stdio_start: %s\n", err);
		return -EIO;
	}
	return 0;
}

static void client_close(struct client *c)
{
	if (c->in >= 0)
		close(c->in);
	mcp_server_close_sessions(c->srv);
	mcp_stdio_stop(c->t, 2000);
	mcp_server_destroy(c->srv);
	close(c->out);
}

static void client_send(struct client *c, const char *text)
{
	size_t n = strlen(text);

	if (write(c->in, text, n) != (ssize_t)n)
		printf("# short write to the transport\n");
}

/* The next line the transport wrote, parsed; NULL after 5 s. Caller
 * deletes. */
static cJSON *client_line(struct client *c)
{
	long long end = mono_ms() + 5000;

	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		struct pollfd p = {c->out, POLLIN, 0};
		ssize_t n;

		if (nl) {
			cJSON *j;

			*nl = '\0';
			j = cJSON_Parse(c->buf);
			if (!j)
				printf("# not JSON: %.200s\n", c->buf);
			c->len -= (size_t)(nl + 1 - c->buf);
			memmove(c->buf, nl + 1, c->len);
			return j;
		}
		if (mono_ms() >= end || c->len == sizeof(c->buf) ||
		    poll(&p, 1, 100) < 0)
			return NULL;
		if (!(p.revents & POLLIN))
			continue;
		n = read(c->out, c->buf + c->len, sizeof(c->buf) - c->len);
		if (n <= 0)
			return NULL;
		c->len += (size_t)n;
	}
}

/* The number of on_eof calls once there is one (2 s at most). */
static int wait_eof(struct client *c)
{
	for (long long end = mono_ms() + 2000;
	     !atomic_load(&c->eofs) && mono_ms() < end;)
		poll(NULL, 0, 10);
	return atomic_load(&c->eofs);
}

static int id_of(const cJSON *j)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");

	return cJSON_IsNumber(id) ? id->valueint : -1;
}

static int error_code(const cJSON *j)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "error"), "code");

	return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const char *error_message(const cJSON *j)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "error"), "message");

	return cJSON_IsString(m) ? m->valuestring : "";
}

#define INIT                                                                   \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"  \
	"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"             \
	"\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

static void test_handshake(void)
{
	struct client c;
	cJSON *j;
	const cJSON *v;

	if (client_open(&c, 4096) < 0) {
		ok(0, "handshake: the transport starts");
		return;
	}
	client_send(&c, INIT "\n");
	j = client_line(&c);
	v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "result"), "protocolVersion");
	is_int(id_of(j), 1, "handshake: initialize answered on one line");
	ok(cJSON_IsString(v), "handshake: with a protocol version");
	cJSON_Delete(j);
	client_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":"
	                "\"notifications/initialized\"}\n"
	                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
	j = client_line(&c);
	is_int(id_of(j), 2,
	       "handshake: the notification has no answer, the "
	       "ping has");
	ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "result")),
	   "handshake: ping's result is an object");
	cJSON_Delete(j);
	close(c.in);
	c.in = -1;
	is_int(wait_eof(&c), 1, "handshake: on_eof once when input ends");
	client_close(&c);
}

static void test_line_endings(void)
{
	struct client c;
	cJSON *j;

	if (client_open(&c, 4096) < 0) {
		ok(0, "line endings: the transport starts");
		return;
	}
	client_send(&c, INIT "\r\n\n   \n");
	client_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,");
	client_send(&c, "\"method\":\"ping\"} \t\r\n");
	j = client_line(&c);
	is_int(id_of(j), 1, "line endings: CRLF taken");
	cJSON_Delete(j);
	j = client_line(&c);
	is_int(id_of(j), 3,
	       "line endings: blank lines skipped, a line in two "
	       "writes joined, trailing blanks cut");
	cJSON_Delete(j);
	client_close(&c);
}

static void test_bad_lines(void)
{
	struct client c;
	char big[6000];
	cJSON *j;

	if (client_open(&c, 4096) < 0) {
		ok(0, "bad lines: the transport starts");
		return;
	}
	client_send(&c, INIT "\n");
	cJSON_Delete(client_line(&c));
	client_send(&c, "this is not json\n");
	j = client_line(&c);
	is_int(error_code(j), -32700, "bad lines: not JSON is a parse error");
	cJSON_Delete(j);
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	if (write(c.in, big, sizeof(big)) != (ssize_t)sizeof(big))
		printf("# short write\n");
	j = client_line(&c);
	is_int(error_code(j), -32600,
	       "bad lines: a line over the limit is "
	       "refused");
	ok(strstr(error_message(j), "over the limit of 4096") != NULL,
	   "bad lines: saying the limit (%s)", error_message(j));
	cJSON_Delete(j);
	client_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\n");
	j = client_line(&c);
	is_int(id_of(j), 4, "bad lines: the next line is read");
	cJSON_Delete(j);
	client_close(&c);
}

static void test_last_line(void)
{
	struct client c;
	cJSON *j;

	if (client_open(&c, 4096) < 0) {
		ok(0, "last line: the transport starts");
		return;
	}
	client_send(&c, INIT "\n");
	cJSON_Delete(client_line(&c));
	client_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}");
	shutdown(c.in, SHUT_WR);
	j = client_line(&c);
	is_int(id_of(j), 5,
	       "last line: a message without a newline at the "
	       "end of input is read");
	cJSON_Delete(j);
	is_int(wait_eof(&c), 1, "last line: on_eof when input ends");
	client_close(&c);
	is_int(atomic_load(&c.eofs), 1, "last line: and only once");
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"handshake", test_handshake},
	    {"line-endings", test_line_endings},
	    {"bad-lines", test_bad_lines},
	    {"last-line", test_last_line},
	};

	log_set_level(LOG_LEVEL_ERROR);
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_json_depth = 64;
	cfg.keepalive_s = 5;
	cfg.session_idle_s = 3600;
	cfg.max_sessions_per_tenant = 64;
	cfg.max_inflight_per_session = 8;
	return tap_run_cases(argc, argv, cases,
	                     sizeof(cases) / sizeof(cases[0]));
}
