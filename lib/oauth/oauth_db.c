/* SPDX-License-Identifier: MIT */
/*
 * oauth_db: each query is a constant string, so the store prepares it once
 * and reuses it. Rows are copied into fixed-size fields; a value longer
 * than its field (which the code that writes rows never produces) is
 * treated as a damaged row rather than cut.
 */
#include "oauth/oauth_db.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static const char *method_of(const char *s)
{
	static const char *const known[] = {"none", "client_secret_post",
	                                    "client_secret_basic"};

	for (size_t i = 0; s && i < sizeof(known) / sizeof(known[0]); i++) {
		if (strcmp(s, known[i]) == 0)
			return known[i];
	}
	return NULL;
}

/* Copies a text column into a fixed field; false when it does not fit. */
static bool col_text(struct store_stmt *s, int col, char *dst, size_t size)
{
	const char *t = store_col_text(s, col);
	size_t n = t ? strlen(t) : 0;

	if (!t || n >= size) {
		dst[0] = '\0';
		return t == NULL && size > 0;
	}
	memcpy(dst, t, n + 1);
	return true;
}

static bool col_blob(struct store_stmt *s, int col, unsigned char *dst,
                     size_t n)
{
	size_t len;
	const void *b = store_col_blob(s, col, &len);

	if (!b || len != n)
		return false;
	memcpy(dst, b, n);
	return true;
}

static const char *kind_name(enum oauth_db_kind k)
{
	return k == OAUTH_DB_ACCESS ? "access" : "refresh";
}

void oauth_db_client_finish(struct oauth_db_client *c)
{
	if (!c)
		return;
	free(c->metadata);
	c->metadata = NULL;
}

static int client_write(struct store_tx *tx, const struct oauth_db_client *c,
                        const char *sql)
{
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_text(s, 1, c->client_id);
	if (c->has_secret)
		store_bind_blob(s, 2, c->secret_hash, OAUTH_DB_HASH_LEN);
	else
		store_bind_null(s, 2);
	store_bind_text(s, 3, c->auth_method);
	store_bind_text(s, 4, c->metadata);
	store_bind_int64(s, 5, c->is_document);
	store_bind_int64(s, 6, c->created_at);
	store_bind_int64(s, 7, c->refreshed_at);
	return store_run(tx, s);
}

int oauth_db_client_insert(struct store_tx *tx, const struct oauth_db_client *c)
{
	static const char sql[] =
	    "INSERT INTO oauth_clients (client_id, secret_hash, auth_method, "
	    "metadata, is_document, created_at, refreshed_at) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

	return client_write(tx, c, sql);
}

int oauth_db_client_upsert(struct store_tx *tx, const struct oauth_db_client *c)
{
	static const char sql[] =
	    "INSERT INTO oauth_clients (client_id, secret_hash, auth_method, "
	    "metadata, is_document, created_at, refreshed_at) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
	    "ON CONFLICT (client_id) DO UPDATE SET secret_hash = "
	    "excluded.secret_hash, auth_method = excluded.auth_method, "
	    "metadata = excluded.metadata, is_document = excluded.is_document, "
	    "refreshed_at = excluded.refreshed_at";

	return client_write(tx, c, sql);
}

int oauth_db_client_get(struct store_tx *tx, const char *client_id,
                        struct oauth_db_client *out)
{
	static const char sql[] =
	    "SELECT client_id, secret_hash, auth_method, metadata, "
	    "is_document, created_at, refreshed_at FROM oauth_clients "
	    "WHERE client_id = ?1";
	struct store_stmt *s = store_stmt(tx, sql);
	const char *meta;
	int r;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EIO;
	store_bind_text(s, 1, client_id);
	r = store_step(tx, s);
	if (r <= 0)
		return r == 0 ? -ENOENT : r;
	out->has_secret = !store_col_null(s, 1);
	out->auth_method = method_of(store_col_text(s, 2));
	meta = store_col_text(s, 3);
	if (!col_text(s, 0, out->client_id, sizeof(out->client_id)) ||
	    (out->has_secret &&
	     !col_blob(s, 1, out->secret_hash, OAUTH_DB_HASH_LEN)) ||
	    !out->auth_method || !meta) {
		log_warnx("store: client row %.40s is damaged; ignoring it",
		          client_id);
		return -ENOENT;
	}
	out->metadata = strdup(meta);
	if (!out->metadata)
		return -ENOMEM;
	out->is_document = store_col_int64(s, 4) != 0;
	out->created_at = store_col_int64(s, 5);
	out->refreshed_at = store_col_int64(s, 6);
	return 0;
}

