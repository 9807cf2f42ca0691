/* SPDX-License-Identifier: MIT */
/*
 * store: the daemon's one place for durable state, an SQLite database in WAL
 * mode with synchronous=FULL, so a committed transaction survives a crash of
 * the process or of the machine, and a transaction cut short by one leaves
 * nothing behind. The file is created with mode 0600 (SQLite gives its -wal
 * and -shm files the same mode) and secrets never go into it in clear: a
 * module stores the SHA-256 of a token, never the token.
 *
 * Who owns what:
 *  - The store owns the connection, the file, transactions, busy handling
 *    and the ordered list of schema migrations (store.c's migrations[]).
 *    The version reached is PRAGMA user_version; a file written by a newer
 *    build (a version this build does not know) is refused with a message,
 *    never silently used.
 *  - A module that keeps durable state owns its tables: it exports the SQL
 *    of each of its migrations from its own header (oauth_db.h's
 *    OAUTH_DB_MIGRATION_1 is the first) and writes every query against its
 *    tables itself, with the SQLite statement API and the helpers below.
 *    Its table names start with the module's name ("oauth_", "task_").
 *
 * Adding tables (tasks, usage counters, ...): write the CREATE statements in
 * your module's header as a string constant, and append one entry
 * {next version, "module", that constant} to migrations[] in store.c. A
 * migration that has shipped is never edited: change a table with a new
 * migration. Each migration runs in one transaction with the version bump,
 * so a crash during an upgrade leaves the old version intact.
 *
 * Threads: one connection, guarded by a mutex that a transaction holds from
 * store_begin() to store_commit()/store_rollback(), so transactions of all
 * threads are serialized and a transaction sees only its own writes and
 * committed ones. Keep transactions short and never block (network, Docker,
 * a client) inside one: every other user of the store waits meanwhile.
 * Another process using the same file (the sqlite3 shell, a backup) is
 * waited for up to STORE_BUSY_MS, then the transaction fails with -EBUSY.
 */
#ifndef MCPSD_STORE_H
#define MCPSD_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#define STORE_BUSY_MS 5000
#define STORE_FILE_NAME "state.db"

struct store;

/* A transaction: borrowed from the store between begin and commit/rollback. */
struct store_tx;

/* One schema step: the SQL brings the schema from version - 1 to version. */
struct store_migration {
	unsigned version;  /* 1, 2, 3, ... without gaps */
	const char *owner; /* the module whose tables it touches */
	const char *sql;   /* one or more statements */
};

/*
 * Opens (creating it with mode 0600 if absent) the database at path and
 * brings its schema up to date with the daemon's migrations. The directory
 * must exist. Errors, with a message for the operator in err: -EACCES or
 * another errno when the file cannot be opened or created, -EPROTO when it
 * is not an SQLite database or was written by a newer version, -EIO when a
 * migration fails. Caller owns *out; free with store_close.
 */
__attribute__((warn_unused_result)) int
store_open(const char *path, struct store **out, char *err, size_t errlen);

/*
 * The same with another list of migrations (tests, and nothing else: the
 * daemon's list is the one in store.c). migs is borrowed for the call.
 */
__attribute__((warn_unused_result)) int
store_open_with(const char *path, const struct store_migration *migs, size_t n,
                struct store **out, char *err, size_t errlen);

/* Closes the connection (checkpointing the WAL). NULL-safe. */
void store_close(struct store *st);

/* The schema version of the open file, and the newest this build knows. */
unsigned store_version(const struct store *st);
unsigned store_latest_version(void);

/* The file's path (borrowed, valid until store_close). */
const char *store_path(const struct store *st);

/*
 * Begins a transaction: write=true takes the write lock at once (BEGIN
 * IMMEDIATE), so it cannot fail later for a lock upgrade; write=false is a
 * read snapshot. Blocks while another thread's transaction is open; never
 * begin a second transaction on a thread that holds one (it would wait for
 * itself). On
 * success *tx is valid until store_commit or store_rollback, which must be
 * called on the same thread. -EBUSY when another process holds the lock
 * past STORE_BUSY_MS, -EIO otherwise (logged).
 */
__attribute__((warn_unused_result)) int
store_begin(struct store *st, bool write, struct store_tx **tx);

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
 * is marked failed so store_commit refuses it). Bind with sqlite3_bind_*;
 * read rows with sqlite3_column_*.
 */
sqlite3_stmt *store_stmt(struct store_tx *tx, const char *sql);

/*
 * Steps a statement: 1 for a row, 0 when done, a negative errno on error
 * (logged; the transaction is marked failed).
 */
__attribute__((warn_unused_result)) int store_step(struct store_tx *tx,
                                                   sqlite3_stmt *stmt);

/* Runs a statement without results to its end: 0 or a negative errno. */
__attribute__((warn_unused_result)) int store_run(struct store_tx *tx,
                                                  sqlite3_stmt *stmt);

/* Rows changed by the last INSERT, UPDATE or DELETE of this transaction. */
long long store_changes(struct store_tx *tx);

/*
 * Health hook (matches http_health_fn): adds "store": {"schema": N} and
 * returns false when the database no longer answers. data is the store.
 */
bool store_health(void *data, cJSON *health);

#endif
