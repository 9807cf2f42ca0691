/* SPDX-License-Identifier: MIT */
/* tap: numbered ok / not ok lines with diagnostics on failure. */
#include "tap.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

static int n_run, n_failed;

bool tap_ok(bool cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	n_run++;
	printf("%s %d - ", cond ? "ok" : "not ok", n_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
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

	if (!r)
		printf("#   got '%s', want '%s'\n", got ? got : "(null)",
		       want ? want : "(null)");
	return r;
}

int tap_done(void)
{
	printf("1..%d\n", n_run);
	if (n_failed)
		printf("# %d of %d failed\n", n_failed, n_run);
	return n_failed ? 1 : 0;
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
