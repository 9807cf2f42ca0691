/* SPDX-License-Identifier: MIT */
/*
 * test_swarm_backend: the Swarm backend (the files of backend/swarm) against a
 * fake Engine API: an HTTP/1.1 server on a unix socket in this process (one
 * thread per connection, every answer with Connection: close), with
 * DOCKER_HOST pointing at it. Answers are canned JSON keyed by method and
 * path prefix (the longest wins; a route may hold a sequence, whose last
 * answer repeats), GET /services/{id} can echo the spec that was created
 * (with a field dropped, as an engine that ignores it would), and the
 * service logs are served as Docker's multiplexed stream, followed (the
 * connection held open, as moby#36626 does) or whole. Every request is
 * recorded ("METHOD path", one per line) with the bodies of create and
 * update. Cases: a run from create to removal, a dropped security field
 * refusing the run, the conversation's name held by an earlier run (409),
 * the queue timeout, a node marked down mid-run, network refused, the
 * engine away, and the reaping of leftovers. Run one case with
 * `test_swarm_backend CASE` (`--list` names them).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/swarm/backend_swarm.h"
#include "config/config.h"
#include "tap.h"
#include "util/log.h"
#include "util/mono.h"

/* ---- the fake engine ----------------------------------------------------- */

#define FE_ANSWERS 8
#define FE_ROUTES 32
#define FE_CONNS 64

struct fe_answer {
	int status;
	char *body; /* owned; "@spec": the created spec echoed */
};

struct fe_route {
	char method[8];
	char path[200]; /* a prefix of the request's path */
	struct fe_answer a[FE_ANSWERS];
	size_t n, next;
};

static struct fake_engine {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	char dir[64], sock[96], host[110];
	int lfd;
	pthread_t acceptor;
	bool stop;
	unsigned active; /* connection threads alive */
	int fds[FE_CONNS];
	struct fe_route routes[FE_ROUTES];
	size_t n_routes;
	char log[65536];
	char *created; /* the last POST /services/create body */
	char *updated; /* the last POST /services/{id}/update body */
	char drop[96]; /* a Spec field the engine "drops", or "" */
	char *follow;  /* multiplexed log bytes served with follow=1 */
	size_t follow_len;
	char *whole; /* ... and without follow */
	size_t whole_len;
} fe;

/* Sets the answers of method + path (replacing earlier ones): n bodies
 * with status, used in turn, the last repeated. */
static void fe_route_n(const char *method, const char *path, int status,
                       size_t n, const char *const *bodies)
{
	struct fe_route *r = NULL;

	pthread_mutex_lock(&fe.mu);
	for (size_t i = 0; i < fe.n_routes && !r; i++)
		if (strcmp(fe.routes[i].method, method) == 0 &&
		    strcmp(fe.routes[i].path, path) == 0)
			r = &fe.routes[i];
	if (!r && fe.n_routes < FE_ROUTES)
		r = &fe.routes[fe.n_routes++];
	if (r) {
		for (size_t i = 0; i < r->n; i++)
			free(r->a[i].body);
		snprintf(r->method, sizeof(r->method), "%s", method);
		snprintf(r->path, sizeof(r->path), "%s", path);
		r->n = n < FE_ANSWERS ? n : FE_ANSWERS;
		r->next = 0;
		for (size_t i = 0; i < r->n; i++)
			r->a[i] = (struct fe_answer){status, strdup(bodies[i])};
	}
	pthread_mutex_unlock(&fe.mu);
}

static void fe_route(const char *method, const char *path, int status,
                     const char *body)
{
	fe_route_n(method, path, status, 1, &body);
}

/* Appends a multiplexed frame (stream 1 or 2) to a log buffer. */
static void fe_frame(char **buf, size_t *len, int stream, const char *text)
{
	size_t n = strlen(text);
	char *p = realloc(*buf, *len + 8 + n);

	if (!p)
		return;
	p[*len] = (char)stream;
	p[*len + 1] = p[*len + 2] = p[*len + 3] = 0;
	p[*len + 4] = (char)(n >> 24);
	p[*len + 5] = (char)(n >> 16);
	p[*len + 6] = (char)(n >> 8);
	p[*len + 7] = (char)n;
	memcpy(p + *len + 8, text, n);
	*buf = p;
	*len += 8 + n;
}

