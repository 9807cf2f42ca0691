/* SPDX-License-Identifier: MIT */
/*
 * test_agent_docker: mcpsd-agent and kernel.py in real containers of the
 * real runner images, driven the way the daemon drives them: containers
 * created through the Engine API (lib/backend/docker/docker.h) with the
 * daemon's hardening (Docker's init, and once the agent as PID 1 instead; user
 * 64321, read-only root, tmpfs /tmp, no capabilities, no-new-privileges, the
 * daemon's seccomp profile, no network, memory = swap, a pids limit), the agent
 * directory bind-mounted read-only at /opt/mcp-sandboxd, a per-container
 * read-only /sandbox holding the code and stdin files and a writable /data;
 * frames over the container's attach stream, demultiplexed with
 * lib/backend/docker/docker_stream.h and decoded with
 * lib/run/warm/agentframe.h. TAP output; skips when no engine answers or an
 * image is missing. Every container it starts is removed, also on failure.
 *
 *   test_agent_docker AGENT_BINARY KERNEL_PY
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/docker/docker.h"
#include "backend/docker/docker_stream.h"
#include "backend/seccomp.h"
#include "run/warm/agentframe.h"
#include "tap.h"
#include "util/buf.h"

#define IMG_PY "mcp-sandboxd/runner-python:latest"
#define IMG_BASH "mcp-sandboxd/runner-bash:latest"
#define IMG_TS "mcp-sandboxd/runner-typescript:latest"
#define OWNER "it-agent"
#define FLOOD_BYTES (1600ull * 65536ull) /* 100 MiB */
#define MAX_CTRS 16

static char root[] = "/tmp/mcpsd-agent-it-XXXXXX";
static struct docker *dk;
static char *seccomp_opt;
static char started[MAX_CTRS][DOCKER_ID_LEN + 1];
static int n_started;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Removes every container this test started; safe to call twice. */
static void cleanup(void)
{
	char err[256], cmd[600];

	for (int i = 0; i < n_started; i++) {
		if (started[i][0] && dk &&
		    docker_container_remove(dk, started[i], err, sizeof(err)) <
		        0)
			printf("# remove %s: %s\n", started[i], err);
		started[i][0] = '\0';
	}
	if (root[sizeof(root) - 7] != 'X') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", root);
	}
}

static void on_signal(int sig)
{
	cleanup();
	_exit(128 + sig);
}

/* ---- a container running the agent ------------------------------------ */

struct frame {
	unsigned char type;
	unsigned char *p;
	size_t n;
};

struct ctr {
	char id[DOCKER_ID_LEN + 1];
	char dir[256]; /* host side: sandbox/ and data/ */
	struct docker_attach *at;
	struct docker_stream ds;
	struct agentframe_decoder dec;
	struct frame *q; /* received, not yet taken */
	size_t qn, qcap, qhead;
	bool eof;
	bool count_only; /* flood: count o/e instead of keeping them */
	unsigned long long o_bytes, e_bytes, o_frames;
	size_t max_out;       /* largest o/e payload seen */
	bool bad;             /* a malformed frame from the agent */
	cJSON *ready;         /* the last R */
	unsigned r_unclaimed; /* R frames collect() passed */
};

static int frame_fn(void *arg, unsigned char type, const unsigned char *p,
                    size_t n)
{
	struct ctr *c = arg;

	if (type == 'o' || type == 'e') {
		if (n > c->max_out)
			c->max_out = n;
		if (c->count_only) {
			if (type == 'o') {
				c->o_bytes += n;
				c->o_frames++;
			} else {
				c->e_bytes += n;
			}
			return 0;
		}
	}
	if (type == 'L') {
		printf("#   agent log: %.*s\n", (int)n, (const char *)p);
		return 0;
	}
	if (type == 'R') {
		cJSON_Delete(c->ready);
		c->ready = cJSON_ParseWithLength((const char *)p, n);
	}
	if (c->qn == c->qcap) {
		size_t ncap = c->qcap ? c->qcap * 2 : 64;
		struct frame *nq;

		if (c->qhead > 0) {
			memmove(c->q, c->q + c->qhead,
			        (c->qn - c->qhead) * sizeof(*c->q));
			c->qn -= c->qhead;
			c->qhead = 0;
		}
		if (c->qn == c->qcap) {
			nq = realloc(c->q, ncap * sizeof(*nq));
			if (!nq)
				return -ENOMEM;
			c->q = nq;
			c->qcap = ncap;
		}
	}
	c->q[c->qn].type = type;
	c->q[c->qn].n = n;
	c->q[c->qn].p = malloc(n + 1);
	if (!c->q[c->qn].p)
		return -ENOMEM;
	memcpy(c->q[c->qn].p, p, n);
	c->q[c->qn].p[n] = '\0';
	c->qn++;
	return 0;
}

static int stream_fn(void *arg, enum docker_stream_id id, const char *p,
                     size_t n)
{
	struct ctr *c = arg;

	if (id == DOCKER_STREAM_STDOUT) {
		if (agentframe_feed(&c->dec, p, n, frame_fn, c) < 0)
			c->bad = true;
		return 0;
	}
	printf("#   agent stderr: %.*s\n", (int)(n > 300 ? 300 : n), p);
	return 0;
}

/* Reads what the stream has, waiting up to wait_ms. */
static void ctr_pump(struct ctr *c, int wait_ms)
{
	static char chunk[256 * 1024];
	struct pollfd pf = {docker_attach_fd(c->at), POLLIN, 0};

	if (c->eof)
		return;
	if (!docker_attach_pending(c->at) && poll(&pf, 1, wait_ms) <= 0)
		return;
	for (int i = 0; i < 64; i++) {
		ssize_t r = docker_attach_read(c->at, chunk, sizeof(chunk));

		if (r == -EAGAIN)
			return;
		if (r <= 0) {
			c->eof = true;
			return;
		}
		if (docker_stream_feed(&c->ds, chunk, (size_t)r) < 0) {
			c->bad = true;
			c->eof = true;
			return;
		}
	}
}

/* The next frame, or -ETIMEDOUT / -EPIPE (end of stream). */
static int ctr_next(struct ctr *c, long long deadline, struct frame *f)
{
	for (;;) {
		if (c->qhead < c->qn) {
			*f = c->q[c->qhead++];
			return 0;
		}
		if (c->eof)
			return -EPIPE;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		ctr_pump(c, (int)(deadline - now_ms()));
	}
}

