/* SPDX-License-Identifier: MIT */
/*
 * exec: one call at a time. A process exec forks, starts a new session and
 * runs argv with the call's stdin, working directory and environment; a
 * kernel exec is forwarded to the kernel. Either way the call ends with the
 * same steps, which give the daemon its ordering guarantee (every `o`/`e`
 * of a call precedes its `X` and `D`): sweep the container, relay what is
 * still in the output pipes, then send `X` (kernel) and `D`.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

#define EXEC_ARGS_MAX 4096
#define EXEC_ENV_MAX 4096
/* Most output relayed from a pipe after its call ended (F_SETPIPE_SZ can
 * make a pipe hold 1 MiB). */
#define EXEC_DRAIN_MAX (2u * 1024u * 1024u)

extern char **environ;

/* A call's request, parsed from its TLV records. */
struct request {
	uint64_t id;
	bool have_id;
	bool kernel;
	char *argv[EXEC_ARGS_MAX + 1];
	size_t argc;
	char *env[EXEC_ENV_MAX + 1];
	size_t envc;
	char *file, *stdin_path, *cwd;
};

static void request_free(struct request *q)
{
	for (size_t i = 0; i < q->argc; i++)
		free(q->argv[i]);
	for (size_t i = 0; i < q->envc; i++)
		free(q->env[i]);
	free(q->file);
	free(q->stdin_path);
	free(q->cwd);
}

/* A NUL-terminated copy of a value that must not contain NUL. */
static int dup_value(const unsigned char *v, size_t len, char **out)
{
	if (memchr(v, 0, len))
		return -EPROTO;
	*out = malloc(len + 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, v, len);
	(*out)[len] = '\0';
	return 0;
}

static int request_parse(const unsigned char *p, size_t n, struct request *q)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len;
	int r;

	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0) {
		char **slot = NULL;

		switch (tag) {
		case 'n':
			if (agentframe_parse_id(v, len, &q->id) < 0)
				return -EPROTO;
			q->have_id = true;
			continue;
		case 'k':
			q->kernel = len == 1 && v[0] == '1';
			continue;
		case 'a':
			if (q->argc >= EXEC_ARGS_MAX)
				return -E2BIG;
			slot = &q->argv[q->argc++];
			break;
		case 'v':
			if (q->envc >= EXEC_ENV_MAX)
				return -E2BIG;
			/* NAME=value with a non-empty NAME. */
			if (len < 2 || v[0] == '=' || !memchr(v, '=', len))
				return -EPROTO;
			slot = &q->env[q->envc++];
			break;
		case 'f':
			free(q->file);
			slot = &q->file;
			break;
		case 'i':
			free(q->stdin_path);
			slot = &q->stdin_path;
			break;
		case 'c':
			free(q->cwd);
			slot = &q->cwd;
			break;
		default:
			continue; /* unknown tags are ignored */
		}
		*slot = NULL;
		r = dup_value(v, len, slot);
		if (r < 0)
			return r;
	}
	if (r < 0 || !q->have_id)
		return -EPROTO;
	if (q->kernel ? !q->file : q->argc == 0)
		return -EPROTO;
	return 0;
}

/* The length of NAME in "NAME=value". */
static size_t env_name_len(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq ? (size_t)(eq - s) : strlen(s);
}

/*
 * The environment of a process exec: the agent's own, with the call's
 * variables added or replacing those of the same name. Borrowed strings;
 * free only the array.
 */
static char **build_env(const struct request *q)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	env = calloc(n + q->envc + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t nl = env_name_len(environ[i]);
		bool replaced = false;

		for (size_t j = 0; j < q->envc && !replaced; j++)
			replaced = env_name_len(q->env[j]) == nl &&
			           strncmp(q->env[j], environ[i], nl) == 0;
		if (!replaced)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < q->envc; j++) {
		/* The last of repeated names wins. */
		size_t nl = env_name_len(q->env[j]);
		bool later = false;

		for (size_t m = j + 1; m < q->envc && !later; m++)
			later = env_name_len(q->env[m]) == nl &&
			        strncmp(q->env[m], q->env[j], nl) == 0;
		if (!later)
			env[k++] = q->env[j];
	}
	env[k] = NULL;
	return env;
}

