/* SPDX-License-Identifier: MIT */
/*
 * Workspace manager tests: names, quota mode none (always), quota mode loop
 * (when the machine allows loop mounts: root with /dev/loop-control),
 * locking, the global cap, per-tenant caps and creation rates (and the
 * tenant recorded in the marker across restarts), the start-up disk check,
 * retention with hostile trees, run support. With
 * MCPSD_TEST_DOCKER_IMAGE set (e.g. mcp-sandboxd/runner-bash:latest) a real
 * container also tries to break the loop quota.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fs/fsname.h"
#include "fs/fstree.h"
#include "tap.h"
#include "tools/tools_content.h"
#include "workspace/workspace.h"
#include "util/mono.h"
#include "workspace/workspace_internal.h"

static char root[256], host[] = "/srv/host-view";
static char mode_none[] = "none", mode_loop[] = "loop";
static char base_url[] = "https://files.example";

static void cfg_init(struct config *c, char *mode, unsigned char secret_byte)
{
	memset(c, 0, sizeof(*c));
	c->sandbox_root = root;
	c->sandbox_host_path = host;
	memset(c->file_secret, secret_byte, 32);
	c->file_secret_len = 32;
	c->quota_mode = mode;
	c->workspace_quota_bytes = 1024 * 1024;
	c->workspace_max_files = 50;
	c->max_workspaces = 100;
	c->retention_hours = 1;
	c->retention_s = 3600; /* what config_derive makes of it */
	c->upload_max_bytes = 1024 * 1024;
	c->inline_image_max_bytes = 64 * 1024;
	c->files_base_url = base_url;
	c->public_base_url = base_url;
	c->sandbox_uid = 64321;
	c->sandbox_gid = 64321;
	c->output_saved_files = 10;
	c->output_saved_bytes = 32 * 1024 * 1024;
}

static void age_marker(const char *name, long hours)
{
	char p[512];
	struct timespec ts[2];

	snprintf(p, sizeof(p), "%s/meta/%s", root, name);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= hours * 3600;
	ts[1] = ts[0];
	if (utimensat(AT_FDCWD, p, ts, 0) < 0)
		perror("utimensat");
}

static bool exists_at(const char *rel)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, &st) == 0;
}

/* ---- names ------------------------------------------------------------ */

static void test_names(void)
{
	struct config c1, c2;
	struct workspace_mgr *m1 = NULL, *m2 = NULL;
	char a[65], b[65], err[300];

	cfg_init(&c1, mode_none, 0x11);
	cfg_init(&c2, mode_none, 0x22);
	ok(workspace_mgr_create(&c1, &m1, err, sizeof(err)) == 0,
	   "manager created (%s)", err);
	workspace_name_for(m1, "alice", "default", a);
	workspace_name_for(m1, "bob", "default", b);
	ok(strlen(a) == 64 && strspn(a, "0123456789abcdef") == 64,
	   "name is 64 lowercase hex");
	ok(strcmp(a, b) != 0, "tenants with the same conversation id differ");
	workspace_name_for(m1, "ab", "c", a);
	workspace_name_for(m1, "a", "bc", b);
	ok(strcmp(a, b) != 0, "length prefixes: ab+c != a+bc");
	workspace_name_for(m1, "", "abc", a);
	workspace_name_for(m1, "abc", "", b);
	ok(strcmp(a, b) != 0, "length prefixes: ''+abc != abc+''");
	workspace_name_for(m1, "t", "conv", a);
	workspace_name_for(m1, "t", "conv", b);
	ok(strcmp(a, b) == 0, "names are stable");
	workspace_mgr_destroy(m1);
	ok(workspace_mgr_create(&c2, &m2, err, sizeof(err)) == 0,
	   "second manager");
	workspace_name_for(m2, "t", "conv", b);
	ok(strcmp(a, b) != 0, "another FILE_SECRET gives other names");
	workspace_mgr_destroy(m2);

	ok(workspace_check_conversation_id("chat-42", err, sizeof(err)) == 0,
	   "conversation id accepted");
	ok(workspace_check_conversation_id("", err, sizeof(err)) == -EINVAL,
	   "empty id refused: %s", err);
	ok(workspace_check_conversation_id("a\r\nb", err, sizeof(err)) ==
	       -EINVAL,
	   "CR/LF id refused: %s", err);
	ok(workspace_check_conversation_id("../../etc", err, sizeof(err)) == 0,
	   "id with dots is fine: it never becomes a path");
	{
		char longid[300];

		memset(longid, 'x', 257);
		longid[257] = '\0';
		ok(workspace_check_conversation_id(longid, err, sizeof(err)) ==
		       -EINVAL,
		   "257-byte id refused");
	}
}

/* ---- quota mode none -------------------------------------------------- */

struct lock_arg {
	struct workspace *ws;
	int r;
	long long waited_ms;
};

static void *lock_thread(void *p)
{
	struct lock_arg *a = p;
	long long t0 = mono_ms();

	a->r = workspace_lock(a->ws, 5000);
	a->waited_ms = mono_ms() - t0;
	return NULL;
}

/* What the deferred write was called with. */
struct defer_log {
	int calls;
	int locked; /* calls that found the workspace locked by their handle */
	char conv[64];
};

static void defer_fn(struct workspace *ws, const char *conv, void *arg)
{
	struct defer_log *l = arg;

	l->calls++;
	l->locked += workspace_lock(ws, 0) == -EDEADLK;
	snprintf(l->conv, sizeof(l->conv), "%s", conv ? conv : "(null)");
}

/* Opens (t, conv), locks it and defers the write; the handle stays open. */
static struct workspace *defer_run(struct workspace_mgr *m, const char *conv)
{
	struct workspace *ws = NULL;
	char err[300];

	if (workspace_open(m, "t", conv, true, &ws, err, sizeof(err)) < 0 ||
	    workspace_lock(ws, 1000) < 0) {
		workspace_close(ws);
		return NULL;
	}
	workspace_defer(ws);
	return ws;
}

/*
 * Deferred writes: at most one per interval, the rest left due for the
 * job, a download or the shutdown; never while a run holds the lock.
 */
static void test_deferred(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws, *reader = NULL;
	struct defer_log l = {0};
	char err[600], name[65];

	cfg_init(&c, mode_none, 0x44);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "manager (%s)",
	   err);
	if (!m)
		return;
	/* An interval long enough for valgrind's pace between the steps. */
	workspace_mgr_set_deferred(m, 1000, defer_fn, &l);
	ws = defer_run(m, "conv-d");
	ok(ws && l.calls == 1 && l.locked == 1 && strcmp(l.conv, "conv-d") == 0,
	   "the first run writes at once, locked, for its conversation");
	workspace_defer(ws);
	workspace_defer(ws);
	is_int(l.calls, 1, "two more runs within the interval: left due");
	workspace_close(ws);
	(void)workspace_job_deferred(m, mono_ms() + 1000);
	is_int(l.calls, 1, "the job leaves it until it is due");
	usleep(1100 * 1000);
	(void)workspace_job_deferred(m, mono_ms() + 1000);
	ok(l.calls == 2 && l.locked == 2 && strcmp(l.conv, "conv-d") == 0,
	   "once due, the job writes it (one write for both runs), locked");
	(void)workspace_job_deferred(m, mono_ms() + 1000);
	is_int(l.calls, 2, "and nothing is left");

	/* A download first. */
	workspace_close(defer_run(m, "conv-d"));
	is_int(l.calls, 2, "a run right after the job's write: left due");
	workspace_name_for(m, "t", "conv-d", name);
	ok(workspace_open_by_name(m, name, &reader) == 0, "a reader opens it");
	workspace_flush_deferred(reader);
	ok(l.calls == 3 && l.locked == 3, "and has it written first");
	workspace_flush_deferred(reader);
	is_int(l.calls, 3, "once");
	workspace_close(reader);

	/* Never beside a run. */
	ws = defer_run(m, "conv-d");
	ok(ws && l.calls == 3, "a run leaves it due and keeps the lock");
	usleep(1100 * 1000);
	(void)workspace_job_deferred(m, mono_ms() + 1000);
	is_int(l.calls, 3, "past due, the job does not wait for the lock");
	ok(workspace_open_by_name(m, name, &reader) == 0, "a reader");
	workspace_flush_deferred(reader);
	is_int(l.calls, 3, "nor does a download");
	workspace_close(reader);
	workspace_close(ws);
	(void)workspace_job_deferred(m, mono_ms() + 1000);
	is_int(l.calls, 3, "the job tries again an interval later");
	workspace_mgr_flush_deferred(m, 1000);
	ok(l.calls == 4 && l.locked == 4,
	   "the shutdown's flush writes it, due or not");

	/* Interval 0 (replicas sharing the root): every run writes. */
	workspace_mgr_set_deferred(m, 0, defer_fn, &l);
	ws = defer_run(m, "conv-e");
	workspace_defer(ws);
	workspace_close(ws);
	ok(l.calls == 6 && strcmp(l.conv, "conv-e") == 0,
	   "with interval 0 each run writes at once");

	/* One left pending at the end: the manager frees it (sanitizers). */
	workspace_mgr_set_deferred(m, 1000, defer_fn, &l);
	ws = defer_run(m, "conv-f");
	workspace_defer(ws);
	workspace_close(ws);
	is_int(l.calls, 7, "one written, one pending when the manager goes");
	workspace_mgr_destroy(m);
}

