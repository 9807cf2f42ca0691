/* SPDX-License-Identifier: MIT */
/*
 * fsname: one pass over the bytes of a path, decoding strict UTF-8 and
 * checking every code point and every segment. Messages name positions and
 * code points (U+XXXX) rather than echoing input, so no caller text reaches
 * a log line, a JSON string or a header through them.
 */
#include "fs/fsname.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/errmsg.h"
#include "util/pct.h"

static const char example[] = "use a path inside /data such as 'out/plot.png'";

struct confusable {
	uint32_t cp;
	const char *name;
	const char *looks_like;
};

/*
 * Characters that render like a path separator or a dot. A name containing
 * one shows a directory structure or an extension that is not there, and a
 * later Unicode normalization (NFKC maps U+FF0F to '/', U+2025 to "..")
 * would turn it into a real one.
 */
static const struct confusable lookalikes[] = {
    {0x0337, "COMBINING SHORT SOLIDUS OVERLAY", "/"},
    {0x0338, "COMBINING LONG SOLIDUS OVERLAY", "/"},
    {0x1735, "PHILIPPINE SINGLE PUNCTUATION", "/"},
    {0x2024, "ONE DOT LEADER", "."},
    {0x2025, "TWO DOT LEADER", ".."},
    {0x2044, "FRACTION SLASH", "/"},
    {0x20E5, "COMBINING REVERSE SOLIDUS OVERLAY", "\\"},
    {0x2215, "DIVISION SLASH", "/"},
    {0x2216, "SET MINUS", "\\"},
    {0x244A, "OCR DOUBLE BACKSLASH", "\\"},
    {0x2571, "BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT", "/"},
    {0x2572, "BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT", "\\"},
    {0x29F5, "REVERSE SOLIDUS OPERATOR", "\\"},
    {0x29F6, "SOLIDUS WITH OVERBAR", "/"},
    {0x29F7, "REVERSE SOLIDUS WITH HORIZONTAL STROKE", "\\"},
    {0x29F8, "BIG SOLIDUS", "/"},
    {0x29F9, "BIG REVERSE SOLIDUS", "\\"},
    {0x2F03, "KANGXI RADICAL SLASH", "/"},
    {0x3033, "VERTICAL KANA REPEAT MARK UPPER HALF", "/"},
    {0xFE52, "SMALL FULL STOP", "."},
    {0xFE68, "SMALL REVERSE SOLIDUS", "\\"},
    {0xFF0E, "FULLWIDTH FULL STOP", "."},
    {0xFF0F, "FULLWIDTH SOLIDUS", "/"},
    {0xFF3C, "FULLWIDTH REVERSE SOLIDUS", "\\"},
    {0x1F67C, "VERY HEAVY SOLIDUS", "/"},
    {0x1F67D, "VERY HEAVY REVERSE SOLIDUS", "\\"},
};

static const char *const rule_names[] = {
    [FSNAME_OK] = "ok",
    [FSNAME_EMPTY] = "empty",
    [FSNAME_TOO_LONG] = "too_long",
    [FSNAME_SEGMENT_TOO_LONG] = "segment_too_long",
    [FSNAME_TOO_DEEP] = "too_deep",
    [FSNAME_ABSOLUTE] = "absolute",
    [FSNAME_EMPTY_SEGMENT] = "empty_segment",
    [FSNAME_DOT_SEGMENT] = "dot_segment",
    [FSNAME_NUL] = "nul",
    [FSNAME_CONTROL] = "control",
    [FSNAME_BACKSLASH] = "backslash",
    [FSNAME_BAD_UTF8] = "bad_utf8",
    [FSNAME_LOOKALIKE] = "lookalike",
    [FSNAME_INVISIBLE] = "invisible",
    [FSNAME_NONCHARACTER] = "noncharacter",
    [FSNAME_SPACE_EDGE] = "space_edge",
    [FSNAME_BAD_ESCAPE] = "bad_escape",
    [FSNAME_SLASH] = "slash",
};

const char *fsname_rule_name(enum fsname_rule rule)
{
	if ((size_t)rule < sizeof(rule_names) / sizeof(rule_names[0]) &&
	    rule_names[rule])
		return rule_names[rule];
	return "unknown";
}

