/* SPDX-License-Identifier: MIT */
/*
 * tools_files: argument checking, the three file tools and the workspace
 * resource provider. Paths are checked with fsname before a workspace is
 * opened, writes go through workspace_write_file (openat2 beneath the
 * workspace, temp file and rename), reads through fstree_open_regular.
 */
#include "tools/tools_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fs/fsname.h"
#include "fs/fstree.h"
#include "run/run_arguments.h"
#include "tools/tools_content.h"
#include "util/b64.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/pct.h"
#include "workspace/files.h"

#define LOCK_TIMEOUT_MS 30000
#define LIST_DEFAULT 200
#define LIST_MAX 1000
#define SKIPPED_MAX 50

/* ---- arguments ----------------------------------------------------------- */

/*
 * A string argument. Returns 0 with *out (borrowed; NULL when absent and
 * optional), or -EINVAL with an error result in *res.
 */
static int arg_string(const cJSON *args, const char *key, bool required,
                      const char **out, cJSON **res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v)) {
		if (!required)
			return 0;
		*res = mcp_text_resultf(true, "argument '%s' is required", key);
		return -EINVAL;
	}
	if (!cJSON_IsString(v)) {
		*res = mcp_text_resultf(true, "argument '%s' must be a string",
		                        key);
		return -EINVAL;
	}
	*out = v->valuestring;
	return 0;
}

static int arg_bool(const cJSON *args, const char *key, bool *out, cJSON **res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);

	*out = false;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v)) {
		*res = mcp_text_resultf(
		    true, "argument '%s' must be true or false", key);
		return -EINVAL;
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

/* A conversationId's text, checked (as workspace_open would). */
static int arg_conv_check(const char *conv, cJSON **res)
{
	char err[400];

	if (workspace_check_conversation_id(conv, err, sizeof(err)) < 0) {
		*res = mcp_text_result(err, true);
		return -EINVAL;
	}
	return 0;
}

/*
 * conversationId, checked. Without one, a tool that reads a workspace has
 * nothing to find: the message says which id to pass.
 */
static int arg_conv(const cJSON *args, const char **out, cJSON **res)
{
	if (arg_string(args, "conversationId", false, out, res) < 0)
		return -EINVAL;
	if (!*out) {
		*res = mcp_text_result(
		    "conversationId is required: pass the conversationId that "
		    "run_code (or upload_file) returned or was given earlier "
		    "in this chat; a chat with no such call has no files yet",
		    true);
		return -EINVAL;
	}
	return arg_conv_check(*out, res);
}

/* A relative path argument, checked with fsname. */
static int arg_path(const cJSON *args, const char *key, const char **out,
                    cJSON **res)
{
	char err[512];

	if (arg_string(args, key, true, out, res) < 0)
		return -EINVAL;
	if (fsname_check(*out, strlen(*out), NULL, err, sizeof(err)) < 0) {
		*res = mcp_text_resultf(true, "%s: %s", key, err);
		return -EINVAL;
	}
	return 0;
}

/* Opens the workspace; on failure *res is an error result. */
static int open_ws(struct workspace_mgr *mgr, const char *tenant,
                   const char *conv, bool create, struct workspace **ws,
                   cJSON **res)
{
	char err[512] = "";
	int r = workspace_open(mgr, tenant, conv, create, ws, err, sizeof(err));

	if (r < 0 && r != -ENOENT)
		*res = mcp_text_result(err[0] ? err
		                              : "the workspace cannot be "
		                                "opened now; try again later",
		                       true);
	return r;
}

static int lock_ws(struct workspace *ws, cJSON **res)
{
	int r = workspace_lock(ws, LOCK_TIMEOUT_MS);

	if (r < 0)
		*res = mcp_text_resultf(true,
		                        "a run or upload of this conversation "
		                        "is still in progress after %d s; try "
		                        "again when it has finished",
		                        LOCK_TIMEOUT_MS / 1000);
	return r;
}

/* ---- upload_file -----------------------------------------------------------
 */

static void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32)
		return;
	hex_encode(md, 32, out);
}

