/* SPDX-License-Identifier: MIT */
/*
 * store_pg: the store's PostgreSQL backend (store_impl.h), for several
 * replicas sharing one database. One libpq connection; SQL written with
 * '?' is rewritten to $1..$n once per text and prepared once per
 * connection. A write transaction is READ COMMITTED plus a transaction-scoped
 * advisory lock that every replica takes, so writers are serialized across
 * hosts as BEGIN IMMEDIATE serializes them on one SQLite file, and each
 * statement after the lock sees every commit before it; a read transaction
 * is one REPEATABLE READ snapshot. Migrations run under a session advisory
 * lock and record their version in the one row of store_meta. A connection
 * found broken at the start of a transaction is reset once. Results come
 * in text format (bytea decoded on demand). The password (in the URL, or
 * libpq's PGPASSFILE/PGPASSWORD) is never logged: messages name the
 * database, host and port only. Threads: called under store.c's mutex.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "store/store_impl.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"

#if MCPSD_HAVE_PG
#include <libpq-fe.h>

/* Advisory lock keys: "MCSD" for writers, +1 for migrations. */
#define PG_WRITE_LOCK 0x4d435344LL
#define PG_MIGRATE_LOCK 0x4d435345LL
#define PG_APPLICATION "mcp-sandboxd"
#define PG_MIGRATE_WAIT_MS 60000
#define PG_INT8OID 20
#define PG_BYTEAOID 17

struct store_conn {
	PGconn *pg;
	char *desc;         /* "database D on H port P" */
	unsigned gen;       /* bumped at each connection: prepared names die */
	unsigned next_name; /* for statement names */
	long long changes;
};

struct store_bstmt {
	struct store_conn *c;
	char *sql; /* rewritten: $1..$n */
	int n;     /* parameters */
	unsigned gen;
	char name[24];
	unsigned *ptypes; /* types it was prepared with (0: inferred) */
	unsigned *types;  /* bound: INT8, BYTEA or 0 (text, NULL) */
	char **vals;
	int *lens, *fmts;
	bool bad;
	PGresult *res;
	int row;
	unsigned char **blobs; /* decoded bytea of the current row */
	size_t *blob_lens;
	int nblobs;
};

/* ---- SQL text ---------------------------------------------------------- */

/*
 * Rewrites '?' and '?NNN' outside quotes and comments to $n (a bare '?' is
 * one more than the largest number so far, as in SQLite). Caller frees
 * *out. -EINVAL for a number out of range, -ENOMEM.
 */
static int rewrite(const char *sql, char **out, int *nparams)
{
	size_t len = strlen(sql), o = 0;
	char *w = malloc(len * 4 + 1);
	int max = 0;
	char q = 0; /* ' or " while inside a quoted string or name */

	*out = NULL;
	*nparams = 0;
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		char ch = sql[i];

		if (q) {
			if (ch == q)
				q = 0;
			w[o++] = ch;
		} else if (ch == '\'' || ch == '"') {
			q = ch;
			w[o++] = ch;
		} else if (ch == '-' && sql[i + 1] == '-') {
			size_t e = strcspn(sql + i, "\n");

			memcpy(w + o, sql + i, e);
			o += e;
			i += e - 1;
		} else if (ch == '/' && sql[i + 1] == '*') {
			const char *e = strstr(sql + i + 2, "*/");
			size_t k = e ? (size_t)(e + 2 - (sql + i)) : len - i;

			memcpy(w + o, sql + i, k);
			o += k;
			i += k - 1;
		} else if (ch == '?') {
			long v = 0;
			size_t d = 0;

			while (sql[i + 1 + d] >= '0' && sql[i + 1 + d] <= '9' &&
			       d < 4)
				v = v * 10 + (sql[i + 1 + d++] - '0');
			if (d == 0)
				v = max + 1;
			if (v < 1 || v > 999 ||
			    (sql[i + 1 + d] >= '0' && sql[i + 1 + d] <= '9')) {
				free(w);
				return -EINVAL;
			}
			if (v > max)
				max = (int)v;
			o += (size_t)snprintf(w + o, 5, "$%ld", v);
			i += d;
		} else {
			w[o++] = ch;
		}
	}
	w[o] = '\0';
	*out = w;
	*nparams = max;
	return 0;
}