static void fe_write(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void fe_reply(int fd, int status, const char *body)
{
	char head[256];
	size_t n = strlen(body);

	snprintf(head, sizeof(head),
	         "HTTP/1.1 %d Fake\r\nContent-Type: application/json\r\n"
	         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	         status, n);
	fe_write(fd, head, strlen(head));
	fe_write(fd, body, n);
}

/* Removes the field at a dotted path of o. */
static void fe_drop(cJSON *o, const char *path)
{
	char key[96];
	size_t n;

	while ((n = strcspn(path, ".")) < strlen(path)) {
		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		o = cJSON_GetObjectItemCaseSensitive(o, key);
		path += n + 1;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(o, path);
}

/* GET /services/{id}: the spec as created, less the dropped field. */
static char *fe_spec_echo(const char *id)
{
	cJSON *svc = cJSON_CreateObject(), *spec, *v;
	char *txt = NULL;

	pthread_mutex_lock(&fe.mu);
	spec = cJSON_Parse(fe.created ? fe.created : "{}");
	if (spec && fe.drop[0])
		fe_drop(spec, fe.drop);
	pthread_mutex_unlock(&fe.mu);
	v = cJSON_AddObjectToObject(svc, "Version");
	if (svc && spec && v) {
		cJSON_AddStringToObject(svc, "ID", id);
		cJSON_AddNumberToObject(v, "Index", 5);
		cJSON_AddItemToObject(svc, "Spec", spec);
		spec = NULL;
		txt = cJSON_PrintUnformatted(svc);
	}
	cJSON_Delete(spec);
	cJSON_Delete(svc);
	return txt;
}

/* The answer of the route with the longest prefix of path, or NULL. */
static struct fe_answer *fe_find(const char *method, const char *path)
{
	struct fe_route *best = NULL;

	for (size_t i = 0; i < fe.n_routes; i++) {
		struct fe_route *r = &fe.routes[i];
		size_t n = strlen(r->path);

		if (strcmp(r->method, method) == 0 &&
		    strncmp(r->path, path, n) == 0 &&
		    (!best || n > strlen(best->path)))
			best = r;
	}
	if (!best || !best->n)
		return NULL;
	return &best->a[best->next < best->n - 1 ? best->next++ : best->n - 1];
}

/* Serves a service's logs: the whole log, or followed and held open. */
static void fe_logs(int fd, bool follow)
{
	static const char head[] = "HTTP/1.0 200 OK\r\nContent-Type: "
	                           "application/vnd.docker.raw-stream\r\n\r\n";
	char *data;
	size_t n;
	char c;

	pthread_mutex_lock(&fe.mu);
	n = follow ? fe.follow_len : fe.whole_len;
	data = n ? malloc(n) : NULL;
	if (data)
		memcpy(data, follow ? fe.follow : fe.whole, n);
	pthread_mutex_unlock(&fe.mu);
	fe_write(fd, head, sizeof(head) - 1);
	if (data)
		fe_write(fd, data, n);
	free(data);
	/* Follow never ends by itself: until the client goes (or stop). */
	while (follow && read(fd, &c, 1) > 0)
		;
}

static void fe_dispatch(int fd, const char *method, const char *path,
                        const char *body)
{
	struct fe_answer *a, copy = {404, NULL};
	char id[64] = "", *echo = NULL;

	if (strcmp(path, "/version") == 0) {
		fe_reply(fd, 200,
		         "{\"Version\":\"20.10.24\",\"ApiVersion\":\"1.41\","
		         "\"MinAPIVersion\":\"1.12\"}");
		return;
	}
	if (strncmp(path, "/services/", 10) == 0 && strstr(path, "/logs?")) {
		fe_logs(fd, strstr(path, "follow=1") != NULL);
		return;
	}
	pthread_mutex_lock(&fe.mu);
	if (strcmp(method, "POST") == 0 && strstr(path, "/update?")) {
		free(fe.updated);
		fe.updated = strdup(body);
	}
	a = fe_find(method, path);
	if (a)
		copy = (struct fe_answer){a->status, strdup(a->body)};
	/* A create is kept only when the engine accepted it. */
	if (strcmp(path, "/services/create") == 0 && copy.status / 100 == 2) {
		free(fe.created);
		fe.created = strdup(body);
	}
	pthread_mutex_unlock(&fe.mu);
	if (copy.body && strcmp(copy.body, "@spec") == 0) {
		sscanf(path, "/services/%63[a-z0-9]", id);
		echo = fe_spec_echo(id);
	}
	fe_reply(fd, copy.status,
	         echo ? echo
	         : copy.body
	             ? copy.body
	             : "{\"message\":\"the fake engine has no answer for "
	               "this\"}");
	free(echo);
	free(copy.body);
}

/* Reads one request (head and Content-Length body); false on EOF. */
static bool fe_read(int fd, char *req, size_t cap, char **body)
{
	size_t len = 0, want;
	char *eoh = NULL, *cl;

	while (!eoh) {
		ssize_t n = read(fd, req + len, cap - 1 - len);

		if (n <= 0)
			return false;
		len += (size_t)n;
		req[len] = '\0';
		eoh = strstr(req, "\r\n\r\n");
	}
	cl = strcasestr(req, "\r\nContent-Length:");
	want = (size_t)(eoh + 4 - req) +
	       (cl && cl < eoh ? strtoul(cl + 17, NULL, 10) : 0);
	while (len < want && len < cap - 1) {
		ssize_t n = read(fd, req + len, cap - 1 - len);

		if (n <= 0)
			return false;
		len += (size_t)n;
	}
	req[len] = '\0';
	*body = eoh + 4;
	eoh[2] = '\0'; /* the head ends with its last line's CRLF */
	return true;
}

static void fe_log_request(const char *method, const char *path)
{
	size_t n;

	pthread_mutex_lock(&fe.mu);
	n = strlen(fe.log);
	snprintf(fe.log + n, sizeof(fe.log) - n, "%s %s\n", method, path);
	pthread_mutex_unlock(&fe.mu);
}

static void fe_conn_end(int fd)
{
	pthread_mutex_lock(&fe.mu);
	for (size_t i = 0; i < FE_CONNS; i++)
		if (fe.fds[i] == fd)
			fe.fds[i] = -1;
	close(fd);
	fe.active--;
	pthread_cond_broadcast(&fe.idle);
	pthread_mutex_unlock(&fe.mu);
}

static void *fe_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static const size_t cap = 256 * 1024;
	char *req = malloc(cap), *body = NULL, method[8], path[1024];
	const char *p;

	if (req && fe_read(fd, req, cap, &body) &&
	    sscanf(req, "%7s %1023s", method, path) == 2) {
		/* The API version prefix (/v1.41) is the client's business. */
		p = path;
		if (strncmp(p, "/v1.", 4) == 0 && strchr(p + 1, '/'))
			p = strchr(p + 1, '/');
		fe_log_request(method, p);
		fe_dispatch(fd, method, p, body);
	}
	free(req);
	fe_conn_end(fd);
	return NULL;
}

static void *fe_accept(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p = {.fd = fe.lfd, .events = POLLIN};
		pthread_t t;
		int fd;
		bool stop;

		pthread_mutex_lock(&fe.mu);
		stop = fe.stop;
		pthread_mutex_unlock(&fe.mu);
		if (stop)
			return NULL;
		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept4(fe.lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&fe.mu);
		for (size_t i = 0; i < FE_CONNS; i++)
			if (fe.fds[i] < 0) {
				fe.fds[i] = fd;
				break;
			}
		fe.active++;
		pthread_mutex_unlock(&fe.mu);
		if (pthread_create(&t, NULL, fe_conn, (void *)(intptr_t)fd) ==
		    0)
			pthread_detach(t);
		else
			fe_conn_end(fd);
	}
}