int oauth_db_client_count(struct store_tx *tx, long long *n)
{
	static const char sql[] = "SELECT count(*) FROM oauth_clients";
	struct store_stmt *s = store_stmt(tx, sql);
	int r;

	*n = 0;
	r = store_step(tx, s);
	if (r == 1)
		*n = store_col_int64(s, 0);
	return r < 0 ? r : 0;
}

int oauth_db_clients_prune(struct store_tx *tx, long long before, int limit,
                           long long *deleted)
{
	static const char sql[] =
	    "DELETE FROM oauth_clients WHERE client_id IN ("
	    "SELECT c.client_id FROM oauth_clients c WHERE c.created_at < ?1 "
	    "AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE "
	    "g.client_id = c.client_id) ORDER BY c.created_at LIMIT ?2)";
	struct store_stmt *s = store_stmt(tx, sql);
	int r;

	if (deleted)
		*deleted = 0;
	if (!s)
		return -EIO;
	store_bind_int64(s, 1, before);
	store_bind_int64(s, 2, limit);
	r = store_run(tx, s);
	if (r == 0 && deleted)
		*deleted = store_changes(tx);
	return r;
}

int oauth_db_grant_insert(struct store_tx *tx, const struct oauth_db_grant *g)
{
	static const char sql[] =
	    "INSERT INTO oauth_grants (grant_id, client_id, tenant, "
	    "tenant_binding, scope, resource, created_at, used_at) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_text(s, 1, g->grant_id);
	store_bind_text(s, 2, g->client_id);
	store_bind_text(s, 3, g->tenant);
	store_bind_blob(s, 4, g->binding, OAUTH_DB_BINDING_LEN);
	store_bind_text(s, 5, g->scope);
	store_bind_text(s, 6, g->resource);
	store_bind_int64(s, 7, g->created_at);
	store_bind_int64(s, 8, g->used_at);
	return store_run(tx, s);
}

int oauth_db_grant_delete(struct store_tx *tx, const char *grant_id)
{
	static const char sql[] =
	    "DELETE FROM oauth_grants WHERE grant_id = ?1";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_text(s, 1, grant_id);
	return store_run(tx, s);
}

int oauth_db_grant_touch(struct store_tx *tx, const char *grant_id,
                         long long now)
{
	static const char sql[] =
	    "UPDATE oauth_grants SET used_at = ?2 WHERE grant_id = ?1";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_text(s, 1, grant_id);
	store_bind_int64(s, 2, now);
	return store_run(tx, s);
}

int oauth_db_grants_sweep(struct store_tx *tx,
                          bool (*keep)(void *data, const char *tenant,
                                       const unsigned char *binding),
                          void *data, long long *deleted)
{
	static const char sql_list[] =
	    "SELECT grant_id, tenant, tenant_binding FROM oauth_grants";
	/* A temporary list: rows are not deleted while being read. */
	char(*doomed)[OAUTH_DB_GRANT_ID_LEN + 1] = NULL;
	size_t n = 0, cap = 0;
	struct store_stmt *s = store_stmt(tx, sql_list);
	int r;

	*deleted = 0;
	if (!s)
		return -EIO;
	while ((r = store_step(tx, s)) == 1) {
		char id[OAUTH_DB_GRANT_ID_LEN + 1], tenant[65];
		unsigned char b[OAUTH_DB_BINDING_LEN];
		bool ok = col_text(s, 0, id, sizeof(id)) &&
		          col_text(s, 1, tenant, sizeof(tenant)) &&
		          col_blob(s, 2, b, sizeof(b));

		if (ok && keep(data, tenant, b))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			void *p = realloc(doomed, ncap * sizeof(*doomed));

			if (!p) {
				free(doomed);
				return -ENOMEM;
			}
			doomed = p;
			cap = ncap;
		}
		memcpy(doomed[n++], id, sizeof(id));
	}
	for (size_t i = 0; r == 0 && i < n; i++)
		r = oauth_db_grant_delete(tx, doomed[i]);
	free(doomed);
	if (r == 0)
		*deleted = (long long)n;
	return r;
}

