/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/util: hex, mono, num, pct. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/hex.h"
#include "util/jsonx.h"
#include "util/mono.h"
#include "util/num.h"
#include "util/pct.h"

static void test_hex(void)
{
	char out[65], r1[33], r2[33];
	const unsigned char b[] = {0x00, 0x0f, 0xa5, 0xff};

	hex_encode(b, sizeof(b), out);
	is_str(out, "000fa5ff", "hex_encode");
	hex_encode(b, 0, out);
	is_str(out, "", "hex_encode of nothing");
	is_int(hex_random(r1, 16), 0, "hex_random");
	is_int(hex_random(r2, 16), 0, "hex_random again");
	is_int(strlen(r1), 32, "hex_random length");
	ok(strspn(r1, "0123456789abcdef") == 32, "hex_random is lower hex");
	ok(strcmp(r1, r2) != 0, "two random ids differ");
	is_int(hex_digit('7'), 7, "digit");
	is_int(hex_digit('b'), 11, "lower");
	is_int(hex_digit('C'), 12, "upper");
	is_int(hex_digit('g'), -1, "not hex");
	ok(hex_is_lower("0123456789abcdef", 16), "lower hex of its length");
	ok(!hex_is_lower("0123456789abcdeF", 16), "upper case refused");
	ok(!hex_is_lower("01234567\0abcdef", 16), "a NUL inside refused");
	ok(!hex_is_lower("0123 4567", 9), "a space refused");
	ok(hex_is_lower("zz", 0), "nothing is vacuously hex");
}

static void test_mono(void)
{
	long long a = mono_ms(), b = mono_ms();
	struct timespec ts, now;

	ok(b >= a, "mono_ms does not go back");
	ok(mono_s() >= a / 1000, "mono_s agrees with mono_ms");
	mono_deadline(&ts, 1500);
	clock_gettime(CLOCK_MONOTONIC, &now);
	ok(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L, "normalized");
	ok(ts.tv_sec >= now.tv_sec + 1 && ts.tv_sec <= now.tv_sec + 2,
	   "1.5 s from now");
	mono_timespec(&ts, 12345);
	ok(ts.tv_sec == 12 && ts.tv_nsec == 345000000L, "mono_timespec");
}

static void test_num(void)
{
	uint64_t u = 7;
	int64_t i = 7;
	double d = 7;
	const char *end;

	is_int(num_u64("0", 10, &u), 0, "zero");
	is_int(u, 0, "zero value");
	is_int(num_u64("18446744073709551615", UINT64_MAX, &u), 0, "max");
	ok(u == UINT64_MAX, "max value");
	is_int(num_u64("18446744073709551616", UINT64_MAX, &u), -ERANGE,
	       "overflow");
	is_int(num_u64("11", 10, &u), -ERANGE, "above max");
	is_int(num_u64("", 10, &u), -EINVAL, "empty");
	is_int(num_u64(" 1", 10, &u), -EINVAL, "leading space");
	is_int(num_u64("+1", 10, &u), -EINVAL, "sign");
	is_int(num_u64("1x", 10, &u), -EINVAL, "trailing junk");
	is_int(num_u64("-1", 10, &u), -EINVAL, "negative");
	is_int(num_u64("000000000000000000000000001", 10, &u), -ERANGE,
	       "too many digits");
	is_int(num_u64("0x10", 100, &u), -EINVAL, "no hex");
	is_int(num_u64(NULL, 10, &u), -EINVAL, "NULL");
	is_int(num_u64n("123abc", 3, 1000, &u), 0, "first n bytes");
	is_int(u, 123, "first n bytes value");

	is_int(num_i64("-5", -10, 10, &i), 0, "negative i64");
	is_int(i, -5, "negative value");
	is_int(num_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &i), 0,
	       "INT64_MIN");
	ok(i == INT64_MIN, "INT64_MIN value");
	is_int(num_i64("9223372036854775808", INT64_MIN, INT64_MAX, &i),
	       -ERANGE, "past INT64_MAX");
	is_int(num_i64("-", -10, 10, &i), -EINVAL, "bare sign");
	is_int(num_i64("11", -10, 10, &i), -ERANGE, "above max");

	is_int(num_double("0.5", 0, 1, &d), 0, "double");
	ok(d == 0.5, "double value");
	is_int(num_double("2", 0, 4, &d), 0, "whole double");
	is_int(num_double(".5", 0, 1, &d), 0, "leading point");
	is_int(num_double("1e3", 0, 1e9, &d), -EINVAL, "no exponent");
	is_int(num_double("nan", 0, 1, &d), -EINVAL, "no nan");
	is_int(num_double("inf", 0, 1, &d), -EINVAL, "no inf");
	is_int(num_double("0x1p3", 0, 100, &d), -EINVAL, "no hex float");
	is_int(num_double(".", 0, 1, &d), -EINVAL, "bare point");
	is_int(num_double("1.5", 0, 1, &d), -ERANGE, "above max");

	end = num_scan_u64("10-20", 100, &u);
	ok(end && *end == '-' && u == 10, "scan stops at the dash");
	ok(num_scan_u64("-1", 100, &u) == NULL, "scan needs a digit");
	ok(num_scan_u64("101", 100, &u) == NULL, "scan checks max");
}

