/* SPDX-License-Identifier: MIT */
/*
 * tools_notebook: the conversation's notebook kept after every run, and
 * replay_notebook. See tools_notebook.h.
 */
#include "tools/notebook/tools_notebook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/notebook/notebook.h"
#include "run/run_arguments.h"
#include "tools/audit/tools_audit.h"
#include "util/buf.h"
#include "util/log.h"
#include "workspace/files.h"

/* Time a replay waits for a run of the same conversation. */
#define TOOLS_NOTEBOOK_LOCK_MS (10 * 60 * 1000)
#define TOOLS_NOTEBOOK_REPLAY_MAX 200 /* cells one replay runs at most */

struct tools_notebook_ctx {
	struct runner *runner;
	struct workspace_mgr *wm;
};

static struct tools_notebook_ctx tools_notebook_ctx;

/* The PNG files among a run's changed files (result.files), read whole. */
struct tools_notebook_figs {
	unsigned char *data[NOTEBOOK_FIGURES_MAX];
	size_t len[NOTEBOOK_FIGURES_MAX];
	size_t n;
};

static void tools_notebook_figs_read(struct tools_notebook_figs *f,
                                     struct workspace *ws, const cJSON *files)
{
	const cJSON *e;

	memset(f, 0, sizeof(*f));
	cJSON_ArrayForEach (e, files) {
		const char *name = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "name"));
		const char *mt = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "mimeType"));
		char *data = NULL;
		size_t len = 0;

		if (f->n == NOTEBOOK_FIGURES_MAX)
			break;
		if (!name || !mt || strcmp(mt, "image/png") != 0)
			continue;
		if (files_read(workspace_dirfd(ws), name,
		               NOTEBOOK_FIGURE_MAX_BYTES, &data, &len,
		               NULL) < 0 ||
		    !files_image_type(name, (unsigned char *)data, len)) {
			free(data);
			continue;
		}
		f->data[f->n] = (unsigned char *)data;
		f->len[f->n++] = len;
	}
}

static void tools_notebook_figs_finish(struct tools_notebook_figs *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->data[i]);
}

/* The record of a finished run; files are its changed files. */
static cJSON *tools_notebook_record_of(struct workspace *ws, const char *code,
                                       size_t code_len,
                                       const struct runner_result *res,
                                       const cJSON *files)
{
	struct tools_notebook_figs figs;
	struct notebook_run run = {
	    .language = res->language,
	    .code = code,
	    .code_len = code_len,
	    .status = runner_status_name(res->status),
	    .exit_code = res->exit_code,
	    .out = res->out.text,
	    .err = res->err.text,
	    .value_json = res->value_json,
	    .error_name = res->error_name,
	    .packages_json = res->packages_json,
	};
	cJSON *rec;

	tools_notebook_figs_read(&figs, ws, files);
	run.figures = (const unsigned char *const *)figs.data;
	run.figure_lens = figs.len;
	run.n_figures = figs.n;
	rec = notebook_record(&run);
	tools_notebook_figs_finish(&figs);
	return rec;
}

/* Writes the copy in /data with every recorded cell in it. */
static int tools_notebook_publish(struct workspace *ws, int dfd,
                                  const char *conv)
{
	size_t len = 0;
	char *text = NULL, err[256];
	int r = notebook_publish(dfd, conv, &text, &len);

	if (r < 0) {
		log_warnx("workspace %.12s: the notebook was not rendered: %s",
		          workspace_name(ws), strerror(-r));
		return r;
	}
	r = workspace_write_file(ws, NOTEBOOK_FILE, text, len, true, err,
	                         sizeof(err));
	if (r < 0)
		log_warnx("workspace %.12s: the notebook was not written: %s",
		          workspace_name(ws), err);
	free(text);
	return r;
}

/* The deferred write (workspace_defer): the copy in /data brought up to
 * date. */
