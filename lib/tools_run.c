/* SPDX-License-Identifier: MIT */
/*
 * tools_run: run_code and list_runners. Argument checking turns every
 * mistake into an isError result that names the argument and the fix;
 * everything a run can end in is turned into a result by tools_run_result.
 */
#include "tools_run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

/* Time a run waits for an earlier run of the same conversation. */
#define TOOLS_RUN_LOCK_SLACK_MS (60 * 1000)

struct tools_run_ctx {
	struct mcp_server *srv;
	struct runner *runner;
	struct workspace_mgr *wm;
};

static struct tools_run_ctx tools_run_ctx;

const char tools_run_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"status\":{\"type\":\"string\",\"enum\":[\"completed\",\"failed\","
    "\"timed_out\",\"oom_killed\",\"output_limit\",\"cancelled\",\"busy\","
    "\"error\"],\"description\":\"completed: exit code 0; failed: non-zero "
    "exit; timed_out, oom_killed, output_limit: stopped by a limit; busy: "
    "not run, retry later; error: the sandbox could not run it\"},"
    "\"exit_code\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],"
    "\"description\":\"null "
    "when the program did not exit by itself\"},"
    "\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdout_truncated\":{\"type\":\"boolean\",\"description\":\"only the "
    "head and tail of stdout are included\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},"
    "\"stdout_bytes\":{\"type\":\"integer\",\"description\":\"bytes the "
    "program wrote to stdout\"},"
    "\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"duration_ms\":{\"type\":\"integer\",\"description\":\"run time from "
    "container start\"},"
    "\"queue_ms\":{\"type\":\"integer\",\"description\":\"time waiting for "
    "a free sandbox\"},"
    "\"timed_out\":{\"type\":\"boolean\"},"
    "\"oom_killed\":{\"type\":\"boolean\"},"
    "\"timeout_seconds\":{\"type\":\"integer\"},"
    "\"language\":{\"type\":\"string\"},"
    "\"runner_image\":{\"type\":\"string\"},"
    "\"runner_version\":{\"type\":\"string\"},"
    "\"retry_after_seconds\":{\"type\":\"integer\"},"
    "\"files\":{\"type\":\"array\",\"description\":\"files in /data "
    "this run created or changed, with public URLs\",\"items\":{\"type\":"
    "\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
    "\"mimeType\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"},"
    "\"uri\":{\"type\":\"string\"},\"modified\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[\"created\","
    "\"modified\"]}},\"required\":[\"name\",\"size\",\"url\"]}},"
    "\"files_truncated\":{\"type\":\"boolean\",\"description\":\"more "
    "files changed than are listed; call list_files\"},"
    "\"stdout_url\":{\"type\":\"string\",\"description\":\"the whole "
    "stdout, saved when it was too long to return\"},"
    "\"stderr_url\":{\"type\":\"string\"},"
    "\"workspace\":{\"type\":\"object\",\"description\":\"use of "
    "this conversation's /data against its quota\"},"
    "\"message\":{\"type\":\"string\",\"description\":\"what happened and "
    "what to do next\"}},"
    "\"required\":[\"status\",\"exit_code\",\"stdout\",\"stderr\","
    "\"stdout_truncated\",\"stderr_truncated\",\"duration_ms\","
    "\"queue_ms\"]}";

static const char tools_run_input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"conversationId\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":256},"
    "\"language\":{\"type\":\"string\"},"
    "\"code\":{\"type\":\"string\"},"
    "\"stdin\":{\"type\":\"string\"},"
    "\"environment\":{\"type\":\"object\",\"additionalProperties\":"
    "{\"type\":\"string\"}},"
    "\"network\":{\"type\":\"boolean\",\"default\":false},"
    "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1}},"
    "\"required\":[\"conversationId\",\"language\",\"code\"]}";

static const char list_runners_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"runners\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"language\":{\"type\":\"string\"},"
    "\"aliases\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"image\":{\"type\":\"string\"},\"image_id\":{\"type\":\"string\"},"
    "\"version\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"libraries\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"filename\":{\"type\":\"string\"}},"
    "\"required\":[\"language\",\"aliases\",\"image\",\"version\","
    "\"libraries\"]}},"
    "\"limits\":{\"type\":\"object\"}},"
    "\"required\":[\"runners\",\"limits\"]}";

/* ---- descriptions from the catalog -------------------------------------- */

