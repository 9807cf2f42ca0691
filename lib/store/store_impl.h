/* SPDX-License-Identifier: MIT */
/*
 * store_impl: what a backend of the store provides (store_sqlite.c,
 * store_pg.c), as one table of operations that store.c calls. Private to
 * the store: no other module includes it.
 *
 * Threads: store.c calls every operation with the store's mutex held, so a
 * backend needs no locking of its own.
 */
#ifndef MCPSD_STORE_IMPL_H
#define MCPSD_STORE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "store/store.h"

/* A backend's connection and statements: opaque to store.c. */
struct store_conn;
struct store_bstmt;

struct store_backend {
	const char *name; /* "sqlite", "postgresql" (health, messages) */

	/*
	 * Opens where, checks that it is a store of this daemon not newer
	 * than migs[n - 1], and applies what migs has that it lacks. On
	 * success *conn (free with close), *version and *desc (malloc'd
	 * name for messages, never a password). Errors as store_open_with.
	 */
	int (*open)(const char *where, const struct store_migration *migs,
	            size_t n, struct store_conn **conn, unsigned *version,
	            char **desc, char *err, size_t errlen);
	void (*close)(struct store_conn *c);

	/* 0 or a negative errno (logged). rollback never fails. */
	/* relaxed (write only): the commit does not wait for the disk. */
	int (*begin)(struct store_conn *c, bool write, bool relaxed);
	int (*commit)(struct store_conn *c);
	void (*rollback)(struct store_conn *c);

	/* NULL on error (logged); finalize takes any prepared statement. */
	struct store_bstmt *(*prepare)(struct store_conn *c, const char *sql);
	void (*finalize)(struct store_bstmt *s);
	/* Forgets bindings and rows: the statement is as prepared. */
	void (*reset)(struct store_bstmt *s);

	void (*bind_text)(struct store_bstmt *s, int idx, const char *v);
	void (*bind_int64)(struct store_bstmt *s, int idx, long long v);
	void (*bind_null)(struct store_bstmt *s, int idx);
	void (*bind_blob)(struct store_bstmt *s, int idx, const void *p,
	                  size_t n);
	/* 1 row, 0 done, negative errno (logged). */
	int (*step)(struct store_conn *c, struct store_bstmt *s);
	bool (*col_null)(struct store_bstmt *s, int col);
	const char *(*col_text)(struct store_bstmt *s, int col);
	long long (*col_int64)(struct store_bstmt *s, int col);
	const void *(*col_blob)(struct store_bstmt *s, int col, size_t *n);
	long long (*changes)(struct store_conn *c);

	/* A query that answers one row while the database is usable. */
	const char *probe_sql;
};

extern const struct store_backend store_sqlite_backend;
/* Present in every build; without libpq its open fails with -ENOTSUP. */
extern const struct store_backend store_pg_backend;

#endif
