/* SPDX-License-Identifier: MIT */
/*
 * mcp: the HTTP entry points of the module, the server's lifecycle, the
 * registration of tools, resources and prompts, broadcasts, drain and
 * stats. Every message the server sends travels as an event on a stream. A
 * POST that carries requests gets a stream of its own; its HTTP answer is
 * decided late: if the responses are all ready before anything else was
 * sent, they go back as plain JSON, otherwise (a notification, a server
 * request, or the keep-alive interval passing first) the POST is answered
 * as SSE and drained from the stream. Streams keep their events, numbered,
 * so a client can resume with Last-Event-ID. Legacy HTTP+SSE sessions have
 * one stream that carries everything. Streams live in mcp_stream.c,
 * sessions in mcp_session.c, calls in mcp_call.c and the method handlers in
 * mcp_methods.c. Locking: one mutex (srv->lock) guards every session,
 * stream, call and pending request. Waiters use per-object condition
 * variables with that mutex. Tool and method handlers run without it;
 * cancel hooks run with it held.
 */
#include "mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "log.h"
#include "util/num.h"

#define SWEEP_INTERVAL_S 5

/* ------------------------------------------------------------------ */
/* the transport's entry points */

static void resp_error(struct mcp_http_resp *resp, int status, int code,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void resp_error(struct mcp_http_resp *resp, int status, int code,
                       const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(resp->body);
	resp->status = status;
	resp->body = rpc_error(NULL, code, msg, NULL);
}

static void resp_init(struct mcp_http_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
}

void mcp_http_resp_finish(struct mcp_http_resp *resp)
{
	if (!resp)
		return;
	free(resp->body);
	resp->body = NULL;
	if (resp->stream)
		mcp_stream_release(resp->stream);
	resp->stream = NULL;
}

/* Looks up the session of a request and takes a reference. Lock held. */
static struct session *lookup_locked(struct mcp_server *srv,
                                     const struct mcp_http_req *req,
                                     struct mcp_http_resp *resp, bool legacy)
{
	struct session *s;

	if (!req->session_id || !req->session_id[0]) {
		if (legacy)
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "missing ?sessionId=; use the endpoint URL "
			           "the /sse stream announced");
		else
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "missing Mcp-Session-Id header; send "
			           "initialize first and repeat the id it "
			           "returns");
		return NULL;
	}
	s = mcp_session_find(srv, req->session_id, req->tenant);
	if (!s || s->legacy != legacy) {
		resp_error(resp, 404, RPC_INVALID_REQUEST,
		           "unknown or expired session; start a new one "
		           "with initialize");
		return NULL;
	}
	s->refs++;
	s->last_active = mono_s();
	return s;
}

/* Checks MCP-Protocol-Version; false with resp filled when unsupported. */
static bool check_version_header(const struct mcp_http_req *req,
                                 struct mcp_http_resp *resp)
{
	if (!req->protocol_version ||
	    mcp_version_supported(req->protocol_version))
		return true;
	resp_error(resp, 400, RPC_INVALID_REQUEST,
	           "unsupported MCP-Protocol-Version '%.40s'; supported: "
	           "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
	           req->protocol_version);
	return false;
}

static size_t count_answers(const struct rpc_batch *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->n; i++) {
		const struct rpc_msg *m = &b->msgs[i];

		/* Only valid notifications and responses go unanswered. */
		if (m->kind == RPC_KIND_REQUEST || m->kind == RPC_KIND_INVALID)
			n++;
	}
	return n;
}

/*
 * Waits until a POST stream can be answered as JSON (every response is
 * there and nothing else was sent) or must become SSE. Lock held.
 */
static void answer_post(struct mcp_server *srv, struct session *s,
                        struct stream *st, bool batch,
                        struct mcp_http_resp *resp)
{
	struct timespec dl;

