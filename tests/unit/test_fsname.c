/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/fsname.h"
#include "tap.h"
#include "util/pct.h"

/* Checks one path given with its length (NUL allowed inside). */
static void bad(const char *p, size_t n, enum fsname_rule want,
                const char *label)
{
	enum fsname_rule rule = FSNAME_OK;
	char err[512] = "";
	int r = fsname_check(p, n, &rule, err, sizeof(err));

	ok(r == -EINVAL && rule == want && err[0] && !strpbrk(err, "\r\n"),
	   "refused %s: %s (%s)", label, fsname_rule_name(rule), err);
}

static void good(const char *p, const char *label)
{
	char err[512] = "";
	int r = fsname_check(p, strlen(p), NULL, err, sizeof(err));

	ok(r == 0, "accepted %s %s", label, err);
}

static void url(const char *enc, int want_r, enum fsname_rule want_rule,
                const char *want_out)
{
	enum fsname_rule rule = FSNAME_OK;
	char out[FSNAME_PATH_MAX + 1], err[512] = "";
	int r = fsname_url_decode(enc, out, sizeof(out), NULL, &rule, err,
	                          sizeof(err));

	if (want_r == 0)
		ok(r == 0 && strcmp(out, want_out) == 0,
		   "url '%s' decodes once to '%s' (got '%s' %s)", enc, want_out,
		   r == 0 ? out : "", err);
	else
		ok(r == -EINVAL && rule == want_rule && out[0] == '\0' &&
		       !strpbrk(err, "\r\n"),
		   "url '%s' refused: %s (%s)", enc, fsname_rule_name(rule),
		   err);
}