static int tools_run_describe_runners(struct buf *b, const struct catalog *cat)
{
	int r = 0;

	if (cat->n == 0)
		return buf_puts(b, "\n\nNo runner images are installed on this "
		                   "server yet; run_code will fail until the "
		                   "operator builds them (runners/build.sh).");
	r = buf_puts(b, "\n\nLanguages:");
	for (size_t i = 0; r == 0 && i < cat->n; i++) {
		const struct catalog_image *m = &cat->items[i];

		r = buf_printf(b, "\n- %s", m->language);
		if (r == 0 && m->version[0])
			r = buf_printf(b, " %s", m->version);
		for (size_t j = 0; r == 0 && j < m->n_aliases; j++)
			r = buf_printf(b, "%s%s%s",
			               j ? ", " : " (also: ", m->aliases[j],
			               j + 1 == m->n_aliases ? ")" : "");
		if (r == 0 && m->description[0])
			r = buf_printf(b, ": %s", m->description);
		if (r == 0)
			r = buf_printf(b, " The code is saved as /sandbox/%s.",
			               m->filename);
		for (size_t j = 0; r == 0 && j < m->n_libraries; j++)
			r = buf_printf(b, "%s%s", j ? ", " : " Libraries: ",
			               m->libraries[j]);
	}
	return r;
}

static void tools_run_code_describe(void *data, char **description,
                                    cJSON **input_schema)
{
	struct tools_run_ctx *ctx = data;
	const struct config *cfg = runner_config(ctx->runner);
	struct catalog *cat = runner_catalog_get(ctx->runner);
	cJSON *s = cJSON_Parse(tools_run_input_schema), *props, *p, *e;
	struct buf b;
	int r;

	buf_init(&b, 0);
	r = buf_printf(
	    &b,
	    "Run code in a fresh, isolated Linux container and return its "
	    "exit status, stdout and stderr. Each run starts clean except "
	    "for /data, the working directory, which belongs to the "
	    "conversation: files written there are kept between runs with "
	    "the same conversationId and can be read back later. Limits per "
	    "run: %u MB memory, %g CPU, %u s (timeout_seconds up to %u), %u "
	    "processes, %u MB in /tmp, output beyond %zu bytes stops the run. "
	    "%s Print results to stdout; save charts and files to /data.",
	    cfg->memory_mb, cfg->cpus, cfg->timeout_s, cfg->max_timeout_s,
	    cfg->pids_limit, cfg->tmp_mb, cfg->output_max_bytes,
	    cfg->allow_network ? "No network unless network is true."
	                       : "No network access.");
	if (r == 0)
		r = tools_run_describe_runners(&b, cat);
	if (r == 0)
		*description = buf_take(&b, NULL);
	buf_finish(&b);

	props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	p = cJSON_GetObjectItemCaseSensitive(props, "conversationId");
	cJSON_AddStringToObject(p, "description",
	                        "Names the conversation; runs with the same "
	                        "id share the /data directory");
	p = cJSON_GetObjectItemCaseSensitive(props, "language");
	cJSON_AddStringToObject(p, "description",
	                        "Which runner executes the code");
	if (cat->n > 0 && (e = cJSON_AddArrayToObject(p, "enum"))) {
		for (size_t i = 0; i < cat->n; i++) {
			cJSON_AddItemToArray(
			    e, cJSON_CreateString(cat->items[i].language));
			for (size_t j = 0; j < cat->items[i].n_aliases; j++)
				cJSON_AddItemToArray(
				    e, cJSON_CreateString(
				           cat->items[i].aliases[j]));
		}
	}
	p = cJSON_GetObjectItemCaseSensitive(props, "code");
	cJSON_AddStringToObject(p, "description",
	                        "The program's source code, run as a file");
	cJSON_AddNumberToObject(p, "maxLength", (double)cfg->code_max_bytes);
	p = cJSON_GetObjectItemCaseSensitive(props, "stdin");
	cJSON_AddStringToObject(p, "description",
	                        "Text given to the program on standard input");
	p = cJSON_GetObjectItemCaseSensitive(props, "environment");
	cJSON_AddStringToObject(p, "description",
	                        "Extra environment variables (names like "
	                        "MY_VAR; HOME, LANG, FILE_BASE_URL and LD_* "
	                        "are reserved)");
	p = cJSON_GetObjectItemCaseSensitive(props, "network");
	cJSON_AddStringToObject(p, "description",
	                        cfg->allow_network
	                            ? "Give the run network access"
	                            : "Network access; disabled by the "
	                              "operator of this server");
	p = cJSON_GetObjectItemCaseSensitive(props, "timeout_seconds");
	cJSON_AddNumberToObject(p, "maximum", cfg->max_timeout_s);
	cJSON_AddNumberToObject(p, "default", cfg->timeout_s);
	cJSON_AddStringToObject(p, "description", "Time limit of the run");
	*input_schema = s;
	catalog_put(cat);
}

