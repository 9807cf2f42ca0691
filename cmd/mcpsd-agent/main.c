/* SPDX-License-Identifier: MIT */
/*
 * mcpsd-agent: the main process of a warm session container
 * (docs/agent-protocol.md). It reads frames from the daemon on standard
 * input and writes frames on standard output, or on a unix socket it
 * connects to first (--channel, before it starts anything); it runs one call at
 * a time, either as a fresh process (bash, bun) or in a long-lived Python
 * kernel (kernel.py), relays the call's output, and after each call kills
 * whatever the call left running.
 *
 *   mcpsd-agent [--channel SOCKET]                process execs only
 *   mcpsd-agent [--channel SOCKET] [--preload M,M] --kernel PROG ARG...
 *
 * This file: flags, set-up, the poll loop and the daemon's frames. The
 * agent ends (and with it the container) on end of input, on a malformed
 * frame from the daemon, or on SIGTERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define PRELOAD_MAX_LEN 1024

long long agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int agent_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int agent_fd_high(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

void agent_child_reset(int from)
{
	sigset_t none;
	struct rlimit rl;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)from, ~0u, 0u) == 0)
		return;
#endif
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur > 1u << 20)
		rl.rlim_cur = 1u << 20;
	for (int fd = from; fd < (int)rl.rlim_cur; fd++)
		close(fd);
}

void agent_exit(struct agent *a, int status, const char *why)
{
	if (why)
		fprintf(stderr, "mcpsd-agent: %s\n", why);
	if (a->k.pid > 0) {
		kill(-a->k.pid, SIGKILL);
		kill(a->k.pid, SIGKILL);
	}
	if (a->x.active && !a->x.kernel && a->x.pid > 0)
		kill(-a->x.pid, SIGKILL);
	_exit(status);
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: mcpsd-agent [--channel SOCKET] [--preload MODULE,...] "
	        "[--kernel PROGRAM [ARG...]]\n"
	        "Speaks the agent protocol (docs/agent-protocol.md) on stdin "
	        "and stdout, or on the unix socket SOCKET.\n");
	exit(2);
}

/* Module lists are names and dots, nothing a shell or the kernel could
 * misread. */
static bool preload_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PRELOAD_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == ','))
			return false;
	}
	return true;
}

/*
 * Connects to the daemon's channel socket and makes it our standard input
 * and output, before anything else runs in the container: the daemon
 * takes exactly one connection, so code (which only ever runs on our
 * word, later) finds nobody listening. Exits 2 for a bad path, 70 when
 * the daemon is not listening.
 */
static void channel_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "mcpsd-agent: --channel takes an absolute "
		                "socket path shorter than 108 bytes\n");
		exit(2);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    dup2(fd, 0) < 0 || dup2(fd, 1) < 0) {
		fprintf(stderr, "mcpsd-agent: cannot connect to %s: %s\n", path,
		        strerror(errno));
		exit(70);
	}
	if (fd > 1)
		close(fd);
}

static void parse_args(struct agent *a, int argc, char **argv)
{
	const char *preload = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--channel") == 0 && i + 1 < argc &&
		    !a->channel) {
			a->channel = argv[++i];
		} else if (strcmp(argv[i], "--preload") == 0 && i + 1 < argc) {
			preload = argv[++i];
			if (!preload_valid(preload)) {
				fprintf(stderr, "mcpsd-agent: --preload takes "
				                "module names separated by "
				                "commas\n");
				exit(2);
			}
		} else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
			i++;
			break;
		} else {
			usage();
		}
	}
	if (i >= argc)
		return; /* process-only mode */
	a->kernel_mode = true;
	a->kernel_argv = calloc((size_t)(argc - i) + 3, sizeof(char *));
	if (!a->kernel_argv)
		exit(70);
	size_t k = 0;

	for (; i < argc; i++)
		a->kernel_argv[k++] = argv[i];
	if (preload) {
		static char flag[] = "--preload";

		a->kernel_argv[k++] = flag;
		a->kernel_argv[k++] = (char *)(uintptr_t)preload;
	}
}

/* ---- frames from the daemon ----------------------------------------------
 */

/* The `n` record of an I/K payload. */
static int frame_id(const unsigned char *p, size_t n, uint64_t *id)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len;
	int r, found = 0;

	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0)
		if (tag == 'n') {
			if (agentframe_parse_id(v, len, id) < 0)
				return -EPROTO;
			found = 1;
		}
	return r < 0 || !found ? -EPROTO : 0;
}

static void send_claimed(struct agent *a, const char *kernel_err)
{
	struct buf b;
	char cwd[PATH_MAX];
	const char *err = a->claim_error[0] ? a->claim_error : kernel_err;

	buf_init(&b, 0);
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	out_printf(a, &b, "{\"cwd\":");
	out_json_str(a, &b, cwd, strlen(cwd));
	out_printf(a, &b, ",\"error\":");
	if (err && err[0])
		out_json_str(a, &b, err, strlen(err));
	else
		out_printf(a, &b, "null");
	out_printf(a, &b, "}");
	out_frame(a, 'A', b.data, b.len);
	buf_finish(&b);
}

