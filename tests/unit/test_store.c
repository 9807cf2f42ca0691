/* SPDX-License-Identifier: MIT */
/*
 * Store tests, one body for both backends: SQLite files in a temporary
 * directory, or, when MCPSD_TEST_PG_URL names a PostgreSQL server (tests/
 * lib/pg.sh run starts a scratch one), a fresh database per case. Creation
 * (mode 0600 and WAL on SQLite), the daemon's own migrations, refusal of a
 * newer or foreign database with a message, a failing migration leaving
 * the database as it was, transactions (commit, rollback, a failed
 * statement), many threads writing at once, two connections ("replicas")
 * doing read-check-write on the same rows (a counter, refresh-token
 * rotation, budget charging) without a lost update, migrations racing from
 * two connections, and durability: a child process writing transactions is
 * killed with SIGKILL at random moments, and every transaction it saw
 * committed must be there, whole, after reopening. PostgreSQL only: an
 * unreachable server (-EIO naming it, never the password), and a server
 * stopped and restarted under an open store (health degraded, then the
 * next transaction reconnects).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sqlite3.h>
#include <unistd.h>

#include "build_config.h"
#include "oauth/oauth_db.h"
#include "run/budget.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"

#if MCPSD_HAVE_PG
#include <libpq-fe.h>
#endif

static char dir[256];
static const char *pg_url; /* MCPSD_TEST_PG_URL, or NULL: SQLite */

static const char test_m1[] =
    "CREATE TABLE test_rows (seq INTEGER PRIMARY KEY, pad TEXT NOT NULL);"
    "CREATE TABLE test_counter (id INTEGER PRIMARY KEY, n INTEGER NOT "
    "NULL);"
    "INSERT INTO test_counter VALUES (1, 0);";
static const char test_m2[] = "ALTER TABLE test_rows ADD COLUMN note TEXT;";
static const struct store_migration migs[] = {
    {1, "test", test_m1, NULL},
    {2, "test", test_m2, NULL},
};
static const struct store_migration bad_migs[] = {
    {1, "test", test_m1, NULL},
    {2, "test", test_m2, NULL},
    {3, "test", "CREATE TABLE test_x (a); SELECT no_such_function();", NULL},
};

#if MCPSD_HAVE_PG
/* base with its database replaced by db. */
static void pg_url_for(char *out, size_t n, const char *base, const char *db)
{
	const char *h = strstr(base, "://");
	const char *p = h ? strchr(h + 3, '/') : NULL;
	size_t q;

	if (!p) {
		snprintf(out, n, "%s", base);
		return;
	}
	q = strcspn(p, "?");
	snprintf(out, n, "%.*s/%s%s", (int)(p - base), base, db, p + q);
}

static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Runs SQL on the server's maintenance database; false on error. */
static bool pg_admin(const char *sql)
{
	PGconn *c = PQconnectdb(pg_url);
	PGresult *r;

	PQsetNoticeProcessor(c, quiet, NULL);
	r = PQexec(c, sql);
	bool good = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!good)
		printf("# %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return good;
}
#endif

/*
 * Where case name keeps its store: a file in dir, or a fresh database
 * named after it (dropped first if a previous case left it).
 */
static void path_of(char *out, size_t n, const char *name)
{
	if (!pg_url) {
		snprintf(out, n, "%s/%s", dir, name);
		return;
	}
#if MCPSD_HAVE_PG
	{
		char db[64], sql[160];
		size_t k = 0;

		for (const char *c = name; *c && k + 1 < sizeof(db); c++)
			db[k++] = (char)(*c == '.' || *c == '/' ? '_' : *c);
		db[k] = '\0';
		snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", db);
		(void)pg_admin(sql);
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db);
		(void)pg_admin(sql);
		pg_url_for(out, n, pg_url, db);
	}
#endif
}

/* The query telling whether a table exists, per backend. */
static const char *table_query(void)
{
	return pg_url ? "SELECT count(*) FROM information_schema.tables "
	                "WHERE table_schema = current_schema() AND "
	                "table_name = ?"
	              : "SELECT count(*) FROM sqlite_schema WHERE name = ?";
}

/* The first column of the first row of a query, or -1 / -2. */
static long long query1(struct store *st, const char *sql)
{
	struct store_tx *tx;
	struct store_stmt *s;
	long long v = -1;

	if (store_begin(st, false, &tx) < 0)
		return -2;
	s = store_stmt(tx, sql);
	if (s && store_step(tx, s) == 1)
		v = store_col_int64(s, 0);
	store_rollback(tx);
	return v;
}