__attribute__((format(printf, 5, 6))) static int
refuse(enum fsname_rule r, enum fsname_rule *rule, char *err, size_t errlen,
       const char *fmt, ...)
{
	va_list ap;

	if (rule)
		*rule = r;
	va_start(ap, fmt);
	errmsg_vset(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/*
 * Decodes one strict UTF-8 sequence: no overlong forms, no surrogates,
 * nothing above U+10FFFF, no truncation. Returns its length or -1.
 */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c < 0xC2) /* a continuation byte, or an overlong C0/C1 lead */
		return -1;
	if (c < 0xE0) {
		if (n < 2 || (s[1] & 0xC0) != 0x80)
			return -1;
		*cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
		return 2;
	}
	if (c < 0xF0) {
		if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return -1;
		*cp = ((uint32_t)(c & 0x0F) << 12) |
		      ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		if (*cp < 0x800 || (*cp >= 0xD800 && *cp <= 0xDFFF))
			return -1;
		return 3;
	}
	if (c < 0xF5) {
		if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
		    (s[3] & 0xC0) != 0x80)
			return -1;
		*cp = ((uint32_t)(c & 0x07) << 18) |
		      ((uint32_t)(s[1] & 0x3F) << 12) |
		      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
		if (*cp < 0x10000 || *cp > 0x10FFFF)
			return -1;
		return 4;
	}
	return -1;
}

/*
 * Default-ignorable and formatting characters that make a name display
 * differently from what it is: zero-width characters, bidirectional
 * controls (U+202E turns "gpj.exe" into "exe.jpg" on screen), the byte
 * order mark, line and paragraph separators (line breaks to some readers),
 * fillers and tags. Variation selectors U+FE00..U+FE0F stay allowed: emoji
 * need them.
 */
static bool is_invisible(uint32_t cp)
{
	return cp == 0x00AD || cp == 0x034F || cp == 0x061C || cp == 0x115F ||
	       cp == 0x1160 || cp == 0x17B4 || cp == 0x17B5 ||
	       (cp >= 0x180B && cp <= 0x180F) ||
	       (cp >= 0x200B && cp <= 0x200F) ||
	       (cp >= 0x2028 && cp <= 0x202E) ||
	       (cp >= 0x2060 && cp <= 0x206F) || cp == 0x3164 || cp == 0xFEFF ||
	       cp == 0xFFA0 || (cp >= 0xFFF0 && cp <= 0xFFFB) ||
	       (cp >= 0x1BCA0 && cp <= 0x1BCA3) ||
	       (cp >= 0x1D173 && cp <= 0x1D17A) ||
	       (cp >= 0xE0000 && cp <= 0xE0FFF);
}

static bool is_space(uint32_t cp)
{
	return cp == 0x20 || cp == 0xA0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F ||
	       cp == 0x3000;
}

static const struct confusable *lookalike(uint32_t cp)
{
	for (size_t i = 0; i < sizeof(lookalikes) / sizeof(lookalikes[0]); i++)
		if (lookalikes[i].cp == cp)
			return &lookalikes[i];
	return NULL;
}

