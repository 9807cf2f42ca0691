/* SPDX-License-Identifier: MIT */
/*
 * fuzz_warm_state: a kernel's state report, as hostile as the code that
 * wrote it (the "state" object of an X frame, docs/agent-protocol.md). The
 * input is parsed as JSON the way the daemon parses X, and its "state"
 * checked by warm_state_take: the result must be an object whose strings
 * are valid UTF-8 of at most WARM_STATE_TEXT_MAX bytes and whose lists hold
 * at most WARM_STATE_NAMES_MAX entries; warm_state_loaded must not crash.
 * Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fsname.h"
#include "run/warm/warm_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const cJSON *o, int depth)
{
	const cJSON *e;

	if (depth > 4)
		abort();
	if (cJSON_IsString(o)) {
		size_t n = strlen(o->valuestring);

		if (n > WARM_STATE_TEXT_MAX * 3 ||
		    !fsname_utf8_valid(o->valuestring, n))
			abort();
		return;
	}
	if (cJSON_IsArray(o) && cJSON_GetArraySize(o) > 64)
		abort();
	cJSON_ArrayForEach (e, o)
		check(e, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	cJSON *x, *st;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	x = cJSON_ParseWithLength(text, size);
	st = warm_state_take(cJSON_GetObjectItemCaseSensitive(x, "state"));
	if (st && !cJSON_IsObject(st))
		abort();
	if (st)
		check(st, 0);
	(void)warm_state_loaded(st);
	cJSON_Delete(st);
	cJSON_Delete(x);
	free(text);
	return 0;
}
