/* SPDX-License-Identifier: MIT */
/*
 * oauth_db: the OAuth tables of the store (store.h) and every query on them:
 * clients, grants (one approval on the consent page: a client, a tenant and
 * a fingerprint of that tenant's API token), authorization codes, and
 * access and refresh tokens. Codes, tokens and client secrets are stored as
 * SHA-256 digests only; a leaked database file gives no usable credential.
 * Deleting a grant deletes its codes and tokens (foreign keys, ON DELETE
 * CASCADE), which is how a grant is revoked.
 *
 * Every function works inside a transaction the caller holds (store_begin),
 * so a flow (redeem a code, issue two tokens) commits or vanishes as one.
 * Errors are negative errno values from the store (logged there); -ENOENT
 * means no such row. Times are Unix seconds.
 */
#ifndef MCPSD_OAUTH_DB_H
#define MCPSD_OAUTH_DB_H

#include <stdbool.h>
#include <stddef.h>

#include "oauth/oauth_uri.h"
#include "store/store.h"

#define OAUTH_DB_HASH_LEN 32     /* SHA-256 */
#define OAUTH_DB_BINDING_LEN 16  /* tenant token fingerprint */
#define OAUTH_DB_GRANT_ID_LEN 32 /* hex characters */

/* Schema version 1 (see store.c's migrations[]). Never edit: add one. */
#define OAUTH_DB_MIGRATION_1                                                   \
	"CREATE TABLE oauth_clients ("                                         \
	"  client_id TEXT PRIMARY KEY,"                                        \
	"  secret_hash BLOB,"                                                  \
	"  auth_method TEXT NOT NULL CHECK (auth_method IN"                    \
	"    ('none', 'client_secret_post', 'client_secret_basic')),"          \
	"  metadata TEXT NOT NULL,"                                            \
	"  is_document INTEGER NOT NULL DEFAULT 0,"                            \
	"  created_at INTEGER NOT NULL,"                                       \
	"  refreshed_at INTEGER NOT NULL"                                      \
	") STRICT;"                                                            \
	"CREATE TABLE oauth_grants ("                                          \
	"  grant_id TEXT PRIMARY KEY,"                                         \
	"  client_id TEXT NOT NULL"                                            \
	"    REFERENCES oauth_clients(client_id) ON DELETE CASCADE,"           \
	"  tenant TEXT NOT NULL,"                                              \
	"  tenant_binding BLOB NOT NULL,"                                      \
	"  scope TEXT NOT NULL,"                                               \
	"  resource TEXT NOT NULL,"                                            \
	"  created_at INTEGER NOT NULL,"                                       \
	"  used_at INTEGER NOT NULL"                                           \
	") STRICT;"                                                            \
	"CREATE INDEX oauth_grants_client ON oauth_grants(client_id);"         \
	"CREATE TABLE oauth_codes ("                                           \
	"  code_hash BLOB PRIMARY KEY,"                                        \
	"  grant_id TEXT NOT NULL"                                             \
	"    REFERENCES oauth_grants(grant_id) ON DELETE CASCADE,"             \
	"  redirect_uri TEXT NOT NULL,"                                        \
	"  redirect_given INTEGER NOT NULL,"                                   \
	"  code_challenge TEXT NOT NULL,"                                      \
	"  expires_at INTEGER NOT NULL,"                                       \
	"  used_at INTEGER"                                                    \
	") STRICT, WITHOUT ROWID;"                                             \
	"CREATE INDEX oauth_codes_grant ON oauth_codes(grant_id);"             \
	"CREATE TABLE oauth_tokens ("                                          \
	"  token_hash BLOB PRIMARY KEY,"                                       \
	"  grant_id TEXT NOT NULL"                                             \
	"    REFERENCES oauth_grants(grant_id) ON DELETE CASCADE,"             \
	"  kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),"          \
	"  expires_at INTEGER NOT NULL,"                                       \
	"  rotated_at INTEGER"                                                 \
	") STRICT, WITHOUT ROWID;"                                             \
	"CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);"           \
	"CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);"