static int fe_start(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(&fe, 0, sizeof(fe));
	pthread_mutex_init(&fe.mu, NULL);
	pthread_cond_init(&fe.idle, NULL);
	for (size_t i = 0; i < FE_CONNS; i++)
		fe.fds[i] = -1;
	snprintf(fe.dir, sizeof(fe.dir), "/tmp/mcpsd-test-swarm-XXXXXX");
	if (!mkdtemp(fe.dir))
		return -errno;
	snprintf(fe.sock, sizeof(fe.sock), "%s/engine.sock", fe.dir);
	snprintf(fe.host, sizeof(fe.host), "unix://%s", fe.sock);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", fe.sock);
	fe.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fe.lfd < 0 || bind(fe.lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fe.lfd, 64) < 0)
		return -errno;
	return -pthread_create(&fe.acceptor, NULL, fe_accept, NULL);
}

/* Ends every connection (a held follow too) and the server. */
static void fe_stop(void)
{
	pthread_mutex_lock(&fe.mu);
	fe.stop = true;
	pthread_mutex_unlock(&fe.mu);
	pthread_join(fe.acceptor, NULL);
	pthread_mutex_lock(&fe.mu);
	for (size_t i = 0; i < FE_CONNS; i++)
		if (fe.fds[i] >= 0)
			shutdown(fe.fds[i], SHUT_RDWR);
	while (fe.active)
		pthread_cond_wait(&fe.idle, &fe.mu);
	pthread_mutex_unlock(&fe.mu);
	close(fe.lfd);
	unlink(fe.sock);
	rmdir(fe.dir);
}

