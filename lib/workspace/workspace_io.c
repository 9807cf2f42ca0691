/* SPDX-License-Identifier: MIT */
/*
 * workspace_io: the part of the workspace module that looks inside a
 * workspace rather than managing it: usage and quota checks, atomic writes
 * (uploads, saved output), and what run_code reports after a run (the
 * snapshot and changes of files, resource links, inline images). It works
 * through the public accessors of workspace.h and fstree's safe primitives
 * only. Thread-safety as workspace.h: one thread per handle.
 */
#include "workspace/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "fs/fsname.h"
#include "fs/fstree.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "workspace/files.h"

#define SNAPSHOT_EXTRA 1000

/* Who owns what the daemon writes ((uid_t)-1: leave it to the daemon). */
static void owner(const struct workspace *ws, uid_t *uid, gid_t *gid)
{
	const struct config *cfg = workspace_mgr_config(workspace_mgr_of(ws));

	if (geteuid() == 0) {
		*uid = (uid_t)cfg->sandbox_uid;
		*gid = (gid_t)cfg->sandbox_gid;
	} else {
		*uid = (uid_t)-1;
		*gid = (gid_t)-1;
	}
}

/* ---- quotas ------------------------------------------------------------ */

int workspace_usage(struct workspace *ws, struct workspace_usage *out)
{
	const struct config *cfg = workspace_mgr_config(workspace_mgr_of(ws));
	struct fstree_usage fu;
	struct statvfs sv;
	int r;

	memset(out, 0, sizeof(*out));
	if (workspace_quota_enforced(ws)) {
		if (fstatvfs(workspace_dirfd(ws), &sv) < 0)
			return -errno;
		out->bytes = (unsigned long long)(sv.f_blocks - sv.f_bfree) *
		             sv.f_frsize;
		out->quota_bytes =
		    (unsigned long long)sv.f_blocks * sv.f_frsize;
		out->files = (unsigned long long)(sv.f_files - sv.f_ffree);
		out->quota_files = sv.f_files;
		out->enforced = true;
		out->over = sv.f_bavail == 0 || sv.f_favail == 0;
		return 0;
	}
	out->quota_bytes = cfg->workspace_quota_bytes;
	out->quota_files = cfg->workspace_max_files;
	r = fstree_measure(workspace_dirfd(ws), out->quota_bytes,
	                   out->quota_files, &fu);
	if (r < 0)
		return r;
	out->bytes = fu.bytes;
	out->files = fu.files;
	out->over = fu.bytes > out->quota_bytes || fu.files > out->quota_files;
	out->partial = out->over;
	return 0;
}

void workspace_usage_over(const struct workspace_usage *u, char *out,
                          size_t outlen)
{
	bool bytes = u->bytes > u->quota_bytes;
	bool files = u->files > u->quota_files;
	const char *at_least = u->partial ? "over " : "";

	/* A walk that stopped at one limit knows only that one is passed. */
	if (bytes && files)
		snprintf(out, outlen,
		         "%s%llu bytes and %s%llu files and directories, over "
		         "its quota of %llu bytes and %llu files and "
		         "directories",
		         at_least, u->bytes, at_least, u->files, u->quota_bytes,
		         u->quota_files);
	else if (files)
		snprintf(out, outlen,
		         "%s%llu files and directories, over its quota of "
		         "%llu",
		         at_least, u->files, u->quota_files);
	else
		snprintf(out, outlen,
		         "%s%llu bytes, over its quota of %llu bytes", at_least,
		         u->bytes, u->quota_bytes);
}

