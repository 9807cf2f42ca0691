/* SPDX-License-Identifier: MIT */
/*
 * store: the daemon's one place for durable state, behind one statement API
 * with two backends (store_sqlite.c, store_pg.c, an ops table each):
 *  - SQLite (the default, one host): a file in WAL mode with
 *    synchronous=FULL, so a committed transaction survives a crash of the
 *    process or of the machine (a relaxed one, store_begin_relaxed, only
 *    of the process), and a transaction cut short by one leaves
 *    nothing behind. The file is created with mode 0600 (SQLite gives its
 *    -wal and -shm files the same mode).
 *  - PostgreSQL (several replicas sharing state): an existing server named
 *    by a postgresql:// or postgres:// URL (STORE_URL). Write transactions
 *    of every replica are serialized by one advisory lock, as BEGIN
 *    IMMEDIATE serializes them on one SQLite file.
 * Secrets never go into the store in clear: a module stores the SHA-256 of
 * a token, never the token.
 *
 * Who owns what:
 *  - The store owns the connection, transactions, busy handling and the
 *    ordered list of schema migrations (store.c's migrations[]). On SQLite
 *    the version reached is PRAGMA user_version, on PostgreSQL the one row
 *    of the table store_meta; a database written by a newer build (a
 *    version this build does not know) is refused with a message, never
 *    silently used.
 *  - A module that keeps durable state owns its tables: it exports the SQL
 *    of each of its migrations from its own header (oauth_db.h's
 *    OAUTH_DB_MIGRATION_1 is the first), with a PostgreSQL text beside it
 *    when the SQLite text is not valid there, and writes every query
 *    against its tables itself with the statement API below, in SQL both
 *    backends accept. Its table names start with the module's name
 *    ("oauth_", "task_").
 *
 * Adding tables (tasks, usage counters, ...): write the CREATE statements in
 * your module's header as a string constant (and a _PG one if PostgreSQL
 * needs other types: BYTEA for BLOB, BIGINT for INTEGER, no STRICT or
 * WITHOUT ROWID), and append one entry {next version, "module", sql,
 * pg_sql} to migrations[] in store.c. A migration that has shipped is never
 * edited: change a table with a new migration. Each migration runs in one
 * transaction with the version bump, so a crash during an upgrade leaves
 * the old version intact; on PostgreSQL they run under a session advisory
 * lock, so two replicas starting at once do not both migrate.
 *
 * SQL: '?' placeholders (SQLite's "?NNN" also works, on both backends),
 * numbered from 1 without gaps (PostgreSQL cannot type a parameter no
 * expression uses); columns numbered from 0. On PostgreSQL an SQL error
 * shows at the first store_step, not at store_stmt. Portable SQL only: CASE
 * instead of SQLite's two-argument min/max or a boolean summed, ON CONFLICT ...
 * DO UPDATE with excluded.* (both accept it).
 *
 * Threads: one connection, guarded by a mutex that a transaction holds from
 * store_begin() to store_commit()/store_rollback(), so transactions of all
 * threads are serialized and a transaction sees only its own writes and
 * committed ones. Keep transactions short and never block (network, Docker,
 * a client) inside one: every other user of the store waits meanwhile.
 * Another process holding the write lock (the sqlite3 shell, a backup,
 * another replica on PostgreSQL) is waited for up to STORE_BUSY_MS, then
 * the transaction fails with -EBUSY.
 */
#ifndef MCPSD_STORE_H
#define MCPSD_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define STORE_BUSY_MS 5000
#define STORE_FILE_NAME "state.db"

struct store;

/* A transaction: borrowed from the store between begin and commit/rollback. */
struct store_tx;

/* One schema step: the SQL brings the schema from version - 1 to version. */
struct store_migration {
	unsigned version;   /* 1, 2, 3, ... without gaps */
	const char *owner;  /* the module whose tables it touches */
	const char *sql;    /* one or more statements (SQLite) */
	const char *pg_sql; /* the same for PostgreSQL; NULL: sql is valid */
};

/* A prepared statement: opaque, borrowed from the store (store_stmt). */
struct store_stmt;

/*
 * Opens the store at where and brings its schema up to date with migs (the
 * daemon's list is schema_open's, lib/schema.h; tests pass their own). where
 * is either the path of an SQLite file (created with mode 0600 if absent;
 * the directory must exist) or a postgresql:// or postgres:// URL of an
 * existing database (libpq's URL syntax; a password in it, or libpq's
 * PGPASSFILE or PGPASSWORD, is used and never logged). Errors, with a
 * message for the operator in err: -EACCES or another errno when the file
 * cannot be opened or created, -EPROTO when it is not a store of this daemon
 * or was written by a newer version, -EIO when a migration fails or the
 * server cannot be reached, -ENOTSUP for a postgresql URL in a build without
 * libpq. migs is borrowed for the call. Caller owns *out; free with
 * store_close.
 */
__attribute__((warn_unused_result)) int
store_open_with(const char *path, const struct store_migration *migs, size_t n,
                struct store **out, char *err, size_t errlen);

/* Closes the connection (checkpointing an SQLite WAL). NULL-safe. */
void store_close(struct store *st);

/* The schema version of the open file (the newest: schema_version()). */
unsigned store_version(const struct store *st);

