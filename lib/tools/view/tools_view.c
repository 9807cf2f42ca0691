/* SPDX-License-Identifier: MIT */
/*
 * tools_view: the run viewer's resource, the view_table tool and what
 * run_code's result carries for it. See tools_view.h.
 */
#include "tools/view/tools_view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "fs/fstree.h"
#include "util/log.h"
#include "tools/view/table.h"
#include "workspace/files.h"

/* lib/tools/view/viewer.html, embedded at build time (embed.py). */
extern const char tools_view_html[];
extern const size_t tools_view_html_len;

#define TOOLS_VIEW_DIR ".mcp/view"
#define TOOLS_VIEW_ID_LEN 16 /* hex characters of a table id */

/*
 * The resource's _meta: no origin at all for connections, resources,
 * frames or a base URI; the host builds the frame's CSP from it.
 */
static const char tools_view_resource_meta[] =
    "{\"ui\":{\"csp\":{\"connectDomains\":[],\"resourceDomains\":[],"
    "\"frameDomains\":[],\"baseUriDomains\":[]},\"prefersBorder\":true}}";

/* ---- the resource ------------------------------------------------------- */

static void tools_view_list(void *data, struct mcp_call *call, cJSON *list)
{
	cJSON *r;

	(void)data;
	if (!mcp_call_client_has_ui(call))
		return;
	r = cJSON_CreateObject();
	if (!r || !cJSON_AddItemToArray(list, r)) {
		cJSON_Delete(r);
		return;
	}
	cJSON_AddStringToObject(r, "uri", TOOLS_VIEW_URI);
	cJSON_AddStringToObject(r, "name", "run-viewer");
	cJSON_AddStringToObject(r, "title", "Run viewer");
	cJSON_AddStringToObject(r, "description",
	                        "Shows a run_code result to a person: output, "
	                        "status, the last value as a table, figures, "
	                        "the conversation's files and the code");
	cJSON_AddStringToObject(r, "mimeType", MCP_UI_MIME);
	cJSON_AddItemToObject(r, "_meta",
	                      cJSON_Parse(tools_view_resource_meta));
}

static int tools_view_read(void *data, struct mcp_call *call, const char *uri,
                           cJSON **contents, char *err, size_t errlen)
{
	cJSON *arr, *c;

	(void)data;
	(void)call;
	(void)err;
	(void)errlen;
	if (strcmp(uri, TOOLS_VIEW_URI) != 0)
		return -ENOENT;
	arr = cJSON_CreateArray();
	c = cJSON_CreateObject();
	if (!arr || !c || !cJSON_AddItemToArray(arr, c)) {
		cJSON_Delete(arr);
		cJSON_Delete(c);
		return -ENOMEM;
	}
	cJSON_AddStringToObject(c, "uri", TOOLS_VIEW_URI);
	cJSON_AddStringToObject(c, "mimeType", MCP_UI_MIME);
	cJSON_AddStringToObject(c, "text", tools_view_html);
	cJSON_AddItemToObject(c, "_meta",
	                      cJSON_Parse(tools_view_resource_meta));
	*contents = arr;
	return 0;
}

static struct resource_provider tools_view_provider = {
    .name = "run-viewer",
    .list = tools_view_list,
    .read = tools_view_read,
};

/* ---- keeping a frame for the view --------------------------------------- */

/* Removes the oldest tables beyond TOOLS_VIEW_TABLES_KEPT. */
static void tools_view_prune(int dfd)
{
	struct {
		char name[TOOLS_VIEW_ID_LEN + 8];
		struct timespec t;
	} v[TOOLS_VIEW_TABLES_KEPT * 4];
	size_t n = 0;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL && n < sizeof(v) / sizeof(v[0])) {
		struct stat st;

		if (strlen(de->d_name) != TOOLS_VIEW_ID_LEN + 5 ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].t = st.st_mtim;
		n++;
	}
	closedir(d);
	while (n > TOOLS_VIEW_TABLES_KEPT) {
		size_t old = 0;

		for (size_t i = 1; i < n; i++)
			if (v[i].t.tv_sec < v[old].t.tv_sec ||
			    (v[i].t.tv_sec == v[old].t.tv_sec &&
			     v[i].t.tv_nsec < v[old].t.tv_nsec))
				old = i;
		(void)unlinkat(dfd, v[old].name, 0);
		v[old] = v[--n];
	}
}

