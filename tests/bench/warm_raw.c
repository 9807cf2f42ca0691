// SPDX-License-Identifier: MIT
/*
 * warm_raw: a raw keep-alive HTTP client for the daemon's warm path, without
 * the MCP SDK, so that what it measures is the daemon and the agent. Each of
 * -c clients (a thread each) opens one TCP connection, sends initialize and
 * notifications/initialized, then tools/call run_code of the given code in its
 * own conversation, -n times after -w warm-up calls, on that one connection.
 * It prints one JSON line: call-to-result percentiles, the run's duration
 * (the daemon's timer around the agent's round trip, to the microsecond from
 * the result's _meta, see duration_of) and the call minus it,
 * and calls per second over all clients, from when every client has done
 * its warm-up (its conversation's box made) to the end (calls_per_s_with_
 * warmup: the same over everything). With --pid, also the daemon's CPU time
 * per measured call (user + system from /proc/PID/stat over the measured
 * calls; the clock ticks average out over many calls): the daemon's own
 * work per call, whatever the agent's round trip is.
 *
 * Usage: warm_raw -u http://127.0.0.1:PORT/mcp -t TOKEN [-c 16] [-n 200]
 *                 [-w 3] [-l python] [-e 'print(1)'] [-p conversation-prefix]
 *                 [--ping] [--pid DAEMON_PID]
 * The token may come from $MCPSD_TOKEN instead of -t. Each thread owns its
 * socket and buffers; the shared results are written to per-thread slots
 * and read after the threads are joined. A bench tool: errors go to stderr
 * and make it exit 1, nothing asserts on timing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RESP_MAX (1 << 20)

struct opts {
	char host[64];
	int port;
	char path[128];
	const char *token;
	const char *lang;
	const char *code;
	const char *prefix;
	int clients, calls, warmup;
	bool ping;
	int pid;
};

struct client {
	const struct opts *o;
	int idx, fd;
	char sid[160], proto[40];
	char *buf;   /* response buffer, RESP_MAX */
	double *ms;  /* per measured call */
	double *dur; /* duration_ms per measured call (-1: none) */
	int fails;
	bool arrived; /* at the start of the measured calls */
	char err[256];
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Copies header name's value (case-insensitive) from hdr into out. */
static bool header(const char *hdr, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = hdr; p && *p; p = strstr(p, "\r\n")) {
		if (p[0] == '\r')
			p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ')
				v++;
			size_t i = 0;
			while (v[i] && v[i] != '\r' && i + 1 < len) {
				out[i] = v[i];
				i++;
			}
			out[i] = 0;
			return true;
		}
	}
	return false;
}

/*
 * Sends one POST and reads the whole answer (Content-Length or chunked,
 * the body of a text/event-stream included) into c->buf. Returns the body
 * or NULL.
 */