/* A resource_link content item for a file. */
static cJSON *link_item(const char *url, const char *rel, const char *mime,
                        double size)
{
	cJSON *o = cJSON_CreateObject();
	char path[FSNAME_PATH_MAX + 8];

	if (!o)
		return NULL;
	snprintf(path, sizeof(path), "/data/%s", rel);
	cJSON_AddStringToObject(o, "type", "resource_link");
	cJSON_AddStringToObject(o, "uri", url);
	cJSON_AddStringToObject(o, "name", rel);
	cJSON_AddStringToObject(o, "title", path);
	cJSON_AddStringToObject(o, "mimeType", mime);
	cJSON_AddNumberToObject(o, "size", size);
	return o;
}

/*
 * The result of an upload. conv is the conversation's id; minted: the
 * server made it, and the text's first line says to pass it on.
 */
static cJSON *upload_result(struct workspace_mgr *mgr, struct workspace *ws,
                            const char *rel, size_t len, const char *sha,
                            const char *conv, bool minted)
{
	const char *mime = files_mime_base(rel);
	char *url = workspace_file_url(mgr, ws, rel);
	char *uri = workspace_resource_uri(ws, rel);
	cJSON *res = NULL, *sc, *content;

	if (!url || !uri)
		goto out;
	res = mcp_text_resultf(false,
	                       "%s%s%s"
	                       "Saved /data/%s (%zu bytes, %s, SHA-256 %s).\n"
	                       "URL: %s\nCode in run_code reads it as "
	                       "/data/%s.",
	                       minted ? "conversationId: " : "",
	                       minted ? conv : "",
	                       minted ? " (new: pass it as conversationId in "
	                                "every later call of this chat to "
	                                "keep its files and state)\n"
	                              : "",
	                       rel, len, mime, sha, url, rel);
	content = cJSON_GetObjectItemCaseSensitive(res, "content");
	sc = cJSON_CreateObject();
	if (!res || !content || !sc) {
		cJSON_Delete(sc);
		cJSON_Delete(res);
		res = NULL;
		goto out;
	}
	cJSON_AddItemToArray(content, link_item(url, rel, mime, (double)len));
	cJSON_AddStringToObject(sc, "name", rel);
	{
		char path[FSNAME_PATH_MAX + 8];

		snprintf(path, sizeof(path), "/data/%s", rel);
		cJSON_AddStringToObject(sc, "path", path);
	}
	cJSON_AddNumberToObject(sc, "size", (double)len);
	cJSON_AddStringToObject(sc, "sha256", sha);
	cJSON_AddStringToObject(sc, "mimeType", mime);
	cJSON_AddStringToObject(sc, "url", url);
	cJSON_AddStringToObject(sc, "uri", uri);
	cJSON_AddStringToObject(sc, "conversationId", conv);
	cJSON_AddItemToObject(res, "structuredContent", sc);
out:
	free(url);
	free(uri);
	return res;
}