/* Checks one segment [s, s + n); index is 1-based for messages. */
static int check_segment(const unsigned char *s, size_t n, size_t off,
                         unsigned index, enum fsname_rule *rule, char *err,
                         size_t errlen)
{
	uint32_t cp = 0, first = 0;

	if (n == 0)
		return refuse(FSNAME_EMPTY_SEGMENT, rule, err, errlen,
		              "the path has an empty segment (a leading or "
		              "doubled '/' or a trailing '/'): %s",
		              example);
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return refuse(FSNAME_DOT_SEGMENT, rule, err, errlen,
		              "filename segment '%s' is not allowed: %s",
		              n == 1 ? "." : "..", example);
	if (n > FSNAME_SEGMENT_MAX)
		return refuse(FSNAME_SEGMENT_TOO_LONG, rule, err, errlen,
		              "segment %u of the path is %zu bytes long; a "
		              "name may have at most %d bytes: use a shorter "
		              "name",
		              index, n, FSNAME_SEGMENT_MAX);
	for (size_t i = 0; i < n;) {
		const struct confusable *c;
		size_t at = off + i;
		int k;

		if (s[i] == '\0')
			return refuse(FSNAME_NUL, rule, err, errlen,
			              "the path contains a NUL byte at byte "
			              "%zu: remove it",
			              at);
		if (s[i] == '\\')
			return refuse(FSNAME_BACKSLASH, rule, err, errlen,
			              "the path contains '\\' at byte %zu: "
			              "separate directories with '/' and do "
			              "not use '\\' in names",
			              at);
		if (s[i] == '/')
			return refuse(FSNAME_SLASH, rule, err, errlen,
			              "the name contains '/' at byte %zu: a "
			              "single name cannot hold a directory",
			              at);
		k = utf8_next(s + i, n - i, &cp);
		if (k < 0)
			return refuse(FSNAME_BAD_UTF8, rule, err, errlen,
			              "the path is not valid UTF-8 at byte %zu "
			              "(an invalid, overlong or truncated "
			              "sequence, a surrogate, or a code point "
			              "above U+10FFFF): send names as UTF-8",
			              at);
		if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return refuse(FSNAME_CONTROL, rule, err, errlen,
			              "the path contains the control character "
			              "U+%04X at byte %zu; control characters "
			              "(CR, LF, TAB, DEL, ...) are not allowed "
			              "in file names: remove it",
			              (unsigned)cp, at);
		c = lookalike(cp);
		if (c)
			return refuse(
			    FSNAME_LOOKALIKE, rule, err, errlen,
			    "the path contains U+%04X %s at byte %zu, "
			    "which looks like '%s': separate "
			    "directories with '/' and use plain '.' "
			    "in names",
			    (unsigned)cp, c->name, at, c->looks_like);
		if (is_invisible(cp))
			return refuse(FSNAME_INVISIBLE, rule, err, errlen,
			              "the path contains the invisible "
			              "formatting character U+%04X at byte %zu "
			              "(zero-width, bidirectional, byte order "
			              "mark, line separator or tag characters "
			              "are not allowed): remove it",
			              (unsigned)cp, at);
		if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE)
			return refuse(FSNAME_NONCHARACTER, rule, err, errlen,
			              "the path contains the Unicode "
			              "noncharacter U+%04X at byte %zu: remove "
			              "it",
			              (unsigned)cp, at);
		if (i == 0)
			first = cp;
		i += (size_t)k;
	}
	if (is_space(first) || is_space(cp))
		return refuse(FSNAME_SPACE_EDGE, rule, err, errlen,
		              "segment %u of the path %s with white space: "
		              "remove the %s space",
		              index, is_space(first) ? "starts" : "ends",
		              is_space(first) ? "leading" : "trailing");
	return 0;
}

static int check_path(const char *p, size_t len, enum fsname_rule *rule,
                      char *err, size_t errlen, int nested)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t start = 0;
	unsigned depth = 0;
	int r;

	if (rule)
		*rule = FSNAME_OK;
	if (err && errlen)
		err[0] = '\0';
	if (len == 0)
		return refuse(FSNAME_EMPTY, rule, err, errlen,
		              "the file name is empty: %s", example);
	if (len > FSNAME_PATH_MAX)
		return refuse(FSNAME_TOO_LONG, rule, err, errlen,
		              "the path is %zu bytes long; at most %d bytes "
		              "are allowed: use a shorter name",
		              len, FSNAME_PATH_MAX);
	if (s[0] == '/') {
		static const char data[] = "/data/";
		size_t dl = sizeof(data) - 1;

		/* Say what to write instead when that is a valid path. */
		if (!nested && len > dl && memcmp(p, data, dl) == 0 &&
		    len - dl <= 200 &&
		    check_path(p + dl, len - dl, NULL, NULL, 0, 1) == 0)
			return refuse(FSNAME_ABSOLUTE, rule, err, errlen,
			              "the path starts with '/': give it "
			              "relative to /data, i.e. '%.*s' instead "
			              "of '%.*s'",
			              (int)(len - dl), p + dl, (int)len, p);
		return refuse(FSNAME_ABSOLUTE, rule, err, errlen,
		              "the path starts with '/': give it relative to "
		              "/data, such as 'out/plot.png'");
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		if (++depth > FSNAME_DEPTH_MAX)
			return refuse(FSNAME_TOO_DEEP, rule, err, errlen,
			              "the path has more than %d levels: use "
			              "a flatter layout such as 'out/plot.png'",
			              FSNAME_DEPTH_MAX);
		r = check_segment(s + start, i - start, start, depth, rule, err,
		                  errlen);
		if (r < 0)
			return r;
		start = i + 1;
	}
	return 0;
}