/* The same for PostgreSQL: BYTEA for BLOB, BIGINT for INTEGER. Never edit. */
#define OAUTH_DB_MIGRATION_1_PG                                                \
	"CREATE TABLE oauth_clients ("                                         \
	"  client_id TEXT PRIMARY KEY,"                                        \
	"  secret_hash BYTEA,"                                                 \
	"  auth_method TEXT NOT NULL CHECK (auth_method IN"                    \
	"    ('none', 'client_secret_post', 'client_secret_basic')),"          \
	"  metadata TEXT NOT NULL,"                                            \
	"  is_document BIGINT NOT NULL DEFAULT 0,"                             \
	"  created_at BIGINT NOT NULL,"                                        \
	"  refreshed_at BIGINT NOT NULL"                                       \
	");"                                                                   \
	"CREATE TABLE oauth_grants ("                                          \
	"  grant_id TEXT PRIMARY KEY,"                                         \
	"  client_id TEXT NOT NULL"                                            \
	"    REFERENCES oauth_clients(client_id) ON DELETE CASCADE,"           \
	"  tenant TEXT NOT NULL,"                                              \
	"  tenant_binding BYTEA NOT NULL,"                                     \
	"  scope TEXT NOT NULL,"                                               \
	"  resource TEXT NOT NULL,"                                            \
	"  created_at BIGINT NOT NULL,"                                        \
	"  used_at BIGINT NOT NULL"                                            \
	");"                                                                   \
	"CREATE INDEX oauth_grants_client ON oauth_grants(client_id);"         \
	"CREATE TABLE oauth_codes ("                                           \
	"  code_hash BYTEA PRIMARY KEY,"                                       \
	"  grant_id TEXT NOT NULL"                                             \
	"    REFERENCES oauth_grants(grant_id) ON DELETE CASCADE,"             \
	"  redirect_uri TEXT NOT NULL,"                                        \
	"  redirect_given BIGINT NOT NULL,"                                    \
	"  code_challenge TEXT NOT NULL,"                                      \
	"  expires_at BIGINT NOT NULL,"                                        \
	"  used_at BIGINT"                                                     \
	");"                                                                   \
	"CREATE INDEX oauth_codes_grant ON oauth_codes(grant_id);"             \
	"CREATE TABLE oauth_tokens ("                                          \
	"  token_hash BYTEA PRIMARY KEY,"                                      \
	"  grant_id TEXT NOT NULL"                                             \
	"    REFERENCES oauth_grants(grant_id) ON DELETE CASCADE,"             \
	"  kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),"          \
	"  expires_at BIGINT NOT NULL,"                                        \
	"  rotated_at BIGINT"                                                  \
	");"                                                                   \
	"CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);"           \
	"CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);"

struct oauth_db_client {
	char client_id[OAUTH_URI_MAX + 1];
	bool has_secret;
	unsigned char secret_hash[OAUTH_DB_HASH_LEN];
	const char *auth_method; /* static: "none", "client_secret_post", ... */
	char *metadata;          /* owned JSON text (oauth_client.h fields) */
	bool is_document;        /* a Client ID Metadata Document */
	long long created_at, refreshed_at;
};

struct oauth_db_grant {
	char grant_id[OAUTH_DB_GRANT_ID_LEN + 1];
	char client_id[OAUTH_URI_MAX + 1];
	char tenant[65];
	unsigned char binding[OAUTH_DB_BINDING_LEN];
	char scope[256];
	char resource[512];
	long long created_at, used_at;
};

struct oauth_db_code {
	struct oauth_db_grant grant;
	char redirect_uri[OAUTH_URI_MAX + 1];
	bool redirect_given; /* the authorization request named it */
	char challenge[129];
	long long expires_at;
	bool used_before; /* it had been redeemed (or tried) already */
};

enum oauth_db_kind {
	OAUTH_DB_ACCESS,
	OAUTH_DB_REFRESH,
};

struct oauth_db_token {
	struct oauth_db_grant grant;
	long long expires_at;
	long long rotated_at; /* refresh tokens: 0 until exchanged */
};

/* Frees what oauth_db_client_get allocated. NULL-safe. */
void oauth_db_client_finish(struct oauth_db_client *c);

/* Inserts a client; -EEXIST when the id exists. */
__attribute__((warn_unused_result)) int
oauth_db_client_insert(struct store_tx *tx, const struct oauth_db_client *c);

