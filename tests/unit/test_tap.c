/* SPDX-License-Identifier: MIT */
/*
 * test_tap: the TAP emitter itself. Names and diagnostic values come from
 * the code under test, so a name holding a newline, a '#' or "# SKIP" must
 * still give exactly one "not ok" line and no directive: the forging checks
 * run tap_ok in a child whose standard output is a pipe and read back every
 * line it wrote. Also the case selection of tap_run_cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static void test_escape(void)
{
	char out[64];

	is_int(tap_escape("plain name", out, sizeof(out)), 10, "plain length");
	is_str(out, "plain name", "plain text unchanged");
	tap_escape("a\nok 2 - b", out, sizeof(out));
	is_str(out, "a\\nok 2 - b", "a newline becomes backslash n");
	tap_escape("x # SKIP", out, sizeof(out));
	is_str(out, "x \\x23 SKIP", "a hash sign becomes backslash x23");
	tap_escape("\r\t\\\x01\x7f", out, sizeof(out));
	is_str(out, "\\r\\t\\\\\\x01\\x7f",
	       "other control characters, and the backslash");
	tap_escape(NULL, out, sizeof(out));
	is_str(out, "(null)", "NULL reads (null)");
	is_int(tap_escape("ab\ncd", out, 4), 6, "the length the whole needs");
	is_str(out, "ab", "truncated before a half escape");
	is_int(tap_escape("ab", NULL, 0), 2, "a zero-sized buffer is measured");
}

/* Runs fn in a child with stdout on a pipe; returns what it wrote
 * (caller frees), NULL if the child could not run. */
static char *output_of(void (*fn)(void))
{
	char *text = NULL;
	size_t len = 0, cap = 0;
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	fflush(stdout);
	if (pipe(fds) < 0)
		return NULL;
	pid = fork();
	if (pid < 0)
		return NULL;
	if (pid == 0) {
		close(fds[0]);
		if (dup2(fds[1], STDOUT_FILENO) < 0)
			_exit(3);
		fn();
		fflush(stdout);
		_exit(0);
	}
	close(fds[1]);
	do {
		if (len + 4096 + 1 > cap) {
			char *grown = realloc(text, cap = len + 8192);

			if (!grown)
				break;
			text = grown;
		}
		n = read(fds[0], text + len, cap - len - 1);
		if (n > 0)
			len += (size_t)n;
	} while (n > 0);
	close(fds[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || !text) {
		free(text);
		return NULL;
	}
	text[len] = '\0';
	return text;
}

static void forged_names(void)
{
	char big[3000];

	memset(big, 'n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[2000] = '\n';
	tap_ok(false, "f.c", 1, "%s", "a\nok 90 - forged by a newline");
	tap_ok(false, "f.c", 2, "%s", "b # SKIP a failure hidden as a skip");
	tap_ok(false, "f.c", 3, "# TODO a leading hash");
	tap_ok(false, "f.c", 4, "c\r\nok 91 - forged by CRLF");
	tap_is_str("got\nok 92 - forged by a value", "want", "f.c", 5,
	           "d: a diagnostic value");
	tap_ok(false, "f.c", 6, "%s", big);
}

/* Every line is a comment or a "not ok" test line with no '#', and there
 * are exactly `want` of the latter. */
static void check_lines(const char *text, int want, const char *what)
{
	int not_ok = 0, bad = 0;

	for (const char *l = text; *l;) {
		const char *end = strchr(l, '\n');
		size_t n = end ? (size_t)(end - l) : strlen(l);

		if (n >= 7 && strncmp(l, "not ok ", 7) == 0) {
			not_ok++;
			if (memchr(l, '#', n))
				bad++;
		} else if (n == 0 || l[0] != '#') {
			bad++;
			printf("#   stray line: %.*s\n", (int)(n > 60 ? 60 : n),
			       l);
		}
		l += n + (end ? 1 : 0);
	}
	is_int(not_ok, want, what);
	is_int(bad, 0, "no other line, and no directive in a test line");
}

static void test_forging(void)
{
	char *text = output_of(forged_names);

	ok(text != NULL, "the child ran");
	if (!text)
		return;
	check_lines(text, 6, "one not ok line per check, none forged");
	ok(strstr(text, "a\\nok 90 - forged") != NULL,
	   "the name is kept, escaped");
	ok(strstr(text, "#   got 'got\\nok 92 - forged by a value', want "
	                "'want'\n") != NULL,
	   "diagnostic values are escaped too");
	free(text);
}

static int ran_a, ran_b;
static void case_a(void)
{
	ran_a++;
}
static void case_b(void)
{
	ran_b++;
}
static const struct tap_case two[] = {{"a", case_a}, {"b", case_b}};

static void select_b(void)
{
	char t[] = "t", b[] = "b";
	char *argv[] = {t, b, NULL};

	tap_run_cases(2, argv, two, 2);
	printf("# ran a=%d b=%d\n", ran_a, ran_b);
}

static void select_typo(void)
{
	char t[] = "t", b[] = "b", c[] = "c\nok";
	char *argv[] = {t, b, c, NULL};

	printf("# status %d\n", tap_run_cases(3, argv, two, 2));
	printf("# ran a=%d b=%d\n", ran_a, ran_b);
}

static void test_cases(void)
{
	static const char bail[] = "Bail out! no test case 'c\\nok'; run with";
	char *text = output_of(select_b);

	ok(text && strstr(text, "# b\n") && !strstr(text, "# a\n") &&
	       strstr(text, "# ran a=0 b=1\n"),
	   "a named case runs alone");
	free(text);
	text = output_of(select_typo);
	ok(text && strncmp(text, bail, strlen(bail)) == 0 &&
	       strstr(text, "# status 2\n") && strstr(text, "# ran a=0 b=0\n"),
	   "an unknown name bails out, escaped, before any case runs");
	free(text);
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"escape", test_escape},
	    {"forging", test_forging},
	    {"cases", test_cases},
	};

	return tap_run_cases(argc, argv, cases,
	                     sizeof(cases) / sizeof(cases[0]));
}
