/* SPDX-License-Identifier: MIT */
/*
 * check_output: parsing a syntax checker's output. Each output line is
 * copied (cut at CHECK_OUTPUT_LINE_MAX) into a NUL-terminated buffer and
 * tried against the formats in check_output.h; nothing reads past len, and
 * every number is bounded before use.
 */
#include "tools/check_output.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define CHECK_OUTPUT_NUM_MAX 999999999u /* 9 digits: no overflow */

struct check_output_state {
	const char *fname;
	size_t flen;
	struct check_output_error *out;
	size_t max, n;
	unsigned py_line; /* the code file's last Python frame, or 0 */
	bool bun_pending; /* a Bun "error:" line waits for its "at" line */
	char bun_msg[CHECK_OUTPUT_MESSAGE_MAX];
};

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t check_output_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	/* Overlong forms, surrogates and code points above U+10FFFF. */
	if (c == 0xE0)
		lo = 0xA0;
	else if (c == 0xED)
		hi = 0x9F;
	else if (c == 0xF0)
		lo = 0x90;
	else if (c == 0xF4)
		hi = 0x8F;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

/*
 * Copies n bytes of src into dst (CHECK_OUTPUT_MESSAGE_MAX) as a message:
 * control characters and runs of blanks become one space, invalid UTF-8
 * becomes '?', both ends trimmed, cut between characters.
 */
static void check_output_clean(char *dst, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0, i = 0;
	bool space = false;

	while (i < n) {
		size_t l = check_output_utf8_len(s + i, n - i);

		if (l == 1 && (s[i] < 0x20 || s[i] == 0x7f || s[i] == ' ')) {
			space = o > 0;
			i++;
			continue;
		}
		if (space) {
			if (o + 1 >= CHECK_OUTPUT_MESSAGE_MAX - 1)
				break;
			dst[o++] = ' ';
			space = false;
		}
		if (l == 0) {
			if (o + 1 >= CHECK_OUTPUT_MESSAGE_MAX)
				break;
			dst[o++] = '?';
			i++;
			continue;
		}
		if (o + l >= CHECK_OUTPUT_MESSAGE_MAX)
			break;
		memcpy(dst + o, s + i, l);
		o += l;
		i += l;
	}
	/* A blank put in just before the cut. */
	while (o > 0 && dst[o - 1] == ' ')
		o--;
	dst[o] = '\0';
}

/* Whether the n bytes at p name the code file. */
static bool check_output_path_is(const struct check_output_state *st,
                                 const char *p, size_t n)
{
	if (n == st->flen)
		return memcmp(p, st->fname, n) == 0;
	return n > st->flen && p[n - st->flen - 1] == '/' &&
	       memcmp(p + n - st->flen, st->fname, st->flen) == 0;
}

/* Reads 1 to 9 digits at *s, at least 1; advances *s. */
static bool check_output_num(const char **s, unsigned *out)
{
	const char *p = *s;
	unsigned v = 0;
	size_t k = 0;

	while (p[k] >= '0' && p[k] <= '9') {
		if (k == 9)
			return false;
		v = v * 10 + (unsigned)(p[k] - '0');
		k++;
	}
	if (k == 0 || v == 0 || v > CHECK_OUTPUT_NUM_MAX)
		return false;
	*s = p + k;
	*out = v;
	return true;
}

static bool check_output_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void check_output_add(struct check_output_state *st, unsigned line,
                             unsigned col, const char *msg, size_t n)
{
	struct check_output_error e;

	if (st->n >= st->max)
		return;
	e.line = line;
	e.column = col;
	check_output_clean(e.message, msg, n);
	if (!e.message[0])
		return;
	for (size_t i = 0; i < st->n; i++)
		if (st->out[i].line == line && st->out[i].column == col &&
		    strcmp(st->out[i].message, e.message) == 0)
			return;
	st->out[st->n++] = e;
}

/*
 * "path:LINE[:COL]" at the start of s, then ':' (or the end of s when
 * at_end). Sets *rest past the ':'. Tries every ':' followed by a digit as
 * the end of the path, since paths may hold colons.
 */
static bool check_output_loc(const struct check_output_state *st, const char *s,
                             bool at_end, unsigned *line, unsigned *col,
                             const char **rest)
{
	for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':')) {
		const char *p = c + 1;

		*col = 0;
		if (!check_output_path_is(st, s, (size_t)(c - s)) ||
		    !check_output_num(&p, line))
			continue;
		if (*p == ':' && p[1] >= '0' && p[1] <= '9') {
			const char *q = p + 1;

			if (check_output_num(&q, col) &&
			    (*q == ':' || (at_end && *q == '\0')))
				p = q;
			else
				*col = 0;
		}
		if (*p == ':' || (at_end && *p == '\0')) {
			*rest = *p ? p + 1 : p;
			return true;
		}
	}
	return false;
}

/* gcc, rustc --error-format=short, gofmt -e, ruby -c. */
static bool check_output_gcc(struct check_output_state *st, const char *s)
{
	unsigned line, col;
	const char *rest;

	if (!check_output_loc(st, s, false, &line, &col, &rest))
		return false;
	rest += strspn(rest, " \t");
	if (check_output_starts(rest, "warning") ||
	    check_output_starts(rest, "note") ||
	    check_output_starts(rest, "info"))
		return true;
	if (check_output_starts(rest, "fatal error: "))
		rest += strlen("fatal error: ");
	else if (check_output_starts(rest, "error: "))
		rest += strlen("error: ");
	check_output_add(st, line, col, rest, strlen(rest));
	return true;
}