static const char *post(struct client *c, const char *body)
{
	char req[8192];
	int n = snprintf(req, sizeof(req),
	                 "POST %s HTTP/1.1\r\nHost: %s:%d\r\n"
	                 "Authorization: Bearer %s\r\n"
	                 "Content-Type: application/json\r\n"
	                 "Accept: application/json, text/event-stream\r\n"
	                 "%s%s%s%s%s%s"
	                 "Content-Length: %zu\r\n\r\n%s",
	                 c->o->path, c->o->host, c->o->port, c->o->token,
	                 c->sid[0] ? "Mcp-Session-Id: " : "", c->sid,
	                 c->sid[0] ? "\r\n" : "",
	                 c->proto[0] ? "MCP-Protocol-Version: " : "", c->proto,
	                 c->proto[0] ? "\r\n" : "", strlen(body), body);
	if (n < 0 || (size_t)n >= sizeof(req) ||
	    write_all(c->fd, req, (size_t)n)) {
		snprintf(c->err, sizeof(c->err), "sending a request failed");
		return NULL;
	}
	size_t have = 0;
	char *hend = NULL;
	long clen = -1;
	bool chunked = false;
	for (;;) {
		if (have + 1 >= RESP_MAX) {
			snprintf(c->err, sizeof(c->err), "answer over %d bytes",
			         RESP_MAX);
			return NULL;
		}
		ssize_t r = read(c->fd, c->buf + have, RESP_MAX - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(c->err, sizeof(c->err),
			         "connection closed after %zu bytes", have);
			return NULL;
		}
		have += (size_t)r;
		c->buf[have] = 0;
		if (!hend) {
			hend = strstr(c->buf, "\r\n\r\n");
			if (!hend)
				continue;
			*hend = 0;
			char v[64];
			if (header(c->buf, "Content-Length", v, sizeof(v)))
				clen = strtol(v, NULL, 10);
			if (header(c->buf, "Transfer-Encoding", v, sizeof(v)) &&
			    strstr(v, "chunked"))
				chunked = true;
			if (!c->sid[0])
				header(c->buf, "Mcp-Session-Id", c->sid,
				       sizeof(c->sid));
			*hend = '\r';
		}
		char *body0 = hend + 4;
		size_t blen = have - (size_t)(body0 - c->buf);
		if (clen >= 0 && blen >= (size_t)clen) {
			body0[clen] = 0;
			return body0;
		}
		if (chunked && blen >= 5 &&
		    memcmp(c->buf + have - 5, "0\r\n\r\n", 5) == 0) {
			/* Undo the chunk framing in place. */
			char *in = body0, *out = body0;
			for (;;) {
				long sz = strtol(in, &in, 16);
				in = strstr(in, "\r\n") + 2;
				if (sz <= 0)
					break;
				memmove(out, in, (size_t)sz);
				out += sz;
				in += sz + 2;
			}
			*out = 0;
			return body0;
		}
		if (clen < 0 && !chunked && blen == 0 &&
		    strstr(c->buf, " 202 "))
			return body0;
	}
}

static int connect_to(struct client *c)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)c->o->port)};
	int one = 1;
	if (c->fd < 0 || inet_pton(AF_INET, c->o->host, &a.sin_addr) != 1 ||
	    connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		snprintf(c->err, sizeof(c->err), "connecting to %s:%d: %s",
		         c->o->host, c->o->port, strerror(errno));
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/*
 * The agent's round trip of a run_code result in ms: the microseconds of
 * _meta["mcp-sandboxd/timing"].run_us when the daemon gives them (a warm
 * run), else duration_ms (whole milliseconds: a round trip under one would
 * count as the daemon's own time); -1 when neither is there.
 */
static double duration_of(const char *body)
{
	const char *t = strstr(body, "\"mcp-sandboxd/timing\":");
	const char *p = t ? strstr(t, "\"run_us\":") : NULL;

	if (p)
		return strtod(p + 9, NULL) / 1000.0;
	p = strstr(body, "\"duration_ms\":");
	return p ? strtod(p + 14, NULL) : -1;
}

/*
 * The start of the measured calls: every client arrives after its warm-up
 * (the conversation's box made, the first calls done) or when it gave up;
 * the main thread starts the clock and the CPU count once all have, then
 * lets them go.
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int ready;
	bool go;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

static void gate_arrive(struct client *c, bool wait)
{
	if (c->arrived)
		return;
	c->arrived = true;
	pthread_mutex_lock(&gate.mu);
	gate.ready++;
	pthread_cond_broadcast(&gate.cond);
	while (wait && !gate.go)
		pthread_cond_wait(&gate.cond, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

static void gate_open(int clients)
{
	pthread_mutex_lock(&gate.mu);
	while (gate.ready < clients)
		pthread_cond_wait(&gate.cond, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

static void gate_go(void)
{
	pthread_mutex_lock(&gate.mu);
	gate.go = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.mu);
}

static void *client_run(struct client *c);

static void *client_main(void *arg)
{
	struct client *c = arg;

	client_run(c);
	gate_arrive(c, false); /* gave up before the measured calls */
	return NULL;
}