/* Whether a table exists: 1, 0, or negative on error. */
static long long table_count(struct store *st, const char *name)
{
	struct store_tx *tx;
	struct store_stmt *s;
	long long v = -1;

	if (store_begin(st, false, &tx) < 0)
		return -2;
	s = store_stmt(tx, table_query());
	store_bind_text(s, 1, name);
	if (s && store_step(tx, s) == 1)
		v = store_col_int64(s, 0);
	store_rollback(tx);
	return v;
}

static void test_create(void)
{
	char p[300], wal[310], err[512] = "";
	struct store *st = NULL;
	struct stat sb;
	int r;

	path_of(p, sizeof(p), "daemon.db");
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, 0, "the daemon's store opens");
	if (r < 0) {
		printf("# %s\n", err);
		return;
	}
	is_int(store_version(st), schema_version(),
	       "a new store gets every migration");
	is_int(table_count(st, "oauth_grants"), 1, "the oauth tables exist");
	is_int(table_count(st, "task_records"), 1, "the task table exists");
	is_int(table_count(st, "budget_usage"), 1, "the budget table exists");
	{
		cJSON *h = cJSON_CreateObject();
		cJSON *o;

		ok(store_health(st, h), "health says ok");
		o = cJSON_GetObjectItem(h, "store");
		ok(cJSON_GetObjectItem(o, "schema") != NULL,
		   "health reports the schema version");
		ok(cJSON_IsString(cJSON_GetObjectItem(o, "backend")) &&
		       strcmp(cJSON_GetObjectItem(o, "backend")->valuestring,
		              pg_url ? "postgresql" : "sqlite") == 0,
		   "and the backend");
		cJSON_Delete(h);
	}
	if (pg_url) {
		ok(strstr(store_path(st), "PostgreSQL database daemon_db") !=
		       NULL,
		   "the store names its database: %s", store_path(st));
		store_close(st);
		st = NULL;
		r = schema_open(p, &st, err, sizeof(err));
		ok(r == 0 && store_version(st) == schema_version(),
		   "reopening keeps the version");
		store_close(st);
		return;
	}
	memset(&sb, 0, sizeof(sb));
	r = stat(p, &sb);
	ok(r == 0 && (sb.st_mode & 0777) == 0600, "the file has mode 600 (%o)",
	   (unsigned)(sb.st_mode & 0777));
	{
		struct store_tx *tx;
		struct store_stmt *s;
		const char *mode = "";

		if (store_begin(st, false, &tx) == 0) {
			s = store_stmt(tx, "PRAGMA journal_mode");
			if (s && store_step(tx, s) == 1)
				mode = store_col_text(s, 0);
			ok(mode && strcmp(mode, "wal") == 0,
			   "the journal is a write-ahead log (%s)",
			   mode ? mode : "?");
			store_rollback(tx);
		}
	}
	is_int(query1(st, "PRAGMA synchronous"), 2, "synchronous is FULL");
	is_int(query1(st, "PRAGMA foreign_keys"), 1, "foreign keys are on");
	snprintf(wal, sizeof(wal), "%s-wal", p);
	ok(stat(wal, &sb) == 0 && (sb.st_mode & 0777) == 0600,
	   "the -wal file has mode 600 too");
	store_close(st);
	st = NULL;
	r = schema_open(p, &st, err, sizeof(err));
	ok(r == 0 && store_version(st) == schema_version(),
	   "reopening keeps the version");
	store_close(st);
}