	mono_deadline(&dl, srv->cfg->keepalive_s * 1000);
	while (!st->sent_other && !st->sse && st->pending && !s->gone) {
		if (pthread_cond_timedwait(&st->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	if (!st->sent_other && !st->sse && (st->pending == 0 || s->gone)) {
		struct buf b;
		bool first = true;

		buf_init(&b, 0);
		if (batch && buf_putc(&b, '[') < 0)
			goto oom;
		for (struct event *e = st->head; e; e = e->next) {
			if (!e->response)
				continue;
			if ((!first && buf_putc(&b, ',') < 0) ||
			    buf_puts(&b, e->json) < 0)
				goto oom;
			first = false;
			if (!batch)
				break;
		}
		if (batch && buf_putc(&b, ']') < 0)
			goto oom;
		if (first && !batch) {
			/* The request was cancelled: nothing to say. */
			buf_finish(&b);
			resp->status = 202;
		} else {
			resp->status = 200;
			resp->body = buf_take(&b, NULL);
		}
		mcp_events_end(st);
		return;
	oom:
		buf_finish(&b);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		mcp_events_end(st);
		return;
	}
	st->sse = true;
	resp->status = 200;
	resp->stream = mcp_reader_new(srv, st, 0);
	if (!resp->stream)
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
	else
		resp->stream->post = true;
}

static bool batch_has_initialize(const struct rpc_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->msgs[i].kind == RPC_KIND_REQUEST &&
		    strcmp(b->msgs[i].method, "initialize") == 0)
			return true;
	}
	return false;
}

static void parse_failed(struct mcp_http_resp *resp, int code, const char *msg)
{
	resp_error(resp, 400, code,
	           code == RPC_PARSE_ERROR
	               ? "parse error: %s; send one JSON-RPC message as a "
	                 "JSON object"
	               : "invalid request: %s",
	           msg ? msg : "malformed");
}

void mcp_http_post(struct mcp_server *srv, const struct mcp_http_req *req,
                   struct mcp_http_resp *resp)
{
	struct rpc_batch *b;
	struct session *s = NULL;
	struct stream *st = NULL;
	int code;
	const char *msg;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	b = malloc(sizeof(*b));
	if (!b) {
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (rpc_parse(req->body, req->body_len, srv->cfg->max_json_depth, b,
	              &code, &msg) < 0) {
		parse_failed(resp, code, msg);
		free(b);
		return;
	}
	if (!b->is_array && b->msgs[0].kind == RPC_KIND_INVALID) {
		resp->status = 400;
		resp->body =
		    rpc_error(b->msgs[0].id_raw, b->msgs[0].invalid_code,
		              b->msgs[0].invalid_msg, NULL);
		goto out;
	}
	if (batch_has_initialize(b)) {
		if (b->is_array) {
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "initialize must be sent alone, not in a "
			           "batch");
			goto out;
		}
		if (req->session_id && req->session_id[0]) {
			resp_error(
			    resp, 400, RPC_INVALID_REQUEST,
			    "initialize was sent with an Mcp-Session-Id; "
			    "a session is initialized once. Send "
			    "initialize without the header to start a "
			    "new session");
			goto out;
		}
		pthread_mutex_lock(&srv->lock);
		int r = mcp_session_new(srv, req->tenant, false, &s);

		if (r == -EBUSY) {
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 429, RPC_INTERNAL_ERROR,
			           "this token already has %u active sessions; "
			           "end some (DELETE) or wait for them to go "
			           "idle",
			           srv->cfg->max_sessions_per_tenant);
			resp->retry_after = 30;
			goto out;
		}
		if (r < 0) {
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "cannot create a session");
			goto out;
		}
		s->refs++;
		snprintf(resp->session_id, sizeof(resp->session_id), "%s",
		         s->id);
	} else {
		pthread_mutex_lock(&srv->lock);
		s = lookup_locked(srv, req, resp, false);
		if (!s) {
			pthread_mutex_unlock(&srv->lock);
			goto out;
		}
		if (b->is_array && strcmp(s->version, "2025-03-26") != 0) {
			mcp_session_unref(srv, s);
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "JSON-RPC batches are only allowed in "
			           "protocol version 2025-03-26; send one "
			           "message per request");
			goto out;
		}
	}
	if (count_answers(b)) {
		st = mcp_events_new(s, STREAM_POST);
		if (!st) {
			mcp_session_unref(srv, s);
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
			goto out;
		}
		/* Held by this function until every message is dispatched. */
		st->readers++;
		st->pending++;
		/* SEP-1699: the first event gives an id to resume from. */
		if (mcp_session_wants_priming(s))
			mcp_events_prime(st);
	}
	pthread_mutex_unlock(&srv->lock);

	mcp_process_batch(srv, s, st, b);

	pthread_mutex_lock(&srv->lock);
	if (st) {
		st->readers--;
		if (--st->pending == 0)
			mcp_events_end(st);
		answer_post(srv, s, st, b->is_array, resp);
		/* A stream answered as JSON is never resumed. */
		if (!resp->stream && !st->pending && !st->readers)
			mcp_events_drop(s, st);
	} else {
		resp->status = 202;
	}
	mcp_session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