int workspace_check_quota(struct workspace *ws, unsigned long long extra,
                          char *err, size_t errlen)
{
	char over[256];

	struct workspace_usage u;
	struct statvfs sv;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (workspace_quota_enforced(ws)) {
		if (fstatvfs(workspace_dirfd(ws), &sv) < 0)
			return -errno;
		if (extra > (unsigned long long)sv.f_bavail * sv.f_frsize)
			return errmsg_fail(
			    -EDQUOT, err, errlen,
			    "%llu bytes do not fit: the workspace of "
			    "this conversation has %llu bytes free; "
			    "delete files with delete_file or in a run",
			    extra,
			    (unsigned long long)sv.f_bavail * sv.f_frsize);
		if (extra && sv.f_favail == 0)
			return errmsg_fail(
			    -EDQUOT, err, errlen,
			    "the workspace of this conversation holds "
			    "as many files as it may; delete files with "
			    "delete_file or in a run");
		return 0;
	}
	r = workspace_usage(ws, &u);
	if (r < 0)
		return r;
	if (u.over) {
		workspace_usage_over(&u, over, sizeof(over));
		return errmsg_fail(
		    -EDQUOT, err, errlen,
		    "the workspace of this conversation holds %s; runs and "
		    "uploads are refused until files are deleted with "
		    "delete_file (or use a new conversationId)",
		    over);
	}
	if (extra &&
	    (u.bytes + extra > u.quota_bytes || u.files + 1 > u.quota_files))
		return errmsg_fail(
		    -EDQUOT, err, errlen,
		    "%llu more bytes do not fit: the workspace of this "
		    "conversation holds %llu of %llu bytes and %llu of "
		    "%llu files; delete files with delete_file",
		    extra, u.bytes, u.quota_bytes, u.files, u.quota_files);
	return 0;
}

/* ---- writing ------------------------------------------------------------ */

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int write_error(int r, const char *rel, char *err, size_t errlen)
{
	switch (r) {
	case -ENOSPC:
	case -EDQUOT:
		errmsg_set(
		    err, errlen,
		    "the workspace of this conversation is full (no space or "
		    "no more files allowed); delete files with delete_file "
		    "or in a run, then try again");
		return -EDQUOT;
	case -ELOOP:
	case -EXDEV:
		errmsg_set(
		    err, errlen,
		    "the path '%s' goes through a symbolic link, which is "
		    "never followed; choose another path",
		    rel);
		return -ELOOP;
	case -ENOTDIR:
		errmsg_set(
		    err, errlen,
		    "a directory in the path '%s' is a file; choose another "
		    "path",
		    rel);
		return r;
	case -EFBIG:
		errmsg_set(err, errlen,
		           "the file is too large for the workspace");
		return r;
	default:
		errmsg_set(err, errlen, "cannot write '%s': %s", rel,
		           strerror(-r));
		return r;
	}
}

int workspace_write_file(struct workspace *ws, const char *rel,
                         const void *data, size_t len, bool overwrite,
                         char *err, size_t errlen)
{
	char dir[FSNAME_PATH_MAX + 1], tmp[40];
	const char *base;
	unsigned char rnd[8];
	struct stat st;
	uid_t uid;
	gid_t gid;
	int dfd = -1, fd = -1, r;

	if (err && errlen)
		err[0] = '\0';
	if (fsname_check(rel, strlen(rel), NULL, err, errlen) < 0)
		return -EINVAL;
	r = workspace_check_quota(ws, len ? len : 1, err, errlen);
	if (r < 0)
		return r;
	owner(ws, &uid, &gid);
	base = strrchr(rel, '/');
	snprintf(dir, sizeof(dir), "%.*s", base ? (int)(base - rel) : 0, rel);
	base = base ? base + 1 : rel;
	dfd = fstree_mkdirs(workspace_dirfd(ws), dir, uid, gid);
	if (dfd < 0) {
		r = write_error(dfd, rel, err, errlen);
		goto out;
	}
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			r = errmsg_fail(
			    -EISDIR, err, errlen,
			    "'%s' is a directory; choose another name", rel);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			r = errmsg_fail(
			    -EEXIST, err, errlen,
			    "'%s' exists and is not a regular file (a "
			    "link, FIFO or socket made by code); delete "
			    "it first or choose another name",
			    rel);
			goto out;
		}
		if (!overwrite) {
			r = errmsg_fail(
			    -EEXIST, err, errlen,
			    "'%s' already exists; pass overwrite: true "
			    "to replace it, or choose another name",
			    rel);
			goto out;
		}
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		r = -EIO;
		goto out;
	}
	snprintf(tmp, sizeof(tmp), ".mcpsd-%02x%02x%02x%02x%02x%02x%02x%02x",
	         rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6],
	         rnd[7]);
	fd = openat(dfd, tmp,
	            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = write_error(-errno, rel, err, errlen);
		goto out;
	}
	r = write_all(fd, data, len);
	if (r == 0 && uid != (uid_t)-1 && fchown(fd, uid, gid) < 0)
		r = -errno;
	if (r == 0 && fchmod(fd, 0644) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	fd = -1;
	if (r == 0) {
		r = overwrite
		        ? renameat(dfd, tmp, dfd, base)
		        : renameat2(dfd, tmp, dfd, base, RENAME_NOREPLACE);
		r = r < 0 ? -errno : 0;
	}
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		if (r == -EEXIST)
			errmsg_set(
			    err, errlen,
			    "'%s' already exists; pass overwrite: true to "
			    "replace it",
			    rel);
		else
			r = write_error(r, rel, err, errlen);
	}
