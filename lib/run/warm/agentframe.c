/* SPDX-License-Identifier: MIT */
/*
 * agentframe: frames, TLV records and JSON strings of the agent protocol.
 * The decoder alternates between collecting a 4-byte length and collecting
 * (or passing through) the frame it announces; it keeps no pointer into the
 * caller's data between calls.
 */
#include "run/warm/agentframe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Frames split across feeds and larger than this are not kept buffered. */
#define AGENTFRAME_KEEP_BUF (64u * 1024u)
#define AGENTFRAME_MAX_MAX (AGENTFRAME_MAX_IN * 16u)

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int agentframe_header(unsigned char hdr[AGENTFRAME_HDR], unsigned char type,
                      size_t payload_len, uint32_t max)
{
	if (payload_len >= max)
		return -EMSGSIZE;
	put_be32(hdr, (uint32_t)payload_len + 1);
	hdr[4] = type;
	return 0;
}

void agentframe_decoder_init(struct agentframe_decoder *d, uint32_t max)
{
	memset(d, 0, sizeof(*d));
	if (max < 1)
		max = 1;
	if (max > AGENTFRAME_MAX_MAX)
		max = AGENTFRAME_MAX_MAX;
	d->max = max;
}

void agentframe_decoder_finish(struct agentframe_decoder *d)
{
	if (!d)
		return;
	free(d->buf);
	d->buf = NULL;
	d->buf_cap = 0;
	d->buf_have = 0;
}

/* Validates a complete length prefix and starts its frame. */
static int agentframe_start(struct agentframe_decoder *d)
{
	uint32_t len = get_be32(d->len);

	if (len == 0)
		return -EPROTO;
	if (len > d->max)
		return -EMSGSIZE;
	d->frame_len = len;
	d->len_have = 0;
	d->buf_have = 0;
	return 0;
}

/* Makes room for the whole current frame in d->buf. */
static int agentframe_reserve(struct agentframe_decoder *d)
{
	unsigned char *p;

	if (d->buf_cap >= d->frame_len)
		return 0;
	p = realloc(d->buf, d->frame_len);
	if (!p)
		return -ENOMEM;
	d->buf = p;
	d->buf_cap = d->frame_len;
	return 0;
}

/* Hands a complete frame f[0..len) to fn. */
static int agentframe_deliver(struct agentframe_decoder *d,
                              const unsigned char *f, size_t len,
                              agentframe_fn fn, void *arg)
{
	d->frame_len = 0;
	return fn(arg, f[0], f + 1, len - 1);
}

int agentframe_feed(struct agentframe_decoder *d, const void *p, size_t n,
                    agentframe_fn fn, void *arg)
{
	const unsigned char *s = p;
	int r = 0;

	if (d->error)
		return d->error;
	while (n > 0) {
		if (d->frame_len == 0) {
			size_t take = AGENTFRAME_LEN_BYTES - d->len_have;

			if (take > n)
				take = n;
			memcpy(d->len + d->len_have, s, take);
			d->len_have += take;
			d->offset += take;
			s += take;
			n -= take;
			if (d->len_have < AGENTFRAME_LEN_BYTES)
				break;
			r = agentframe_start(d);
			if (r < 0)
				break;
			continue;
		}
		if (d->buf_have == 0 && n >= d->frame_len) {
			/* The whole frame is here: no copy. */
			size_t len = d->frame_len;

			d->offset += len;
			s += len;
			n -= len;
			r = agentframe_deliver(d, s - len, len, fn, arg);
			if (r < 0)
				break;
			continue;
		}
		r = agentframe_reserve(d);
		if (r < 0)
			break;
		size_t take = d->frame_len - d->buf_have;

		if (take > n)
			take = n;
		memcpy(d->buf + d->buf_have, s, take);
		d->buf_have += take;
		d->offset += take;
		s += take;
		n -= take;
		if (d->buf_have < d->frame_len)
			break;
		r = agentframe_deliver(d, d->buf, d->buf_have, fn, arg);
		d->buf_have = 0;
		if (d->buf_cap > AGENTFRAME_KEEP_BUF) {
			/* Do not keep a large frame's memory while idle. */
			free(d->buf);
			d->buf = NULL;
			d->buf_cap = 0;
		}
		if (r < 0)
			break;
	}
	if (r < 0)
		d->error = r;
	return r;
}

int agentframe_end(const struct agentframe_decoder *d)
{
	if (d->error)
		return d->error;
	if (d->len_have || d->frame_len)
		return -EPIPE;
	return 0;
}

uint64_t agentframe_offset(const struct agentframe_decoder *d)
{
	return d->offset;
}

