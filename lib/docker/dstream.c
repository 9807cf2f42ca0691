/* SPDX-License-Identifier: MIT */
/*
 * dstream: the Docker multiplexed stream parser. A small state machine that
 * alternates between collecting an 8-byte header and passing payload
 * through; it holds no pointer into the caller's data between calls.
 */
#include "docker/dstream.h"

#include <errno.h>
#include <string.h>

void dstream_init(struct dstream *ds, uint32_t max_frame, dstream_fn fn,
                  void *arg)
{
	memset(ds, 0, sizeof(*ds));
	ds->fn = fn;
	ds->arg = arg;
	ds->max_frame = max_frame ? max_frame : DSTREAM_DEFAULT_MAX_FRAME;
}

/* Validates a complete header and starts its frame. */
static int dstream_header(struct dstream *ds)
{
	const unsigned char *h = ds->hdr;
	uint32_t len;

	if (h[0] > DSTREAM_SYSTEM || h[1] || h[2] || h[3])
		return -EPROTO;
	len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 |
	      (uint32_t)h[6] << 8 | (uint32_t)h[7];
	if (len > ds->max_frame)
		return -EMSGSIZE;
	ds->cur = (enum dstream_id)h[0];
	ds->remaining = len;
	ds->hdr_len = 0;
	return 0;
}

int dstream_feed(struct dstream *ds, const void *p, size_t n)
{
	const char *s = p;
	int r;

	if (ds->error)
		return ds->error;
	while (n > 0) {
		if (ds->remaining == 0) {
			size_t take = DSTREAM_HEADER_LEN - ds->hdr_len;

			if (take > n)
				take = n;
			memcpy(ds->hdr + ds->hdr_len, s, take);
			ds->hdr_len += take;
			ds->offset += take;
			s += take;
			n -= take;
			if (ds->hdr_len < DSTREAM_HEADER_LEN)
				break;
			r = dstream_header(ds);
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

int dstream_end(const struct dstream *ds)
{
	if (ds->error)
		return ds->error;
	if (ds->hdr_len || ds->remaining)
		return -EPIPE;
	return 0;
}

uint64_t dstream_offset(const struct dstream *ds)
{
	return ds->offset;
}

const char *dstream_strerror(int err)
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