/* ---- results ------------------------------------------------------------ */

/* What the model should do next, by outcome. */
static int tools_run_advice(struct buf *b, const struct runner_result *res,
                            const struct config *cfg)
{
	switch (res->status) {
	case RUNNER_COMPLETED:
		return 0;
	case RUNNER_FAILED:
		return buf_printf(b,
		                  "The program exited with code %d. Read "
		                  "stderr, fix the code and run it again.",
		                  res->exit_code);
	case RUNNER_TIMED_OUT:
		return buf_printf(
		    b,
		    "Timed out after %u s and was killed. Make the code "
		    "faster or give it less work%s.",
		    res->timeout_s,
		    res->timeout_s < cfg->max_timeout_s ? ", or raise "
		                                          "timeout_seconds"
		                                        : "");
	case RUNNER_OOM_KILLED:
		return buf_printf(b,
		                  "Killed: the memory limit of %u MB was "
		                  "exceeded%s. Process the data in chunks, use "
		                  "smaller data types, or free what is no "
		                  "longer needed.",
		                  cfg->memory_mb,
		                  res->exit_code == 0 ? " (by a child process)"
		                                      : "");
	case RUNNER_OUTPUT_LIMIT:
		return buf_printf(b,
		                  "Stopped: the output passed %zu bytes. Print "
		                  "less (a summary, the first and last lines) "
		                  "or write large results to a file in /data.",
		                  cfg->output_max_bytes);
	case RUNNER_CANCELLED:
		return buf_puts(b, "The run was cancelled.");
	case RUNNER_BUSY:
		return buf_printf(
		    b,
		    "Not run: all sandboxes are busy. Retry in %u "
		    "s.",
		    res->retry_after_s);
	case RUNNER_ERROR:
		return buf_printf(
		    b,
		    "The sandbox could not run the code: %s. This "
		    "is a problem on the server, not in the code; "
		    "retry in a minute.",
		    res->message[0] ? res->message : "unknown error");
	}
	return 0;
}

static int tools_run_stream_text(struct buf *b, const char *name,
                                 const struct runner_output *o)
{
	int r;

	if (o->total == 0)
		return 0;
	r = buf_printf(b, "\n--- %s", name);
	if (r == 0 && o->truncated)
		r = buf_printf(b, " (%zu bytes; only the start and end shown)",
		               o->total);
	if (r == 0)
		r = buf_printf(b, " ---\n%s", o->text ? o->text : "");
	if (r == 0 && o->text && o->text[0] &&
	    o->text[strlen(o->text) - 1] != '\n')
		r = buf_putc(b, '\n');
	return r;
}