/* Replicas share a root; a lone daemon does not share it with anyone. */
static void test_replica_locks(void)
{
	struct config c1, c2, c3, lone;
	struct workspace_mgr *m1 = NULL, *m2 = NULL, *m3 = NULL, *m = NULL;
	char err[600], r1[] = "r1", r2[] = "r2", loop[] = "loop";
	char auto_mode[] = "auto";
	int r;

	cfg_init(&c1, mode_none, 0x33);
	c1.replica_name = r1;
	c2 = c1;
	c2.replica_name = r2;
	c3 = c1;
	lone = c1;
	lone.replica_name = NULL;
	ok(workspace_mgr_create(&c1, &m1, err, sizeof(err)) == 0 &&
	       workspace_mgr_create(&c2, &m2, err, sizeof(err)) == 0,
	   "replicas r1 and r2 share one SANDBOX_ROOT (%s)", err);
	r = workspace_mgr_create(&c3, &m3, err, sizeof(err));
	ok(r == -EBUSY && m3 == NULL && strstr(err, "MCP_REPLICA_NAME=r1") &&
	       strstr(err, "its own name"),
	   "a second r1 is refused: %s", err);
	r = workspace_mgr_create(&lone, &m, err, sizeof(err));
	ok(r == -EBUSY && m == NULL && strstr(err, "MCP_REPLICA_NAME"),
	   "a daemon without a replica name is refused beside them: %s", err);
	workspace_mgr_destroy(m1);
	workspace_mgr_destroy(m2);
	ok(workspace_mgr_create(&lone, &m, err, sizeof(err)) == 0,
	   "once they stopped, a lone daemon takes the root (%s)", err);
	r = workspace_mgr_create(&c1, &m1, err, sizeof(err));
	ok(r == -EBUSY && m1 == NULL && strstr(err, "without MCP_REPLICA_NAME"),
	   "and a replica is refused beside it: %s", err);
	workspace_mgr_destroy(m);
	c1.quota_mode = loop;
	r = workspace_mgr_create(&c1, &m1, err, sizeof(err));
	ok(r == -EINVAL && m1 == NULL &&
	       strstr(err, "WORKSPACE_QUOTA_MODE=none"),
	   "loop quotas are refused for replicas: %s", err);
	c1.quota_mode = auto_mode;
	ok(workspace_mgr_create(&c1, &m1, err, sizeof(err)) == 0 &&
	       strcmp(workspace_mgr_quota_mode(m1), "none") == 0,
	   "auto gives them none (%s)", err);
	workspace_mgr_destroy(m1);
}

static void test_none_mode(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL, *ws2 = NULL;
	struct workspace_usage u;
	char err[600], name[65], p[600];
	struct stat st;
	int r;

	cfg_init(&c, mode_none, 0x33);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "none-mode manager (%s)", err);
	ok(strcmp(workspace_mgr_quota_mode(m), "none") == 0, "mode none");
	r = workspace_open(m, "t", "c1", false, &ws, err, sizeof(err));
	ok(r == -ENOENT && ws == NULL && strstr(err, "no files yet"),
	   "absent workspace not created: %s", err);
	r = workspace_open(m, "t", "c1", true, &ws, err, sizeof(err));
	ok(r == 0 && ws, "workspace created");
	if (!ws)
		return;
	workspace_name_for(m, "t", "c1", name);
	ok(strcmp(workspace_name(ws), name) == 0, "handle name");
	snprintf(p, sizeof(p), "%s/workspaces/%s", host, name);
	ok(strcmp(workspace_host_path(ws), p) == 0, "host path %s",
	   workspace_host_path(ws));
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	ok(stat(p, &st) == 0 && st.st_uid == 64321 && st.st_gid == 64321 &&
	       (st.st_mode & 0777) == 0700,
	   "directory owned by the sandbox user, mode 0700");
	ok(!workspace_quota_enforced(ws), "not enforced in none mode");

	/* Writing. */
	ok(workspace_write_file(ws, "a.txt", "hello", 5, false, err,
	                        sizeof(err)) == 0,
	   "write a.txt");
	r = workspace_write_file(ws, "a.txt", "x", 1, false, err, sizeof(err));
	ok(r == -EEXIST && strstr(err, "overwrite"), "no silent replace: %s",
	   err);
	ok(workspace_write_file(ws, "a.txt", "bye", 3, true, err,
	                        sizeof(err)) == 0,
	   "overwrite");
	ok(workspace_write_file(ws, "deep/er/b.csv", "1,2\n", 4, false, err,
	                        sizeof(err)) == 0,
	   "write with new directories");
	snprintf(p, sizeof(p), "%s/workspaces/%s/deep/er/b.csv", root, name);
	ok(stat(p, &st) == 0 && st.st_uid == 64321 && st.st_size == 4,
	   "file owned by the sandbox user");
	snprintf(p, sizeof(p), "%s/workspaces/%s/deep", root, name);
	ok(stat(p, &st) == 0 && st.st_uid == 64321, "new directory owned too");
	snprintf(p, sizeof(p), "%s/workspaces/%s/evil", root, name);
	r = symlink("/etc", p);
	r = workspace_write_file(ws, "evil/x", "x", 1, false, err, sizeof(err));
	ok(r == -ELOOP && strstr(err, "symbolic link"),
	   "no write through a symlinked directory: %s", err);
	ok(access("/etc/x", F_OK) != 0, "nothing written to /etc");
	snprintf(p, sizeof(p), "%s/workspaces/%s/lnk", root, name);
	r = symlink("/etc/passwd", p);
	r = workspace_write_file(ws, "lnk", "x", 1, true, err, sizeof(err));
	ok(r == -EEXIST, "symlink target not replaced or followed: %s", err);
	r = workspace_write_file(ws, "a.txt/x", "x", 1, false, err,
	                         sizeof(err));
	ok(r == -ENOTDIR, "file as a directory refused: %s", err);
	r = workspace_write_file(ws, "../x", "x", 1, false, err, sizeof(err));
	ok(r == -EINVAL && strstr(err, "'..'"), "traversal refused: %s", err);

	/* Usage and the post-run quota check. */
	r = workspace_usage(ws, &u);
	ok(r == 0 && u.files >= 5 && !u.over && !u.enforced,
	   "usage: %llu files, %llu bytes", u.files, u.bytes);
	ok(workspace_check_quota(ws, 0, err, sizeof(err)) == 0, "under quota");
	ok(workspace_check_quota(ws, 2 * 1024 * 1024, err, sizeof(err)) ==
	       -EDQUOT,
	   "upload larger than the quota refused: %s", err);
	for (int i = 0; i < 60; i++) {
		char f[32];

		snprintf(f, sizeof(f), "many/f%d", i);
		snprintf(p, sizeof(p), "%s/workspaces/%s/%s", root, name, f);
		if (i == 0) {
			char d[600];

			snprintf(d, sizeof(d), "%s/workspaces/%s/many", root,
			         name);
			mkdir(d, 0755);
		}
		close(open(p, O_CREAT | O_WRONLY, 0644));
	}
	r = workspace_check_quota(ws, 0, err, sizeof(err));
	ok(r == -EDQUOT && strstr(err, "over its quota"),
	   "over the file quota, runs refused: %s", err);
	/* Only the file count is over: the message names that, not bytes. */
	ok(strstr(err, "files and directories, over its quota of 50") &&
	       !strstr(err, "bytes"),
	   "the message names the file quota only: %s", err);
	r = workspace_write_file(ws, "more.txt", "x", 1, false, err,
	                         sizeof(err));
	ok(r == -EDQUOT, "uploads refused too");
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	{
		int dfd = open(p, O_RDONLY | O_DIRECTORY);

		ok(fstree_remove(dfd, "many") == 0,
		   "fstree_remove a directory");
		close(dfd);
	}
	ok(workspace_check_quota(ws, 0, err, sizeof(err)) == 0,
	   "back under quota");
	/* Over the bytes only (1 MiB): 2 MiB in one file. */
	{
		static char big[2 * 1024 * 1024];
		int fd;

		memset(big, 'x', sizeof(big));
		snprintf(p, sizeof(p), "%s/workspaces/%s/big", root, name);
		fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		ok(fd >= 0 &&
		       write(fd, big, sizeof(big)) == (ssize_t)sizeof(big),
		   "a 2 MiB file written");
		if (fd >= 0)
			close(fd);
	}
	r = workspace_check_quota(ws, 0, err, sizeof(err));
	ok(r == -EDQUOT &&
	       strstr(err, "bytes, over its quota of 1048576 "
	                   "bytes") &&
	       !strstr(err, "files and directories"),
	   "over the bytes quota only: the message names bytes, not files: %s",
	   err);
	snprintf(p, sizeof(p), "%s/workspaces/%s/big", root, name);
	ok(unlink(p) == 0 &&
	       workspace_check_quota(ws, 0, err, sizeof(err)) == 0,
	   "back under quota after deleting it");

	/* URLs and URIs. */
	{
		char *url = workspace_file_url(m, ws, "out/a b.png");
		char *uri = workspace_resource_uri(ws, "out/a b.png");
		char want[300];

		snprintf(want, sizeof(want),
		         "https://files.example/files/%s/out/a%%20b.png", name);
		ok(url && strcmp(url, want) == 0, "file URL %s", url);
		ok(uri && strcmp(uri, "sandbox://c1/out/a%20b.png") == 0,
		   "resource URI %s", uri);
		free(url);
		free(uri);
	}

	/* The run lock. */
	ok(workspace_open(m, "t", "c1", false, &ws2, err, sizeof(err)) == 0,
	   "second handle");
	ok(workspace_lock(ws, 1000) == 0, "lock");
	ok(workspace_lock(ws, 1000) == -EDEADLK, "relock refused");
	{
		long long t0 = mono_ms();

		ok(workspace_lock(ws2, 200) == -ETIMEDOUT &&
		       mono_ms() - t0 >= 190,
		   "other handle times out");
	}
	{
		struct lock_arg a = {.ws = ws2};
		pthread_t th;

		pthread_create(&th, NULL, lock_thread, &a);
		usleep(200 * 1000);
		workspace_close(ws); /* releases the lock */
		pthread_join(th, NULL);
		ok(a.r == 0 && a.waited_ms >= 150,
		   "waiter gets the lock on close (%lld ms)", a.waited_ms);
	}
	ws = ws2;

	/* Retention never deletes a workspace in use. */
	age_marker(name, 5);
	ok(workspace_mgr_sweep(m, false) == 0 && exists_at("meta") &&
	       workspace_dirfd(ws) >= 0,
	   "in use: kept");
	workspace_close(ws);
	age_marker(name, 5);
	ok(workspace_mgr_sweep(m, false) == 1, "idle and old: deleted");
	snprintf(p, sizeof(p), "workspaces/%s", name);
	ok(!exists_at(p), "directory gone");
	snprintf(p, sizeof(p), "meta/%s", name);
	ok(!exists_at(p), "marker gone");
	ok(workspace_open(m, "t", "c1", false, &ws, err, sizeof(err)) ==
	       -ENOENT,
	   "deleted workspace is absent");
	workspace_mgr_destroy(m);
}