int fsname_check(const char *p, size_t len, enum fsname_rule *rule, char *err,
                 size_t errlen)
{
	return check_path(p, len, rule, err, errlen, 0);
}

int fsname_check_segment(const char *p, size_t len, enum fsname_rule *rule,
                         char *err, size_t errlen)
{
	if (rule)
		*rule = FSNAME_OK;
	if (err && errlen)
		err[0] = '\0';
	if (len == 0)
		return refuse(FSNAME_EMPTY, rule, err, errlen,
		              "the file name is empty: %s", example);
	return check_segment((const unsigned char *)p, len, 0, 1, rule, err,
	                     errlen);
}

bool fsname_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp;

	for (size_t i = 0; i < len;) {
		int k;

		if (u[i] < 0x80) {
			i++;
			continue;
		}
		k = utf8_next(u + i, len - i, &cp);
		if (k < 0)
			return false;
		i += (size_t)k;
	}
	return true;
}

int fsname_check_text(const char *s, size_t len, size_t max, const char *what,
                      char *err, size_t errlen)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp;
	int k;

	if (err && errlen)
		err[0] = '\0';
	if (len == 0 || len > max)
		return refuse(FSNAME_TOO_LONG, NULL, err, errlen,
		              "%s must be 1 to %zu bytes long (it is %zu)",
		              what, max, len);
	for (size_t i = 0; i < len; i += (size_t)k) {
		k = utf8_next(u + i, len - i, &cp);
		if (k < 0)
			return refuse(FSNAME_BAD_UTF8, NULL, err, errlen,
			              "%s is not valid UTF-8 at byte %zu", what,
			              i);
		if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return refuse(FSNAME_CONTROL, NULL, err, errlen,
			              "%s contains the control character "
			              "U+%04X at byte %zu",
			              what, (unsigned)cp, i);
		if (is_invisible(cp))
			return refuse(FSNAME_INVISIBLE, NULL, err, errlen,
			              "%s contains the invisible formatting "
			              "character U+%04X at byte %zu",
			              what, (unsigned)cp, i);
	}
	return 0;
}

int fsname_url_decode(const char *enc, char *out, size_t outsize,
                      size_t *outlen, enum fsname_rule *rule, char *err,
                      size_t errlen)
{
	size_t n = 0, bad = 0, cap = outsize;
	int rc;

	if (outlen)
		*outlen = 0;
	if (rule)
		*rule = FSNAME_OK;
	if (err && errlen)
		err[0] = '\0';
	if (cap > FSNAME_PATH_MAX + 1)
		cap = FSNAME_PATH_MAX + 1;
	rc = pct_decode(enc, strlen(enc), out, cap, &n, &bad);
	if (rc == -EINVAL)
		return refuse(
		    FSNAME_BAD_ESCAPE, rule, err, errlen,
		    "the URL path has a malformed percent escape at "
		    "byte %zu: write '%%' followed by two hex digits, "
		    "e.g. %%20 for a space",
		    bad);
	if (rc < 0)
		return refuse(FSNAME_TOO_LONG, rule, err, errlen,
		              "the path is longer than %d bytes once decoded: "
		              "use a shorter name",
		              FSNAME_PATH_MAX);
	if (fsname_check(out, n, rule, err, errlen) < 0) {
		if (outsize)
			out[0] = '\0';
		return -EINVAL;
	}
	if (outlen)
		*outlen = n;
	return 0;
}