/* Forgets routes, requests, bodies and logs between cases. */
static void fe_reset(void)
{
	pthread_mutex_lock(&fe.mu);
	for (size_t i = 0; i < fe.n_routes; i++) {
		for (size_t k = 0; k < fe.routes[i].n; k++)
			free(fe.routes[i].a[k].body);
		fe.routes[i].n = 0;
	}
	fe.n_routes = 0;
	fe.log[0] = fe.drop[0] = '\0';
	free(fe.created);
	free(fe.updated);
	free(fe.follow);
	free(fe.whole);
	fe.created = fe.updated = fe.follow = fe.whole = NULL;
	fe.follow_len = fe.whole_len = 0;
	pthread_mutex_unlock(&fe.mu);
}

/* How many requests the log has that start with line. */
static unsigned fe_count(const char *line)
{
	unsigned k = 0;
	size_t n = strlen(line);

	pthread_mutex_lock(&fe.mu);
	for (const char *p = fe.log; p && *p; p = strchr(p, '\n')) {
		p += *p == '\n';
		k += strncmp(p, line, n) == 0;
	}
	pthread_mutex_unlock(&fe.mu);
	return k;
}

/* Waits up to ms for a request starting with line. */
static bool fe_wait_for(const char *line, int ms)
{
	for (int t = 0; t < ms; t += 20) {
		if (fe_count(line))
			return true;
		poll(NULL, 0, 20);
	}
	return fe_count(line) > 0;
}

/* A copy of a recorded body (created or updated), parsed; caller frees. */
static cJSON *fe_body(bool created)
{
	cJSON *j;

	pthread_mutex_lock(&fe.mu);
	j = cJSON_Parse(created ? (fe.created ? fe.created : "")
	                        : (fe.updated ? fe.updated : ""));
	pthread_mutex_unlock(&fe.mu);
	return j;
}

/* ---- the test's side ----------------------------------------------------- */

static struct config cfg;
static char root[] = "/tmp/mcpsd-test-swarmbe-XXXXXX";
static const char *const cmd[] = {"python3", "/sandbox/main.py"};

#define TASK(state, extra)                                                     \
	"[{\"ID\":\"task1\",\"NodeID\":\"node1\",\"Version\":{\"Index\":10},"  \
	"\"Status\":{\"State\":\"" state "\",\"Message\":\"" state "\"" extra  \
	"}}]"
#define TASK_DONE(code)                                                        \
	TASK("complete", ",\"ContainerStatus\":{\"ContainerID\":\"c1\","       \
	                 "\"ExitCode\":" #code "}")

static int setup(void)
{
	char err[1024] = "";
	static const char *unset[] = {"MCP_API_TOKEN", "MCP_API_TOKENS",
	                              "FILE_SECRET", "STORE_URL", NULL};

	for (size_t i = 0; unset[i]; i++)
		unsetenv(unset[i]);
	if (fe_start() < 0 || !mkdtemp(root))
		return -EIO;
	setenv("MCP_AUTH", "none", 1);
	setenv("SANDBOX_ROOT", root, 1);
	setenv("DOCKER_HOST", fe.host, 1);
	setenv("DOCKER_TIMEOUT_SECONDS", "2", 1);
	setenv("MCP_INSTANCE_NAME", "test-owner", 1);
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		printf("# config: %s\n", err);
		return -EINVAL;
	}
	cfg.swarm_queue_timeout_s = 5;
	return 0;
}

/* The routes of a healthy run of service svc1 on node1. */
static void routes_run(void)
{
	fe_reset();
	fe_route("GET", "/images/sha256:abc/json", 200,
	         "{\"Id\":\"sha256:abc\"}");
	fe_route("POST", "/services/create", 201, "{\"ID\":\"svc1\"}");
	fe_route("GET", "/services/svc1", 200, "@spec");
	fe_route("POST", "/services/svc1/update", 200, "{\"Warnings\":null}");
	fe_route("DELETE", "/services/svc1", 200, "");
	fe_route("GET", "/nodes/node1", 200,
	         "{\"ID\":\"node1\",\"Status\":{\"State\":\"ready\"},"
	         "\"Description\":{\"Hostname\":\"worker-1\"}}");
	fe_route("GET", "/services?", 200, "[]");
}

