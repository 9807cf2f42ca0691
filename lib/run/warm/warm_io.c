/* SPDX-License-Identifier: MIT */
/*
 * warm_io: see warm_io.h.
 */
#include "run/warm/warm_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/capture.h"
#include "util/log.h"
#include "util/mono.h"

/* Frames up to this size (header included) go to the agent in one write. */
#define WARM_IO_SEND_ONE 4096

int warm_io_write_file(int dfd, const char *name, const void *p, size_t n,
                       mode_t mode)
{
	int fd =
	    openat(dfd, name,
	           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	size_t off = 0;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (off < n) {
		ssize_t w = write(fd, (const char *)p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (rc == 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* ---- frames ------------------------------------------------------------- */

/* Writes all of p to the box within WARM_IO_WRITE_MS. 0 or -errno. */
static int warm_io_write_all(struct warm_box *b, const void *p, size_t n)
{
	long long deadline = mono_ms() + WARM_IO_WRITE_MS;
	size_t off = 0;

	while (off < n) {
		struct pollfd pf = {.fd = box_stream_fd(b->stream),
		                    .events = POLLOUT};
		ssize_t w =
		    box_stream_write(b->stream, (const char *)p + off, n - off);
		long long left;

		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w != -EAGAIN)
			return w < 0 ? (int)w : -EIO;
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/*
 * Sends one frame of type with payload p: in one write when it fits in
 * WARM_IO_SEND_ONE (an exec's records do), so that the agent never wakes
 * for a header whose payload is still to come.
 */
int warm_io_send(struct warm_box *b, unsigned char type, const void *p,
                 size_t n)
{
	unsigned char frame[WARM_IO_SEND_ONE];
	int rc = agentframe_header(frame, type, n, AGENTFRAME_MAX_IN);

	if (rc < 0)
		return rc;
	if (n <= sizeof(frame) - AGENTFRAME_HDR) {
		if (n)
			memcpy(frame + AGENTFRAME_HDR, p, n);
		return warm_io_write_all(b, frame, AGENTFRAME_HDR + n);
	}
	rc = warm_io_write_all(b, frame, AGENTFRAME_HDR);
	if (rc == 0)
		rc = warm_io_write_all(b, p, n);
	return rc;
}

/* Sends a frame whose payload is the one record id ('n'). */
int warm_io_send_id(struct warm_box *b, unsigned char type, uint64_t id)
{
	unsigned char rec[64];
	char num[24];
	size_t off = 0;
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);

	if (agentframe_tlv_put(rec, sizeof(rec), &off, 'n', num, (size_t)n) < 0)
		return -ENOSPC;
	return warm_io_send(b, type, rec, off);
}

static int warm_protocol(struct warm_io *io, const char *what)
{
	snprintf(io->proto, sizeof(io->proto), "%s", what);
	return -EPROTO;
}

/* A JSON object from a frame payload (bounded by the frame), or NULL. */
static cJSON *warm_json(const unsigned char *p, size_t n)
{
	cJSON *j = cJSON_ParseWithLength((const char *)p, n);

	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* The exec id a result frame carries must be the exec's. */
static bool warm_id_is(const cJSON *j, uint64_t id)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "id");

	return cJSON_IsNumber(v) && v->valuedouble == (double)id;
}

static void warm_ready(struct warm_io *io, const cJSON *r)
{
	const char *lost =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "lost"));

	io->ready = true;
	io->b->ready = true;
	if (lost && lost[0])
		snprintf(io->b->lost, sizeof(io->b->lost), "%.23s", lost);
	/* A kernel that died between calls: its successor loads the last
	 * save (durable sessions, warm_state.h). */
	if (lost && lost[0] && io->b->kernel)
		io->b->restore_next = true;
}

static void warm_output(struct warm_io *io, int which, const unsigned char *p,
                        size_t n)
{
	size_t room = io->max_total - io->total;

	if (io->limit)
		return;
	if (n > room) {
		n = room;
		io->limit = true;
	}
	capture_add(which == 2 ? io->err : io->out, (const char *)p, n);
	io->total += n;
	if (io->req && io->req->on_output)
		io->req->on_output(io->req->event_arg, which, (const char *)p,
		                   n);
}

static int warm_frame(void *arg, unsigned char type, const unsigned char *p,
                      size_t n)
{
	struct warm_io *io = arg;
	cJSON *j;

	switch (type) {
	case 'o':
	case 'e':
		if (!io->exec_id || io->done)
			return warm_protocol(io, "output outside an exec");
		if (n > AGENTFRAME_OUTPUT_CHUNK)
			return warm_protocol(io, "an output frame too large");
		warm_output(io, type == 'e' ? 2 : 1, p, n);
		return 0;
	case 'X':
	case 'D':
		if (!io->exec_id || io->done ||
		    (type == 'X' ? io->x != NULL : false))
			return warm_protocol(io, "a result outside an exec");
		j = warm_json(p, n);
		if (!j || !warm_id_is(j, io->exec_id)) {
			cJSON_Delete(j);
			return warm_protocol(io, "a result for another exec");
		}
		if (type == 'X') {
			io->x = j;
		} else {
			io->d = j;
			io->done = true;
			/* An R after this D is a new kernel's (warm_take_d). */
			io->ready = false;
		}
		return 0;
	case 'R':
		j = warm_json(p, n);
		if (!j)
			return warm_protocol(io, "a malformed ready frame");
		warm_ready(io, j);
		cJSON_Delete(j);
		return 0;
	case 'A':
		io->claimed = true;
		return 0;
	case 'p':
		io->pong = true;
		return 0;
	case 'L':
		log_debug("agent %s: %.*s", io->b->box->id,
		          (int)(n > 512 ? 512 : n), (const char *)p);
		return 0;
	default:
		return warm_protocol(io, "an unknown frame type");
	}
}

/* The box's stream: stdout carries frames, stderr the agent's notes. */
static int warm_stream_out(void *arg, int which, const char *p, size_t n)
{
	struct warm_io *io = arg;

	if (which == 2) {
		size_t room = sizeof(io->diag) - 1 - io->diag_len;

		if (n > room)
			n = room;
		memcpy(io->diag + io->diag_len, p, n);
		io->diag_len += n;
		io->diag[io->diag_len] = '\0';
		return 0;
	}
	return agentframe_feed(&io->b->dec, p, n, warm_frame, io);
}

/*
 * Reads what the box sent, waiting up to until_ms (mono_ms) or until stop
 * says enough, or cancel_fd is readable. Returns 1 when stop() became true,
 * 0 on time out or cancel (see *cancelled), -EPIPE at the end of the stream,
 * -EPROTO on a violation (io->proto says which), or another -errno.
 */
int warm_io_pump(struct warm_io *io, long long until_ms, int cancel_fd,
                 bool (*stop)(const struct warm_io *io), bool *cancelled)
{
	struct warm_box *b = io->b;
	bool last = false;
	char msg[256];

	for (;;) {
		struct pollfd pf[2] = {
		    {.fd = box_stream_fd(b->stream), .events = POLLIN},
		    {.fd = cancel_fd, .events = POLLIN}};
		long long left;
		int rc, rounds;

		if (stop(io))
			return 1;
		if (io->req && io->req->on_tick &&
		    mono_ms() - io->tick >= 1000) {
			io->tick = mono_ms();
			io->req->on_tick(io->req->event_arg);
		}
		/*
		 * Past the time, what is there is still read once (without
		 * waiting): a frame that arrived just in time counts, and a
		 * look at an idle box (until_ms now) sees its end or its R.
		 */
		left = until_ms - mono_ms();
		if (left <= 0) {
			if (last)
				return 0;
			last = true;
			left = 0;
		}
		if (!box_stream_pending(b->stream)) {
			rc = poll(pf, cancel_fd >= 0 ? 2 : 1,
			          (int)(left > 1000 ? 1000 : left));
			if (rc < 0 && errno != EINTR)
				return -errno;
			if (cancel_fd >= 0 && (pf[1].revents & POLLIN)) {
				if (cancelled)
					*cancelled = true;
				return 0;
			}
			if (rc <= 0 ||
			    !(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		for (rounds = 0; rounds < 16 && !stop(io); rounds++) {
			rc = box_stream_pump(b->stream, warm_stream_out, io,
			                     msg, sizeof(msg));
			if (rc == -EAGAIN)
				break;
			if (rc == 0)
				return -EPIPE;
			if (rc == -EPROTO && io->proto[0])
				return -EPROTO;
			if (rc < 0) {
				if (!io->proto[0])
					snprintf(io->proto, sizeof(io->proto),
					         "%.150s",
					         rc == -EMSGSIZE
					             ? "a frame too large"
					             : msg);
				return -EPROTO;
			}
		}
	}
}

bool warm_io_until_ready(const struct warm_io *io)
{
	return io->ready;
}

bool warm_io_until_claimed(const struct warm_io *io)
{
	return io->claimed;
}

bool warm_io_until_done(const struct warm_io *io)
{
	return io->done;
}

bool warm_io_never(const struct warm_io *io)
{
	(void)io;
	return false;
}

void warm_io_finish(struct warm_io *io)
{
	cJSON_Delete(io->x);
	cJSON_Delete(io->d);
	io->x = io->d = NULL;
	if (io->diag_len)
		log_debug("agent %s said: %s", io->b->box->id, io->diag);
}

/* Marks b dead for reason. */
void warm_io_kill(struct warm_box *b, const char *reason)
{
	char err[256];

	b->dead = true;
	b->ready = false;
	if (!b->dead_reason[0])
		snprintf(b->dead_reason, sizeof(b->dead_reason), "%s", reason);
	/* The stream first: a kill hangs while it is open and unread. */
	box_stream_close(b->stream);
	b->stream = NULL;
	if (box_signal(b->box, "KILL", err, sizeof(err)) < 0)
		log_debug("killing box %s: %s", b->box->id, err);
}

/*
 * Why a box's stream ended: the engine's word on its main process. The
 * agent exits 0 only at the end of its input or on SIGTERM, so an exit 0
 * (or no word at all, the engine being away) means the box was stopped or
 * its connection cut from outside (the engine restarted), not a crash.
 */
void warm_io_died(struct warm_box *b, bool *oom)
{
	const char *why = "sandbox_lost";
	struct box_state st;
	char err[256];

	*oom = false;
	box_stream_close(b->stream);
	b->stream = NULL;
	if (box_wait(b->box, 2000, err, sizeof(err)) == 0 &&
	    box_inspect(b->box, &st, err, sizeof(err)) == 0) {
		*oom = st.oom_killed;
		if (st.oom_killed)
			why = "oom";
		else if (st.exit_code != 0)
			why = "crash";
	} else {
		log_info("box %s: its stream ended and the engine does not "
		         "say why: %s",
		         b->box->id, err);
		snprintf(b->dead_detail, sizeof(b->dead_detail), "%.199s", err);
	}
	warm_io_kill(b, why);
}
