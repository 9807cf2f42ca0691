/* SPDX-License-Identifier: MIT */
/*
 * hex: lower-case hexadecimal encoding of bytes, and random identifiers made
 * from OpenSSL's generator. The one place the daemon turns bytes into hex.
 * Stateless and thread-safe.
 */
#ifndef MCPSD_UTIL_HEX_H
#define MCPSD_UTIL_HEX_H

#include <stdbool.h>
#include <stddef.h>

/* Writes 2 * n lower-case hex characters of p and a NUL to out. */
void hex_encode(const void *p, size_t n, char *out);

/*
 * Fills out with 2 * nbytes hex characters of fresh random bytes and a NUL
 * (out holds at least 2 * nbytes + 1). 0, or -EIO when OpenSSL's generator
 * fails (out is then the empty string).
 */
__attribute__((warn_unused_result)) int hex_random(char *out, size_t nbytes);

/* The value of one hex digit (either case), or -1. */
int hex_digit(int c);

/*
 * Whether s[0..n) is exactly n lowercase hex digits, as hex_encode writes
 * them (keyed names and fingerprints): no upper case, no other byte.
 */
bool hex_is_lower(const char *s, size_t n);

#endif