static void tools_notebook_write(struct workspace *ws, const char *conv,
                                 void *arg)
{
	int dfd = workspace_private_dirfd(ws);

	(void)arg;
	if (dfd < 0) {
		log_warnx("workspace %.12s: no private directory for its "
		          "notebook: %s",
		          workspace_name(ws), strerror(-dfd));
		return;
	}
	(void)tools_notebook_publish(ws, dfd, conv);
	close(dfd);
}

/* Adds the first mention of the notebook to the result. */
static void tools_notebook_mention(cJSON *result, const char *url)
{
	cJSON *sc =
	    cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
	cJSON *t = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(result, "content"), 0);
	const cJSON *old = cJSON_GetObjectItemCaseSensitive(t, "text");
	struct buf b;

	if (sc)
		cJSON_AddStringToObject(sc, "notebook_url", url);
	if (!cJSON_IsString(old))
		return;
	buf_init(&b, 0);
	if (buf_printf(&b,
	               "%s\nnotebook: every run of this conversation is kept "
	               "in a Jupyter notebook a person can open: %s",
	               old->valuestring, url) == 0)
		cJSON_ReplaceItemInObjectCaseSensitive(
		    t, "text", cJSON_CreateString(b.data));
	buf_finish(&b);
}

void tools_notebook_publish_later(struct workspace *ws)
{
	workspace_defer(ws);
}

char *tools_notebook_record(struct workspace *ws, const char *conv,
                            const struct runner_request *req,
                            const struct runner_result *res, cJSON *result,
                            bool *later)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(result, "structuredContent"),
	    "files");
	cJSON *rec;
	int dfd, n;
	char *url = NULL;

	if (later)
		*later = false;
	if (res->status == RUNNER_BUSY || res->status == RUNNER_RATE_LIMITED ||
	    res->status == RUNNER_ERROR || res->install_failed)
		return NULL;
	dfd = workspace_private_dirfd(ws);
	if (dfd < 0) {
		log_warnx("workspace %.12s: no private directory for its "
		          "notebook: %s",
		          workspace_name(ws), strerror(-dfd));
		return NULL;
	}
	rec =
	    tools_notebook_record_of(ws, req->code, req->code_len, res, files);
	n = rec ? notebook_append(dfd, rec) : -ENOMEM;
	cJSON_Delete(rec);
	if (n == -EFBIG)
		log_info("workspace %.12s: the notebook is full; this run is "
		         "not recorded",
		         workspace_name(ws));
	else if (n < 0)
		log_warnx("workspace %.12s: the run was not recorded in the "
		          "notebook: %s",
		          workspace_name(ws), strerror(-n));
	/* The record is what the notebook is made of: once it is there,
	 * the copy in /data can follow after the answer. */
	if (n > 0 && (later || tools_notebook_publish(ws, dfd, conv) == 0))
		url =
		    workspace_file_url(workspace_mgr_of(ws), ws, NOTEBOOK_FILE);
	if (n > 0 && later)
		*later = true;
	close(dfd);
	if (url && n == 1)
		tools_notebook_mention(result, url);
	return url;
}

/* ---- replay_notebook ----------------------------------------------------- */

static const char replay_in[] = "{\"type\":\"object\",\"properties\":{"
                                "\"conversationId\":{\"type\":\"string\"}},"
                                "\"required\":[\"conversationId\"]}";

static const char replay_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"cells\":{\"type\":\"integer\"},"
    "\"same\":{\"type\":\"integer\"},"
    "\"differ\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"cell\":{\"type\":\"integer\"},"
    "\"outputs\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"status\":{\"type\":\"string\"}}}},"
    "\"notebook_url\":{\"type\":\"string\"}},"
    "\"required\":[\"cells\",\"same\",\"differ\"]}";