#if MCPSD_HAVE_PG
static void test_refusals_pg(void)
{
	char p[600], err[768] = "";
	struct store *st = NULL;
	const char *pw_url = getenv("MCPSD_TEST_PG_PW_URL");
	int r;

	/* Another program's database. */
	path_of(p, sizeof(p), "foreign_tables");
	{
		PGconn *c = PQconnectdb(p);

		PQclear(PQexec(c, "CREATE TABLE notes (x text)"));
		PQfinish(c);
	}
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, -EPROTO, "another program's database is refused");
	ok(strstr(err, "another program"), "with a message: %s", err);

	/* No server there: -EIO, naming where, never the password. */
	r = schema_open("postgresql://mcpsd:hunter2-secret@/nodb?host=/"
	                "nonexistent-sock&port=5432",
	                &st, err, sizeof(err));
	is_int(r, -EIO, "an unreachable server fails the open");
	ok(strstr(err, "nodb") && strstr(err, "/nonexistent-sock") &&
	       strstr(err, "check that the server runs"),
	   "naming the database, the server and what to check: %s", err);
	ok(!strstr(err, "hunter2"), "and not the password");

	/* A wrong password: refused, the password is not in the message. */
	if (pw_url) {
		char bad[600];
		const char *at = strchr(pw_url, '@');
		const char *colon = strstr(pw_url, "mcpsd:");

		if (at && colon) {
			snprintf(bad, sizeof(bad), "%.*swrong-pw-42%s",
			         (int)(colon + 6 - pw_url), pw_url, at);
			r = schema_open(bad, &st, err, sizeof(err));
			ok(r < 0 && strstr(err, "password") &&
			       !strstr(err, "wrong-pw-42"),
			   "a wrong password is refused without showing it: "
			   "%s",
			   err);
		}
		(void)pg_admin("DROP DATABASE IF EXISTS pw_db");
		(void)pg_admin("CREATE DATABASE pw_db OWNER mcpsd");
		pg_url_for(bad, sizeof(bad), pw_url, "pw_db");
		r = schema_open(bad, &st, err, sizeof(err));
		ok(r == 0, "the password in the URL logs in: %s", err);
		store_close(st);
		st = NULL;
	}
	{
		char red[256];

		store_url_redact("postgresql://u:pw1@h:5/db?password=pw2&x=1",
		                 red, sizeof(red));
		ok(!strstr(red, "pw1") && !strstr(red, "pw2") &&
		       strstr(red, "u:*****@h:5/db") && strstr(red, "&x=1"),
		   "a URL is printed without its passwords: %s", red);
	}
}
#else
static void test_refusals_pg(void)
{
}
#endif

static void test_refusals(void)
{
	char p[300], err[512] = "";
	struct store *st = NULL;
	struct stat sb;
	int r, fd;

	/* Newer than this build. */
	path_of(p, sizeof(p), "newer.db");
	r = store_open_with(p, migs, 2, &st, err, sizeof(err));
	is_int(r, 0, "a file at version 2");
	store_close(st);
	st = NULL;
	r = store_open_with(p, migs, 1, &st, err, sizeof(err));
	is_int(r, -EPROTO, "a build that knows only version 1 refuses it");
	ok(strstr(err, "newer") && strstr(err, "version 2"),
	   "and says a newer version wrote it: %s", err);
	ok(st == NULL, "no handle on failure");

	/* A failing migration leaves the previous version. */
	r = store_open_with(p, bad_migs, 3, &st, err, sizeof(err));
	is_int(r, -EIO, "a failing migration fails the open");
	ok(strstr(err, "version 3") && strstr(err, "unchanged at version 2"),
	   "and names the step and the version kept: %s", err);
	r = store_open_with(p, migs, 2, &st, err, sizeof(err));
	ok(r == 0 && store_version(st) == 2, "the file is still usable");
	is_int(table_count(st, "test_x"), 0,
	       "nothing of the failed step remains");
	store_close(st);
	st = NULL;
	if (pg_url) {
		test_refusals_pg();
		return;
	}

	/* Not a database. */
	path_of(p, sizeof(p), "garbage.db");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 64; i++)
		(void)!write(fd, "this is not a database, not at all.\n", 36);
	close(fd);
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, -EPROTO, "a file that is not a database is refused");
	ok(strstr(err, "not an SQLite database"), "with a message: %s", err);

	/* Another program's database. */
	path_of(p, sizeof(p), "foreign.db");
	{
		sqlite3 *db = NULL;

		sqlite3_open(p, &db);
		sqlite3_exec(db, "CREATE TABLE notes (x)", NULL, NULL, NULL);
		sqlite3_close(db);
	}
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, -EPROTO, "another program's database is refused");
	ok(strstr(err, "another program"), "with a message: %s", err);
	ok(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0644,
	   "and its mode is left alone");

	/* A missing directory. */
	path_of(p, sizeof(p), "no/such/dir/state.db");
	r = schema_open(p, &st, err, sizeof(err));
	is_int(r, -ENOENT, "a missing directory is refused");
	ok(strstr(err, "directory does not exist") && strstr(err, "STORE_PATH"),
	   "with what to do: %s", err);

	/* A symbolic link. */
	{
		char target[300];

		path_of(target, sizeof(target), "daemon.db");
		path_of(p, sizeof(p), "link.db");
		(void)!symlink(target, p);
		r = schema_open(p, &st, err, sizeof(err));
		is_int(r, -ELOOP, "a symbolic link is refused");
	}

	/* A readable file of ours is made private. */
	path_of(p, sizeof(p), "loose.db");
	r = schema_open(p, &st, err, sizeof(err));
	store_close(st);
	st = NULL;
	chmod(p, 0644);
	r = schema_open(p, &st, err, sizeof(err));
	ok(r == 0 && stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600,
	   "a file readable by others gets mode 600");
	store_close(st);
}