static void *client_run(struct client *c)
{
	const struct opts *o = c->o;
	char body[4096];
	if (connect_to(c))
		return NULL;
	const char *r = post(
	    c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
	       "\"params\":"
	       "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	       "\"clientInfo\":{\"name\":\"warm_raw\",\"version\":\"1\"}}}");
	const char *pv = r ? strstr(r, "\"protocolVersion\":\"") : NULL;
	if (!pv || !c->sid[0]) {
		snprintf(c->err, sizeof(c->err), "initialize failed: %.160s",
		         r ? r : c->err);
		return NULL;
	}
	sscanf(pv + 19, "%39[^\"]", c->proto);
	if (!post(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
	             "initialized\"}"))
		return NULL;
	for (int i = 0; i < o->warmup + o->calls; i++) {
		if (i == o->warmup)
			gate_arrive(c, true);
		if (o->ping)
			snprintf(body, sizeof(body),
			         "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
			         "\"ping\"}",
			         i + 1);
		else
			snprintf(
			    body, sizeof(body),
			    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/"
			    "call\","
			    "\"params\":{\"name\":\"run_code\",\"arguments\":{"
			    "\"conversationId\":\"%s-%d\",\"language\":\"%s\","
			    "\"code\":\"%s\"}}}",
			    i + 1, o->prefix, c->idx, o->lang, o->code);
		double t0 = now_ms();
		r = post(c, body);
		double ms = now_ms() - t0;
		if (!r)
			return NULL;
		bool ok = o->ping ? strstr(r, "\"result\"") != NULL
		                  : strstr(r, "\"exit_code\":0") != NULL;
		if (!ok) {
			c->fails++;
			if (!c->err[0])
				snprintf(c->err, sizeof(c->err),
				         "call failed: %.200s", r);
		}
		if (i >= o->warmup) {
			c->ms[i - o->warmup] = ms;
			c->dur[i - o->warmup] = o->ping ? -1 : duration_of(r);
		}
	}
	return NULL;
}

/* The daemon's user + system CPU time in ms, or -1. */
static double cpu_ms_of(int pid)
{
	char path[64], buf[1024];
	unsigned long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* Fields 14 and 15, counted after the command's closing ')'. */
	const char *p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	           &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp);
	int i = (int)(p * (n - 1) + 0.5);
	return v[i];
}