int oauth_db_grant_count(struct store_tx *tx, const char *tenant, long long *n)
{
	static const char sql_all[] = "SELECT count(*) FROM oauth_grants";
	static const char sql_one[] =
	    "SELECT count(*) FROM oauth_grants WHERE tenant = ?1";
	struct store_stmt *s = store_stmt(tx, tenant ? sql_one : sql_all);
	int r;

	*n = 0;
	if (!s)
		return -EIO;
	if (tenant)
		store_bind_text(s, 1, tenant);
	r = store_step(tx, s);
	if (r == 1)
		*n = store_col_int64(s, 0);
	return r < 0 ? r : 0;
}

int oauth_db_grants_by_tenant(struct store_tx *tx, oauth_db_count_fn fn,
                              void *arg)
{
	static const char sql[] = "SELECT tenant, count(*) FROM oauth_grants "
	                          "GROUP BY tenant ORDER BY tenant";
	struct store_stmt *s = store_stmt(tx, sql);
	int r;

	if (!s)
		return -EIO;
	while ((r = store_step(tx, s)) == 1) {
		const char *t = store_col_text(s, 0);

		fn(arg, t ? t : "", store_col_int64(s, 1));
	}
	return r;
}

/* Reads grant columns at offset off: id, client, tenant, binding, ... */
static bool grant_cols(struct store_stmt *s, int off, struct oauth_db_grant *g)
{
	bool ok = col_text(s, off, g->grant_id, sizeof(g->grant_id)) &&
	          col_text(s, off + 1, g->client_id, sizeof(g->client_id)) &&
	          col_text(s, off + 2, g->tenant, sizeof(g->tenant)) &&
	          col_blob(s, off + 3, g->binding, sizeof(g->binding)) &&
	          col_text(s, off + 4, g->scope, sizeof(g->scope)) &&
	          col_text(s, off + 5, g->resource, sizeof(g->resource));

	g->created_at = store_col_int64(s, off + 6);
	g->used_at = store_col_int64(s, off + 7);
	if (!ok)
		log_warnx("store: grant row %.32s is damaged; ignoring it",
		          g->grant_id);
	return ok;
}

#define GRANT_COLS                                                             \
	"g.grant_id, g.client_id, g.tenant, g.tenant_binding, g.scope, "       \
	"g.resource, g.created_at, g.used_at"

int oauth_db_code_insert(struct store_tx *tx, const unsigned char *hash,
                         const char *grant_id, const char *redirect_uri,
                         bool redirect_given, const char *challenge,
                         long long expires_at)
{
	static const char sql[] =
	    "INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, "
	    "redirect_given, code_challenge, expires_at) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	store_bind_text(s, 2, grant_id);
	store_bind_text(s, 3, redirect_uri);
	store_bind_int64(s, 4, redirect_given);
	store_bind_text(s, 5, challenge);
	store_bind_int64(s, 6, expires_at);
	return store_run(tx, s);
}

int oauth_db_code_take(struct store_tx *tx, const unsigned char *hash,
                       long long now, struct oauth_db_code *out)
{
	static const char sql_get[] =
	    "SELECT " GRANT_COLS ", c.redirect_uri, c.redirect_given, "
	    "c.code_challenge, c.expires_at, c.used_at FROM oauth_codes c "
	    "JOIN oauth_grants g ON g.grant_id = c.grant_id "
	    "WHERE c.code_hash = ?1";
	static const char sql_use[] =
	    "UPDATE oauth_codes SET used_at = ?2 WHERE code_hash = ?1 AND "
	    "used_at IS NULL";
	struct store_stmt *s = store_stmt(tx, sql_get);
	int r;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	r = store_step(tx, s);
	if (r <= 0)
		return r == 0 ? -ENOENT : r;
	if (!grant_cols(s, 0, &out->grant) ||
	    !col_text(s, 8, out->redirect_uri, sizeof(out->redirect_uri)) ||
	    !col_text(s, 10, out->challenge, sizeof(out->challenge)))
		return -ENOENT;
	out->redirect_given = store_col_int64(s, 9) != 0;
	out->expires_at = store_col_int64(s, 11);
	out->used_before = !store_col_null(s, 12);
	s = store_stmt(tx, sql_use);
	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	store_bind_int64(s, 2, now);
	return store_run(tx, s);
}