size_t agentframe_buffered(const struct agentframe_decoder *d)
{
	return d->buf_cap;
}

const char *agentframe_strerror(int err)
{
	switch (err) {
	case 0:
		return "no error";
	case -EMSGSIZE:
		return "frame longer than allowed";
	case -EPROTO:
		return "malformed frame (zero length or bad record)";
	case -EPIPE:
		return "stream ended inside a frame";
	case -ENOMEM:
		return "out of memory";
	case -ENOSPC:
		return "does not fit";
	default:
		return "frame handler error";
	}
}

/* ---- TLV ----------------------------------------------------------------- */

int agentframe_tlv_put(void *dst, size_t cap, size_t *off, unsigned char tag,
                       const void *val, size_t len)
{
	unsigned char *d = dst;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	if (*off > cap || cap - *off < AGENTFRAME_TLV_HDR ||
	    cap - *off - AGENTFRAME_TLV_HDR < len)
		return -ENOSPC;
	d[*off] = tag;
	put_be32(d + *off + 1, (uint32_t)len);
	if (len)
		memcpy(d + *off + AGENTFRAME_TLV_HDR, val, len);
	*off += AGENTFRAME_TLV_HDR + len;
	return 0;
}

void agentframe_tlv_init(struct agentframe_tlv *it, const void *p, size_t n)
{
	it->p = p;
	it->n = n;
	it->off = 0;
}

int agentframe_tlv_next(struct agentframe_tlv *it, unsigned char *tag,
                        const unsigned char **val, size_t *len)
{
	size_t rest = it->n - it->off;
	uint32_t l;

	*tag = 0;
	*val = NULL;
	*len = 0;
	if (rest == 0)
		return 0;
	if (rest < AGENTFRAME_TLV_HDR)
		return -EPROTO;
	l = get_be32(it->p + it->off + 1);
	if (l > rest - AGENTFRAME_TLV_HDR)
		return -EPROTO;
	*tag = it->p[it->off];
	*val = it->p + it->off + AGENTFRAME_TLV_HDR;
	*len = l;
	it->off += AGENTFRAME_TLV_HDR + (size_t)l;
	return 1;
}

int agentframe_tlv_check(const void *p, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len;
	int r;

	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0)
		;
	return r;
}

int agentframe_parse_id(const void *p, size_t n, uint64_t *out)
{
	const unsigned char *s = p;
	uint64_t v = 0;

	*out = 0;
	if (n == 0 || n > 16 || (n > 1 && s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > AGENTFRAME_ID_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---- JSON strings ---------------------------------------------------------
 */

/*
 * Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one
 * (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
 */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = c == 0xe0 ? 0xa0 : 0x80;
		unsigned char hi = c == 0xed ? 0x9f : 0xbf;

		if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80)
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = c == 0xf0 ? 0x90 : 0x80;
		unsigned char hi = c == 0xf4 ? 0x8f : 0xbf;

		if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* Output of agentframe_json_str: what is needed and what was written. */
struct json_out {
	char *dst;
	size_t cap;
	size_t need;    /* bytes the whole string needs */
	size_t written; /* bytes written: whole pieces only */
	int full;       /* a piece did not fit: write nothing more */
};

/* Appends p[0..k) if it fits whole, keeping room for the NUL. */
static void json_emit(struct json_out *o, const void *p, size_t k)
{
	if (!o->full && o->written + k < o->cap) {
		memcpy(o->dst + o->written, p, k);
		o->written += k;
	} else {
		o->full = 1;
	}
	o->need += k;
}

size_t agentframe_json_str(char *dst, size_t cap, const void *src, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	static const unsigned char fffd[] = {0xef, 0xbf, 0xbd};
	const unsigned char *s = src;
	struct json_out o = {dst, cap, 0, 0, 0};
	size_t i = 0;

	json_emit(&o, "\"", 1);
	while (i < n) {
		unsigned char c = s[i];
		size_t k = utf8_seq(s + i, n - i);
		char esc[6];

		if (k == 0) {
			json_emit(&o, fffd, sizeof(fffd));
			i++;
			continue;
		}
		if (k > 1) {
			json_emit(&o, s + i, k);
			i += k;
			continue;
		}
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			json_emit(&o, esc, 2);
		} else if (c == '\n' || c == '\r' || c == '\t') {
			esc[0] = '\\';
			esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
			json_emit(&o, esc, 2);
		} else if (c < 0x20) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			json_emit(&o, esc, 6);
		} else {
			json_emit(&o, &c, 1);
		}
		i++;
	}
	json_emit(&o, "\"", 1);
	if (cap > 0)
		dst[o.written] = '\0';
	return o.need;
}
