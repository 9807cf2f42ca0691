/* SPDX-License-Identifier: MIT */
/*
 * errmsg: see errmsg.h. Stateless.
 */
#include "util/errmsg.h"

#include <stdio.h>

void errmsg_vset(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
}

void errmsg_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errmsg_vset(err, errlen, fmt, ap);
	va_end(ap);
}

int errmsg_fail(int code, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errmsg_vset(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}
