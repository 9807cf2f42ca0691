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

#endif
