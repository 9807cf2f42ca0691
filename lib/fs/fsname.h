/* SPDX-License-Identifier: MIT */
/*
 * fsname: strict validation of relative file paths that come from outside
 * (upload_file names, /files/ URLs, resource URIs, list prefixes) and of
 * names found in a workspace before they are listed or linked. A valid path
 * is strict UTF-8 without NUL, control characters (C0, DEL, C1), '\\',
 * look-alike slashes or dots, or invisible and bidirectional formatting
 * characters; its segments are separated by '/', none is empty, "." or "..",
 * none starts or ends with white space; it has no leading '/', and segment
 * length, total length and depth are bounded. Every rejection names the rule
 * that was broken and what to do instead, in words meant for a model; the
 * message never repeats the offending bytes, so it cannot carry CR/LF or
 * other control characters into logs, JSON or headers.
 *
 * Pure functions without state or allocation: thread-safe and fuzzable.
 */
#ifndef MCPSD_FSNAME_H
#define MCPSD_FSNAME_H

#include <stdbool.h>
#include <stddef.h>

#define FSNAME_SEGMENT_MAX 255 /* bytes in one segment */
#define FSNAME_PATH_MAX 1024   /* bytes in the whole path */
#define FSNAME_DEPTH_MAX 32    /* segments in the path */

/* Which rule a path broke. */
enum fsname_rule {
	FSNAME_OK = 0,
	FSNAME_EMPTY,            /* the path is empty */
	FSNAME_TOO_LONG,         /* over FSNAME_PATH_MAX bytes */
	FSNAME_SEGMENT_TOO_LONG, /* a segment over FSNAME_SEGMENT_MAX bytes */
	FSNAME_TOO_DEEP,         /* over FSNAME_DEPTH_MAX segments */
	FSNAME_ABSOLUTE,         /* starts with '/' */
	FSNAME_EMPTY_SEGMENT,    /* "//" or a trailing '/' */
	FSNAME_DOT_SEGMENT,      /* a "." or ".." segment */
	FSNAME_NUL,              /* a NUL byte (or %00) */
	FSNAME_CONTROL,          /* C0 control, DEL or C1 control */
	FSNAME_BACKSLASH,        /* '\\' */
	FSNAME_BAD_UTF8,     /* not strict UTF-8 (overlong, surrogate, ...) */
	FSNAME_LOOKALIKE,    /* a character that looks like '/', '\\' or '.' */
	FSNAME_INVISIBLE,    /* zero-width, bidi, BOM, line separators, tags */
	FSNAME_NONCHARACTER, /* U+FDD0..U+FDEF, U+xFFFE, U+xFFFF */
	FSNAME_SPACE_EDGE,   /* a segment starting or ending with space */
	FSNAME_BAD_ESCAPE,   /* a malformed percent escape (URL form) */
	FSNAME_SLASH,        /* a '/' inside a single segment */
};

/*
 * Checks the len bytes at p (which may contain NUL: it is rejected) as a
 * relative path. Returns 0, or -EINVAL with the broken rule in *rule
 * (optional) and a message for a model in err (optional, may be NULL with
 * errlen 0).
 */
__attribute__((warn_unused_result)) int fsname_check(const char *p, size_t len,
                                                     enum fsname_rule *rule,
                                                     char *err, size_t errlen);

/*
 * Checks one segment (a single name, as read from a directory) with the same
 * rules; a '/' in it is FSNAME_SLASH. Returns 0 or -EINVAL as fsname_check.
 */
__attribute__((warn_unused_result)) int
fsname_check_segment(const char *p, size_t len, enum fsname_rule *rule,
                     char *err, size_t errlen);

/*
 * Decodes percent-escapes in the NUL-terminated enc exactly once into out
 * (outsize bytes, NUL-terminated on success; *outlen optional gets the
 * decoded length) and then checks the result with fsname_check. "%2e%2e"
 * decodes to ".." and is refused; "%252e" decodes to "%2e", which is a
 * valid name and is never decoded again. Returns 0 or -EINVAL as
 * fsname_check (FSNAME_BAD_ESCAPE for '%' not followed by two hex digits,
 * FSNAME_TOO_LONG when the result does not fit).
 */
__attribute__((warn_unused_result)) int
fsname_url_decode(const char *enc, char *out, size_t outsize, size_t *outlen,
                  enum fsname_rule *rule, char *err, size_t errlen);

/*
 * Checks len bytes of text meant as an identifier (a conversation id):
 * 1 to max bytes of strict UTF-8 without NUL, control characters or
 * invisible formatting characters. Returns 0 or -EINVAL with what is wrong
 * in err (the text is not repeated). what names the field in messages.
 */
__attribute__((warn_unused_result)) int
fsname_check_text(const char *s, size_t len, size_t max, const char *what,
                  char *err, size_t errlen);

/* Whether len bytes are strict UTF-8 (any code points, controls too). */
bool fsname_utf8_valid(const char *s, size_t len);

/* A short stable name of a rule ("dot_segment", ...), for logs and tests. */
const char *fsname_rule_name(enum fsname_rule rule);

#endif
