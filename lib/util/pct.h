/* SPDX-License-Identifier: MIT */
/*
 * pct: percent-encoding (RFC 3986) for the URLs and URIs the daemon builds,
 * and decoding exactly once for the ones it receives. Validation of what a
 * decoded name may contain is the caller's (fsname.h). Stateless.
 */
#ifndef MCPSD_UTIL_PCT_H
#define MCPSD_UTIL_PCT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Encodes the NUL-terminated s: unreserved characters (A-Z a-z 0-9 - . _ ~),
 * and '/' when keep_slash, as they are; every other byte as %XX (upper
 * case). Writes a NUL-terminated string to out and returns its length, or
 * -ENOSPC when out is too small (out is then the empty string).
 */
__attribute__((warn_unused_result)) int
pct_encode_buf(const char *s, bool keep_slash, char *out, size_t outsize);

/* The same into a fresh allocation (caller frees); NULL when out of memory. */
char *pct_encode(const char *s, bool keep_slash);

/*
 * Decodes the n bytes at in, each %XX (either case) exactly once, into out
 * with a NUL (the result may contain NUL bytes: *outlen tells the length).
 * -EINVAL for a malformed escape (at byte *bad when bad is not NULL),
 * -ENOSPC when the result and its NUL do not fit in outsize.
 */
__attribute__((warn_unused_result)) int pct_decode(const char *in, size_t n,
                                                   char *out, size_t outsize,
                                                   size_t *outlen, size_t *bad);

#endif