/*
 * Moves .mcp/value.json to .mcp/view/<id>.json when it was written by this
 * run, so a view shown later still pages the frame of its own run.
 * Renames stay beneath directories opened without following links.
 */
static int tools_view_keep(struct workspace *ws, time_t started,
                           char id[TOOLS_VIEW_ID_LEN + 1])
{
	const struct config *cfg = workspace_mgr_config(workspace_mgr_of(ws));
	unsigned char raw[TOOLS_VIEW_ID_LEN / 2];
	char name[TOOLS_VIEW_ID_LEN + 8];
	struct stat st;
	int mcp, view = -1, r = -ENOENT;

	mcp =
	    fstree_open(workspace_dirfd(ws), ".mcp", O_RDONLY | O_DIRECTORY, 0);
	if (mcp < 0)
		return mcp;
	if (fstatat(mcp, "value.json", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || st.st_mtime < started)
		goto out;
	view = fstree_mkdirs(mcp, "view", cfg->sandbox_uid, cfg->sandbox_gid);
	if (view < 0) {
		r = view;
		goto out;
	}
	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		r = -EIO;
		goto out;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	snprintf(name, sizeof(name), "%s.json", id);
	if (renameat(mcp, "value.json", view, name) < 0) {
		r = -errno;
		goto out;
	}
	tools_view_prune(view);
	r = 0;
out:
	if (view >= 0)
		close(view);
	close(mcp);
	return r;
}

void tools_view_annotate(struct workspace *ws, const char *conv, time_t started,
                         bool has_value, const char *notebook_url,
                         cJSON *result)
{
	cJSON *meta, *v;
	char id[TOOLS_VIEW_ID_LEN + 1] = "";

	if (has_value && tools_view_keep(ws, started, id) < 0)
		id[0] = '\0';
	meta = cJSON_GetObjectItemCaseSensitive(result, "_meta");
	if (!meta)
		meta = cJSON_AddObjectToObject(result, "_meta");
	v = meta ? cJSON_AddObjectToObject(meta, "mcp-sandboxd/view") : NULL;
	if (!v)
		return;
	cJSON_AddStringToObject(v, "conversationId", conv);
	if (id[0])
		cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "table"),
		                        "id", id);
	if (notebook_url)
		cJSON_AddStringToObject(v, "notebook_url", notebook_url);
}

/* ---- view_table ---------------------------------------------------------- */

static const char view_table_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"conversationId\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":256},"
    "\"table\":{\"type\":\"string\",\"pattern\":\"^[0-9a-f]{16}$\","
    "\"description\":\"the table id in run_code's "
    "_meta[\\\"mcp-sandboxd/view\\\"].table\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500,"
    "\"default\":50},"
    "\"sort\":{\"type\":\"string\",\"description\":\"a column name\"},"
    "\"descending\":{\"type\":\"boolean\",\"default\":false}},"
    "\"required\":[\"conversationId\",\"table\"]}";

static const char view_table_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"columns\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"array\"}},"
    "\"total\":{\"type\":\"integer\"},\"offset\":{\"type\":\"integer\"}},"
    "\"required\":[\"columns\",\"rows\",\"total\",\"offset\"]}";

static bool tools_view_id_ok(const char *s)
{
	if (!s || strlen(s) != TOOLS_VIEW_ID_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* A non-negative integer argument, or def when absent; -1 when wrong. */
static long tools_view_uint(const cJSON *args, const char *key, long def,
                            long max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);

	if (!v)
		return def;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
	    v->valuedouble > (double)max ||
	    v->valuedouble != (double)(long)v->valuedouble)
		return -1;
	return (long)v->valuedouble;
}

