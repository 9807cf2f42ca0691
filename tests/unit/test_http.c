/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <string.h>

#include "http.h"
#include "tap.h"

int main(void)
{
	uint64_t a, b;
	char o1[] = "http://localhost:*", o2[] = "https://claude.ai";
	char star[] = "*";
	char *origins[] = {o1, o2, NULL};
	char *any[] = {star, NULL};

	is_int(http_parse_range("bytes=0-9", 100, &a, &b), 1, "simple range");
	ok(a == 0 && b == 9, "simple range bounds");
	is_int(http_parse_range("bytes=90-", 100, &a, &b), 1, "open range");
	ok(a == 90 && b == 99, "open range bounds");
	is_int(http_parse_range("bytes=-10", 100, &a, &b), 1, "suffix range");
	ok(a == 90 && b == 99, "suffix range bounds");
	is_int(http_parse_range("bytes=-1000", 100, &a, &b), 1,
	       "suffix larger than the file");
	ok(a == 0 && b == 99, "clamped to the file");
	is_int(http_parse_range("bytes=50-1000", 100, &a, &b), 1,
	       "end past the file");
	ok(b == 99, "end clamped");
	is_int(http_parse_range("bytes=100-", 100, &a, &b), -1,
	       "start at the end is unsatisfiable");
	is_int(http_parse_range("bytes=-0", 100, &a, &b), -1,
	       "empty suffix is unsatisfiable");
	is_int(http_parse_range("bytes=9-3", 100, &a, &b), 0,
	       "reversed range ignored");
	is_int(http_parse_range("bytes=0-1,5-6", 100, &a, &b), 0,
	       "several ranges ignored");
	is_int(http_parse_range("items=0-1", 100, &a, &b), 0,
	       "other unit ignored");
	is_int(http_parse_range("bytes=18446744073709551616-", 100, &a, &b), 0,
	       "overflowing start ignored");
	is_int(http_parse_range(NULL, 100, &a, &b), 0, "no header");

	ok(http_accepts("application/json, text/event-stream",
	                "text/event-stream"),
	   "accept list");
	ok(http_accepts("text/event-stream;q=0.9, application/json",
	                "application/json"),
	   "accept with params");
	ok(!http_accepts("text/event-stream;q=0", "text/event-stream"),
	   "q=0 is a refusal");
	ok(http_accepts("*/*", "application/json"), "wildcard");
	ok(http_accepts("application/*", "application/json"), "type wildcard");
	ok(!http_accepts("application/jsonx", "application/json"),
	   "no prefix match");
	ok(!http_accepts(NULL, "application/json"), "absent Accept");

	ok(http_media_type_is("application/json; charset=utf-8",
	                      "application/json"),
	   "content type with params");
	ok(!http_media_type_is("application/json-seq", "application/json"),
	   "content type prefix is not a match");
	ok(!http_media_type_is("text/plain", "application/json"),
	   "other content type");

	ok(http_allowed("http://localhost:6274", origins, true),
	   "origin with any port");
	ok(!http_allowed("http://localhost.evil.com:80", origins, true),
	   "look-alike origin refused");
	ok(!http_allowed("http://localhost:", origins, true),
	   "empty port refused");
	ok(!http_allowed("http://localhost:80x", origins, true),
	   "non-numeric port refused");
	ok(http_allowed("HTTPS://CLAUDE.AI", origins, true),
	   "case-insensitive match");
	ok(http_allowed("http://evil.example.com", any, true), "* allows all");
	ok(!http_allowed("http://evil.example.com", origins, true),
	   "other origin refused");
	return tap_done();
}