int main(void)
{
	char big[2048], err[512];
	enum fsname_rule rule;

	good("a.txt", "plain name");
	good("out/plot.png", "subdirectory");
	good("donn\xc3\xa9"
	     "es/\xc3\xa9t\xc3\xa9.csv",
	     "accented UTF-8");
	good("\xe6\x97\xa5\xe6\x9c\xac.txt", "CJK");
	good("\xf0\x9f\x93\x88.png", "emoji (4-byte UTF-8)");
	good("a b.txt", "inner space");
	good(".hidden", "dot file");
	good("..a", "name starting with two dots");
	good("a..", "name ending with two dots");
	good("...", "three dots");
	good("%2e%2e", "percent text as a literal name");
	good("report\xe2\x80\xa6.txt", "ellipsis U+2026");

	bad("", 0, FSNAME_EMPTY, "empty");
	bad("/etc/passwd", 11, FSNAME_ABSOLUTE, "absolute path");
	bad("..", 2, FSNAME_DOT_SEGMENT, "'..'");
	bad(".", 1, FSNAME_DOT_SEGMENT, "'.'");
	bad("../x", 4, FSNAME_DOT_SEGMENT, "leading '..'");
	bad("a/../b", 6, FSNAME_DOT_SEGMENT, "inner '..'");
	bad("a/./b", 5, FSNAME_DOT_SEGMENT, "inner '.'");
	bad("a/..", 4, FSNAME_DOT_SEGMENT, "trailing '..'");
	bad("a//b", 4, FSNAME_EMPTY_SEGMENT, "doubled slash");
	bad("a/", 2, FSNAME_EMPTY_SEGMENT, "trailing slash");
	bad("a\\b", 3, FSNAME_BACKSLASH, "backslash");
	bad("..\\..\\x", 7, FSNAME_BACKSLASH, "backslash traversal");
	bad("a\0b", 3, FSNAME_NUL, "NUL inside");
	bad("a.png\0.html", 11, FSNAME_NUL, "NUL before an extension");
	bad("a\nb", 3, FSNAME_CONTROL, "LF");
	bad("a\rb", 3, FSNAME_CONTROL, "CR");
	bad("x\r\nSet-Cookie: a=b", 18, FSNAME_CONTROL, "header injection");
	bad("a\tb", 3, FSNAME_CONTROL, "TAB");
	bad("a\x7f", 2, FSNAME_CONTROL, "DEL");
	bad("a\xc2\x85", 3, FSNAME_CONTROL, "C1 NEL");
	bad("a\xc2\x9b", 3, FSNAME_CONTROL, "C1 CSI");
	bad("\xc0\xaf", 2, FSNAME_BAD_UTF8, "overlong '/' (C0 AF)");
	bad("..\xc0\xaf..", 6, FSNAME_BAD_UTF8, "overlong traversal");
	bad("\xc1\x9c", 2, FSNAME_BAD_UTF8, "overlong '\\' (C1 9C)");
	bad("\xe0\x80\xaf", 3, FSNAME_BAD_UTF8, "3-byte overlong '/'");
	bad("\xf0\x80\x80\xaf", 4, FSNAME_BAD_UTF8, "4-byte overlong '/'");
	bad("\xed\xa0\x80", 3, FSNAME_BAD_UTF8, "surrogate U+D800");
	bad("\xf4\x90\x80\x80", 4, FSNAME_BAD_UTF8, "above U+10FFFF");
	bad("\xe2\x88", 2, FSNAME_BAD_UTF8, "truncated sequence");
	bad("\x80", 1, FSNAME_BAD_UTF8, "lone continuation byte");
	bad("\xff", 1, FSNAME_BAD_UTF8, "byte FF");
	bad("a\xe2\x88\x95"
	    "b",
	    5, FSNAME_LOOKALIKE, "U+2215 division slash");
	bad("a\xe2\x81\x84"
	    "b",
	    5, FSNAME_LOOKALIKE, "U+2044 fraction slash");
	bad("a\xef\xbc\x8f"
	    "b",
	    5, FSNAME_LOOKALIKE, "U+FF0F fullwidth solidus");
	bad("a\xe2\xa7\xb8"
	    "b",
	    5, FSNAME_LOOKALIKE, "U+29F8 big solidus");
	bad("a\xef\xbc\xbc"
	    "b",
	    5, FSNAME_LOOKALIKE, "U+FF3C fullwidth backslash");
	bad("\xef\xbc\x8e\xef\xbc\x8e", 6, FSNAME_LOOKALIKE,
	    "fullwidth full stops");
	bad("\xe2\x80\xa5", 3, FSNAME_LOOKALIKE, "U+2025 two dot leader");
	bad("a\xcc\xb8", 3, FSNAME_LOOKALIKE, "U+0338 combining solidus");
	bad("gpj\xe2\x80\xae.exe", 10, FSNAME_INVISIBLE, "U+202E RLO");
	bad("a\xe2\x80\x8b"
	    "b",
	    5, FSNAME_INVISIBLE, "U+200B zero width");
	bad("\xef\xbb\xbf"
	    "a",
	    4, FSNAME_INVISIBLE, "BOM");
	bad("a\xe2\x80\xa8"
	    "b",
	    5, FSNAME_INVISIBLE, "U+2028 line separator");
	bad("a\xf3\xa0\x80\x81", 5, FSNAME_INVISIBLE, "tag character");
	bad("a\xef\xbf\xbe", 4, FSNAME_NONCHARACTER, "U+FFFE");
	bad("a\xef\xb7\x90", 4, FSNAME_NONCHARACTER, "U+FDD0");
	bad(" a", 2, FSNAME_SPACE_EDGE, "leading space");
	bad("a ", 2, FSNAME_SPACE_EDGE, "trailing space");
	bad("d/ a", 4, FSNAME_SPACE_EDGE, "leading space in a segment");
	bad("a\xc2\xa0", 3, FSNAME_SPACE_EDGE, "trailing no-break space");

	/* Lengths and depth at and past their limits. */
	memset(big, 'a', FSNAME_SEGMENT_MAX);
	big[FSNAME_SEGMENT_MAX] = '\0';
	good(big, "segment of 255 bytes");
	memset(big, 'a', FSNAME_SEGMENT_MAX + 1);
	bad(big, FSNAME_SEGMENT_MAX + 1, FSNAME_SEGMENT_TOO_LONG,
	    "segment of 256 bytes");
	for (int i = 0; i < FSNAME_PATH_MAX; i++)
		big[i] = (i % 200 == 199) ? '/' : 'b';
	big[FSNAME_PATH_MAX] = '\0';
	good(big, "path of 1024 bytes");
	big[FSNAME_PATH_MAX] = 'b';
	bad(big, FSNAME_PATH_MAX + 1, FSNAME_TOO_LONG, "path of 1025 bytes");
	{
		size_t n = 0;

		for (int i = 0; i < FSNAME_DEPTH_MAX; i++)
			n += (size_t)snprintf(big + n, sizeof(big) - n, "%sd",
			                      i ? "/" : "");
		good(big, "32 levels");
		snprintf(big + n, sizeof(big) - n, "/d");
	}
	bad(big, strlen(big), FSNAME_TOO_DEEP, "33 levels");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	bad(big, strlen(big), FSNAME_TOO_LONG, "very long name");

	/* Messages say which rule and what to do. */
	ok(fsname_check("..", 2, &rule, err, sizeof(err)) < 0 &&
	       strstr(err, "filename segment '..' is not allowed") &&
	       strstr(err, "out/plot.png"),
	   "dot segment message: %s", err);
	ok(fsname_check("/data/out/a.png", 15, &rule, err, sizeof(err)) < 0 &&
	       strstr(err, "'out/a.png' instead of '/data/out/a.png'"),
	   "absolute /data path message suggests the relative one: %s", err);
	ok(fsname_check("/data/x\n", 8, &rule, err, sizeof(err)) < 0 &&
	       !strpbrk(err, "\r\n"),
	   "bad remainder is not echoed: %s", err);
	ok(fsname_check("a\xe2\x88\x95"
	                "b",
	                5, &rule, err, sizeof(err)) < 0 &&
	       strstr(err, "U+2215 DIVISION SLASH"),
	   "look-alike named: %s", err);

	/* URL form: decoded exactly once, then checked. */
	url("a%20b.txt", 0, FSNAME_OK, "a b.txt");
	url("out/plot.png", 0, FSNAME_OK, "out/plot.png");
	url("a%2Fb", 0, FSNAME_OK, "a/b");
	url("%C3%A9t%C3%A9.csv", 0, FSNAME_OK, "\xc3\xa9t\xc3\xa9.csv");
	url("%252e%252e/x", 0, FSNAME_OK, "%2e%2e/x");
	url("%2e%2e/etc/passwd", -EINVAL, FSNAME_DOT_SEGMENT, NULL);
	url("%2E%2E/etc/passwd", -EINVAL, FSNAME_DOT_SEGMENT, NULL);
	url("..%2f..%2fetc%2fpasswd", -EINVAL, FSNAME_DOT_SEGMENT, NULL);
	url("a/%2e/b", -EINVAL, FSNAME_DOT_SEGMENT, NULL);
	url("%2fetc%2fpasswd", -EINVAL, FSNAME_ABSOLUTE, NULL);
	url("a%00.png", -EINVAL, FSNAME_NUL, NULL);
	url("%c0%af", -EINVAL, FSNAME_BAD_UTF8, NULL);
	url("..%c0%af..%c0%afetc", -EINVAL, FSNAME_BAD_UTF8, NULL);
	url("%e2%88%95etc", -EINVAL, FSNAME_LOOKALIKE, NULL);
	url("%ef%bc%8f", -EINVAL, FSNAME_LOOKALIKE, NULL);
	url("a%0d%0aSet-Cookie:x", -EINVAL, FSNAME_CONTROL, NULL);
	url("a%5cb", -EINVAL, FSNAME_BACKSLASH, NULL);
	url("..%5c..%5cx", -EINVAL, FSNAME_BACKSLASH, NULL);
	url("a%", -EINVAL, FSNAME_BAD_ESCAPE, NULL);
	url("a%2", -EINVAL, FSNAME_BAD_ESCAPE, NULL);
	url("a%zz", -EINVAL, FSNAME_BAD_ESCAPE, NULL);
	url("a%%41", -EINVAL, FSNAME_BAD_ESCAPE, NULL);
	url("", -EINVAL, FSNAME_EMPTY, NULL);
	{
		char enc[4000];

		for (int i = 0; i < 1200; i++)
			memcpy(enc + 3 * i, "%41", 3);
		enc[3600] = '\0';
		url(enc, -EINVAL, FSNAME_TOO_LONG, NULL);
	}
	{
		char out[8];

		ok(fsname_url_decode("abcdefghij", out, sizeof(out), NULL,
		                     &rule, err, sizeof(err)) == -EINVAL &&
		       rule == FSNAME_TOO_LONG,
		   "small output buffer refused");
	}

	/* Encoding for URLs. */
	{
		char out[64];

		ok(pct_encode_buf("a b/\xc3\xa9.txt", true, out, sizeof(out)) >
		           0 &&
		       strcmp(out, "a%20b/%C3%A9.txt") == 0,
		   "url encode: %s", out);
		ok(pct_encode_buf("abcdef", true, out, 4) == -ENOSPC,
		   "url encode: small buffer");
	}

	/* Segments and text. */
	ok(fsname_check_segment("a/b", 3, &rule, NULL, 0) < 0 &&
	       rule == FSNAME_SLASH,
	   "segment with '/' refused");
	ok(fsname_check_segment("x.txt", 5, NULL, NULL, 0) == 0,
	   "segment accepted");
	ok(fsname_check_text("chat-42", 7, 256, "id", err, sizeof(err)) == 0,
	   "text accepted");
	ok(fsname_check_text("a\nb", 3, 256, "id", err, sizeof(err)) < 0 &&
	       strstr(err, "U+000A"),
	   "text with LF refused: %s", err);
	ok(fsname_check_text("", 0, 256, "id", err, sizeof(err)) < 0,
	   "empty text refused");
	ok(fsname_utf8_valid("a\n\t\xc3\xa9", 5), "utf8 valid with controls");
	ok(!fsname_utf8_valid("\xc0\xaf", 2), "utf8 overlong invalid");
	ok(strcmp(fsname_rule_name(FSNAME_DOT_SEGMENT), "dot_segment") == 0,
	   "rule names");
	return tap_done();
}