/* ---- errors ------------------------------------------------------------ */

static int errno_of_state(const char *state)
{
	if (!state)
		return -EIO;
	if (strncmp(state, "23", 2) == 0)
		return -EEXIST;
	if (strcmp(state, "55P03") == 0 || strcmp(state, "40P01") == 0 ||
	    strcmp(state, "40001") == 0)
		return -EBUSY;
	if (strcmp(state, "53100") == 0)
		return -ENOSPC;
	if (strcmp(state, "53200") == 0)
		return -ENOMEM;
	if (strcmp(state, "42501") == 0 || strncmp(state, "28", 2) == 0)
		return -EACCES;
	return -EIO;
}

/* libpq's message on one line (it ends in a newline, may hold several). */
static void one_line(const char *msg, char *out, size_t n)
{
	size_t o = 0;

	for (; msg && *msg && o + 1 < n; msg++)
		out[o++] =
		    *msg == '\n' || *msg == '\r' || *msg == '\t' ? ' ' : *msg;
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

static int res_errno(PGresult *res)
{
	return errno_of_state(res ? PQresultErrorField(res, PG_DIAG_SQLSTATE)
	                          : NULL);
}

static void log_fail(struct store_conn *c, const char *what)
{
	char m[512];

	one_line(PQerrorMessage(c->pg), m, sizeof(m));
	log_warnx("store (PostgreSQL %s): %s: %s%s", c->desc, what, m,
	          PQstatus(c->pg) == CONNECTION_BAD
	              ? "; the connection is lost: the next transaction "
	                "reconnects (check that the server runs)"
	              : "");
}

/* Runs SQL without parameters; 0 or a negative errno (not logged). */
static int run(struct store_conn *c, const char *sql)
{
	PGresult *res = PQexec(c->pg, sql);
	ExecStatusType s = PQresultStatus(res);
	int r =
	    s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : res_errno(res);

	PQclear(res);
	return r;
}

/* Notices ("table exists, skipping") go to the debug log, not stderr. */
static void notice(void *arg, const char *msg)
{
	char m[256];

	(void)arg;
	one_line(msg, m, sizeof(m));
	log_debug("store (PostgreSQL): %s", m);
}

/* What every connection needs: lock waits bounded as on SQLite. */
static int session_setup(struct store_conn *c)
{
	char sql[96];

	PQsetNoticeProcessor(c->pg, notice, NULL);
	snprintf(sql, sizeof(sql),
	         "SET lock_timeout = %d; SET client_min_messages = warning",
	         STORE_BUSY_MS);
	c->gen++;
	return run(c, sql);
}

static char *describe(PGconn *pg)
{
	const char *db = PQdb(pg), *host = PQhost(pg), *port = PQport(pg);

	return buf_asprintf("database %s on %s port %s", db ? db : "?",
	                    host && *host ? host : "the local socket",
	                    port && *port ? port : "5432");
}

/*
 * Resets a broken connection once. -EIO (logged, naming the server) when
 * it does not come back.
 */
static int reconnect(struct store_conn *c)
{
	log_warnx("store (PostgreSQL %s): the connection was lost; "
	          "reconnecting",
	          c->desc);
	PQreset(c->pg);
	if (PQstatus(c->pg) != CONNECTION_OK) {
		char m[512];

		one_line(PQerrorMessage(c->pg), m, sizeof(m));
		log_warnx("store (PostgreSQL %s): cannot reconnect: %s; check "
		          "that the server runs and accepts connections from "
		          "this host (STORE_URL, pg_hba.conf); the store is "
		          "unavailable until it does",
		          c->desc, m);
		return -EIO;
	}
	if (session_setup(c) < 0) {
		log_fail(c, "configuring the connection");
		return -EIO;
	}
	log_info("store (PostgreSQL %s): reconnected", c->desc);
	return 0;
}

/* ---- opening and migrations -------------------------------------------- */

/* The version in store_meta, after checking the database is ours. */
static int read_version(struct store_conn *c, unsigned latest, unsigned *ver,
                        char *err, size_t errlen)
{
	static const char create[] = "CREATE TABLE IF NOT EXISTS store_meta ("
	                             "  id INTEGER PRIMARY KEY CHECK (id = 1),"
	                             "  application TEXT NOT NULL,"
	                             "  version INTEGER NOT NULL)";
	static const char foreign[] =
	    "SELECT (SELECT count(*) FROM pg_catalog.pg_tables WHERE "
	    "schemaname = current_schema() AND tablename <> 'store_meta'), "
	    "(SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = "
	    "current_schema() AND tablename = 'store_meta')";
	PGresult *res;
	long long others, meta, v;
	int r;

	*ver = 0;
	res = PQexec(c->pg, foreign);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		r = res_errno(res);
		PQclear(res);
		goto fail;
	}
	others = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	meta = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	if (!meta && others > 0)
		return errmsg_fail(-EPROTO, err, errlen,
		                   "the PostgreSQL %s holds tables of another "
		                   "program, not an mcp-sandboxd store; give "
		                   "the daemon a database of its own (see "
		                   "docs/operations.md, \"Store\")",
		                   c->desc);
	r = run(c, create);
	if (r == 0)
		r = run(c, "INSERT INTO store_meta (id, application, version) "
		           "VALUES (1, '" PG_APPLICATION
		           "', 0) ON CONFLICT (id) DO NOTHING");
	if (r < 0)
		goto fail;
	res = PQexec(
	    c->pg, "SELECT application, version FROM store_meta WHERE id = 1");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		r = res_errno(res);
		PQclear(res);
		goto fail;
	}
	if (strcmp(PQgetvalue(res, 0, 0), PG_APPLICATION) != 0) {
		PQclear(res);
		return errmsg_fail(-EPROTO, err, errlen,
		                   "the PostgreSQL %s is marked as another "
		                   "program's (store_meta); give the daemon a "
		                   "database of its own",
		                   c->desc);
	}
	v = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	if (v > (long long)latest)
		return errmsg_fail(
		    -EPROTO, err, errlen,
		    "the store (PostgreSQL %s) was written by a newer "
		    "mcp-sandboxd (schema version %lld; this build knows up to "
		    "%u); run the newer version on every replica",
		    c->desc, v, latest);
	*ver = v > 0 ? (unsigned)v : 0;
	return 0;
