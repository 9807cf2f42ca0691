/* SPDX-License-Identifier: MIT */
/*
 * num: strict parsing of decimal numbers from outside text (settings, HTTP
 * headers, labels, event ids). Unlike a bare strtoul, nothing is skipped or
 * guessed: no leading space or sign where none is allowed, no empty string,
 * no trailing bytes, no silent wrap on overflow. Stateless and thread-safe.
 *
 * Errors: -EINVAL for text that is not a number of the expected form,
 * -ERANGE for a number outside [min, max]. *out is left unchanged on error.
 */
#ifndef MCPSD_UTIL_NUM_H
#define MCPSD_UTIL_NUM_H

#include <stddef.h>
#include <stdint.h>

/* The n bytes at s are 1 to 20 decimal digits with a value <= max. */
__attribute__((warn_unused_result)) int num_u64n(const char *s, size_t n,
                                                 uint64_t max, uint64_t *out);

/* The same for a NUL-terminated string. */
__attribute__((warn_unused_result)) int num_u64(const char *s, uint64_t max,
                                                uint64_t *out);

/* An optional '-' then digits, with min <= value <= max. */
__attribute__((warn_unused_result)) int num_i64(const char *s, int64_t min,
                                                int64_t max, int64_t *out);

/*
 * A finite decimal number (digits, an optional '.' and fraction, an
 * optional leading '-'; no exponent, no "inf"/"nan", no hex) with min <=
 * value <= max.
 */
__attribute__((warn_unused_result)) int num_double(const char *s, double min,
                                                   double max, double *out);

/*
 * Reads the run of decimal digits at the start of s (at least one, value
 * <= max) and returns a pointer just past it, or NULL when s does not start
 * with a digit or the value is too large. For tokenizing ("bytes=10-20",
 * "1.41").
 */
const char *num_scan_u64(const char *s, uint64_t max, uint64_t *out);

#endif
