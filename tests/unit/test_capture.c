/* SPDX-License-Identifier: MIT */
/*
 * test_capture: output capture (head and tail within a fixed budget, the
 * omission marker, copies to a file descriptor with a cap) and the UTF-8
 * cleaning of program output. Driving a real stream is covered by
 * tests/integration/test_runner_docker.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/capture.h"
#include "tap.h"
#include "util/buf.h"

static void test_utf8(void)
{
	struct {
		const char *in;
		size_t n;
		const char *out;
		const char *name;
	} cases[] = {
	    {"plain", 5, "plain", "ASCII unchanged"},
	    {"h\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80", 10,
	     "h\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80", "valid multi-byte kept"},
	    {"a\xff"
	     "b",
	     3,
	     "a\xef\xbf\xbd"
	     "b",
	     "invalid byte replaced"},
	    {"a\0b", 3,
	     "a\xef\xbf\xbd"
	     "b",
	     "NUL replaced"},
	    {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", "overlong refused"},
	    {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	     "surrogate refused"},
	    {"\xf4\x90\x80\x80", 4,
	     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	     "above U+10FFFF refused"},
	    {"x\xe2\x9c", 3, "x\xef\xbf\xbd\xef\xbf\xbd", "truncated sequence"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct buf b;

		buf_init(&b, 0);
		ok(capture_utf8_sanitize(cases[i].in, cases[i].n, &b) == 0 &&
		       b.data && strcmp(b.data, cases[i].out) == 0,
		   "utf8: %s", cases[i].name);
		buf_finish(&b);
	}
	{
		struct buf b;

		buf_init(&b, 4);
		is_int(capture_utf8_sanitize("\xff\xff", 2, &b), -E2BIG,
		       "utf8: output limit honoured");
		buf_finish(&b);
	}
}

static void test_capture(void)
{
	struct capture c;
	bool trunc = true;
	char *t, big[1000];
	int fds[2];
	ssize_t n;

	/* Everything fits: the text is the whole stream. */
	is_int(capture_init(&c, 16, -1, 0), 0, "capture init");
	capture_add(&c, "hello ", 6);
	capture_add(&c, "world", 5);
	t = capture_text(&c, &trunc);
	is_str(t, "hello world", "short output kept whole");
	ok(!trunc && c.total == 11, "not truncated, total counted");
	free(t);
	capture_add(&c, "!!!!!", 5); /* exactly 16 */
	t = capture_text(&c, &trunc);
	is_str(t, "hello world!!!!!", "output at the budget kept whole");
	ok(!trunc, "at the budget: not truncated");
	free(t);
	capture_finish(&c);

	/* Longer: head, marker, tail. */
	is_int(capture_init(&c, 8, -1, 0), 0, "capture init");
	for (int i = 0; i < 10; i++)
		capture_add(&c, "0123456789", 10);
	t = capture_text(&c, &trunc);
	is_str(t, "0123\n[... 92 bytes omitted ...]\n6789",
	       "head and tail around a marker");
	ok(trunc && c.total == 100, "truncated, total 100");
	free(t);
	capture_finish(&c);

	/* One write much larger than the budget. */
	memset(big, 'b', sizeof(big));
	big[0] = 'A';
	big[sizeof(big) - 1] = 'Z';
	is_int(capture_init(&c, 4, -1, 0), 0, "capture init");
	capture_add(&c, big, sizeof(big));
	t = capture_text(&c, &trunc);
	is_str(t, "Ab\n[... 996 bytes omitted ...]\nbZ", "single huge write");
	free(t);
	capture_finish(&c);

	/* Multi-byte characters are not cut at the seams. */
	is_int(capture_init(&c, 8, -1, 0), 0, "capture init");
	capture_add(&c, "a\xc3\xa9\xc3\xa9xxxxxxxx\xc3\xa9z", 16);
	t = capture_text(&c, &trunc);
	is_str(t, "a\xc3\xa9\n[... 8 bytes omitted ...]\nx\xc3\xa9z",
	       "head and tail cut on character boundaries");
	free(t);
	capture_finish(&c);
	is_int(capture_init(&c, 8, -1, 0), 0, "capture init");
	capture_add(&c, "abc\xe2\x9c", 5);
	capture_add(&c, "\x93", 1);
	t = capture_text(&c, &trunc);
	is_str(t, "abc\xe2\x9c\x93", "a character across head and tail");
	free(t);
	capture_finish(&c);

	/* The full copy to a descriptor stops at its limit. */
	if (pipe(fds) < 0) {
		ok(0, "pipe");
		return;
	}
	is_int(capture_init(&c, 4, fds[1], 10), 0, "capture with fd");
	capture_add(&c, "0123456", 7);
	capture_add(&c, "789abcdef", 9);
	close(fds[1]);
	n = read(fds[0], big, sizeof(big));
	ok(n == 10 && memcmp(big, "0123456789", 10) == 0 && c.saved == 10 &&
	       c.total == 16,
	   "fd copy capped at its limit");
	close(fds[0]);
	capture_finish(&c);
	ok(c.head == NULL && c.tail == NULL,
	   "finish frees and clears both halves");
	capture_finish(&c);
	ok(c.head == NULL && c.tail == NULL && c.saved == 10,
	   "a second finish frees nothing again");
}