fail : {
	char m[512];

	one_line(PQerrorMessage(c->pg), m, sizeof(m));
	return errmsg_fail(r, err, errlen,
	                   "cannot read the store's version in the "
	                   "PostgreSQL %s: %s; the daemon's user needs to "
	                   "create tables in the database's schema",
	                   c->desc, m);
}
}

static int migrate(struct store_conn *c, const struct store_migration *migs,
                   size_t n, unsigned *version, char *err, size_t errlen)
{
	char sql[128], m[512];
	unsigned from = 0, cur = 0;
	int r;

	/* Two replicas starting at once: the second waits, then sees the
	 * first one's version and has nothing left to do. */
	snprintf(sql, sizeof(sql),
	         "SET lock_timeout = %d; SELECT pg_advisory_lock(%lld)",
	         PG_MIGRATE_WAIT_MS, PG_MIGRATE_LOCK);
	r = run(c, sql);
	if (r < 0) {
		one_line(PQerrorMessage(c->pg), m, sizeof(m));
		return errmsg_fail(
		    r, err, errlen,
		    "cannot take the migration lock of the store "
		    "(PostgreSQL %s): %s; another replica may be "
		    "stuck migrating it",
		    c->desc, m);
	}
	r = read_version(c, migs[n - 1].version, &cur, err, errlen);
	from = cur;
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct store_migration *mg = &migs[i];

		if (mg->version <= cur)
			continue;
		r = run(c, "BEGIN");
		if (r == 0)
			r = run(c, mg->pg_sql ? mg->pg_sql : mg->sql);
		snprintf(sql, sizeof(sql),
		         "UPDATE store_meta SET version = %u WHERE id = 1",
		         mg->version);
		if (r == 0)
			r = run(c, sql);
		if (r == 0)
			r = run(c, "COMMIT");
		if (r < 0) {
			one_line(PQerrorMessage(c->pg), m, sizeof(m));
			(void)run(c, "ROLLBACK");
			errmsg_set(
			    err, errlen,
			    "cannot bring the store (PostgreSQL %s) to "
			    "schema version %u (%s): %s; the database is "
			    "unchanged at version %u",
			    c->desc, mg->version, mg->owner, m, cur);
			r = -EIO;
			break;
		}
		cur = mg->version;
	}
	snprintf(sql, sizeof(sql),
	         "SELECT pg_advisory_unlock(%lld); SET lock_timeout = %d",
	         PG_MIGRATE_LOCK, STORE_BUSY_MS);
	(void)run(c, sql);
	if (r == 0 && cur != from)
		log_info("store (PostgreSQL %s): schema version %u (was %u)",
		         c->desc, cur, from);
	*version = cur;
	return r;
}