out:
	if (dfd >= 0)
		close(dfd);
	return r;
}

/* ---- run support --------------------------------------------------------- */

struct snap_entry {
	char *rel;
	mode_t mode;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

struct workspace_snapshot {
	struct snap_entry *v;
	size_t n, cap;
};

static int snap_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_entry *)a)->rel,
	              ((const struct snap_entry *)b)->rel);
}

static int snap_add(struct workspace_snapshot *s, const struct fstree_entry *e)
{
	struct snap_entry *x;

	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;
		struct snap_entry *p = realloc(s->v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->v = p;
		s->cap = ncap;
	}
	x = &s->v[s->n];
	x->rel = strdup(e->rel);
	if (!x->rel)
		return -ENOMEM;
	x->mode = e->st->st_mode;
	x->ino = e->st->st_ino;
	x->size = e->st->st_size;
	x->mtime = e->st->st_mtim;
	x->ctime = e->st->st_ctim;
	s->n++;
	return 0;
}

static const struct {
	const char *rel;
	bool is_dir;
	enum workspace_own own;
} workspace_own_paths[] = {
    /* The installers' cache: thousands of files no result lists. */
    {".mcp/packages", true, WORKSPACE_OWN_HIDDEN},
    /* The frames view_table pages for the run viewer (tools/view/). */
    {".mcp/view", true, WORKSPACE_OWN_HIDDEN},
    /* The last value's frame, as kernel.py writes it, and its draft. */
    {".mcp/value.json", false, WORKSPACE_OWN_HIDDEN},
    {".mcp/value.json.tmp", false, WORKSPACE_OWN_HIDDEN},
    /* Durable sessions' saved interpreter states (docs/sessions.md),
     * never served or read by the file tools either (files.h). */
    {".mcp/state", true, WORKSPACE_OWN_HIDDEN},
    /* The notebook the daemon rewrites after every run (tools/notebook/). */
    {".mcp/notebook.ipynb", false, WORKSPACE_OWN_LISTED},
};

enum workspace_own workspace_own_path(const char *rel, bool is_dir)
{
	for (size_t i = 0;
	     i < sizeof(workspace_own_paths) / sizeof(workspace_own_paths[0]);
	     i++)
		if (workspace_own_paths[i].is_dir == is_dir &&
		    strcmp(workspace_own_paths[i].rel, rel) == 0)
			return workspace_own_paths[i].own;
	return WORKSPACE_OWN_NONE;
}

static enum workspace_own own_of(const struct fstree_entry *e)
{
	return workspace_own_path(e->rel, S_ISDIR(e->st->st_mode));
}

static int snap_visit(void *data, const struct fstree_entry *e)
{
	enum workspace_own own = own_of(e);

	if (S_ISDIR(e->st->st_mode))
		return own == WORKSPACE_OWN_HIDDEN ? FSTREE_WALK_SKIP : 0;
	if (own != WORKSPACE_OWN_NONE)
		return 0;
	return snap_add(data, e);
}

void workspace_snapshot_destroy(struct workspace_snapshot *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->n; i++)
		free(snap->v[i].rel);
	free(snap->v);
	free(snap);
}

static size_t walk_max(const struct workspace *ws)
{
	return (size_t)workspace_mgr_config(workspace_mgr_of(ws))
	           ->workspace_max_files +
	       SNAPSHOT_EXTRA;
}

int workspace_snapshot_create(struct workspace *ws,
                              struct workspace_snapshot **out)
{
	struct workspace_snapshot *s = calloc(1, sizeof(*s));
	int r;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	r = fstree_walk(workspace_dirfd(ws), "", walk_max(ws), snap_visit, s,
	                NULL);
	if (r < 0) {
		workspace_snapshot_destroy(s);
		return r;
	}
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), snap_cmp);
	*out = s;
	return 0;
}

struct changes {
	const struct workspace_snapshot *before;
	struct workspace_snapshot found; /* created or changed, regular */
	unsigned char *created;          /* parallel to found.v */
	size_t created_cap;
	size_t skipped;
};