static void test_transactions(void)
{
	static const char ins[] = "INSERT INTO test_rows (seq, pad) VALUES "
	                          "(?1, 'x')";
	char p[300], err[512] = "";
	struct store *st = NULL;
	struct store_tx *tx;
	struct store_stmt *s;
	int r;

	path_of(p, sizeof(p), "tx.db");
	r = store_open_with(p, migs, 2, &st, err, sizeof(err));
	is_int(r, 0, "open");
	if (r < 0)
		return;
	r = store_begin(st, true, &tx);
	s = store_stmt(tx, ins);
	store_bind_int64(s, 1, 1);
	r = store_run(tx, s);
	is_int(store_changes(tx), 1, "one row inserted");
	store_rollback(tx);
	is_int(query1(st, "SELECT count(*) FROM test_rows"), 0,
	       "a rolled back insert is gone");

	r = store_begin(st, true, &tx);
	s = store_stmt(tx, ins);
	store_bind_int64(s, 1, 1);
	r = store_run(tx, s);
	is_int(store_commit(tx), 0, "commit");
	is_int(query1(st, "SELECT count(*) FROM test_rows"), 1,
	       "a committed insert stays");

	/* A relaxed transaction commits and rolls back alike; on SQLite
	 * the connection is back at synchronous=FULL (2) afterwards. */
	r = store_begin_relaxed(st, &tx);
	s = r == 0 ? store_stmt(tx, ins) : NULL;
	store_bind_int64(s, 1, 7);
	r = r == 0 ? store_run(tx, s) : r;
	store_rollback(tx);
	is_int(query1(st, "SELECT count(*) FROM test_rows"), 1,
	       "a rolled back relaxed insert is gone");
	r = store_begin_relaxed(st, &tx);
	s = r == 0 ? store_stmt(tx, ins) : NULL;
	store_bind_int64(s, 1, 7);
	r = r == 0 ? store_run(tx, s) : r;
	is_int(r == 0 ? store_commit(tx) : r, 0, "a relaxed commit");
	is_int(query1(st, "SELECT count(*) FROM test_rows"), 2,
	       "its insert stays");
	if (!pg_url)
		is_int(query1(st, "PRAGMA synchronous"), 2,
		       "synchronous is FULL again after it");
	r = store_begin(st, true, &tx);
	s = store_stmt(tx, "DELETE FROM test_rows WHERE seq = 7");
	r = r == 0 ? store_run(tx, s) : r;
	is_int(r == 0 ? store_commit(tx) : r, 0, "an ordinary one after it");

	/* A failed statement poisons the transaction. */
	r = store_begin(st, true, &tx);
	s = store_stmt(tx, ins);
	store_bind_int64(s, 1, 2);
	r = store_run(tx, s);
	s = store_stmt(tx, ins);
	store_bind_int64(s, 1, 1); /* duplicate key */
	r = store_run(tx, s);
	is_int(r, -EEXIST, "a constraint violation is -EEXIST");
	ok(store_commit(tx) < 0, "commit refuses a failed transaction");
	is_int(query1(st, "SELECT count(*) FROM test_rows"), 1,
	       "and nothing of it was written");
	/*
	 * Placeholders: '?' in quoted strings, quoted names and comments is
	 * text; "?N" and a bare '?' (one more than the largest so far) are
	 * parameters on both backends.
	 */
	r = store_begin(st, false, &tx);
	s = r == 0 ? store_stmt(tx, "SELECT '?''?', ?1, \"x?\", ? /* ? */ "
	                            "FROM (SELECT 5 AS \"x?\") t -- ?\n")
	           : NULL;
	store_bind_int64(s, 1, 41);
	store_bind_text(s, 2, "v?");
	ok(r == 0 && store_step(tx, s) == 1 && store_col_text(s, 0) &&
	       strcmp(store_col_text(s, 0), "?'?") == 0 &&
	       store_col_int64(s, 1) == 41 && store_col_int64(s, 2) == 5 &&
	       store_col_text(s, 3) && strcmp(store_col_text(s, 3), "v?") == 0,
	   "'?' inside quotes and comments is not a parameter");
	ok(r == 0 && store_step(tx, s) == 0, "one row");
	s = r == 0 ? store_stmt(tx, "SELECT ?") : NULL;
	store_bind_int64(s, 9, 1);
	ok(r == 0 && s && store_step(tx, s) < 0,
	   "binding a parameter the statement lacks fails its step");
	if (r == 0)
		store_rollback(tx);

	/* SQLite finds the error at prepare, PostgreSQL at the first step. */
	r = store_begin(st, true, &tx);
	s = r == 0 ? store_stmt(tx, "SELEKT nonsense") : NULL;
	ok(r == 0 && (s == NULL || store_step(tx, s) < 0),
	   "a bad statement fails");
	ok(store_commit(tx) < 0, "and fails the transaction");
	store_close(st);
}