/* ---- the global cap ----------------------------------------------------- */

static void test_cap(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	char err[600];
	int r;

	cfg_init(&c, mode_none, 0x44);
	c.max_workspaces = 2;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "cap manager");
	for (int i = 0; i < 2; i++) {
		char id[16];

		snprintf(id, sizeof(id), "cap%d", i);
		r = workspace_open(m, "t", id, true, &ws, err, sizeof(err));
		workspace_close(ws);
		ws = NULL;
		ok(r == 0, "workspace %d of 2", i + 1);
	}
	r = workspace_open(m, "t", "cap2", true, &ws, err, sizeof(err));
	ok(r == -ENOSPC && strstr(err, "WORKSPACE_MAX_COUNT"),
	   "third refused: %s", err);
	r = workspace_open(m, "t", "cap0", true, &ws, err, sizeof(err));
	ok(r == 0, "existing still opens");
	workspace_close(ws);
	workspace_mgr_destroy(m);
	/* The count survives a restart. */
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "restart");
	ws = NULL;
	r = workspace_open(m, "t", "cap3", true, &ws, err, sizeof(err));
	ok(r == -ENOSPC, "cap counted from disk at start-up");
	workspace_mgr_destroy(m);
}

/* ---- per-tenant limits ------------------------------------------------- */

/* Empties SANDBOX_ROOT, so counts start from nothing. */
static void fresh_root(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	ok(system(cmd) == 0, "SANDBOX_ROOT emptied");
}

static int open_new(struct workspace_mgr *m, const char *tenant, const char *id,
                    char *err, size_t errlen)
{
	struct workspace *ws = NULL;
	int r = workspace_open(m, tenant, id, true, &ws, err, errlen);

	workspace_close(ws);
	return r;
}

/* The bytes of meta/<name of (tenant, id)>, NUL-terminated ("" if none). */
static void marker_text(struct workspace_mgr *m, const char *tenant,
                        const char *id, char *out, size_t outlen)
{
	char name[65], p[600];
	FILE *f;
	size_t n = 0;

	workspace_name_for(m, tenant, id, name);
	snprintf(p, sizeof(p), "%s/meta/%s", root, name);
	f = fopen(p, "r");
	if (f) {
		n = fread(out, 1, outlen - 1, f);
		fclose(f);
	}
	out[n] = '\0';
}

/* Empties a marker, as the versions before tenants were recorded left it. */
static void marker_clear(struct workspace_mgr *m, const char *tenant,
                         const char *id)
{
	char name[65], p[600];

	workspace_name_for(m, tenant, id, name);
	snprintf(p, sizeof(p), "%s/meta/%s", root, name);
	if (truncate(p, 0) < 0)
		perror("truncate");
}

static void test_tenant_cap(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	char err[600], text[100], name[65];
	int r;

	fresh_root();

	cfg_init(&c, mode_none, 0x45);
	c.max_workspaces = 10;
	c.workspace_max_per_tenant = 2;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "tenant-cap manager (%s)", err);
	ok(open_new(m, "alice", "a0", err, sizeof(err)) == 0 &&
	       open_new(m, "alice", "a1", err, sizeof(err)) == 0,
	   "alice creates two workspaces");
	r = open_new(m, "alice", "a2", err, sizeof(err));
	ok(r == -EDQUOT && strstr(err, "keeps 2 conversations'") &&
	       strstr(err, "WORKSPACE_MAX_PER_TENANT") &&
	       strstr(err, "WORKSPACE_RETENTION_HOURS") &&
	       strstr(err, "conversationId of an earlier"),
	   "alice's third is refused, saying what to do: %s", err);
	ok(open_new(m, "bob", "b0", err, sizeof(err)) == 0,
	   "bob still creates one while alice is at her cap (%s)", err);
	r = workspace_open(m, "alice", "a0", true, &ws, err, sizeof(err));
	ok(r == 0, "alice's existing workspace still opens");
	workspace_close(ws);
	ws = NULL;
	marker_text(m, "alice", "a0", text, sizeof(text));
	ok(strlen(text) == 32 && strspn(text, "0123456789abcdef") == 32,
	   "the marker records a 32-hex tenant fingerprint");
	ok(!strstr(text, "alice"), "and not the tenant's name");
	{
		char other[100];

		marker_text(m, "alice", "a1", other, sizeof(other));
		ok(strcmp(text, other) == 0, "one tenant, one fingerprint");
		marker_text(m, "bob", "b0", other, sizeof(other));
		ok(strlen(other) == 32 && strcmp(text, other) != 0,
		   "another tenant, another fingerprint");
	}
	workspace_mgr_destroy(m);

	/* The count per tenant comes back from the markers. */
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "restart");
	r = open_new(m, "alice", "a2", err, sizeof(err));
	ok(r == -EDQUOT, "after a restart alice is still at her cap: %s", err);
	ok(open_new(m, "bob", "b1", err, sizeof(err)) == 0,
	   "bob still has room");

	/* Workspaces from before tenants were recorded. */
	marker_clear(m, "alice", "a0");
	marker_clear(m, "alice", "a1");
	workspace_mgr_destroy(m);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "restart with two markers of an older version");
	r = workspace_open(m, "alice", "a0", false, &ws, err, sizeof(err));
	ok(r == 0, "an old workspace opens");
	workspace_close(ws);
	ws = NULL;
	marker_text(m, "alice", "a0", text, sizeof(text));
	ok(strlen(text) == 32, "its marker now names its tenant");
	ok(open_new(m, "alice", "a2", err, sizeof(err)) == 0,
	   "alice creates one: the unopened old one counts for nobody yet");
	r = open_new(m, "alice", "a3", err, sizeof(err));
	ok(r == -EDQUOT && strstr(err, "keeps 2"),
	   "the opened old one counts for alice: %s", err);
	r = workspace_open(m, "alice", "a0", false, &ws, err, sizeof(err));
	workspace_close(ws);
	ws = NULL;
	r = open_new(m, "alice", "a3", err, sizeof(err));
	ok(r == -EDQUOT && strstr(err, "keeps 2"),
	   "opening it again does not count it twice: %s", err);

	/* Retention gives a tenant its room back. */
	workspace_name_for(m, "alice", "a0", name);
	age_marker(name, 2);
	workspace_name_for(m, "alice", "a2", name);
	age_marker(name, 2);
	ok(workspace_mgr_sweep(m, true) == 2, "two expired deleted");
	ok(open_new(m, "alice", "a3", err, sizeof(err)) == 0 &&
	       open_new(m, "alice", "a4", err, sizeof(err)) == 0,
	   "alice has room for two again (%s)", err);
	r = open_new(m, "alice", "a5", err, sizeof(err));
	ok(r == -EDQUOT, "and not three");
	workspace_mgr_destroy(m);
}