int oauth_db_token_insert(struct store_tx *tx, const unsigned char *hash,
                          const char *grant_id, enum oauth_db_kind kind,
                          long long expires_at)
{
	static const char sql[] =
	    "INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) "
	    "VALUES (?1, ?2, ?3, ?4)";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	store_bind_text(s, 2, grant_id);
	store_bind_text(s, 3, kind_name(kind));
	store_bind_int64(s, 4, expires_at);
	return store_run(tx, s);
}

int oauth_db_token_get(struct store_tx *tx, const unsigned char *hash,
                       enum oauth_db_kind kind, struct oauth_db_token *out)
{
	static const char sql[] =
	    "SELECT " GRANT_COLS ", t.expires_at, t.rotated_at "
	    "FROM oauth_tokens t JOIN oauth_grants g ON g.grant_id = "
	    "t.grant_id WHERE t.token_hash = ?1 AND t.kind = ?2";
	struct store_stmt *s = store_stmt(tx, sql);
	int r;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	store_bind_text(s, 2, kind_name(kind));
	r = store_step(tx, s);
	if (r <= 0)
		return r == 0 ? -ENOENT : r;
	if (!grant_cols(s, 0, &out->grant))
		return -ENOENT;
	out->expires_at = store_col_int64(s, 8);
	out->rotated_at = store_col_int64(s, 9);
	return 0;
}

int oauth_db_token_rotate(struct store_tx *tx, const unsigned char *hash,
                          long long now)
{
	static const char sql[] =
	    "UPDATE oauth_tokens SET rotated_at = ?2 WHERE token_hash = ?1";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	store_bind_int64(s, 2, now);
	return store_run(tx, s);
}

int oauth_db_token_delete(struct store_tx *tx, const unsigned char *hash)
{
	static const char sql[] =
	    "DELETE FROM oauth_tokens WHERE token_hash = ?1";
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_blob(s, 1, hash, OAUTH_DB_HASH_LEN);
	return store_run(tx, s);
}

int oauth_db_purge(struct store_tx *tx, long long now, long long max,
                   long long *deleted, bool *full)
{
	/*
	 * A redeemed code is kept an hour past its expiry, so a second use
	 * within that time is recognized as a replay and revokes the grant.
	 * Batches of max: a LIMIT in a subquery, which both stores take.
	 */
	static const char *const sqls[] = {
	    "DELETE FROM oauth_tokens WHERE token_hash IN (SELECT token_hash "
	    "FROM oauth_tokens WHERE expires_at < ?1 LIMIT ?2)",
	    "DELETE FROM oauth_codes WHERE code_hash IN (SELECT code_hash "
	    "FROM oauth_codes WHERE expires_at < ?1 - 3600 LIMIT ?2)",
	    "DELETE FROM oauth_grants WHERE grant_id IN (SELECT g.grant_id "
	    "FROM oauth_grants g WHERE NOT EXISTS (SELECT 1 FROM oauth_tokens "
	    "t WHERE t.grant_id = g.grant_id) AND NOT EXISTS (SELECT 1 FROM "
	    "oauth_codes c WHERE c.grant_id = g.grant_id AND c.expires_at >= "
	    "?1) LIMIT ?2)",
	};
	long long total = 0;

	if (full)
		*full = false;
	for (size_t i = 0; i < sizeof(sqls) / sizeof(sqls[0]); i++) {
		struct store_stmt *s = store_stmt(tx, sqls[i]);
		long long n;
		int r;

		if (!s)
			return -EIO;
		store_bind_int64(s, 1, now);
		store_bind_int64(s, 2, max);
		r = store_run(tx, s);
		if (r < 0)
			return r;
		n = store_changes(tx);
		total += n;
		if (full && n >= max)
			*full = true;
	}
	if (deleted)
		*deleted = total;
	return 0;
}
