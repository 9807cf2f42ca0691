/* SPDX-License-Identifier: MIT */
/*
 * b64: see b64.h. Stateless.
 */
#include "util/b64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int b64_bad_char(const char *in, size_t i, char *err, size_t errlen)
{
	unsigned char c = (unsigned char)in[i];

	if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
		snprintf(err, errlen,
		         "content is not valid base64: white space or a line "
		         "break at position %zu; send base64 without line "
		         "breaks, or the file as 'text'",
		         i);
	else if (c == '-' || c == '_')
		snprintf(err, errlen,
		         "content is not valid base64: '%c' at position %zu is "
		         "base64url; use the standard alphabet (A-Z a-z 0-9 + "
		         "/) with '=' padding",
		         c, i);
	else if (c == '=')
		snprintf(err, errlen,
		         "content is not valid base64: '=' at position %zu; "
		         "padding may only end the text",
		         i);
	else if (c > 0x20 && c < 0x7f)
		snprintf(err, errlen,
		         "content is not valid base64: '%c' at position %zu is "
		         "not in the alphabet A-Z a-z 0-9 + /; send text as "
		         "'text' instead",
		         c, i);
	else
		snprintf(
		    err, errlen,
		    "content is not valid base64: byte 0x%02X at position "
		    "%zu is not in the alphabet A-Z a-z 0-9 + /; send text "
		    "as 'text' instead",
		    c, i);
	return -EINVAL;
}

int b64_decode(const char *in, size_t n, unsigned char *out, size_t *outlen,
               char *err, size_t errlen)
{
	size_t pad = 0, o = 0;

	*outlen = 0;
	if (n % 4) {
		snprintf(err, errlen,
		         "content is not valid base64: its length %zu is not a "
		         "multiple of 4 (base64 is padded with '=')",
		         n);
		return -EINVAL;
	}
	if (n && in[n - 1] == '=')
		pad = n >= 2 && in[n - 2] == '=' ? 2 : 1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;

		for (int k = 0; k < 4; k++) {
			bool is_pad = last && k >= 4 - (int)pad;

			v[k] = is_pad ? 0 : b64_value((unsigned char)in[i + k]);
			if (v[k] < 0)
				return b64_bad_char(in, i + (size_t)k, err,
				                    errlen);
		}
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (!last || pad < 2)
			out[o++] =
			    (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (!last || pad < 1)
			out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
		/* Canonical only: the bits after the data must be zero. */
		if (last &&
		    ((pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3)))) {
			snprintf(err, errlen,
			         "content is not valid base64: the last group "
			         "has stray bits (not canonical base64)");
			return -EINVAL;
		}
	}
	*outlen = o;
	return 0;
}
