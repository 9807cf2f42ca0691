/* SPDX-License-Identifier: MIT */
/*
 * store_sqlite: the store's SQLite backend (store_impl.h). Opening creates
 * the file with mode 0600 before SQLite sees it, switches to WAL with full
 * syncs, and applies the migrations the file has not seen yet, each in its
 * own transaction together with the version bump (PRAGMA user_version). A
 * write transaction is BEGIN IMMEDIATE. Threads: called under store.c's
 * mutex only.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_impl.h"
#include "util/errmsg.h"
#include "util/log.h"

/* "MCSD": marks a file as this daemon's, so another program's is refused. */
#define STORE_APPLICATION_ID 0x4d435344

struct store_conn {
	sqlite3 *db;
	char *path;
	unsigned version;
	bool relaxed; /* synchronous=NORMAL until the transaction ends */
};

struct store_bstmt {
	sqlite3_stmt *stmt;
	struct store_conn *c;
	bool bad_bind; /* a bind failed: the next step fails */
};

static int errno_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EPROTO;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	default:
		return -EIO;
	}
}

/* Runs SQL without results outside the statement cache (open, migrate). */
static int exec(struct store_conn *st, const char *sql, char *err,
                size_t errlen)
{
	char *msg = NULL;
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);

	if (rc == SQLITE_OK)
		return 0;
	errmsg_set(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return errno_of(rc);
}

/* Reads one integer PRAGMA. */
static int pragma_int(struct store_conn *st, const char *name, long long *out)
{
	char sql[64];
	sqlite3_stmt *s = NULL;
	int rc;

	snprintf(sql, sizeof(sql), "PRAGMA %s", name);
	rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc == SQLITE_OK ? 0 : errno_of(rc);
}

/* Whether an SQLite file carries our application id (header offset 68). */
static bool is_ours(int fd)
{
	unsigned char h[72];

	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "SQLite format 3", 16) != 0)
		return false;
	return ((unsigned)h[68] << 24 | (unsigned)h[69] << 16 |
	        (unsigned)h[70] << 8 | h[71]) == STORE_APPLICATION_ID;
}

/*
 * Creates the file with mode 0600 unless it exists, refuses anything but a
 * regular file, and tightens a looser mode, so that the database and the
 * -wal and -shm files SQLite derives from it are readable by this user only.
 */
static int prepare_file(const char *path, char *err, size_t errlen)
{
	struct stat sb;
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return errmsg_fail(
			    -e, err, errlen,
			    "cannot create the store %s: its directory does "
			    "not exist; create it or set STORE_PATH to a file "
			    "in an existing directory",
			    path);
		if (e == ELOOP)
			return errmsg_fail(
			    -e, err, errlen,
			    "the store %s is a symbolic link; point STORE_PATH "
			    "at the file itself",
			    path);
		return errmsg_fail(-e, err, errlen,
		                   "cannot open the store %s: %s; check the "
		                   "permissions of the file and its directory "
		                   "(the daemon needs read and write access)",
		                   path, strerror(e));
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return errmsg_fail(-EINVAL, err, errlen,
		                   "the store %s is not a regular file; point "
		                   "STORE_PATH at a file",
		                   path);
	}
	/*
	 * Only a new file or one of ours is made private: a foreign file is
	 * refused later, and not changed first.
	 */
	if ((sb.st_mode & 077) && (sb.st_size == 0 || is_ours(fd))) {
		log_warnx("store %s was readable by others (mode %03o); "
		          "setting mode 600",
		          path, (unsigned)(sb.st_mode & 0777));
		if (fchmod(fd, 0600) < 0) {
			int e = errno;

			close(fd);
			return errmsg_fail(-e, err, errlen,
			                   "cannot make the store %s private "
			                   "(mode 600): %s",
			                   path, strerror(e));
		}
	}
	/* Closed before SQLite locks anything (POSIX locks die with any fd). */
	close(fd);
	return 0;
}

