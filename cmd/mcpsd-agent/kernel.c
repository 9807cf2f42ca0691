/* SPDX-License-Identifier: MIT */
/*
 * kernel: the long-lived interpreter of a kernel-mode agent (kernel.py).
 * It runs in a session of its own with descriptors 0 = /dev/null, 1 and 2 =
 * pipes the agent relays, 3 = frames from the agent, 4 = frames to the
 * agent. The code the kernel runs can write anything to descriptor 4, so
 * every frame from it is bounded (AGENTFRAME_MAX) and checked; anything
 * unexpected is a protocol error and the kernel is killed (reason
 * "protocol"). When the kernel dies for any reason a new one is started and
 * announced with R; a kernel that dies before its R AGENT_KERNEL_TRIES times
 * in a row makes the agent give up and exit.
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

#define KERNEL_NAME_MAX 128

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void kernel_start(struct agent *a)
{
	int to[2] = {-1, -1}, from[2] = {-1, -1}, out[2] = {-1, -1},
	    err[2] = {-1, -1};
	unsigned left;
	pid_t pid;

	if (a->k.failures >= AGENT_KERNEL_TRIES) {
		out_log(a,
		        "the kernel did not start %u times in a row; "
		        "giving up",
		        a->k.failures);
		out_flush(a);
		agent_exit(a, 4, "the kernel does not start");
	}
	/*
	 * Whatever the old kernel left behind goes first, unless a process
	 * exec is running: its processes are not leftovers (its own sweep
	 * cleans up after it).
	 */
	if (!a->x.active && sweep_run(a, 0, &left) && left)
		out_log(a, "sweep before kernel start: %u processes remain",
		        left);
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0 ||
	    pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		out_flush(a);
		agent_exit(a, 70, "cannot create the kernel's pipes");
	}
	pid = fork();
	if (pid < 0) {
		out_log(a, "cannot start the kernel: %s", strerror(errno));
		out_flush(a);
		agent_exit(a, 70, "cannot fork the kernel");
	}
	if (pid == 0) {
		int fds[5] = {a->devnull, out[1], err[1], to[0], from[1]};

		setsid();
		/* Out of the way of 0-4 first, so no dup2 clobbers a source. */
		for (int i = 0; i < 5; i++)
			if ((fds[i] = agent_fd_high(fds[i])) < 0)
				_exit(126);
		for (int i = 0; i < 5; i++)
			if (dup2(fds[i], i) < 0)
				_exit(126);
		agent_child_reset(5);
		execvp(a->kernel_argv[0], a->kernel_argv);
		dprintf(2, "mcpsd-agent: cannot run the kernel %s: %s\n",
		        a->kernel_argv[0], strerror(errno));
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	close(out[1]);
	close(err[1]);
	agent_nonblock(to[1]);
	agent_nonblock(from[0]);
	agent_nonblock(out[0]);
	agent_nonblock(err[0]);
	a->k.pid = pid;
	a->k.to_fd = to[1];
	a->k.from_fd = from[0];
	a->k.out_fd = out[0];
	a->k.err_fd = err[0];
	a->k.state = KERNEL_STARTING;
	a->k.started_ms = agent_now_ms();
	a->k.deadline_ms = a->k.started_ms + AGENT_KERNEL_START_MS;
	a->k.kill_reason = NULL;
	a->k.claim_sent = false;
	a->k.closed_deadline = 0;
	a->k.oom_seen = stats_oom_kills();
	agentframe_decoder_init(&a->k.dec, AGENTFRAME_MAX);
	buf_reset(&a->k.toq);
	a->k.toq_head = 0;
}

void kernel_kill(struct agent *a, const char *reason)
{
	if (a->k.pid <= 0)
		return;
	if (!a->k.kill_reason)
		a->k.kill_reason = reason;
	kill(-a->k.pid, SIGKILL);
	kill(a->k.pid, SIGKILL);
}

void kernel_interrupt(struct agent *a)
{
	if (a->k.pid > 0)
		kill(-a->k.pid, SIGINT);
}

/* A control pipe closed: see closed_deadline. */
static void kernel_closed(struct agent *a)
{
	if (a->k.pid > 0 && !a->k.closed_deadline)
		a->k.closed_deadline = agent_now_ms() + AGENT_KERNEL_CLOSED_MS;
}

