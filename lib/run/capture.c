/* SPDX-License-Identifier: MIT */
/*
 * capture: one program's stdin and capped output over an attach stream.
 * Memory use is fixed per capture (the inline budget) plus one read buffer,
 * whatever the program prints.
 */
#include "run/capture.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"

#define CAPTURE_CHUNK (64 * 1024)

/* ---- UTF-8 -------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if invalid. */
static size_t capture_utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f; /* no surrogates */
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f; /* nothing above U+10FFFF */
	if (n < len)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

int capture_utf8_sanitize(const char *p, size_t n, struct buf *out)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, run = 0;
	int r;

	while (i < n) {
		size_t k = capture_utf8_len(s + i, n - i);

		if (k) {
			i += k;
			run += k;
			continue;
		}
		r = buf_append(out, p + i - run, run);
		if (r < 0)
			return r;
		run = 0;
		r = buf_append(out, "\xef\xbf\xbd", 3);
		if (r < 0)
			return r;
		i++;
	}
	return buf_append(out, p + i - run, run);
}

/* Drops an incomplete sequence at the end of p[0..n). */
static size_t capture_utf8_trim_end(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;

	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = s[n - back];

		if ((c & 0xc0) == 0x80)
			continue; /* continuation byte: look further back */
		size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;

		return need > back ? n - back : n;
	}
	return n;
}

/* Skips continuation bytes at the start of p (at most 3). */
static size_t capture_utf8_skip_start(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n && i < 3 && ((unsigned char)p[i] & 0xc0) == 0x80)
		i++;
	return i;
}

/* ---- capture ------------------------------------------------------------ */

int capture_init(struct capture *c, size_t inline_bytes, int fd,
                 size_t fd_limit)
{
	memset(c, 0, sizeof(*c));
	c->head_cap = inline_bytes - inline_bytes / 2;
	c->tail_cap = inline_bytes / 2;
	c->head = malloc(c->head_cap ? c->head_cap : 1);
	c->tail = malloc(c->tail_cap ? c->tail_cap : 1);
	c->fd = fd;
	c->fd_limit = fd_limit;
	return c->head && c->tail ? 0 : -ENOMEM;
}

void capture_finish(struct capture *c)
{
	free(c->head);
	free(c->tail);
	c->head = c->tail = NULL;
}

void capture_lazy_file(struct capture *c, int (*open)(void *arg, int which),
                       void *arg, int which)
{
	c->fd_open = open;
	c->fd_arg = arg;
	c->fd_which = which;
}

int capture_init_run(struct capture *out, struct capture *err,
                     size_t inline_bytes, size_t fd_limit, int out_fd,
                     int err_fd, int (*open)(void *arg, int which), void *arg)
{
	int r = capture_init(out, inline_bytes, out_fd, fd_limit);
	int r2 = capture_init(err, inline_bytes, err_fd, fd_limit);

	if (r < 0 || r2 < 0)
		return -ENOMEM;
	if (open && out_fd < 0 && err_fd < 0) {
		capture_lazy_file(out, open, arg, 1);
		capture_lazy_file(err, open, arg, 2);
	}
	return 0;
}

/* Writes n bytes of p to the copy, up to its limit. */
static void capture_save(struct capture *c, const char *p, size_t n)
{
	size_t want, off = 0;

	if (c->fd < 0 || c->fd_failed || c->saved >= c->fd_limit)
		return;
	want = n < c->fd_limit - c->saved ? n : c->fd_limit - c->saved;
	while (off < want) {
		ssize_t w = write(c->fd, p + off, want - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			log_warn("saving program output failed");
			c->fd_failed = true;
			break;
		}
		off += (size_t)w;
	}
	c->saved += off;
}

/*
 * Makes the lazy copy when n more bytes pass the inline budget: until
 * then the tail ring has never wrapped, so head then tail[0, tail_len)
 * are every byte in order.
 */
static void capture_open_late(struct capture *c, size_t n)
{
	if (!c->fd_open || c->fd >= 0 || c->fd_failed ||
	    c->total + n <= c->head_cap + c->tail_cap)
		return;
	c->fd = c->fd_open(c->fd_arg, c->fd_which);
	c->fd_open = NULL;
	if (c->fd < 0)
		return;
	capture_save(c, c->head, c->head_len);
	capture_save(c, c->tail, c->tail_len);
}

void capture_add(struct capture *c, const char *p, size_t n)
{
	capture_open_late(c, n);
	c->total += n;
	capture_save(c, p, n);
	if (c->head_len < c->head_cap) {
		size_t take = c->head_cap - c->head_len;

		if (take > n)
			take = n;
		memcpy(c->head + c->head_len, p, take);
		c->head_len += take;
		p += take;
		n -= take;
	}
	if (n == 0 || c->tail_cap == 0)
		return;
	if (n >= c->tail_cap) {
		memcpy(c->tail, p + n - c->tail_cap, c->tail_cap);
		c->tail_pos = 0;
		c->tail_len = c->tail_cap;
		return;
	}
	size_t first = c->tail_cap - c->tail_pos;

	if (first > n)
		first = n;
	memcpy(c->tail + c->tail_pos, p, first);
	memcpy(c->tail, p + first, n - first);
	c->tail_pos = (c->tail_pos + n) % c->tail_cap;
	c->tail_len =
	    c->tail_len + n > c->tail_cap ? c->tail_cap : c->tail_len + n;
}

