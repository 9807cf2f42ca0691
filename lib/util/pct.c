/* SPDX-License-Identifier: MIT */
/*
 * pct: see pct.h. Stateless.
 */
#include "util/pct.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"

static bool plain(unsigned char c, bool keep_slash)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~' || (keep_slash && c == '/');
}

int pct_encode_buf(const char *s, bool keep_slash, char *out, size_t outsize)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool keep = plain(*p, keep_slash);

		if (n + (keep ? 1 : 3) >= outsize) {
			if (outsize)
				out[0] = '\0';
			return -ENOSPC;
		}
		if (keep) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = digits[*p >> 4];
			out[n++] = digits[*p & 15];
		}
	}
	if (n >= outsize)
		return -ENOSPC;
	out[n] = '\0';
	return (int)n;
}

char *pct_encode(const char *s, bool keep_slash)
{
	size_t size = 3 * strlen(s) + 1;
	char *out = malloc(size);

	if (out && pct_encode_buf(s, keep_slash, out, size) < 0) {
		free(out);
		out = NULL;
	}
	return out;
}

int pct_decode(const char *in, size_t n, char *out, size_t outsize,
               size_t *outlen, size_t *bad)
{
	size_t o = 0;

	if (outsize)
		out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		char c = in[i];

		if (c == '%') {
			int hi = n - i >= 3 ? hex_digit(in[i + 1]) : -1;
			int lo = hi < 0 ? -1 : hex_digit(in[i + 2]);

			if (lo < 0) {
				if (bad)
					*bad = i;
				if (outsize)
					out[0] = '\0';
				return -EINVAL;
			}
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (o + 1 >= outsize) {
			if (outsize)
				out[0] = '\0';
			return -ENOSPC;
		}
		out[o++] = c;
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return 0;
}
