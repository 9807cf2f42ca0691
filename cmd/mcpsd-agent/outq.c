/* SPDX-License-Identifier: MIT */
/*
 * outq: the frames the agent sends the daemon on its standard output. They
 * wait in one queue written without blocking from the poll loop, so a
 * daemon that reads slowly never stops the agent from reading its input
 * (an `I` or `K` must always get through). Output pipes are not read while
 * the queue is above AGENT_OUT_HIGH, which pushes back on the code that
 * writes them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent.h"

#define OUT_LOG_MAX 4096

size_t out_pending(const struct agent *a)
{
	return a->out.len - a->out_head;
}

static void out_append(struct agent *a, const void *p, size_t n)
{
	if (buf_append(&a->out, p, n) < 0)
		agent_exit(a, 70,
		           "output queue overflow: the daemon stopped "
		           "reading");
}

void out_frame(struct agent *a, unsigned char type, const void *p, size_t n)
{
	unsigned char h[AGENTFRAME_HDR];

	if (agentframe_header(h, type, n, AGENTFRAME_MAX) < 0)
		agent_exit(a, 70, "internal error: frame too long");
	/* Compact before growing: the head is where the daemon got to. */
	if (a->out_head > 0 && a->out_head >= a->out.len / 2) {
		buf_consume(&a->out, a->out_head);
		a->out_head = 0;
	}
	out_append(a, h, sizeof(h));
	if (n)
		out_append(a, p, n);
}

void out_log(struct agent *a, const char *fmt, ...)
{
	char msg[OUT_LOG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	out_frame(a, 'L', msg, (size_t)n);
}

void out_flush(struct agent *a)
{
	while (out_pending(a) > 0) {
		ssize_t w = write(1, a->out.data + a->out_head, out_pending(a));

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			/* Nobody reads us any more: the container must end. */
			agent_exit(a, 0, NULL);
		}
		a->out_head += (size_t)w;
	}
	if (a->out_head == a->out.len) {
		buf_reset(&a->out);
		a->out_head = 0;
	}
}

void out_json_str(struct agent *a, struct buf *b, const void *src, size_t n)
{
	size_t need = agentframe_json_str(NULL, 0, src, n);
	char *tmp = malloc(need + 1);

	if (!tmp)
		agent_exit(a, 70, "out of memory");
	agentframe_json_str(tmp, need + 1, src, n);
	if (buf_append(b, tmp, need) < 0) {
		free(tmp);
		agent_exit(a, 70, "out of memory");
	}
	free(tmp);
}

void out_printf(struct agent *a, struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	if (r < 0)
		agent_exit(a, 70, "out of memory");
}

void out_num(struct agent *a, struct buf *b, long long v)
{
	if (v < 0)
		out_printf(a, b, "null");
	else
		out_printf(a, b, "%lld", v);
}

ssize_t out_relay(struct agent *a, int fd, unsigned char type, bool relay)
{
	static char chunk[AGENTFRAME_OUTPUT_CHUNK];
	ssize_t r;

	do
		r = read(fd, chunk, sizeof(chunk));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	if (r > 0 && relay)
		out_frame(a, type, chunk, (size_t)r);
	return r;
}

void out_drain(struct agent *a, int fd, unsigned char type, size_t max)
{
	int avail = 0;
	size_t left;

	if (fd < 0 || ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0)
		return;
	left = (size_t)avail < max ? (size_t)avail : max;
	while (left > 0) {
		ssize_t r = out_relay(a, fd, type, true);

		if (r <= 0)
			break;
		left = (size_t)r < left ? left - (size_t)r : 0;
	}
}