static void test_pct(void)
{
	char out[64], *a;
	size_t n = 0, bad = 99;

	is_int(pct_encode_buf("a b/c~", true, out, sizeof(out)), 8, "encode");
	is_str(out, "a%20b/c~", "encode keeps the slash");
	is_int(pct_encode_buf("a/b", false, out, sizeof(out)), 5,
	       "encode slash");
	is_str(out, "a%2Fb", "slash encoded");
	is_int(pct_encode_buf("abcd", true, out, 4), -ENOSPC, "too small");
	is_str(out, "", "too small leaves an empty string");
	a = pct_encode("\xc3\xa9\n", true);
	is_str(a, "%C3%A9%0A", "UTF-8 and control bytes");
	free(a);

	is_int(pct_decode("a%20b%2fc", 9, out, sizeof(out), &n, NULL), 0,
	       "decode");
	is_str(out, "a b/c", "decoded");
	is_int(n, 5, "decoded length");
	is_int(pct_decode("%252e", 5, out, sizeof(out), &n, NULL), 0,
	       "decode once");
	is_str(out, "%2e", "only once");
	is_int(pct_decode("ab%2", 4, out, sizeof(out), &n, &bad), -EINVAL,
	       "short escape");
	is_int(bad, 2, "where");
	is_int(pct_decode("%zz", 3, out, sizeof(out), &n, NULL), -EINVAL,
	       "bad digits");
	is_int(pct_decode("%00x", 4, out, sizeof(out), &n, NULL), 0, "NUL");
	is_int(n, 2, "NUL counted");
	is_int(pct_decode("abcd", 4, out, 4, &n, NULL), -ENOSPC, "no room");
}

/* A key of 64 bytes: more than jsonx_at looks up. */
#define LONG_KEY                                                               \
	"K234567890123456789012345678901234567890123456789012345678901234"

static void test_jsonx(void)
{
	static const char *const three[] = {"a", "b\"c", "", NULL};
	static const char *const none[] = {NULL};
	cJSON *a = jsonx_strv(three);
	char *text = a ? cJSON_PrintUnformatted(a) : NULL;

	is_str(text, "[\"a\",\"b\\\"c\",\"\"]",
	       "jsonx_strv: the strings in order, escaped");
	cJSON_free(text);
	cJSON_Delete(a);
	a = jsonx_strv(none);
	ok(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 0,
	   "jsonx_strv: an empty list gives []");
	cJSON_Delete(a);

	a = cJSON_Parse("{\"A\":{\"B\":{\"C\":7},\"L\":[1]},\"a\":1,"
	                "\"" LONG_KEY "\":2}");
	ok(a != NULL, "jsonx_at: the document parses");
	ok(cJSON_IsNumber(jsonx_at(a, "A.B.C")) &&
	       jsonx_at(a, "A.B.C")->valueint == 7,
	   "jsonx_at: a nested key");
	ok(cJSON_IsObject(jsonx_at(a, "A.B")),
	   "jsonx_at: an object on the way");
	ok(cJSON_IsNumber(jsonx_at(a, "a")), "jsonx_at: one key, case kept");
	ok(jsonx_at(a, "A.b.C") == NULL, "jsonx_at: keys are case-sensitive");
	ok(jsonx_at(a, "A.X") == NULL, "jsonx_at: a missing key is NULL");
	ok(jsonx_at(a, "A.L.0") == NULL, "jsonx_at: arrays are not walked");
	ok(jsonx_at(a, "A.B.C.D") == NULL, "jsonx_at: past a leaf is NULL");
	ok(jsonx_at(a, "") == NULL, "jsonx_at: an empty path is NULL");
	ok(jsonx_at(NULL, "A") == NULL, "jsonx_at: NULL in, NULL out");
	ok(jsonx_at(a, LONG_KEY) == NULL,
	   "jsonx_at: a key of 64 bytes or more is NULL, not cut short");
	cJSON_Delete(a);
}

int main(void)
{
	test_hex();
	test_mono();
	test_num();
	test_pct();
	test_jsonx();
	return tap_done();
}