out:
	rpc_batch_finish(b);
	free(b);
}

/* Parses "<stream>_<seq>". */
static bool parse_event_id(const char *s, unsigned *stream,
                           unsigned long long *seq)
{
	uint64_t v, q;

	s = num_scan_u64(s, UINT32_MAX, &v);
	if (!s || *s != '_' || num_u64(s + 1, UINT64_MAX, &q) < 0)
		return false;
	*stream = (unsigned)v;
	*seq = q;
	return true;
}

void mcp_http_get(struct mcp_server *srv, const struct mcp_http_req *req,
                  struct mcp_http_resp *resp)
{
	struct session *s;
	struct stream *st;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, false);
	if (!s)
		goto out_unlocked;
	if (req->last_event_id && req->last_event_id[0]) {
		unsigned sid;
		unsigned long long seq;

		if (!parse_event_id(req->last_event_id, &sid, &seq) ||
		    !(st = mcp_session_find_stream(s, sid))) {
			resp_error(resp, 404, RPC_INVALID_REQUEST,
			           "Last-Event-ID names no stream this session "
			           "still has; open a new stream without it");
			goto out;
		}
		if (st->readers) {
			/* The old connection is gone but not yet noticed. */
			st->generation++;
			pthread_cond_broadcast(&st->cond);
		}
		if (seq < st->dropped_upto)
			log_info("resume from an event already dropped; the "
			         "client misses some messages");
		resp->status = 200;
		resp->stream = mcp_reader_new(srv, st, seq);
		if (!resp->stream)
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
		goto out;
	}
	st = s->get_stream;
	if (st && st->readers) {
		resp_error(resp, 409, RPC_INVALID_REQUEST,
		           "this session already has an open GET stream; "
		           "only one is allowed");
		goto out;
	}
	if (!st) {
		st = mcp_events_new(s, STREAM_GET);
		if (!st) {
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
			goto out;
		}
		s->get_stream = st;
		if (mcp_session_wants_priming(s))
			mcp_events_prime(st);
	}
	resp->status = 200;
	/* Undelivered events wait for the new reader; old ones do not. */
	resp->stream = mcp_reader_new(srv, st, st->dropped_upto);
	if (!resp->stream)
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
out:
	mcp_session_unref(srv, s);