cJSON *tools_run_result(const struct runner_result *res,
                        const struct config *cfg)
{
	cJSON *result = cJSON_CreateObject(), *sc, *content, *t;
	struct buf text, advice;
	char *txt = NULL, *adv = NULL;
	int r;

	buf_init(&text, 0);
	buf_init(&advice, 0);
	if (!result)
		goto fail;
	r = tools_run_advice(&advice, res, cfg);
	if (r < 0 || !(adv = buf_take(&advice, NULL)))
		goto fail;
	sc = cJSON_AddObjectToObject(result, "structuredContent");
	if (!sc)
		goto fail;
	cJSON_AddStringToObject(sc, "status", runner_status_name(res->status));
	if (res->exit_code >= 0)
		cJSON_AddNumberToObject(sc, "exit_code", res->exit_code);
	else
		cJSON_AddNullToObject(sc, "exit_code");
	cJSON_AddStringToObject(sc, "stdout",
	                        res->out.text ? res->out.text : "");
	cJSON_AddStringToObject(sc, "stderr",
	                        res->err.text ? res->err.text : "");
	cJSON_AddBoolToObject(sc, "stdout_truncated", res->out.truncated);
	cJSON_AddBoolToObject(sc, "stderr_truncated", res->err.truncated);
	cJSON_AddNumberToObject(sc, "stdout_bytes", (double)res->out.total);
	cJSON_AddNumberToObject(sc, "stderr_bytes", (double)res->err.total);
	cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
	cJSON_AddNumberToObject(sc, "queue_ms", (double)res->queue_ms);
	cJSON_AddBoolToObject(sc, "timed_out", res->timed_out);
	cJSON_AddBoolToObject(sc, "oom_killed", res->oom_killed);
	cJSON_AddNumberToObject(sc, "timeout_seconds", res->timeout_s);
	if (res->language[0])
		cJSON_AddStringToObject(sc, "language", res->language);
	if (res->image[0])
		cJSON_AddStringToObject(sc, "runner_image", res->image);
	if (res->version[0])
		cJSON_AddStringToObject(sc, "runner_version", res->version);
	if (res->status == RUNNER_BUSY)
		cJSON_AddNumberToObject(sc, "retry_after_seconds",
		                        res->retry_after_s);
	if (adv[0])
		cJSON_AddStringToObject(sc, "message", adv);

	r = buf_printf(&text, "status: %s", runner_status_name(res->status));
	if (r == 0 && res->exit_code >= 0)
		r = buf_printf(&text, ", exit code %d", res->exit_code);
	if (r == 0 && res->status != RUNNER_BUSY && res->status != RUNNER_ERROR)
		r = buf_printf(&text, ", %lld ms", res->duration_ms);
	if (r == 0 && res->queue_ms >= 1000)
		r = buf_printf(&text, " (queued %lld ms)", res->queue_ms);
	if (r == 0 && res->language[0])
		r = buf_printf(&text, " [%s%s%s]", res->language,
		               res->version[0] ? " " : "", res->version);
	if (r == 0)
		r = tools_run_stream_text(&text, "stdout", &res->out);
	if (r == 0)
		r = tools_run_stream_text(&text, "stderr", &res->err);
	if (r == 0 && res->out.total == 0 && res->err.total == 0 &&
	    (res->status == RUNNER_COMPLETED || res->status == RUNNER_FAILED))
		r = buf_puts(&text, "\n(no output)");
	if (r == 0 && adv[0])
		r = buf_printf(&text, "\n%s", adv);
	if (r < 0 || !(txt = buf_take(&text, NULL)))
		goto fail;
	content = cJSON_AddArrayToObject(result, "content");
	t = cJSON_CreateObject();
	if (!content || !t || !cJSON_AddItemToArray(content, t)) {
		cJSON_Delete(t);
		goto fail;
	}
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", txt);
	cJSON_AddBoolToObject(result, "isError",
	                      res->status != RUNNER_COMPLETED);
	free(txt);
	free(adv);
	buf_finish(&text);
	buf_finish(&advice);
	return result;
fail:
	free(txt);
	free(adv);
	buf_finish(&text);
	buf_finish(&advice);
	cJSON_Delete(result);
	return NULL;
}

/* ---- run_code ----------------------------------------------------------- */

struct tools_run_progress {
	struct mcp_call *call;
};

static void tools_run_on_event(void *arg, enum runner_event ev, unsigned n)
{
	struct tools_run_progress *p = arg;
	char msg[96];

	if (ev == RUNNER_EVENT_QUEUED) {
		snprintf(msg, sizeof(msg),
		         "waiting for a free sandbox (position %u)", n);
		(void)mcp_call_progress(p->call, 0, -1, msg);
	} else {
		(void)mcp_call_progress(p->call, 1, -1, "running");
	}
}

/* An optional string argument: NULL when absent or null. */
static int tools_run_opt_str(const cJSON *args, const char *name,
                             const char **out, size_t *len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

	*out = NULL;
	if (len)
		*len = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return -EINVAL;
	*out = v->valuestring;
	if (len)
		*len = strlen(v->valuestring);
	return 0;
}

/*
 * FILE_BASE_URL: the URL of the workspace's files, ending in '/'. Derived
 * from the URL of a file so it follows whatever scheme workspace.c uses.
 */
static char *tools_run_base_url(struct workspace_mgr *wm,
                                const struct workspace *ws)
{
	char *u = workspace_file_url(wm, ws, "x");
	size_t n = u ? strlen(u) : 0;

	if (n < 2 || strcmp(u + n - 2, "/x") != 0) {
		free(u);
		return NULL;
	}
	u[n - 1] = '\0';
	return u;
}