static struct backend *be_new(void)
{
	struct backend *be = NULL;
	char err[512] = "";

	if (backend_swarm_create(&cfg, "0123456789abcdef", &be, err,
	                         sizeof(err)) < 0)
		printf("# backend_swarm_create: %s\n", err);
	return be;
}

static struct box_spec spec_of(const char *conversation)
{
	struct box_spec sp = {
	    .image = "sha256:abc",
	    .name = "mcpsd-0011223344556677",
	    .cmd = cmd,
	    .n_cmd = 2,
	    .workdir = "/data",
	    .exclusive = conversation,
	    .deadline = time(NULL) + 60,
	};

	sp.labels[sp.n_labels++] = (struct box_label){"sandbox.kind", "run"};
	sp.mounts[sp.n_mounts++] =
	    (struct box_mount){"/srv/runs/r1", "/sandbox", true, false};
	return sp;
}

/* Output gathered by a pump. */
struct sink {
	char out[256], err[256];
};

static int sink_fn(void *arg, int which, const char *p, size_t n)
{
	struct sink *s = arg;
	char *dst = which == 2 ? s->err : s->out;
	size_t have = strlen(dst);

	snprintf(dst + have, sizeof(s->out) - have, "%.*s", (int)n, p);
	return 0;
}

/*
 * Pumps st until its end (0), an error (returned), or ms pass (-ETIMEDOUT),
 * calling at_output once, when out first holds something.
 */
static int pump_all(struct box_stream *st, struct sink *sk, int ms,
                    void (*at_output)(void), char *err, size_t errlen)
{
	long long end = mono_ms() + ms;
	bool told = false;

	while (mono_ms() < end) {
		struct pollfd p = {.fd = box_stream_fd(st), .events = POLLIN};
		int rc;

		if (!box_stream_pending(st))
			(void)poll(&p, 1, 100);
		rc = box_stream_pump(st, sink_fn, sk, err, errlen);
		if (!told && sk->out[0] && at_output) {
			at_output();
			told = true;
		}
		if (rc == 0 || (rc < 0 && rc != -EAGAIN))
			return rc;
	}
	return -ETIMEDOUT;
}

static void task_completes(void)
{
	fe_route("GET", "/tasks?", 200, TASK_DONE(3));
}

