/* SPDX-License-Identifier: MIT */
/*
 * tools_run: run_code and list_runners. Argument checking turns every
 * mistake into an isError result that names the argument and the fix;
 * everything a run can end in is turned into a result by tools_run_result.
 */
#include "tools/tools_run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "run/capture.h"
#include "run/lease.h"
#include "run/run_arguments.h"
#include "run/warm/warm.h"
#include "tools/audit/tools_audit.h"
#include "tools/tools_check.h"
#include "tools/tools_content.h"
#include "tools/notebook/tools_notebook.h"
#include "tools/view/tools_view.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/mono.h"

/* Time a run waits for an earlier run of the same conversation. */
#define TOOLS_RUN_LOCK_SLACK_MS (60 * 1000)

struct tools_run_ctx {
	struct mcp_server *srv;
	struct runner *runner;
	struct workspace_mgr *wm;
	struct lease *lease; /* replicas on their own engines, or NULL */
};

static struct tools_run_ctx tools_run_ctx;

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

/* ---- run_code ----------------------------------------------------------- */

static void tools_run_code_describe(void *data, char **description,
                                    cJSON **input_schema)
{
	struct tools_run_ctx *ctx = data;

	tools_run_describe(ctx->runner, description, input_schema);
}

/*
 * Progress of a run: queue position, then the newest output lines as they
 * arrive (at most TOOLS_RUN_PROGRESS_HZ a second) and a heartbeat when the
 * program is quiet, so a person sees a long run and a client that resets
 * its timeout on progress keeps waiting.
 */
#define TOOLS_RUN_PROGRESS_MIN_MS 250
#define TOOLS_RUN_HEARTBEAT_MS 5000
#define TOOLS_RUN_TAIL 1024           /* newest output kept for messages */
#define TOOLS_RUN_TAIL_LINES 5        /* lines a message shows */
#define TOOLS_RUN_MESSAGE 600         /* bytes of output a message shows */
#define TOOLS_RUN_QUOTA_WATCH_MS 1000 /* how often the quota watch looks */

struct tools_run_progress {
	struct mcp_call *call;
	bool on;  /* the request carries a progress token */
	double n; /* progress counter: strictly increasing */
	long long started, last;
	bool fresh; /* output arrived since the last message */
	char tail[TOOLS_RUN_TAIL];
	size_t tail_len;
	/*
	 * The quota watch, for a workspace the file system does not hold to
	 * its quota (quota mode none: replicas, shared file systems): the
	 * run is stopped through its cancel once the workspace is over.
	 */
	struct workspace *ws;         /* NULL: not watched */
	struct runner_cancel *cancel; /* triggered when over */
	long long next_watch;         /* mono_ms of the next look */
	bool over;                    /* the watch stopped the run */
	struct workspace_usage seen;  /* what it saw then */
};

static void tools_run_progress_send(struct tools_run_progress *p,
                                    const char *msg)
{
	p->n += 1;
	p->last = mono_ms();
	(void)mcp_call_progress(p->call, p->n, -1, msg);
}

/* The last lines of the output kept, as valid UTF-8, into out. */
static int tools_run_tail_lines(const struct tools_run_progress *p,
                                struct buf *out)
{
	size_t start = p->tail_len, lines = 0, end = p->tail_len;

	while (end > 0 && p->tail[end - 1] == '\n')
		end--;
	start = end;
	while (start > 0 && lines < TOOLS_RUN_TAIL_LINES &&
	       end - start < TOOLS_RUN_MESSAGE) {
		start--;
		if (p->tail[start] == '\n')
			lines++;
	}
	if (start < end && p->tail[start] == '\n')
		start++;
	return capture_utf8_sanitize(p->tail + start, end - start, out);
}

/* Sends what is due: new output (rate-limited) or a heartbeat. */
static void tools_run_progress_maybe(struct tools_run_progress *p)
{
	long long now = mono_ms();
	struct buf b;
	int r;

	if (!p->on || !p->started)
		return;
	if (!(p->fresh && now - p->last >= TOOLS_RUN_PROGRESS_MIN_MS) &&
	    now - p->last < TOOLS_RUN_HEARTBEAT_MS)
		return;
	buf_init(&b, 4 * TOOLS_RUN_MESSAGE);
	r = buf_printf(&b, "running %lld s", (now - p->started) / 1000);
	if (r == 0 && p->tail_len) {
		r = buf_puts(&b, "; latest output:\n");
		if (r == 0)
			r = tools_run_tail_lines(p, &b);
	}
	if (r == 0)
		tools_run_progress_send(p, b.data);
	p->fresh = false;
	buf_finish(&b);
}

