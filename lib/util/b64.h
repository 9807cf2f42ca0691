/* SPDX-License-Identifier: MIT */
/*
 * b64: strict base64 decoding of what clients upload, with a message that
 * says what is wrong and where. Stateless and thread-safe.
 */
#ifndef MCPSD_UTIL_B64_H
#define MCPSD_UTIL_B64_H

#include <stddef.h>

/*
 * Strict base64 (RFC 4648 standard alphabet, '=' padding required, no white
 * space, no bits after the end): decodes n bytes of in into out (at least
 * n / 4 * 3 bytes). Returns 0 with *outlen, or -EINVAL with what is wrong
 * and where in err.
 */
__attribute__((warn_unused_result)) int b64_decode(const char *in, size_t n,
                                                   unsigned char *out,
                                                   size_t *outlen, char *err,
                                                   size_t errlen);

#endif