static void test_run(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-1");
	struct box *b = NULL;
	struct box_stream *st = NULL;
	struct box_state bs;
	struct sink sk = {0};
	const char *tasks[] = {"[]", TASK("pending", ""), TASK("pending", ""),
	                       TASK("running", "")};
	char err[512] = "";
	cJSON *j;
	int rc;

	routes_run();
	fe_route_n("GET", "/tasks?", 200, 4, tasks);
	fe_frame(&fe.follow, &fe.follow_len, 1, "hello\n");
	fe_frame(&fe.whole, &fe.whole_len, 1, "hello\n");
	fe_frame(&fe.whole, &fe.whole_len, 2, "warn\n");
	fe_frame(&fe.whole, &fe.whole_len, 1, "world");
	be = be_new();
	if (!be) {
		ok(0, "run: a backend");
		return;
	}
	is_str(backend_name(be), "swarm", "run: the backend's name");
	ok(!backend_has(be, BACKEND_CAN_STDIN) &&
	       !backend_has(be, BACKEND_CAN_WARM),
	   "run: no stdin stream, no warm boxes");
	rc = box_create(be, &sp, &b, err, sizeof(err));
	is_int(rc, 0, "run: create");
	is_int(fe_count("GET /images/sha256:abc/json"), 1,
	       "run: create asks the manager for the image");
	is_int(fe_count("POST /services/create"), 0,
	       "run: create makes no service yet");
	if (rc < 0)
		goto out;
	ok(box_attach(b, &st, err, sizeof(err)) == 0, "run: attach");
	rc = box_start(b, err, sizeof(err));
	is_int(rc, 0, "run: start");
	j = fe_body(true);
	ok(cJSON_IsString(cJSON_GetObjectItem(j, "Name")) &&
	       strncmp(cJSON_GetObjectItem(j, "Name")->valuestring, "mcpsd-c-",
	               8) == 0,
	   "run: the service is named for the conversation (its lock)");
	is_int(cJSON_GetObjectItem(
	           cJSON_GetObjectItem(cJSON_GetObjectItem(j, "Mode"),
	                               "Replicated"),
	           "Replicas")
	           ->valueint,
	       0, "run: created with no replica (nothing runs unchecked)");
	ok(cJSON_IsTrue(cJSON_GetObjectItem(
	       cJSON_GetObjectItem(cJSON_GetObjectItem(j, "TaskTemplate"),
	                           "ContainerSpec"),
	       "ReadOnly")),
	   "run: the spec sent has a read-only root");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(
	           cJSON_GetObjectItem(j, "Labels"), "sandbox.owner")),
	       "test-owner", "run: labelled with its owner");
	cJSON_Delete(j);
	ok(fe_count("GET /services/svc1\n") == 1,
	   "run: the spec was read back before scaling up");
	j = fe_body(false);
	is_int(cJSON_GetObjectItem(
	           cJSON_GetObjectItem(cJSON_GetObjectItem(j, "Mode"),
	                               "Replicated"),
	           "Replicas")
	           ->valueint,
	       1, "run: then scaled to one replica");
	cJSON_Delete(j);
	rc = box_wait_running(b, -1, err, sizeof(err));
	is_int(rc, 0, "run: wait_running returns once the task runs");
	ok(fe_count("GET /tasks?") >= 4,
	   "run: it waited through no task and pending (%u polls)",
	   fe_count("GET /tasks?"));
	ok(fe_count("GET /services/svc1/logs?stdout=1&stderr=1&follow=1") == 1,
	   "run: the logs are followed from the start");
	rc = pump_all(st, &sk, 5000, task_completes, err, sizeof(err));
	is_int(rc, 0, "run: the stream ends once the task is terminal");
	is_str(sk.out, "hello\nworld",
	       "run: stdout followed, then the rest of the whole log, once");
	is_str(sk.err, "warn\n", "run: stderr too");
	ok(fe_count("GET /services/svc1/logs?stdout=1&stderr=1\n") == 1,
	   "run: the whole log was read once at the end");
	is_int(box_wait(b, 2000, err, sizeof(err)), 0, "run: wait");
	is_int(box_inspect(b, &bs, err, sizeof(err)), 0, "run: inspect");
	ok(!bs.running && bs.exit_code == 3 &&
	       strcmp(bs.status, "complete") == 0,
	   "run: inspect says complete, exit code 3 (%s, %d)", bs.status,
	   bs.exit_code);
	box_stream_close(st);
	st = NULL;
	box_release(b);
	b = NULL;
	fe_route("GET", "/tasks?", 200, "[]");
	ok(fe_wait_for("DELETE /services/svc1", 5000),
	   "run: released: the service is removed in the background");
out:
	box_stream_close(st);
	box_release(b);
	backend_destroy(be);
	ok(fe_count("GET /services?filters=") >= 1,
	   "run: destroy looks for this boot's services");
}

static void test_spec_dropped(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-2");
	struct box *b = NULL;
	char err[512] = "";
	int rc;

	routes_run();
	snprintf(fe.drop, sizeof(fe.drop),
	         "TaskTemplate.ContainerSpec.CapabilityDrop");
	be = be_new();
	if (!be || box_create(be, &sp, &b, err, sizeof(err)) < 0) {
		ok(0, "dropped: a backend and a box (%s)", err);
		backend_destroy(be);
		return;
	}
	rc = box_start(b, err, sizeof(err));
	is_int(rc, -EPERM, "dropped: start refuses the run");
	ok(strstr(err, "dropped TaskTemplate.ContainerSpec.CapabilityDrop") &&
	       strstr(err, "refusing to run code"),
	   "dropped: the message names the field (%s)", err);
	is_int(fe_count("POST /services/svc1/update"), 0,
	       "dropped: never scaled up");
	is_int(fe_count("DELETE /services/svc1"), 1,
	       "dropped: the service was removed at once");
	box_release(b);
	backend_destroy(be);
}