static void pg_close(struct store_conn *c)
{
	if (!c)
		return;
	PQfinish(c->pg);
	free(c->desc);
	free(c);
}

static int pg_open(const char *where, const struct store_migration *migs,
                   size_t n, struct store_conn **out, unsigned *version,
                   char **desc, char *err, size_t errlen)
{
	/* The URL comes last: what it says overrides these defaults. */
	static const char *const keys[] = {"connect_timeout",
	                                   "application_name", "dbname", NULL};
	const char *vals[] = {"5", PG_APPLICATION, where, NULL};
	struct store_conn *c;
	int r;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "out of memory opening the store");
	c->pg = PQconnectdbParams(keys, vals, 1);
	if (!c->pg) {
		free(c);
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "out of memory opening the store");
	}
	c->desc = describe(c->pg);
	if (!c->desc) {
		r = errmsg_fail(-ENOMEM, err, errlen,
		                "out of memory opening the store");
		goto fail;
	}
	if (PQstatus(c->pg) != CONNECTION_OK) {
		char m[512];

		one_line(PQerrorMessage(c->pg), m, sizeof(m));
		r = errmsg_fail(-EIO, err, errlen,
		                "cannot connect to the store (PostgreSQL %s): "
		                "%s; check that the server runs and accepts "
		                "connections from this host, and the user, "
		                "database and password of STORE_URL (or "
		                "PGPASSFILE, PGPASSWORD)",
		                c->desc, m);
		goto fail;
	}
	if (PQserverVersion(c->pg) < 110000) {
		r = errmsg_fail(-ENOTSUP, err, errlen,
		                "the store's PostgreSQL server (%s) is version "
		                "%d; the daemon needs 11 or newer",
		                c->desc, PQserverVersion(c->pg));
		goto fail;
	}
	r = session_setup(c);
	if (r < 0) {
		char m[512];

		one_line(PQerrorMessage(c->pg), m, sizeof(m));
		r = errmsg_fail(r, err, errlen,
		                "cannot configure the connection to the store "
		                "(PostgreSQL %s): %s",
		                c->desc, m);
		goto fail;
	}
	r = migrate(c, migs, n, version, err, errlen);
	if (r < 0)
		goto fail;
	*desc = buf_asprintf("PostgreSQL %s", c->desc);
	if (!*desc) {
		r = errmsg_fail(-ENOMEM, err, errlen,
		                "out of memory opening the store");
		goto fail;
	}
	*out = c;
	return 0;
fail:
	pg_close(c);
	return r;
}

/* ---- transactions ------------------------------------------------------- */