void kernel_send(struct agent *a, unsigned char type, const void *p, size_t n)
{
	unsigned char h[AGENTFRAME_HDR];

	if (a->k.to_fd < 0)
		return; /* it is dying; its death ends the exec */
	if (agentframe_header(h, type, n, AGENTFRAME_MAX_IN) < 0 ||
	    buf_append(&a->k.toq, h, sizeof(h)) < 0 ||
	    buf_append(&a->k.toq, p, n) < 0)
		agent_exit(a, 70, "out of memory");
	kernel_flush(a);
}

void kernel_flush(struct agent *a)
{
	while (a->k.to_fd >= 0 && a->k.toq.len > a->k.toq_head) {
		ssize_t w = write(a->k.to_fd, a->k.toq.data + a->k.toq_head,
		                  a->k.toq.len - a->k.toq_head);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) {
			/* It died, or the code closed descriptor 3. */
			close_fd(&a->k.to_fd);
			kernel_closed(a);
			break;
		}
		a->k.toq_head += (size_t)w;
	}
	buf_reset(&a->k.toq);
	a->k.toq_head = 0;
}

/*
 * The status word of an X payload, which the kernel writes as
 * {"id":N,"status":"WORD",...}: NULL when it is not that for this exec.
 */
static const char *result_status(const unsigned char *p, size_t n, uint64_t id)
{
	static const char *const words[] = {"ok", "error", "interrupted",
	                                    "exit"};
	char pre[64];
	int k = snprintf(pre, sizeof(pre), "{\"id\":%llu,\"status\":\"",
	                 (unsigned long long)id);

	if (k <= 0 || n < (size_t)k + 2 || memcmp(p, pre, (size_t)k) != 0 ||
	    p[n - 1] != '}')
		return NULL;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t wl = strlen(words[i]);

		if (n > (size_t)k + wl && memcmp(p + k, words[i], wl) == 0 &&
		    p[(size_t)k + wl] == '"')
			return words[i];
	}
	return NULL;
}

void kernel_send_ready(struct agent *a, const unsigned char *tlv, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len, names = 0;
	struct buf b;
	long long since = a->kernel_mode ? a->k.started_ms : a->t0_ms;

	buf_init(&b, 0);
	out_printf(a, &b, "{\"v\":1,\"kernel\":%s,\"preloaded\":[",
	           a->kernel_mode ? "true" : "false");
	agentframe_tlv_init(&it, tlv, n);
	while (agentframe_tlv_next(&it, &tag, &v, &len) > 0) {
		if (tag == 'm' && names < AGENT_PRELOAD_MAX &&
		    len <= KERNEL_NAME_MAX) {
			out_printf(a, &b, names ? "," : "");
			out_json_str(a, &b, v, len);
			names++;
		} else if (tag == 'w') {
			out_log(a, "kernel: %.*s",
			        (int)(len > 2048 ? 2048 : len),
			        (const char *)v);
		}
	}
	out_printf(a, &b, "],\"ms\":%lld,\"lost\":", agent_now_ms() - since);
	if (a->k.lost)
		out_printf(a, &b, "\"%s\"", a->k.lost);
	else
		out_printf(a, &b, "null");
	out_printf(a, &b, "}");
	out_frame(a, 'R', b.data, b.len);
	buf_finish(&b);
	a->k.lost = NULL;
}

void kernel_claim(struct agent *a)
{
	char cwd[PATH_MAX];
	unsigned char rec[PATH_MAX + AGENTFRAME_TLV_HDR];
	size_t off = 0;

	if (!a->kernel_mode || !a->claim_pending ||
	    a->k.state != KERNEL_READY || a->k.claim_sent || a->x.active)
		return;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    agentframe_tlv_put(rec, sizeof(rec), &off, 'c', cwd, strlen(cwd)) <
	        0) {
		a->claim_pending = false;
		agent_claim_answered(a, "cannot tell the kernel the directory");
		return;
	}
	a->claim_pending = false;
	a->k.claim_sent = true;
	kernel_send(a, 'C', rec, off);
}

/* The kernel's A: TLV `c` (its directory) and `r` (an error), both
 * optional. */
static int claimed(struct agent *a, const unsigned char *p, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len;
	char err[256] = "";
	int r;

	if (!a->k.claim_sent)
		return -EPROTO;
	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0)
		if (tag == 'r')
			snprintf(err, sizeof(err), "kernel: %.*s",
			         (int)(len > 200 ? 200 : len), (const char *)v);
	if (r < 0)
		return -EPROTO;
	a->k.claim_sent = false;
	agent_claim_answered(a, err[0] ? err : NULL);
	return 0;
}

