/* SPDX-License-Identifier: MIT */
/*
 * auth: who a request is. A bearer token is hashed with SHA-256 and compared
 * against every configured digest with CRYPTO_memcmp, without early exit, so
 * neither the token's length nor which tenant matched shows in the timing.
 * A token that matches no static one may be offered to a hook (OAuth access
 * tokens). The answer is a value the request owns: nothing in it points
 * into the configuration or the hook's state. Stateless and thread-safe; a
 * hook must be thread-safe too.
 */
#ifndef MCPSD_AUTH_H
#define MCPSD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

#define AUTH_TENANT_MAX 64   /* config tenant names are [a-z0-9_.-]{1,64} */
#define AUTH_SCOPES_MAX 255  /* space-separated scope names */
#define AUTH_CLIENT_MAX 2000 /* an OAuth client_id (a URL with CIMD) */

enum auth_status {
	AUTH_OK = 0,
	AUTH_MISSING,     /* no Authorization header, or not a Bearer one */
	AUTH_INVALID,     /* a token that matches nothing, or was refused */
	AUTH_SCOPE,       /* a valid token without the scope that is needed */
	AUTH_UNAVAILABLE, /* the token cannot be checked now (hook's store) */
};

enum auth_method {
	AUTH_METHOD_NONE = 0, /* MCP_AUTH=none: every request is "local" */
	AUTH_METHOD_STATIC,   /* one of the configured API tokens */
	AUTH_METHOD_OAUTH,    /* an access token the hook accepted */
};

/* Who a request is. Plain data: copy it, keep it, no destructor. */
struct auth_result {
	enum auth_method method;
	char tenant[AUTH_TENANT_MAX + 1];
	/*
	 * Granted scopes, space-separated. Empty for NONE and STATIC, which
	 * may do everything (see auth_has_scope).
	 */
	char scopes[AUTH_SCOPES_MAX + 1];
	char fingerprint[13]; /* of the token, for logs; "" for NONE */
	/* OAUTH: the client_id the token was issued to; "" otherwise */
	char client[AUTH_CLIENT_MAX + 1];
};

/*
 * Checks bearer tokens that matched no static token: OAuth access tokens.
 * token is the text after "Bearer " (len bytes, not NUL-terminated). On
 * AUTH_OK fill out->tenant (non-empty, at most AUTH_TENANT_MAX bytes),
 * out->scopes and out->fingerprint; auth_check sets out->method. Otherwise
 * return AUTH_INVALID (unknown, expired, revoked, another audience),
 * AUTH_SCOPE or AUTH_UNAVAILABLE. Called on connection threads.
 */
typedef enum auth_status (*auth_verify_fn)(void *data, const char *token,
                                           size_t len, struct auth_result *out);

/*
 * Optional: the WWW-Authenticate value for a refusal with st (AUTH_MISSING,
 * AUTH_INVALID or AUTH_SCOPE) on path, e.g. with resource_metadata (RFC
 * 9728). presented says whether a token was sent. Caller frees; NULL for
 * the default challenge.
 */
typedef char *(*auth_challenge_fn)(void *data, const char *path,
                                   enum auth_status st, bool presented);

struct auth_hook {
	auth_verify_fn verify;
	auth_challenge_fn challenge;
	void *data;
};

/*
 * Checks an Authorization header value (may be NULL) and fills *out, which
 * is cleared first and meaningful only on AUTH_OK. hook may be NULL (static
 * tokens only). With MCP_AUTH=none every request is the tenant "local".
 */
enum auth_status auth_check(const struct config *cfg,
                            const struct auth_hook *hook, const char *header,
                            struct auth_result *out);

/*
 * Whether r may act under scope: always for NONE and STATIC, for OAUTH
 * when scope is one of the words of r->scopes. A NULL or empty scope is
 * always granted.
 */
bool auth_has_scope(const struct auth_result *r, const char *scope);

/* "none", "static token" or "oauth": for logs. */
const char *auth_method_name(enum auth_method m);

#endif