struct writer {
	struct store *st;
	int n;
	int failures;
};

static void *writer_main(void *arg)
{
	static const char upd[] = "UPDATE test_counter SET n = n + 1";
	struct writer *w = arg;

	for (int i = 0; i < w->n; i++) {
		struct store_tx *tx;

		if (store_begin(w->st, true, &tx) < 0) {
			w->failures++;
			continue;
		}
		if (store_run(tx, store_stmt(tx, upd)) < 0 ||
		    store_commit(tx) < 0)
			w->failures++;
	}
	return NULL;
}

static void test_threads(void)
{
	char p[300], err[512] = "";
	struct store *st = NULL;
	pthread_t t[4];
	struct writer w[4];
	int failures = 0;

	path_of(p, sizeof(p), "threads.db");
	if (store_open_with(p, migs, 2, &st, err, sizeof(err)) < 0) {
		ok(false, "open: %s", err);
		return;
	}
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){.st = st, .n = 100};
		pthread_create(&t[i], NULL, writer_main, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
	}
	is_int(failures, 0, "four threads wrote without a failure");
	is_int(query1(st, "SELECT n FROM test_counter"), 400,
	       "and no increment was lost");
	store_close(st);
}

/*
 * The child writes transactions forever: a row and the counter, then it
 * reports the sequence number on the pipe once store_commit returned.
 */
static void crash_child(const char *p, int wfd, int start)
{
	static const char ins[] =
	    "INSERT INTO test_rows (seq, pad) VALUES (?1, ?2)";
	static const char upd[] = "UPDATE test_counter SET n = ?1";
	char err[512], pad[2048];
	struct store *st = NULL;

	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	if (store_open_with(p, migs, 2, &st, err, sizeof(err)) < 0)
		_exit(3);
	for (int seq = start;; seq++) {
		struct store_tx *tx;
		struct store_stmt *s;

		/* Every other one relaxed: a killed process loses neither. */
		if ((seq % 2 ? store_begin_relaxed(st, &tx)
		             : store_begin(st, true, &tx)) < 0)
			_exit(4);
		s = store_stmt(tx, ins);
		store_bind_int64(s, 1, seq);
		store_bind_text(s, 2, pad);
		if (store_run(tx, s) < 0)
			_exit(5);
		s = store_stmt(tx, upd);
		store_bind_int64(s, 1, seq);
		if (store_run(tx, s) < 0 || store_commit(tx) < 0)
			_exit(6);
		if (write(wfd, &seq, sizeof(seq)) != sizeof(seq))
			_exit(7);
	}
}

