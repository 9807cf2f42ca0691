/* SPDX-License-Identifier: MIT */
/*
 * oauth_client: the metadata a client registers (RFC 7591 dynamic client
 * registration) or publishes (a Client ID Metadata Document), parsed from
 * hostile JSON into a small validated struct, and written back as the JSON
 * the store keeps and the registration response echoes. Only the fields
 * the server uses are kept; unknown fields are ignored, as RFC 7591 asks.
 * Stateless and thread-safe.
 */
#ifndef MCPSD_OAUTH_CLIENT_H
#define MCPSD_OAUTH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "oauth/oauth_uri.h"

#define OAUTH_CLIENT_MAX_REDIRECTS 8
#define OAUTH_CLIENT_NAME_MAX 100
#define OAUTH_CLIENT_JSON_MAX 16384
#define OAUTH_CLIENT_JSON_DEPTH 8

/* Token endpoint authentication methods the server supports. */
enum oauth_auth_method {
	OAUTH_AUTH_NONE = 0,
	OAUTH_AUTH_SECRET_POST,
	OAUTH_AUTH_SECRET_BASIC,
};

struct oauth_client_meta {
	char *redirect_uris[OAUTH_CLIENT_MAX_REDIRECTS]; /* owned */
	size_t n_redirect;
	enum oauth_auth_method auth_method;
	bool refresh;           /* "refresh_token" among grant_types */
	char *client_name;      /* owned; NULL if absent */
	char *client_uri;       /* owned; NULL if absent */
	char *scope;            /* owned; NULL if absent (informational) */
	char *software_id;      /* owned; NULL if absent */
	char *software_version; /* owned; NULL if absent */
};

/* The RFC 7591 error codes a parse failure maps to. */
#define OAUTH_ERR_REDIRECT "invalid_redirect_uri"
#define OAUTH_ERR_METADATA "invalid_client_metadata"

/*
 * Parses a registration request (cimd_url NULL) or a metadata document
 * fetched from cimd_url, which must then name itself in "client_id" and
 * use token_endpoint_auth_method "none". Redirect URIs must parse and be
 * allowed by pol (NULL: only parse, for metadata read back from the store;
 * the request's redirect URI is checked against the policy of the day). On
 * failure returns -EINVAL (or -ENOMEM) with *error the RFC 7591 error code and
 * err a description for the client; *out is then empty. On success *out must be
 * released with oauth_client_meta_finish.
 */
__attribute__((warn_unused_result)) int
oauth_client_parse(const char *json, size_t len, const char *cimd_url,
                   const struct oauth_uri_policy *pol,
                   struct oauth_client_meta *out, const char **error, char *err,
                   size_t errlen);

/* Frees the fields; the struct may be reused. NULL-safe. */
void oauth_client_meta_finish(struct oauth_client_meta *m);

/*
 * Adds the metadata fields (redirect_uris, token_endpoint_auth_method,
 * grant_types, response_types, client_name, ...) to obj. Returns false when
 * out of memory.
 */
bool oauth_client_meta_to_json(const struct oauth_client_meta *m, cJSON *obj);

/* "none", "client_secret_post" or "client_secret_basic". */
const char *oauth_auth_method_name(enum oauth_auth_method m);

/*
 * Whether the client registered a redirect URI that matches requested
 * (oauth_uri_match); the matching registered one in *which if not NULL.
 */
bool oauth_client_redirect_ok(const struct oauth_client_meta *m,
                              const char *requested, const char **which);

#endif
