/* SPDX-License-Identifier: MIT */
/*
 * oauth: the OAuth 2.1 authorization server inside the daemon, and the
 * protected-resource side of every MCP request. It owns the metadata
 * documents (RFC 8414, RFC 9728), dynamic client registration (RFC 7591),
 * the authorization endpoint with its consent page (PKCE S256 only, iss in
 * every response, RFC 9207), the token endpoint (authorization code and
 * refresh token grants; refresh tokens rotate, and a rotated one presented
 * again revokes its grant), revocation (RFC 7009), Client ID Metadata
 * Documents when the operator turns them on, and the check of access
 * tokens on MCP requests, audience (RFC 8707) included. oauth_http.c puts
 * it on the HTTP front.
 *
 * A grant belongs to the tenant whose static API token approved it on the
 * consent page, and carries a fingerprint of that token: an access token
 * is accepted only while the tenant's configured token is the one that
 * approved it, so rotating or removing a tenant's token revokes its grants.
 *
 * It knows nothing of HTTP: each endpoint reads a struct oauth_req and
 * fills a struct oauth_resp, which http.c's routes translate. Durable state
 * is in the store (oauth_db.h); pending consent pages, whose loss costs a
 * person one reload, are kept in memory. Thread-safe: any thread may call
 * any function once oauth_create has returned.
 */
#ifndef MCPSD_OAUTH_H
#define MCPSD_OAUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "oauth/oauth_form.h"
#include "store/store.h"
#include "util/cron.h"

/* The one scope: using this server's MCP endpoint. */
#define OAUTH_SCOPE "mcp"

/* Prefixes that mark tokens this server issued. */
#define OAUTH_ACCESS_PREFIX "mcpsd_at_"
#define OAUTH_REFRESH_PREFIX "mcpsd_rt_"

/* The form field, paths and endpoints the HTTP layer routes. */
#define OAUTH_PATH_AUTHORIZE "/authorize"
#define OAUTH_PATH_TOKEN "/token"
#define OAUTH_PATH_REGISTER "/register"
#define OAUTH_PATH_REVOKE "/revoke"
#define OAUTH_PATH_AS_METADATA "/.well-known/oauth-authorization-server"
#define OAUTH_PATH_OIDC_METADATA "/.well-known/openid-configuration"
#define OAUTH_PATH_RESOURCE_METADATA "/.well-known/oauth-protected-resource"

/* Largest body the registration, token and revocation endpoints read. */
#define OAUTH_MAX_BODY 16384

struct oauth;

/* What the HTTP layer read from a request. Every pointer is borrowed. */
struct oauth_req {
	const struct oauth_form *query; /* query parameters; may be NULL */
	const char *query_error;        /* why the query could not be parsed */
	const char *body;               /* POST body (form or JSON) */
	size_t body_len;
	const char *authorization; /* Authorization header */
	const char *cookie;        /* Cookie header */
	const char *origin;        /* Origin header */
	const char *client_addr;   /* client address, for rate limits */
};

/* What to answer. Release with oauth_resp_finish. */
struct oauth_resp {
	unsigned status;
	const char *content_type;  /* static */
	const char *cache_control; /* static; "no-store" unless cacheable */
	char *body;                /* owned */
	char *location;            /* owned; for 303 redirects */
	char *set_cookie;          /* owned */
	char *www_authenticate;    /* owned */
	unsigned retry_after;      /* seconds; 0 for none */
	bool page; /* an HTML page: add oauth_page_csp() and no framing */
};

void oauth_resp_finish(struct oauth_resp *r);

/*
 * Creates the server for cfg (which must have cfg->oauth set) on the store,
 * and drops grants whose tenant's token changed or went away since the last
 * start (logged). cfg and st are borrowed and must outlive it. -ENOMEM,
 * -EIO (the store) with a message in err.
 */
__attribute__((warn_unused_result)) int oauth_create(const struct config *cfg,
                                                     struct store *st,
                                                     struct oauth **out,
                                                     char *err, size_t errlen);

/* Frees. NULL-safe. */
void oauth_destroy(struct oauth *o);

/* The authorization server metadata (RFC 8414), as JSON. */
void oauth_metadata(struct oauth *o, struct oauth_resp *out);

/*
 * The protected resource metadata (RFC 9728) for the request path after
 * OAUTH_PATH_RESOURCE_METADATA ("", "/mcp", "/sse"); 404 for others.
 */
void oauth_resource_metadata(struct oauth *o, const char *suffix,
                             struct oauth_resp *out);

/* POST /register: a JSON registration request. */
void oauth_register(struct oauth *o, const struct oauth_req *rq,
                    struct oauth_resp *out);

/* GET /authorize: validates the request and shows the consent page. */
void oauth_authorize(struct oauth *o, const struct oauth_req *rq,
                     struct oauth_resp *out);

/* POST /authorize: the consent form (approve or deny). */
void oauth_consent(struct oauth *o, const struct oauth_req *rq,
                   struct oauth_resp *out);

/* POST /token: a form with grant_type authorization_code or refresh_token. */
void oauth_token(struct oauth *o, const struct oauth_req *rq,
                 struct oauth_resp *out);

/* POST /revoke: a form with the token to revoke. */
void oauth_revoke(struct oauth *o, const struct oauth_req *rq,
                  struct oauth_resp *out);

enum oauth_verdict {
	OAUTH_TOKEN_OK = 0,
	OAUTH_TOKEN_NOT_OURS,    /* not a token this server issues */
	OAUTH_TOKEN_INVALID,     /* unknown, expired, revoked, other audience */
	OAUTH_TOKEN_SCOPE,       /* valid, without the scope MCP needs */
	OAUTH_TOKEN_UNAVAILABLE, /* the store failed: try again later */
};

/*
 * Checks an access token presented to the MCP endpoint (the bytes after
 * "Bearer "). On OAUTH_TOKEN_OK *tenant is the tenant's name, borrowed from
 * the configuration. o may be NULL (OAuth off): OAUTH_TOKEN_NOT_OURS.
 */
enum oauth_verdict oauth_verify(struct oauth *o, const char *token, size_t len,
                                const char **tenant);

/*
 * oauth_verify, and on OAUTH_TOKEN_OK the client_id the token was issued
 * to in client (size n; "" otherwise), for the audit trail.
 */
enum oauth_verdict oauth_verify_client(struct oauth *o, const char *token,
                                       size_t len, const char **tenant,
                                       char *client, size_t n);

/*
 * The WWW-Authenticate value for a refusal on the protected path (e.g.
 * "/mcp"): Bearer with resource_metadata and scope, plus error
 * "invalid_token" (v INVALID or NOT_OURS with a token presented) or
 * "insufficient_scope" (v SCOPE). presented says whether a token was sent.
 * Caller frees; NULL when out of memory.
 */
char *oauth_challenge(struct oauth *o, const char *path, enum oauth_verdict v,
                      bool presented);

/*
 * Removes expired codes, tokens and grants and prunes clients never used
 * for a week, all of them, in batches of a transaction each. Returns the
 * rows removed, or a negative errno.
 */
long long oauth_purge(struct oauth *o);

/*
 * oauth_purge as a housekeeping job (cron.h), every OAUTH_PURGE_MS, with a
 * budget: batches until deadline_ms; CRON_MORE when rows are left.
 */
#define OAUTH_PURGE_MS (10 * 60 * 1000)
enum cron_next oauth_job_purge(void *o, long long deadline_ms);

struct stats;
/* Registers mcpsd_oauth_grants{tenant} (grants in the store) with s. */
void oauth_set_stats(struct oauth *o, struct stats *s);

#endif