/* Appends text to the first (text) content item of a result. */
static void tools_run_append_text(cJSON *result, const char *more)
{
	cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
	cJSON *t = cJSON_GetArrayItem(content, 0);
	const cJSON *old = cJSON_GetObjectItemCaseSensitive(t, "text");
	struct buf b;

	if (!cJSON_IsString(old) || !more[0])
		return;
	buf_init(&b, 0);
	if (buf_puts(&b, old->valuestring) == 0 && buf_puts(&b, more) == 0)
		cJSON_ReplaceItemInObjectCaseSensitive(
		    t, "text", cJSON_CreateString(b.data));
	buf_finish(&b);
}

/*
 * Saves a stream's whole output, kept in fd, into the workspace when the
 * result only shows its head and tail. Adds "<name>_url".
 */
static void tools_run_save_stream(cJSON *sc, struct buf *text,
                                  struct workspace *ws, const char *name,
                                  int fd, const struct runner_output *cap,
                                  size_t max)
{
	off_t size;
	void *map;
	const char *data;
	char *rel = NULL, *url = NULL;
	size_t got;
	char key[32];
	int r = 0;

	if (fd < 0 || !cap->truncated)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0)
		return;
	if ((size_t)size > max)
		size = (off_t)max;
	/*
	 * Mapped, not copied: up to SANDBOX_OUTPUT_MAX_BYTES per stream would
	 * otherwise pass through the heap for every long output.
	 */
	got = (size_t)size;
	map = mmap(NULL, got, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return;
	data = map;
	if (workspace_save_output(ws, name, data, got, &rel, &url) < 0) {
		r |= buf_printf(text,
		                "\nThe whole %s (%zu bytes) could not be saved "
		                "to /data (it is full or .mcp is not a "
		                "directory); only its head and tail are shown",
		                name, got);
	} else {
		snprintf(key, sizeof(key), "%s_url", name);
		cJSON_AddStringToObject(sc, key, url);
		r |= buf_printf(text,
		                "\nThe whole %s (%zu bytes) is saved as "
		                "/data/%s: %s",
		                name, got, rel, url);
	}
	if (r < 0)
		log_warnx("could not describe the saved %s in the result",
		          name);
	free(rel);
	free(url);
	munmap(map, got);
}

/*
 * Adds what the run left in /data to its result: the files it created or
 * changed (structuredContent.files, resource_link items, raster images
 * inline), whole outputs that were cut, and the workspace's usage.
 */
static void tools_run_add_workspace(cJSON *result, struct workspace *ws,
                                    const struct workspace_snapshot *snap,
                                    const struct runner_result *res, int out_fd,
                                    int err_fd, size_t max_out)
{
	cJSON *sc =
	    cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
	cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
	struct workspace_changes_info info;
	struct workspace_usage u;
	cJSON *files = NULL, *f;
	struct buf text;
	int shown = 0, r = 0;

	if (!sc || !content)
		return;
	buf_init(&text, 0);
	if (workspace_changes(ws, snap, WORKSPACE_CHANGES_MAX, &files, &info) ==
	        0 &&
	    files) {
		cJSON_AddItemToObject(sc, "files", files);
		cJSON_AddBoolToObject(sc, "files_truncated", info.truncated);
		cJSON_ArrayForEach (f, files) {
			const cJSON *n =
			    cJSON_GetObjectItemCaseSensitive(f, "name");
			const cJSON *sz =
			    cJSON_GetObjectItemCaseSensitive(f, "size");
			const cJSON *mt =
			    cJSON_GetObjectItemCaseSensitive(f, "mimeType");
			const cJSON *url =
			    cJSON_GetObjectItemCaseSensitive(f, "url");

			if (shown == 0)
				r |= buf_puts(&text, "\n--- files in /data "
				                     "written by this run ---");
			if (++shown > 20)
				continue;
			r |= buf_printf(
			    &text, "\n%s (%.0f bytes, %s): %s",
			    cJSON_IsString(n) ? n->valuestring : "?",
			    cJSON_IsNumber(sz) ? sz->valuedouble : 0.0,
			    cJSON_IsString(mt) ? mt->valuestring : "?",
			    cJSON_IsString(url) ? url->valuestring : "");
		}
		if (shown > 20)
			r |= buf_printf(&text,
			                "\n... and %d more (see "
			                "structuredContent.files)",
			                shown - 20);
		if (info.truncated)
			r |= buf_printf(&text,
			                "\n%zu files changed in all; call "
			                "list_files for the rest",
			                info.changed);
		if (info.skipped)
			r |= buf_printf(&text,
			                "\n%zu links, FIFOs or sockets created "
			                "in /data are never served",
			                info.skipped);
		r |= workspace_append_links(content, files);
		r |= workspace_append_images(ws, content, files,
		                             WORKSPACE_INLINE_IMAGES_MAX);
	} else {
		cJSON_Delete(files);
	}
	/* After the changes, so saved output is not listed as a run's file. */
	tools_run_save_stream(sc, &text, ws, "stdout", out_fd, &res->out,
	                      max_out);
	tools_run_save_stream(sc, &text, ws, "stderr", err_fd, &res->err,
	                      max_out);
	if (workspace_usage(ws, &u) == 0) {
		cJSON_AddItemToObject(sc, "workspace",
		                      workspace_usage_json(&u));
		if (u.over)
			r |= buf_puts(&text, "\n/data is at its quota: delete "
			                     "files (delete_file) before the "
			                     "next run or upload");
	}
	if (r < 0)
		log_warnx("the files of a run are only partly described in its "
		          "result (out of memory)");
	if (text.data)
		tools_run_append_text(result, text.data);
	buf_finish(&text);
}