static const struct snap_entry *snap_find(const struct workspace_snapshot *s,
                                          const char *rel)
{
	struct snap_entry key = {.rel = (char *)(uintptr_t)rel};

	if (!s || !s->n)
		return NULL;
	return bsearch(&key, s->v, s->n, sizeof(*s->v), snap_cmp);
}

static int changes_visit(void *data, const struct fstree_entry *e)
{
	struct changes *c = data;
	const struct snap_entry *old;
	const struct stat *st = e->st;
	enum workspace_own own = own_of(e);

	if (S_ISDIR(st->st_mode))
		return own == WORKSPACE_OWN_HIDDEN ? FSTREE_WALK_SKIP : 0;
	/* Not a run's output: a result looks the same with or without it. */
	if (own != WORKSPACE_OWN_NONE)
		return 0;
	old = snap_find(c->before, e->rel);
	if (!S_ISREG(st->st_mode)) {
		if (!old || old->mode != st->st_mode)
			c->skipped++;
		return 0;
	}
	if (old && S_ISREG(old->mode) && old->ino == st->st_ino &&
	    old->size == st->st_size &&
	    old->mtime.tv_sec == st->st_mtim.tv_sec &&
	    old->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	    old->ctime.tv_sec == st->st_ctim.tv_sec &&
	    old->ctime.tv_nsec == st->st_ctim.tv_nsec)
		return 0;
	if (c->found.n == c->created_cap) {
		size_t ncap = c->created_cap ? c->created_cap * 2 : 64;
		unsigned char *p = realloc(c->created, ncap);

		if (!p)
			return -ENOMEM;
		c->created = p;
		c->created_cap = ncap;
	}
	c->created[c->found.n] = old == NULL;
	return snap_add(&c->found, e);
}

static int cmp_index(const void *a, const void *b, void *arg)
{
	const struct snap_entry *v = arg;

	return strcmp(v[*(const size_t *)a].rel, v[*(const size_t *)b].rel);
}

static cJSON *change_item(struct workspace *ws, const struct snap_entry *x,
                          bool created)
{
	char when[FILES_ISO8601_LEN];
	cJSON *o = cJSON_CreateObject();
	char *path = buf_asprintf("/data/%s", x->rel);
	char *url = workspace_file_url(workspace_mgr_of(ws), ws, x->rel);
	char *uri = workspace_resource_uri(ws, x->rel);

	if (!o || !path || !url || (workspace_conversation_id(ws) && !uri)) {
		cJSON_Delete(o);
		o = NULL;
		goto out;
	}
	files_iso8601(x->mtime.tv_sec, when);
	cJSON_AddStringToObject(o, "name", x->rel);
	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddNumberToObject(o, "size", (double)x->size);
	cJSON_AddStringToObject(o, "mimeType", files_mime_base(x->rel));
	cJSON_AddStringToObject(o, "url", url);
	if (uri)
		cJSON_AddStringToObject(o, "uri", uri);
	cJSON_AddStringToObject(o, "modified", when);
	cJSON_AddStringToObject(o, "status", created ? "created" : "modified");
out:
	free(path);
	free(url);
	free(uri);
	return o;
}

int workspace_changes(struct workspace *ws,
                      const struct workspace_snapshot *before,
                      size_t max_entries, cJSON **files,
                      struct workspace_changes_info *info)
{
	struct changes c;
	struct fstree_walk_stats ws_stats;
	size_t *order = NULL;
	cJSON *arr = NULL;
	int r;

	*files = NULL;
	if (info)
		memset(info, 0, sizeof(*info));
	if (max_entries > WORKSPACE_CHANGES_MAX)
		max_entries = WORKSPACE_CHANGES_MAX;
	memset(&c, 0, sizeof(c));
	c.before = before;
	r = fstree_walk(workspace_dirfd(ws), "", walk_max(ws), changes_visit,
	                &c, &ws_stats);
	if (r < 0)
		goto out;
	order = malloc((c.found.n ? c.found.n : 1) * sizeof(*order));
	arr = cJSON_CreateArray();
	if (!order || !arr) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.found.n; i++)
		order[i] = i;
	qsort_r(order, c.found.n, sizeof(*order), cmp_index, c.found.v);
	for (size_t i = 0; i < c.found.n && i < max_entries; i++) {
		cJSON *o =
		    change_item(ws, &c.found.v[order[i]], c.created[order[i]]);

		if (!o) {
			r = -ENOMEM;
			goto out;
		}
		cJSON_AddItemToArray(arr, o);
	}
	if (info) {
		info->changed = c.found.n;
		info->truncated = c.found.n > max_entries || ws_stats.truncated;
		info->skipped = c.skipped;
		info->unnamed = ws_stats.invalid_names;
	}
	*files = arr;
	arr = NULL;