static cJSON *tools_view_table_call(void *data, struct mcp_call *call,
                                    const cJSON *args)
{
	struct workspace_mgr *wm = data;
	const char *conv = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(args, "conversationId"));
	const char *id = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(args, "table"));
	const cJSON *sort = cJSON_GetObjectItemCaseSensitive(args, "sort");
	const cJSON *desc =
	    cJSON_GetObjectItemCaseSensitive(args, "descending");
	long offset = tools_view_uint(args, "offset", 0, 1L << 30);
	long limit = tools_view_uint(args, "limit", 50, TABLE_PAGE_MAX);
	struct workspace *ws = NULL;
	struct table *t = NULL;
	char rel[64], err[512], *text = NULL;
	size_t len = 0;
	cJSON *result = NULL, *page;
	int r;

	if (!conv || !tools_view_id_ok(id))
		return mcp_text_result("view_table needs conversationId and "
		                       "table, the 16 hex characters of "
		                       "run_code's _meta[\"mcp-sandboxd/view\"]"
		                       ".table.id",
		                       true);
	if (offset < 0 || limit < 1)
		return mcp_text_resultf(true,
		                        "offset must be an integer from 0 and "
		                        "limit one from 1 to %d",
		                        TABLE_PAGE_MAX);
	if ((sort && !cJSON_IsString(sort)) || (desc && !cJSON_IsBool(desc)))
		return mcp_text_result("sort must be a column name (a string) "
		                       "and descending true or false",
		                       true);
	r = workspace_open(wm, mcp_call_tenant(call), conv, false, &ws, err,
	                   sizeof(err));
	if (r == -ENOENT)
		return mcp_text_result("no such conversation here: the table "
		                       "is gone with it, or conversationId is "
		                       "not the run's",
		                       true);
	if (r < 0)
		return mcp_text_result(err, true);
	snprintf(rel, sizeof(rel), TOOLS_VIEW_DIR "/%s.json", id);
	r = files_read(workspace_dirfd(ws), rel, TABLE_MAX_BYTES, &text, &len,
	               NULL);
	if (r == -EFBIG || r == -ENOENT) {
		result = mcp_text_resultf(
		    true,
		    r == -ENOENT
		        ? "table %s is no longer kept (a conversation keeps "
		          "the tables of its last %d runs that ended with a "
		          "data frame): run the code again"
		        : "table %s is larger than the viewer reads",
		    id, TOOLS_VIEW_TABLES_KEPT);
		goto out;
	}
	if (r < 0) {
		result = mcp_text_resultf(
		    true, "table %s could not be read: %s", id, strerror(-r));
		goto out;
	}
	r = table_parse(text, len, &t, err, sizeof(err));
	if (r == 0 && sort)
		r = table_sort(t, sort->valuestring, cJSON_IsTrue(desc), err,
		               sizeof(err));
	if (r == -ENOMEM)
		goto out;
	if (r < 0) {
		result = mcp_text_result(err, true);
		goto out;
	}
	page = table_page(t, (size_t)offset, (size_t)limit);
	if (!page)
		goto out;
	result = mcp_text_resultf(
	    false, "rows %ld to %ld of %zu", offset + 1,
	    offset + (long)cJSON_GetArraySize(
	                 cJSON_GetObjectItemCaseSensitive(page, "rows")),
	    table_rows(t));
	if (result)
		cJSON_AddItemToObject(result, "structuredContent", page);
	else
		cJSON_Delete(page);
out:
	table_destroy(t);
	free(text);
	workspace_close(ws);
	return result;
}

static struct tool_impl tools_view_table_tool = {
    .name = "view_table",
    .title = "Page the run viewer's table",
    .description = "For the run viewer (an MCP App) only: one page of the "
                   "data frame a run_code call ended with, sorted by a "
                   "column if asked. The model gets the frame's head in "
                   "run_code's result.",
    .input_schema = view_table_in,
    .output_schema = view_table_out,
    .read_only = true,
    .idempotent = true,
    .call = tools_view_table_call,
    .ui_meta = "{\"ui\":{\"visibility\":[\"app\"]}}",
    .ui_only = true,
};

void tools_view_register(struct mcp_server *srv, struct workspace_mgr *wm)
{
	tools_view_provider.data = wm;
	tools_view_table_tool.data = wm;
	mcp_server_add_resources(srv, &tools_view_provider);
	mcp_server_add_tool(srv, &tools_view_table_tool);
}