/* An unnamed temporary file for a stream's whole output, or -1. */
static int tools_run_tmpfile(const struct config *cfg)
{
	int fd = open(cfg->sandbox_root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd;
}

static cJSON *tools_run_code_call(void *data, struct mcp_call *call,
                                  const cJSON *args)
{
	struct tools_run_ctx *ctx = data;
	const struct config *cfg = runner_config(ctx->runner);
	const cJSON *v;
	const char *conv, *lang, *code, *in;
	size_t code_len, in_len, n_env = 0;
	char **env = NULL, err[512];
	struct workspace *ws = NULL;
	struct runner_cancel *cancel = NULL;
	struct runner_request req;
	struct runner_result res;
	struct tools_run_progress prog = {.call = call};
	struct workspace_snapshot *snap = NULL;
	int out_fd = -1, err_fd = -1;
	char *base_url = NULL;
	cJSON *result = NULL;
	bool network = false;
	unsigned timeout_s = 0;
	int rc;

	memset(&res, 0, sizeof(res));
	if (tools_run_opt_str(args, "conversationId", &conv, NULL) < 0 || !conv)
		return mcp_text_result("conversationId is required: a string "
		                       "naming this conversation; runs with "
		                       "the same id share /data",
		                       true);
	if (tools_run_opt_str(args, "language", &lang, NULL) < 0 || !lang) {
		struct catalog *cat = runner_catalog_get(ctx->runner);
		char langs[256];

		catalog_languages(cat, langs, sizeof(langs));
		catalog_put(cat);
		return mcp_text_resultf(
		    true, "language is required; available: %s", langs);
	}
	if (tools_run_opt_str(args, "code", &code, &code_len) < 0 || !code)
		return mcp_text_result("code is required: the program's source "
		                       "as a string",
		                       true);
	if (tools_run_opt_str(args, "stdin", &in, &in_len) < 0)
		return mcp_text_result("stdin must be a string", true);
	v = cJSON_GetObjectItemCaseSensitive(args, "network");
	if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
		return mcp_text_result("network must be true or false", true);
	network = cJSON_IsTrue(v);
	if (network && !cfg->allow_network)
		return mcp_text_result(
		    "network access is disabled by the operator of this "
		    "server; run the code without \"network\": it has no "
		    "internet access, so use data from stdin or /data",
		    true);
	v = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
		    v->valuedouble > cfg->max_timeout_s ||
		    v->valuedouble != floor(v->valuedouble))
			return mcp_text_resultf(
			    true,
			    "timeout_seconds must be a whole "
			    "number from 1 to %u",
			    cfg->max_timeout_s);
		timeout_s = (unsigned)v->valuedouble;
	}
	if (code_len > cfg->code_max_bytes)
		return mcp_text_resultf(
		    true,
		    "code is %zu bytes, more than the %zu "
		    "allowed; put data in a file under /data "
		    "instead of in the code",
		    code_len, cfg->code_max_bytes);
	if (in && in_len > cfg->stdin_max_bytes)
		return mcp_text_resultf(true,
		                        "stdin is %zu bytes, more than the %zu "
		                        "allowed; put it in a file under /data",
		                        in_len, cfg->stdin_max_bytes);
	rc = runner_env_from_json(
	    cJSON_GetObjectItemCaseSensitive(args, "environment"),
	    cfg->env_max_bytes, &env, &n_env, err, sizeof(err));
	if (rc < 0)
		return rc == -ENOMEM ? NULL : mcp_text_result(err, true);

	rc = workspace_open(ctx->wm, mcp_call_tenant(call), conv, true, &ws,
	                    err, sizeof(err));
	if (rc < 0) {
		result = mcp_text_result(err, true);
		goto out;
	}
	rc = workspace_lock(ws, cfg->max_timeout_s * 1000u +
	                            TOOLS_RUN_LOCK_SLACK_MS);
	if (rc < 0) {
		result = mcp_text_result("another run of this conversation is "
		                         "still going and holds /data; wait "
		                         "for it to finish, then retry",
		                         true);
		goto out;
	}
	if (workspace_check_quota(ws, 0, err, sizeof(err)) < 0) {
		result = mcp_text_result(err, true);
		goto out;
	}
	if (workspace_snapshot_create(ws, &snap) < 0)
		snap = NULL; /* then every file counts as new */
	base_url = tools_run_base_url(ctx->wm, ws);
	if (runner_cancel_create(&cancel) < 0)
		goto out;
	out_fd = tools_run_tmpfile(cfg);
	err_fd = tools_run_tmpfile(cfg);

	memset(&req, 0, sizeof(req));
	req.language = lang;
	req.code = code;
	req.code_len = code_len;
	req.stdin_data = in;
	req.stdin_len = in_len;
	req.env = (const char *const *)env;
	req.n_env = n_env;
	req.network = network;
	req.timeout_s = timeout_s;
	req.workspace_host_path = workspace_host_path(ws);
	req.file_base_url = base_url;
	req.tenant = mcp_call_tenant(call);
	req.stdout_fd = out_fd;
	req.stderr_fd = err_fd;
	req.cancel = cancel;
	req.on_event = tools_run_on_event;
	req.event_arg = &prog;

	mcp_call_on_cancel(call, runner_cancel_trigger, cancel);
	rc = runner_run(ctx->runner, &req, &res);
	mcp_call_on_cancel(call, NULL, NULL);
	if (rc < 0) {
		result = mcp_text_result(res.message, true);
	} else {
		result = tools_run_result(&res, cfg);
		if (result && res.status != RUNNER_BUSY)
			tools_run_add_workspace(result, ws, snap, &res, out_fd,
			                        err_fd, cfg->output_max_bytes);
	}