static void tools_run_on_event(void *arg, enum runner_event ev, unsigned n)
{
	struct tools_run_progress *p = arg;
	char msg[96];

	if (!p->on)
		return;
	if (ev == RUNNER_EVENT_QUEUED) {
		snprintf(msg, sizeof(msg),
		         "waiting for a free sandbox (position %u)", n);
		tools_run_progress_send(p, msg);
	} else {
		p->started = mono_ms();
		tools_run_progress_send(p, "running");
	}
}

static void tools_run_on_output(void *arg, int which, const char *data,
                                size_t n)
{
	struct tools_run_progress *p = arg;

	(void)which;
	if (!p->on || n == 0)
		return;
	if (n >= TOOLS_RUN_TAIL) {
		memcpy(p->tail, data + n - TOOLS_RUN_TAIL, TOOLS_RUN_TAIL);
		p->tail_len = TOOLS_RUN_TAIL;
	} else {
		size_t keep = TOOLS_RUN_TAIL - n;

		if (p->tail_len > keep) {
			memmove(p->tail, p->tail + p->tail_len - keep, keep);
			p->tail_len = keep;
		}
		memcpy(p->tail + p->tail_len, data, n);
		p->tail_len += n;
	}
	p->fresh = true;
	tools_run_progress_maybe(p);
}

/*
 * About once a second while a run goes on: progress, and the quota watch,
 * which measures the workspace every TOOLS_RUN_QUOTA_WATCH_MS (a walk that
 * stops at the first limit passed) and stops the run when it is over.
 */
static void tools_run_on_tick(void *arg)
{
	struct tools_run_progress *p = arg;
	long long now = mono_ms();

	tools_run_progress_maybe(p);
	if (!p->ws || p->over || now < p->next_watch)
		return;
	/* Ticks come a second apart: a little early is the next one. */
	p->next_watch = now + TOOLS_RUN_QUOTA_WATCH_MS - 200;
	if (workspace_usage(p->ws, &p->seen) == 0 && p->seen.over) {
		p->over = true;
		runner_cancel_quota(p->cancel);
	}
}

/* A run the quota watch stopped: how far it went. */
static void tools_run_quota_stopped(const struct tools_run_progress *p,
                                    struct runner_result *res)
{
	char over[256];

	workspace_usage_over(&p->seen, over, sizeof(over));
	snprintf(res->message, sizeof(res->message),
	         "the files in /data passed the workspace quota during the "
	         "run (%s)",
	         over);
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

/* One cut stream's whole output, mapped from its file for the save. */
struct saved_stream {
	void *map;
	size_t len;
};

/* Maps the first max bytes of fd when the result shows only head and tail. */
static void saved_stream_map(struct saved_stream *m, int fd,
                             const struct runner_output *cap, size_t max)
{
	off_t size;

	m->map = NULL;
	m->len = 0;
	if (fd < 0 || !cap->truncated)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0)
		return;
	m->len = (size_t)size > max ? max : (size_t)size;
	/*
	 * Mapped, not copied: up to SANDBOX_OUTPUT_MAX_BYTES per stream would
	 * otherwise pass through the heap for every long output.
	 */
	m->map = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m->map == MAP_FAILED) {
		m->map = NULL;
		m->len = 0;
	}
}

/* Says in the result what workspace_save_outputs did with each stream. */
static int tools_run_describe_saved(cJSON *sc, struct buf *text,
                                    const struct workspace_output *v, size_t n,
                                    struct workspace_pruned *pr)
{
	char key[32];
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].rel) {
			snprintf(key, sizeof(key), "%s_url", v[i].stream);
			cJSON_AddStringToObject(sc, key, v[i].url);
			r |= buf_printf(text,
			                "\nThe whole %s (%zu bytes) is saved "
			                "as /data/%s: %s",
			                v[i].stream, v[i].len, v[i].rel,
			                v[i].url);
		} else {
			r |=
			    buf_printf(text,
			               "\nThe whole %s (%zu bytes) was not "
			               "saved (%s); only its head and tail are "
			               "shown",
			               v[i].stream, v[i].len,
			               v[i].err[0] ? v[i].err : "no room");
		}
	}
	if (pr->n) {
		const cJSON *p;

		r |= buf_printf(text,
		                "\n%zu older saved output%s deleted to stay "
		                "within the saved-output limits (%llu bytes; "
		                "their links are gone):",
		                pr->n, pr->n == 1 ? "" : "s", pr->bytes);
		cJSON_ArrayForEach (p, pr->paths)
			r |= buf_printf(text, " %s", p->valuestring);
		if (pr->n > WORKSPACE_PRUNED_LIST)
			r |= buf_printf(text, " and %zu more",
			                pr->n - WORKSPACE_PRUNED_LIST);
		if (pr->paths) {
			cJSON_AddItemToObject(sc, "saved_outputs_deleted",
			                      pr->paths);
			pr->paths = NULL;
		}
	}
	return r;
}

