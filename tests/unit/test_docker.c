/* SPDX-License-Identifier: MIT */
/*
 * test_docker: the pure parts of the Docker client (create body, host
 * parsing) and its error handling against a fake engine on a unix socket:
 * version negotiation, engine error messages, timeouts, an engine that is
 * not there, and the hijacked attach handshake.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/docker/docker.h"
#include "tap.h"
#include "util/jsonx.h"
#include "util/log.h"

/* ---- a fake engine ------------------------------------------------------ */

struct fake {
	int lfd;
	char path[108];
	pthread_t th;
	const char *api; /* ApiVersion it claims */
	volatile int stop;
	char last_request[512];
};

static void fake_reply(int fd, int status, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	                 status, strlen(body));

	if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0)
		return;
}

static void fake_serve(struct fake *f, int fd)
{
	char req[2048];
	size_t len = 0;
	ssize_t got;

	while (len < sizeof(req) - 1) {
		got = read(fd, req + len, sizeof(req) - 1 - len);
		if (got <= 0)
			break;
		len += (size_t)got;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[len] = '\0';
	snprintf(f->last_request, sizeof(f->last_request), "%.*s",
	         (int)strcspn(req, "\r"), req);
	if (strncmp(req, "GET /version ", 13) == 0) {
		char body[256];

		snprintf(body, sizeof(body),
		         "{\"Version\":\"99.0-fake\",\"ApiVersion\":\"%s\","
		         "\"MinAPIVersion\":\"1.12\"}",
		         f->api);
		fake_reply(fd, 200, body);
	} else if (strstr(req, "/containers/gone/json")) {
		fake_reply(fd, 404,
		           "{\"message\":\"No such container: gone\"}");
	} else if (strstr(req, "/containers/slow/json")) {
		usleep(1500 * 1000); /* past the client's 1 s */
	} else if (strstr(req, "/containers/dropped/json")) {
		/* The engine goes away before answering: close at once. */
	} else if (strstr(req, "/containers/cut/json")) {
		/* The engine goes away halfway through its answer. */
		static const char half[] =
		    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		    "Content-Length: 400\r\n\r\n{\"State\":{";

		if (write(fd, half, sizeof(half) - 1) < 0)
			return;
	} else if (strstr(req, "/containers/junk/json")) {
		fake_reply(fd, 200, "{not json");
	} else if (strstr(req, "/containers/ok/json")) {
		fake_reply(fd, 200,
		           "{\"State\":{\"Running\":false,\"OOMKilled\":true,"
		           "\"ExitCode\":137,\"Status\":\"exited\"}}");
	} else if (strstr(req, "/containers/ok/attach")) {
		/* The 101 head and the first frame in one write. */
		static const char up[] =
		    "HTTP/1.1 101 UPGRADED\r\n"
		    "Content-Type: "
		    "application/vnd.docker.raw-stream\r\n"
		    "Connection: Upgrade\r\nUpgrade: tcp\r\n"
		    "\r\n\x01\0\0\0\0\0\0\x02hi";

		if (write(fd, up, sizeof(up) - 1) < 0)
			return;
		usleep(100 * 1000);
	} else if (strstr(req, "/containers/busy/kill")) {
		fake_reply(fd, 409,
		           "{\"message\":\"Container busy is not running\"}");
	} else {
		fake_reply(fd, 500, "{\"message\":\"unexpected\"}");
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	while (!f->stop) {
		struct pollfd p = {.fd = f->lfd, .events = POLLIN};
		int fd;

		if (poll(&p, 1, 100) <= 0)
			continue;
		fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		fake_serve(f, fd);
		close(fd);
	}
	return NULL;
}

static int fake_start(struct fake *f, const char *api)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(f, 0, sizeof(*f));
	f->api = api;
	snprintf(f->path, sizeof(f->path), "/tmp/fake-docker-%d.sock",
	         (int)getpid());
	unlink(f->path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(f->lfd, 16))
		return -1;
	return pthread_create(&f->th, NULL, fake_main, f) == 0 ? 0 : -1;
}

static void fake_stop(struct fake *f)
{
	f->stop = 1;
	pthread_join(f->th, NULL);
	close(f->lfd);
	unlink(f->path);
}

/* ---- the create body ---------------------------------------------------- */

static void test_body(void)
{
	const char *cmd[] = {"python3", "-u", "/sandbox/main.py"};
	const char *env[] = {"HOME=/tmp"};
	const char *drop[] = {"ALL"};
	const char *sec[] = {"no-new-privileges:true"};
	struct docker_kv labels[] = {{"sandbox.managed", "true"}};
	struct docker_kv tmpfs[] = {{"/tmp", "rw,size=64m"}};
	struct docker_ulimit ul[] = {{"nofile", 1024, 1024}};
	struct docker_mount mounts[] = {{"/srv/ws", "/data", false, false},
	                                {"/srv/run", "/sandbox", true, true}};
	struct docker_create_opts o = {
	    .image = "sha256:abc",
	    .cmd = cmd,
	    .n_cmd = 3,
	    .env = env,
	    .n_env = 1,
	    .labels = labels,
	    .n_labels = 1,
	    .user = "64321:64321",
	    .working_dir = "/data",
	    .open_stdin = true,
	    .memory_bytes = 256 << 20,
	    .memory_swap_bytes = 256 << 20,
	    .nano_cpus = 500000000,
	    .pids_limit = 128,
	    .network_mode = "none",
	    .readonly_rootfs = true,
	    .init = true,
	    .ipc_mode = "private",
	    .tmpfs = tmpfs,
	    .n_tmpfs = 1,
	    .ulimits = ul,
	    .n_ulimits = 1,
	    .cap_drop = drop,
	    .n_cap_drop = 1,
	    .security_opt = sec,
	    .n_security_opt = 1,
	    .mounts = mounts,
	    .n_mounts = 2,
	    .log_driver = "none",
	};
	cJSON *b = docker_create_body(&o);
	const cJSON *m;

	ok(b != NULL, "body built");
	is_str(cJSON_GetStringValue(jsonx_at(b, "Image")), "sha256:abc",
	       "Image");
	is_int(cJSON_GetArraySize(jsonx_at(b, "Cmd")), 3,
	       "Cmd has every argument");
	ok(cJSON_IsFalse(jsonx_at(b, "Tty")), "Tty false");
	ok(cJSON_IsTrue(jsonx_at(b, "OpenStdin")) &&
	       cJSON_IsTrue(jsonx_at(b, "StdinOnce")) &&
	       cJSON_IsTrue(jsonx_at(b, "AttachStdin")),
	   "stdin open once and attached");
	ok(cJSON_IsTrue(jsonx_at(b, "AttachStdout")) &&
	       cJSON_IsTrue(jsonx_at(b, "AttachStderr")),
	   "stdout and stderr attached");
	is_int(jsonx_at(b, "HostConfig.Memory")->valuedouble, 256 << 20,
	       "Memory");
	is_int(jsonx_at(b, "HostConfig.MemorySwap")->valuedouble, 256 << 20,
	       "MemorySwap");
	ok(cJSON_IsFalse(jsonx_at(b, "HostConfig.OomKillDisable")),
	   "OomKillDisable false");
	ok(cJSON_IsFalse(jsonx_at(b, "HostConfig.Privileged")),
	   "Privileged false");
	is_str(
	    cJSON_GetStringValue(jsonx_at(b, "HostConfig.RestartPolicy.Name")),
	    "no", "RestartPolicy no");
	is_str(cJSON_GetStringValue(jsonx_at(b, "HostConfig.LogConfig.Type")),
	       "none", "LogConfig none");
	ok(jsonx_at(b, "HostConfig.Binds") == NULL, "no Binds");
	m = cJSON_GetArrayItem(jsonx_at(b, "HostConfig.Mounts"), 1);
	is_str(cJSON_GetStringValue(jsonx_at(m, "Type")), "bind",
	       "Mounts are binds");
	ok(cJSON_IsTrue(jsonx_at(m, "ReadOnly")), "read-only mount flag");
	ok(jsonx_at(b, "HostConfig.Runtime") == NULL, "no Runtime when unset");
	is_str(cJSON_GetStringValue(jsonx_at(b, "HostConfig.Tmpfs./tmp")),
	       "rw,size=64m", "Tmpfs options");
	is_int(
	    jsonx_at(cJSON_GetArrayItem(jsonx_at(b, "HostConfig.Ulimits"), 0),
	             "Hard")
	        ->valuedouble,
	    1024, "Ulimits");
	cJSON_Delete(b);
}

/* ---- the client against the fake engine --------------------------------- */

static void test_client(void)
{
	struct fake f;
	struct docker *d = NULL;
	struct docker_health h;
	struct docker_container_state st;
	struct docker_attach *a = NULL;
	char err[512], host[160], buf[64];
	ssize_t n;

	is_int(docker_create("tcp://1.2.3.4:2375", 5, &d, err, sizeof(err)),
	       -EINVAL, "tcp:// hosts refused");
	ok(strstr(err, "unix:///var/run/docker.sock") != NULL,
	   "the message shows a good value");

	/* Nothing listening. */
	is_int(docker_create("unix:///tmp/no-such-docker.sock", 2, &d, err,
	                     sizeof(err)),
	       0, "client for a missing socket");
	is_int(docker_ping(d, err, sizeof(err)), -ECONNREFUSED,
	       "missing engine: -ECONNREFUSED");
	ok(strstr(err, "not reachable at unix:///tmp/no-such-docker.sock") &&
	       strstr(err, "dockerd running"),
	   "missing engine: actionable message (%s)", err);
	docker_health(d, &h);
	ok(!h.reachable && h.last_check > 0 && strcmp(h.last_error, err) == 0,
	   "health records the failure");
	docker_destroy(d);

	if (fake_start(&f, "1.45") < 0) {
		ok(0, "fake engine started");
		return;
	}
	snprintf(host, sizeof(host), "unix://%s", f.path);
	is_int(docker_create(host, 1, &d, err, sizeof(err)), 0, "client");
	is_int(docker_ping(d, err, sizeof(err)), 0, "ping");
	docker_health(d, &h);
	is_str(h.api_version, DOCKER_API_MAX, "newer engine: our newest API");
	is_str(h.server_version, "99.0-fake", "server version recorded");
	ok(h.reachable && h.last_ok > 0, "health reachable");

	is_int(docker_container_inspect(d, "ok", &st, err, sizeof(err)), 0,
	       "inspect");
	ok(strstr(f.last_request,
	          "GET /v" DOCKER_API_MAX "/containers/ok/json"),
	   "versioned path (%s)", f.last_request);
	ok(st.oom_killed && st.exit_code == 137 && !st.running,
	   "inspect state parsed");
	is_int(docker_container_inspect(d, "gone", &st, err, sizeof(err)),
	       -ENOENT, "404 -> -ENOENT");
	ok(strstr(err, "No such container: gone") != NULL,
	   "engine message kept (%s)", err);
	is_int(docker_container_inspect(d, "junk", &st, err, sizeof(err)),
	       -EPROTO, "invalid JSON -> -EPROTO");
	is_int(docker_container_inspect(d, "slow", &st, err, sizeof(err)),
	       -ETIMEDOUT, "hung engine -> -ETIMEDOUT");
	ok(strstr(err, "did not answer") != NULL, "timeout message (%s)", err);
	usleep(700 * 1000); /* the fake engine serves one call at a time */
	is_int(docker_container_inspect(d, "dropped", &st, err, sizeof(err)),
	       -ECONNREFUSED, "connection closed without an answer");
	ok(strstr(err, "not reachable") && strstr(err, "broke during GET"),
	   "a dropped connection names the engine (%s)", err);
	docker_health(d, &h);
	ok(!h.reachable, "a dropped connection marks the engine down");
	is_int(docker_container_inspect(d, "cut", &st, err, sizeof(err)),
	       -ECONNREFUSED, "answer cut off halfway");
	ok(strstr(err, "not reachable") && strstr(err, "broke during GET"),
	   "a cut answer names the engine (%s)", err);
	is_int(docker_container_kill(d, "busy", "KILL", err, sizeof(err)),
	       -ESRCH, "kill of a stopped container -> -ESRCH");
	is_int(docker_container_inspect(d, "../etc", &st, err, sizeof(err)),
	       -EINVAL, "ids with path characters refused");
	is_int(docker_container_kill(d, "ok", "KILL&x=1", err, sizeof(err)),
	       -EINVAL, "signal names checked");

	is_int(docker_container_attach(d, "ok", &a, err, sizeof(err)), 0,
	       "attach handshake");
	ok(strstr(f.last_request, "/containers/ok/attach?stream=1&stdin=1") !=
	       NULL,
	   "attach request line");
	ok(a && docker_attach_pending(a), "bytes after the head kept");
	n = a ? docker_attach_read(a, buf, sizeof(buf)) : -1;
	ok(n == 10 && memcmp(buf, "\x01\0\0\0\0\0\0\x02hi", 10) == 0,
	   "first frame delivered");
	docker_attach_close(a);
	docker_attach_close(NULL);
	docker_destroy(d);
	fake_stop(&f);

	if (fake_start(&f, "1.40") < 0) {
		ok(0, "fake engine started");
		return;
	}
	snprintf(host, sizeof(host), "unix://%s", f.path);
	is_int(docker_create(host, 1, &d, err, sizeof(err)), 0, "client");
	is_int(docker_ping(d, err, sizeof(err)), -ENOTSUP,
	       "API 1.40 is too old");
	ok(strstr(err, "upgrade") != NULL, "old engine message (%s)", err);
	docker_destroy(d);
	fake_stop(&f);
	docker_destroy(NULL);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_LEVEL_ERROR);
	test_body();
	test_client();
	return tap_done();
}
