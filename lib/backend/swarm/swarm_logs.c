/* SPDX-License-Identifier: MIT */
/*
 * swarm_logs: a Swarm box's stream is its service's logs, followed while
 * the task runs and read once more, whole, when it ended (the follow
 * connection may miss the end); see swarm_internal.h.
 */
#include "backend/swarm/swarm_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"
#include "util/num.h"
#include "util/pct.h"

/* ---- a box's stream: the service's logs --------------------------------- */

static int sw_frame(void *arg, enum docker_stream_id id, const char *p,
                    size_t n)
{
	struct sw_stream *s = arg;
	int w =
	    id == DOCKER_STREAM_STDERR || id == DOCKER_STREAM_SYSTEM ? 1 : 0;

	if (s->final && s->skip[w] > 0) {
		size_t k = s->skip[w] < n ? (size_t)s->skip[w] : n;

		s->skip[w] -= k;
		p += k;
		n -= k;
		if (n == 0)
			return 0;
	}
	if (w == 1 && s->b->ehead_len < sizeof(s->b->ehead) - 1) {
		struct sw_box *b = s->b;
		size_t k = sizeof(b->ehead) - 1 - b->ehead_len;

		k = k < n ? k : n;
		memcpy(b->ehead + b->ehead_len, p, k);
		b->ehead_len += k;
		b->ehead[b->ehead_len] = '\0';
	}
	s->seen[w] += n;
	return s->fn(s->arg, w + 1, p, n);
}

static int sw_logs_path(const struct sw_box *b, bool follow, char *path,
                        size_t len)
{
	int n = snprintf(path, len, "/services/%s/logs?stdout=1&stderr=1%s",
	                 b->id, follow ? "&follow=1" : "");

	return n < 0 || (size_t)n >= len || !swarm_id_ok(b->id) ? -EINVAL : 0;
}

int swarm_stream_follow(struct sw_stream *s, char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	char path[160];
	int rc;

	if (sw_logs_path(s->b, true, path, sizeof(path)) < 0) {
		snprintf(err, errlen, "invalid service id");
		return -EINVAL;
	}
	rc = docker_stream_get(s->b->be->docker, path, &s->a, err, errlen);
	if (rc < 0)
		return rc;
	ev.data.fd = docker_attach_fd(s->a);
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0) {
		rc = -errno;
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		docker_attach_close(s->a);
		s->a = NULL;
	}
	return rc;
}

static void sw_stream_unfollow(struct sw_stream *s)
{
	if (!s->a)
		return;
	(void)epoll_ctl(s->ep, EPOLL_CTL_DEL, docker_attach_fd(s->a), NULL);
	docker_attach_close(s->a);
	s->a = NULL;
}

/*
 * The task is terminal: reads the whole log once more, without follow,
 * and hands on what follow had not (per stream, after the bytes already
 * seen). Follow holds back a last line without a newline, and may lag.
 */
static int sw_stream_final(struct sw_stream *s, char *err, size_t errlen)
{
	struct docker_attach *a = NULL;
	long long end =
	    mono_ms() + (long long)s->b->be->cfg->engine_timeout_s * 1000;
	char path[160];
	int rc;

	sw_stream_unfollow(s);
	if (sw_logs_path(s->b, false, path, sizeof(path)) < 0) {
		snprintf(err, errlen, "invalid service id");
		return -EINVAL;
	}
	rc = docker_stream_get(s->b->be->docker, path, &a, err, errlen);
	if (rc < 0)
		return rc;
	s->final = true;
	s->skip[0] = s->seen[0];
	s->skip[1] = s->seen[1];
	docker_stream_init(&s->ds, 0, sw_frame, s);
	for (;;) {
		struct pollfd p = {.fd = docker_attach_fd(a), .events = POLLIN};
		ssize_t got = docker_attach_read(a, s->buf, SW_CHUNK);

		if (got == -EAGAIN) {
			long long left = end - mono_ms();

			if (left <= 0) {
				snprintf(err, errlen,
				         "the end of the run's output did not "
				         "arrive from the Swarm in time");
				rc = -ETIMEDOUT;
				break;
			}
			(void)poll(&p, 1, (int)(left > 1000 ? 1000 : left));
			continue;
		}
		if (got < 0) {
			snprintf(err, errlen, "reading the run's output: %s",
			         strerror((int)-got));
			rc = (int)got;
			break;
		}
		if (got == 0) {
			rc = docker_stream_end(&s->ds);
			if (rc < 0)
				snprintf(err, errlen, "run output stream: %s",
				         docker_stream_strerror(rc));
			break;
		}
		rc = docker_stream_feed(&s->ds, s->buf, (size_t)got);
		if (rc < 0) {
			if (rc == -EPROTO || rc == -EMSGSIZE)
				snprintf(err, errlen, "run output stream: %s",
				         docker_stream_strerror(rc));
			break;
		}
	}
	docker_attach_close(a);
	return rc;
}

