/* SPDX-License-Identifier: MIT */
/*
 * mcpsd-agent: the process the daemon runs inside every session container
 * (docs/agent-protocol.md). These declarations are shared by the agent's own
 * files only: main.c (flags, set-up, the poll loop, the daemon's frames),
 * outq.c (frames to the daemon), exec.c (one call at a time), kernel.c (the
 * Python kernel's life) and sweep.c (killing leftovers, cgroup figures).
 *
 * The agent is single-threaded: every function here runs on the poll loop.
 * Nothing in it may block on anything the code in the container controls:
 * every descriptor it shares with that code is non-blocking, and every wait
 * has a deadline.
 */
#ifndef MCPSD_AGENT_H
#define MCPSD_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "run/warm/agentframe.h"
#include "util/buf.h"

/* Stop reading output pipes while this much waits for the daemon. */
#define AGENT_OUT_HIGH (512u * 1024u)
/* The daemon stopped reading altogether: give up. */
#define AGENT_OUT_LIMIT (64u * 1024u * 1024u)
/* How long a kernel may take to send R (preloading included). */
#define AGENT_KERNEL_START_MS 120000
/* After the kernel closed a control pipe, how long it has to die. */
#define AGENT_KERNEL_CLOSED_MS 1000
/* After X with status "exit", how long the kernel has to end. */
#define AGENT_KERNEL_EXIT_MS 5000
/* Kernels that die before R, in a row, before the agent gives up. */
#define AGENT_KERNEL_TRIES 3
/* The sweep gives up on processes that will not die after this long. */
#define AGENT_SWEEP_MS 2000
/* Most preloaded module names reported in R. */
#define AGENT_PRELOAD_MAX 64

/* cgroup figures; -1 where the file is missing or unreadable. */
struct agent_stats {
	long long usage, peak, limit; /* bytes; limit -1 when unlimited */
	long long oom_kills;          /* the memory cgroup's OOM-kill counter */
	long long cpu_ns;             /* CPU time used by the container */
};

enum kernel_state {
	KERNEL_NONE,     /* no kernel (process-only mode, or gave up) */
	KERNEL_STARTING, /* forked, waiting for its R */
	KERNEL_READY,    /* idle or running an exec */
};

struct kernel {
	enum kernel_state state;
	pid_t pid;
	int to_fd;   /* frames to the kernel (its fd 3) */
	int from_fd; /* frames from the kernel (its fd 4) */
	int out_fd;  /* its stdout */
	int err_fd;  /* its stderr */
	struct agentframe_decoder dec;
	struct buf toq; /* frames waiting for to_fd */
	size_t toq_head;
	long long started_ms;    /* fork time, for R's "ms" */
	long long deadline_ms;   /* start deadline while STARTING */
	const char *kill_reason; /* set when the agent killed it */
	const char *lost;   /* reason for the next R's "lost"; NULL for none */
	unsigned failures;  /* deaths before R in a row */
	long long oom_seen; /* OOM-kill counter last seen */
	bool claim_sent;    /* C forwarded, its A not yet back */
	/*
	 * One of descriptors 3 and 4 closed: the kernel is dying (its pipes
	 * close before its parent can reap it) or the code closed them. If
	 * it still lives at this time, that is a protocol error.
	 */
	long long closed_deadline;
};

struct exec {
	bool active;
	uint64_t id;
	bool kernel;        /* the kernel runs it */
	pid_t pid;          /* process execs */
	int out_fd, err_fd; /* process execs; -1 when closed */
	bool exited;
	int wstatus;
	bool interrupted, killed;
	struct buf x; /* the kernel's X payload, once received */
	bool have_x;
	char status[16]; /* the X status word */
	long long
	    exit_deadline; /* X said "exit": the kernel must end by then */
	long long cpu0;    /* cpu_ns at the start */
	long long oom0;    /* oom_kills at the start */
};

struct agent {
	bool kernel_mode;
	const char *channel; /* --channel: the socket to the daemon */
	char **kernel_argv;  /* NULL-terminated, --preload appended */
	bool sweep_ok;       /* running under a container's init */
	int sfd;             /* signalfd: SIGCHLD, SIGINT, SIGTERM */
	bool in_eof;
	struct agentframe_decoder in; /* frames from the daemon */
	struct buf out;               /* frames to the daemon */
	size_t out_head;
	struct kernel k;
	struct exec x;
	struct buf pending; /* a kernel E that arrived before R */
	bool have_pending;
	bool claim_pending;    /* C waiting for the kernel to be ready */
	char claim_error[256]; /* the agent's own chdir result for A */
	long long t0_ms;       /* agent start */
	long long pre_swept;   /* swept before execs, for the log */
	int devnull;
};