out:
	cJSON_Delete(arr);
	free(order);
	for (size_t i = 0; i < c.found.n; i++)
		free(c.found.v[i].rel);
	free(c.found.v);
	free(c.created);
	return r;
}

/* ---- saved output -------------------------------------------------------- */

#define SAVED_DIR ".mcp"
#define SAVED_NAME_LEN 34 /* "stdout-YYYYMMDDTHHMMSSZ-xxxxxx.txt" */

struct saved_file {
	char name[SAVED_NAME_LEN + 1];
	unsigned long long size;
	struct timespec mtime;
};

struct saved_list {
	struct saved_file *v;
	size_t n, cap;
	unsigned long long bytes;
};

/* Whether name has the shape of a saved output's name. */
static bool saved_name(const char *name)
{
	/* After the stream: D a digit, h a lowercase hex digit. */
	static const char shape[] = "DDDDDDDDTDDDDDDZ-hhhhhh.txt";

	if (strlen(name) != SAVED_NAME_LEN ||
	    (strncmp(name, "stdout-", 7) != 0 &&
	     strncmp(name, "stderr-", 7) != 0))
		return false;
	for (size_t i = 0; shape[i]; i++) {
		char c = name[7 + i];

		if (shape[i] == 'D' ? c < '0' || c > '9'
		    : shape[i] == 'h'
		        ? !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
		        : c != shape[i])
			return false;
	}
	return true;
}

static int saved_visit(void *data, const struct fstree_entry *e)
{
	struct saved_list *l = data;
	struct saved_file *f;

	/* Breadth first: an entry deeper down means .mcp's own are done. */
	if (e->name != e->rel + sizeof(SAVED_DIR))
		return 1;
	if (!S_ISREG(e->st->st_mode) || !saved_name(e->name))
		return 0;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		struct saved_file *p = realloc(l->v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = ncap;
	}
	f = &l->v[l->n++];
	snprintf(f->name, sizeof(f->name), "%s", e->name);
	f->size = (unsigned long long)e->st->st_size;
	f->mtime = e->st->st_mtim;
	l->bytes += f->size;
	return 0;
}

/* Oldest first; the name (which starts with the time) breaks ties. */
static int saved_cmp(const void *a, const void *b)
{
	const struct saved_file *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/*
 * Deletes the oldest saved outputs until need_files more fit cap_files,
 * need_bytes more fit cap_bytes and, when deleting can achieve it, the
 * free room of the workspace. Records what it deleted in pruned.
 */
static int saved_prune(struct workspace *ws, struct saved_list *l,
                       size_t need_files, unsigned long long need_bytes,
                       size_t cap_files, unsigned long long cap_bytes,
                       struct workspace_pruned *pruned)
{
	unsigned long long room = ULLONG_MAX;
	struct workspace_usage u;
	size_t left = l->n;
	int mfd;

	if (workspace_usage(ws, &u) == 0)
		room = u.quota_bytes > u.bytes ? u.quota_bytes - u.bytes : 0;
	/*
	 * When deleting every saved output would not make room, the save
	 * fails whatever is deleted: keep them all.
	 */
	if (room < need_bytes && room + l->bytes < need_bytes)
		return 0;
	mfd = fstree_open(workspace_dirfd(ws), SAVED_DIR,
	                  O_RDONLY | O_DIRECTORY, 0);
	if (mfd < 0)
		return mfd;
	for (size_t i = 0; i < l->n; i++) {
		const struct saved_file *f = &l->v[i];
		char path[sizeof("/data/" SAVED_DIR "/") + SAVED_NAME_LEN];

		if (left + need_files <= cap_files &&
		    l->bytes + need_bytes <= cap_bytes && need_bytes <= room)
			break;
		/* Never follows a link: unlinkat removes the name itself. */
		if (unlinkat(mfd, f->name, 0) < 0 && errno != ENOENT)
			continue;
		left--;
		l->bytes -= f->size;
		if (room != ULLONG_MAX)
			room += f->size;
		pruned->n++;
		pruned->bytes += f->size;
		if (pruned->n > WORKSPACE_PRUNED_LIST)
			continue;
		if (!pruned->paths && !(pruned->paths = cJSON_CreateArray()))
			continue;
		snprintf(path, sizeof(path), "/data/%s/%s", SAVED_DIR, f->name);
		cJSON_AddItemToArray(pruned->paths, cJSON_CreateString(path));
	}
	close(mfd);
	if (pruned->n)
		log_info("workspace %.12s: deleted %zu older saved outputs "
		         "(%llu bytes) to make room",
		         workspace_name(ws), pruned->n, pruned->bytes);
	return 0;
}

/* Writes one stream as a new saved output; fills o->rel/url or o->err. */
static int saved_write(struct workspace *ws, struct workspace_output *o)
{
	char rel[sizeof(SAVED_DIR) + SAVED_NAME_LEN + 1], when[17];
	unsigned char rnd[3];
	time_t t = time(NULL);
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm) != 16 ||
	    RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	snprintf(rel, sizeof(rel), "%s/%s-%s-%02x%02x%02x.txt", SAVED_DIR,
	         o->stream, when, rnd[0], rnd[1], rnd[2]);
	if (workspace_write_file(ws, rel, o->data, o->len, false, o->err,
	                         sizeof(o->err)) < 0) {
		log_warnx("workspace %.12s: cannot save %s: %s",
		          workspace_name(ws), o->stream, o->err);
		return 0;
	}
	o->rel = strdup(rel);
	o->url = workspace_file_url(workspace_mgr_of(ws), ws, rel);
	return o->rel && o->url ? 0 : -ENOMEM;
}