static int kernel_frame(void *arg, unsigned char type, const unsigned char *p,
                        size_t n)
{
	struct agent *a = arg;
	const char *status;

	switch (type) {
	case 'R':
		if (a->k.state != KERNEL_STARTING ||
		    agentframe_tlv_check(p, n) < 0)
			return -EPROTO;
		a->k.state = KERNEL_READY;
		a->k.failures = 0;
		kernel_send_ready(a, p, n);
		kernel_claim(a);
		exec_dispatch_pending(a);
		return 0;
	case 'X':
		if (!a->x.active || !a->x.kernel || a->x.have_x)
			return -EPROTO;
		status = result_status(p, n, a->x.id);
		if (!status)
			return -EPROTO;
		exec_kernel_result(a, p, n, status);
		return 0;
	case 'A':
		return claimed(a, p, n);
	default:
		return -EPROTO;
	}
}

void kernel_readable(struct agent *a)
{
	static unsigned char chunk[64 * 1024];
	ssize_t r;
	int rc;

	do
		r = read(a->k.from_fd, chunk, sizeof(chunk));
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN)
		return;
	if (r <= 0) {
		close_fd(&a->k.from_fd);
		kernel_closed(a);
		return;
	}
	rc = agentframe_feed(&a->k.dec, chunk, (size_t)r, kernel_frame, a);
	if (rc < 0) {
		out_log(a, "malformed frame from the kernel at byte %llu: %s",
		        (unsigned long long)agentframe_offset(&a->k.dec),
		        rc == -EPROTO ? "unexpected or malformed"
		                      : agentframe_strerror(rc));
		close_fd(&a->k.from_fd);
		kernel_kill(a, "protocol");
	}
}

/*
 * Frames the kernel wrote before it died (an X followed by exit(), say) are
 * still in the pipe: the SIGCHLD may be seen before them. The writer is
 * dead, so this is bounded by what the pipe holds.
 */
static void kernel_last_frames(struct agent *a)
{
	static unsigned char chunk[64 * 1024];

	while (a->k.from_fd >= 0) {
		ssize_t r = read(a->k.from_fd, chunk, sizeof(chunk));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (agentframe_feed(&a->k.dec, chunk, (size_t)r, kernel_frame,
		                    a) < 0) {
			if (!a->k.kill_reason)
				a->k.kill_reason = "protocol";
			break;
		}
	}
}

void kernel_reaped(struct agent *a, int wstatus)
{
	const char *reason;
	bool starting;
	long long ooms = stats_oom_kills();

	kernel_last_frames(a);
	reason = a->k.kill_reason;
	starting = a->k.state == KERNEL_STARTING;

	if (!reason) {
		if (ooms >= 0 && a->k.oom_seen >= 0 && ooms > a->k.oom_seen)
			reason = "oom";
		else if (WIFEXITED(wstatus))
			reason = "exit";
		else
			reason = "crash";
	}
	if (WIFEXITED(wstatus))
		out_log(a, "kernel %d exited with status %d (%s)", a->k.pid,
		        WEXITSTATUS(wstatus), reason);
	else
		out_log(a, "kernel %d ended by signal %d (%s)", a->k.pid,
		        WTERMSIG(wstatus), reason);
	a->k.pid = 0;
	a->k.state = KERNEL_NONE;
	a->k.closed_deadline = 0;
	close_fd(&a->k.to_fd);
	close_fd(&a->k.from_fd);
	agentframe_decoder_finish(&a->k.dec);
	buf_reset(&a->k.toq);
	a->k.toq_head = 0;
	if (a->x.active && a->x.kernel)
		exec_kernel_died(a, wstatus, reason);
	else
		a->k.lost = reason;
	close_fd(&a->k.out_fd);
	close_fd(&a->k.err_fd);
	if (a->k.claim_sent || a->claim_pending) {
		/* The next kernel starts in the agent's directory. */
		a->k.claim_sent = false;
		a->claim_pending = false;
		agent_claim_answered(a, NULL);
	}
	if (starting)
		a->k.failures++;
	if (a->kernel_mode) /* not after a one-off claim */
		kernel_start(a);
}

void kernel_tick(struct agent *a, long long now)
{
	if (a->k.closed_deadline && now >= a->k.closed_deadline) {
		a->k.closed_deadline = 0;
		out_log(a, "the kernel closed its control pipes");
		kernel_kill(a, "protocol");
	}
	if (a->k.state == KERNEL_STARTING && now >= a->k.deadline_ms &&
	    !a->k.kill_reason) {
		out_log(a, "the kernel sent no R within %d s",
		        AGENT_KERNEL_START_MS / 1000);
		kernel_kill(a, "crash");
	}
}
