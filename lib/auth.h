/* SPDX-License-Identifier: MIT */
/*
 * auth: bearer-token authentication. A presented token is hashed with
 * SHA-256 and compared against every configured digest with CRYPTO_memcmp,
 * without early exit, so neither the token's length nor which tenant matched
 * shows in the timing. Stateless and thread-safe.
 */
#ifndef MCPSD_AUTH_H
#define MCPSD_AUTH_H

#include "config.h"

enum auth_result {
	AUTH_OK = 0,
	AUTH_MISSING, /* no Authorization header, or not a Bearer one */
	AUTH_INVALID, /* a Bearer token that matches no tenant */
};

/*
 * Checks an Authorization header value (may be NULL). On AUTH_OK *tenant
 * points at the tenant's name (borrowed from cfg). With MCP_AUTH=none every
 * request is the tenant "local".
 */
enum auth_result auth_check(const struct config *cfg, const char *header,
                            const char **tenant);

#endif
