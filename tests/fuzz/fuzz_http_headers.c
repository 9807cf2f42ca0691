/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_headers: the parsers this project applies to request headers
 * (Range, Accept, Content-Type, Origin/Host allow-lists, Authorization).
 * The first byte picks the parser; the rest is the header value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char p1[] = "http://localhost:*", p2[] = "https://claude.ai";
	static char *pats[] = {p1, p2, NULL};
	static struct config_token tok = {.tenant = (char *)(uintptr_t) "t"};
	static struct config cfg = {.tokens = &tok, .n_tokens = 1};
	char *s;
	uint64_t a, b;
	const char *tenant;
	int r;

	if (size < 1)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 5) {
	case 0: {
		uint64_t fsize = 1000;

		r = http_parse_range(s, fsize, &a, &b);
		if (r == 1 && (a > b || b >= fsize))
			abort();
		break;
	}
	case 1:
		(void)http_accepts(s, "text/event-stream");
		break;
	case 2:
		(void)http_media_type_is(s, "application/json");
		break;
	case 3:
		(void)http_allowed(s, pats, true);
		(void)http_allowed(s, pats, false);
		break;
	case 4:
		if (auth_check(&cfg, s, &tenant) == AUTH_OK && !tenant)
			abort();
		break;
	}
	free(s);
	return 0;
}