static void reset_exec(struct agent *a)
{
	struct buf x = a->x.x;

	buf_reset(&x);
	memset(&a->x, 0, sizeof(a->x));
	a->x.x = x;
	a->x.out_fd = a->x.err_fd = -1;
}

/* Sends D. wstatus is used when use_status; else exit_code is given. */
static void send_done(struct agent *a, bool use_status, int wstatus,
                      long long exit_code, const char *kernel,
                      const char *reason, unsigned swept, const char *error)
{
	struct agent_stats s;
	struct buf b;
	long long sig = -1;

	stats_read(&s);
	if (use_status) {
		if (WIFEXITED(wstatus)) {
			exit_code = WEXITSTATUS(wstatus);
		} else if (WIFSIGNALED(wstatus)) {
			exit_code = -1;
			sig = WTERMSIG(wstatus);
		}
	}
	buf_init(&b, 0);
	out_printf(a, &b,
	           "{\"id\":%llu,\"exit_code\":", (unsigned long long)a->x.id);
	out_num(a, &b, exit_code);
	out_printf(a, &b, ",\"signal\":");
	out_num(a, &b, sig);
	out_printf(a, &b,
	           ",\"interrupted\":%s,\"killed\":%s,\"kernel\":\"%s\","
	           "\"kernel_reason\":",
	           a->x.interrupted ? "true" : "false",
	           a->x.killed ? "true" : "false", kernel);
	if (reason)
		out_printf(a, &b, "\"%s\"", reason);
	else
		out_printf(a, &b, "null");
	out_printf(a, &b, ",\"swept\":%u,\"cpu_ms\":", swept);
	out_num(a, &b,
	        s.cpu_ns >= 0 && a->x.cpu0 >= 0 && s.cpu_ns >= a->x.cpu0
	            ? (s.cpu_ns - a->x.cpu0) / 1000000
	            : -1);
	out_printf(a, &b, ",\"mem\":{\"usage\":");
	out_num(a, &b, s.usage);
	out_printf(a, &b, ",\"peak\":");
	out_num(a, &b, s.peak);
	out_printf(a, &b, ",\"limit\":");
	out_num(a, &b, s.limit);
	out_printf(a, &b, ",\"oom_kills\":");
	out_num(a, &b, s.oom_kills);
	out_printf(a, &b, "},\"oom_killed\":%s,\"error\":",
	           s.oom_kills >= 0 && a->x.oom0 >= 0 && s.oom_kills > a->x.oom0
	               ? "true"
	               : "false");
	if (error)
		out_json_str(a, &b, error, strlen(error));
	else
		out_printf(a, &b, "null");
	out_printf(a, &b, "}");
	out_frame(a, 'D', b.data, b.len);
	buf_finish(&b);
	if (s.oom_kills >= 0)
		a->k.oom_seen = s.oom_kills;
}

/* D for a call that never ran. */
static void refuse(struct agent *a, uint64_t id, const char *error)
{
	struct exec saved = a->x;

	a->x.id = id;
	a->x.cpu0 = a->x.oom0 = -1;
	a->x.interrupted = a->x.killed = false;
	send_done(a, false, 0, -1, "none", NULL, 0, error);
	a->x = saved;
}

static unsigned sweep_logged(struct agent *a, pid_t keep, const char *when)
{
	unsigned left, n = sweep_run(a, keep, &left);

	if (left)
		out_log(a, "sweep %s exec %llu: %u processes would not die",
		        when, (unsigned long long)a->x.id, left);
	return n;
}