/* What the lazy file's maker saw. */
struct lazy {
	int calls, which, fd;
};

static int lazy_open(void *arg, int which)
{
	struct lazy *l = arg;

	l->calls++;
	l->which = which;
	return l->fd;
}

/* The whole copy's file is made only once the output passes the budget. */
static void test_lazy_file(void)
{
	struct capture out, err;
	struct lazy l = {0, 0, -1};
	char buf[256];
	char path[] = "/tmp/test_capture.XXXXXX";
	ssize_t n;

	l.fd = mkstemp(path);
	ok(l.fd >= 0, "a scratch file");
	unlink(path);
	is_int(capture_init_run(&out, &err, 8, 100, -1, -1, lazy_open, &l), 0,
	       "two captures with a lazy file");
	capture_add(&out, "abcd", 4);
	capture_add(&out, "efgh", 4);
	capture_add(&err, "12345678", 8);
	is_int(l.calls, 0, "within the budget: no file");
	capture_add(&out, "i", 1);
	ok(l.calls == 1 && l.which == 1, "one byte past it: made for stdout");
	capture_add(&out, "jklmnopqrstuvwxyz", 17);
	is_int(l.calls, 1, "made once");
	n = pread(l.fd, buf, sizeof(buf), 0);
	ok(n == 26 && memcmp(buf, "abcdefghijklmnopqrstuvwxyz", 26) == 0 &&
	       out.saved == 26,
	   "holding every byte in order, those before it included");
	capture_finish(&out);
	capture_finish(&err);
	is_int(l.calls, 1, "stderr within its budget made none");

	/* A caller's fd wins; a maker that fails leaves the text intact. */
	l.calls = 0;
	l.fd = -1;
	is_int(capture_init_run(&out, &err, 4, 100, -1, -1, lazy_open, &l), 0,
	       "again, the maker failing");
	capture_add(&err, "0123456789", 10);
	ok(l.calls == 1 && l.which == 2 && err.saved == 0,
	   "asked once for stderr, nothing saved");
	capture_add(&err, "abc", 3);
	is_int(l.calls, 1, "and not asked again");
	{
		bool trunc = false;
		char *t = capture_text(&err, &trunc);

		is_str(t, "01\n[... 9 bytes omitted ...]\nbc",
		       "the text as without a file");
		free(t);
	}
	capture_finish(&out);
	capture_finish(&err);
}

int main(void)
{
	test_utf8();
	test_capture();
	test_lazy_file();
	return tap_done();
}