static void pg_rollback(struct store_conn *c)
{
	if (PQstatus(c->pg) == CONNECTION_OK &&
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE &&
	    run(c, "ROLLBACK") < 0)
		log_fail(c, "rollback failed");
}

static int pg_begin(struct store_conn *c, bool write, bool relaxed)
{
	char sql[128];
	int r = -EIO;

	/*
	 * Writers: READ COMMITTED, so that every statement after the lock
	 * sees all that committed before it (a REPEATABLE READ snapshot would
	 * be taken before the wait). Readers: one snapshot for the whole
	 * transaction.
	 */
	if (write)
		snprintf(sql, sizeof(sql),
		         "BEGIN ISOLATION LEVEL READ COMMITTED; "
		         "SELECT pg_advisory_xact_lock(%lld)",
		         PG_WRITE_LOCK);
	else
		snprintf(sql, sizeof(sql),
		         "BEGIN ISOLATION LEVEL REPEATABLE READ");
	c->changes = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (PQstatus(c->pg) != CONNECTION_OK && reconnect(c) < 0)
			return -EIO;
		r = run(c, sql);
		/* SET LOCAL: this transaction's commit only. */
		if (r == 0 && write && relaxed &&
		    run(c, "SET LOCAL synchronous_commit TO OFF") < 0)
			log_fail(c, "cannot relax a transaction; its commit "
			            "waits for the disk");
		if (r == 0)
			return 0;
		if (PQstatus(c->pg) == CONNECTION_OK)
			break;
	}
	log_fail(c, r == -EBUSY ? "another replica holds the write lock"
	                        : "cannot begin a transaction");
	pg_rollback(c);
	return PQstatus(c->pg) == CONNECTION_OK ? r : -EIO;
}

static int pg_commit(struct store_conn *c)
{
	PGresult *res = PQexec(c->pg, "COMMIT");
	int r = 0;

	/* COMMIT of a failed transaction answers "ROLLBACK". */
	if (PQresultStatus(res) != PGRES_COMMAND_OK ||
	    strcmp(PQcmdStatus(res), "COMMIT") != 0) {
		r = PQresultStatus(res) == PGRES_COMMAND_OK ? -EIO
		                                            : res_errno(res);
		log_fail(c, "commit failed");
	}
	PQclear(res);
	if (r < 0)
		pg_rollback(c);
	return r;
}

/* ---- statements --------------------------------------------------------- */

static void clear_blobs(struct store_bstmt *s)
{
	for (int i = 0; i < s->nblobs; i++) {
		PQfreemem(s->blobs[i]);
		s->blobs[i] = NULL;
	}
}

static void pg_reset(struct store_bstmt *s)
{
	clear_blobs(s);
	PQclear(s->res);
	s->res = NULL;
	s->row = -1;
	for (int i = 0; i < s->n; i++) {
		free(s->vals[i]);
		s->vals[i] = NULL;
		s->types[i] = 0;
		s->lens[i] = 0;
		s->fmts[i] = 0;
	}
	s->bad = false;
}

static void pg_finalize(struct store_bstmt *s)
{
	if (!s)
		return;
	pg_reset(s);
	free(s->blobs);
	free(s->blob_lens);
	free(s->ptypes);
	free(s->types);
	free(s->vals);
	free(s->lens);
	free(s->fmts);
	free(s->sql);
	free(s);
}

static struct store_bstmt *pg_prepare(struct store_conn *c, const char *sql)
{
	struct store_bstmt *s = calloc(1, sizeof(*s));
	size_t n;

