/* SPDX-License-Identifier: MIT */
/*
 * num: see num.h. Stateless.
 */
#include "util/num.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Digits only, at most 20 of them; -ERANGE past max (or 2^64 - 1). */
static int digits(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return n ? -ERANGE : -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int num_u64n(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	if (!s)
		return -EINVAL;
	/* More than 20 characters can still be a bad number, not a big one. */
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
	return digits(s, n, max, out);
}

int num_u64(const char *s, uint64_t max, uint64_t *out)
{
	return s ? num_u64n(s, strlen(s), max, out) : -EINVAL;
}

int num_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg;
	uint64_t u;
	int64_t v;
	int rc;

	if (!s)
		return -EINVAL;
	neg = s[0] == '-';
	rc = num_u64(s + neg, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &u);
	if (rc < 0)
		return rc;
	if (neg)
		v = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
	else
		v = (int64_t)u;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int num_double(const char *s, double min, double max, double *out)
{
	const char *p;
	char *end;
	bool any = false;
	double v;

	if (!s)
		return -EINVAL;
	/* strtod accepts far more (hex, exponents, inf, space): check first. */
	p = s + (s[0] == '-');
	for (; *p >= '0' && *p <= '9'; p++)
		any = true;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			any = true;
	if (!any || *p)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno == ERANGE || !isfinite(v))
		return -ERANGE;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

const char *num_scan_u64(const char *s, uint64_t max, uint64_t *out)
{
	size_t n = 0;

	if (!s)
		return NULL;
	while (s[n] >= '0' && s[n] <= '9')
		n++;
	if (digits(s, n, max, out) < 0)
		return NULL;
	return s + n;
}
