/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fsname: feeds arbitrary bytes to every fsname entry point and checks
 * the invariants the rest of the server relies on. Whatever fsname accepts
 * has no NUL, control character or backslash, no empty, "." or ".."
 * segment, no leading '/', bounded lengths and depth, and is strict UTF-8;
 * the URL form decodes exactly once, and encoding an accepted path and
 * decoding it again gives the same path. Any violation aborts.
 * The seed corpus is tests/fuzz/corpus/fsname (replayed by replay.c in
 * every build).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fsname.h"
#include "util/pct.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const char *p, size_t n)
{
	size_t seg = 0;
	unsigned depth = 1;

	if (n == 0 || n > FSNAME_PATH_MAX || p[0] == '/' ||
	    !fsname_utf8_valid(p, n))
		abort();
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)p[i] : '/';

		if (c == '/') {
			const char *s = p + i - seg;

			if (seg == 0 || seg > FSNAME_SEGMENT_MAX ||
			    (seg == 1 && s[0] == '.') ||
			    (seg == 2 && s[0] == '.' && s[1] == '.'))
				abort();
			if (i < n)
				depth++;
			seg = 0;
			continue;
		}
		if (c < 0x20 || c == 0x7f || c == '\\')
			abort();
		seg++;
	}
	if (depth > FSNAME_DEPTH_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char out[FSNAME_PATH_MAX + 1], enc[3 * FSNAME_PATH_MAX + 1];
	char again[FSNAME_PATH_MAX + 1], err[512];
	enum fsname_rule rule;
	size_t n = 0;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	/* Raw bytes, NUL included. */
	if (fsname_check(s, size, &rule, err, sizeof(err)) == 0)
		check_accepted(s, size);
	else if (rule == FSNAME_OK || strpbrk(err, "\r\n"))
		abort();
	if (fsname_check_segment(s, size, &rule, err, sizeof(err)) == 0) {
		check_accepted(s, size);
		if (memchr(s, '/', size))
			abort();
	}
	(void)!fsname_check_text(s, size, 256, "id", err, sizeof(err));

	/* URL form: once decoded, the same rules; and a clean round trip. */
	if (fsname_url_decode(s, out, sizeof(out), &n, &rule, err,
	                      sizeof(err)) == 0) {
		check_accepted(out, n);
		if (strlen(out) != n)
			abort();
		if (pct_encode_buf(out, true, enc, sizeof(enc)) < 0 ||
		    fsname_url_decode(enc, again, sizeof(again), NULL, NULL,
		                      NULL, 0) != 0 ||
		    strcmp(again, out) != 0)
			abort();
	} else if (out[0] != '\0' || strpbrk(err, "\r\n")) {
		abort();
	}
	free(s);
	return 0;
}
