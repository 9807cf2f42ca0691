/* SPDX-License-Identifier: MIT */
/*
 * fuzz_docker_stream: the Docker multiplexed stream parser. The first input
 * byte picks a chunk size pattern; the rest is the stream. The same stream is
 * also parsed in one piece, and both parses must agree on every byte
 * delivered per stream and on the outcome, whatever the chunking. The cap
 * is small so oversized frames are reached often.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/docker/docker_stream.h"

#define FUZZ_CAP 4096

struct acc {
	unsigned char *data[4];
	size_t len[4];
	size_t cap;
};

static int acc_fn(void *arg, enum docker_stream_id id, const char *p, size_t n)
{
	struct acc *a = arg;

	if ((unsigned)id > DOCKER_STREAM_SYSTEM || n == 0 || n > FUZZ_CAP)
		abort();
	if (a->len[id] + n > a->cap)
		abort(); /* more payload than input: impossible */
	memcpy(a->data[id] + a->len[id], p, n);
	a->len[id] += n;
	return 0;
}

static int parse(const uint8_t *p, size_t n, unsigned pattern, struct acc *a)
{
	struct docker_stream ds;
	size_t off = 0, step = 1;
	int rc = 0;

	docker_stream_init(&ds, FUZZ_CAP, acc_fn, a);
	while (off < n && rc == 0) {
		size_t take = pattern == 0 ? n : step;

		if (take > n - off)
			take = n - off;
		rc = docker_stream_feed(&ds, p + off, take);
		off += take;
		/* 1, 2, 3, ... or a fixed size from the pattern byte. */
		step = pattern & 0x80 ? (pattern & 0x7f) + 1 : step + 1;
	}
	if (rc == 0)
		rc = docker_stream_end(&ds);
	if (docker_stream_offset(&ds) > n)
		abort();
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acc a, b;
	unsigned pattern;
	int ra, rb;

	if (size < 1)
		return 0;
	pattern = data[0];
	data++;
	size--;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.cap = b.cap = size;
	for (int i = 0; i < 4; i++) {
		a.data[i] = malloc(size + 1);
		b.data[i] = malloc(size + 1);
		if (!a.data[i] || !b.data[i])
			abort();
	}
	ra = parse(data, size, 0, &a);
	rb = parse(data, size, pattern ? pattern : 1, &b);
	/*
	 * A chunked parse may stop on the same error but have delivered the
	 * same bytes; outcome and output must match exactly.
	 */
	if (ra != rb)
		abort();
	for (int i = 0; i < 4; i++) {
		if (a.len[i] != b.len[i] ||
		    memcmp(a.data[i], b.data[i], a.len[i]) != 0)
			abort();
		free(a.data[i]);
		free(b.data[i]);
	}
	return 0;
}