	if (!s) {
		log_warnx("store: out of memory");
		return NULL;
	}
	s->c = c;
	s->row = -1;
	if (rewrite(sql, &s->sql, &s->n) < 0) {
		log_warnx("store (PostgreSQL): a statement has a parameter "
		          "number out of range (1 to 999)");
		free(s);
		return NULL;
	}
	n = s->n ? (size_t)s->n : 1;
	s->ptypes = calloc(n, sizeof(*s->ptypes));
	s->types = calloc(n, sizeof(*s->types));
	s->vals = calloc(n, sizeof(*s->vals));
	s->lens = calloc(n, sizeof(*s->lens));
	s->fmts = calloc(n, sizeof(*s->fmts));
	if (!s->ptypes || !s->types || !s->vals || !s->lens || !s->fmts) {
		log_warnx("store: out of memory");
		pg_finalize(s);
		return NULL;
	}
	/*
	 * Prepared on first use, with the types bound then: errors in the SQL
	 * show at the first step, not here.
	 */
	return s;
}

/* Takes ownership of v (NULL: SQL NULL, or out of memory when !null). */
static void bind(struct store_bstmt *s, int idx, char *v, bool null,
                 unsigned type, int len, int fmt)
{
	if (idx < 1 || idx > s->n || (!v && !null)) {
		free(v);
		s->bad = true;
		return;
	}
	free(s->vals[idx - 1]);
	s->vals[idx - 1] = v;
	s->types[idx - 1] = type;
	s->lens[idx - 1] = len;
	s->fmts[idx - 1] = fmt;
}

static void pg_bind_text(struct store_bstmt *s, int idx, const char *v)
{
	/* Type left to the server (as for a literal): any column takes it. */
	bind(s, idx, strdup(v), false, 0, 0, 0);
}

static void pg_bind_int64(struct store_bstmt *s, int idx, long long v)
{
	bind(s, idx, buf_asprintf("%lld", v), false, PG_INT8OID, 0, 0);
}

static void pg_bind_null(struct store_bstmt *s, int idx)
{
	bind(s, idx, NULL, true, 0, 0, 0);
}

static void pg_bind_blob(struct store_bstmt *s, int idx, const void *p,
                         size_t n)
{
	char *v = malloc(n ? n : 1);

	if (v && n)
		memcpy(v, p, n);
	if (n > 0x7fffffff) {
		free(v);
		v = NULL;
	}
	bind(s, idx, v, false, PG_BYTEAOID, (int)n, 1);
}

/*
 * Prepares s on this connection unless it is, with types that fit the
 * binds: a parameter prepared from a NULL (type inferred) and now bound as
 * an integer or bytes is prepared again under a new name.
 */
static int ensure_prepared(struct store_conn *c, struct store_bstmt *s)
{
	bool fits = s->gen == c->gen;
	PGresult *res;
	int r = 0;

	for (int i = 0; fits && i < s->n; i++)
		fits = s->types[i] == 0 || s->types[i] == s->ptypes[i];
	if (fits)
		return 0;
	for (int i = 0; i < s->n; i++) {
		if (s->types[i] || s->gen != c->gen)
			s->ptypes[i] = s->types[i];
	}
	snprintf(s->name, sizeof(s->name), "mcpsd_%u", ++c->next_name);
	res = PQprepare(c->pg, s->name, s->sql, s->n, (const Oid *)s->ptypes);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		r = res_errno(res);
		log_fail(c, "preparing a statement");
		s->gen = 0;
	} else {
		s->gen = c->gen;
	}
	PQclear(res);
	return r;
}