/* One replayed cell: run, then the record of what it printed. */
static cJSON *tools_notebook_replay_cell(struct tools_notebook_ctx *ctx,
                                         struct mcp_call *call,
                                         struct workspace *ws, const char *conv,
                                         const char *code, bool first,
                                         const char **status)
{
	struct runner_request req;
	struct runner_result res;
	struct runner_cancel *cancel = NULL;
	struct workspace_snapshot *snap = NULL;
	cJSON *files = NULL, *rec = NULL;

	memset(&req, 0, sizeof(req));
	memset(&res, 0, sizeof(res));
	*status = "error";
	if (runner_cancel_create(&cancel) < 0)
		return NULL;
	if (workspace_snapshot_create(ws, &snap) < 0)
		snap = NULL;
	req.language = "python";
	req.code = code;
	req.code_len = strlen(code);
	req.workspace_host_path = workspace_host_path(ws);
	req.workspace = ws;
	req.workspace_name = workspace_name(ws);
	req.session_new = first;
	req.tenant = mcp_call_tenant(call);
	req.stdout_fd = req.stderr_fd = -1;
	req.cancel = cancel;
	mcp_call_on_cancel(call, runner_cancel_trigger, cancel);
	if (runner_run(ctx->runner, &req, &res) >= 0) {
		*status = runner_status_name(res.status);
		if (workspace_changes(ws, snap, WORKSPACE_CHANGES_MAX, &files,
		                      NULL) < 0)
			files = NULL;
		rec = tools_notebook_record_of(ws, req.code, req.code_len, &res,
		                               files);
		tools_audit_run(call, "replay_notebook", conv, &req, &res,
		                NULL);
	}
	mcp_call_on_cancel(call, NULL, NULL);
	cJSON_Delete(files);
	workspace_snapshot_destroy(snap);
	runner_result_finish(&res);
	runner_cancel_destroy(cancel);
	return rec;
}

/* The replay's result from what differs. */
static cJSON *tools_notebook_replay_result(cJSON *differ, int cells,
                                           const char *url)
{
	int same = cells - cJSON_GetArraySize(differ);
	cJSON *result, *sc, *d;
	struct buf b;

	buf_init(&b, 0);
	if (buf_printf(&b, "replayed %d Python cell%s in a fresh session: %s",
	               cells, cells == 1 ? "" : "s",
	               cJSON_GetArraySize(differ)
	                   ? "outputs differ in"
	                   : "every output is the same") < 0)
		goto fail;
	cJSON_ArrayForEach (d, differ) {
		const cJSON *o;
		int k = 0;

		if (buf_printf(
		        &b, "\ncell %d (",
		        (int)cJSON_GetNumberValue(
		            cJSON_GetObjectItemCaseSensitive(d, "cell"))) < 0)
			goto fail;
		cJSON_ArrayForEach (
		    o, cJSON_GetObjectItemCaseSensitive(d, "outputs"))
			if (buf_printf(&b, "%s%s", k++ ? ", " : "",
			               o->valuestring) < 0)
				goto fail;
		if (buf_puts(&b, ")") < 0)
			goto fail;
	}
	if (url && buf_printf(&b, "\nnotebook: %s", url) < 0)
		goto fail;
	result = mcp_text_result(b.data, false);
	sc = result ? cJSON_AddObjectToObject(result, "structuredContent")
	            : NULL;
	if (!sc) {
		cJSON_Delete(result);
		goto fail;
	}
	cJSON_AddNumberToObject(sc, "cells", cells);
	cJSON_AddNumberToObject(sc, "same", same);
	cJSON_AddItemToObject(sc, "differ", differ);
	if (url)
		cJSON_AddStringToObject(sc, "notebook_url", url);
	buf_finish(&b);
	return result;
fail:
	buf_finish(&b);
	cJSON_Delete(differ);
	return NULL;
}

