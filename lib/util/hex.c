/* SPDX-License-Identifier: MIT */
/*
 * hex: see hex.h. Stateless.
 */
#include "util/hex.h"

#include <errno.h>

#include <openssl/rand.h>

void hex_encode(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[s[i] >> 4];
		out[2 * i + 1] = digits[s[i] & 15];
	}
	out[2 * n] = '\0';
}

int hex_random(char *out, size_t nbytes)
{
	unsigned char raw[64];

	out[0] = '\0';
	while (nbytes > 0) {
		size_t n = nbytes < sizeof(raw) ? nbytes : sizeof(raw);

		if (RAND_bytes(raw, (int)n) != 1)
			return -EIO;
		hex_encode(raw, n, out);
		out += 2 * n;
		nbytes -= n;
	}
	return 0;
}

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool hex_is_lower(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}
