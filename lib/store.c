/* SPDX-License-Identifier: MIT */
/*
 * store: one SQLite connection behind one mutex. Opening creates the file
 * with mode 0600 before SQLite sees it, switches to WAL with full syncs, and
 * applies the migrations the file has not seen yet, each in its own
 * transaction together with the version bump. Statements are prepared once
 * per SQL text and kept for the life of the connection.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "log.h"
#include "oauth_db.h"
#include "tasks_db.h"
#include "util/errmsg.h"

/* "MCSD": marks a file as this daemon's, so another program's is refused. */
#define STORE_APPLICATION_ID 0x4d435344

/*
 * Every schema step of the daemon, oldest first. Append only; never edit or
 * reorder an entry that has shipped (see store.h).
 */
static const struct store_migration migrations[] = {
    {1, "oauth", OAUTH_DB_MIGRATION_1},
    {2, "tasks", TASKS_DB_MIGRATION_1},
    {3, "budget", BUDGET_MIGRATION_1},
};

#define N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

struct cached_stmt {
	const char *sql; /* the caller's constant; compared by address first */
	sqlite3_stmt *stmt;
};

struct store_tx {
	struct store *st;
	bool failed;
};

struct store {
	sqlite3 *db;
	char *path;
	unsigned version;
	pthread_mutex_t mu;
	struct store_tx tx; /* the one open transaction */
	struct cached_stmt *cache;
	size_t n_cache, cap_cache;
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

unsigned store_latest_version(void)
{
	return migrations[N_MIGRATIONS - 1].version;
}

unsigned store_version(const struct store *st)
{
	return st->version;
}

const char *store_path(const struct store *st)
{
	return st->path;
}

/* Runs SQL without results outside the statement cache (open, migrate). */
static int exec(struct store *st, const char *sql, char *err, size_t errlen)
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
static int pragma_int(struct store *st, const char *name, long long *out)
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
static int check_identity(struct store *st, unsigned latest, char *err,
                          size_t errlen)
{
	long long app = 0, ver = 0, tables = 0;
	sqlite3_stmt *s = NULL;
	int r;

	r = pragma_int(st, "application_id", &app);
	if (r == 0)
		r = pragma_int(st, "user_version", &ver);
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

static int migrate(struct store *st, const struct store_migration *migs,
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
			if (r == 0)
				continue;
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

int store_open_with(const char *path, const struct store_migration *migs,
                    size_t n, struct store **out, char *err, size_t errlen)
{
	struct store *st;
	char why[256], mode[16] = "";
	sqlite3_stmt *s = NULL;
	int r, rc;

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
	r = prepare_file(path, err, errlen);
	if (r < 0)
		return r;
	st = calloc(1, sizeof(*st));
	if (!st || !(st->path = strdup(path))) {
		free(st);
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "out of memory opening the store");
	}
	pthread_mutex_init(&st->mu, NULL);
	st->tx.st = st;
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
	rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s,
	                        NULL);
	if (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		snprintf(mode, sizeof(mode), "%s",
		         (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
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
	return 0;
fail:
	store_close(st);
	return r;
}

int store_open(const char *path, struct store **out, char *err, size_t errlen)
{
	return store_open_with(path, migrations, N_MIGRATIONS, out, err,
	                       errlen);
}

void store_close(struct store *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_cache; i++)
		sqlite3_finalize(st->cache[i].stmt);
	free(st->cache);
	if (st->db && sqlite3_close(st->db) != SQLITE_OK)
		log_warnx("store %s: closing: %s", st->path,
		          sqlite3_errmsg(st->db));
	pthread_mutex_destroy(&st->mu);
	free(st->path);
	free(st);
}

/* ---- transactions --------------------------------------------------- */

static void tx_failed(struct store_tx *tx, int rc, const char *what)
{
	tx->failed = true;
	log_warnx("store %s: %s: %s", tx->st->path, what,
	          sqlite3_errmsg(tx->st->db));
	(void)rc;
}

/* Resets every statement so none holds the snapshot past the end. */
static void reset_all(struct store *st)
{
	for (size_t i = 0; i < st->n_cache; i++)
		sqlite3_reset(st->cache[i].stmt);
}

int store_begin(struct store *st, bool write, struct store_tx **tx)
{
	static const char begin_w[] = "BEGIN IMMEDIATE";
	static const char begin_r[] = "BEGIN DEFERRED";
	sqlite3_stmt *s;
	int rc;

	*tx = NULL;
	pthread_mutex_lock(&st->mu);
	st->tx.failed = false;
	s = store_stmt(&st->tx, write ? begin_w : begin_r);
	rc = s ? sqlite3_step(s) : SQLITE_ERROR;
	if (s)
		sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		int e = s ? errno_of(rc) : -EIO;

		if (s)
			log_warnx("store %s: cannot begin a transaction: %s",
			          st->path, sqlite3_errmsg(st->db));
		pthread_mutex_unlock(&st->mu);
		return e;
	}
	*tx = &st->tx;
	return 0;
}

static int finish(struct store_tx *tx, bool commit)
{
	static const char sql_commit[] = "COMMIT";
	static const char sql_rollback[] = "ROLLBACK";
	struct store *st = tx->st;
	int r = 0, rc;
	sqlite3_stmt *s;

	reset_all(st);
	if (commit && tx->failed)
		r = -EIO;
	if (commit && !tx->failed) {
		s = store_stmt(tx, sql_commit);
		rc = s ? sqlite3_step(s) : SQLITE_ERROR;
		if (s)
			sqlite3_reset(s);
		if (rc != SQLITE_DONE) {
			r = s ? errno_of(rc) : -EIO;
			log_warnx("store %s: commit failed: %s", st->path,
			          sqlite3_errmsg(st->db));
		}
	}
	if (!commit || r < 0) {
		/* Nothing to roll back when COMMIT already ended it. */
		if (!sqlite3_get_autocommit(st->db)) {
			s = store_stmt(tx, sql_rollback);
			if (!s || sqlite3_step(s) != SQLITE_DONE)
				log_warnx("store %s: rollback failed: %s",
				          st->path, sqlite3_errmsg(st->db));
			if (s)
				sqlite3_reset(s);
		}
	}
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

sqlite3_stmt *store_stmt(struct store_tx *tx, const char *sql)
{
	struct store *st = tx->st;
	sqlite3_stmt *s = NULL;
	int rc;

	for (size_t i = 0; i < st->n_cache; i++) {
		if (st->cache[i].sql == sql ||
		    strcmp(st->cache[i].sql, sql) == 0) {
			s = st->cache[i].stmt;
			sqlite3_reset(s);
			sqlite3_clear_bindings(s);
			return s;
		}
	}
	if (st->n_cache == st->cap_cache) {
		size_t ncap = st->cap_cache ? st->cap_cache * 2 : 32;
		struct cached_stmt *nc = realloc(st->cache, ncap * sizeof(*nc));

		if (!nc) {
			tx->failed = true;
			log_warnx("store: out of memory");
			return NULL;
		}
		st->cache = nc;
		st->cap_cache = ncap;
	}
	rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s,
	                        NULL);
	if (rc != SQLITE_OK) {
		tx_failed(tx, rc, "preparing a statement");
		log_warnx("store: the statement was: %.200s", sql);
		return NULL;
	}
	st->cache[st->n_cache].sql = sql;
	st->cache[st->n_cache].stmt = s;
	st->n_cache++;
	return s;
}

int store_step(struct store_tx *tx, sqlite3_stmt *stmt)
{
	int rc;

	if (!stmt) {
		tx->failed = true;
		return -EIO;
	}
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	tx_failed(tx, rc, "a statement failed");
	return errno_of(rc);
}

int store_run(struct store_tx *tx, sqlite3_stmt *stmt)
{
	int r;

	while ((r = store_step(tx, stmt)) == 1)
		;
	return r;
}

long long store_changes(struct store_tx *tx)
{
	return sqlite3_changes64(tx->st->db);
}

bool store_health(void *data, cJSON *health)
{
	static const char probe[] = "SELECT count(*) FROM sqlite_schema";
	struct store *st = data;
	struct store_tx *tx;
	cJSON *o = cJSON_AddObjectToObject(health, "store");
	bool ok = false;

	if (store_begin(st, false, &tx) == 0) {
		ok = store_step(tx, store_stmt(tx, probe)) == 1;
		store_rollback(tx);
	}
	if (o) {
		cJSON_AddNumberToObject(o, "schema", st->version);
		cJSON_AddBoolToObject(o, "ok", ok);
	}
	return ok;
}
