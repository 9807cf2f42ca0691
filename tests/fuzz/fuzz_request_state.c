/* SPDX-License-Identifier: MIT */
/*
 * fuzz_request_state: the requestState a client sends back. Any text is opened
 * under a fixed key: it must be refused (with a message) unless it is
 * exactly what request_state_seal() made, and a payload built from the input is
 * sealed and must open to the same JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/request_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char secret[] = "fuzz-secret-0123456789abcdef";
	unsigned char key[REQUEST_STATE_KEY_LEN];
	char err[512] = "", *sealed, *a, *b;
	cJSON *p = NULL, *q;
	int r;

	request_state_key(secret, sizeof(secret) - 1, key);
	r = request_state_open(key, (const char *)data, size, 0, &p, err,
	                       sizeof(err));
	if (r < 0 && (p || !err[0]))
		abort();
	cJSON_Delete(p);

	/* Whatever it is, as a string member: sealed, it opens intact. */
	p = cJSON_CreateObject();
	a = malloc(size + 1);
	if (!p || !a) {
		cJSON_Delete(p);
		free(a);
		return 0;
	}
	memcpy(a, data, size);
	a[size] = '\0';
	cJSON_AddStringToObject(p, "s", a);
	free(a);
	sealed = request_state_seal(key, p, 100);
	if (sealed) {
		if (request_state_open(key, sealed, strlen(sealed), 99, &q, err,
		                       sizeof(err)) < 0)
			abort();
		a = cJSON_PrintUnformatted(p);
		b = cJSON_PrintUnformatted(q);
		if (a && b && strcmp(a, b) != 0)
			abort();
		cJSON_free(a);
		cJSON_free(b);
		cJSON_Delete(q);
		free(sealed);
	}
	cJSON_Delete(p);
	return 0;
}