static void test_crash(void)
{
	char p[300], err[512] = "";
	int acked = 0;
	bool all_ok = true;

	path_of(p, sizeof(p), "crash.db");
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int round = 0; round < 8; round++) {
		struct store *st = NULL;
		int fds[2], seq, status = 0;
		long long n, rows, maxseq;
		pid_t pid;
		char ic[32] = "";

		if (pipe(fds) < 0)
			return;
		pid = fork();
		if (pid == 0) {
			close(fds[0]);
			crash_child(p, fds[1], acked + 1);
		}
		close(fds[1]);
		/* Let it commit a few, then kill it at a random moment. */
		for (int k = 0; k < 5 + rand() % 20; k++) {
			if (read(fds[0], &seq, sizeof(seq)) != sizeof(seq))
				break;
			acked = seq;
		}
		usleep((useconds_t)(rand() % 3000));
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		/* Acknowledgements already in the pipe count as well. */
		while (read(fds[0], &seq, sizeof(seq)) == sizeof(seq))
			acked = seq;
		close(fds[0]);
		if (!WIFSIGNALED(status)) {
			ok(false, "round %d: the writer died on its own (%d)",
			   round, WEXITSTATUS(status));
			all_ok = false;
			break;
		}
		if (store_open_with(p, migs, 2, &st, err, sizeof(err)) < 0) {
			ok(false, "round %d: reopen after SIGKILL: %s", round,
			   err);
			all_ok = false;
			break;
		}
		{
			struct store_tx *tx;
			struct store_stmt *s;

			if (pg_url) /* the server's business */
				snprintf(ic, sizeof(ic), "ok");
			else if (store_begin(st, false, &tx) == 0) {
				s = store_stmt(tx, "PRAGMA integrity_check");
				if (s && store_step(tx, s) == 1)
					snprintf(ic, sizeof(ic), "%s",
					         store_col_text(s, 0));
				store_rollback(tx);
			}
		}
		n = query1(st, "SELECT n FROM test_counter");
		rows = query1(st, "SELECT count(*) FROM test_rows");
		maxseq = query1(st, "SELECT coalesce(max(seq), 0) FROM "
		                    "test_rows");
		if (strcmp(ic, "ok") != 0 || n != rows || n != maxseq ||
		    n < acked) {
			ok(false,
			   "round %d: integrity %s, counter %lld, rows %lld, "
			   "max %lld, acknowledged %d",
			   round, ic, n, rows, maxseq, acked);
			all_ok = false;
		}
		/* The next child continues after what is in the file. */
		acked = (int)n;
		store_close(st);
	}
	ok(all_ok,
	   "8 SIGKILLs mid-write: every acknowledged commit is there, "
	   "every transaction whole, integrity ok (%d committed)",
	   acked);
	ok(acked > 8, "the writers committed something");
}

/* ---- two replicas ------------------------------------------------------- */

struct replica {
	const char *where;
	struct store *st;
	int n, failures, wins;
	pthread_barrier_t *go;
};

/* Read, then write what was read plus one: lost if not serialized. */
static void *counter_main(void *arg)
{
	static const char get[] = "SELECT n FROM test_counter WHERE id = 1";
	static const char put[] = "UPDATE test_counter SET n = ? WHERE id = 1";
	struct replica *w = arg;

	for (int i = 0; i < w->n; i++) {
		struct store_tx *tx;
		struct store_stmt *s;
		long long n = -1;

		if (store_begin(w->st, true, &tx) < 0) {
			w->failures++;
			continue;
		}
		s = store_stmt(tx, get);
		if (store_step(tx, s) == 1)
			n = store_col_int64(s, 0);
		/* Give the other replica every chance to interleave. */
		if (i % 8 == 0)
			usleep(200);
		s = store_stmt(tx, put);
		store_bind_int64(s, 1, n + 1);
		if (n < 0 || store_run(tx, s) < 0 || store_commit(tx) < 0) {
			if (n < 0)
				store_rollback(tx);
			w->failures++;
		}
	}
	return NULL;
}

/* Each round: both replicas try to rotate the same refresh token. */
static void *rotate_main(void *arg)
{
	struct replica *w = arg;

	for (int i = 0; i < w->n; i++) {
		unsigned char h[OAUTH_DB_HASH_LEN];
		struct oauth_db_token t;
		struct store_tx *tx;
		int r;

		memset(h, 0, sizeof(h));
		h[0] = (unsigned char)i;
		pthread_barrier_wait(w->go);
		if (store_begin(w->st, true, &tx) < 0) {
			w->failures++;
			continue;
		}
		r = oauth_db_token_get(tx, h, OAUTH_DB_REFRESH, &t);
		if (r == 0 && t.rotated_at == 0) {
			usleep(500);
			if (oauth_db_token_rotate(tx, h, 1000 + i) == 0 &&
			    store_commit(tx) == 0)
				w->wins++;
			else
				w->failures++;
			continue;
		}
		if (r < 0)
			w->failures++;
		store_rollback(tx);
	}
	return NULL;
}

static void *charge_main(void *arg)
{
	struct replica *w = arg;
	struct budget *b = NULL;

	if (budget_create(w->st, 3600, 3600, &b) < 0) {
		w->failures = w->n;
		return NULL;
	}
	for (int i = 0; i < w->n; i++) {
		if (budget_charge(b, "alice", 7, 1800000000) < 0)
			w->failures++;
	}
	budget_destroy(b);
	return NULL;
}

