/* SPDX-License-Identifier: MIT */
/*
 * store: the backend-neutral half of the store. It picks the backend from
 * the location (a path or a postgresql:// URL), holds the one mutex that a
 * transaction keeps from begin to commit or rollback, applies the migrations it
 * is given (the daemon's list is in lib/schema.c) and keeps a cache of prepared
 * statements per SQL text, and marks a transaction failed when one of its
 * statements fails. What SQL means and how it reaches the database is the
 * backend's (store_impl.h).
 */
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/store_impl.h"
#include "util/errmsg.h"
#include "util/log.h"

struct store_stmt {
	const char *sql; /* the caller's constant; compared by address first */
	struct store_bstmt *b;
	const struct store_backend *be;
};

struct store_tx {
	struct store *st;
	bool failed;
};

struct store {
	const struct store_backend *be;
	struct store_conn *conn;
	char *desc;
	unsigned version;
	pthread_mutex_t mu;
	struct store_tx tx; /* the one open transaction */
	struct store_stmt **cache;
	size_t n_cache, cap_cache;
};

bool store_is_shared(const struct store *st)
{
	return strcmp(st->be->name, "postgresql") == 0;
}

bool store_is_url(const char *where)
{
	return where && (strncasecmp(where, "postgresql://", 13) == 0 ||
	                 strncasecmp(where, "postgres://", 11) == 0);
}

void store_url_redact(const char *url, char *out, size_t n)
{
	const char *auth, *end, *at, *colon, *q;
	size_t o = 0;

	if (n == 0)
		return;
	out[0] = '\0';
	if (!url)
		return;
	auth = strstr(url, "://");
	auth = auth ? auth + 3 : url;
	end = auth + strcspn(auth, "/?#");
	at = memchr(auth, '@', (size_t)(end - auth));
	colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	/* user:password@ -> user:*****@ */
	if (colon) {
		o = (size_t)snprintf(out, n, "%.*s*****",
		                     (int)(colon + 1 - url), url);
		url = at;
	}
	/* ...?password=x&... -> password=***** */
	for (const char *p = url; *p && o + 1 < n;) {
		q = strstr(p, "password=");
		if (!q || (q != url && q[-1] != '?' && q[-1] != '&')) {
			if (!q) {
				o += (size_t)snprintf(out + o, n - o, "%s", p);
				break;
			}
			o += (size_t)snprintf(out + o, n - o, "%.*s",
			                      (int)(q + 9 - p), p);
			p = q + 9;
			continue;
		}
		o += (size_t)snprintf(out + o, n - o, "%.*s*****",
		                      (int)(q + 9 - p), p);
		p = q + 9 + strcspn(q + 9, "&#");
	}
}

unsigned store_version(const struct store *st)
{
	return st->version;
}

const char *store_path(const struct store *st)
{
	return st->desc;
}

int store_open_with(const char *where, const struct store_migration *migs,
                    size_t n, struct store **out, char *err, size_t errlen)
{
	struct store *st;
	int r;

	*out = NULL;
	if (n == 0)
		return errmsg_fail(-EINVAL, err, errlen, "no migrations");
	for (size_t i = 0; i < n; i++) {
		if (migs[i].version != i + 1)
			return errmsg_fail(-EINVAL, err, errlen,
			                   "migration %zu has version %u; "
			                   "versions must be 1, 2, 3, ...",
			                   i, migs[i].version);
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "out of memory opening the store");
	st->be =
	    store_is_url(where) ? &store_pg_backend : &store_sqlite_backend;
	r = st->be->open(where, migs, n, &st->conn, &st->version, &st->desc,
	                 err, errlen);
	if (r < 0) {
		free(st);
		return r;
	}
	pthread_mutex_init(&st->mu, NULL);
	st->tx.st = st;
	*out = st;
	return 0;
}

static void drop_cache(struct store *st)
{
	for (size_t i = 0; i < st->n_cache; i++) {
		st->be->finalize(st->cache[i]->b);
		free(st->cache[i]);
	}
	free(st->cache);
	st->cache = NULL;
	st->n_cache = st->cap_cache = 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	drop_cache(st);
	st->be->close(st->conn);
	pthread_mutex_destroy(&st->mu);
	free(st->desc);
	free(st);
}

/* ---- transactions --------------------------------------------------- */

/* Resets every statement so none holds a snapshot or rows past the end. */
static void reset_all(struct store *st)
{
	for (size_t i = 0; i < st->n_cache; i++)
		st->be->reset(st->cache[i]->b);
}

static int begin(struct store *st, bool write, bool relaxed,
                 struct store_tx **tx)
{
	int r;