out:
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	workspace_snapshot_destroy(snap);
	runner_result_finish(&res);
	runner_cancel_destroy(cancel);
	free(base_url);
	workspace_close(ws);
	runner_env_free(env);
	return result;
}

/* ---- list_runners ------------------------------------------------------- */

/* A catalog list as a JSON array of strings ([] for none). */
static cJSON *tools_run_strings(char *const *v, size_t n)
{
	return n ? cJSON_CreateStringArray((const char *const *)v, (int)n)
	         : cJSON_CreateArray();
}

static cJSON *tools_run_list_call(void *data, struct mcp_call *call,
                                  const cJSON *args)
{
	struct tools_run_ctx *ctx = data;
	const struct config *cfg = runner_config(ctx->runner);
	struct catalog *cat;
	cJSON *result = cJSON_CreateObject(), *sc, *arr, *lim, *content, *t;
	struct buf text;
	char *txt = NULL, err[256];

	if (runner_refresh(ctx->runner, err, sizeof(err)) < 0)
		log_debug("list_runners: %s", err);
	cat = runner_catalog_get(ctx->runner);
	buf_init(&text, 0);
	sc = cJSON_AddObjectToObject(result, "structuredContent");
	arr = cJSON_AddArrayToObject(sc, "runners");
	lim = cJSON_AddObjectToObject(sc, "limits");
	if (!arr || !lim)
		goto fail;
	for (size_t i = 0; i < cat->n; i++) {
		const struct catalog_image *m = &cat->items[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			goto fail;
		}
		cJSON_AddStringToObject(o, "language", m->language);
		cJSON_AddItemToObject(
		    o, "aliases", tools_run_strings(m->aliases, m->n_aliases));
		cJSON_AddStringToObject(o, "image", m->image);
		cJSON_AddStringToObject(o, "image_id", m->image_id);
		cJSON_AddStringToObject(o, "version", m->version);
		cJSON_AddStringToObject(o, "description", m->description);
		cJSON_AddItemToObject(
		    o, "libraries",
		    tools_run_strings(m->libraries, m->n_libraries));
		cJSON_AddStringToObject(o, "filename", m->filename);
	}
	cJSON_AddNumberToObject(lim, "memory_mb", cfg->memory_mb);
	cJSON_AddNumberToObject(lim, "cpus", cfg->cpus);
	cJSON_AddNumberToObject(lim, "timeout_seconds", cfg->timeout_s);
	cJSON_AddNumberToObject(lim, "max_timeout_seconds", cfg->max_timeout_s);
	cJSON_AddNumberToObject(lim, "pids_limit", cfg->pids_limit);
	cJSON_AddNumberToObject(lim, "tmp_mb", cfg->tmp_mb);
	cJSON_AddBoolToObject(lim, "network_allowed", cfg->allow_network);
	cJSON_AddNumberToObject(lim, "max_code_bytes",
	                        (double)cfg->code_max_bytes);
	cJSON_AddNumberToObject(lim, "max_stdin_bytes",
	                        (double)cfg->stdin_max_bytes);
	cJSON_AddNumberToObject(lim, "output_inline_bytes",
	                        (double)cfg->output_inline_bytes);
	cJSON_AddNumberToObject(lim, "output_max_bytes",
	                        (double)cfg->output_max_bytes);
	cJSON_AddNumberToObject(lim, "max_concurrent", cfg->max_concurrent);

	if (buf_printf(&text,
	               "Limits per run: %u MB memory, %g CPU, %u s by default "
	               "(up to %u), %u processes, network %s.\n",
	               cfg->memory_mb, cfg->cpus, cfg->timeout_s,
	               cfg->max_timeout_s, cfg->pids_limit,
	               cfg->allow_network ? "on request" : "off") < 0 ||
	    tools_run_describe_runners(&text, cat) < 0)
		goto fail;
	for (size_t i = 0; i < cat->n; i++)
		if (buf_printf(&text, "%s%s: image %s", i ? "\n" : "\n\n",
		               cat->items[i].language, cat->items[i].image) < 0)
			goto fail;
	txt = buf_take(&text, NULL);
	content = cJSON_AddArrayToObject(result, "content");
	t = cJSON_CreateObject();
	if (!txt || !content || !t || !cJSON_AddItemToArray(content, t)) {
		cJSON_Delete(t);
		goto fail;
	}
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", txt);
	cJSON_AddBoolToObject(result, "isError", false);
	free(txt);
	buf_finish(&text);
	catalog_put(cat);
	return result;
fail:
	free(txt);
	buf_finish(&text);
	catalog_put(cat);
	cJSON_Delete(result);
	return NULL;
}