static void test_tenant_auto_cap(void)
{
	struct config c;
	struct config_token tok[3];
	char t_alice[] = "alice", t_bob[] = "bob", t_alice2[] = "alice";
	struct workspace_mgr *m = NULL;
	cJSON *h = cJSON_CreateObject(), *w;
	char err[600];

	fresh_root();

	cfg_init(&c, mode_none, 0x46);
	ok(workspace_tenants_of(&c) == 1, "no tokens: one tenant");
	memset(tok, 0, sizeof(tok));
	tok[0].tenant = t_alice;
	tok[1].tenant = t_bob;
	tok[2].tenant = t_alice2;
	c.tokens = tok;
	c.n_tokens = 3;
	ok(workspace_tenants_of(&c) == 2,
	   "two tokens of one tenant count once");
	c.auth_none = true;
	ok(workspace_tenants_of(&c) == 1,
	   "MCP_AUTH=none: one tenant, whatever tokens are set");
	c.auth_none = false;
	c.max_workspaces = 11;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "manager (%s)",
	   err);
	workspace_mgr_health(m, h);
	w = cJSON_GetObjectItem(h, "workspaces");
	ok(w && cJSON_GetNumberValue(cJSON_GetObjectItem(w, "maxPerTenant")) ==
	            5,
	   "by default each of two tenants may keep 11 / 2 = 5");
	for (int i = 0; i < 5; i++) {
		char id[16];

		snprintf(id, sizeof(id), "auto%d", i);
		(void)!open_new(m, "alice", id, err, sizeof(err));
	}
	ok(open_new(m, "alice", "auto5", err, sizeof(err)) == -EDQUOT &&
	       strstr(err, "shared among"),
	   "alice stops at 5 (%s)", err);
	for (int i = 0; i < 5; i++) {
		char id[16];

		snprintf(id, sizeof(id), "auto%d", i);
		ok(open_new(m, "bob", id, err, sizeof(err)) == 0,
		   "bob's %d of 5 (%s)", i + 1, err);
	}
	cJSON_Delete(h);
	workspace_mgr_destroy(m);
}

static void test_tenant_rate(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	char err[600];
	int r;

	fresh_root();

	cfg_init(&c, mode_none, 0x47);
	c.workspace_max_per_tenant = 100;
	c.workspace_create_burst = 3;
	c.workspace_create_per_hour = 1;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "rate manager (%s)", err);
	ok(open_new(m, "carol", "r0", err, sizeof(err)) == 0 &&
	       open_new(m, "carol", "r1", err, sizeof(err)) == 0 &&
	       open_new(m, "carol", "r2", err, sizeof(err)) == 0,
	   "a burst of three");
	r = open_new(m, "carol", "r3", err, sizeof(err));
	ok(r == -EAGAIN && strstr(err, "WORKSPACE_CREATE_PER_HOUR") &&
	       strstr(err, "try again in ") &&
	       strstr(err, "conversationId of an earlier"),
	   "the fourth at once is refused: %s", err);
	r = workspace_open(m, "carol", "r1", true, &ws, err, sizeof(err));
	ok(r == 0, "existing workspaces still open (no creation)");
	workspace_close(ws);
	ok(open_new(m, "dave", "r3", err, sizeof(err)) == 0,
	   "another tenant's burst is its own");
	workspace_mgr_destroy(m);
}

static void test_disk_advice(void)
{
	char msg[600];
	const unsigned long long mb = 1024 * 1024;

	ok(!workspace_disk_advice(1000, 100 * mb, 100000 * mb, "/r", msg,
	                          sizeof(msg)) &&
	       msg[0] == '\0',
	   "1000 x 100 MB fit in 100000 MB: no warning");
	ok(workspace_disk_advice(1000, 100 * mb, 20000 * mb, "/r", msg,
	                         sizeof(msg)),
	   "1000 x 100 MB do not fit in 20000 MB");
	ok(strstr(msg, "WORKSPACE_MAX_COUNT=1000") &&
	       strstr(msg, "WORKSPACE_QUOTA_MB=100") &&
	       strstr(msg, "100000 MB") && strstr(msg, "20000 MB free") &&
	       strstr(msg, "SANDBOX_ROOT=/r") &&
	       strstr(msg, "Lower WORKSPACE_MAX_COUNT to 200 or "
	                   "WORKSPACE_QUOTA_MB to 20"),
	   "it says which settings to lower, and to what: %s", msg);
	ok(workspace_disk_advice(10, 100 * mb, 50 * mb, "/r", msg,
	                         sizeof(msg)) &&
	       strstr(msg, "less than one workspace's quota") &&
	       strstr(msg, "WORKSPACE_QUOTA_MB to at most 50"),
	   "not even one fits: %s", msg);
	ok(workspace_disk_advice(10000000, 100 * mb, 76691 * mb, "/r", msg,
	                         sizeof(msg)) &&
	       strstr(msg, "Lower WORKSPACE_MAX_COUNT to 766, or give") &&
	       !strstr(msg, "WORKSPACE_QUOTA_MB to 0"),
	   "no quota under 1 MB is suggested: %s", msg);
	ok(workspace_disk_advice(10000000, 1024ULL * 1024 * mb, 1ULL << 62,
	                         "/r", msg, sizeof(msg)),
	   "the largest settings do not overflow");
}

/* ---- hostile trees ------------------------------------------------------ */