/* ---- main.c ----------------------------------------------------------- */
long long agent_now_ms(void);
/* Ends the agent: kills the kernel, exits with status. */
__attribute__((noreturn)) void agent_exit(struct agent *a, int status,
                                          const char *why);
/* Sets O_NONBLOCK. */
int agent_nonblock(int fd);
/*
 * Moves fd to a descriptor >= 10 (for the dup2 dance in a child): returns
 * the new descriptor or -1.
 */
int agent_fd_high(int fd);
/* In a forked child: default signal handling, empty mask, fds >= from closed.
 */
void agent_child_reset(int from);

/* Sends A for a claim; kernel_err is the kernel's complaint, if any. */
void agent_claim_answered(struct agent *a, const char *kernel_err);

/* ---- outq.c ----------------------------------------------------------- */
/* Queues one frame to the daemon; exits the agent if the queue overflows. */
void out_frame(struct agent *a, unsigned char type, const void *p, size_t n);
/* Queues an `L` frame (diagnostics, at most 4 KiB). */
void out_log(struct agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Bytes waiting for the daemon. */
size_t out_pending(const struct agent *a);
/* Writes what the pipe takes; exits the agent when the daemon is gone. */
void out_flush(struct agent *a);
/* Appends src[0..n) as a JSON string; exits on allocation failure. */
void out_json_str(struct agent *a, struct buf *b, const void *src, size_t n);
/* buf_printf or exit. */
void out_printf(struct agent *a, struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Appends a JSON number, or null when v < 0. */
void out_num(struct agent *a, struct buf *b, long long v);
/* Reads up to one output chunk from fd and queues it as `type` (if relay).
 * Returns bytes read, 0 at EOF, -EAGAIN, or -errno. */
ssize_t out_relay(struct agent *a, int fd, unsigned char type, bool relay);
/* Relays what is in the pipe right now (FIONREAD), at most max bytes. */
void out_drain(struct agent *a, int fd, unsigned char type, size_t max);

/* ---- exec.c ----------------------------------------------------------- */
/* An `E` from the daemon. */
void exec_start(struct agent *a, const unsigned char *p, size_t n);
/* `I` / `K` for exec id. */
void exec_signal(struct agent *a, uint64_t id, bool kill_it);
/* The process of a process exec ended. */
void exec_process_ended(struct agent *a, int wstatus);
/* The kernel sent X (payload validated by the caller). */
void exec_kernel_result(struct agent *a, const unsigned char *p, size_t n,
                        const char *status);
/* The kernel died while running the exec; reason as in D. */
void exec_kernel_died(struct agent *a, int wstatus, const char *reason);
/* Deadlines (the kernel's exit after X status "exit"). */
void exec_tick(struct agent *a, long long now);
/* Starts the kernel exec that waited for the kernel's R, if any. */
void exec_dispatch_pending(struct agent *a);

/* ---- kernel.c --------------------------------------------------------- */
/* Forks a new kernel (after a sweep); gives up after AGENT_KERNEL_TRIES. */
void kernel_start(struct agent *a);
/* Kills the kernel's process group with SIGKILL, remembering why. */
void kernel_kill(struct agent *a, const char *reason);
/* Sends SIGINT to the kernel's process group. */
void kernel_interrupt(struct agent *a);
/* Queues a frame to the kernel. */
void kernel_send(struct agent *a, unsigned char type, const void *p, size_t n);
/* Writes queued frames; reads and handles the kernel's frames. */
void kernel_flush(struct agent *a);
void kernel_readable(struct agent *a);
/* The kernel process ended (from waitpid). */
void kernel_reaped(struct agent *a, int wstatus);
/* Start deadline. */
void kernel_tick(struct agent *a, long long now);
/* A `C` from the daemon in kernel mode, after the agent's own chdir. */
void kernel_claim(struct agent *a);
/* Sends R to the daemon for the current state (process mode too). */
void kernel_send_ready(struct agent *a, const unsigned char *tlv, size_t n);

/* ---- sweep.c ---------------------------------------------------------- */
/*
 * Kills every process of the container but PID 1, the agent and keep
 * (the kernel; 0 for none), round after round until none is left or
 * AGENT_SWEEP_MS passed. Returns how many distinct processes it killed;
 * *left gets how many could not be killed in time.
 */
unsigned sweep_run(const struct agent *a, pid_t keep, unsigned *left);
/* Whether PID 1 is a container init (sweeping is safe). */
bool sweep_allowed(void);
/* Reads the cgroup figures (v1 names, else v2). */
void stats_read(struct agent_stats *s);
long long stats_oom_kills(void);
long long stats_cpu_ns(void);

#endif