cJSON *tools_files_upload(struct workspace_mgr *mgr, const char *tenant,
                          const cJSON *args)
{
	const struct config *cfg = workspace_mgr_config(mgr);
	const char *conv, *rel, *b64, *text;
	struct workspace *ws = NULL;
	unsigned char *buf = NULL;
	const void *data;
	cJSON *res = NULL;
	size_t len = 0;
	bool overwrite;
	char err[600], sha[65], minted[RUN_ARGUMENTS_CONV_MINT_LEN + 1];
	int r;

	/* An upload may open a chat, as run_code may: it mints an id too. */
	if (run_arguments_conversation_id(args, minted, &conv, err,
	                                  sizeof(err)) < 0)
		return mcp_text_result(err, true);
	if ((!minted[0] && arg_conv_check(conv, &res) < 0) ||
	    arg_path(args, "filename", &rel, &res) < 0 ||
	    arg_string(args, "content", false, &b64, &res) < 0 ||
	    arg_string(args, "text", false, &text, &res) < 0 ||
	    arg_bool(args, "overwrite", &overwrite, &res) < 0)
		return res;
	if (b64 && text)
		return mcp_text_result("give the file's content either as "
		                       "'content' (base64) or as 'text' "
		                       "(UTF-8), not both",
		                       true);
	if (!b64 && !text)
		return mcp_text_result("give the file's content as 'content' "
		                       "(base64) or as 'text' (UTF-8)",
		                       true);
	if (text) {
		len = strlen(text);
		data = text;
		if (!fsname_utf8_valid(text, len))
			return mcp_text_result("'text' is not valid UTF-8; "
			                       "send binary files as 'content' "
			                       "(base64)",
			                       true);
	} else {
		size_t n = strlen(b64);

		if (n / 4 * 3 > cfg->upload_max_bytes + 2)
			return mcp_text_resultf(
			    true,
			    "the file is about %zu bytes, over the upload "
			    "limit of %zu bytes; upload a smaller file or "
			    "split it",
			    n / 4 * 3, cfg->upload_max_bytes);
		buf = malloc(n / 4 * 3 + 1);
		if (!buf)
			return NULL;
		if (b64_decode(b64, n, buf, &len, err, sizeof(err)) < 0) {
			free(buf);
			return mcp_text_result(err, true);
		}
		data = buf;
	}
	if (len > cfg->upload_max_bytes) {
		res = mcp_text_resultf(true,
		                       "the file is %zu bytes, over the upload "
		                       "limit of %zu bytes; upload a smaller "
		                       "file or split it",
		                       len, cfg->upload_max_bytes);
		goto out;
	}
	if (open_ws(mgr, tenant, conv, true, &ws, &res) < 0 ||
	    lock_ws(ws, &res) < 0)
		goto out;
	r = workspace_write_file(ws, rel, data, len, overwrite, err,
	                         sizeof(err));
	if (r < 0) {
		res = mcp_text_result(err[0] ? err : "the upload failed", true);
		goto out;
	}
	sha256_hex(data, len, sha);
	res = upload_result(mgr, ws, rel, len, sha, conv, minted[0] != '\0');
out:
	workspace_close(ws);
	free(buf);
	return res;
}

/* ---- list_files ------------------------------------------------------------
 */

struct listed {
	char *rel;
	long long size;
	time_t mtime;
};

struct listing {
	struct listed *v;
	size_t n, cap;
	bool own; /* asked for /data/.mcp: the daemon's listed files too */
	cJSON *skipped; /* array */
	size_t n_skipped;
};

static const char *kind_of(mode_t m)
{
	if (S_ISLNK(m))
		return "symlink";
	if (S_ISFIFO(m))
		return "fifo";
	if (S_ISSOCK(m))
		return "socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "device";
	return "other";
}

static int list_visit(void *data, const struct fstree_entry *e)
{
	struct listing *l = data;

	/*
	 * What the daemon keeps in /data for itself (workspace.h): its
	 * directories only when asked for by path, its files never.
	 */
	enum workspace_own own =
	    workspace_own_path(e->rel, S_ISDIR(e->st->st_mode));

	if (own == WORKSPACE_OWN_HIDDEN)
		return S_ISDIR(e->st->st_mode) ? FSTREE_WALK_SKIP : 0;
	/* The notebook: its link is in the results; listed when asked for. */
	if (own == WORKSPACE_OWN_LISTED && !l->own)
		return 0;
	if (S_ISDIR(e->st->st_mode))
		return 0;
	if (!S_ISREG(e->st->st_mode)) {
		if (l->n_skipped++ < SKIPPED_MAX) {
			cJSON *o = cJSON_CreateObject();

			if (!o)
				return -ENOMEM;
			cJSON_AddStringToObject(o, "name", e->rel);
			cJSON_AddStringToObject(o, "type",
			                        kind_of(e->st->st_mode));
			cJSON_AddItemToArray(l->skipped, o);
		}
		return 0;
	}
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct listed *p = realloc(l->v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = ncap;
	}
	l->v[l->n].rel = strdup(e->rel);
	if (!l->v[l->n].rel)
		return -ENOMEM;
	l->v[l->n].size = (long long)e->st->st_size;
	l->v[l->n].mtime = e->st->st_mtim.tv_sec;
	l->n++;
	return 0;
}

static int listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->rel,
	              ((const struct listed *)b)->rel);
}

