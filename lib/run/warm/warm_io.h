/* SPDX-License-Identifier: MIT */
/*
 * warm_io: the frames between the daemon and a warm box's agent
 * (docs/agent-protocol.md): writing a frame within a time limit, and
 * reading what the box sent (frames on its stdout, diagnostics on its
 * stderr) until a condition holds, a time passes or a cancel arrives.
 * Everything read is hostile: frames are bounded by AGENTFRAME_MAX, JSON is
 * parsed only from whole frames, types and exec ids are checked, and a
 * violation is reported so the caller ends the box. Shared by warm_agent.c
 * (start, claim) and warm_exec.c (a call).
 *
 * Threads: a box and its struct warm_io belong to one thread at a time.
 */
#ifndef MCPSD_WARM_IO_H
#define MCPSD_WARM_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "run/warm/warm_agent.h"

#define WARM_IO_START_MS 30000 /* a box's start, kernel included */
#define WARM_IO_WRITE_MS 10000 /* writing a frame to the agent */
#define WARM_IO_DIAG 2048      /* agent diagnostics kept for the log */

struct capture;

/*
 * What one read of a box's stream produced. A call to warm_io_pump hands every
 * whole frame to warm_frame, which fills this in.
 */
struct warm_io {
	struct warm_box *b;
	uint64_t exec_id; /* 0: no exec running */
	/* output of the exec */
	struct capture *out, *err;
	size_t total, max_total;
	bool limit;
	const struct runner_request *req;
	/* frames seen */
	bool ready, claimed, done, pong;
	cJSON *x, *d;
	/* the agent's own stderr, for the log */
	char diag[WARM_IO_DIAG];
	size_t diag_len;
	char proto[160]; /* a protocol violation, "" for none */
	long long tick;  /* mono_ms of the last on_tick */
};

/* Writes a file into the directory dfd (mode, replacing nothing). */
__attribute__((warn_unused_result)) int
warm_io_write_file(int dfd, const char *name, const void *p, size_t n,
                   mode_t mode);

/* Sends one frame of type with payload p within WARM_IO_WRITE_MS. */
__attribute__((warn_unused_result)) int
warm_io_send(struct warm_box *b, unsigned char type, const void *p, size_t n);

/* Sends a frame whose payload is the one record id ('n'). */
__attribute__((warn_unused_result)) int
warm_io_send_id(struct warm_box *b, unsigned char type, uint64_t id);

/*
 * Reads what the box sent, waiting up to until_ms (mono_ms) or until stop
 * says enough, or cancel_fd is readable (-1 for none). Calls the request's
 * on_tick about once a second. Returns 1 when stop() became true, 0 on
 * time out or cancel (see *cancelled, may be NULL), -EPIPE at the end of
 * the stream, -EPROTO on a violation (io->proto says which), or another
 * -errno.
 */
__attribute__((warn_unused_result)) int
warm_io_pump(struct warm_io *io, long long until_ms, int cancel_fd,
             bool (*stop)(const struct warm_io *io), bool *cancelled);

/* Conditions for warm_io_pump. */
bool warm_io_until_ready(const struct warm_io *io);
bool warm_io_until_claimed(const struct warm_io *io);
bool warm_io_until_done(const struct warm_io *io);
bool warm_io_never(const struct warm_io *io);

/* Frees what io holds and logs the agent's diagnostics. */
void warm_io_finish(struct warm_io *io);

/* Marks b dead for reason, closes its stream and kills its box. */
void warm_io_kill(struct warm_box *b, const char *reason);

/*
 * The box's stream ended: asks the engine why (OOM-killed or not) and
 * marks b dead ("oom" or "crash").
 */
void warm_io_died(struct warm_box *b, bool *oom);

#endif