/*
 * Saves the whole output of the streams whose result shows only head and
 * tail (kept in out_fd and err_fd) into the workspace, both in one call
 * so that the oldest saved outputs make room for them together. Adds
 * "<stream>_url" and "saved_outputs_deleted".
 */
static void tools_run_save_outputs(cJSON *sc, struct buf *text,
                                   struct workspace *ws, int out_fd, int err_fd,
                                   const struct runner_result *res, size_t max)
{
	struct saved_stream m[2];
	struct workspace_output v[2];
	struct workspace_pruned pr = {0};
	size_t n = 0;
	int r = 0;

	saved_stream_map(&m[0], out_fd, &res->out, max);
	saved_stream_map(&m[1], err_fd, &res->err, max);
	memset(v, 0, sizeof(v));
	for (int i = 0; i < 2; i++) {
		if (!m[i].map)
			continue;
		v[n].stream = i ? "stderr" : "stdout";
		v[n].data = m[i].map;
		v[n].len = m[i].len;
		n++;
	}
	if (n && workspace_save_outputs(ws, v, n, &pr) < 0) {
		for (size_t i = 0; i < n; i++)
			r |= buf_printf(text,
			                "\nThe whole %s (%zu bytes) could not "
			                "be saved; only its head and tail are "
			                "shown",
			                v[i].stream, v[i].len);
	} else if (n) {
		r |= tools_run_describe_saved(sc, text, v, n, &pr);
	}
	if (r < 0)
		log_warnx("could not describe the saved output in the result");
	workspace_outputs_finish(v, n, &pr);
	for (int i = 0; i < 2; i++)
		if (m[i].map)
			munmap(m[i].map, m[i].len);
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
		r |= tools_content_links(content, files);
		r |= tools_content_images(ws, content, files,
		                          WORKSPACE_INLINE_IMAGES_MAX);
	} else {
		cJSON_Delete(files);
	}
	/* After the changes, so saved output is not listed as a run's file. */
	tools_run_save_outputs(sc, &text, ws, out_fd, err_fd, res, max_out);
	if (workspace_usage(ws, &u) == 0) {
		cJSON_AddItemToObject(sc, "workspace", tools_content_usage(&u));
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

/*
 * structuredContent.conversationId, and when the server minted it, a first
 * line that tells the model to pass it on: without it the next call would
 * mint another id and find none of this run's files or state.
 */
static void tools_run_add_conversation(cJSON *result, const char *conv,
                                       bool minted)
{
	cJSON *sc =
	    cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
	cJSON *t = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(result, "content"), 0);
	const cJSON *old = cJSON_GetObjectItemCaseSensitive(t, "text");
	struct buf b;

	if (sc)
		cJSON_AddStringToObject(sc, "conversationId", conv);
	if (!minted || !cJSON_IsString(old))
		return;
	buf_init(&b, 0);
	if (buf_printf(&b,
	               "conversationId: %s (new: pass it as conversationId in "
	               "every later call of this chat to keep its files and "
	               "state)\n%s",
	               conv, old->valuestring) == 0)
		cJSON_ReplaceItemInObjectCaseSensitive(
		    t, "text", cJSON_CreateString(b.data));
	buf_finish(&b);
}

/* The files of a run's whole outputs (stdout, stderr); -1: none yet. */
struct tools_run_files {
	const struct config *cfg;
	int fd[2];
};

/*
 * req.output_file: an unnamed temporary file for stream which's whole
 * output, made when the output passes what the result holds (most runs
 * need none); the same file emptied when a retry asks again. -1 on
 * failure.
 */