void agent_claim_answered(struct agent *a, const char *kernel_err)
{
	send_claimed(a, kernel_err);
	a->claim_error[0] = '\0';
}

static int claim(struct agent *a, const unsigned char *p, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v, *cwd = NULL;
	unsigned char tag;
	size_t len, cwd_len = 0;
	char path[PATH_MAX];
	bool once = false;
	int r;

	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0)
		if (tag == 'c') {
			cwd = v;
			cwd_len = len;
		} else if (tag == 'o') {
			once = len == 1 && v[0] == '1';
		}
	if (r < 0 || !cwd || cwd_len == 0 || cwd_len >= sizeof(path) ||
	    memchr(cwd, 0, cwd_len))
		return -EPROTO;
	if (a->x.active) {
		snprintf(a->claim_error, sizeof(a->claim_error),
		         "busy: exec %llu is running",
		         (unsigned long long)a->x.id);
		agent_claim_answered(a, NULL);
		return 0;
	}
	memcpy(path, cwd, cwd_len);
	path[cwd_len] = '\0';
	a->claim_error[0] = '\0';
	if (chdir(path) < 0)
		snprintf(a->claim_error, sizeof(a->claim_error),
		         "cannot change to %.200s: %s", path, strerror(errno));
	if (once && a->kernel_mode) {
		/*
		 * One program of its own ahead, as in a container of its own:
		 * the kernel ends for good (its memory is the program's), and
		 * the answer waits until it is gone.
		 */
		a->kernel_mode = false;
		if (a->k.state != KERNEL_NONE) {
			a->claim_pending = true;
			kernel_kill(a, "one-off");
			return 0;
		}
	}
	if (!a->kernel_mode || a->k.state == KERNEL_NONE) {
		agent_claim_answered(a, NULL);
		return 0;
	}
	a->claim_pending = true;
	kernel_claim(a);
	return 0;
}

static int daemon_frame(void *arg, unsigned char type, const unsigned char *p,
                        size_t n)
{
	struct agent *a = arg;
	uint64_t id;

	switch (type) {
	case 'E':
		if (agentframe_tlv_check(p, n) < 0)
			return -EPROTO;
		exec_start(a, p, n);
		return 0;
	case 'I':
	case 'K':
		if (frame_id(p, n, &id) < 0)
			return -EPROTO;
		exec_signal(a, id, type == 'K');
		return 0;
	case 'C':
		return claim(a, p, n);
	case 'P':
		out_frame(a, 'p', NULL, 0);
		return 0;
	default:
		return -EPROTO;
	}
}

static void read_daemon(struct agent *a)
{
	static unsigned char chunk[64 * 1024];
	ssize_t r;
	int rc;

	do
		r = read(0, chunk, sizeof(chunk));
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN)
		return;
	if (r <= 0) {
		/* The daemon is gone: so is the container. */
		out_flush(a);
		agent_exit(a, 0, NULL);
	}
	rc = agentframe_feed(&a->in, chunk, (size_t)r, daemon_frame, a);
	if (rc < 0) {
		char why[128];

		snprintf(why, sizeof(why),
		         "malformed frame from the daemon at byte %llu: %s",
		         (unsigned long long)agentframe_offset(&a->in),
		         agentframe_strerror(rc));
		out_log(a, "%s", why);
		out_flush(a);
		agent_exit(a, 3, why);
	}
}

/* ---- signals and children ------------------------------------------------
 */

static void reap(struct agent *a)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p <= 0)
			break;
		if (a->x.active && !a->x.kernel && p == a->x.pid)
			exec_process_ended(a, st);
		else if (a->k.pid > 0 && p == a->k.pid)
			kernel_reaped(a, st);
	}
}

static void read_signals(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		/*
		 * SIGINT and SIGTERM count only from outside the container
		 * (the engine: a sender our PID namespace cannot see has pid
		 * 0) or forwarded by the container's init (pid 1, when that
		 * is not us). Code in the container must not be able to end
		 * the agent it cannot SIGKILL when the agent is PID 1.
		 */
		bool outside =
		    si.ssi_pid == 0 || (si.ssi_pid == 1 && getpid() != 1);

		if (si.ssi_signo == SIGCHLD)
			reap(a);
		else if (si.ssi_signo == SIGINT && outside && a->x.active)
			exec_signal(a, a->x.id, false); /* docker kill -s INT */
		else if (si.ssi_signo == SIGTERM && outside)
			agent_exit(a, 0, NULL);
	}
	/* SIGCHLDs coalesce: reap in any case. */
	reap(a);
}