/* Normalizes the optional directory argument; "" is the root. */
static int arg_dir(const cJSON *args, char *out, size_t outlen, cJSON **res)
{
	const char *p;
	size_t n;
	char err[512];

	out[0] = '\0';
	if (arg_string(args, "path", false, &p, res) < 0)
		return -EINVAL;
	if (!p || !p[0] || strcmp(p, ".") == 0 || strcmp(p, "/") == 0 ||
	    strcmp(p, "/data") == 0 || strcmp(p, "/data/") == 0)
		return 0;
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		n--;
	if (fsname_check(p, n, NULL, err, sizeof(err)) < 0) {
		*res = mcp_text_resultf(true, "path: %s", err);
		return -EINVAL;
	}
	snprintf(out, outlen, "%.*s", (int)n, p);
	if (files_is_private(out)) {
		*res = mcp_text_resultf(
		    true,
		    "path: %s holds the conversation's saved Python "
		    "state, which is not listed (docs/sessions.md)",
		    out);
		return -EINVAL;
	}
	return 0;
}

static cJSON *empty_listing(const char *conv)
{
	cJSON *res = mcp_text_resultf(false,
	                              "No files yet in /data for "
	                              "conversation '%s'.",
	                              conv);
	cJSON *sc = cJSON_CreateObject();

	if (!res || !sc) {
		cJSON_Delete(res);
		cJSON_Delete(sc);
		return NULL;
	}
	cJSON_AddArrayToObject(sc, "files");
	cJSON_AddNumberToObject(sc, "count", 0);
	cJSON_AddFalseToObject(sc, "truncated");
	cJSON_AddArrayToObject(sc, "skipped");
	cJSON_AddItemToObject(res, "structuredContent", sc);
	return res;
}

static int list_limit(const cJSON *args, size_t *limit, cJSON **res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, "limit");

	*limit = LIST_DEFAULT;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
	    v->valuedouble > LIST_MAX ||
	    v->valuedouble != (double)(long)v->valuedouble) {
		*res = mcp_text_resultf(true,
		                        "limit must be a whole number from 1 "
		                        "to %d",
		                        LIST_MAX);
		return -EINVAL;
	}
	*limit = (size_t)v->valuedouble;
	return 0;
}

/* Builds the list_files result from a finished listing. */
static cJSON *listing_result(struct workspace_mgr *mgr, struct workspace *ws,
                             struct listing *l, size_t limit,
                             const struct fstree_walk_stats *st,
                             const char *dir)
{
	struct workspace_usage u;
	struct buf text;
	cJSON *res = NULL, *sc = cJSON_CreateObject(), *arr;
	bool truncated = l->n > limit || st->truncated;
	size_t shown = l->n < limit ? l->n : limit;

	buf_init(&text, 0);
	arr = sc ? cJSON_AddArrayToObject(sc, "files") : NULL;
	if (!arr)
		goto fail;
	if (buf_printf(&text, "%zu file%s in /data%s%s%s:\n", l->n,
	               l->n == 1 ? "" : "s", dir[0] ? "/" : "", dir,
	               truncated ? " (list truncated)" : "") < 0)
		goto fail;
	for (size_t i = 0; i < shown; i++) {
		const struct listed *x = &l->v[i];
		char when[FILES_ISO8601_LEN], path[FSNAME_PATH_MAX + 8];
		char *url = workspace_file_url(mgr, ws, x->rel);
		char *uri = workspace_resource_uri(ws, x->rel);
		cJSON *o = cJSON_CreateObject();
		const char *mime = files_mime_base(x->rel);

		if (!url || !uri || !o) {
			free(url);
			free(uri);
			cJSON_Delete(o);
			goto fail;
		}
		files_iso8601(x->mtime, when);
		snprintf(path, sizeof(path), "/data/%s", x->rel);
		cJSON_AddStringToObject(o, "name", x->rel);
		cJSON_AddStringToObject(o, "path", path);
		cJSON_AddNumberToObject(o, "size", (double)x->size);
		cJSON_AddStringToObject(o, "mimeType", mime);
		cJSON_AddStringToObject(o, "modified", when);
		cJSON_AddStringToObject(o, "url", url);
		cJSON_AddStringToObject(o, "uri", uri);
		cJSON_AddItemToArray(arr, o);
		if (buf_printf(&text, "- %s  %lld bytes  %s  %s  %s\n", x->rel,
		               x->size, mime, when, url) < 0) {
			free(url);
			free(uri);
			goto fail;
		}
		free(url);
		free(uri);
	}
	cJSON_AddNumberToObject(sc, "count", (double)l->n);
	cJSON_AddBoolToObject(sc, "truncated", truncated);
	cJSON_AddItemToObject(sc, "skipped", l->skipped);
	l->skipped = NULL;
	if (l->n_skipped &&
	    buf_printf(&text,
	               "%zu entr%s skipped: links, FIFOs, sockets or devices "
	               "made by code are never listed or served.\n",
	               l->n_skipped, l->n_skipped == 1 ? "y" : "ies") < 0)
		goto fail;
	if (st->invalid_names || st->too_deep) {
		cJSON_AddNumberToObject(
		    sc, "unlistedNames",
		    (double)(st->invalid_names + st->too_deep));
		if (buf_printf(&text,
		               "%zu name%s not listed: not valid file names "
		               "(control characters, invalid UTF-8, ...) or "
		               "nested deeper than %d levels.\n",
		               st->invalid_names + st->too_deep,
		               st->invalid_names + st->too_deep == 1 ? "" : "s",
		               FSNAME_DEPTH_MAX) < 0)
			goto fail;
	}
	if (workspace_usage(ws, &u) == 0) {
		cJSON_AddItemToObject(sc, "usage", tools_content_usage(&u));
		if (buf_printf(&text,
		               "Workspace: %llu of %llu bytes, %llu of %llu "
		               "files%s.\n",
		               u.bytes, u.quota_bytes, u.files, u.quota_files,
		               u.over ? " (OVER QUOTA: delete files)" : "") < 0)
			goto fail;
	}
	res = mcp_text_result(text.data, false);
	if (!res)
		goto fail;
	cJSON_AddItemToObject(res, "structuredContent", sc);
	buf_finish(&text);
	return res;
fail:
	buf_finish(&text);
	cJSON_Delete(sc);
	return NULL;
}