static void begin(struct agent *a, uint64_t id, bool kernel)
{
	unsigned pre;

	reset_exec(a);
	a->x.id = id;
	pre = sweep_logged(a, a->k.pid, "before");
	if (pre)
		out_log(a, "swept %u processes left over before exec %llu", pre,
		        (unsigned long long)id);
	a->x.active = true;
	a->x.kernel = kernel;
	a->x.cpu0 = stats_cpu_ns();
	a->x.oom0 = stats_oom_kills();
}

static void start_process(struct agent *a, struct request *q)
{
	int out[2] = {-1, -1}, err[2] = {-1, -1};
	char **env = build_env(q);
	char msg[512];
	pid_t pid;

	begin(a, q->id, false);
	if (!env || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		snprintf(msg, sizeof(msg), "cannot start the process: %s",
		         strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(msg, sizeof(msg), "cannot start the process: %s",
		         strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		int o = agent_fd_high(out[1]), e = agent_fd_high(err[1]);
		const char *ipath = q->stdin_path ? q->stdin_path : "/dev/null";
		int in = open(ipath, O_RDONLY | O_CLOEXEC | O_NOCTTY);

		setsid();
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		if (in < 0) {
			dprintf(2,
			        "mcpsd-agent: cannot open stdin file %s: %s\n",
			        ipath, strerror(errno));
			_exit(126);
		}
		if (dup2(in, 0) < 0)
			_exit(126);
		agent_child_reset(3);
		if (q->cwd && chdir(q->cwd) < 0) {
			dprintf(2, "mcpsd-agent: cannot change to %s: %s\n",
			        q->cwd, strerror(errno));
			_exit(126);
		}
		environ = env;
		execvp(q->argv[0], q->argv);
		dprintf(2, "mcpsd-agent: cannot run %s: %s\n", q->argv[0],
		        strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	free(env);
	close(out[1]);
	close(err[1]);
	agent_nonblock(out[0]);
	agent_nonblock(err[0]);
	a->x.pid = pid;
	a->x.out_fd = out[0];
	a->x.err_fd = err[0];
	return;
fail:
	free(env);
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	send_done(a, false, 0, -1, "none", NULL, 0, msg);
	reset_exec(a);
}

static void start_kernel_exec(struct agent *a, uint64_t id,
                              const unsigned char *p, size_t n)
{
	begin(a, id, true);
	kernel_send(a, 'E', p, n);
}

void exec_dispatch_pending(struct agent *a)
{
	struct request q;

	if (!a->have_pending || a->x.active || a->k.state != KERNEL_READY)
		return;
	a->have_pending = false;
	memset(&q, 0, sizeof(q));
	if (request_parse((unsigned char *)a->pending.data, a->pending.len,
	                  &q) == 0)
		start_kernel_exec(a, q.id, (unsigned char *)a->pending.data,
		                  a->pending.len);
	request_free(&q);
	buf_reset(&a->pending);
}

void exec_start(struct agent *a, const unsigned char *p, size_t n)
{
	struct request q;
	char msg[128];
	int r;

	memset(&q, 0, sizeof(q));
	r = request_parse(p, n, &q);
	if (r < 0) {
		request_free(&q);
		out_log(a, "malformed exec from the daemon: %s",
		        r == -E2BIG ? "too many records" : "bad records");
		out_flush(a);
		agent_exit(a, 3, "malformed exec from the daemon");
	}
	if (a->x.active || (q.kernel && a->have_pending)) {
		snprintf(msg, sizeof(msg), "busy: exec %llu is running",
		         (unsigned long long)(a->x.active ? a->x.id : 0));
		refuse(a, q.id, msg);
	} else if (q.kernel && !a->kernel_mode) {
		refuse(a, q.id, "this container has no kernel");
	} else if (q.kernel && a->k.state != KERNEL_READY) {
		/* Runs once the kernel sent R. */
		buf_reset(&a->pending);
		if (buf_append(&a->pending, p, n) < 0)
			agent_exit(a, 70, "out of memory");
		a->have_pending = true;
	} else if (q.kernel) {
		start_kernel_exec(a, q.id, p, n);
	} else {
		start_process(a, &q);
	}
	request_free(&q);
}

void exec_signal(struct agent *a, uint64_t id, bool kill_it)
{
	if (a->have_pending && !a->x.active) {
		struct request q;

		memset(&q, 0, sizeof(q));
		if (request_parse((unsigned char *)a->pending.data,
		                  a->pending.len, &q) == 0 &&
		    q.id == id) {
			a->have_pending = false;
			buf_reset(&a->pending);
			refuse(a, id,
			       kill_it ? "killed before it started"
			               : "interrupted before it started");
			request_free(&q);
			return;
		}
		request_free(&q);
	}
	if (!a->x.active || a->x.id != id) {
		out_log(a, "%s for exec %llu ignored: it is not running",
		        kill_it ? "kill" : "interrupt", (unsigned long long)id);
		return;
	}
	if (kill_it)
		a->x.killed = true;
	else
		a->x.interrupted = true;
	if (a->x.kernel) {
		if (kill_it)
			kernel_kill(a, "killed");
		else
			kernel_interrupt(a);
	} else if (!a->x.exited) {
		kill(-a->x.pid, kill_it ? SIGKILL : SIGINT);
	}
}

void exec_process_ended(struct agent *a, int wstatus)
{
	unsigned swept;

	a->x.exited = true;
	a->x.wstatus = wstatus;
	/* Background processes may hold the pipes open: kill them first. */
	swept = sweep_logged(a, a->k.pid, "after");
	out_drain(a, a->x.out_fd, 'o', EXEC_DRAIN_MAX);
	out_drain(a, a->x.err_fd, 'e', EXEC_DRAIN_MAX);
	if (a->x.out_fd >= 0)
		close(a->x.out_fd);
	if (a->x.err_fd >= 0)
		close(a->x.err_fd);
	send_done(a, true, wstatus, -1, "none", NULL, swept, NULL);
	reset_exec(a);
	exec_dispatch_pending(a);
}

/* The end of a kernel exec: lost says whether the kernel died. */
static void finish_kernel(struct agent *a, bool lost, int wstatus,
                          const char *reason)
{
	unsigned swept = sweep_logged(a, lost ? 0 : a->k.pid, "after");
	long long code = 1;

	out_drain(a, a->k.out_fd, 'o', EXEC_DRAIN_MAX);
	out_drain(a, a->k.err_fd, 'e', EXEC_DRAIN_MAX);
	if (a->x.have_x)
		out_frame(a, 'X', a->x.x.data, a->x.x.len);
	if (!lost && strcmp(a->x.status, "ok") == 0)
		code = 0;
	send_done(a, lost, wstatus, code, lost ? "lost" : "kept",
	          lost ? reason : NULL, swept, NULL);
	reset_exec(a);
}

void exec_kernel_result(struct agent *a, const unsigned char *p, size_t n,
                        const char *status)
{
	buf_reset(&a->x.x);
	if (buf_append(&a->x.x, p, n) < 0)
		agent_exit(a, 70, "out of memory");
	a->x.have_x = true;
	snprintf(a->x.status, sizeof(a->x.status), "%s", status);
	if (strcmp(status, "exit") == 0) {
		/* The kernel ends itself; D follows its death. */
		a->x.exit_deadline = agent_now_ms() + AGENT_KERNEL_EXIT_MS;
		return;
	}
	finish_kernel(a, false, 0, NULL);
}

void exec_kernel_died(struct agent *a, int wstatus, const char *reason)
{
	finish_kernel(a, true, wstatus, reason);
}

void exec_tick(struct agent *a, long long now)
{
	if (a->x.active && a->x.kernel && a->x.exit_deadline &&
	    now >= a->x.exit_deadline) {
		a->x.exit_deadline = 0;
		out_log(a, "kernel did not end after exit(); killing it");
		kernel_kill(a, "exit");
	}
}
