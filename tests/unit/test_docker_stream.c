/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/docker/docker_stream.h"
#include "tap.h"
#include "util/buf.h"

struct sink {
	struct buf out, err, sys;
	size_t calls;
	int stop_after; /* return -ECANCELED on this call, 0 for never */
};

static int sink_fn(void *arg, enum docker_stream_id id, const char *p, size_t n)
{
	struct sink *s = arg;
	struct buf *b = id == DOCKER_STREAM_STDERR   ? &s->err
	                : id == DOCKER_STREAM_SYSTEM ? &s->sys
	                                             : &s->out;

	s->calls++;
	if (s->stop_after && (int)s->calls == s->stop_after)
		return -ECANCELED;
	if (n == 0)
		return -EINVAL; /* the parser never passes empty payload */
	return buf_append(b, p, n) < 0 ? -ENOMEM : 0;
}

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	buf_init(&s->out, 0);
	buf_init(&s->err, 0);
	buf_init(&s->sys, 0);
}

static void sink_finish(struct sink *s)
{
	buf_finish(&s->out);
	buf_finish(&s->err);
	buf_finish(&s->sys);
}

/* Appends one frame to b. */
static void frame(struct buf *b, unsigned char type, const char *payload,
                  size_t n)
{
	unsigned char h[8] = {type,
	                      0,
	                      0,
	                      0,
	                      (unsigned char)(n >> 24),
	                      (unsigned char)(n >> 16),
	                      (unsigned char)(n >> 8),
	                      (unsigned char)n};

	if (buf_append(b, h, 8) < 0 || buf_append(b, payload, n) < 0)
		abort();
}

static const char *text(const struct buf *b)
{
	return b->data ? b->data : "";
}

int main(void)
{
	struct docker_stream ds;
	struct sink s;
	struct buf in;
	int rc;

	buf_init(&in, 0);
	frame(&in, 1, "hello ", 6);
	frame(&in, 2, "oops\n", 5);
	frame(&in, 1, "", 0);
	frame(&in, 1, "world\n", 6);
	frame(&in, 0, "in", 2);
	frame(&in, 3, "engine", 6);

	/* Whole input at once. */
	sink_init(&s);
	docker_stream_init(&ds, 0, sink_fn, &s);
	is_int(docker_stream_feed(&ds, in.data, in.len), 0,
	       "whole stream accepted");
	is_int(docker_stream_end(&ds), 0, "ends on a frame boundary");
	is_str(text(&s.out), "hello world\nin", "stdout (and stdin) frames");
	is_str(text(&s.err), "oops\n", "stderr frames");
	is_str(text(&s.sys), "engine", "system error frames");
	is_int(docker_stream_offset(&ds), in.len, "offset counts every byte");
	sink_finish(&s);

	/* One byte at a time gives the same result. */
	sink_init(&s);
	docker_stream_init(&ds, 0, sink_fn, &s);
	rc = 0;
	for (size_t i = 0; i < in.len && rc == 0; i++)
		rc = docker_stream_feed(&ds, in.data + i, 1);
	is_int(rc, 0, "byte-by-byte accepted");
	is_int(docker_stream_end(&ds), 0, "byte-by-byte ends on a boundary");
	is_str(text(&s.out), "hello world\nin", "byte-by-byte stdout");
	is_str(text(&s.err), "oops\n", "byte-by-byte stderr");
	sink_finish(&s);

	/* Every split point in two chunks. */
	rc = 0;
	for (size_t cut = 0; cut <= in.len; cut++) {
		sink_init(&s);
		docker_stream_init(&ds, 0, sink_fn, &s);
		if (docker_stream_feed(&ds, in.data, cut) < 0 ||
		    docker_stream_feed(&ds, in.data + cut, in.len - cut) < 0 ||
		    docker_stream_end(&ds) < 0 ||
		    strcmp(text(&s.out), "hello world\nin") != 0 ||
		    strcmp(text(&s.err), "oops\n") != 0)
			rc = -1;
		sink_finish(&s);
	}
	is_int(rc, 0, "every two-chunk split parses the same");

	/* Truncated input. */
	sink_init(&s);
	docker_stream_init(&ds, 0, sink_fn, &s);
	is_int(docker_stream_feed(&ds, in.data, 5), 0,
	       "partial header buffered");
	is_int(docker_stream_end(&ds), -EPIPE, "end inside a header: -EPIPE");
	is_int(docker_stream_feed(&ds, in.data + 5, 4), 0, "header completed");
	is_str(text(&s.out), "h", "payload passes through as it comes");
	is_int(docker_stream_end(&ds), -EPIPE, "end inside a payload: -EPIPE");
	sink_finish(&s);

	/* Malformed headers. */
	{
		static const unsigned char bad_type[8] = {4, 0, 0, 0,
		                                          0, 0, 0, 1};
		static const unsigned char bad_pad[8] = {1, 0, 1, 0,
		                                         0, 0, 0, 1};
		static const unsigned char big[8] = {1,    0,    0,    0,
		                                     0xff, 0xff, 0xff, 0xff};
		static const unsigned char at_cap[8] = {1, 0, 0, 0, 0, 0, 1, 0};
		static const unsigned char over_cap[8] = {1, 0, 0, 0,
		                                          0, 0, 1, 1};

		sink_init(&s);
		docker_stream_init(&ds, 0, sink_fn, &s);
		is_int(docker_stream_feed(&ds, bad_type, 8), -EPROTO,
		       "unknown stream type refused");
		is_int(docker_stream_feed(&ds, in.data, in.len), -EPROTO,
		       "the error is sticky");
		is_int(docker_stream_end(&ds), -EPROTO,
		       "end reports the error");
		is_int(s.calls, 0, "nothing delivered after the error");
		sink_finish(&s);

		sink_init(&s);
		docker_stream_init(&ds, 0, sink_fn, &s);
		is_int(docker_stream_feed(&ds, bad_pad, 8), -EPROTO,
		       "non-zero padding refused");
		sink_finish(&s);

		sink_init(&s);
		docker_stream_init(&ds, 0, sink_fn, &s);
		is_int(docker_stream_feed(&ds, big, 8), -EMSGSIZE,
		       "4 GiB frame refused by the default cap");
		sink_finish(&s);

		sink_init(&s);
		docker_stream_init(&ds, 256, sink_fn, &s);
		is_int(docker_stream_feed(&ds, at_cap, 8), 0,
		       "frame at the cap ok");
		sink_finish(&s);
		sink_init(&s);
		docker_stream_init(&ds, 256, sink_fn, &s);
		is_int(docker_stream_feed(&ds, over_cap, 8), -EMSGSIZE,
		       "frame one byte over the cap refused");
		sink_finish(&s);
	}

	/* The consumer can stop the parser. */
	sink_init(&s);
	s.stop_after = 2;
	docker_stream_init(&ds, 0, sink_fn, &s);
	is_int(docker_stream_feed(&ds, in.data, in.len), -ECANCELED,
	       "callback error stops the parser");
	is_int(docker_stream_feed(&ds, in.data, 1), -ECANCELED,
	       "callback error is sticky");
	sink_finish(&s);

	ok(strstr(docker_stream_strerror(-EPROTO), "malformed") != NULL,
	   "strerror explains -EPROTO");
	ok(strstr(docker_stream_strerror(-EMSGSIZE), "larger") != NULL,
	   "strerror explains -EMSGSIZE");
	buf_finish(&in);
	return tap_done();
}