/* Builds a tree of the given depth with every kind of entry in it. */
static int hostile_tree(int wsfd, int depth, const char *canary)
{
	int fd = openat(wsfd, ".", O_RDONLY | O_DIRECTORY);

	for (int i = 0; i < depth && fd >= 0; i++) {
		int nfd;

		if (i % 500 == 0) {
			if (mkfifoat(fd, "fifo", 0600) < 0 ||
			    mknodat(fd, "sock", S_IFSOCK | 0600, 0) < 0 ||
			    mknodat(fd, "null", S_IFCHR | 0666, makedev(1, 3)) <
			        0 ||
			    symlinkat(canary, fd, "escape") < 0 ||
			    symlinkat("/etc/passwd", fd, "passwd") < 0 ||
			    mkdirat(fd, "locked", 0755) < 0)
				return -1;
			nfd = openat(fd, "locked", O_RDONLY | O_DIRECTORY);
			close(openat(nfd, "secret", O_CREAT | O_WRONLY, 0));
			fchmod(nfd, 0);
			close(nfd);
			close(openat(fd, "noperm", O_CREAT | O_WRONLY, 0));
		}
		if (mkdirat(fd, "d", 0755) < 0)
			return -1;
		nfd = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = nfd;
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static void test_hostile_delete(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	char err[600], name[65], canary[300], p[600];
	struct fstree_usage fu;
	int wsfd;

	snprintf(canary, sizeof(canary), "%s-canary", root);
	mkdir(canary, 0755);
	snprintf(p, sizeof(p), "%s/keep", canary);
	close(open(p, O_CREAT | O_WRONLY, 0644));

	cfg_init(&c, mode_none, 0x55);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "manager for hostile trees");
	ok(workspace_open(m, "t", "deep", true, &ws, err, sizeof(err)) == 0,
	   "workspace");
	workspace_name_for(m, "t", "deep", name);
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	wsfd = open(p, O_RDONLY | O_DIRECTORY);
	ok(hostile_tree(wsfd, 3000, canary) == 0,
	   "tree 3000 levels deep with FIFOs, sockets, devices, symlinks, "
	   "mode 000");
	ok(fstree_measure(wsfd, 0, 0, &fu) == 0 && fu.depth >= 3000 &&
	       fu.files > 3000,
	   "measured iteratively: %llu entries, depth %u",
	   (unsigned long long)fu.files, fu.depth);
	close(wsfd);
	workspace_close(ws);
	age_marker(name, 3);
	ok(workspace_mgr_sweep(m, false) == 1, "3000-level tree deleted");
	snprintf(p, sizeof(p), "workspaces/%s", name);
	ok(!exists_at(p), "nothing left");
	snprintf(p, sizeof(p), "%s/keep", canary);
	ok(access(p, F_OK) == 0, "the symlink target outside is untouched");
	ok(access("/etc/passwd", F_OK) == 0, "/etc/passwd untouched");
	unlink(p);
	rmdir(canary);
	workspace_mgr_destroy(m);
}

/* ---- run support --------------------------------------------------------- */

static const unsigned char png1x1[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d,
    0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
    0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00,
    0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

static void test_run_support(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	struct workspace_snapshot *snap = NULL;
	struct workspace_changes_info info;
	cJSON *files = NULL, *content;
	char err[600], name[65], p[600];
	int r;

	cfg_init(&c, mode_none, 0x66);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "manager");
	ok(workspace_open(m, "t", "run", true, &ws, err, sizeof(err)) == 0,
	   "workspace");
	workspace_name_for(m, "t", "run", name);
	r = workspace_write_file(ws, "old.txt", "1", 1, false, err,
	                         sizeof(err));
	r |= workspace_write_file(ws, "same.txt", "1", 1, false, err,
	                          sizeof(err));
	ok(r == 0, "files before the run");
	ok(workspace_snapshot_create(ws, &snap) == 0, "snapshot");
	/* What a run might do. */
	r = workspace_write_file(ws, "old.txt", "22", 2, true, err,
	                         sizeof(err));
	r |= workspace_write_file(ws, "out/plot.png", png1x1, sizeof(png1x1),
	                          false, err, sizeof(err));
	r |= workspace_write_file(ws, "out/fake.png", "<svg>", 5, false, err,
	                          sizeof(err));
	ok(r == 0, "run wrote files");
	/* What the kernel and the daemon keep for themselves: no output. */
	r = workspace_write_file(ws, ".mcp/value.json", "{}", 2, false, err,
	                         sizeof(err));
	r |= workspace_write_file(ws, ".mcp/view/0123456789abcdef.json", "{}",
	                          2, false, err, sizeof(err));
	r |= workspace_write_file(ws, ".mcp/notebook.ipynb", "{}", 2, false,
	                          err, sizeof(err));
	r |= workspace_write_file(ws, ".mcp/packages/python/x.py", "", 0, false,
	                          err, sizeof(err));
	ok(r == 0, "the daemon's own files");
	ok(workspace_own_path(".mcp/value.json", false) ==
	           WORKSPACE_OWN_HIDDEN &&
	       workspace_own_path(".mcp/view", true) == WORKSPACE_OWN_HIDDEN &&
	       workspace_own_path(".mcp/packages", true) ==
	           WORKSPACE_OWN_HIDDEN &&
	       workspace_own_path(".mcp/notebook.ipynb", false) ==
	           WORKSPACE_OWN_LISTED &&
	       workspace_own_path(".mcp/view", false) == WORKSPACE_OWN_NONE &&
	       workspace_own_path("value.json", false) == WORKSPACE_OWN_NONE &&
	       workspace_own_path(".mcp/stdout-x.txt", false) ==
	           WORKSPACE_OWN_NONE,
	   "workspace_own_path: by path and kind");
	snprintf(p, sizeof(p), "%s/workspaces/%s/link", root, name);
	r = symlink("/etc/shadow", p);
	snprintf(p, sizeof(p), "%s/workspaces/%s/bad\nname.txt", root, name);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	r = workspace_changes(ws, snap, 100, &files, &info);
	ok(r == 0 && cJSON_GetArraySize(files) == 3 && info.changed == 3 &&
	       !info.truncated && info.skipped == 1 && info.unnamed == 1,
	   "changes: 3 files, 1 link skipped, 1 bad name unlisted, none of "
	   ".mcp's own");
	{
		const cJSON *f0 = cJSON_GetArrayItem(files, 0);
		const cJSON *f1 = cJSON_GetArrayItem(files, 1);
		const cJSON *f2 = cJSON_GetArrayItem(files, 2);
		char want[300];

		ok(strcmp(cJSON_GetObjectItem(f0, "name")->valuestring,
		          "old.txt") == 0 &&
		       strcmp(cJSON_GetObjectItem(f0, "status")->valuestring,
		              "modified") == 0,
		   "sorted, modified old.txt");
		ok(strcmp(cJSON_GetObjectItem(f1, "name")->valuestring,
		          "out/fake.png") == 0 &&
		       strcmp(cJSON_GetObjectItem(f2, "status")->valuestring,
		              "created") == 0,
		   "created files");
		snprintf(want, sizeof(want),
		         "https://files.example/files/%s/out/plot.png", name);
		ok(strcmp(cJSON_GetObjectItem(f2, "url")->valuestring, want) ==
		           0 &&
		       strcmp(cJSON_GetObjectItem(f2, "mimeType")->valuestring,
		              "image/png") == 0 &&
		       cJSON_GetObjectItem(f2, "size")->valuedouble ==
		           sizeof(png1x1) &&
		       strcmp(cJSON_GetObjectItem(f2, "path")->valuestring,
		              "/data/out/plot.png") == 0 &&
		       strlen(
		           cJSON_GetObjectItem(f2, "modified")->valuestring) ==
		           20,
		   "entry fields");
	}
	content = cJSON_CreateArray();
	ok(tools_content_links(content, files) == 0 &&
	       cJSON_GetArraySize(content) == 3 &&
	       strcmp(
	           cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "type")
	               ->valuestring,
	           "resource_link") == 0,
	   "resource links");
	r = tools_content_images(ws, content, files, 3);
	ok(r == 1, "one inline image (the fake PNG is not one)");
	{
		const cJSON *img = cJSON_GetArrayItem(content, 3);

		ok(img &&
		       strcmp(cJSON_GetObjectItem(img, "type")->valuestring,
		              "image") == 0 &&
		       strncmp(cJSON_GetObjectItem(img, "data")->valuestring,
		               "iVBORw0KGgo", 11) == 0,
		   "image item is base64 PNG");
	}
	cJSON_Delete(content);
	cJSON_Delete(files);
	workspace_snapshot_destroy(snap);
	ok(workspace_changes(ws, NULL, 1, &files, &info) == 0 &&
	       cJSON_GetArraySize(files) == 1 && info.truncated &&
	       info.changed == 4,
	   "without a snapshot everything is new; bounded and truncated");
	cJSON_Delete(files);

	{
		struct workspace_output o = {
		    .stream = "stdout", .data = "line\n", .len = 5};
		struct workspace_pruned pr;
		struct stat st;

		r = workspace_save_outputs(ws, &o, 1, &pr);
		ok(r == 0 && o.rel && strncmp(o.rel, ".mcp/stdout-", 12) == 0 &&
		       o.url && strstr(o.url, o.rel) && pr.n == 0,
		   "saved output %s", o.rel ? o.rel : o.err);
		snprintf(p, sizeof(p), "%s/workspaces/%s/%s", root, name,
		         o.rel ? o.rel : "");
		ok(stat(p, &st) == 0 && st.st_size == 5, "saved file on disk");
		workspace_outputs_finish(&o, 1, &pr);
		o.stream = "other";
		ok(workspace_save_outputs(ws, &o, 1, &pr) == -EINVAL,
		   "unknown stream refused");
	}
	workspace_close(ws);
	workspace_mgr_destroy(m);
}

/* ---- saved output -------------------------------------------------------- */

static const char *saved_ws; /* the workspace name of the test below */

/* The path on disk of rel in the workspace saved_ws. */
static const char *ws_path(const char *rel)
{
	static char p[700];

	snprintf(p, sizeof(p), "%s/workspaces/%s/%s", root, saved_ws, rel);
	return p;
}

static void set_mtime(const char *rel, time_t t)
{
	struct timespec ts[2] = {{t, 0}, {t, 0}};

	if (utimensat(AT_FDCWD, ws_path(rel), ts, AT_SYMLINK_NOFOLLOW) < 0)
		perror("utimensat");
}

static bool ws_exists(const char *rel)
{
	struct stat st;

	return lstat(ws_path(rel), &st) == 0;
}

/* Saved outputs in .mcp (by name), and their bytes together. */
static size_t count_saved(unsigned long long *bytes)
{
	char pat[1024]; /* the find command around a ws_path */
	size_t n = 0;
	FILE *f;

	*bytes = 0;
	snprintf(
	    pat, sizeof(pat),
	    "find '%s' -maxdepth 1 -type f -regextype posix-extended "
	    "-regex '.*/std(out|err)-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}\\.txt' "
	    "-printf '%%s\\n'",
	    ws_path(".mcp"));
	f = popen(pat, "r");
	if (!f)
		return 0;
	for (unsigned long long sz; fscanf(f, "%llu", &sz) == 1; n++)
		*bytes += sz;
	pclose(f);
	return n;
}

static const char *pruned_path(const struct workspace_pruned *pr, int i)
{
	const cJSON *x = cJSON_GetArrayItem(pr->paths, i);

	return cJSON_IsString(x) ? x->valuestring : "";
}

/* Saves len bytes of stdout (and of stderr when len2) at time t. */
static int save(struct workspace *ws, struct workspace_output *o,
                struct workspace_pruned *pr, size_t len, size_t len2)
{
	static char data[1024 * 1024];
	int r;

	memset(data, 'x', sizeof(data));
	memset(o, 0, 2 * sizeof(*o));
	o[0].stream = "stdout";
	o[0].data = data;
	o[0].len = len;
	o[1].stream = "stderr";
	o[1].data = data;
	o[1].len = len2;
	r = workspace_save_outputs(ws, o, len2 ? 2 : 1, pr);
	return r;
}