static cJSON *tools_notebook_replay_call(void *data, struct mcp_call *call,
                                         const cJSON *args)
{
	struct tools_notebook_ctx *ctx = data;
	const char *conv = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(args, "conversationId"));
	struct workspace *ws = NULL;
	cJSON *records = NULL, *differ = NULL, *result = NULL;
	const cJSON *rec;
	char err[512], *url = NULL;
	int dfd = -1, cells = 0, i = 0, r;

	if (!conv)
		return mcp_text_result("replay_notebook needs conversationId, "
		                       "the conversation whose notebook to "
		                       "replay",
		                       true);
	r = workspace_open(ctx->wm, mcp_call_tenant(call), conv, false, &ws,
	                   err, sizeof(err));
	if (r == -ENOENT)
		return mcp_text_result("no such conversation here: run code "
		                       "with this conversationId first",
		                       true);
	if (r < 0)
		return mcp_text_result(err, true);
	if (workspace_lock(ws, TOOLS_NOTEBOOK_LOCK_MS) < 0) {
		result = mcp_text_result("a run of this conversation is still "
		                         "going; replay when it is over",
		                         true);
		goto out;
	}
	dfd = workspace_private_dirfd(ws);
	if (dfd < 0 || notebook_load(dfd, &records) < 0) {
		result = mcp_text_result("the notebook of this conversation "
		                         "could not be read; run code first",
		                         true);
		goto out;
	}
	differ = cJSON_CreateArray();
	if (!differ)
		goto out;
	cJSON_ArrayForEach (rec, records) {
		const char *lang = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(rec, "language"));
		const char *src = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(rec, "source"));
		const char *status;
		cJSON *again, *d, *o;

		i++;
		if (!lang || !src || strcmp(lang, "python") != 0)
			continue;
		if (cells == TOOLS_NOTEBOOK_REPLAY_MAX ||
		    mcp_call_cancelled(call))
			break;
		if (mcp_call_has_progress(call)) {
			char msg[64];

			snprintf(msg, sizeof(msg), "replaying cell %d", i);
			(void)mcp_call_progress(call, cells + 1, -1, msg);
		}
		again = tools_notebook_replay_cell(ctx, call, ws, conv, src,
		                                   cells == 0, &status);
		cells++;
		d = again ? notebook_diff(rec, again) : NULL;
		if (!again || (d && cJSON_GetArraySize(d))) {
			o = cJSON_CreateObject();
			cJSON_AddNumberToObject(o, "cell", i);
			cJSON_AddItemToObject(
			    o, "outputs",
			    d ? d
			      : cJSON_CreateStringArray((const char *[]){"run"},
			                                1));
			d = NULL;
			cJSON_AddStringToObject(o, "status", status);
			cJSON_AddItemToArray(differ, o);
		}
		cJSON_Delete(d);
		cJSON_Delete(again);
	}
	if (cells == 0) {
		result = mcp_text_result("this conversation's notebook has no "
		                         "Python cells to replay",
		                         true);
		goto out;
	}
	url = workspace_file_url(ctx->wm, ws, NOTEBOOK_FILE);
	result = tools_notebook_replay_result(differ, cells, url);
	differ = NULL;
out:
	free(url);
	cJSON_Delete(differ);
	cJSON_Delete(records);
	if (dfd >= 0)
		close(dfd);
	workspace_close(ws);
	return result;
}

static struct tool_impl tools_notebook_replay_tool = {
    .name = "replay_notebook",
    .title = "Replay a conversation's notebook",
    .description = "Re-run a conversation's Python cells in a fresh "
                   "session (replacing its current one) and list the "
                   "cells whose output differs.",
    .input_schema = replay_in,
    .output_schema = replay_out,
    .read_only = false,
    .destructive = false,
    .idempotent = false,
    .open_world = false,
    .call = tools_notebook_replay_call,
    .tasks = MCP_TASK_OPTIONAL,
};

void tools_notebook_register(struct mcp_server *srv, struct runner *r,
                             struct workspace_mgr *wm)
{
	tools_notebook_ctx.runner = r;
	tools_notebook_ctx.wm = wm;
	tools_notebook_replay_tool.data = &tools_notebook_ctx;
	mcp_server_add_tool(srv, &tools_notebook_replay_tool);
	/*
	 * Replicas sharing the root rewrite it after every run, under the
	 * conversation's lease: a write left for later would run outside it.
	 */
	workspace_mgr_set_deferred(
	    wm,
	    runner_config(r)->replica_name[0] ? 0 : TOOLS_NOTEBOOK_REWRITE_MS,
	    tools_notebook_write, NULL);
}