/* bash -n: "path: line N: message". */
static bool check_output_bash(struct check_output_state *st, const char *s)
{
	const char *m = strstr(s, ": line ");
	const char *p;
	unsigned line;

	if (!m || !check_output_path_is(st, s, (size_t)(m - s)))
		return false;
	p = m + strlen(": line ");
	if (!check_output_num(&p, &line) || *p != ':')
		return false;
	p++;
	check_output_add(st, line, 0, p, strlen(p));
	return true;
}

/* php -l: "[PHP ]Parse error: message in path on line N". */
static bool check_output_php(struct check_output_state *st, const char *s)
{
	const char *on = NULL, *in = NULL, *p;
	unsigned line;

	for (p = strstr(s, " on line "); p; p = strstr(p + 1, " on line "))
		on = p;
	if (!on)
		return false;
	p = on + strlen(" on line ");
	if (!check_output_num(&p, &line) || *p != '\0')
		return false;
	for (p = strstr(s, " in "); p && p < on; p = strstr(p + 1, " in ")) {
		const char *path = p + strlen(" in ");

		if (path <= on &&
		    check_output_path_is(st, path, (size_t)(on - path))) {
			in = p;
			break;
		}
	}
	if (!in)
		return false;
	if (check_output_starts(s, "PHP "))
		s += strlen("PHP ");
	check_output_add(st, line, 0, s, (size_t)(in - s));
	return true;
}

/* Python: '  File "path", line N[, in x]' then 'XxxError: message'. */
static bool check_output_python(struct check_output_state *st, const char *s)
{
	const char *t = s + strspn(s, " ");
	const char *q, *p;
	unsigned line;
	size_t k;

	if (check_output_starts(t, "File \"")) {
		t += strlen("File \"");
		q = strstr(t, "\", line ");
		if (!q)
			return false;
		p = q + strlen("\", line ");
		if (!check_output_num(&p, &line) || (*p && *p != ','))
			return false;
		if (check_output_path_is(st, t, (size_t)(q - t)))
			st->py_line = line;
		return true;
	}
	if (!st->py_line || s != t)
		return false;
	k = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	              "0123456789_.");
	if (k < 5 || (s[k] != ':' && s[k] != '\0') ||
	    !(strncmp(s + k - 5, "Error", 5) == 0 ||
	      (k >= 9 && strncmp(s + k - 9, "Exception", 9) == 0)))
		return false;
	check_output_add(st, st->py_line, 0, s, strlen(s));
	st->py_line = 0;
	return true;
}

/* bun build: "error: message", then "    at path:LINE:COL". */
static bool check_output_bun(struct check_output_state *st, const char *s)
{
	const char *t = s + strspn(s, " \t"), *rest;
	unsigned line, col;

	if (s == t && check_output_starts(s, "error: ")) {
		check_output_clean(st->bun_msg, s + 7, strlen(s + 7));
		st->bun_pending = true;
		return true;
	}
	if (!st->bun_pending || t == s || !check_output_starts(t, "at "))
		return false;
	if (!check_output_loc(st, t + 3, true, &line, &col, &rest) || *rest)
		return false;
	check_output_add(st, line, col, st->bun_msg, strlen(st->bun_msg));
	st->bun_pending = false;
	return true;
}

static void check_output_line(struct check_output_state *st, const char *s)
{
	if (check_output_python(st, s) || check_output_bun(st, s) ||
	    check_output_bash(st, s) || check_output_php(st, s))
		return;
	(void)check_output_gcc(st, s);
}

/* Copies the line at p (n bytes) into buf, cut, NULs as spaces. */
static void check_output_copy_line(char *buf, const char *p, size_t n)
{
	size_t k = n < CHECK_OUTPUT_LINE_MAX ? n : CHECK_OUTPUT_LINE_MAX;

	if (k && p[k - 1] == '\r')
		k--;
	for (size_t i = 0; i < k; i++)
		buf[i] = p[i] ? p[i] : ' ';
	buf[k] = '\0';
}

size_t check_output_errors(const char *text, size_t len, const char *filename,
                           struct check_output_error *out, size_t max)
{
	struct check_output_state st;
	char buf[CHECK_OUTPUT_LINE_MAX + 1];
	size_t i = 0;

	memset(&st, 0, sizeof(st));
	st.fname = filename;
	st.flen = strlen(filename);
	st.out = out;
	st.max = max;
	if (st.flen == 0 || !text)
		return 0;
	while (i < len && st.n < st.max) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;

		check_output_copy_line(buf, text + i, n);
		check_output_line(&st, buf);
		i += n + 1;
	}
	return st.n;
}

int check_output_first_line(const char *text, size_t len,
                            struct check_output_error *out)
{
	size_t i = 0;
	char buf[CHECK_OUTPUT_LINE_MAX + 1];

	memset(out, 0, sizeof(*out));
	while (text && i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;

		check_output_copy_line(buf, text + i, n);
		check_output_clean(out->message, buf, strlen(buf));
		if (out->message[0])
			return 0;
		i += n + 1;
	}
	return -ENOENT;
}
