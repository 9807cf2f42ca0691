/* SPDX-License-Identifier: MIT */
/*
 * tap: a minimal Test Anything Protocol emitter for the unit tests. Each
 * check evaluates its arguments exactly once. Names and diagnostic values
 * are escaped (tap_escape), so text from the code under test cannot start a
 * line of its own or add a SKIP/TODO directive. Single-threaded: call the
 * checks from the test's main thread only.
 */
#ifndef MCPSD_TAP_H
#define MCPSD_TAP_H

#include <stdbool.h>
#include <stddef.h>

bool tap_ok(bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool tap_is_int(long long got, long long want, const char *file, int line,
                const char *name);
bool tap_is_str(const char *got, const char *want, const char *file, int line,
                const char *name);
/* Prints the plan and returns the exit status (0 if all passed). */
int tap_done(void);

/* Writes s (NULL: "(null)") into out with every control character, '\\'
 * and '#' escaped (\n, \r, \t, \\, \xNN; '#' is \x23), so the result is one
 * TAP line that no TAP reader takes a directive from. Writes at most
 * outlen - 1 bytes and a NUL (never half an escape); returns the length the
 * whole escaped text needs, without the NUL. */
size_t tap_escape(const char *s, char *out, size_t outlen);

/* A test case that can run alone: `test_x NAME...` runs only those cases,
 * `test_x --list` prints the names, no argument runs them all. */
struct tap_case {
	const char *name;
	void (*run)(void);
};
/* Runs the cases argv selects (see struct tap_case) and returns the exit
 * status: tap_done()'s, or 2 with a "Bail out!" line naming the cases when
 * an argument names none. */
int tap_run_cases(int argc, char **argv, const struct tap_case *cases,
                  size_t n);

/* Fixtures: writes text to root/rel; makes the directory root/rel.
 * Failures show up in the checks that follow. */
void tap_put(const char *root, const char *rel, const char *text);
void tap_mkdir(const char *root, const char *rel);

/* Whether the JSON array a (cJSON; NULL: no) holds the string s. */
struct cJSON;
bool tap_json_has(const struct cJSON *a, const char *s);

#define ok(cond, ...) tap_ok((cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, name)                                                \
	tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__,    \
	           (name))
#define is_str(got, want, name)                                                \
	tap_is_str((got), (want), __FILE__, __LINE__, (name))

#endif
