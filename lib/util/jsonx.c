/* SPDX-License-Identifier: MIT */
#include "util/jsonx.h"

#include <stddef.h>
#include <string.h>

cJSON *jsonx_strv(const char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return cJSON_CreateStringArray(v, (int)n);
}

cJSON *jsonx_at(const cJSON *o, const char *path)
{
	cJSON *cur = NULL;
	char key[64];

	while (o && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		cur = cJSON_GetObjectItemCaseSensitive(o, key);
		o = cur;
		path += n;
		if (*path == '.')
			path++;
	}
	return cur;
}