	*tx = NULL;
	pthread_mutex_lock(&st->mu);
	st->tx.failed = false;
	r = st->be->begin(st->conn, write, relaxed);
	if (r < 0) {
		pthread_mutex_unlock(&st->mu);
		return r;
	}
	*tx = &st->tx;
	return 0;
}

int store_begin(struct store *st, bool write, struct store_tx **tx)
{
	return begin(st, write, false, tx);
}

int store_begin_relaxed(struct store *st, struct store_tx **tx)
{
	return begin(st, true, true, tx);
}

static int finish(struct store_tx *tx, bool commit)
{
	struct store *st = tx->st;
	int r = 0;

	reset_all(st);
	if (commit && tx->failed)
		r = -EIO;
	if (commit && !tx->failed)
		r = st->be->commit(st->conn);
	if (!commit || tx->failed)
		st->be->rollback(st->conn);
	pthread_mutex_unlock(&st->mu);
	return r;
}

int store_commit(struct store_tx *tx)
{
	return finish(tx, true);
}

void store_rollback(struct store_tx *tx)
{
	if (tx)
		(void)finish(tx, false);
}

struct store_stmt *store_stmt(struct store_tx *tx, const char *sql)
{
	struct store *st = tx->st;
	struct store_stmt *s;

	for (size_t i = 0; i < st->n_cache; i++) {
		s = st->cache[i];
		if (s->sql == sql || strcmp(s->sql, sql) == 0) {
			st->be->reset(s->b);
			return s;
		}
	}
	if (st->n_cache == st->cap_cache) {
		size_t ncap = st->cap_cache ? st->cap_cache * 2 : 32;
		struct store_stmt **nc = realloc(st->cache, ncap * sizeof(*nc));

		if (!nc) {
			tx->failed = true;
			log_warnx("store: out of memory");
			return NULL;
		}
		st->cache = nc;
		st->cap_cache = ncap;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		tx->failed = true;
		log_warnx("store: out of memory");
		return NULL;
	}
	s->b = st->be->prepare(st->conn, sql);
	if (!s->b) {
		free(s);
		tx->failed = true;
		log_warnx("store: the statement was: %.200s", sql);
		return NULL;
	}
	s->sql = sql;
	s->be = st->be;
	st->cache[st->n_cache++] = s;
	return s;
}

void store_bind_text(struct store_stmt *s, int idx, const char *v)
{
	if (s && v)
		s->be->bind_text(s->b, idx, v);
	else if (s)
		s->be->bind_null(s->b, idx);
}

void store_bind_int64(struct store_stmt *s, int idx, long long v)
{
	if (s)
		s->be->bind_int64(s->b, idx, v);
}

void store_bind_null(struct store_stmt *s, int idx)
{
	if (s)
		s->be->bind_null(s->b, idx);
}

void store_bind_blob(struct store_stmt *s, int idx, const void *p, size_t n)
{
	if (s)
		s->be->bind_blob(s->b, idx, p, n);
}

int store_step(struct store_tx *tx, struct store_stmt *s)
{
	int r;

	if (!s) {
		tx->failed = true;
		return -EIO;
	}
	r = s->be->step(tx->st->conn, s->b);
	if (r < 0)
		tx->failed = true;
	return r;
}

int store_run(struct store_tx *tx, struct store_stmt *s)
{
	int r;

	while ((r = store_step(tx, s)) == 1)
		;
	return r;
}

bool store_col_null(struct store_stmt *s, int col)
{
	return !s || s->be->col_null(s->b, col);
}

const char *store_col_text(struct store_stmt *s, int col)
{
	return s ? s->be->col_text(s->b, col) : NULL;
}

long long store_col_int64(struct store_stmt *s, int col)
{
	return s ? s->be->col_int64(s->b, col) : 0;
}

const void *store_col_blob(struct store_stmt *s, int col, size_t *n)
{
	*n = 0;
	return s ? s->be->col_blob(s->b, col, n) : NULL;
}

long long store_changes(struct store_tx *tx)
{
	return tx->st->be->changes(tx->st->conn);
}

bool store_health(void *data, cJSON *health)
{
	struct store *st = data;
	struct store_tx *tx;
	cJSON *o = cJSON_AddObjectToObject(health, "store");
	bool ok = false;

	if (store_begin(st, false, &tx) == 0) {
		ok = store_step(tx, store_stmt(tx, st->be->probe_sql)) == 1;
		store_rollback(tx);
	}
	if (o) {
		cJSON_AddStringToObject(o, "backend", st->be->name);
		cJSON_AddNumberToObject(o, "schema", st->version);
		cJSON_AddBoolToObject(o, "ok", ok);
	}
	return ok;
}