cJSON *tools_files_list(struct workspace_mgr *mgr, const char *tenant,
                        const cJSON *args)
{
	const struct config *cfg = workspace_mgr_config(mgr);
	struct fstree_walk_stats st;
	struct listing l;
	struct workspace *ws = NULL;
	const char *conv;
	char dir[FSNAME_PATH_MAX + 1];
	cJSON *res = NULL;
	size_t limit;
	int r;

	memset(&l, 0, sizeof(l));
	if (arg_conv(args, &conv, &res) < 0 ||
	    arg_dir(args, dir, sizeof(dir), &res) < 0 ||
	    list_limit(args, &limit, &res) < 0)
		return res;
	r = open_ws(mgr, tenant, conv, false, &ws, &res);
	if (r == -ENOENT)
		return empty_listing(conv);
	if (r < 0)
		return res;
	l.own = strcmp(dir, ".mcp") == 0 || strncmp(dir, ".mcp/", 5) == 0;
	l.skipped = cJSON_CreateArray();
	if (!l.skipped)
		goto out;
	r = fstree_walk(workspace_dirfd(ws), dir,
	                (size_t)cfg->workspace_max_files + 1000, list_visit, &l,
	                &st);
	if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV) {
		res = mcp_text_resultf(true,
		                       "path: /data/%s is not a directory of "
		                       "this conversation; call list_files "
		                       "without a path to see everything",
		                       dir);
		goto out;
	}
	if (r < 0) {
		res = r == -ENOMEM ? NULL
		                   : mcp_text_resultf(true,
		                                      "cannot list the files: "
		                                      "%s",
		                                      strerror(-r));
		goto out;
	}
	if (l.n > 1)
		qsort(l.v, l.n, sizeof(*l.v), listed_cmp);
	res = listing_result(mgr, ws, &l, limit, &st, dir);
out:
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].rel);
	free(l.v);
	cJSON_Delete(l.skipped);
	workspace_close(ws);
	return res;
}

/* ---- delete_file ----------------------------------------------------------
 */