int workspace_save_outputs(struct workspace *ws, struct workspace_output *v,
                           size_t n, struct workspace_pruned *pruned)
{
	const struct config *cfg = workspace_mgr_config(workspace_mgr_of(ws));
	unsigned long long cap_bytes = cfg->output_saved_bytes, need_bytes = 0;
	size_t cap_files = cfg->output_saved_files, need_files = 0;
	struct saved_list l = {0};
	bool want[2] = {false, false};
	int r;

	memset(pruned, 0, sizeof(*pruned));
	if (n > 2)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		v[i].rel = v[i].url = NULL;
		v[i].err[0] = '\0';
		if (strcmp(v[i].stream, "stdout") != 0 &&
		    strcmp(v[i].stream, "stderr") != 0)
			return -EINVAL;
	}
	/* Saved output never takes more than half of what code may use. */
	if (cap_bytes > cfg->workspace_quota_bytes / 2)
		cap_bytes = cfg->workspace_quota_bytes / 2;
	for (size_t i = 0; i < n; i++) {
		if (cap_files == 0 || cap_bytes == 0) {
			errmsg_set(v[i].err, sizeof(v[i].err),
			           "this server does not save whole outputs");
		} else if (need_files + 1 > cap_files ||
		           need_bytes + v[i].len > cap_bytes) {
			errmsg_set(v[i].err, sizeof(v[i].err),
			           "saved outputs may take %llu bytes and %zu "
			           "files in a conversation, and this one does "
			           "not fit%s",
			           cap_bytes, cap_files,
			           need_files ? " beside the other stream's"
			                      : "");
		} else {
			want[i] = true;
			need_files++;
			need_bytes += v[i].len;
		}
	}
	if (need_files == 0)
		return 0;
	/*
	 * A .mcp that is missing has nothing to delete; one that code made
	 * a link or a file cannot be listed, and the writes below say why.
	 */
	r = fstree_walk(workspace_dirfd(ws), SAVED_DIR, walk_max(ws),
	                saved_visit, &l, NULL);
	if (r == 0 && l.n) {
		qsort(l.v, l.n, sizeof(*l.v), saved_cmp);
		r = saved_prune(ws, &l, need_files, need_bytes, cap_files,
		                cap_bytes, pruned);
	}
	if (r == -ENOMEM)
		goto out;
	r = 0;
	for (size_t i = 0; i < n && r == 0; i++)
		if (want[i])
			r = saved_write(ws, &v[i]);
out:
	free(l.v);
	return r;
}

void workspace_outputs_finish(struct workspace_output *v, size_t n,
                              struct workspace_pruned *pruned)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].rel);
		free(v[i].url);
		v[i].rel = v[i].url = NULL;
	}
	if (pruned) {
		cJSON_Delete(pruned->paths);
		memset(pruned, 0, sizeof(*pruned));
	}
}
