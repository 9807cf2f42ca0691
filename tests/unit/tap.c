/* SPDX-License-Identifier: MIT */
/*
 * tap: numbered ok / not ok lines with diagnostics on failure. Test names and
 * the values shown in diagnostics come from the code under test (error
 * messages, URIs, parsed output), so every one is escaped before it is
 * written: a newline or another control character could otherwise start a
 * line of its own ("ok 7 - forged"), and a '#' in a name could turn a failure
 * into "# SKIP" or "# TODO". Single-threaded, like the tests that use it.
 */
#include "tap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

static int n_run, n_failed;

/* Appends up to n bytes of s to out (which has room for outlen - 1). */
static size_t put(char *out, size_t outlen, size_t at, const char *s, size_t n)
{
	while (n-- && at + 1 < outlen)
		out[at++] = *s++;
	return at;
}

static const char *tap_escape_of(unsigned char c, char hex[5])
{
	switch (c) {
	case '\n':
		return "\\n";
	case '\r':
		return "\\r";
	case '\t':
		return "\\t";
	case '\\':
		return "\\\\";
	}
	/* '#' as \x23 rather than "\#": meson's TAP reader takes any
	 * "# SKIP" or "# TODO" after an ok as a directive, backslash or not. */
	if (c < 0x20 || c == 0x7f || c == '#') {
		snprintf(hex, 5, "\\x%02x", c);
		return hex;
	}
	return NULL;
}

size_t tap_escape(const char *s, char *out, size_t outlen)
{
	size_t at = 0, need = 0;
	bool full = outlen == 0;
	char hex[5];

	if (!s)
		s = "(null)";
	for (; *s; s++) {
		const char *e = tap_escape_of((unsigned char)*s, hex);
		size_t n = e ? strlen(e) : 1;

		need += n;
		if (!full && at + n < outlen)
			at = put(out, outlen, at, e ? e : s, n);
		else
			full = true; /* stop here: never half an escape */
	}
	if (outlen)
		out[at] = '\0';
	return need;
}

/* Prints s escaped, whatever its length. */
static void print_escaped(const char *s)
{
	char small[512], *big = NULL, *out = small;
	size_t need = tap_escape(s, small, sizeof(small));

	if (need >= sizeof(small)) {
		big = malloc(need + 1);
		if (big) {
			tap_escape(s, big, need + 1);
			out = big;
		}
	}
	fputs(out, stdout);
	free(big);
}

/* A vprintf-like function: clang checks its callers' formats instead. */
__attribute__((format(printf, 1, 0))) static void print_name(const char *fmt,
                                                             va_list ap)
{
	char small[512], *name = small;
	va_list again;
	int n;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n >= (int)sizeof(small)) {
		name = malloc((size_t)n + 1);
		if (name)
			vsnprintf(name, (size_t)n + 1, fmt, again);
		else
			name = small; /* the truncated name */
	}
	va_end(again);
	print_escaped(n < 0 ? "(name could not be formatted)" : name);
	if (name != small)
		free(name);
}

bool tap_ok(bool cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	n_run++;
	printf("%s %d - ", cond ? "ok" : "not ok", n_run);
	va_start(ap, fmt);
	print_name(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		n_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

bool tap_is_int(long long got, long long want, const char *file, int line,
                const char *name)
{
	bool r = tap_ok(got == want, file, line, "%s", name);

	if (!r)
		printf("#   got %lld, want %lld\n", got, want);
	return r;
}

bool tap_is_str(const char *got, const char *want, const char *file, int line,
                const char *name)
{
	bool same = (got == NULL && want == NULL) ||
	            (got && want && strcmp(got, want) == 0);
	bool r = tap_ok(same, file, line, "%s", name);

	if (!r) {
		printf("#   got '");
		print_escaped(got);
		printf("', want '");
		print_escaped(want);
		printf("'\n");
		fflush(stdout);
	}
	return r;
}

int tap_done(void)
{
	printf("1..%d\n", n_run);
	if (n_failed)
		printf("# %d of %d failed\n", n_failed, n_run);
	return n_failed ? 1 : 0;
}

static const struct tap_case *tap_find(const struct tap_case *cases, size_t n,
                                       const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(cases[i].name, name) == 0)
			return &cases[i];
	return NULL;
}

static int tap_bail_unknown(const char *name, const struct tap_case *cases,
                            size_t n)
{
	printf("Bail out! no test case '");
	print_escaped(name);
	printf("'; run with --list for the cases, or name one of:");
	for (size_t i = 0; i < n; i++)
		printf(" %s", cases[i].name);
	printf("\n");
	return 2;
}

int tap_run_cases(int argc, char **argv, const struct tap_case *cases, size_t n)
{
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	/* Check every name first, so a typo runs nothing. */
	for (int a = 1; a < argc; a++)
		if (!tap_find(cases, n, argv[a]))
			return tap_bail_unknown(argv[a], cases, n);
	for (size_t i = 0; i < n; i++) {
		bool chosen = argc < 2;

		for (int a = 1; a < argc && !chosen; a++)
			chosen = strcmp(argv[a], cases[i].name) == 0;
		if (!chosen)
			continue;
		printf("# %s\n", cases[i].name);
		fflush(stdout);
		cases[i].run();
	}
	return tap_done();
}

void tap_put(const char *root, const char *rel, const char *text)
{
	char path[8192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

void tap_mkdir(const char *root, const char *rel)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	(void)mkdir(path, 0755);
}

bool tap_json_has(const struct cJSON *a, const char *s)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, a) {
		if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
			return true;
	}
	return false;
}
