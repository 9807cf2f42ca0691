/* SPDX-License-Identifier: MIT */
/*
 * jsonx: small additions to cJSON used across the daemon. Stateless and
 * thread-safe.
 */
#ifndef MCPSD_UTIL_JSONX_H
#define MCPSD_UTIL_JSONX_H

#include <cjson/cJSON.h>

/*
 * A JSON array of the strings of v, a NULL-terminated list (cJSON's own
 * cJSON_CreateStringArray takes a count). Caller owns; NULL when out of
 * memory.
 */
cJSON *jsonx_strv(const char *const *v);

/*
 * The item at a dotted path of object keys in o ("HostConfig.Memory"), or
 * NULL when a key is missing or longer than 63 bytes, or the path is empty.
 * Borrowed from o.
 */
cJSON *jsonx_at(const cJSON *o, const char *path);

#endif