static void test_name_held(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-3");
	struct box *b = NULL;
	const char *creates[] = {"{\"message\":\"name conflicts\"}",
	                         "{\"message\":\"name conflicts\"}"};
	char err[512] = "";
	int rc;

	routes_run();
	fe_route_n("POST", "/services/create", 409, 2, creates);
	fe_route("GET", "/tasks?", 200, TASK("running", ""));
	be = be_new();
	if (!be || box_create(be, &sp, &b, err, sizeof(err)) < 0) {
		ok(0, "held: a backend and a box (%s)", err);
		backend_destroy(be);
		return;
	}
	is_int(box_start(b, err, sizeof(err)), 0,
	       "held: start with the name taken is not an error");
	/* The earlier run's service goes away: the next create succeeds. */
	fe_route("POST", "/services/create", 201, "{\"ID\":\"svc1\"}");
	rc = box_wait_running(b, -1, err, sizeof(err));
	is_int(rc, 0, "held: wait_running creates it once the name is free");
	ok(fe_count("POST /services/create") >= 2,
	   "held: create tried again (%u times)",
	   fe_count("POST /services/create"));
	box_release(b);
	backend_destroy(be);
}

static void test_queue_timeout(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-4");
	struct box *b = NULL;
	char err[512] = "";
	long long t0;
	int rc;

	routes_run();
	fe_route("GET", "/tasks?", 200,
	         "[{\"ID\":\"task1\",\"Version\":{\"Index\":1},\"Status\":{"
	         "\"State\":\"pending\",\"Message\":\"no suitable node "
	         "(insufficient resources on 2 nodes)\"}}]");
	cfg.swarm_queue_timeout_s = 1;
	be = be_new();
	if (!be || box_create(be, &sp, &b, err, sizeof(err)) < 0 ||
	    box_start(b, err, sizeof(err)) < 0) {
		ok(0, "queue: a backend and a started box (%s)", err);
		goto out;
	}
	t0 = mono_ms();
	rc = box_wait_running(b, -1, err, sizeof(err));
	is_int(rc, -ETIMEDOUT, "queue: no room within the queue timeout");
	ok(mono_ms() - t0 >= 900 && mono_ms() - t0 < 4000,
	   "queue: after SWARM_QUEUE_TIMEOUT_SECONDS (%lld ms)",
	   mono_ms() - t0);
	ok(strstr(err, "no sandbox node had room") &&
	       strstr(err, "insufficient resources") &&
	       strstr(err, "try again later"),
	   "queue: says why, in Swarm's words, and what to do (%s)", err);
out:
	box_release(b);
	backend_destroy(be);
	cfg.swarm_queue_timeout_s = 5;
}

/* The node stops answering; the manager marks it down. */
static void node_goes_down(void)
{
	fe_route("GET", "/nodes/node1", 200,
	         "{\"ID\":\"node1\",\"Status\":{\"State\":\"down\"},"
	         "\"Description\":{\"Hostname\":\"worker-1\"}}");
}

static void test_node_lost(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-5");
	struct box *b = NULL;
	struct box_stream *st = NULL;
	struct box_state bs;
	struct sink sk = {0};
	char err[512] = "";
	int rc;

	routes_run();
	fe_route("GET", "/tasks?", 200, TASK("running", ""));
	fe_frame(&fe.follow, &fe.follow_len, 1, "working\n");
	be = be_new();
	if (!be || box_create(be, &sp, &b, err, sizeof(err)) < 0 ||
	    box_attach(b, &st, err, sizeof(err)) < 0 ||
	    box_start(b, err, sizeof(err)) < 0 ||
	    box_wait_running(b, -1, err, sizeof(err)) < 0) {
		ok(0, "node: a running box (%s)", err);
		goto out;
	}
	rc = pump_all(st, &sk, 6000, node_goes_down, err, sizeof(err));
	is_int(rc, -EHOSTDOWN, "node: the stream ends with the node lost");
	is_str(sk.out, "working\n", "node: output up to then is kept");
	ok(strstr(err, "worker-1") && strstr(err, "marked it down") &&
	       strstr(err, "whether the code finished is unknown"),
	   "node: the message names the node and says what is known (%s)", err);
	is_int(box_wait(b, 1000, err, sizeof(err)), -EHOSTDOWN,
	       "node: wait says so too");
	is_int(box_inspect(b, &bs, err, sizeof(err)), -EHOSTDOWN,
	       "node: and inspect");
out:
	box_stream_close(st);
	box_release(b);
	backend_destroy(be);
}

