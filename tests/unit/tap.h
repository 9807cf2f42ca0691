/* SPDX-License-Identifier: MIT */
/*
 * tap: a minimal Test Anything Protocol emitter for the unit tests. Each
 * check evaluates its arguments exactly once.
 */
#ifndef MCPSD_TAP_H
#define MCPSD_TAP_H

#include <stdbool.h>

bool tap_ok(bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool tap_is_int(long long got, long long want, const char *file, int line,
                const char *name);
bool tap_is_str(const char *got, const char *want, const char *file, int line,
                const char *name);
/* Prints the plan and returns the exit status (0 if all passed). */
int tap_done(void);

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