/* ---- registration ------------------------------------------------------- */

static struct tool_impl tools_run_code_tool = {
    .name = "run_code",
    .title = "Run code in a sandbox",
    .description = "Run code in a fresh, isolated Linux container and "
                   "return its exit status, stdout and stderr. Runs with "
                   "the same conversationId share the /data directory.",
    .input_schema = tools_run_input_schema,
    .output_schema = tools_run_output_schema,
    .read_only = false,
    .destructive = false,
    .idempotent = false,
    .open_world = false,
    .describe = tools_run_code_describe,
    .call = tools_run_code_call,
};

static struct tool_impl tools_run_list_tool = {
    .name = "list_runners",
    .title = "List sandbox runners",
    .description = "List the languages run_code supports, with their "
                   "versions, preinstalled libraries and the limits of a "
                   "run.",
    .input_schema = "{\"type\":\"object\",\"properties\":{}}",
    .output_schema = list_runners_output_schema,
    .read_only = true,
    .destructive = false,
    .idempotent = true,
    .open_world = false,
    .call = tools_run_list_call,
};

static void tools_run_changed(void *arg)
{
	mcp_server_tools_changed(arg);
}

void tools_run_register(struct mcp_server *srv, struct runner *r,
                        struct workspace_mgr *wm)
{
	tools_run_ctx.srv = srv;
	tools_run_ctx.runner = r;
	tools_run_ctx.wm = wm;
	tools_run_code_tool.data = &tools_run_ctx;
	tools_run_list_tool.data = &tools_run_ctx;
	mcp_server_add_tool(srv, &tools_run_code_tool);
	mcp_server_add_tool(srv, &tools_run_list_tool);
	runner_set_changed_cb(r, tools_run_changed, srv);
}