static void setup(struct agent *a)
{
	sigset_t set;

	/*
	 * Code runs as our user: without this it could open
	 * /proc/<agent>/fd/1 and write frames of its own to the daemon.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		fprintf(stderr, "mcpsd-agent: prctl: %s\n", strerror(errno));
		exit(70);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	a->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	a->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (a->sfd < 0 || a->devnull < 0 || agent_nonblock(0) < 0 ||
	    agent_nonblock(1) < 0) {
		fprintf(stderr, "mcpsd-agent: set-up: %s\n", strerror(errno));
		exit(70);
	}
	/* Our own descriptors 0-2 must not leak into what we start. */
	for (int fd = 0; fd <= 2; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	a->sweep_ok = sweep_allowed();
	agentframe_decoder_init(&a->in, AGENTFRAME_MAX_IN);
	buf_init(&a->out, AGENT_OUT_LIMIT);
	buf_init(&a->pending, 0);
	buf_init(&a->x.x, 0);
	a->k.pid = 0;
	a->k.to_fd = a->k.from_fd = a->k.out_fd = a->k.err_fd = -1;
	a->x.out_fd = a->x.err_fd = -1;
	buf_init(&a->k.toq, 0);
}

enum {
	P_IN,
	P_OUT,
	P_SIG,
	P_KFROM,
	P_KTO,
	P_KOUT,
	P_KERR,
	P_XOUT,
	P_XERR,
	P_N
};

static int poll_timeout(const struct agent *a, long long now)
{
	long long next = -1;

	if (a->k.state == KERNEL_STARTING)
		next = a->k.deadline_ms;
	if (a->k.closed_deadline && (next < 0 || a->k.closed_deadline < next))
		next = a->k.closed_deadline;
	if (a->x.active && a->x.exit_deadline &&
	    (next < 0 || a->x.exit_deadline < next))
		next = a->x.exit_deadline;
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

/* Kernel output is relayed during its exec and thrown away otherwise. */
static void kernel_output(struct agent *a, int *fd, unsigned char type)
{
	bool relay = a->x.active && a->x.kernel;
	ssize_t r = out_relay(a, *fd, type, relay);

	if (r == 0 || (r < 0 && r != -EAGAIN)) {
		close(*fd);
		*fd = -1;
	}
}

static void process_output(struct agent *a, int *fd, unsigned char type)
{
	ssize_t r = out_relay(a, *fd, type, true);

	if (r == 0 || (r < 0 && r != -EAGAIN)) {
		close(*fd);
		*fd = -1;
	}
}

static void loop(struct agent *a)
{
	for (;;) {
		struct pollfd pf[P_N];
		bool room = out_pending(a) < AGENT_OUT_HIGH;
		bool krelay = a->x.active && a->x.kernel;
		long long now = agent_now_ms();
		int r;

		for (int i = 0; i < P_N; i++)
			pf[i] = (struct pollfd){-1, POLLIN, 0};
		pf[P_IN].fd = a->in_eof ? -1 : 0;
		pf[P_OUT].fd = out_pending(a) ? 1 : -1;
		pf[P_OUT].events = POLLOUT;
		pf[P_SIG].fd = a->sfd;
		pf[P_KFROM].fd = a->k.from_fd;
		pf[P_KTO].fd = a->k.toq.len > a->k.toq_head ? a->k.to_fd : -1;
		pf[P_KTO].events = POLLOUT;
		pf[P_KOUT].fd = !krelay || room ? a->k.out_fd : -1;
		pf[P_KERR].fd = !krelay || room ? a->k.err_fd : -1;
		if (a->x.active && !a->x.kernel && room) {
			pf[P_XOUT].fd = a->x.out_fd;
			pf[P_XERR].fd = a->x.err_fd;
		}
		r = poll(pf, P_N, poll_timeout(a, now));
		if (r < 0 && errno != EINTR)
			agent_exit(a, 70, "poll failed");
		if (r > 0) {
			if (pf[P_OUT].revents)
				out_flush(a);
			if (pf[P_SIG].revents)
				read_signals(a);
			if (pf[P_KOUT].revents && a->k.out_fd >= 0)
				kernel_output(a, &a->k.out_fd, 'o');
			if (pf[P_KERR].revents && a->k.err_fd >= 0)
				kernel_output(a, &a->k.err_fd, 'e');
			if (pf[P_XOUT].revents && a->x.out_fd >= 0)
				process_output(a, &a->x.out_fd, 'o');
			if (pf[P_XERR].revents && a->x.err_fd >= 0)
				process_output(a, &a->x.err_fd, 'e');
			if (pf[P_KFROM].revents && a->k.from_fd >= 0)
				kernel_readable(a);
			if (pf[P_KTO].revents && a->k.to_fd >= 0)
				kernel_flush(a);
			if (pf[P_IN].revents)
				read_daemon(a);
		}
		now = agent_now_ms();
		kernel_tick(a, now);
		exec_tick(a, now);
		if (out_pending(a))
			out_flush(a);
	}
}

int main(int argc, char **argv)
{
	static struct agent a;

	a.t0_ms = agent_now_ms();
	parse_args(&a, argc, argv);
	if (a.channel)
		channel_connect(a.channel);
	setup(&a);
	if (!a.sweep_ok)
		out_log(&a, "PID 1 is not a container init: leftover "
		            "processes will not be swept");
	if (a.kernel_mode)
		kernel_start(&a);
	else
		kernel_send_ready(&a, NULL, 0);
	out_flush(&a);
	loop(&a);
	return 0;
}