static int pg_step(struct store_conn *c, struct store_bstmt *s)
{
	ExecStatusType st;
	int r;

	if (s->bad) {
		log_warnx("store (PostgreSQL): a parameter was bound out of "
		          "range or without memory");
		return -EINVAL;
	}
	if (!s->res) {
		r = ensure_prepared(c, s);
		if (r < 0)
			return r;
		s->res = PQexecPrepared(c->pg, s->name, s->n,
		                        (const char *const *)s->vals, s->lens,
		                        s->fmts, 0);
		st = PQresultStatus(s->res);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			r = res_errno(s->res);
			log_fail(c, "a statement failed");
			PQclear(s->res);
			s->res = NULL;
			return PQstatus(c->pg) == CONNECTION_OK ? r : -EIO;
		}
		if (strncmp(PQcmdStatus(s->res), "INSERT", 6) == 0 ||
		    strncmp(PQcmdStatus(s->res), "UPDATE", 6) == 0 ||
		    strncmp(PQcmdStatus(s->res), "DELETE", 6) == 0)
			c->changes = strtoll(PQcmdTuples(s->res), NULL, 10);
		s->row = -1;
		if (PQnfields(s->res) > s->nblobs) {
			int nf = PQnfields(s->res);
			unsigned char **b =
			    realloc(s->blobs, (size_t)nf * sizeof(*b));

			if (b)
				s->blobs = b;
			if (!b)
				return -ENOMEM;
			for (int i = s->nblobs; i < nf; i++)
				s->blobs[i] = NULL;
			free(s->blob_lens);
			s->blob_lens = calloc((size_t)nf, sizeof(size_t));
			if (!s->blob_lens) {
				s->nblobs = 0;
				return -ENOMEM;
			}
			s->nblobs = nf;
		}
	}
	clear_blobs(s);
	if (s->row + 1 >= PQntuples(s->res)) {
		s->row = PQntuples(s->res);
		return 0;
	}
	s->row++;
	return 1;
}

static bool has(struct store_bstmt *s, int col)
{
	return s->res && s->row >= 0 && s->row < PQntuples(s->res) &&
	       col >= 0 && col < PQnfields(s->res) &&
	       !PQgetisnull(s->res, s->row, col);
}

static bool pg_col_null(struct store_bstmt *s, int col)
{
	return !has(s, col);
}

static const char *pg_col_text(struct store_bstmt *s, int col)
{
	return has(s, col) ? PQgetvalue(s->res, s->row, col) : NULL;
}

static long long pg_col_int64(struct store_bstmt *s, int col)
{
	const char *v = pg_col_text(s, col);

	if (!v)
		return 0;
	if (strcmp(v, "t") == 0)
		return 1;
	return strtoll(v, NULL, 10);
}

static const void *pg_col_blob(struct store_bstmt *s, int col, size_t *n)
{
	*n = 0;
	if (!has(s, col))
		return NULL;
	if (PQftype(s->res, col) != PG_BYTEAOID) {
		*n = (size_t)PQgetlength(s->res, s->row, col);
		return *n ? PQgetvalue(s->res, s->row, col) : NULL;
	}
	if (col >= s->nblobs)
		return NULL;
	if (!s->blobs[col])
		s->blobs[col] = PQunescapeBytea(
		    (const unsigned char *)PQgetvalue(s->res, s->row, col),
		    &s->blob_lens[col]);
	*n = s->blobs[col] ? s->blob_lens[col] : 0;
	return *n ? s->blobs[col] : NULL;
}

static long long pg_changes(struct store_conn *c)
{
	return c->changes;
}

const struct store_backend store_pg_backend = {
    .name = "postgresql",
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .reset = pg_reset,
    .bind_text = pg_bind_text,
    .bind_int64 = pg_bind_int64,
    .bind_null = pg_bind_null,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .col_null = pg_col_null,
    .col_text = pg_col_text,
    .col_int64 = pg_col_int64,
    .col_blob = pg_col_blob,
    .changes = pg_changes,
    .probe_sql = "SELECT 1",
};

#else /* !MCPSD_HAVE_PG */

static int pg_open(const char *where, const struct store_migration *migs,
                   size_t n, struct store_conn **out, unsigned *version,
                   char **desc, char *err, size_t errlen)
{
	*out = NULL;
	return errmsg_fail(-ENOTSUP, err, errlen,
	                   "this build of mcp-sandboxd has no PostgreSQL "
	                   "support (libpq was missing when it was built); "
	                   "install libpq-dev and rebuild, or leave STORE_URL "
	                   "empty to use SQLite at STORE_PATH");
}

const struct store_backend store_pg_backend = {
    .name = "postgresql",
    .open = pg_open,
    .probe_sql = "SELECT 1",
};

#endif /* MCPSD_HAVE_PG */