static void two_replicas(const char *what, const char *where,
                         void *(*fn)(void *), int n, struct replica *w)
{
	pthread_barrier_t go;
	pthread_t t[2];
	char err[512];

	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct replica){.where = where, .n = n, .go = &go};
		if (schema_open(where, &w[i].st, err, sizeof(err)) < 0)
			printf("# %s: open: %s\n", what, err);
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, fn, &w[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
}

static void test_replicas(void)
{
	char p[600], err[512] = "";
	struct store *st = NULL, *a = NULL, *b = NULL;
	struct replica w[2];
	struct store_tx *tx;
	int failures = 0;

	/* A counter, read then written by two connections. */
	path_of(p, sizeof(p), "replicas.db");
	if (store_open_with(p, migs, 2, &a, err, sizeof(err)) < 0 ||
	    store_open_with(p, migs, 2, &b, err, sizeof(err)) < 0) {
		ok(false, "two connections: %s", err);
		store_close(a);
		return;
	}
	{
		pthread_t t[2];

		w[0] = (struct replica){.st = a, .n = 150};
		w[1] = (struct replica){.st = b, .n = 150};
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, counter_main, &w[i]);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
	}
	is_int(w[0].failures + w[1].failures, 0,
	       "two replicas read-check-wrote 300 times without a failure");
	is_int(query1(a, "SELECT n FROM test_counter"), 300,
	       "and no update was lost");
	store_close(a);
	store_close(b);

	/* Refresh-token rotation: one winner per token. */
	path_of(p, sizeof(p), "rotate.db");
	if (schema_open(p, &st, err, sizeof(err)) < 0) {
		ok(false, "open: %s", err);
		return;
	}
	if (store_begin(st, true, &tx) == 0) {
		char meta[] = "{}";
		struct oauth_db_client c = {.auth_method = "none",
		                            .metadata = meta};
		struct oauth_db_grant g = {.created_at = 1, .used_at = 1};
		int r;

		snprintf(c.client_id, sizeof(c.client_id), "client-1");
		snprintf(g.grant_id, sizeof(g.grant_id), "%032d", 7);
		snprintf(g.client_id, sizeof(g.client_id), "client-1");
		snprintf(g.tenant, sizeof(g.tenant), "alice");
		r = oauth_db_client_insert(tx, &c);
		if (r == 0)
			r = oauth_db_grant_insert(tx, &g);
		for (int i = 0; r == 0 && i < 40; i++) {
			unsigned char h[OAUTH_DB_HASH_LEN];

			memset(h, 0, sizeof(h));
			h[0] = (unsigned char)i;
			r = oauth_db_token_insert(tx, h, g.grant_id,
			                          OAUTH_DB_REFRESH, 1LL << 40);
		}
		is_int(r == 0 ? store_commit(tx) : (store_rollback(tx), r), 0,
		       "40 refresh tokens stored");
	}
	store_close(st);
	two_replicas("rotate", p, rotate_main, 40, w);
	failures = w[0].failures + w[1].failures;
	is_int(failures, 0, "two replicas tried to rotate each token");
	ok(w[0].wins + w[1].wins == 40,
	   "exactly one rotation per token won (%d + %d)", w[0].wins,
	   w[1].wins);
	store_close(w[0].st);
	store_close(w[1].st);

	/* Budget charging from two replicas. */
	path_of(p, sizeof(p), "charge.db");
	two_replicas("charge", p, charge_main, 60, w);
	is_int(w[0].failures + w[1].failures, 0,
	       "two replicas charged 60 runs each");
	{
		struct budget *bg = NULL;
		struct budget_state bs;

		memset(&bs, 0, sizeof(bs));
		if (budget_create(w[0].st, 3600, 3600, &bg) == 0 &&
		    budget_check(bg, "alice", 1800000000, &bs) == 0)
			ok(bs.used_ms == 7 * 120 && bs.runs == 120,
			   "no charge was lost (%lld ms, %u runs)", bs.used_ms,
			   bs.runs);
		else
			ok(false, "budget readable");
		budget_destroy(bg);
	}
	store_close(w[0].st);
	store_close(w[1].st);
}

struct opener {
	const char *where;
	pthread_barrier_t *go;
	int r;
	unsigned version;
	char err[512];
};

