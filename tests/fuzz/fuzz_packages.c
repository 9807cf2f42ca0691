/* SPDX-License-Identifier: MIT */
/*
 * fuzz_packages: run_code's package specs (from the model) and an
 * installer's output (from a box that downloaded from the internet). The
 * first byte picks pip, npm or cran and which of the two the rest is. A spec
 * that passes is at most PACKAGES_SPEC_MAX bytes, starts with a letter,
 * digit or '@' (never '-': no option reaches the installer) and has no
 * character of a URL, path, shell or space; its cache key is bounded and
 * is a name (no segment "." or "..", no '/' but an npm scope's), and it does
 * not end like an archive (.tgz, .whl, ...: installers read those as local
 * files); a cran spec has only ASCII letters, digits, '.', '-' and one '@'
 * and starts with a letter. The first error line of an output, the conflicts
 * pip reports in it, and the line packages_diagnose quotes are bounded and have
 * no control characters. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "run/packages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const char *manager, const char *s)
{
	char err[256], name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];
	size_t n = strlen(s);

	if (packages_check_spec(manager, s, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return;
	}
	if (n == 0 || n > PACKAGES_SPEC_MAX || s[0] == '-')
		abort();
	if (!(s[0] == '@' || (s[0] >= '0' && s[0] <= '9') ||
	      (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		abort();
	if (strpbrk(s, " \t\r\n:;#?&$`'\"\\()%/") &&
	    !(strcmp(manager, "npm") == 0 && s[0] == '@' &&
	      strchr(s, '/') == strrchr(s, '/') &&
	      !strpbrk(s, " \t\r\n:;#?&$`'\"\\()%")))
		abort();
	if ((n >= 4 && strcasecmp(s + n - 4, ".tgz") == 0) ||
	    (n >= 4 && strcasecmp(s + n - 4, ".whl") == 0) ||
	    (n >= 4 && strcasecmp(s + n - 4, ".tar") == 0) ||
	    (n >= 7 && strcasecmp(s + n - 7, ".tar.gz") == 0))
		abort();
	if (strcmp(manager, "cran") == 0 &&
	    (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')) ||
	     strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	               "0123456789.-@") != n ||
	     strchr(s, '@') != strrchr(s, '@')))
		abort();
	(void)packages_spec_key(manager, s, name, sizeof(name), pin,
	                        sizeof(pin));
	if (strlen(name) > PACKAGES_SPEC_MAX || strlen(pin) > PACKAGES_SPEC_MAX)
		abort();
	/* Every segment of the key a plain name: never ".", ".." or empty. */
	for (const char *seg = name; seg;) {
		const char *slash = strchr(seg, '/');
		size_t len = slash ? (size_t)(slash - seg) : strlen(seg);

		if (len == 0 || (len <= 2 && strncmp(seg, "..", len) == 0))
			abort();
		seg = slash ? slash + 1 : NULL;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *manager;
	char *text, first[300];

	if (size < 1)
		return 0;
	manager = data[0] & 4 ? "cran" : data[0] & 1 ? "npm" : "pip";
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (data[0] & 2) {
		cJSON *a = cJSON_CreateArray();

		packages_conflicts(text, a);
		if (cJSON_GetArraySize(a) > 4)
			abort();
		for (int i = 0; i < cJSON_GetArraySize(a); i++) {
			const char *l =
			    cJSON_GetStringValue(cJSON_GetArrayItem(a, i));

			if (!l || strlen(l) >= 300)
				abort();
			for (; *l; l++)
				if ((unsigned char)*l < 0x20 || *l == 0x7f)
					abort();
		}
		cJSON_Delete(a);
		packages_first_error(text, first, sizeof(first));
		if (strlen(first) >= sizeof(first))
			abort();
		for (size_t i = 0; first[i]; i++)
			if ((unsigned char)first[i] < 0x20 || first[i] == 0x7f)
				abort();
		/* "first" again, smaller than most lines: it must be cut. */
		switch (packages_diagnose(text, first, 40)) {
		case PACKAGES_FAIL_OTHER:
		case PACKAGES_FAIL_CERT:
		case PACKAGES_FAIL_UNREACHABLE:
		case PACKAGES_FAIL_TIMEOUT:
		case PACKAGES_FAIL_HTTP:
			break;
		default:
			abort();
		}
		if (strlen(first) >= 40)
			abort();
		for (size_t i = 0; first[i]; i++)
			if ((unsigned char)first[i] < 0x20 || first[i] == 0x7f)
				abort();
	} else {
		check_spec(manager, text);
	}
	free(text);
	return 0;
}