static void test_saved_outputs(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	struct workspace_output o[2];
	struct workspace_pruned pr;
	struct workspace_usage u;
	char err[600], name[65], first[64] = "", s2out[64] = "", s2err[64] = "",
	                         kept[64] = "";
	unsigned long long bytes;
	time_t now = time(NULL);
	int r;

	cfg_init(&c, mode_none, 0x67);
	c.output_saved_files = 3;
	c.output_saved_bytes = 100;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "manager");
	ok(workspace_open(m, "t", "saved", true, &ws, err, sizeof(err)) == 0,
	   "workspace");
	workspace_name_for(m, "t", "saved", name);
	saved_ws = name;

	r = save(ws, o, &pr, 40, 0);
	ok(r == 0 && o[0].rel && strlen(o[0].rel) == 39 && pr.n == 0 &&
	       !pr.paths,
	   "a first output saved, nothing deleted: %s",
	   o[0].rel ? o[0].rel : o[0].err);
	snprintf(first, sizeof(first), "%s", o[0].rel ? o[0].rel : "");
	set_mtime(first, now - 100);
	workspace_outputs_finish(o, 2, &pr);

	/* What code leaves in .mcp under such names is not a saved output. */
	r = workspace_write_file(ws, ".mcp/notes.txt", "n", 1, false, err,
	                         sizeof(err));
	r |= symlink("/etc/passwd",
	             ws_path(".mcp/stdout-20000101T000000Z-aaaaaa.txt"));
	r |= mkdir(ws_path(".mcp/stderr-20000101T000000Z-bbbbbb.txt"), 0755);
	r |= workspace_write_file(
	    ws,
	    ".mcp/stderr-20000101T000000Z-bbbbbb.txt/stdout-20000101T"
	    "000000Z-cccccc.txt",
	    "y", 1, false, err, sizeof(err));
	ok(r == 0, "a note, a link and a directory in .mcp");

	/* 40 + 40 + 40 > 100 bytes: the oldest goes. */
	r = save(ws, o, &pr, 40, 40);
	ok(r == 0 && o[0].rel && o[1].rel && pr.n == 1 && pr.bytes == 40,
	   "both streams saved, one older output deleted (%zu, %s)", pr.n,
	   o[1].rel ? "" : o[1].err);
	ok(strncmp(pruned_path(&pr, 0), "/data/", 6) == 0 &&
	       strcmp(pruned_path(&pr, 0) + 6, first) == 0,
	   "named as %s", pruned_path(&pr, 0));
	ok(!ws_exists(first) && o[0].rel && ws_exists(o[0].rel) && o[1].rel &&
	       ws_exists(o[1].rel),
	   "deleted on disk; the new ones there");
	ok(ws_exists(".mcp/notes.txt") &&
	       ws_exists(".mcp/stdout-20000101T000000Z-aaaaaa.txt") &&
	       ws_exists(".mcp/stderr-20000101T000000Z-bbbbbb.txt/stdout-"
	                 "20000101T000000Z-cccccc.txt"),
	   "other files, the link and the directory are left alone");
	{
		struct stat st;

		ok(stat("/etc/passwd", &st) == 0 && st.st_size > 0,
		   "the link was not followed");
	}
	snprintf(s2out, sizeof(s2out), "%s", o[0].rel ? o[0].rel : "");
	snprintf(s2err, sizeof(s2err), "%s", o[1].rel ? o[1].rel : "");
	/* The file times decide, not the names: stderr-... sorts first. */
	set_mtime(s2out, now - 60);
	set_mtime(s2err, now - 50);
	workspace_outputs_finish(o, 2, &pr);

	r = save(ws, o, &pr, 10, 0);
	ok(r == 0 && o[0].rel && pr.n == 0,
	   "three files of 90 bytes fit: nothing deleted");
	snprintf(kept, sizeof(kept), "%s", o[0].rel ? o[0].rel : "");
	set_mtime(kept, now - 40);
	workspace_outputs_finish(o, 2, &pr);

	r = save(ws, o, &pr, 10, 0);
	ok(r == 0 && o[0].rel && pr.n == 1 &&
	       strcmp(pruned_path(&pr, 0) + 6, s2out) == 0,
	   "a fourth file: the oldest by time goes (%s)", pruned_path(&pr, 0));
	ok(count_saved(&bytes) == 3 && bytes == 60,
	   "3 saved outputs of 60 bytes left");
	workspace_outputs_finish(o, 2, &pr);

	r = save(ws, o, &pr, 101, 0);
	ok(r == 0 && !o[0].rel && strstr(o[0].err, "100 bytes") && pr.n == 0,
	   "over the cap alone: not saved, nothing deleted: %s", o[0].err);
	workspace_outputs_finish(o, 2, &pr);

	r = save(ws, o, &pr, 60, 60);
	ok(r == 0 && o[0].rel && !o[1].rel && strstr(o[1].err, "beside") &&
	       ws_exists(o[0].rel),
	   "60 + 60: stdout saved and kept, stderr not: %s", o[1].err);
	ok(count_saved(&bytes) == 3 && bytes == 80 && !ws_exists(s2err) &&
	       ws_exists(kept),
	   "within the limits again, the oldest gone (%llu bytes)", bytes);
	workspace_outputs_finish(o, 2, &pr);

	c.output_saved_files = 0;
	r = save(ws, o, &pr, 10, 0);
	ok(r == 0 && !o[0].rel && strstr(o[0].err, "does not save") &&
	       pr.n == 0,
	   "saving off: %s", o[0].err);
	workspace_outputs_finish(o, 2, &pr);
	o[0].stream = "stdout";
	ok(workspace_save_outputs(ws, o, 3, &pr) == -EINVAL,
	   "3 streams refused");
	workspace_close(ws);
	ws = NULL;

	/*
	 * The workspace's own room: older saved outputs make way for a new
	 * one when that is enough, and stay when it is not.
	 */
	c.output_saved_files = 10;
	c.output_saved_bytes = 512 * 1024;
	ok(workspace_open(m, "t", "saved-room", true, &ws, err, sizeof(err)) ==
	       0,
	   "workspace");
	workspace_name_for(m, "t", "saved-room", name);
	for (int i = 0; i < 3; i++) {
		r = save(ws, o, &pr, 100 * 1024, 0);
		ok(r == 0 && o[0].rel, "100 KiB saved (%d)", i);
		if (o[0].rel)
			set_mtime(o[0].rel, now - 100 + i);
		if (i == 0)
			snprintf(first, sizeof(first), "%s", o[0].rel);
		workspace_outputs_finish(o, 2, &pr);
	}
	r = workspace_usage(ws, &u);
	ok(r == 0 && u.bytes < u.quota_bytes - 64 * 1024, "usage %llu",
	   u.bytes);
	{
		static char fill[1024 * 1024];
		size_t n = (size_t)(u.quota_bytes - u.bytes - 48 * 1024);

		r = workspace_write_file(ws, "user.bin", fill, n, false, err,
		                         sizeof(err));
		ok(r == 0, "the user's file leaves about 40 KiB: %s", err);
	}
	r = save(ws, o, &pr, 100 * 1024, 0);
	ok(r == 0 && o[0].rel && pr.n >= 1 && pr.n <= 2 &&
	       strcmp(pruned_path(&pr, 0) + 6, first) == 0,
	   "no room: the oldest saved output made way (%zu; %s)", pr.n,
	   o[0].rel ? "" : o[0].err);
	ok(ws_exists("user.bin"), "the user's file stays");
	workspace_outputs_finish(o, 2, &pr);
	count_saved(&bytes);
	r = save(ws, o, &pr, (size_t)bytes + 200 * 1024, 0);
	ok(r == 0 && !o[0].rel && pr.n == 0 && strstr(o[0].err, "do not fit") &&
	       count_saved(&bytes) == 3,
	   "deleting every saved output would not make room: none deleted: "
	   "%s",
	   o[0].err);
	workspace_outputs_finish(o, 2, &pr);
	workspace_close(ws);
	workspace_mgr_destroy(m);
}

/* ---- loop mode --------------------------------------------------------------
 */

static bool is_mounted(const char *path)
{
	char parent[600];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", path);
	return stat(path, &a) == 0 && stat(parent, &b) == 0 &&
	       a.st_dev != b.st_dev;
}