static int sw_stream_fd(const struct box_stream *base)
{
	return ((const struct sw_stream *)base)->ep;
}

static bool sw_stream_pending(const struct box_stream *base)
{
	const struct sw_stream *s = (const struct sw_stream *)base;

	return s->a && docker_attach_pending(s->a);
}

/* Looks at the task: 1 when it is terminal, 0 not yet, or -errno. */
static int sw_stream_check(struct sw_stream *s, char *err, size_t errlen)
{
	struct sw_box *b = s->b;
	int rc;

	s->next_check = mono_ms() + SW_POLL_MS;
	rc = swarm_refresh(b, err, errlen);
	if (rc == -ENOENT)
		return 1;
	if (rc < 0)
		return 0; /* a slow manager is not the run's end */
	if (b->task.have && swarm_rank(b->task.state) == 2)
		return 1;
	if (!b->task.have && b->killed)
		return 1;
	if (swarm_node_gone(b))
		return swarm_lost_msg(b, err, errlen);
	return 0;
}

static int sw_stream_pump(struct box_stream *base, box_output_fn fn, void *arg,
                          char *err, size_t errlen)
{
	struct sw_stream *s = (struct sw_stream *)base;
	uint64_t ticks;
	ssize_t got = -EAGAIN;
	int rc;

	if (s->error)
		return s->error;
	if (s->ended)
		return 0;
	if (read(s->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		log_debug("swarm stream: timerfd: %s", strerror(errno));
	s->fn = fn;
	s->arg = arg;
	if (s->a) {
		if (!s->ds.fn)
			docker_stream_init(&s->ds, 0, sw_frame, s);
		got = docker_attach_read(s->a, s->buf, SW_CHUNK);
		if (got > 0) {
			rc = docker_stream_feed(&s->ds, s->buf, (size_t)got);
			if (rc == -EPROTO || rc == -EMSGSIZE) {
				snprintf(err, errlen, "run output stream: %s",
				         docker_stream_strerror(rc));
				return s->error = rc;
			}
			if (rc < 0)
				return s->error = rc;
			return 1;
		}
		if (got != -EAGAIN)
			sw_stream_unfollow(s); /* the final read has it all */
	}
	if (mono_ms() < s->next_check)
		return -EAGAIN;
	rc = sw_stream_check(s, err, errlen);
	if (rc < 0)
		return s->error = rc;
	if (rc == 0)
		return -EAGAIN;
	rc = sw_stream_final(s, err, errlen);
	if (rc < 0)
		return s->error = rc;
	s->ended = true;
	return 1;
}

static ssize_t sw_stream_write(struct box_stream *base, const void *p, size_t n)
{
	(void)base;
	(void)p;
	(void)n;
	return -EPIPE; /* stdin is a file (BACKEND_CAN_STDIN is not set) */
}

static void sw_stream_close_write(struct box_stream *base)
{
	(void)base;
}

static void sw_stream_close(struct box_stream *base)
{
	struct sw_stream *s = (struct sw_stream *)base;

	sw_stream_unfollow(s);
	if (s->b)
		s->b->stream = NULL;
	if (s->ep >= 0)
		close(s->ep);
	if (s->tfd >= 0)
		close(s->tfd);
	free(s->buf);
	free(s);
}

const struct box_stream_impl swarm_stream_impl = {
    .fd = sw_stream_fd,
    .pending = sw_stream_pending,
    .pump = sw_stream_pump,
    .write = sw_stream_write,
    .close_write = sw_stream_close_write,
    .close = sw_stream_close,
};

/*
 * The stream exists before the service (one-off runs attach before they
 * start); its log connection opens once the service does. Its descriptor
 * is an epoll set of that connection and a timer, so a poller wakes both
 * for output and to look at the task's state.
 */
int swarm_box_attach(struct box *base, struct box_stream **out, char *err,
                     size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	struct itimerspec its = {.it_interval = {0, SW_POLL_MS * 1000000L},
	                         .it_value = {0, SW_POLL_MS * 1000000L}};
	struct epoll_event ev = {.events = EPOLLIN};
	struct sw_stream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->base.impl = &swarm_stream_impl;
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	s->buf = malloc(SW_CHUNK);
	ev.data.fd = s->tfd;
	if (s->ep < 0 || s->tfd < 0 || !s->buf ||
	    timerfd_settime(s->tfd, 0, &its, NULL) < 0 ||
	    epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tfd, &ev) < 0) {
		snprintf(err, errlen, "cannot make the output stream: %s",
		         s->buf ? strerror(errno) : "out of memory");
		sw_stream_close(&s->base);
		return -ENOMEM;
	}
	s->b = b;
	b->stream = s;
	*out = &s->base;
	return 0;
}