/*
 * What to name the store in messages (borrowed, valid until store_close):
 * the SQLite file's path, or "PostgreSQL database DB on HOST:PORT" (never
 * the password).
 */
const char *store_path(const struct store *st);

/* Whether where names a PostgreSQL database (postgresql:// or postgres://). */
bool store_is_url(const char *where);

/*
 * Whether other processes read and write st as this one does (PostgreSQL,
 * shared by replicas), rather than this process alone (SQLite).
 */
bool store_is_shared(const struct store *st);

/*
 * Writes url into out (size n) with any password replaced by "*****", for
 * printing a configuration. Never fails; truncates to n - 1 bytes.
 */
void store_url_redact(const char *url, char *out, size_t n);

/*
 * Begins a transaction: write=true takes the write lock at once (BEGIN
 * IMMEDIATE on SQLite, a transaction-scoped advisory lock shared by every
 * replica on PostgreSQL), so every read-check-write inside it is atomic
 * against all other writers; write=false is a read snapshot (REPEATABLE
 * READ on PostgreSQL) that must not write. On PostgreSQL a connection
 * found broken is reconnected once here; failing that, -EIO and a logged
 * message naming the server. Blocks while another thread's transaction is open;
 * never begin a second transaction on a thread that holds one (it would wait
 * for itself). On success *tx is valid until store_commit or store_rollback,
 * which must be called on the same thread. -EBUSY when another process holds
 * the lock past STORE_BUSY_MS, -EIO otherwise (logged).
 */
__attribute__((warn_unused_result)) int
store_begin(struct store *st, bool write, struct store_tx **tx);

/*
 * As store_begin(st, true, tx), but the commit does not wait for the disk:
 * it is atomic and survives a crash of the process (SQLite's WAL with
 * synchronous=NORMAL, PostgreSQL's synchronous_commit off), but a power
 * cut or kernel crash may lose it and the other relaxed commits of the
 * last moments, never half of one; the next ordinary commit makes them
 * durable too. For counters written on every run (usage), where losing
 * the last few is harmless and an fsync per run is not (2-3 ms each on
 * these machines); never for grants, tokens or what a client was promised.
 */
__attribute__((warn_unused_result)) int
store_begin_relaxed(struct store *st, struct store_tx **tx);

/*
 * Commits and ends the transaction whatever the result. Fails (and rolls
 * back) when a statement of the transaction failed or the commit itself
 * does: -EIO, -ENOSPC (disk full), -EBUSY.
 */
__attribute__((warn_unused_result)) int store_commit(struct store_tx *tx);

/* Rolls back and ends the transaction. NULL-safe. */
void store_rollback(struct store_tx *tx);

/*
 * A prepared statement for sql, reset and with its bindings cleared,
 * borrowed until the transaction ends (statements are cached per SQL text:
 * pass the same constant each time). NULL on error (logged; the transaction
 * is marked failed so store_commit refuses it). Every function below
 * accepts NULL for s and then does nothing (binds), fails (steps: -EIO) or
 * reads SQL NULL (columns).
 */
struct store_stmt *store_stmt(struct store_tx *tx, const char *sql);

/*
 * Binds parameter idx (1-based). Values are copied: the caller's buffers
 * may change or go away at once. store_bind_text(s, i, NULL) binds SQL
 * NULL. An idx out of range marks the statement failed (its step fails).
 */
void store_bind_text(struct store_stmt *s, int idx, const char *v);
void store_bind_int64(struct store_stmt *s, int idx, long long v);
void store_bind_null(struct store_stmt *s, int idx);
void store_bind_blob(struct store_stmt *s, int idx, const void *p, size_t n);

/*
 * Steps a statement: 1 for a row, 0 when done, a negative errno on error
 * (logged; the transaction is marked failed): -EEXIST for a constraint
 * violation, -EBUSY for a lock not obtained in time, -ENOSPC, -EIO.
 */
__attribute__((warn_unused_result)) int store_step(struct store_tx *tx,
                                                   struct store_stmt *s);

/* Runs a statement without results to its end: 0 or a negative errno. */
__attribute__((warn_unused_result)) int store_run(struct store_tx *tx,
                                                  struct store_stmt *s);

/*
 * The current row's columns (0-based), valid until the next step or the
 * end of the transaction. Text and blobs are borrowed; text is
 * NUL-terminated and NULL for SQL NULL; a blob of length 0 or SQL NULL
 * gives NULL with *n = 0. An integer column read as int64 gives its value,
 * SQL NULL gives 0.
 */
bool store_col_null(struct store_stmt *s, int col);
const char *store_col_text(struct store_stmt *s, int col);
long long store_col_int64(struct store_stmt *s, int col);
const void *store_col_blob(struct store_stmt *s, int col, size_t *n);

/* Rows changed by the last INSERT, UPDATE or DELETE of this transaction. */
long long store_changes(struct store_tx *tx);

/*
 * Health hook (matches http_health_fn): adds "store": {"backend":
 * "sqlite"|"postgresql", "schema": N, "ok": bool} and returns false when
 * the database no longer answers (the daemon reports itself degraded).
 * data is the store.
 */
bool store_health(void *data, cJSON *health);

#endif