static void *open_main(void *arg)
{
	struct opener *o = arg;
	struct store *st = NULL;

	pthread_barrier_wait(o->go);
	o->r = schema_open(o->where, &st, o->err, sizeof(o->err));
	o->version = st ? store_version(st) : 0;
	store_close(st);
	return NULL;
}

/* Two replicas starting at once on a new database both come up. */
static void test_migration_race(void)
{
	bool all = true;

	for (int round = 0; round < 3; round++) {
		char p[600], name[32];
		pthread_barrier_t go;
		struct opener o[2];
		pthread_t t[2];

		snprintf(name, sizeof(name), "race%d.db", round);
		path_of(p, sizeof(p), name);
		pthread_barrier_init(&go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			o[i] = (struct opener){.where = p, .go = &go};
			pthread_create(&t[i], NULL, open_main, &o[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);
		for (int i = 0; i < 2; i++) {
			if (o[i].r != 0 || o[i].version != schema_version()) {
				printf("# round %d, opener %d: %d, version "
				       "%u: %s\n",
				       round, i, o[i].r, o[i].version,
				       o[i].err);
				all = false;
			}
		}
	}
	ok(all, "3 rounds of two stores migrating a new database at once: "
	        "both open at the latest version");
}

/* PostgreSQL: the server goes away under an open store, and comes back. */
static void test_restart(void)
{
	const char *ctl = getenv("MCPSD_TEST_PG_CTL");
	const char *pgdir = getenv("MCPSD_TEST_PG_DIR");
	char p[600], err[512] = "", cmd[700];
	struct store *st = NULL;
	struct store_tx *tx;
	cJSON *h;
	int r;

	if (!ctl || !pgdir) {
		ok(false, "MCPSD_TEST_PG_CTL and _DIR are set (tests/lib/pg.sh "
		          "run)");
		return;
	}
	path_of(p, sizeof(p), "restart.db");
	if (store_open_with(p, migs, 2, &st, err, sizeof(err)) < 0) {
		ok(false, "open: %s", err);
		return;
	}
	is_int(query1(st, "SELECT n FROM test_counter"), 0, "usable");

	/* Restarted between two transactions: nobody notices. */
	snprintf(cmd, sizeof(cmd), "'%s' restart '%s' >/dev/null", ctl, pgdir);
	is_int(system(cmd), 0, "the server restarts");
	r = store_begin(st, true, &tx);
	is_int(r, 0, "the next transaction reconnects");
	if (r == 0) {
		r = store_run(tx, store_stmt(tx, "UPDATE test_counter SET n = "
		                                 "n + 1"));
		is_int(r == 0 ? store_commit(tx) : (store_rollback(tx), r), 0,
		       "and its statements (prepared again) work");
	}

	/* Stopped: -EIO, health degraded, no crash. */
	snprintf(cmd, sizeof(cmd), "'%s' stop '%s'", ctl, pgdir);
	is_int(system(cmd), 0, "the server stops");
	r = store_begin(st, false, &tx);
	is_int(r, -EIO, "a transaction fails with -EIO while it is down");
	if (r == 0)
		store_rollback(tx);
	h = cJSON_CreateObject();
	ok(!store_health(st, h), "health reports the store down");
	cJSON_Delete(h);

	/* Back: the store recovers by itself. */
	snprintf(cmd, sizeof(cmd), "'%s' start '%s' >/dev/null", ctl, pgdir);
	is_int(system(cmd) == -1 ? -1 : 0, 0, "the server starts again");
	is_int(query1(st, "SELECT n FROM test_counter"), 1,
	       "the store answers again, the committed update kept");
	h = cJSON_CreateObject();
	ok(store_health(st, h), "health is ok again");
	cJSON_Delete(h);
	store_close(st);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mcpsd-store-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	pg_url = getenv("MCPSD_TEST_PG_URL");
	if (pg_url && !*pg_url)
		pg_url = NULL;
	printf("# backend: %s\n", pg_url ? "postgresql" : "sqlite");
#if !MCPSD_HAVE_PG
	if (pg_url) {
		printf("1..0 # SKIP this build has no PostgreSQL support\n");
		return 0;
	}
#endif
	test_create();
	test_refusals();
	test_transactions();
	test_threads();
	test_replicas();
	test_migration_race();
	test_crash();
	if (pg_url)
		test_restart();
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		(void)!system(cmd);
	}
	return tap_done();
}