out_unlocked:
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_delete(struct mcp_server *srv, const struct mcp_http_req *req,
                     struct mcp_http_resp *resp)
{
	struct session *s;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, false);
	if (s) {
		mcp_session_end(srv, s);
		mcp_session_unref(srv, s);
		resp->status = 200;
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_sse_open(struct mcp_server *srv, const struct mcp_http_req *req,
                       const char *endpoint_path, struct mcp_http_resp *resp)
{
	struct session *s;
	struct stream *st;
	int r;

	resp_init(resp);
	pthread_mutex_lock(&srv->lock);
	r = mcp_session_new(srv, req->tenant, true, &s);
	if (r < 0) {
		pthread_mutex_unlock(&srv->lock);
		if (r == -EBUSY) {
			resp_error(resp, 429, RPC_INTERNAL_ERROR,
			           "this token already has %u active sessions; "
			           "close some streams first",
			           srv->cfg->max_sessions_per_tenant);
			resp->retry_after = 30;
		} else {
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "cannot create a session");
		}
		return;
	}
	st = mcp_events_new(s, STREAM_LEGACY);
	if (!st || mcp_events_push_raw(
	               st, "event: endpoint\ndata: %s?sessionId=%s\n\n",
	               endpoint_path, s->id) < 0) {
		mcp_session_end(srv, s);
		pthread_mutex_unlock(&srv->lock);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	s->get_stream = st;
	resp->status = 200;
	resp->stream = mcp_reader_new(srv, st, 0);
	if (!resp->stream) {
		mcp_session_end(srv, s);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_sse_post(struct mcp_server *srv, const struct mcp_http_req *req,
                       struct mcp_http_resp *resp)
{
	struct rpc_batch *b;
	struct session *s;
	int code;
	const char *msg;

	resp_init(resp);
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, true);
	pthread_mutex_unlock(&srv->lock);
	if (!s)
		return;
	b = malloc(sizeof(*b));
	if (!b) {
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		goto out;
	}
	if (rpc_parse(req->body, req->body_len, srv->cfg->max_json_depth, b,
	              &code, &msg) < 0) {
		parse_failed(resp, code, msg);
		free(b);
		goto out;
	}
	/* Everything, answers included, travels on the session's stream. */
	mcp_process_batch(srv, s, s->get_stream, b);
	rpc_batch_finish(b);
	free(b);
	resp->status = 202;
out:
	pthread_mutex_lock(&srv->lock);
	mcp_session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
}

/* ------------------------------------------------------------------ */
/* server-wide */

static void *sweeper_main(void *arg)
{
	struct mcp_server *srv = arg;
	struct timespec dl;

	pthread_mutex_lock(&srv->lock);
	while (!srv->stopping) {
		time_t t = mono_s();

		for (struct session *s = srv->sessions, *next; s; s = next) {
			next = s->next;
			mcp_session_trim_streams(s, false);
			if (mcp_session_idle(s) &&
			    t - s->last_active >
			        (time_t)srv->cfg->session_idle_s)
				mcp_session_end(srv, s);
		}
		mono_deadline(&dl, SWEEP_INTERVAL_S * 1000);
		pthread_cond_timedwait(&srv->sweep_cond, &srv->lock, &dl);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

struct mcp_server *mcp_server_create(const struct config *cfg)
{
	struct mcp_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	srv->cfg = cfg;
	pthread_mutex_init(&srv->lock, NULL);
	mono_cond_init(&srv->drain_cond);
	mono_cond_init(&srv->sweep_cond);
	if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0) {
		pthread_mutex_destroy(&srv->lock);
		pthread_cond_destroy(&srv->drain_cond);
		pthread_cond_destroy(&srv->sweep_cond);
		free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_destroy(struct mcp_server *srv)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->stopping = true;
	pthread_cond_broadcast(&srv->sweep_cond);
	pthread_mutex_unlock(&srv->lock);
	pthread_join(srv->sweeper, NULL);
	pthread_mutex_lock(&srv->lock);
	while (srv->sessions)
		mcp_session_end(srv, srv->sessions);
	/* Tool threads still running hold references; let them finish. */
	while (srv->calls_running)
		pthread_cond_wait(&srv->drain_cond, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON_Delete(srv->tool_in_schema[i]);
		cJSON_Delete(srv->tool_out_schema[i]);
	}
	for (size_t i = 0; i < srv->n_prompts; i++)
		cJSON_Delete(srv->prompt_args[i]);
	pthread_cond_destroy(&srv->drain_cond);
	pthread_cond_destroy(&srv->sweep_cond);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

void mcp_server_add_tool(struct mcp_server *srv, const struct tool_impl *t)
{
	cJSON *in, *out = NULL;

	if (srv->n_tools >= MAX_TOOLS) {
		log_errorx("too many tools; '%s' not registered", t->name);
		return;
	}
	in = cJSON_Parse(t->input_schema);
	if (t->output_schema)
		out = cJSON_Parse(t->output_schema);
	if (!cJSON_IsObject(in) || (t->output_schema && !cJSON_IsObject(out))) {
		log_errorx("tool '%s' has an invalid schema; not registered",
		           t->name);
		cJSON_Delete(in);
		cJSON_Delete(out);
		return;
	}
	srv->tool_in_schema[srv->n_tools] = in;
	srv->tool_out_schema[srv->n_tools] = out;
	srv->tools[srv->n_tools++] = t;
}

void mcp_server_add_resources(struct mcp_server *srv,
                              const struct resource_provider *p)
{
	if (srv->n_providers < MAX_PROVIDERS)
		srv->providers[srv->n_providers++] = p;
}

void mcp_server_add_prompt(struct mcp_server *srv, const struct prompt_impl *p)
{
	if (srv->n_prompts >= MAX_PROMPTS)
		return;
	srv->prompt_args[srv->n_prompts] =
	    p->arguments_json ? cJSON_Parse(p->arguments_json) : NULL;
	srv->prompts[srv->n_prompts++] = p;
}

void mcp_server_set_completion(struct mcp_server *srv, mcp_complete_fn fn,
                               void *data)
{
	srv->complete = fn;
	srv->complete_data = data;
}

void mcp_server_set_instructions(struct mcp_server *srv, const char *text)
{
	srv->instructions = text;
}

/* Sends a notification on every session's standalone stream. */
static void broadcast(struct mcp_server *srv, const char *method,
                      const char *uri)
{
	pthread_mutex_lock(&srv->lock);
	for (struct session *s = srv->sessions; s; s = s->next) {
		cJSON *params = NULL;
		bool subscribed = !uri;

		if (!s->initialized || !s->get_stream)
			continue;
		for (size_t i = 0; uri && i < MAX_SUBSCRIPTIONS; i++) {
			if (s->subs[i] && strcmp(s->subs[i], uri) == 0)
				subscribed = true;
		}
		if (!subscribed)
			continue;
		if (uri) {
			params = cJSON_CreateObject();
			cJSON_AddStringToObject(params, "uri", uri);
		}
		mcp_events_push(s->get_stream, rpc_notification(method, params),
		                false);
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_tools_changed(struct mcp_server *srv)
{
	broadcast(srv, "notifications/tools/list_changed", NULL);
}

void mcp_server_resource_updated(struct mcp_server *srv, const char *uri)
{
	broadcast(srv, "notifications/resources/updated", uri);
}

unsigned mcp_server_drain(struct mcp_server *srv, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned left;

	mono_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&srv->lock);
	srv->draining = true;
	while (srv->calls_running) {
		if (pthread_cond_timedwait(&srv->drain_cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	left = srv->calls_running;
	pthread_mutex_unlock(&srv->lock);
	return left;
}

void mcp_server_close_sessions(struct mcp_server *srv)
{
	pthread_mutex_lock(&srv->lock);
	while (srv->sessions)
		mcp_session_end(srv, srv->sessions);
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_stats(struct mcp_server *srv, struct mcp_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&srv->lock);
	out->sessions = srv->n_sessions;
	for (struct session *s = srv->sessions; s; s = s->next) {
		for (struct stream *st = s->streams; st; st = st->next)
			out->streams_open += st->readers;
	}
	out->calls_running = srv->calls_running;
	out->calls_total = srv->calls_total;
	pthread_mutex_unlock(&srv->lock);
}