/* Checks the file is ours (or empty) and not from a newer build. */
static int check_identity(struct store_conn *st, unsigned latest, char *err,
                          size_t errlen)
{
	long long app = 0, ver = 0, tables = 0;
	sqlite3_stmt *s = NULL;
	int r;

	/*
	 * One read transaction: another process creating the file at the
	 * same moment must not be seen half-way (its tables without its
	 * application id).
	 */
	(void)exec(st, "BEGIN", NULL, 0);
	r = pragma_int(st, "application_id", &app);
	if (r == 0)
		r = pragma_int(st, "user_version", &ver);
	if (r < 0)
		(void)exec(st, "ROLLBACK", NULL, 0);
	if (r < 0)
		return errmsg_fail(
		    r, err, errlen, "the store %s cannot be read: %s; %s",
		    st->path, sqlite3_errmsg(st->db),
		    r == -EPROTO ? "it is not an SQLite database or is "
		                   "damaged: move it aside (this loses the "
		                   "grants in it) or restore it from a backup"
		                 : "check the file and the disk");
	if (sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_schema", -1,
	                       &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		tables = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	(void)exec(st, "COMMIT", NULL, 0);
	if (app != STORE_APPLICATION_ID && (app != 0 || tables > 0))
		return errmsg_fail(-EPROTO, err, errlen,
		                   "%s is an SQLite database of another "
		                   "program, not an mcp-sandboxd store; set "
		                   "STORE_PATH to another file",
		                   st->path);
	if (ver > (long long)latest)
		return errmsg_fail(
		    -EPROTO, err, errlen,
		    "the store %s was written by a newer mcp-sandboxd (schema "
		    "version %lld; this build knows up to %u); run the newer "
		    "version, or move the file aside to start afresh (this "
		    "loses every OAuth grant in it)",
		    st->path, ver, latest);
	st->version = (unsigned)ver;
	return 0;
}

static int migrate(struct store_conn *st, const struct store_migration *migs,
                   size_t n, char *err, size_t errlen)
{
	char sql[96], why[512];
	unsigned from = st->version;

	for (size_t i = 0; i < n; i++) {
		const struct store_migration *m = &migs[i];
		long long cur = 0;
		int r;

		/* Read the version under the write lock: another process may
		 * have migrated meanwhile. */
		r = exec(st, "BEGIN IMMEDIATE", why, sizeof(why));
		if (r == 0)
			r = pragma_int(st, "user_version", &cur);
		if (r == 0 && cur >= (long long)m->version) {
			r = exec(st, "COMMIT", why, sizeof(why));
			/* Another process migrated meanwhile: take its
			 * version, so the caller does not see the one read
			 * before. */
			if (r == 0) {
				st->version = (unsigned)cur;
				continue;
			}
		}
		if (r == 0)
			r = exec(st, m->sql, why, sizeof(why));
		snprintf(sql, sizeof(sql),
		         "PRAGMA application_id = %d; PRAGMA user_version = %u",
		         STORE_APPLICATION_ID, m->version);
		if (r == 0)
			r = exec(st, sql, why, sizeof(why));
		if (r == 0)
			r = exec(st, "COMMIT", why, sizeof(why));
		if (r < 0) {
			(void)!exec(st, "ROLLBACK", NULL, 0);
			return errmsg_fail(
			    r, err, errlen,
			    "cannot bring the store %s to schema version %u "
			    "(%s): %s; the file is unchanged at version %lld",
			    st->path, m->version, m->owner, why, cur);
		}
		st->version = m->version;
	}
	if (st->version != from)
		log_info("store %s: schema version %u (was %u)", st->path,
		         st->version, from);
	return 0;
}

static void sq_close(struct store_conn *c)
{
	if (!c)
		return;
	if (c->db && sqlite3_close(c->db) != SQLITE_OK)
		log_warnx("store %s: closing: %s", c->path,
		          sqlite3_errmsg(c->db));
	free(c->path);
	free(c);
}

static int sq_open(const char *path, const struct store_migration *migs,
                   size_t n, struct store_conn **out, unsigned *version,
                   char **desc, char *err, size_t errlen)
{
	struct store_conn *st;
	char why[256], mode[16] = "";
	sqlite3_stmt *s = NULL;
	int r, rc;

	*out = NULL;
	r = prepare_file(path, err, errlen);
	if (r < 0)
		return r;
	st = calloc(1, sizeof(*st));
	if (!st || !(st->path = strdup(path)) || !(*desc = strdup(path))) {
		if (st)
			free(st->path);
		free(st);
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "out of memory opening the store");
	}
	rc = sqlite3_open_v2(path, &st->db,
	                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
	                         SQLITE_OPEN_NOFOLLOW,
	                     NULL);
	if (rc != SQLITE_OK) {
		r = errmsg_fail(
		    errno_of(rc), err, errlen, "cannot open the store %s: %s",
		    path, st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, STORE_BUSY_MS);
	r = check_identity(st, migs[n - 1].version, err, errlen);
	if (r < 0)
		goto fail;
	/* WAL: readers never block the writer, and a commit is one append. */
	/* Switching needs the file to itself: another process opening it at
	 * the same moment is waited for, as a busy transaction would be. */
	for (int waited = 0; waited <= STORE_BUSY_MS; waited += 10) {
		rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1,
		                        &s, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(s);
		if (rc == SQLITE_ROW)
			snprintf(mode, sizeof(mode), "%s",
			         (const char *)sqlite3_column_text(s, 0));
		sqlite3_finalize(s);
		s = NULL;
		if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
			break;
		usleep(10000);
	}
	if (strcmp(mode, "wal") != 0) {
		r = errmsg_fail(-EIO, err, errlen,
		                "the store %s cannot use write-ahead logging "
		                "(journal mode '%s': %s); put STORE_PATH on a "
		                "local filesystem",
		                path, mode, sqlite3_errmsg(st->db));
		goto fail;
	}
	/*
	 * FULL syncs the WAL at every commit, so a committed grant survives a
	 * power cut too, not only a crash of the process. secure_delete
	 * overwrites deleted rows; trusted_schema off keeps a tampered file's
	 * schema from calling functions.
	 */
	r = exec(st,
	         "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
	         "PRAGMA secure_delete = ON; PRAGMA trusted_schema = OFF",
	         why, sizeof(why));
	if (r < 0) {
		errmsg_set(err, errlen, "cannot configure the store %s: %s",
		           path, why);
		goto fail;
	}
	r = migrate(st, migs, n, err, errlen);
	if (r < 0)
		goto fail;
	*out = st;
	*version = st->version;
	return 0;
fail:
	free(*desc);
	*desc = NULL;
	sq_close(st);
	return r;
}

/* Runs one fixed statement of transaction control. */
static int control(struct store_conn *c, const char *sql, const char *what)
{
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);

	if (rc == SQLITE_OK)
		return 0;
	log_warnx("store %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
	return errno_of(rc);
}

/*
 * The synchronous level is the connection's and SQLite refuses to change it
 * inside a transaction, so a relaxed one sets NORMAL before BEGIN (in WAL
 * mode a commit is then appended without an fsync; the WAL is synced at the
 * next FULL commit or checkpoint) and FULL again once it has ended.
 */
static void sq_unrelax(struct store_conn *c)
{
	if (!c->relaxed)
		return;
	c->relaxed = false;
	(void)control(c, "PRAGMA synchronous = FULL",
	              "cannot set synchronous back to FULL");
}

static int sq_begin(struct store_conn *c, bool write, bool relaxed)
{
	int r;

	if (relaxed && write)
		c->relaxed = control(c, "PRAGMA synchronous = NORMAL",
		                     "cannot relax a transaction") == 0;
	r = control(c, write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED",
	            "cannot begin a transaction");
	if (r < 0)
		sq_unrelax(c);
	return r;
}

static void sq_rollback(struct store_conn *c)
{
	/* Nothing to roll back when COMMIT already ended it. */
	if (!sqlite3_get_autocommit(c->db))
		(void)control(c, "ROLLBACK", "rollback failed");
	sq_unrelax(c);
}

static int sq_commit(struct store_conn *c)
{
	int r = control(c, "COMMIT", "commit failed");

	if (r < 0)
		sq_rollback(c);
	sq_unrelax(c);
	return r;
}

static struct store_bstmt *sq_prepare(struct store_conn *c, const char *sql)
{
	struct store_bstmt *s = calloc(1, sizeof(*s));
	int rc;

	if (!s) {
		log_warnx("store: out of memory");
		return NULL;
	}
	rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
	                        &s->stmt, NULL);
	if (rc != SQLITE_OK) {
		log_warnx("store %s: preparing a statement: %s", c->path,
		          sqlite3_errmsg(c->db));
		sqlite3_finalize(s->stmt);
		free(s);
		return NULL;
	}
	s->c = c;
	return s;
}