static int parse_url(struct opts *o, const char *url)
{
	if (sscanf(url, "http://%63[^:]:%d%127s", o->host, &o->port, o->path) !=
	    3) {
		fprintf(
		    stderr,
		    "warm_raw: -u must look like http://127.0.0.1:PORT/mcp, "
		    "not %s\n",
		    url);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.token = getenv("MCPSD_TOKEN"),
	                 .lang = "python",
	                 .code = "print(1)",
	                 .prefix = "raw",
	                 .clients = 1,
	                 .calls = 200,
	                 .warmup = 3};
	bool have_url = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--ping") == 0) {
			o.ping = true;
			continue;
		}
		if (!v) {
			fprintf(stderr,
			        "warm_raw: %s needs a value (see the comment "
			        "atop warm_raw.c)\n",
			        a);
			return 2;
		}
		i++;
		if (strcmp(a, "-u") == 0) {
			if (parse_url(&o, v))
				return 2;
			have_url = true;
		} else if (strcmp(a, "-t") == 0)
			o.token = v;
		else if (strcmp(a, "-c") == 0)
			o.clients = (int)strtol(v, NULL, 10);
		else if (strcmp(a, "-n") == 0)
			o.calls = (int)strtol(v, NULL, 10);
		else if (strcmp(a, "-w") == 0)
			o.warmup = (int)strtol(v, NULL, 10);
		else if (strcmp(a, "-l") == 0)
			o.lang = v;
		else if (strcmp(a, "-e") == 0)
			o.code = v;
		else if (strcmp(a, "-p") == 0)
			o.prefix = v;
		else if (strcmp(a, "--pid") == 0)
			o.pid = (int)strtol(v, NULL, 10);
		else {
			fprintf(stderr, "warm_raw: unknown option %s\n", a);
			return 2;
		}
	}
	if (!have_url || !o.token || o.clients < 1 || o.clients > 256 ||
	    o.calls < 1 || o.warmup < 0) {
		fprintf(
		    stderr,
		    "warm_raw: needs -u URL and -t TOKEN (or $MCPSD_TOKEN); "
		    "-c 1..256, -n >= 1, -w >= 0\n");
		return 2;
	}
	struct client *cs = calloc((size_t)o.clients, sizeof(*cs));
	pthread_t *th = calloc((size_t)o.clients, sizeof(*th));
	int total = o.clients * o.calls;
	double *all = calloc((size_t)total, sizeof(double));
	double *durs = calloc((size_t)total, sizeof(double));
	double *own = calloc((size_t)total, sizeof(double));
	if (!cs || !th || !all || !durs || !own)
		return 1;
	for (int i = 0; i < o.clients; i++) {
		cs[i] = (struct client){.o = &o, .idx = i, .fd = -1};
		cs[i].buf = malloc(RESP_MAX);
		cs[i].ms = all + (size_t)i * (size_t)o.calls;
		cs[i].dur = durs + (size_t)i * (size_t)o.calls;
		if (!cs[i].buf)
			return 1;
	}
	/*
	 * Warm-up runs inside each thread (with a new conversation, its first
	 * call makes or claims the box). The clock for calls/s and the
	 * daemon's CPU per call cover the measured calls only, from when every
	 * client has warmed up to the last join; with_warmup is the rate over
	 * everything, from the first start.
	 */
	double tw = now_ms();
	for (int i = 0; i < o.clients; i++)
		pthread_create(&th[i], NULL, client_main, &cs[i]);
	gate_open(o.clients);
	double cpu0 = o.pid ? cpu_ms_of(o.pid) : -1;
	double t0 = now_ms();
	gate_go();
	int fails = 0, broken = 0;
	for (int i = 0; i < o.clients; i++) {
		pthread_join(th[i], NULL);
		fails += cs[i].fails;
		if (cs[i].err[0]) {
			fprintf(stderr, "warm_raw: client %d: %s\n", i,
			        cs[i].err);
			broken += cs[i].fails == 0;
		}
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	}
	double t1 = now_ms(), secs = (t1 - t0) / 1e3;
	double cpu1 = o.pid ? cpu_ms_of(o.pid) : -1;
	int sent = o.clients * o.calls;
	double cpu_per_call =
	    cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) / sent : -1;
	int nown = 0, ndur = 0;
	for (int i = 0; i < total; i++) {
		if (durs[i] >= 0) {
			own[nown++] = all[i] - durs[i];
			durs[ndur++] = durs[i];
		}
	}
	printf("{\"clients\":%d,\"calls\":%d,\"fails\":%d,\"broken\":%d,"
	       "\"seconds\":%.3f,\"calls_per_s\":%.1f,"
	       "\"calls_per_s_with_warmup\":%.1f,"
	       "\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f,"
	       "\"duration_p50\":%.3f,\"own_p50\":%.3f,\"own_p95\":%.3f,"
	       "\"daemon_cpu_ms_per_call\":%.3f}\n",
	       o.clients, total, fails, broken, secs, (double)sent / secs,
	       (double)(o.clients * (o.calls + o.warmup)) / ((t1 - tw) / 1e3),
	       pct(all, total, 0.5), pct(all, total, 0.95),
	       pct(all, total, 0.99), pct(durs, ndur, 0.5), pct(own, nown, 0.5),
	       pct(own, nown, 0.95), cpu_per_call);
	return fails || broken ? 1 : 0;
}