cJSON *tools_files_delete(struct workspace_mgr *mgr, const char *tenant,
                          const cJSON *args)
{
	const char *conv, *rel, *base;
	char dir[FSNAME_PATH_MAX + 1];
	struct workspace *ws = NULL;
	struct stat st;
	cJSON *res = NULL;
	bool recursive;
	int dfd = -1, r;

	if (arg_conv(args, &conv, &res) < 0 ||
	    arg_path(args, "filename", &rel, &res) < 0 ||
	    arg_bool(args, "recursive", &recursive, &res) < 0)
		return res;
	r = open_ws(mgr, tenant, conv, false, &ws, &res);
	if (r == -ENOENT)
		return mcp_text_resultf(true,
		                        "no file /data/%s: this conversation "
		                        "has no files yet",
		                        rel);
	if (r < 0 || lock_ws(ws, &res) < 0)
		goto out;
	base = strrchr(rel, '/');
	snprintf(dir, sizeof(dir), "%.*s", base ? (int)(base - rel) : 0, rel);
	base = base ? base + 1 : rel;
	dfd = fstree_open(workspace_dirfd(ws), dir, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0 || fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		res = mcp_text_resultf(true,
		                       "no file /data/%s; call list_files to "
		                       "see what exists",
		                       rel);
		goto out;
	}
	if (S_ISREG(st.st_mode)) {
		r = unlinkat(dfd, base, 0) < 0 ? -errno : 0;
	} else if (S_ISDIR(st.st_mode)) {
		r = unlinkat(dfd, base, AT_REMOVEDIR) < 0 ? -errno : 0;
		if ((r == -ENOTEMPTY || r == -EEXIST) && recursive)
			r = fstree_remove(dfd, base);
		else if (r == -ENOTEMPTY || r == -EEXIST) {
			res = mcp_text_resultf(
			    true,
			    "/data/%s is a directory that is not empty; pass "
			    "recursive: true to delete it with everything in "
			    "it",
			    rel);
			goto out;
		}
	} else {
		res = mcp_text_resultf(true,
		                       "/data/%s is a %s made by code, not a "
		                       "file; only regular files and "
		                       "directories can be deleted here (use "
		                       "rm in a run)",
		                       rel, kind_of(st.st_mode));
		goto out;
	}
	if (r < 0) {
		res = mcp_text_resultf(true, "cannot delete /data/%s: %s", rel,
		                       strerror(-r));
		goto out;
	}
	res = mcp_text_resultf(false, "Deleted /data/%s%s.", rel,
	                       S_ISDIR(st.st_mode) ? " (a directory)" : "");
	if (res) {
		cJSON *sc = cJSON_CreateObject();

		cJSON_AddStringToObject(sc, "name", rel);
		cJSON_AddBoolToObject(sc, "deleted", true);
		cJSON_AddStringToObject(
		    sc, "type", S_ISDIR(st.st_mode) ? "directory" : "file");
		cJSON_AddItemToObject(res, "structuredContent", sc);
	}
out:
	if (dfd >= 0)
		close(dfd);
	workspace_close(ws);
	return res;
}

/* ---- resources --------------------------------------------------------------
 */

/* Decodes percent-escapes of a conversation id exactly once; no NUL. */
static int decode_conv(const char *s, size_t n, char *out, size_t outlen)
{
	size_t len = 0;

	if (pct_decode(s, n, out, outlen, &len, NULL) < 0 || strlen(out) != len)
		return -EINVAL;
	return 0;
}