static void sq_finalize(struct store_bstmt *s)
{
	if (!s)
		return;
	sqlite3_finalize(s->stmt);
	free(s);
}

static void sq_reset(struct store_bstmt *s)
{
	sqlite3_reset(s->stmt);
	sqlite3_clear_bindings(s->stmt);
	s->bad_bind = false;
}

static void bound(struct store_bstmt *s, int rc)
{
	if (rc != SQLITE_OK) {
		log_warnx("store %s: binding a parameter: %s", s->c->path,
		          sqlite3_errstr(rc));
		s->bad_bind = true;
	}
}

static void sq_bind_text(struct store_bstmt *s, int idx, const char *v)
{
	bound(s, sqlite3_bind_text(s->stmt, idx, v, -1, SQLITE_TRANSIENT));
}

static void sq_bind_int64(struct store_bstmt *s, int idx, long long v)
{
	bound(s, sqlite3_bind_int64(s->stmt, idx, v));
}

static void sq_bind_null(struct store_bstmt *s, int idx)
{
	bound(s, sqlite3_bind_null(s->stmt, idx));
}

static void sq_bind_blob(struct store_bstmt *s, int idx, const void *p,
                         size_t n)
{
	bound(s, sqlite3_bind_blob64(s->stmt, idx, p, n, SQLITE_TRANSIENT));
}