char *capture_text(const struct capture *c, bool *truncated)
{
	struct buf b, raw;
	size_t start = c->tail_len < c->tail_cap ? 0 : c->tail_pos;
	char *text = NULL;
	int r;

	buf_init(&b, 0);
	buf_init(&raw, 0);
	*truncated = c->total > c->head_len + c->tail_len;
	/* The ring in order. */
	r = buf_append(&raw, c->tail + start, c->tail_len - start);
	if (r == 0)
		r = buf_append(&raw, c->tail, start);
	if (r < 0)
		goto out;
	if (!*truncated) {
		/* Contiguous: sanitize once, so no character is split. */
		struct buf all;

		buf_init(&all, 0);
		r = buf_append(&all, c->head, c->head_len);
		if (r == 0)
			r = buf_append(&all, raw.data, raw.len);
		if (r == 0)
			r = capture_utf8_sanitize(all.data, all.len, &b);
		buf_finish(&all);
	} else {
		size_t skip = capture_utf8_skip_start(raw.data, raw.len);

		r = capture_utf8_sanitize(
		    c->head, capture_utf8_trim_end(c->head, c->head_len), &b);
		if (r == 0)
			r = buf_printf(&b, "\n[... %zu bytes omitted ...]\n",
			               c->total - c->head_len - c->tail_len);
		if (r == 0)
			r = capture_utf8_sanitize(raw.data + skip,
			                          raw.len - skip, &b);
	}
	if (r == 0)
		text = buf_take(&b, NULL);
out:
	buf_finish(&b);
	buf_finish(&raw);
	return text;
}

/* ---- driving the stream ------------------------------------------------- */

/* One drive of a stream: the parameters and what has happened so far. */
struct capture_state {
	const struct capture_params *p;
	size_t in_off;
	bool in_closed;
	size_t total;
	long long tick; /* mono_ms of the last on_tick */
};

static int capture_output(void *arg, int which, const char *p, size_t n)
{
	struct capture_state *x = arg;
	struct capture *c = which == 2 ? x->p->err : x->p->out;
	size_t room = x->p->max_total - x->total;

	if (x->p->on_output)
		x->p->on_output(x->p->output_arg, which, p,
		                n > room ? room : n);
	if (n > room) {
		capture_add(c, p, room);
		x->total += room;
		return -EFBIG;
	}
	capture_add(c, p, n);
	x->total += n;
	return 0;
}

static void capture_stdin(struct capture_state *x, struct box_stream *s)
{
	while (!x->in_closed && x->in_off < x->p->in_len) {
		size_t chunk = x->p->in_len - x->in_off;
		ssize_t w;

		if (chunk > CAPTURE_CHUNK)
			chunk = CAPTURE_CHUNK;
		w = box_stream_write(s, x->p->in + x->in_off, chunk);
		if (w == -EAGAIN)
			return;
		if (w < 0) {
			/* The program stopped reading; that is its choice. */
			x->in_closed = true;
			return;
		}
		x->in_off += (size_t)w;
	}
	if (!x->in_closed) {
		box_stream_close_write(s);
		x->in_closed = true;
	}
}

enum capture_end capture_run(struct box_stream *s,
                             const struct capture_params *p, char *err,
                             size_t errlen)
{
	struct capture_state st = {.p = p}, *x = &st;

	capture_stdin(x, s);
	for (;;) {
		struct pollfd pf[2] = {
		    {.fd = box_stream_fd(s), .events = POLLIN},
		    {.fd = p->cancel_fd, .events = POLLIN},
		};
		long long left = p->deadline - mono_ms();
		int n, rounds;

		if (left <= 0)
			return CAPTURE_DEADLINE;
		if (p->on_tick && mono_ms() - x->tick >= 1000) {
			x->tick = mono_ms();
			p->on_tick(p->output_arg);
		}
		if (!x->in_closed)
			pf[0].events |= POLLOUT;
		if (!box_stream_pending(s)) {
			n = poll(pf, p->cancel_fd >= 0 ? 2 : 1,
			         (int)(left > 1000 ? 1000 : left));
			if (n < 0 && errno != EINTR) {
				snprintf(err, errlen, "poll: %s",
				         strerror(errno));
				return CAPTURE_BROKEN;
			}
			if (n <= 0)
				continue;
			if (p->cancel_fd >= 0 && (pf[1].revents & POLLIN))
				return CAPTURE_CANCEL;
			if (pf[0].revents & POLLOUT)
				capture_stdin(x, s);
			if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		/* A few reads per wake-up, then look at the clock again. */
		for (rounds = 0; rounds < 16; rounds++) {
			int rc =
			    box_stream_pump(s, capture_output, x, err, errlen);

			if (rc == -EAGAIN)
				break;
			if (rc == 0)
				return CAPTURE_EOF;
			if (rc == -EFBIG)
				return CAPTURE_LIMIT;
			if (rc < 0)
				return CAPTURE_BROKEN;
		}
	}
}
