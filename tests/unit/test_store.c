/* SPDX-License-Identifier: MIT */
/*
 * Store tests: creation (mode 0600, WAL), the daemon's own migrations,
 * refusal of a newer, foreign or damaged file with a message, a failing
 * migration leaving the file as it was, transactions (commit, rollback, a
 * failed statement), many threads writing at once, and durability: a child
 * process writing transactions is killed with SIGKILL at random moments,
 * and every transaction it saw committed must be there, whole, after the
 * file is reopened.
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

#include "store.h"
#include "tap.h"

static char dir[256];

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

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
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

static void test_create(void)
{
	char p[300], wal[310], err[512] = "";
	struct store *st = NULL;
	struct stat sb;
	int r;

	path_of(p, sizeof(p), "daemon.db");
	r = store_open(p, &st, err, sizeof(err));
	is_int(r, 0, "the daemon's store opens");
	if (r < 0) {
		printf("# %s\n", err);
		return;
	}
	is_int(store_version(st), store_latest_version(),
	       "a new file gets every migration");
	memset(&sb, 0, sizeof(sb));
	r = stat(p, &sb);
	ok(r == 0 && (sb.st_mode & 0777) == 0600, "the file has mode 600 (%o)",
	   (unsigned)(sb.st_mode & 0777));
	is_int(query1(st, "SELECT count(*) FROM sqlite_schema WHERE "
	                  "name = 'oauth_grants'"),
	       1, "the oauth tables exist");
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
	{
		cJSON *h = cJSON_CreateObject();

		ok(store_health(st, h), "health says ok");
		ok(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "store"),
		                       "schema") != NULL,
		   "health reports the schema version");
		cJSON_Delete(h);
	}
	store_close(st);
	st = NULL;
	r = store_open(p, &st, err, sizeof(err));
	ok(r == 0 && store_version(st) == store_latest_version(),
	   "reopening keeps the version");
	store_close(st);
}

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
	is_int(query1(st, "SELECT count(*) FROM sqlite_schema WHERE name = "
	                  "'test_x'"),
	       0, "nothing of the failed step remains");
	store_close(st);
	st = NULL;

	/* Not a database. */
	path_of(p, sizeof(p), "garbage.db");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 64; i++)
		(void)!write(fd, "this is not a database, not at all.\n", 36);
	close(fd);
	r = store_open(p, &st, err, sizeof(err));
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
	r = store_open(p, &st, err, sizeof(err));
	is_int(r, -EPROTO, "another program's database is refused");
	ok(strstr(err, "another program"), "with a message: %s", err);
	ok(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0644,
	   "and its mode is left alone");

	/* A missing directory. */
	path_of(p, sizeof(p), "no/such/dir/state.db");
	r = store_open(p, &st, err, sizeof(err));
	is_int(r, -ENOENT, "a missing directory is refused");
	ok(strstr(err, "directory does not exist") && strstr(err, "STORE_PATH"),
	   "with what to do: %s", err);

	/* A symbolic link. */
	{
		char target[300];

		path_of(target, sizeof(target), "daemon.db");
		path_of(p, sizeof(p), "link.db");
		(void)!symlink(target, p);
		r = store_open(p, &st, err, sizeof(err));
		is_int(r, -ELOOP, "a symbolic link is refused");
	}

	/* A readable file of ours is made private. */
	path_of(p, sizeof(p), "loose.db");
	r = store_open(p, &st, err, sizeof(err));
	store_close(st);
	st = NULL;
	chmod(p, 0644);
	r = store_open(p, &st, err, sizeof(err));
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
	ok(store_begin(st, true, &tx) == 0 &&
	       store_stmt(tx, "SELEKT nonsense") == NULL,
	   "a bad statement gives NULL");
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

		if (store_begin(st, true, &tx) < 0)
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

			if (store_begin(st, false, &tx) == 0) {
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

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mcpsd-store-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_create();
	test_refusals();
	test_transactions();
	test_threads();
	test_crash();
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		(void)!system(cmd);
	}
	return tap_done();
}