static int ctr_send(struct ctr *c, unsigned char type, const void *p, size_t n)
{
	unsigned char h[AGENTFRAME_HDR];
	struct buf b;
	size_t off = 0;
	long long deadline = now_ms() + 10000;
	int rc = 0;

	if (agentframe_header(h, type, n, AGENTFRAME_MAX_IN) < 0)
		return -EMSGSIZE;
	buf_init(&b, 0);
	if (buf_append(&b, h, sizeof(h)) < 0 || buf_append(&b, p, n) < 0) {
		buf_finish(&b);
		return -ENOMEM;
	}
	while (off < b.len) {
		ssize_t w =
		    docker_attach_write(c->at, b.data + off, b.len - off);

		if (w == -EAGAIN) {
			struct pollfd pf = {docker_attach_fd(c->at), POLLOUT,
			                    0};

			if (now_ms() > deadline) {
				rc = -ETIMEDOUT;
				break;
			}
			/* Keep reading so the agent is never stuck on us. */
			ctr_pump(c, 0);
			poll(&pf, 1, 50);
			continue;
		}
		if (w < 0) {
			rc = (int)w;
			break;
		}
		off += (size_t)w;
	}
	buf_finish(&b);
	return rc;
}

static void tlv(struct buf *b, unsigned char tag, const char *v)
{
	unsigned char rec[4096 + AGENTFRAME_TLV_HDR];
	size_t off = 0;

	if (agentframe_tlv_put(rec, sizeof(rec), &off, tag, v, strlen(v)) < 0 ||
	    buf_append(b, rec, off) < 0)
		abort();
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fputs(text, f);
	if (fclose(f) != 0)
		return -EIO;
	return chmod(path, 0644) < 0 ? -errno : 0;
}

static void ctr_finish(struct ctr *c)
{
	char err[256];

	docker_attach_close(c->at);
	c->at = NULL;
	if (c->id[0]) {
		if (docker_container_remove(dk, c->id, err, sizeof(err)) < 0)
			printf("# remove %s: %s\n", c->id, err);
		for (int i = 0; i < n_started; i++)
			if (strcmp(started[i], c->id) == 0)
				started[i][0] = '\0';
	}
	for (size_t i = c->qhead; i < c->qn; i++)
		free(c->q[i].p);
	free(c->q);
	agentframe_decoder_finish(&c->dec);
	cJSON_Delete(c->ready);
	memset(c, 0, sizeof(*c));
}

/* init: Docker's init as PID 1 (Init: true); false runs the agent as PID 1.
 */
static int ctr_start_with(struct ctr *c, const char *image,
                          const char *const *args, size_t nargs, bool init)
{
	static int seq;
	const char *cmd[16];
	const char *env[] = {"HOME=/tmp", "LANG=C.UTF-8"};
	char sandbox[300], data[300], agentdir[300], deadline[32], err[512];
	struct docker_kv labels[3];
	struct docker_kv tmpfs[] = {
	    {"/tmp", "rw,exec,nosuid,nodev,size=64m,mode=1777"}};
	struct docker_ulimit ulimits[] = {{"nofile", 1024, 1024},
	                                  {"core", 0, 0}};
	const char *capdrop[] = {"ALL"};
	const char *secopt[] = {"no-new-privileges:true", seccomp_opt};
	struct docker_mount mounts[3];
	struct docker_create_opts o;
	size_t nc = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "%s/c%d", root, ++seq);
	snprintf(sandbox, sizeof(sandbox), "%s/sandbox", c->dir);
	snprintf(data, sizeof(data), "%s/data", c->dir);
	snprintf(agentdir, sizeof(agentdir), "%s/agent", root);
	if (mkdir(c->dir, 0755) < 0 || mkdir(sandbox, 0755) < 0 ||
	    mkdir(data, 0755) < 0 || chown(data, 64321, 64321) < 0)
		return -errno;
	cmd[nc++] = "/opt/mcp-sandboxd/mcpsd-agent";
	for (size_t i = 0; i < nargs && nc < 15; i++)
		cmd[nc++] = args[i];
	snprintf(deadline, sizeof(deadline), "%lld",
	         (long long)time(NULL) + 3600);
	labels[0] = (struct docker_kv){"sandbox.managed", "true"};
	labels[1] = (struct docker_kv){"sandbox.owner", OWNER};
	labels[2] = (struct docker_kv){"sandbox.deadline", deadline};
	mounts[0] = (struct docker_mount){.source = agentdir,
	                                  .target = "/opt/mcp-sandboxd",
	                                  .read_only = true};
	mounts[1] = (struct docker_mount){
	    .source = sandbox, .target = "/sandbox", .read_only = true};
	mounts[2] = (struct docker_mount){.source = data, .target = "/data"};
	memset(&o, 0, sizeof(o));
	o.image = image;
	o.cmd = cmd;
	o.n_cmd = nc;
	o.env = env;
	o.n_env = 2;
	o.labels = labels;
	o.n_labels = 3;
	o.user = "64321:64321";
	o.working_dir = "/data";
	o.open_stdin = true;
	o.memory_bytes = 256ll << 20;
	o.memory_swap_bytes = 256ll << 20;
	o.nano_cpus = 1000000000ll;
	o.pids_limit = 128;
	o.oom_score_adj = 1000;
	o.network_mode = "none";
	o.readonly_rootfs = true;
	o.init = init;
	o.ipc_mode = "private";
	o.tmpfs = tmpfs;
	o.n_tmpfs = 1;
	o.ulimits = ulimits;
	o.n_ulimits = 2;
	o.cap_drop = capdrop;
	o.n_cap_drop = 1;
	o.security_opt = secopt;
	o.n_security_opt = 2;
	o.mounts = mounts;
	o.n_mounts = 3;
	o.log_driver = "none";
	rc = docker_container_create(dk, NULL, &o, c->id, err, sizeof(err));
	if (rc < 0) {
		printf("# create: %s\n", err);
		c->id[0] = '\0';
		return rc;
	}
	if (n_started < MAX_CTRS)
		snprintf(started[n_started++], DOCKER_ID_LEN + 1, "%s", c->id);
	docker_stream_init(&c->ds, 0, stream_fn, c);
	agentframe_decoder_init(&c->dec, AGENTFRAME_MAX);
	rc = docker_container_attach(dk, c->id, &c->at, err, sizeof(err));
	if (rc == 0)
		rc = docker_container_start(dk, c->id, err, sizeof(err));
	if (rc < 0)
		printf("# attach/start: %s\n", err);
	return rc;
}

static int ctr_start(struct ctr *c, const char *image, const char *const *args,
                     size_t nargs)
{
	return ctr_start_with(c, image, args, nargs, true);
}

/*
 * Waits for the next R not yet waited for (collect() may have passed it);
 * returns it (borrowed) or NULL.
 */
static cJSON *ctr_ready(struct ctr *c, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	struct frame f;

	if (c->r_unclaimed) {
		c->r_unclaimed--;
		return c->ready;
	}
	while (ctr_next(c, deadline, &f) == 0) {
		free(f.p);
		if (f.type == 'R')
			return c->ready;
	}
	return NULL;
}

/* ---- execs --------------------------------------------------------------- */

struct result {
	struct buf out, err;
	cJSON *x, *d;
	bool order_ok; /* no o/e after X */
	bool r_seen;   /* an R arrived during the exec */
	double us;     /* E sent to D received */
};

static void result_init(struct result *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->out, 8u << 20);
	buf_init(&r->err, 8u << 20);
	r->order_ok = true;
}

