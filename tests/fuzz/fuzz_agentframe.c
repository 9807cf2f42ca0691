/* SPDX-License-Identifier: MIT */
/*
 * fuzz_agentframe: the agent protocol's frame decoder, TLV iteration and
 * JSON string writer. The first input byte picks a chunk size pattern, the
 * rest is the stream. The stream is decoded in one piece and in chunks; both
 * must deliver the same frames and end the same way. Every frame's payload
 * is walked as TLV records (every record must lie inside the payload, and
 * agentframe_tlv_check must agree with the walk) and written as a JSON
 * string, which cJSON must parse back. The cap is small so over-long frames
 * are reached often.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "run/warm/agentframe.h"

#define FUZZ_CAP 4096

struct acc {
	unsigned char *data; /* type byte, 4-byte length, payload; repeated */
	size_t len, cap;
};

static void check_tlv(const unsigned char *p, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len, seen = 0;
	int r;

	agentframe_tlv_init(&it, p, n);
	while ((r = agentframe_tlv_next(&it, &tag, &v, &len)) > 0) {
		if (v < p || v + len > p + n || len > n)
			abort();
		seen += AGENTFRAME_TLV_HDR + len;
	}
	if (r == 0 && seen != n)
		abort();
	if (agentframe_tlv_check(p, n) != r)
		abort();
	if (r == 0) {
		/* Re-encoding the records gives back the same bytes. */
		unsigned char *re = malloc(n + 1);
		size_t off = 0;

		if (!re)
			abort();
		agentframe_tlv_init(&it, p, n);
		while (agentframe_tlv_next(&it, &tag, &v, &len) > 0)
			if (agentframe_tlv_put(re, n, &off, tag, v, len) < 0)
				abort();
		if (off != n || (n && memcmp(re, p, n) != 0))
			abort();
		free(re);
	}
}

static void check_json(const unsigned char *p, size_t n)
{
	size_t cap = AGENTFRAME_JSON_STR_MAX(n) + 1, len;
	char *out = malloc(cap);
	cJSON *j;

	if (!out)
		abort();
	len = agentframe_json_str(out, cap, p, n);
	if (len >= cap || strlen(out) != len || out[0] != '"' ||
	    out[len - 1] != '"')
		abort();
	j = cJSON_ParseWithLength(out, len);
	if (!j || !cJSON_IsString(j))
		abort();
	/* Without NUL or invalid UTF-8 in the input, the round trip is exact.
	 */
	if (!memchr(p, 0, n) && strlen(j->valuestring) == n &&
	    memcmp(j->valuestring, p, n) != 0)
		abort();
	cJSON_Delete(j);
	/* A cut-short write stays NUL-terminated within its buffer. */
	if (len > 4) {
		size_t small = len / 2;

		if (agentframe_json_str(out, small, p, n) != len ||
		    strlen(out) >= small)
			abort();
	}
	free(out);
}

static int acc_fn(void *arg, unsigned char type, const unsigned char *p,
                  size_t n)
{
	struct acc *a = arg;

	if (n + 1 > FUZZ_CAP || a->len + 5 + n > a->cap)
		abort();
	a->data[a->len] = type;
	memcpy(a->data + a->len + 1, &n, 4 < sizeof(n) ? 4 : sizeof(n));
	if (n)
		memcpy(a->data + a->len + 5, p, n);
	a->len += 5 + n;
	check_tlv(p, n);
	check_json(p, n);
	return 0;
}

static int decode(const uint8_t *p, size_t n, unsigned pattern, struct acc *a)
{
	struct agentframe_decoder d;
	size_t off = 0, step = 1;
	int rc = 0;

	agentframe_decoder_init(&d, FUZZ_CAP);
	while (off < n && rc == 0) {
		size_t take = pattern == 0 ? n : step;

		if (take > n - off)
			take = n - off;
		rc = agentframe_feed(&d, p + off, take, acc_fn, a);
		off += take;
		step = pattern & 0x80 ? (pattern & 0x7f) + 1 : step + 1;
	}
	if (rc == 0)
		rc = agentframe_end(&d);
	if (agentframe_offset(&d) > n || agentframe_buffered(&d) > FUZZ_CAP)
		abort();
	agentframe_decoder_finish(&d);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acc a = {0}, b = {0};
	unsigned pattern;
	int ra, rb;

	if (size < 1)
		return 0;
	pattern = data[0];
	data++;
	size--;
	/* Every frame costs at least 4 input bytes and 5 accumulated ones. */
	a.cap = b.cap = size * 2 + 8;
	a.data = malloc(a.cap);
	b.data = malloc(b.cap);
	if (!a.data || !b.data)
		abort();
	ra = decode(data, size, 0, &a);
	rb = decode(data, size, pattern ? pattern : 1, &b);
	if (ra != rb || a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
		abort();
	free(a.data);
	free(b.data);
	return 0;
}
