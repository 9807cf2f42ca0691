/* SPDX-License-Identifier: MIT */
/*
 * oauth_internal: what the files of the oauth module share and nothing
 * else does: the server struct, pending consent requests, and helpers.
 * oauth.c (creation, metadata, registration, token checks, purging),
 * oauth_authz.c (the authorization endpoint and the consent form) and
 * oauth_token.c (the token and revocation endpoints). o->mu guards the
 * pending table; everything else in struct oauth is set at creation and
 * read-only afterwards (the rate limiters and the store lock themselves).
 */
#ifndef MCPSD_OAUTH_INTERNAL_H
#define MCPSD_OAUTH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "oauth/oauth.h"
#include "oauth/oauth_client.h"
#include "oauth/oauth_db.h"
#include "oauth/oauth_uri.h"
#include "util/ratelimit.h"

#define OAUTH_MAX_PENDING 1024
/*
 * Consent pages waiting from one source (an IPv4 address or an IPv6 /64):
 * more get 429, so that a flood from one source cannot push another
 * person's open page out of the table. When the table is full anyway
 * (many sources), the oldest entry of the source holding the most goes.
 */
#define OAUTH_PENDING_PER_SOURCE 64
#define OAUTH_SOURCE_MAX 64 /* the text of a source key, with its NUL */
#define OAUTH_PENDING_TTL_MS (15 * 60 * 1000)
#define OAUTH_MAX_ATTEMPTS 5 /* wrong tokens on one consent page */
#define OAUTH_MAX_AUDIENCES 6
#define OAUTH_SECRET_HEX 64 /* 32 random bytes */
#define OAUTH_TOKEN_MAX 128

struct oauth_tenant {
	const char *name;            /* borrowed from the configuration */
	const unsigned char *digest; /* SHA-256 of the tenant's token */
	unsigned char binding[OAUTH_DB_BINDING_LEN];
};

/* An authorization request waiting for its consent form. */
struct oauth_pending {
	bool used;
	char id[33];      /* hex, in the form */
	char csrf[65];    /* hex, in the form */
	char browser[33]; /* hex, in the cookie */
	long long created_ms;
	unsigned attempts;
	char source[OAUTH_SOURCE_MAX]; /* who asked: oauth_source_key */
	char *client_id, *client_name, *redirect_uri, *state, *challenge;
	char *resource, *scope;
	bool redirect_given, is_document;
};

struct oauth {
	const struct config *cfg;
	struct store *st;
	char resource[520]; /* the canonical resource: <base>/mcp */
	char *audiences[OAUTH_MAX_AUDIENCES]; /* resources accepted */
	const char *cookie_name;
	struct oauth_uri_policy policy;
	struct oauth_tenant *tenants;
	size_t n_tenants;
	struct ratelimit *reg_addr, *reg_all;
	struct ratelimit *consent_addr;

	pthread_mutex_t mu;
	struct oauth_pending pending[OAUTH_MAX_PENDING];
	long long pending_warned_ms; /* last "too many pages" warning */
};

/* SHA-256 of n bytes at s. */
void oauth_hash(const void *s, size_t n, unsigned char out[OAUTH_DB_HASH_LEN]);

/* prefix followed by 64 random hex characters into out. 0 or -EIO. */
__attribute__((warn_unused_result)) int
oauth_new_secret(const char *prefix, char *out, size_t outlen);

/* Unix time. */
long long oauth_now(void);

/* Whether a resource indicator names this server. */
bool oauth_audience_ok(const struct oauth *o, const char *resource);

/*
 * The configured tenant whose token has the given binding, or NULL when
 * the tenant is gone or its token changed.
 */
const struct oauth_tenant *oauth_tenant_bound(const struct oauth *o,
                                              const char *tenant,
                                              const unsigned char *binding);

/*
 * The tenant whose token this is, compared in constant time against every
 * configured token; NULL when none.
 */
const struct oauth_tenant *oauth_tenant_of_token(const struct oauth *o,
                                                 const char *token);

/* A JSON error body {"error", "error_description"} with the status. */
void oauth_json_error(struct oauth_resp *r, unsigned status, const char *error,
                      const char *desc);

/* A JSON body that takes ownership of obj whatever the result. */
void oauth_json(struct oauth_resp *r, unsigned status, void *obj);

/* An HTML error page with the status. */
void oauth_error_page(struct oauth_resp *r, unsigned status, const char *title,
                      const char *what, const char *next);

/*
 * Whether a string is 1..max characters of VSCHAR (0x20-0x7e), the
 * alphabet RFC 6749 gives state, codes, tokens and client ids.
 */
bool oauth_vschar(const char *s, size_t max);

/*
 * The key a request's per-source limits count it under: its client
 * address, an IPv6 one by its /64 (netaddr_source_key); "" when unknown.
 */
void oauth_source_key(const struct oauth_req *rq, char out[OAUTH_SOURCE_MAX]);

/*
 * Frees a pending entry's strings and marks it unused (oauth.c: the table
 * is the server's). Lock held, or the server being destroyed.
 */
void oauth_pending_clear(struct oauth_pending *p);

#endif