static int sq_step(struct store_conn *c, struct store_bstmt *s)
{
	int rc;

	if (s->bad_bind)
		return -EINVAL;
	rc = sqlite3_step(s->stmt);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	log_warnx("store %s: a statement failed: %s", c->path,
	          sqlite3_errmsg(c->db));
	return errno_of(rc);
}

static bool sq_col_null(struct store_bstmt *s, int col)
{
	return sqlite3_column_type(s->stmt, col) == SQLITE_NULL;
}

static const char *sq_col_text(struct store_bstmt *s, int col)
{
	return (const char *)sqlite3_column_text(s->stmt, col);
}

static long long sq_col_int64(struct store_bstmt *s, int col)
{
	return sqlite3_column_int64(s->stmt, col);
}

static const void *sq_col_blob(struct store_bstmt *s, int col, size_t *n)
{
	const void *p = sqlite3_column_blob(s->stmt, col);
	int len = sqlite3_column_bytes(s->stmt, col);

	*n = p && len > 0 ? (size_t)len : 0;
	return *n ? p : NULL;
}

static long long sq_changes(struct store_conn *c)
{
	return sqlite3_changes64(c->db);
}

const struct store_backend store_sqlite_backend = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .prepare = sq_prepare,
    .finalize = sq_finalize,
    .reset = sq_reset,
    .bind_text = sq_bind_text,
    .bind_int64 = sq_bind_int64,
    .bind_null = sq_bind_null,
    .bind_blob = sq_bind_blob,
    .step = sq_step,
    .col_null = sq_col_null,
    .col_text = sq_col_text,
    .col_int64 = sq_col_int64,
    .col_blob = sq_col_blob,
    .changes = sq_changes,
    .probe_sql = "SELECT count(*) FROM sqlite_schema",
};
