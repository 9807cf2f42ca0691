/* SPDX-License-Identifier: MIT */
/*
 * errmsg: the one way a message for a person is written into a caller's
 * "char *err, size_t errlen" buffer; such a message says what was wrong and
 * what to do next ("no runner for language 'rust'; available: python,
 * typescript"). Stateless and thread-safe.
 */
#ifndef MCPSD_UTIL_ERRMSG_H
#define MCPSD_UTIL_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

/* printf into err (NULL or errlen 0: nothing is written). */
void errmsg_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same, returning code: "return errmsg_fail(-EINVAL, err, ...);". */
__attribute__((warn_unused_result, format(printf, 4, 5))) int
errmsg_fail(int code, char *err, size_t errlen, const char *fmt, ...);

/* va_list form of errmsg_set. */
void errmsg_vset(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif
