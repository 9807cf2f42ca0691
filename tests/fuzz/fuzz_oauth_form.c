/* SPDX-License-Identifier: MIT */
/*
 * fuzz_oauth_form: form bodies and Basic credentials. Whatever parses has
 * at most OAUTH_FORM_MAX_PARAMS parameters with distinct, non-empty names
 * and values without control characters, each within its bound; a failed
 * parse leaves a form that is safe to read and free. The same bytes as a
 * Basic header either decode to a non-empty id within bounds or are
 * refused. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oauth/oauth_form.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n > max)
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oauth_form f;
	char err[300], id[128], secret[128], *hdr;

	oauth_form_init(&f);
	(void)!oauth_form_parse(&f, (const char *)data, size, err, sizeof(err));
	if (f.n > OAUTH_FORM_MAX_PARAMS)
		abort();
	for (size_t i = 0; i < f.n; i++) {
		if (!f.p[i].key[0])
			abort();
		check_text(f.p[i].key, OAUTH_FORM_MAX_KEY);
		check_text(f.p[i].value, OAUTH_FORM_MAX_VALUE);
		for (size_t k = 0; k < i; k++) {
			if (strcmp(f.p[i].key, f.p[k].key) == 0)
				abort();
		}
		if (f.p[i].value[0] &&
		    oauth_form_get(&f, f.p[i].key) != f.p[i].value)
			abort();
	}
	oauth_form_finish(&f);

	hdr = malloc(size + 7);
	if (!hdr)
		return 0;
	memcpy(hdr, "Basic ", 6);
	memcpy(hdr + 6, data, size);
	hdr[size + 6] = '\0';
	switch (oauth_form_basic(hdr, id, sizeof(id), secret, sizeof(secret))) {
	case 1:
		if (!id[0] || strlen(id) >= sizeof(id) ||
		    strlen(secret) >= sizeof(secret))
			abort();
		check_text(id, sizeof(id));
		check_text(secret, sizeof(secret));
		break;
	case 0:
		abort(); /* it starts with "Basic " */
	default:
		if (id[0] || secret[0])
			abort();
	}
	free(hdr);
	return 0;
}