static void test_loop_mode(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	struct workspace_usage u;
	struct statvfs sv;
	char err[800], name[65], p[600], img[600];
	struct stat st;
	int r, n = 0;

	cfg_init(&c, mode_loop, 0x77);
	c.workspace_quota_bytes = 16 * 1024 * 1024;
	c.workspace_max_files = 200;
	c.upload_max_bytes = 64 * 1024 * 1024;
	r = workspace_mgr_create(&c, &m, err, sizeof(err));
	if (r < 0) {
		ok(geteuid() != 0, "# SKIP loop mode unavailable: %s", err);
		return;
	}
	ok(strcmp(workspace_mgr_quota_mode(m), "loop") == 0, "loop mode");
	ok(workspace_open(m, "t", "loop", true, &ws, err, sizeof(err)) == 0,
	   "loop workspace created (%s)", err);
	if (!ws)
		goto out;
	workspace_name_for(m, "t", "loop", name);
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	snprintf(img, sizeof(img), "%s/images/%s.img", root, name);
	ok(is_mounted(p), "mounted at the workspace path");
	ok(statvfs(p, &sv) == 0 && (sv.f_flag & ST_NOSUID) &&
	       (sv.f_flag & ST_NODEV) && (sv.f_flag & ST_NOEXEC),
	   "nosuid,nodev,noexec");
	ok(stat(p, &st) == 0 && st.st_uid == 64321 && st.st_gid == 64321 &&
	       (st.st_mode & 0777) == 0700,
	   "root of the image owned by the sandbox user");
	snprintf(p, sizeof(p), "%s/workspaces/%s/lost+found", root, name);
	ok(access(p, F_OK) != 0, "no lost+found");
	ok(stat(img, &st) == 0 && st.st_size == 16 * 1024 * 1024 &&
	       st.st_blocks * 512 < 16 * 1024 * 1024,
	   "sparse image of exactly the quota (%lld bytes allocated)",
	   (long long)st.st_blocks * 512);
	ok(workspace_quota_enforced(ws), "enforced");
	r = workspace_usage(ws, &u);
	ok(r == 0 && u.enforced && u.quota_files <= 256 &&
	       u.quota_bytes <= 16 * 1024 * 1024,
	   "usage from statvfs: %llu/%llu files", u.files, u.quota_files);

	/* Bytes: a large upload does not fit. */
	{
		size_t big = 20 * 1024 * 1024;
		char *buf = calloc(1, big);

		r = workspace_write_file(ws, "big.bin", buf, big, false, err,
		                         sizeof(err));
		ok(r == -EDQUOT, "20 MB into 16 MB refused: %s", err);
		free(buf);
	}
	/* Inodes: even root cannot create more files than the image has. */
	{
		int dfd;

		snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
		dfd = open(p, O_RDONLY | O_DIRECTORY);
		for (n = 0; n < 100000; n++) {
			char f[32];
			int fd;

			snprintf(f, sizeof(f), "f%d", n);
			fd = openat(dfd, f, O_CREAT | O_WRONLY, 0644);
			if (fd < 0)
				break;
			close(fd);
		}
		ok(n < 256 && errno == ENOSPC,
		   "file creation stops at the inode limit (%d files, %s)", n,
		   strerror(errno));
		r = workspace_write_file(ws, "one-more.txt", "x", 1, false, err,
		                         sizeof(err));
		ok(r == -EDQUOT, "upload refused when out of inodes: %s", err);
		ok(fstree_remove(dfd, "f0") == 0, "delete one");
		close(dfd);
	}
	workspace_close(ws);
	ws = NULL;

	/* Idle unmount and mount on demand. */
	workspace_mgr_sweep(m, true);
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	ok(!is_mounted(p), "idle image unmounted");
	ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0 && st.st_uid == 0,
	   "bare mount point is root's, mode 000");
	ok(workspace_open_by_name(m, name, &ws) == 0 && is_mounted(p),
	   "serving mounts it again");
	{
		struct stat fst;
		int fd = fstree_open_regular(workspace_dirfd(ws), "f1", &fst);

		ok(fd >= 0, "files survived the remount");
		if (fd >= 0)
			close(fd);
	}
	workspace_close(ws);
	ws = NULL;
	ok(workspace_open_by_name(m, "0000", &ws) == -ENOENT,
	   "malformed name: -ENOENT");

	/* Retention in loop mode: unmount and remove the image. */
	age_marker(name, 2);
	ok(workspace_mgr_sweep(m, false) == 1, "old loop workspace deleted");
	ok(!is_mounted(p) && access(p, F_OK) != 0 && access(img, F_OK) != 0,
	   "unmounted, mount point and image removed");

	/* Shutdown unmounts. */
	ok(workspace_open(m, "t", "loop2", true, &ws, err, sizeof(err)) == 0,
	   "another loop workspace");
	workspace_name_for(m, "t", "loop2", name);
	workspace_close(ws);
	ws = NULL;
out:
	workspace_mgr_destroy(m);
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	ok(!is_mounted(p), "unmounted at shutdown");
	/* A restart mounts on demand again. */
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0, "restart");
	ok(workspace_open(m, "t", "loop2", false, &ws, err, sizeof(err)) == 0 &&
	       is_mounted(p),
	   "reopened after restart");
	workspace_close(ws);
	workspace_mgr_destroy(m);
}

/* Runs a shell script in a container on the workspace; returns output. */
static char *docker_run(const char *hostpath, const char *image,
                        const char *script)
{
	char cmd[4096];
	static char out[8192];
	size_t n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
	         "docker run --rm --network none --user 64321:64321 "
	         "--cap-drop ALL --security-opt no-new-privileges "
	         "--pids-limit 64 --memory 256m --memory-swap 256m "
	         "--mount type=bind,source=%s,target=/data %s sh -c '%s' 2>&1",
	         hostpath, image, script);
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	pclose(f);
	return out;
}

/*
 * A real container against a loop workspace of 32 MB and about 5000 files:
 * it creates files without end, writes a huge file, then builds a tree
 * 3000 levels deep with a symlink and a FIFO, which retention deletes.
 */
static void docker_test(const char *image)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	struct workspace_usage u;
	struct statvfs before, after;
	char err[800], name[65], p[600], img[600], droot[300];
	const char *out;
	struct stat st;
	int r;

	snprintf(droot, sizeof(droot), "%s-docker", root);
	cfg_init(&c, mode_loop, 0x88);
	c.sandbox_root = droot;
	c.sandbox_host_path = droot; /* the daemon runs natively here */
	c.workspace_quota_bytes = 32 * 1024 * 1024;
	c.workspace_max_files = 5000;
	if (workspace_mgr_create(&c, &m, err, sizeof(err)) < 0) {
		ok(geteuid() != 0, "# SKIP docker test needs loop mode: %s",
		   err);
		return;
	}
	workspace_name_for(m, "t", "docker", name);
	ok(workspace_open(m, "t", "docker", true, &ws, err, sizeof(err)) == 0,
	   "docker: workspace");
	if (!ws)
		goto out;
	statvfs(droot, &before);
	out = docker_run(workspace_host_path(ws), image,
	                 "dd if=/dev/zero of=/data/big bs=1M count=200 2>&1 "
	                 "| tail -n 3; ls -l /data/big; rm -f /data/big; "
	                 "i=0; while true > /data/f$i 2>/dev/null; do "
	                 "i=$((i+1)); done; echo files=$i; "
	                 "mkdir /data/more; id");
	printf("# container: %s\n", out ? out : "(none)");
	{
		const char *fl = out ? strstr(out, "files=") : NULL;
		long files = fl ? strtol(fl + 6, NULL, 10) : -1;

		ok(files > 4000 && files <= 5000,
		   "docker: creating files without end stops at %ld", files);
	}
	ok(out && strstr(out, "No space left on device"),
	   "docker: the flood and the huge file hit ENOSPC in the container");
	ok(out && strstr(out, "uid=64321"), "docker: ran as the sandbox user");
	r = workspace_usage(ws, &u);
	ok(r == 0 && u.files >= 4000 && u.quota_bytes <= 32 * 1024 * 1024,
	   "docker: usage %llu/%llu files, %llu/%llu bytes", u.files,
	   u.quota_files, u.bytes, u.quota_bytes);
	sync();
	statvfs(droot, &after);
	snprintf(img, sizeof(img), "%s/images/%s.img", droot, name);
	ok(stat(img, &st) == 0 && st.st_size == 32 * 1024 * 1024 &&
	       st.st_blocks * 512 <= 32 * 1024 * 1024,
	   "docker: image still 32 MB, %lld bytes allocated",
	   (long long)st.st_blocks * 512);
	ok((long long)before.f_bavail * before.f_frsize -
	           (long long)after.f_bavail * after.f_frsize <
	       33LL * 1024 * 1024,
	   "docker: host disk used by the run is bounded by the quota (%lld "
	   "bytes)",
	   (long long)before.f_bavail * before.f_frsize -
	       (long long)after.f_bavail * after.f_frsize);

	/* A deep tree and hostile entries made by code are deleted. */
	out = docker_run(workspace_host_path(ws), image,
	                 "rm -rf /data/f* /data/big; cd /data; "
	                 "perl -e \"for (1..3000) { mkdir q(d) or last; "
	                 "chdir q(d) or last; \\$n++ } print qq(depth=\\$n)\"; "
	                 "ln -s /etc/shadow /data/shadow; mkfifo /data/fifo; "
	                 "mkfifo /data/d/fifo; chmod 000 /data/d");
	printf("# container: %s\n", out ? out : "(none)");
	ok(out && strstr(out, "depth=3000"), "docker: 3000 levels created");
	workspace_close(ws);
	ws = NULL;
	snprintf(p, sizeof(p), "%s/meta/%s", droot, name);
	{
		struct timespec ts[2];

		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= 2 * 3600;
		ts[1] = ts[0];
		utimensat(AT_FDCWD, p, ts, 0);
	}
	ok(workspace_mgr_sweep(m, false) == 1 && access(img, F_OK) != 0,
	   "docker: deep workspace deleted (unmounted, image removed)");