static int tools_run_output_file(void *arg, int which)
{
	struct tools_run_files *f = arg;
	int *fd = &f->fd[which == 2];

	if (*fd >= 0)
		return ftruncate(*fd, 0) == 0 && lseek(*fd, 0, SEEK_SET) == 0
		           ? *fd
		           : -1;
	*fd = open(f->cfg->sandbox_root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (*fd < 0)
		*fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return *fd;
}

/* A request refused before any work; names the languages when none was. */
static cJSON *tools_run_refusal(struct tools_run_ctx *ctx,
                                const struct runner_request *req,
                                const char *err)
{
	struct catalog *cat;
	char langs[256];

	if (req->language)
		return mcp_text_result(err, true);
	cat = runner_catalog_get(ctx->runner);
	catalog_languages(cat, langs, sizeof(langs));
	catalog_put(cat);
	return mcp_text_resultf(true, "%s; available here: %s", err, langs);
}

/* How long a fork waits for a run of the conversation it copies. */
#define TOOLS_RUN_FORK_LOCK_MS 10000

/*
 * run_code's fork_from: copies the files and saved state of another
 * conversation of the same tenant (opened with the caller's tenant, so
 * another tenant's conversation is never found) into ws, the caller's new
 * and locked workspace; its first run then loads that state. 0, or a
 * negative errno with a message for the model in err.
 */
static int tools_run_fork(struct tools_run_ctx *ctx, struct mcp_call *call,
                          const char *conv, struct workspace *ws,
                          struct runner_request *req, char *err, size_t errlen)
{
	struct workspace *src = NULL;
	struct workspace_fork_stats st;
	int rc;

	if (strcmp(req->fork_from, conv) == 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "fork_from names this conversation itself: "
		    "pass the conversationId of the one to copy, "
		    "and leave out conversationId for the copy");
	rc = workspace_open(ctx->wm, mcp_call_tenant(call), req->fork_from,
	                    false, &src, err, errlen);
	if (rc == -ENOENT)
		return errmsg_fail(
		    rc, err, errlen,
		    "fork_from: there is no conversation '%.64s' "
		    "of yours to copy (its files may have expired)",
		    req->fork_from);
	if (rc < 0)
		return rc;
	rc = workspace_lock(src, TOOLS_RUN_FORK_LOCK_MS);
	if (rc < 0) {
		workspace_close(src);
		return errmsg_fail(rc, err, errlen,
		                   "fork_from: conversation '%.64s' is running "
		                   "code; retry when its run has finished",
		                   req->fork_from);
	}
	rc = workspace_fork(ws, src, &st, err, errlen);
	workspace_close(src);
	if (rc < 0)
		return rc;
	req->forked = true;
	log_info("forked a conversation: %zu files, %llu bytes copied, %zu "
	         "skipped",
	         st.files, st.bytes, st.skipped);
	return 0;
}

/* How often a run that waits for another replica's lease asks again. */
#define TOOLS_RUN_LEASE_POLL_MS 100

/*
 * Takes the conversation's lease (lease.h) for this run: at once when no
 * other replica holds it, else once that replica handed it over or its
 * lease ran out (killed, cut off), which takes at most the lease plus a
 * hand-over. *moved says whether another replica ran it last (for
 * runner_request.moved). 0, or -1 with a message for the client in err.
 */
static int tools_run_lease(struct tools_run_ctx *ctx, const char *name,
                           struct tools_run_progress *prog, const char **moved,
                           char *err, size_t errlen)
{
	const struct config *cfg = runner_config(ctx->runner);
	long long until = mono_ms() +
	                  (long long)cfg->conversation_lease_s * 1000 +
	                  WARM_HAND_OFF_WAIT_MS + 5000;
	struct lease_grant g;
	bool told = false;
	int rc;

	*moved = NULL;
	for (;;) {
		rc = lease_acquire(ctx->lease, name, lease_now_ms(), &g);
		if (rc == 0)
			break;
		if (rc != -EAGAIN) {
			snprintf(err, errlen,
			         "the store shared by the replicas did not "
			         "answer (%s), so this server cannot tell "
			         "whether another one runs this conversation "
			         "now; the code did not run: retry in a few "
			         "seconds",
			         strerror(-rc));
			return -1;
		}
		if (mono_ms() > until) {
			snprintf(err, errlen,
			         "server %s holds this conversation and did "
			         "not hand it over within %u s; the code did "
			         "not run: retry in a few seconds",
			         g.from, cfg->conversation_lease_s + 10);
			return -1;
		}
		if (!told && prog->on) {
			char msg[160];

			snprintf(msg, sizeof(msg),
			         "waiting for server %s to hand this "
			         "conversation over",
			         g.from);
			tools_run_progress_send(prog, msg);
			told = true;
		}
		usleep(TOOLS_RUN_LEASE_POLL_MS * 1000);
	}
	if (g.moved)
		*moved = g.lost ? "server_lost" : "moved";
	if (g.moved)
		log_info("conversation %.12s taken over from replica %s (%s)",
		         name, g.from,
		         g.lost ? "its lease ran out" : "handed over");
	return 0;
}

/*
 * What a run leaves for after its answer, none of which the answer
 * depends on: the notebook's rewrite (or, within a second of the last one,
 * leaving it due: tools_notebook_publish_later), with the conversation still
 * locked (workspace_settle makes whoever opens it meanwhile wait for it);
 * the conversation's release; then the audit entry and usage
 * row (a durable transaction, shared with the runs that end meanwhile:
 * readers of the trail and the usage wait for it, audit_wait_written).
 */
struct tools_run_later {
	struct tools_run_ctx *ctx;
	struct workspace *ws;
	bool leased;
	bool notebook; /* the notebook's copy in /data to bring up to date */
	struct audit_pending *audit;
};

static void tools_run_release(struct tools_run_ctx *ctx, struct workspace *ws,
                              bool leased)
{
	if (leased)
		lease_done(ctx->lease, workspace_name(ws));
	workspace_close(ws);
}

static void tools_run_after_answer(void *arg)
{
	struct tools_run_later *l = arg;

	if (l->notebook)
		tools_notebook_publish_later(l->ws);
	workspace_settle_end(l->ws);
	/* The next run of the conversation need not wait for the fsync. */
	tools_run_release(l->ctx, l->ws, l->leased);
	if (l->audit)
		(void)audit_write(l->audit);
	free(l);
}

/*
 * Hands the conversation, the notebook's rewrite and the audit entry over
 * to tools_run_after_answer; *ws and *leased are the caller's no more.
 */
static void tools_run_defer(struct tools_run_ctx *ctx, struct mcp_call *call,
                            struct tools_run_later *l, struct workspace **ws,
                            bool *leased)
{
	l->ctx = ctx;
	l->ws = *ws;
	l->leased = *leased;
	workspace_settle_begin(l->ws);
	mcp_call_after(call, tools_run_after_answer, l);
	*ws = NULL;
	*leased = false;
}

static cJSON *tools_run_code_call(void *data, struct mcp_call *call,
                                  const cJSON *args)
{
	struct tools_run_ctx *ctx = data;
	const struct config *cfg = runner_config(ctx->runner);
	const char *conv;
	char minted[RUN_ARGUMENTS_CONV_MINT_LEN + 1];
	struct run_arguments_store st = {NULL, NULL, NULL, NULL};
	char err[512];
	struct workspace *ws = NULL;
	struct runner_cancel *cancel = NULL;
	struct runner_request req;
	struct runner_result res;
	struct tools_run_progress prog = {.call = call,
	                                  .on = mcp_call_has_progress(call)};
	struct workspace_snapshot *snap = NULL;
	struct tools_run_files outf = {.cfg = cfg, .fd = {-1, -1}};
	char *base_url = NULL, *notebook_url = NULL;
	struct tools_run_later *later = NULL;
	cJSON *result = NULL;
	time_t started;
	bool leased = false;
	char watched[LEASE_NAME_MAX] = ""; /* the lease's fence has cancel */
	int rc;

	memset(&res, 0, sizeof(res));
	memset(&req, 0, sizeof(req));
	if (run_arguments_conversation_id(args, minted, &conv, err,
	                                  sizeof(err)) < 0)
		return mcp_text_result(err, true);
	rc = run_arguments_parse(args, cfg, &req, &st, err, sizeof(err));
	if (rc == -ENOMEM) {
		run_arguments_store_finish(&st);
		return NULL;
	}
	if (rc < 0) {
		run_arguments_store_finish(&st);
		return tools_run_refusal(ctx, &req, err);
	}
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
	if (ctx->lease) {
		if (tools_run_lease(ctx, workspace_name(ws), &prog, &req.moved,
		                    err, sizeof(err)) < 0) {
			result = mcp_text_result(err, true);
			goto out;
		}
		leased = true;
	}
	if (req.fork_from &&
	    tools_run_fork(ctx, call, conv, ws, &req, err, sizeof(err)) < 0) {
		result = mcp_text_result(err, true);
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
	if (leased) {
		/* Cut off from the store, this replica stops the run itself. */
		snprintf(watched, sizeof(watched), "%s", workspace_name(ws));
		lease_watch(ctx->lease, watched, cancel);
	}

	req.workspace_host_path = workspace_host_path(ws);
	req.workspace = ws;
	req.workspace_name = workspace_name(ws);
	req.file_base_url = base_url;
	req.tenant = mcp_call_tenant(call);
	req.stdout_fd = req.stderr_fd = -1;
	req.output_file = tools_run_output_file;
	req.output_file_arg = &outf;
	req.cancel = cancel;
	req.on_event = tools_run_on_event;
	req.on_output = tools_run_on_output;
	req.on_tick = tools_run_on_tick;
	req.event_arg = &prog;

	if (!workspace_quota_enforced(ws)) {
		prog.ws = ws;
		prog.cancel = cancel;
	}
	mcp_call_on_cancel(call, runner_cancel_trigger, cancel);
	started = time(NULL);
	rc = runner_run(ctx->runner, &req, &res);
	mcp_call_on_cancel(call, NULL, NULL);
	if (rc >= 0 && prog.over && res.status == RUNNER_QUOTA_EXCEEDED)
		tools_run_quota_stopped(&prog, &res);
	if (rc < 0) {
		result = mcp_text_result(res.message, true);
	} else {
		result = tools_run_result(&res, cfg);
		if (result && res.status != RUNNER_BUSY &&
		    res.status != RUNNER_RATE_LIMITED) {
			tools_run_add_workspace(result, ws, snap, &res,
			                        outf.fd[0], outf.fd[1],
			                        cfg->output_max_bytes);
			later = calloc(1, sizeof(*later));
			/* Without memory for later: rewritten now. */
			notebook_url = tools_notebook_record(
			    ws, conv, &req, &res, result,
			    later ? &later->notebook : NULL);
			/* What only a view shows: nothing for other hosts. */
			if (mcp_call_client_has_ui(call))
				tools_view_annotate(ws, conv, started,
				                    res.value_json != NULL,
				                    notebook_url, result);
		}
		/* Busy and rate-limited calls too: who was refused. */
		if (later)
			later->audit = tools_audit_prepare(
			    call, "run_code", conv, &req, &res, result);
		else
			tools_audit_run(call, "run_code", conv, &req, &res,
			                result);
	}
	if (result)
		tools_run_add_conversation(result, conv, minted[0] != '\0');
	if (later && (later->notebook || later->audit))
		tools_run_defer(ctx, call, later, &ws, &leased);
	else
		free(later);
out:
	for (int i = 0; i < 2; i++)
		if (outf.fd[i] >= 0)
			close(outf.fd[i]);
	workspace_snapshot_destroy(snap);
	runner_result_finish(&res);
	if (watched[0])
		lease_unwatch(ctx->lease, watched, cancel);
	runner_cancel_destroy(cancel);
	free(base_url);
	free(notebook_url);
	tools_run_release(ctx, ws, leased);
	run_arguments_store_finish(&st);
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
	bool packages = tools_run_packages_on(ctx->runner);

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
		if (m->packages[0] && packages)
			cJSON_AddStringToObject(o, "packages", m->packages);
	}
	cJSON_AddNumberToObject(lim, "memory_mb", cfg->memory_mb);
	cJSON_AddNumberToObject(lim, "cpus", cfg->cpus);
	cJSON_AddNumberToObject(lim, "timeout_seconds", cfg->timeout_s);
	cJSON_AddNumberToObject(lim, "max_timeout_seconds", cfg->max_timeout_s);
	cJSON_AddNumberToObject(lim, "pids_limit", cfg->pids_limit);
	cJSON_AddNumberToObject(lim, "tmp_mb", cfg->tmp_mb);
	cJSON_AddBoolToObject(lim, "network_allowed", cfg->allow_network);
	cJSON_AddBoolToObject(lim, "packages", packages);
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
	    tools_run_describe_runners(&text, cat, packages) < 0)
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
    .tasks = MCP_TASK_OPTIONAL,
    .ui_meta = TOOLS_VIEW_TOOL_META,
};

static struct tool_impl tools_run_list_tool = {
    .name = "list_runners",
    .title = "List sandbox runners",
    .description = "Details of run_code's languages (versions, "
                   "libraries, code file, flags) and limits.",
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
	tools_check_register(srv, r);
	tools_view_register(srv, wm);
	tools_notebook_register(srv, r, wm);
	runner_set_changed_cb(r, tools_run_changed, srv);
}

void tools_run_set_lease(struct lease *l)
{
	tools_run_ctx.lease = l;
}