/* Inserts or replaces a client's metadata (metadata documents). */
__attribute__((warn_unused_result)) int
oauth_db_client_upsert(struct store_tx *tx, const struct oauth_db_client *c);

/* Reads a client; release with oauth_db_client_finish. -ENOENT if none. */
__attribute__((warn_unused_result)) int
oauth_db_client_get(struct store_tx *tx, const char *client_id,
                    struct oauth_db_client *out);

/* The number of clients. */
__attribute__((warn_unused_result)) int
oauth_db_client_count(struct store_tx *tx, long long *n);

/*
 * Deletes up to limit clients without any grant that were registered
 * before `before`, oldest first; *deleted (optional) counts them.
 */
__attribute__((warn_unused_result)) int
oauth_db_clients_prune(struct store_tx *tx, long long before, int limit,
                       long long *deleted);

/* Inserts a grant. */
__attribute__((warn_unused_result)) int
oauth_db_grant_insert(struct store_tx *tx, const struct oauth_db_grant *g);

/* Deletes a grant with its codes and tokens (0 also when absent). */
__attribute__((warn_unused_result)) int
oauth_db_grant_delete(struct store_tx *tx, const char *grant_id);

/* Records that a grant was used (a refresh). */
__attribute__((warn_unused_result)) int
oauth_db_grant_touch(struct store_tx *tx, const char *grant_id, long long now);

/*
 * Deletes every grant for which keep(data, tenant, binding) is false (a
 * tenant whose token was removed or changed); *deleted counts them.
 */
__attribute__((warn_unused_result)) int oauth_db_grants_sweep(
    struct store_tx *tx,
    bool (*keep)(void *data, const char *tenant, const unsigned char *binding),
    void *data, long long *deleted);

/* Calls fn with each tenant that has grants and their number. 0 or -errno. */
typedef void (*oauth_db_count_fn)(void *arg, const char *tenant, long long n);
__attribute__((warn_unused_result)) int
oauth_db_grants_by_tenant(struct store_tx *tx, oauth_db_count_fn fn, void *arg);

/* The number of grants, in all and of one tenant (tenant NULL: all). */
__attribute__((warn_unused_result)) int
oauth_db_grant_count(struct store_tx *tx, const char *tenant, long long *n);

/* Inserts an authorization code (its hash) for a grant. */
__attribute__((warn_unused_result)) int
oauth_db_code_insert(struct store_tx *tx, const unsigned char *hash,
                     const char *grant_id, const char *redirect_uri,
                     bool redirect_given, const char *challenge,
                     long long expires_at);

/*
 * Finds a code with its grant and marks it used at now, so it can never be
 * redeemed again; out->used_before tells whether it already was.
 * -ENOENT when no such code exists.
 */
__attribute__((warn_unused_result)) int
oauth_db_code_take(struct store_tx *tx, const unsigned char *hash,
                   long long now, struct oauth_db_code *out);

/* Inserts a token (its hash). */
__attribute__((warn_unused_result)) int
oauth_db_token_insert(struct store_tx *tx, const unsigned char *hash,
                      const char *grant_id, enum oauth_db_kind kind,
                      long long expires_at);

/* Finds a token of the kind with its grant. -ENOENT if none. */
__attribute__((warn_unused_result)) int
oauth_db_token_get(struct store_tx *tx, const unsigned char *hash,
                   enum oauth_db_kind kind, struct oauth_db_token *out);

/* Marks a refresh token exchanged at now. */
__attribute__((warn_unused_result)) int
oauth_db_token_rotate(struct store_tx *tx, const unsigned char *hash,
                      long long now);

/* Deletes one token (0 also when absent). */
__attribute__((warn_unused_result)) int
oauth_db_token_delete(struct store_tx *tx, const unsigned char *hash);

/*
 * Deletes what has expired, at most max rows of each kind: tokens past
 * their time, codes past theirs, and grants left with neither a token nor
 * a code. *deleted (optional) counts the rows; *full (optional) says
 * whether a kind reached max (there may be more).
 */
__attribute__((warn_unused_result)) int
oauth_db_purge(struct store_tx *tx, long long now, long long max,
               long long *deleted, bool *full);

#endif