static void test_refusals(void)
{
	struct backend *be;
	struct box_spec sp = spec_of("ws-conversation-6");
	struct box *b = NULL;
	char err[512] = "", *host = cfg.docker_host;
	char away[200];

	routes_run();
	be = be_new();
	sp.network = true;
	is_int(box_create(be, &sp, &b, err, sizeof(err)), -EPERM,
	       "refuse: network is refused");
	ok(strstr(err, "no network") && strstr(err, "run without network"),
	   "refuse: and says what to do (%s)", err);
	sp.network = false;
	sp.image = "sha256:gone";
	is_int(box_create(be, &sp, &b, err, sizeof(err)), -ENOENT,
	       "refuse: an image the manager does not know is -ENOENT");
	backend_destroy(be);

	/* An engine that is not there at all. */
	snprintf(away, sizeof(away), "unix://%s/nobody.sock", fe.dir);
	cfg.docker_host = away;
	be = be_new();
	sp.image = "sha256:abc";
	is_int(box_create(be, &sp, &b, err, sizeof(err)), -ECONNREFUSED,
	       "refuse: the engine away is -ECONNREFUSED");
	ok(strstr(err, "not reachable") != NULL,
	   "refuse: the message says it is unreachable (%s)", err);
	backend_destroy(be);
	cfg.docker_host = host;
}

static void test_reap(void)
{
	struct backend *be;
	char err[512] = "", list[2048], mine[64];
	long long now = (long long)time(NULL);
	int rc;

	routes_run();
	snprintf(mine, sizeof(mine), "0123456789abcdef");
	snprintf(
	    list, sizeof(list),
	    "[{\"ID\":\"oldboot\",\"Spec\":{\"Labels\":{\"sandbox.managed\":"
	    "\"true\",\"sandbox.owner\":\"test-owner\",\"sandbox.boot\":"
	    "\"ffffffffffffffff\",\"sandbox.deadline\":\"%lld\"}}},"
	    "{\"ID\":\"thisboot\",\"Spec\":{\"Labels\":{\"sandbox.managed\":"
	    "\"true\",\"sandbox.owner\":\"test-owner\",\"sandbox.boot\":"
	    "\"%s\",\"sandbox.deadline\":\"%lld\"}}},"
	    "{\"ID\":\"otherlate\",\"Spec\":{\"Labels\":{\"sandbox.managed\":"
	    "\"true\",\"sandbox.owner\":\"someone-else\",\"sandbox.boot\":"
	    "\"eeeeeeeeeeeeeeee\",\"sandbox.deadline\":\"%lld\"}}},"
	    "{\"ID\":\"otherlive\",\"Spec\":{\"Labels\":{\"sandbox.managed\":"
	    "\"true\",\"sandbox.owner\":\"someone-else\",\"sandbox.boot\":"
	    "\"eeeeeeeeeeeeeeee\",\"sandbox.deadline\":\"%lld\"}}}]",
	    now + 3600, mine, now + 3600, now - 7200, now + 3600);
	fe_route("GET", "/services?filters=", 200, list);
	fe_route("DELETE", "/services/", 200, "");
	be = be_new();
	if (!be) {
		ok(0, "reap: a backend");
		return;
	}
	rc = backend_reap(be, err, sizeof(err));
	is_int(rc, 2, "reap: two leftovers removed");
	ok(fe_count("GET /services?filters=%7B%22label%22%3A%5B%22sandbox."
	            "managed%3Dtrue%22%5D%7D") == 1,
	   "reap: listed by the managed label");
	ok(fe_count("DELETE /services/oldboot") == 1,
	   "reap: this owner's service of an earlier boot");
	ok(fe_count("DELETE /services/otherlate") == 1,
	   "reap: another owner's service past its deadline");
	ok(fe_count("DELETE /services/thisboot") == 0 &&
	       fe_count("DELETE /services/otherlive") == 0,
	   "reap: neither this boot's nor a live one of another owner");
	backend_destroy(be);
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"run", test_run},
	    {"spec-dropped", test_spec_dropped},
	    {"name-held", test_name_held},
	    {"queue-timeout", test_queue_timeout},
	    {"node-lost", test_node_lost},
	    {"refusals", test_refusals},
	    {"reap", test_reap},
	};
	char rm[128];
	int rc;

	log_set_level(LOG_LEVEL_ERROR);
	if (setup() < 0) {
		printf("Bail out! cannot set up: a fake engine on a unix "
		       "socket, a temporary directory and the configuration "
		       "are needed\n");
		return 2;
	}
	rc = tap_run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
	config_finish(&cfg);
	fe_reset();
	fe_stop();
	snprintf(rm, sizeof(rm), "rm -rf '%s'", root);
	if (system(rm) != 0)
		printf("# could not remove %s\n", root);
	return rc;
}