int tools_files_read_resource(struct workspace_mgr *mgr, const char *tenant,
                              const char *uri, cJSON **contents, char *err,
                              size_t errlen)
{
	static const char scheme[] = "sandbox://";
	const struct config *cfg = workspace_mgr_config(mgr);
	char conv[1024], rel[FSNAME_PATH_MAX + 1], why[512];
	const char *p, *slash;
	struct workspace *ws = NULL;
	char *data = NULL;
	size_t len = 0, blen = strlen(cfg->files_base_url);
	cJSON *o;
	int r;

	*contents = NULL;
	if (strncmp(uri, scheme, sizeof(scheme) - 1) == 0) {
		p = uri + sizeof(scheme) - 1;
		slash = strchr(p, '/');
		if (!slash || decode_conv(p, (size_t)(slash - p), conv,
		                          sizeof(conv)) < 0) {
			snprintf(err, errlen,
			         "a workspace URI is "
			         "sandbox://{conversationId}/{path}, e.g. "
			         "sandbox://chat-42/out/plot.png");
			return -EINVAL;
		}
		if (workspace_check_conversation_id(conv, err, errlen) < 0)
			return -EINVAL;
		if (fsname_url_decode(slash + 1, rel, sizeof(rel), NULL, NULL,
		                      why, sizeof(why)) < 0) {
			snprintf(err, errlen, "path: %s", why);
			return -EINVAL;
		}
		r = workspace_open(mgr, tenant, conv, false, &ws, why,
		                   sizeof(why));
	} else if (strncmp(uri, cfg->files_base_url, blen) == 0 &&
	           strncmp(uri + blen, "/files/", 7) == 0) {
		char name[WORKSPACE_NAME_LEN + 1];

		p = uri + blen + 7;
		slash = strchr(p, '/');
		if (!slash || slash - p != WORKSPACE_NAME_LEN)
			return -ENOENT;
		snprintf(name, sizeof(name), "%.*s", WORKSPACE_NAME_LEN, p);
		if (fsname_url_decode(slash + 1, rel, sizeof(rel), NULL, NULL,
		                      why, sizeof(why)) < 0) {
			snprintf(err, errlen, "path: %s", why);
			return -EINVAL;
		}
		r = workspace_open_by_name(mgr, name, &ws);
	} else {
		return -ENOENT;
	}
	if (r < 0) {
		snprintf(err, errlen, "no file /data/%s in that workspace",
		         rel);
		return r == -ENOENT ? -ENOENT : -EIO;
	}
	r = files_read(workspace_dirfd(ws), rel, cfg->upload_max_bytes, &data,
	               &len, NULL);
	workspace_close(ws);
	if (r == -EFBIG) {
		snprintf(err, errlen,
		         "/data/%s is larger than %zu bytes; fetch it from its "
		         "URL instead",
		         rel, cfg->upload_max_bytes);
		return -EINVAL;
	}
	if (r < 0) {
		snprintf(err, errlen, "no file /data/%s in that workspace",
		         rel);
		return r == -ENOMEM ? r : -ENOENT;
	}
	*contents = cJSON_CreateArray();
	o = cJSON_CreateObject();
	if (!*contents || !o) {
		cJSON_Delete(*contents);
		cJSON_Delete(o);
		*contents = NULL;
		free(data);
		return -ENOMEM;
	}
	cJSON_AddItemToArray(*contents, o);
	cJSON_AddStringToObject(o, "uri", uri);
	{
		const char *mime = files_mime_base(rel);

		cJSON_AddStringToObject(o, "mimeType", mime);
		if (files_is_text_type(mime) && fsname_utf8_valid(data, len) &&
		    !memchr(data, '\0', len)) {
			cJSON_AddStringToObject(o, "text", data);
		} else {
			char *b64 = malloc(4 * ((len + 2) / 3) + 1);

			if (!b64) {
				free(data);
				cJSON_Delete(*contents);
				*contents = NULL;
				return -ENOMEM;
			}
			EVP_EncodeBlock((unsigned char *)b64,
			                (const unsigned char *)data, (int)len);
			cJSON_AddStringToObject(o, "blob", b64);
			free(b64);
		}
	}
	free(data);
	return 0;
}

/* ---- registration
 * ------------------------------------------------------------ */

static cJSON *call_upload(void *data, struct mcp_call *call, const cJSON *args)
{
	return tools_files_upload(data, mcp_call_tenant(call), args);
}

static cJSON *call_list(void *data, struct mcp_call *call, const cJSON *args)
{
	return tools_files_list(data, mcp_call_tenant(call), args);
}

static cJSON *call_delete(void *data, struct mcp_call *call, const cJSON *args)
{
	return tools_files_delete(data, mcp_call_tenant(call), args);
}

static void res_templates(void *data, cJSON *list)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return;
	cJSON_AddStringToObject(o, "uriTemplate",
	                        "sandbox://{conversationId}/{path}");
	cJSON_AddStringToObject(o, "name", "workspace-file");
	cJSON_AddStringToObject(o, "title", "File in a conversation's /data");
	cJSON_AddStringToObject(
	    o, "description",
	    "A file in the /data directory of a conversation: conversationId "
	    "as run_code used or returned it, path relative to /data (e.g. "
	    "sandbox://chat-42/out/plot.png). Text files come back as text, "
	    "others as base64 blobs.");
	cJSON_AddItemToArray(list, o);
}

static int res_read(void *data, struct mcp_call *call, const char *uri,
                    cJSON **contents, char *err, size_t errlen)
{
	return tools_files_read_resource(data, mcp_call_tenant(call), uri,
	                                 contents, err, errlen);
}

