/* SPDX-License-Identifier: MIT */
#include "util/jsonx.h"

#include <stddef.h>

cJSON *jsonx_strv(const char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return cJSON_CreateStringArray(v, (int)n);
}