static void result_finish(struct result *r)
{
	buf_finish(&r->out);
	buf_finish(&r->err);
	cJSON_Delete(r->x);
	cJSON_Delete(r->d);
	memset(r, 0, sizeof(*r));
}

/* Collects an exec's frames up to its D. */
static int collect(struct ctr *c, unsigned long long id, struct result *r,
                   double t0, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	struct frame f;
	int rc;

	while ((rc = ctr_next(c, deadline, &f)) == 0) {
		unsigned char t = f.type;

		if ((t == 'o' || t == 'e') && (r->x || r->d))
			r->order_ok = false;
		if ((t == 'o' && buf_append(&r->out, f.p, f.n) < 0) ||
		    (t == 'e' && buf_append(&r->err, f.p, f.n) < 0))
			r->order_ok = false; /* over 8 MiB: not expected */
		else if (t == 'X')
			r->x = cJSON_ParseWithLength((char *)f.p, f.n);
		else if (t == 'R') {
			r->r_seen = true;
			c->r_unclaimed++;
		} else if (t == 'D') {
			cJSON *d = cJSON_ParseWithLength((char *)f.p, f.n);
			cJSON *jid = cJSON_GetObjectItem(d, "id");

			if (cJSON_IsNumber(jid) &&
			    (unsigned long long)jid->valuedouble == id) {
				r->us = now_us() - t0;
				r->d = d;
				free(f.p);
				return 0;
			}
			printf("#   D for another exec: %s\n", f.p);
			cJSON_Delete(d);
		}
		free(f.p);
	}
	printf("#   exec %llu: %s\n", id,
	       rc == -EPIPE ? "stream ended" : "no D in time");
	return rc;
}

static unsigned long long next_id = 1;

/* Runs Python code in the kernel. stdin_data and env (NULL-terminated
 * NAME=value) are optional. */
static int kexec(struct ctr *c, const char *code, const char *stdin_data,
                 const char *const *env, struct result *r, int timeout_ms)
{
	unsigned long long id = next_id++;
	char host[400], path[64], ids[24];
	struct buf b;
	double t0;
	int rc;

	result_init(r);
	snprintf(path, sizeof(path), "/sandbox/code-%llu.py", id);
	snprintf(host, sizeof(host), "%s/sandbox/code-%llu.py", c->dir, id);
	snprintf(ids, sizeof(ids), "%llu", id);
	if (write_file(host, code) < 0)
		return -EIO;
	buf_init(&b, 0);
	tlv(&b, 'n', ids);
	tlv(&b, 'k', "1");
	tlv(&b, 'f', path);
	tlv(&b, 'c', "/data");
	if (stdin_data) {
		snprintf(host, sizeof(host), "%s/sandbox/stdin-%llu", c->dir,
		         id);
		snprintf(path, sizeof(path), "/sandbox/stdin-%llu", id);
		if (write_file(host, stdin_data) < 0)
			return -EIO;
		tlv(&b, 'i', path);
	}
	for (size_t i = 0; env && env[i]; i++)
		tlv(&b, 'v', env[i]);
	t0 = now_us();
	rc = ctr_send(c, 'E', b.data, b.len);
	buf_finish(&b);
	if (rc < 0)
		return rc;
	return collect(c, id, r, t0, timeout_ms);
}

/* Sends a process exec; collect() separately (flood tests) or pexec(). */
static int psend(struct ctr *c, unsigned long long id, const char *const *argv,
                 const char *stdin_data, const char *const *env,
                 const char *cwd)
{
	char host[400], path[64], ids[24];
	struct buf b;
	int rc;

	buf_init(&b, 0);
	snprintf(ids, sizeof(ids), "%llu", id);
	tlv(&b, 'n', ids);
	for (size_t i = 0; argv[i]; i++)
		tlv(&b, 'a', argv[i]);
	if (stdin_data) {
		snprintf(host, sizeof(host), "%s/sandbox/stdin-%llu", c->dir,
		         id);
		snprintf(path, sizeof(path), "/sandbox/stdin-%llu", id);
		if (write_file(host, stdin_data) < 0)
			return -EIO;
		tlv(&b, 'i', path);
	}
	for (size_t i = 0; env && env[i]; i++)
		tlv(&b, 'v', env[i]);
	if (cwd)
		tlv(&b, 'c', cwd);
	rc = ctr_send(c, 'E', b.data, b.len);
	buf_finish(&b);
	return rc;
}

static int pexec(struct ctr *c, const char *const *argv, const char *stdin_data,
                 const char *const *env, struct result *r, int timeout_ms)
{
	unsigned long long id = next_id++;
	double t0 = now_us();
	int rc;

	result_init(r);
	rc = psend(c, id, argv, stdin_data, env, "/data");
	if (rc < 0)
		return rc;
	return collect(c, id, r, t0, timeout_ms);
}

static int send_id(struct ctr *c, unsigned char type, unsigned long long id)
{
	char ids[24];
	struct buf b;
	int rc;

	buf_init(&b, 0);
	snprintf(ids, sizeof(ids), "%llu", id);
	tlv(&b, 'n', ids);
	rc = ctr_send(c, type, b.data, b.len);
	buf_finish(&b);
	return rc;
}

/* ---- JSON helpers ---------------------------------------------------- */

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);

	return cJSON_IsString(v) ? v->valuestring : "(none)";
}

/* A number, -1 for null, -2 when missing. */
static long long jnum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);

	if (cJSON_IsNull(v))
		return -1;
	return cJSON_IsNumber(v) ? (long long)v->valuedouble : -2;
}

static bool jtrue(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(o, k));
}

static const char *value_text(const struct result *r, const char *mime)
{
	const cJSON *v = cJSON_GetObjectItem(r->x, "value");

	return jstr(v, mime);
}

