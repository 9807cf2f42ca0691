/* SPDX-License-Identifier: MIT */
/*
 * docker_stream: the Docker multiplexed stream parser. A small state machine
 * that alternates between collecting an 8-byte header and passing payload
 * through; it holds no pointer into the caller's data between calls.
 */
#include "backend/docker/docker_stream.h"

#include <errno.h>
#include <string.h>

void docker_stream_init(struct docker_stream *ds, uint32_t max_frame,
                        docker_stream_fn fn, void *arg)
{
	memset(ds, 0, sizeof(*ds));
	ds->fn = fn;
	ds->arg = arg;
	ds->max_frame = max_frame ? max_frame : DOCKER_STREAM_DEFAULT_MAX_FRAME;
}

/* Validates a complete header and starts its frame. */
static int docker_stream_header(struct docker_stream *ds)
{
	const unsigned char *h = ds->hdr;
	uint32_t len;

	if (h[0] > DOCKER_STREAM_SYSTEM || h[1] || h[2] || h[3])
		return -EPROTO;
	len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 |
	      (uint32_t)h[6] << 8 | (uint32_t)h[7];
	if (len > ds->max_frame)
		return -EMSGSIZE;
	ds->cur = (enum docker_stream_id)h[0];
	ds->remaining = len;
	ds->hdr_len = 0;
	return 0;
}

int docker_stream_feed(struct docker_stream *ds, const void *p, size_t n)
{
	const char *s = p;
	int r;

	if (ds->error)
		return ds->error;
	while (n > 0) {
		if (ds->remaining == 0) {
			size_t take = DOCKER_STREAM_HEADER_LEN - ds->hdr_len;

			if (take > n)
				take = n;
			memcpy(ds->hdr + ds->hdr_len, s, take);
			ds->hdr_len += take;
			ds->offset += take;
			s += take;
			n -= take;
			if (ds->hdr_len < DOCKER_STREAM_HEADER_LEN)
				break;
			r = docker_stream_header(ds);
			if (r < 0) {
				ds->error = r;
				return r;
			}
			continue;
		}
		size_t take = ds->remaining < n ? ds->remaining : n;

		ds->remaining -= (uint32_t)take;
		ds->offset += take;
		r = ds->fn(ds->arg, ds->cur, s, take);
		if (r < 0) {
			ds->error = r;
			return r;
		}
		s += take;
		n -= take;
	}
	return 0;
}

int docker_stream_end(const struct docker_stream *ds)
{
	if (ds->error)
		return ds->error;
	if (ds->hdr_len || ds->remaining)
		return -EPIPE;
	return 0;
}

uint64_t docker_stream_offset(const struct docker_stream *ds)
{
	return ds->offset;
}

const char *docker_stream_strerror(int err)
{
	switch (err) {
	case 0:
		return "no error";
	case -EPROTO:
		return "malformed stream header (unknown stream type or "
		       "non-zero padding)";
	case -EMSGSIZE:
		return "stream frame larger than the limit";
	case -EPIPE:
		return "stream ended inside a frame";
	default:
		return "stopped by the consumer";
	}
}