out:
	workspace_close(ws);
	workspace_mgr_destroy(m);
	snprintf(p, sizeof(p), "rm -rf %s", droot);
	if (system(p) != 0)
		printf("# cannot remove %s\n", droot);
}

/* ---- the sweep's budget ------------------------------------------------ */

/* Workspace markers in SANDBOX_ROOT/meta. */
static int count_markers(void)
{
	char p[512];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/meta", root);
	d = opendir(p);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strlen(de->d_name) == WORKSPACE_NAME_LEN;
	closedir(d);
	return n;
}

/* Makes n workspaces of tenant t named prefix0.. and ages them 2 hours. */
static void make_expired(struct workspace_mgr *m, const char *prefix, int n)
{
	char err[600], id[32], name[WORKSPACE_NAME_LEN + 1];
	int made = 0;

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%s%d", prefix, i);
		made += open_new(m, "t", id, err, sizeof(err)) == 0;
		workspace_name_for(m, "t", id, name);
		age_marker(name, 2);
	}
	is_int(made, n, "expired workspaces made");
}

/*
 * Loop mode's spare image: made by the job, taken by the next new
 * workspace (the same file, renamed), made again; none left at shutdown,
 * and any left by an earlier start removed at start-up.
 */
static void test_spare_image(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;
	char err[800], name[65], spare[600], img[600], p[600];
	struct stat st;
	ino_t ino;
	int fd;

	cfg_init(&c, mode_loop, 0x78);
	c.workspace_quota_bytes = 16 * 1024 * 1024;
	c.workspace_max_files = 200;
	if (workspace_mgr_create(&c, &m, err, sizeof(err)) < 0) {
		ok(geteuid() != 0, "# SKIP loop mode unavailable: %s", err);
		return;
	}
	snprintf(spare, sizeof(spare), "%s/images/.spare.img", root);
	ok(access(spare, F_OK) != 0, "spare: none before the job");
	is_int(workspace_job_spare(m, LLONG_MAX), CRON_DONE, "spare: job");
	ok(stat(spare, &st) == 0 && st.st_size == 16 * 1024 * 1024,
	   "spare: an image of the quota's size made");
	ino = st.st_ino;
	(void)workspace_job_spare(m, LLONG_MAX);
	ok(stat(spare, &st) == 0 && st.st_ino == ino,
	   "spare: the job leaves a spare that is there alone");
	ok(workspace_open(m, "t", "spare", true, &ws, err, sizeof(err)) == 0,
	   "spare: a new workspace (%s)", err);
	workspace_name_for(m, "t", "spare", name);
	snprintf(img, sizeof(img), "%s/images/%s.img", root, name);
	ok(stat(img, &st) == 0 && st.st_ino == ino,
	   "spare: the new workspace's image is the spare, renamed");
	ok(access(spare, F_OK) != 0, "spare: taken");
	snprintf(p, sizeof(p), "%s/workspaces/%s", root, name);
	ok(is_mounted(p), "spare: mounted");
	ok(stat(p, &st) == 0 && st.st_uid == 64321 &&
	       (st.st_mode & 0777) == 0700,
	   "spare: its root the sandbox user's, 0700");
	snprintf(p, sizeof(p), "%s/workspaces/%s/lost+found", root, name);
	ok(access(p, F_OK) != 0, "spare: no lost+found");
	ok(workspace_write_file(ws, "a.txt", "hi", 2, false, err,
	                        sizeof(err)) == 0,
	   "spare: writable (%s)", err);
	workspace_close(ws);
	ws = NULL;

	/* A spare that cannot be made: tried again a minute later, not at
	 * every run of the job (a warning a second for days otherwise). */
	snprintf(p, sizeof(p), "%s/images/.spare-%d-%llu.img", root,
	         (int)getpid(), m->spare_seq + 1);
	ok(mkdir(p, 0700) == 0, "spare: an obstacle where it is made");
	(void)workspace_job_spare(m, LLONG_MAX);
	ok(access(spare, F_OK) != 0 &&
	       m->spare_retry_ms > mono_ms() + WORKSPACE_SPARE_RETRY_MS - 5000,
	   "spare: not made; the next try a minute later");
	(void)workspace_job_spare(m, LLONG_MAX);
	ok(access(spare, F_OK) != 0, "spare: no new try within the minute");
	rmdir(p);
	m->spare_retry_ms = 0; /* the minute passed */
	(void)workspace_job_spare(m, LLONG_MAX);
	ok(stat(spare, &st) == 0 && st.st_ino != ino,
	   "spare: the job makes the next one");
	workspace_mgr_destroy(m);
	m = NULL;
	ok(access(spare, F_OK) != 0, "spare: removed at shutdown");

	/* Left by an earlier start (other settings): removed at start-up. */
	snprintf(p, sizeof(p), "%s/images/.spare-1-1.img", root);
	fd = open(spare, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0)
		close(fd);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0)
		close(fd);
	c.workspace_quota_bytes = 24 * 1024 * 1024;
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "spare: restart (%s)", err);
	ok(access(spare, F_OK) != 0 && access(p, F_OK) != 0,
	   "spare: an earlier start's spare and half-made one removed");
	(void)workspace_job_spare(m, LLONG_MAX);
	ok(stat(spare, &st) == 0 && st.st_size == 24 * 1024 * 1024,
	   "spare: the new one has the new size");
	workspace_mgr_destroy(m);
}

static void test_sweep_budget(void)
{
	struct config c;
	struct workspace_mgr *m = NULL;
	struct workspace *held = NULL;
	char err[600];
	int calls = 0, most = 0, before, after;
	enum cron_next next = CRON_MORE;

	fresh_root();
	cfg_init(&c, mode_none, 0x47);
	ok(workspace_mgr_create(&c, &m, err, sizeof(err)) == 0,
	   "sweep budget: manager (%s)", err);
	make_expired(m, "old", 40);
	ok(workspace_open(m, "t", "old7", false, &held, err, sizeof(err)) == 0,
	   "sweep budget: one of them is in use");
	/* A deadline already past: one workspace a run, then it stops. */
	before = count_markers();
	while (next == CRON_MORE && calls < 100) {
		next = workspace_job_sweep(m, 0);
		after = count_markers();
		if (before - after > most)
			most = before - after;
		before = after;
		calls++;
	}
	is_int(next, CRON_DONE, "sweep budget: the walk ended");
	is_int(most, 1, "sweep budget: at most one deletion a run");
	/* 39 deletions, one run each, and the run that finds the end. */
	is_int(calls, 40, "sweep budget: a run each, resumed where it stopped");
	is_int(count_markers(), 1, "sweep budget: only the one in use stays");
	workspace_close(held);

	/* A whole sweep starts over, whatever a run left unfinished. */
	make_expired(m, "more", 10);
	is_int(workspace_job_sweep(m, 0), CRON_MORE,
	       "sweep budget: a run stops early");
	is_int(workspace_mgr_sweep(m, false), 9,
	       "sweep budget: a whole sweep deletes the other nine");
	/* Opening it was a use: it is young again. */
	is_int(count_markers(), 1, "sweep budget: the one used stays");
	make_expired(m, "last", 5);
	is_int(workspace_job_sweep(m, LLONG_MAX), CRON_DONE,
	       "sweep budget: with time enough one run does it all");
	is_int(count_markers(), 1, "sweep budget: all five deleted");
	workspace_mgr_destroy(m);
}

int main(void)
{
	char tmpl[] = "/tmp/mcpsd-ws-XXXXXX";

	/* chown to the sandbox user, device nodes, loop mounts: root only. */
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (as on every machine of this "
		       "project)\n");
		return 0;
	}
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(root, sizeof(root), "%s/root", tmpl);
	test_names();
	test_none_mode();
	test_replica_locks();
	test_cap();
	test_tenant_cap();
	test_tenant_auto_cap();
	test_tenant_rate();
	test_disk_advice();
	test_sweep_budget();
	test_deferred();
	/* Each test below starts from an empty SANDBOX_ROOT. */
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
		if (system(cmd) != 0)
			return 1;
	}
	test_hostile_delete();
	test_run_support();
	test_saved_outputs();
	test_loop_mode();
	test_spare_image();
	if (getenv("MCPSD_TEST_DOCKER_IMAGE"))
		docker_test(getenv("MCPSD_TEST_DOCKER_IMAGE"));
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
		if (system(cmd) != 0)
			return 1;
	}
	return tap_done();
}