static const char *rtext(struct buf *b)
{
	return b->data ? b->data : "";
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- process-only containers ----------------------------------------- */

static void test_bash(void)
{
	const char *const echo[] = {"bash", "-c", "echo hi", NULL};
	const char *const mix[] = {
	    "bash", "-c",
	    "echo \"$FOO|$HOME|$(pwd)\"; tr a-z A-Z; echo oops >&2; exit 3",
	    NULL};
	const char *const env[] = {"FOO=bar baz", "HOME=/elsewhere", NULL};
	const char *const bg[] = {
	    "bash", "-c", "setsid sleep 300 & (sleep 301 &); echo started",
	    NULL};
	const char *const look[] = {
	    "bash", "-c",
	    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | "
	    "grep -c '^sleep 30' || true",
	    NULL};
	const char *const missing[] = {"no-such-program", NULL};
	const char *const yes[] = {"yes", "0123456789abcdef", NULL};
	struct ctr c;
	struct result r;
	cJSON *rd;
	double lat[50], med;
	struct frame f;

	printf("# bash: process execs\n");
	if (ctr_start(&c, IMG_BASH, NULL, 0) < 0) {
		ok(0, "bash container started");
		ctr_finish(&c);
		return;
	}
	rd = ctr_ready(&c, 30000);
	ok(rd && cJSON_IsFalse(cJSON_GetObjectItem(rd, "kernel")) &&
	       jnum(rd, "v") == 1 &&
	       cJSON_IsNull(cJSON_GetObjectItem(rd, "lost")),
	   "bash: R without a kernel");

	if (pexec(&c, echo, NULL, NULL, &r, 30000) == 0) {
		is_str(rtext(&r.out), "hi\n", "bash: echo hi");
		is_int(jnum(r.d, "exit_code"), 0, "bash: exit 0");
		is_str(jstr(r.d, "kernel"), "none", "bash: kernel none");
		ok(jnum(cJSON_GetObjectItem(r.d, "mem"), "limit") == 256 << 20,
		   "bash: memory limit from the cgroup");
	} else
		ok(0, "bash: echo ran");
	result_finish(&r);

	if (pexec(&c, mix, "some input\n", env, &r, 30000) == 0) {
		is_str(rtext(&r.out), "bar baz|/elsewhere|/data\nSOME INPUT\n",
		       "bash: env, cwd and stdin");
		is_str(rtext(&r.err), "oops\n", "bash: stderr");
		is_int(jnum(r.d, "exit_code"), 3, "bash: exit code 3");
		ok(r.order_ok, "bash: output before D");
	} else
		ok(0, "bash: mix ran");
	result_finish(&r);

	if (pexec(&c, missing, NULL, NULL, &r, 30000) == 0) {
		is_int(jnum(r.d, "exit_code"), 127, "missing program: 127");
		ok(strstr(rtext(&r.err), "no-such-program") != NULL,
		   "missing program: said on stderr");
	} else
		ok(0, "missing ran");
	result_finish(&r);

	{
		const char *const slp[] = {"sleep", "100", NULL};
		unsigned long long id = next_id++;
		double t0 = now_us();

		result_init(&r);
		if (psend(&c, id, slp, NULL, NULL, "/data") == 0) {
			usleep(300000);
			(void)send_id(&c, 'I', id);
			if (collect(&c, id, &r, t0, 30000) == 0)
				ok(jtrue(r.d, "interrupted") &&
				       jnum(r.d, "signal") == SIGINT &&
				       jnum(r.d, "exit_code") == -1,
				   "I: sleep ends by SIGINT");
			else
				ok(0, "I: D");
		} else
			ok(0, "sleep sent");
		result_finish(&r);
	}

	if (pexec(&c, bg, NULL, NULL, &r, 30000) == 0) {
		is_str(rtext(&r.out), "started\n", "background: started");
		is_int(jnum(r.d, "swept"), 2, "background: 2 processes swept");
	} else
		ok(0, "background ran");
	result_finish(&r);
	if (pexec(&c, look, NULL, NULL, &r, 30000) == 0)
		is_str(rtext(&r.out), "0\n",
		       "background: none left at the next exec");
	else
		ok(0, "look ran");
	result_finish(&r);

	/* An endless flood: the agent still answers P, and K stops it. */
	{
		unsigned long long id = next_id++;
		long long deadline;
		double t0 = now_us(), tp;
		bool pong = false;

		c.count_only = true;
		c.o_bytes = 0;
		c.max_out = 0;
		if (psend(&c, id, yes, NULL, NULL, "/data") == 0) {
			deadline = now_ms() + 60000;
			while (c.o_bytes < (20u << 20) && now_ms() < deadline &&
			       !c.eof)
				ctr_pump(&c, 100);
			ok(c.o_bytes >= (20u << 20),
			   "flood: 20 MB streamed (%llu bytes)", c.o_bytes);
			tp = now_us();
			(void)ctr_send(&c, 'P', NULL, 0);
			while (!pong &&
			       ctr_next(&c, now_ms() + 20000, &f) == 0) {
				pong = f.type == 'p';
				free(f.p);
			}
			ok(pong, "flood: P answered in %.1f ms while flooding",
			   (now_us() - tp) / 1000);
			(void)send_id(&c, 'K', id);
			result_init(&r);
			if (collect(&c, id, &r, t0, 30000) == 0) {
				ok(jtrue(r.d, "killed") &&
				       jnum(r.d, "signal") == SIGKILL,
				   "flood: K kills it (signal %lld)",
				   jnum(r.d, "signal"));
			} else
				ok(0, "flood: D after K");
			result_finish(&r);
			ok(c.max_out <= AGENTFRAME_OUTPUT_CHUNK,
			   "flood: output frames at most 64 KiB (%zu)",
			   c.max_out);
		} else
			ok(0, "flood sent");
		c.count_only = false;
	}

	for (int i = 0; i < 50; i++) {
		if (pexec(&c, echo, NULL, NULL, &r, 30000) < 0) {
			lat[i] = 1e9;
			result_finish(&r);
			continue;
		}
		lat[i] = r.us;
		result_finish(&r);
	}
	med = median(lat, 50); /* sorts lat */
	printf("# LATENCY bash `echo hi` E to D: median %.2f ms over 50 "
	       "(min %.2f, max %.2f)\n",
	       med / 1000, lat[0] / 1000, lat[49] / 1000);
	ok(lat[49] < 1e9, "bash: 50 warm execs completed");
	ctr_finish(&c);
}

static void test_typescript(void)
{
	const char *const run[] = {"bun", "run", "--no-install",
	                           "/sandbox/main.ts", NULL};
	const char *const env[] = {"GREETING=hello", NULL};
	char path[400];
	struct ctr c;
	struct result r;

	printf("# typescript: process execs with bun\n");
	if (ctr_start(&c, IMG_TS, NULL, 0) < 0 || !ctr_ready(&c, 30000)) {
		ok(0, "typescript container ready");
		ctr_finish(&c);
		return;
	}
	snprintf(path, sizeof(path), "%s/sandbox/main.ts", c.dir);
	if (write_file(path, "const t: string = await Bun.stdin.text();\n"
	                     "console.log(process.env.GREETING, t.trim());\n"
	                     "console.error('to stderr');\n"
	                     "process.exit(4);\n") < 0) {
		ok(0, "main.ts written");
		ctr_finish(&c);
		return;
	}
	if (pexec(&c, run, "world\n", env, &r, 60000) == 0) {
		is_str(rtext(&r.out), "hello world\n", "bun: stdin and env");
		is_str(rtext(&r.err), "to stderr\n", "bun: stderr");
		is_int(jnum(r.d, "exit_code"), 4, "bun: exit code 4");
	} else
		ok(0, "bun ran");
	result_finish(&r);
	ctr_finish(&c);
}

/* ---- the Python kernel ------------------------------------------------- */

static bool has_file(const struct ctr *c, const char *name)
{
	char path[400];
	struct stat st;

	snprintf(path, sizeof(path), "%s/data/%s", c->dir, name);
	return stat(path, &st) == 0 && st.st_size > 1000;
}

/* Claims the container for /data (once: for one program) and checks the A. */
static void claim(struct ctr *c, bool once, const char *what)
{
	struct buf b;
	struct frame f;
	cJSON *a = NULL;

	buf_init(&b, 0);
	tlv(&b, 'c', "/data");
	if (once)
		tlv(&b, 'o', "1");
	(void)ctr_send(c, 'C', b.data, b.len);
	buf_finish(&b);
	while (!a && ctr_next(c, now_ms() + 10000, &f) == 0) {
		if (f.type == 'A')
			a = cJSON_ParseWithLength((char *)f.p, f.n);
		free(f.p);
	}
	ok(a && strcmp(jstr(a, "cwd"), "/data") == 0 &&
	       cJSON_IsNull(cJSON_GetObjectItem(a, "error")),
	   "%s", what);
	cJSON_Delete(a);
}

static void test_python(void)
{
	const char *const args[] = {
	    "--preload", "numpy,pandas,matplotlib.pyplot",
	    "--kernel",  "python3",
	    "-u",        "/opt/mcp-sandboxd/kernel.py"};
	const char *const env[] = {"CALL_VAR=42", NULL};
	struct ctr c;
	struct result r;
	cJSON *rd, *pre;
	char name[64];
	double lat[50], med;
	long long t_ready;

	printf("# python: the kernel\n");
	if (ctr_start(&c, IMG_PY, args, 6) < 0) {
		ok(0, "python container started");
		ctr_finish(&c);
		return;
	}
	t_ready = now_ms();
	rd = ctr_ready(&c, 120000);
	pre = cJSON_GetObjectItem(rd, "preloaded");
	ok(rd && jtrue(rd, "kernel") && cJSON_GetArraySize(pre) == 3,
	   "R: kernel with 3 modules preloaded (kernel start %lld ms, R "
	   "after %lld ms)",
	   jnum(rd, "ms"), now_ms() - t_ready);

	if (kexec(&c,
	          "import sys\nprint('pandas' in sys.modules, "
	          "'matplotlib.pyplot' in sys.modules, 'pandas' in dir())",
	          NULL, NULL, &r, 30000) == 0) {
		is_str(rtext(&r.out), "True True False\n",
		       "preloaded into sys.modules, not the namespace");
		printf("# LATENCY python first exec after R: %.2f ms\n",
		       r.us / 1000);
	} else
		ok(0, "preload check ran");
	result_finish(&r);

	/* The claim of a pool container. */
	claim(&c, false, "C answered by A with the directory");

	/* State across calls. */
	if (kexec(&c,
	          "import math, os\nx = 41\ndef f(y):\n    return x + y\n"
	          "print('stdin:', input())\nprint(os.environ['CALL_VAR'])",
	          "line one\n", env, &r, 30000) == 0) {
		is_str(rtext(&r.out), "stdin: line one\n42\n",
		       "kernel: stdin and env of the call");
		is_str(jstr(r.x, "status"), "ok", "kernel: status ok");
		is_str(jstr(r.d, "kernel"), "kept", "kernel: kept");
	} else
		ok(0, "state 1 ran");
	result_finish(&r);
	if (kexec(&c,
	          "import os\nprint(f(1), round(math.pi, 2), "
	          "os.environ.get('CALL_VAR'), os.getcwd())\nf(2) * 2",
	          NULL, NULL, &r, 30000) == 0) {
		is_str(rtext(&r.out), "42 3.14 None /data\n",
		       "kernel: variables, imports and functions kept; env "
		       "restored");
		is_str(value_text(&r, "text/plain"), "86",
		       "kernel: last expression value");
	} else
		ok(0, "state 2 ran");
	result_finish(&r);

	/* A DataFrame as a table, in text and HTML. */
	if (kexec(&c,
	          "import pandas as pd\n"
	          "df = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, "
	          "19.25]})\ndf",
	          NULL, NULL, &r, 60000) == 0) {
		const char *t = value_text(&r, "text/plain");

		ok(strstr(t, "city") && strstr(t, "Lima") && strstr(t, "19.25"),
		   "DataFrame: text/plain table");
		ok(strstr(value_text(&r, "text/html"), "<table") != NULL,
		   "DataFrame: text/html");
	} else
		ok(0, "dataframe ran");
	result_finish(&r);

	/* Markdown from an object's own method. */
	if (kexec(&c,
	          "class M:\n    def _repr_markdown_(self):\n        return "
	          "'**bold**'\nM()",
	          NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/markdown"), "**bold**",
		       "value: _repr_markdown_");
	else
		ok(0, "markdown ran");
	result_finish(&r);

	/* Figures: at plt.show() and at the end. */
	if (kexec(&c,
	          "import matplotlib.pyplot as plt, os, glob\n"
	          "plt.plot([1, 2, 3])\nplt.show()\n"
	          "print(sorted(glob.glob('figure-*.png')))\n"
	          "plt.figure()\nplt.bar([1, 2], [3, 4])\n",
	          NULL, NULL, &r, 60000) == 0) {
		cJSON *figs = cJSON_GetObjectItem(r.x, "figures");
		unsigned long long id = (unsigned long long)jnum(r.x, "id");

		snprintf(name, sizeof(name), "['figure-%llu-1.png']\n", id);
		is_str(rtext(&r.out), name, "figure saved when plt.show() ran");
		ok(cJSON_GetArraySize(figs) == 2, "X lists 2 figures");
		snprintf(name, sizeof(name), "figure-%llu-2.png", id);
		ok(has_file(&c, name + 0) &&
		       has_file(&c, cJSON_GetArrayItem(figs, 0)->valuestring),
		   "both PNG files are in /data");
	} else
		ok(0, "figures ran");
	result_finish(&r);

	/* An exception. */
	if (kexec(&c, "y = 1\n\ndef g():\n    return 1 / 0\n\ng()\n", NULL,
	          NULL, &r, 30000) == 0) {
		cJSON *e = cJSON_GetObjectItem(r.x, "error");
		const char *tb = jstr(e, "traceback");

		is_str(jstr(r.x, "status"), "error", "exception: status error");
		is_str(jstr(e, "ename"), "ZeroDivisionError",
		       "exception: ename");
		ok(strstr(tb, "line 4, in g") && strstr(tb, "line 6") &&
		       !strstr(tb, "kernel.py"),
		   "exception: traceback on the user's lines only");
		ok(strstr(rtext(&r.err), "ZeroDivisionError") != NULL,
		   "exception: traceback on stderr");
		is_int(jnum(r.d, "exit_code"), 1, "exception: exit_code 1");
	} else
		ok(0, "exception ran");
	result_finish(&r);

	/* Interrupts keep the state. */
	{
		static const char *const loops[] = {
		    "while True:\n    pass\n",
		    "import time\ntime.sleep(100)\n"};

		for (int i = 0; i < 2; i++) {
			unsigned long long id = next_id++;
			char host[400], path[64], ids[24];
			struct buf b;
			double t0;

			snprintf(host, sizeof(host), "%s/sandbox/code-%llu.py",
			         c.dir, id);
			snprintf(path, sizeof(path), "/sandbox/code-%llu.py",
			         id);
			snprintf(ids, sizeof(ids), "%llu", id);
			if (write_file(host, loops[i]) < 0)
				continue;
			buf_init(&b, 0);
			tlv(&b, 'n', ids);
			tlv(&b, 'k', "1");
			tlv(&b, 'f', path);
			tlv(&b, 'c', "/data");
			t0 = now_us();
			(void)ctr_send(&c, 'E', b.data, b.len);
			buf_finish(&b);
			usleep(500000);
			(void)send_id(&c, 'I', id);
			result_init(&r);
			if (collect(&c, id, &r, t0, 30000) == 0) {
				ok(strcmp(jstr(r.x, "status"), "interrupted") ==
				           0 &&
				       jtrue(r.d, "interrupted") &&
				       strcmp(jstr(r.d, "kernel"), "kept") == 0,
				   "interrupt of %s: interrupted, kernel kept",
				   i ? "time.sleep" : "a busy loop");
			} else
				ok(0, "interrupt %d: D", i);
			result_finish(&r);
		}
		if (kexec(&c, "x", NULL, NULL, &r, 30000) == 0)
			is_str(value_text(&r, "text/plain"), "41",
			       "after the interrupts: state kept");
		else
			ok(0, "after interrupt ran");
		result_finish(&r);
	}

	/* SIGINT while idle does not hurt the kernel. */
	{
		char err[256];

		ok(docker_container_kill(dk, c.id, "INT", err, sizeof(err)) ==
		       0,
		   "SIGINT to the container while idle");
		usleep(300000);
		if (kexec(&c, "x + 1", NULL, NULL, &r, 30000) == 0)
			is_str(value_text(&r, "text/plain"), "42",
			       "idle SIGINT: state kept");
		else
			ok(0, "after idle SIGINT ran");
		result_finish(&r);
	}

	/* SIGINT reaching the kernel itself between calls is ignored. */
	if (kexec(&c,
	          "import threading, os, signal\n"
	          "threading.Timer(0.3, os.kill, (os.getpid(), "
	          "signal.SIGINT)).start()",
	          NULL, NULL, &r, 30000) == 0) {
		result_finish(&r);
		usleep(800000);
		if (kexec(&c, "x + 2", NULL, NULL, &r, 30000) == 0)
			ok(strcmp(value_text(&r, "text/plain"), "43") == 0 &&
			       !r.r_seen,
			   "SIGINT to the idle kernel: state kept");
		else
			ok(0, "after kernel SIGINT ran");
	} else
		ok(0, "timer ran");
	result_finish(&r);

	/* A background process is swept and counted. */
	if (kexec(&c,
	          "import subprocess\np = subprocess.Popen(['sleep', '300'], "
	          "start_new_session=True)\nprint('bg')",
	          NULL, NULL, &r, 30000) == 0) {
		is_int(jnum(r.d, "swept"), 1, "background: 1 process swept");
	} else
		ok(0, "background ran");
	result_finish(&r);
	if (kexec(&c,
	          "import os\nn = 0\nfor p in os.listdir('/proc'):\n"
	          "    try:\n        s = open(f'/proc/{p}/stat').read()\n"
	          "    except OSError:\n        continue\n"
	          "    if '(sleep)' in s and s.rsplit(')', 1)[1].split()[0] != "
	          "'Z':\n        n += 1\nn",
	          NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "0",
		       "background: no sleep alive at the next exec");
	else
		ok(0, "background check ran");
	result_finish(&r);

	/* A 100 MiB flood in bounded frames, then the kernel still works. */
	c.count_only = true;
	c.o_bytes = c.o_frames = 0;
	c.max_out = 0;
	if (kexec(&c,
	          "import sys\nb = b'x' * 65536\nfor i in range(1600):\n"
	          "    sys.stdout.buffer.write(b)\nsys.stdout.flush()\n'done'",
	          NULL, NULL, &r, 300000) == 0) {
		ok(c.o_bytes == FLOOD_BYTES,
		   "flood: %llu bytes in %llu frames (want %llu), %.0f ms",
		   c.o_bytes, c.o_frames, FLOOD_BYTES, r.us / 1000);
		ok(c.max_out <= AGENTFRAME_OUTPUT_CHUNK,
		   "flood: frames at most 64 KiB (%zu)", c.max_out);
		is_str(value_text(&r, "text/plain"), "'done'",
		       "flood: X after the output");
	} else
		ok(0, "flood ran");
	result_finish(&r);

	/* An endless flood in the kernel: I interrupts it, state kept. */
	{
		unsigned long long id = next_id++;
		char host[400], path[64], ids[24];
		struct buf b;
		double t0 = now_us();

		snprintf(host, sizeof(host), "%s/sandbox/code-%llu.py", c.dir,
		         id);
		snprintf(path, sizeof(path), "/sandbox/code-%llu.py", id);
		snprintf(ids, sizeof(ids), "%llu", id);
		c.o_bytes = 0;
		if (write_file(
		        host, "import sys\nb = b'y' * 65536\nwhile "
		              "True:\n    sys.stdout.buffer.write(b)\n") == 0) {
			buf_init(&b, 0);
			tlv(&b, 'n', ids);
			tlv(&b, 'k', "1");
			tlv(&b, 'f', path);
			(void)ctr_send(&c, 'E', b.data, b.len);
			buf_finish(&b);
			while (c.o_bytes < (10u << 20) && !c.eof &&
			       now_us() - t0 < 60e6)
				ctr_pump(&c, 100);
			(void)send_id(&c, 'I', id);
			result_init(&r);
			if (collect(&c, id, &r, t0, 30000) == 0)
				ok(strcmp(jstr(r.x, "status"), "interrupted") ==
				           0 &&
				       strcmp(jstr(r.d, "kernel"), "kept") == 0,
				   "endless flood: interrupted, kernel kept");
			else
				ok(0, "endless flood: D after I");
			result_finish(&r);
		}
	}
	c.count_only = false;
	if (kexec(&c, "x", NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "41",
		       "after the floods: state kept");
	else
		ok(0, "after flood ran");
	result_finish(&r);

	/* Latency of a warm print(1). */
	for (int i = 0; i < 50; i++) {
		if (kexec(&c, "print(1)", NULL, NULL, &r, 30000) < 0 ||
		    strcmp(rtext(&r.out), "1\n") != 0) {
			lat[i] = 1e9;
			result_finish(&r);
			continue;
		}
		lat[i] = r.us;
		result_finish(&r);
	}
	med = median(lat, 50); /* sorts lat */
	printf("# LATENCY python `print(1)` E to D: median %.2f ms over 50 "
	       "(min %.2f, max %.2f)\n",
	       med / 1000, lat[0] / 1000, lat[49] / 1000);
	ok(lat[49] < 1e9, "python: 50 warm print(1) completed");

	/* K loses the state; a new kernel announces itself. */
	{
		unsigned long long id = next_id++;
		char host[400], path[64], ids[24];
		struct buf b;
		double t0 = now_us();

		snprintf(host, sizeof(host), "%s/sandbox/code-%llu.py", c.dir,
		         id);
		snprintf(path, sizeof(path), "/sandbox/code-%llu.py", id);
		snprintf(ids, sizeof(ids), "%llu", id);
		if (write_file(host, "import time\ntime.sleep(100)\n") == 0) {
			buf_init(&b, 0);
			tlv(&b, 'n', ids);
			tlv(&b, 'k', "1");
			tlv(&b, 'f', path);
			(void)ctr_send(&c, 'E', b.data, b.len);
			buf_finish(&b);
			usleep(300000);
			(void)send_id(&c, 'K', id);
			result_init(&r);
			if (collect(&c, id, &r, t0, 30000) == 0) {
				ok(jtrue(r.d, "killed") &&
				       strcmp(jstr(r.d, "kernel"), "lost") ==
				           0 &&
				       strcmp(jstr(r.d, "kernel_reason"),
				              "killed") == 0,
				   "K: kernel lost, reason killed");
			} else
				ok(0, "K: D");
			result_finish(&r);
			rd = ctr_ready(&c, 120000);
			ok(rd && cJSON_IsNull(cJSON_GetObjectItem(rd, "lost")),
			   "K: a new R follows");
		}
	}
	if (kexec(&c, "'x' in dir()", NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "False",
		       "after K: the state is gone");
	else
		ok(0, "after K ran");
	result_finish(&r);

	/* exit(3) and os._exit(4). */
	if (kexec(&c, "z = 1\nexit(3)", NULL, NULL, &r, 30000) == 0) {
		ok(strcmp(jstr(r.x, "status"), "exit") == 0 &&
		       jnum(r.x, "exit_code") == 3,
		   "exit(3): X status exit, code 3");
		ok(jnum(r.d, "exit_code") == 3 &&
		       strcmp(jstr(r.d, "kernel_reason"), "exit") == 0,
		   "exit(3): D exit_code 3, kernel lost (exit)");
	} else
		ok(0, "exit ran");
	result_finish(&r);
	ok(ctr_ready(&c, 120000) != NULL, "exit(3): a new kernel");
	if (kexec(&c, "import os\nos._exit(4)", NULL, NULL, &r, 30000) == 0)
		ok(r.x == NULL && jnum(r.d, "exit_code") == 4 &&
		       strcmp(jstr(r.d, "kernel_reason"), "exit") == 0,
		   "os._exit(4): no X, exit_code 4, kernel lost (exit)");
	else
		ok(0, "_exit ran");
	result_finish(&r);
	ok(ctr_ready(&c, 120000) != NULL, "os._exit(4): a new kernel");

	/* Out of memory. */
	if (kexec(&c,
	          "a = bytearray(400 << 20)\nfor i in range(0, len(a), 4096):\n"
	          "    a[i] = 1\n",
	          NULL, NULL, &r, 120000) == 0) {
		cJSON *mem = cJSON_GetObjectItem(r.d, "mem");

		ok(strcmp(jstr(r.d, "kernel_reason"), "oom") == 0 &&
		       jtrue(r.d, "oom_killed") && jnum(mem, "oom_kills") >= 1,
		   "400 MB in 256 MB: kernel lost, reason oom (%s)",
		   jstr(r.d, "kernel_reason"));
		ok(jnum(mem, "peak") >= (250ll << 20),
		   "oom: peak %lld near the limit", jnum(mem, "peak"));
	} else
		ok(0, "oom ran");
	result_finish(&r);
	ok(ctr_ready(&c, 120000) != NULL, "oom: a new kernel");

	/* The kernel dies between calls: the next R says why. */
	if (kexec(&c,
	          "import threading, os\n"
	          "threading.Timer(0.3, os._exit, (5,)).start()",
	          NULL, NULL, &r, 30000) == 0) {
		is_str(jstr(r.d, "kernel"), "kept", "idle death: call kept");
		result_finish(&r);
		rd = ctr_ready(&c, 120000);
		is_str(jstr(rd, "lost"), "exit",
		       "idle death: the next R says lost: exit");
	} else {
		ok(0, "idle death ran");
		result_finish(&r);
	}

	/* Garbage on the control channel. */
	if (kexec(&c,
	          "import os\nos.write(4, b'\\x00\\x00\\x00\\x03Zgarbage')\n"
	          "import time\ntime.sleep(30)",
	          NULL, NULL, &r, 30000) == 0)
		ok(strcmp(jstr(r.d, "kernel_reason"), "protocol") == 0,
		   "garbage on fd 4: kernel lost, reason protocol");
	else
		ok(0, "garbage ran");
	result_finish(&r);
	ok(ctr_ready(&c, 120000) != NULL, "garbage: a new kernel");
	if (kexec(&c, "6 * 7", NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "42",
		       "garbage: the new kernel works");
	else
		ok(0, "after garbage ran");
	result_finish(&r);

	/* Code that kills the agent ends the container. */
	{
		struct docker_container_state st;
		char err[256];
		int rc = kexec(&c,
		               "import os, signal\nos.kill(os.getppid(), "
		               "signal.SIGKILL)\nimport time\ntime.sleep(30)",
		               NULL, NULL, &r, 30000);

		ok(rc == -EPIPE, "agent killed: the stream ends");
		result_finish(&r);
		usleep(500000);
		ok(docker_container_inspect(dk, c.id, &st, err, sizeof(err)) ==
		           0 &&
		       !st.running,
		   "agent killed: the container is not running (%s)",
		   st.status);
	}
	ctr_finish(&c);
}

/*
 * The agent as PID 1 (Init: false): code can neither kill it nor reach the
 * container's stdout through PID 1's descriptors, and orphans are reaped.
 */
/*
 * A one-off claim (C with o): the kernel ends for good before the A, the
 * program runs as a process, and no kernel starts again.
 */
static void test_claim_once(void)
{
	const char *const args[] = {"--preload", "numpy",
	                            "--kernel",  "python3",
	                            "-u",        "/opt/mcp-sandboxd/kernel.py"};
	const char *const ps[] = {
	    "python3", "-c",
	    "import os\nn = 0\nfor p in os.listdir('/proc'):\n"
	    "    try:\n"
	    "        a = open(f'/proc/{p}/cmdline', "
	    "'rb').read().split(b'\\0')\n"
	    "    except OSError:\n        continue\n"
	    "    n += a[0] == b'python3' and "
	    "b'/opt/mcp-sandboxd/kernel.py' in a\n"
	    "print('kernels', n)",
	    NULL};
	struct ctr c;
	struct result r;
	struct frame f;
	int ready_after = 0;

	printf("# python: a one-off claim ends the kernel\n");
	if (ctr_start(&c, IMG_PY, args, 6) < 0 || !ctr_ready(&c, 120000)) {
		ok(0, "python container ready");
		ctr_finish(&c);
		return;
	}
	claim(&c, true, "one-off C answered by A without an error");
	if (pexec(&c, ps, NULL, NULL, &r, 30000) == 0)
		is_str(rtext(&r.out), "kernels 0\n",
		       "one-off: no kernel runs once A came");
	else
		ok(0, "one-off process ran");
	result_finish(&r);
	if (kexec(&c, "print(1)", NULL, NULL, &r, 10000) == 0)
		is_str(jstr(r.d, "error"), "this container has no kernel",
		       "one-off: a kernel exec is refused");
	else
		ok(0, "one-off kernel exec answered");
	result_finish(&r);
	/* Nothing restarts it: no R within a second, none still running. */
	while (ctr_next(&c, now_ms() + 1000, &f) == 0) {
		ready_after += f.type == 'R';
		free(f.p);
	}
	is_int(ready_after, 0, "one-off: no new kernel's R");
	if (pexec(&c, ps, NULL, NULL, &r, 30000) == 0)
		is_str(rtext(&r.out), "kernels 0\n",
		       "one-off: still no kernel a second later");
	else
		ok(0, "one-off second process ran");
	result_finish(&r);
	ctr_finish(&c);
}

static void test_pid1(void)
{
	const char *const args[] = {"--kernel", "python3", "-u",
	                            "/opt/mcp-sandboxd/kernel.py"};
	struct ctr c;
	struct result r;

	printf("# python with the agent as PID 1\n");
	if (ctr_start_with(&c, IMG_PY, args, 4, false) < 0 ||
	    !ctr_ready(&c, 120000)) {
		ok(0, "PID 1 container ready");
		ctr_finish(&c);
		return;
	}
	if (kexec(&c,
	          "import os\nkept = 'yes'\nres = [os.getppid()]\n"
	          "for fd in (0, 1):\n    try:\n"
	          "        open(f'/proc/1/fd/{fd}', "
	          "'wb').write(b'\\0\\0\\0\\1p')\n"
	          "        res.append('open')\n"
	          "    except OSError as e:\n        res.append(e.errno)\nres",
	          NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "[1, 13, 13]",
		       "PID 1: the agent's descriptors are out of reach");
	else
		ok(0, "PID 1 fd check ran");
	result_finish(&r);
	if (kexec(&c,
	          "import os, signal, time\nfor s in (signal.SIGKILL, "
	          "signal.SIGTERM, signal.SIGSTOP):\n    os.kill(1, s)\n"
	          "time.sleep(0.3)\nos.system('(sleep 300 &)')",
	          NULL, NULL, &r, 30000) == 0) {
		ok(!c.eof, "PID 1: signals from code do not kill the agent");
		is_int(jnum(r.d, "swept"), 1, "PID 1: the orphan is swept");
	} else
		ok(0, "PID 1 kill ran");
	result_finish(&r);
	if (kexec(&c,
	          "import os\nz = 0\nfor p in os.listdir('/proc'):\n"
	          "    try:\n        st = open(f'/proc/{p}/stat').read()\n"
	          "    except OSError:\n        continue\n"
	          "    f = st.rsplit(')', 1)[1].split()\n"
	          "    z += f[0] == 'Z' and f[1] == '1'\n(kept, z)",
	          NULL, NULL, &r, 30000) == 0)
		is_str(value_text(&r, "text/plain"), "('yes', 0)",
		       "PID 1: state kept, no zombie left");
	else
		ok(0, "PID 1 zombie check ran");
	result_finish(&r);
	ctr_finish(&c);
}

/* The daemon's malformed frame ends the container. */
static void test_bad_daemon_frame(void)
{
	struct ctr c;
	struct frame f;
	int rc;

	if (ctr_start(&c, IMG_BASH, NULL, 0) < 0 || !ctr_ready(&c, 30000)) {
		ok(0, "bash container ready");
		ctr_finish(&c);
		return;
	}
	(void)ctr_send(&c, 'Q', "x", 1);
	while ((rc = ctr_next(&c, now_ms() + 10000, &f)) == 0)
		free(f.p);
	ok(rc == -EPIPE, "unknown frame type from the daemon: the agent exits");
	ctr_finish(&c);
}

/* Whether a runner image is tagged ref. */
static bool image_present(const char *ref)
{
	cJSON *list = NULL, *img, *tag;
	char err[256];
	bool found = false;

	if (docker_images_list(dk, "sandbox.runner", &list, err, sizeof(err)) <
	    0)
		return false;
	cJSON_ArrayForEach (img, list) {
		cJSON_ArrayForEach (tag, cJSON_GetObjectItem(img, "RepoTags")) {
			if (cJSON_IsString(tag) &&
			    strcmp(tag->valuestring, ref) == 0)
				found = true;
		}
	}
	cJSON_Delete(list);
	return found;
}

static int install_agent(const char *bin, const char *kernel)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd),
	         "mkdir -p '%s/agent' && install -m 0755 '%s' "
	         "'%s/agent/mcpsd-agent' && install -m 0644 '%s' "
	         "'%s/agent/kernel.py' && chmod 0755 '%s' '%s/agent'",
	         root, bin, root, kernel, root, root, root);
	return system(cmd) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	char err[512];

	if (argc != 3) {
		fprintf(stderr, "usage: %s AGENT_BINARY KERNEL_PY\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (bind mounts owned by 64321)\n");
		return 0;
	}
	/* DOCKER_HOST: another engine, e.g. one holding images under test. */
	const char *host = getenv("DOCKER_HOST");
	if (!host || !*host)
		host = "unix:///var/run/docker.sock";
	if (docker_create(host, 30, &dk, err, sizeof(err)) < 0 ||
	    docker_ping(dk, err, sizeof(err)) < 0) {
		printf("1..0 # SKIP %s\n", err);
		docker_destroy(dk);
		return 0;
	}
	if (!image_present(IMG_PY) || !image_present(IMG_BASH)) {
		printf("1..0 # SKIP runner images missing; run "
		       "runners/build.sh\n");
		docker_destroy(dk);
		return 0;
	}
	if (!mkdtemp(root) || install_agent(argv[1], argv[2]) < 0 ||
	    seccomp_security_opt(&seccomp_opt) < 0) {
		printf("Bail out! cannot prepare %s\n", root);
		return 1;
	}
	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	test_bash();
	if (image_present(IMG_TS))
		test_typescript();
	else
		printf("# SKIP typescript: no image\n");
	test_python();
	test_claim_once();
	test_pid1();
	test_bad_daemon_frame();

	{
		cJSON *list = NULL;
		int rc = docker_containers_list(dk, "sandbox.owner=" OWNER,
		                                &list, err, sizeof(err));

		ok(rc == 0 && cJSON_GetArraySize(list) == 0,
		   "no container of this test is left");
		cJSON_Delete(list);
	}
	free(seccomp_opt);
	cleanup();
	docker_destroy(dk);
	dk = NULL;
	return tap_done();
}