#define CONV_PROP                                                              \
	"\"conversationId\":{\"type\":\"string\",\"description\":"             \
	"\"" TOOLS_CONV_KNOWN_DESCRIPTION "\"},"
/* upload_file may open a chat: its id may be left out, as run_code's. */
#define CONV_PROP_OPTIONAL                                                     \
	"\"conversationId\":{\"type\":\"string\",\"minLength\":1,"             \
	"\"maxLength\":256,\"description\":\"" TOOLS_CONV_DESCRIPTION "\"},"

static const char upload_in[] =
    "{\"type\":\"object\",\"properties\":{" CONV_PROP_OPTIONAL
    "\"filename\":{\"type\":\"string\",\"description\":\"Path in /data, "
    "e.g. 'in/sales.csv'; directories are created\"},"
    "\"content\":{\"type\":\"string\",\"contentEncoding\":\"base64\"},"
    "\"text\":{\"type\":\"string\",\"description\":\"UTF-8 text, "
    "instead of content\"},"
    "\"overwrite\":{\"type\":\"boolean\",\"default\":false}},"
    "\"required\":[\"filename\"]}";

static const char upload_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
    "\"size\":{\"type\":\"integer\"},\"sha256\":{\"type\":\"string\"},"
    "\"mimeType\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"},"
    "\"uri\":{\"type\":\"string\"},"
    "\"conversationId\":{\"type\":\"string\",\"description\":\"this "
    "chat's id: pass it on every later call of the chat\"}},"
    "\"required\":[\"name\",\"path\",\"size\",\"sha256\",\"mimeType\","
    "\"url\"]}";

static const char list_in[] =
    "{\"type\":\"object\",\"properties\":{" CONV_PROP
    "\"path\":{\"type\":\"string\",\"description\":\"Only below this "
    "directory of /data\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
    "\"default\":200}},"
    "\"required\":[\"conversationId\"]}";

static const char list_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
    "\"mimeType\":{\"type\":\"string\"},"
    "\"modified\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "\"url\":{\"type\":\"string\"},\"uri\":{\"type\":\"string\"}},"
    "\"required\":[\"name\",\"size\",\"mimeType\",\"modified\",\"url\"]}},"
    "\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"},"
    "\"skipped\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"type\":{\"type\":\"string\"}}}},"
    "\"unlistedNames\":{\"type\":\"integer\"},"
    "\"usage\":{\"type\":\"object\"}},"
    "\"required\":[\"files\",\"count\",\"truncated\"]}";

static const char delete_in[] =
    "{\"type\":\"object\",\"properties\":{" CONV_PROP
    "\"filename\":{\"type\":\"string\",\"description\":\"Path in /data "
    "of a file or directory\"},"
    "\"recursive\":{\"type\":\"boolean\",\"default\":false}},"
    "\"required\":[\"conversationId\",\"filename\"]}";

static const char delete_out[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"deleted\":{\"type\":\"boolean\"},\"type\":{\"type\":\"string\"}},"
    "\"required\":[\"name\",\"deleted\"]}";

static struct tool_impl tools[] = {
    {
        .name = "upload_file",
        .title = "Upload a file",
        .description =
            "Save a file into the conversation's /data for run_code. Give "
            "content (base64) or text; a file is replaced only with "
            "overwrite: true.",
        .input_schema = upload_in,
        .output_schema = upload_out,
        .call = call_upload,
    },
    {
        .name = "list_files",
        .title = "List files",
        .description =
            "List the files in the conversation's /data (size, type, "
            "modified time, URL).",
        .input_schema = list_in,
        .output_schema = list_out,
        .read_only = true,
        .idempotent = true,
        .call = call_list,
    },
    {
        .name = "delete_file",
        .title = "Delete a file",
        .description =
            "Delete a file or an empty directory (any directory with "
            "recursive: true) from the conversation's /data.",
        .input_schema = delete_in,
        .output_schema = delete_out,
        .destructive = true,
        .idempotent = true,
        .call = call_delete,
    },
};

static struct resource_provider provider = {
    .name = "workspace",
    .templates = res_templates,
    .read = res_read,
};

void tools_files_register(struct mcp_server *srv, struct workspace_mgr *mgr)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		tools[i].data = mgr;
		mcp_server_add_tool(srv, &tools[i]);
	}
	provider.data = mgr;
	mcp_server_add_resources(srv, &provider);
}
