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
 * one stream that carries everything. A 2026-07-28 request gets a
 * stateless session for itself (see mcp_internal.h), checked and shaped by
 * mcp_revision.c; otherwise it goes the same way. The lock lives in mcp_lock.c,
 * streams in mcp_stream.c, sessions in mcp_session.c, calls in mcp_call.c
 * and the method handlers in mcp_methods.c. Locking: one mutex (srv->lock)
 * guards every session, stream, call and pending request, and is held only
 * for bookkeeping: answers are serialized and joined without it, and
 * sections end with mcp_unlock(), which runs the cancel hooks they claimed
 * and frees what they let go once the lock is released. Waiters use
 * per-object condition variables with that mutex.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp/request_state.h"
#include "util/log.h"
#include "util/num.h"

/* ------------------------------------------------------------------ */
/* the transport's entry points */

/* Answers with status and body (an error from rpc_errorf, taken over). */
static void resp_fail(struct mcp_http_resp *resp, int status, char *body)
{
	free(resp->body);
	resp->status = status;
	resp->body = body;
}

static void resp_oom(struct mcp_http_resp *resp)
{
	resp_fail(resp, 500,
	          rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory"));
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
		resp_fail(resp, 400,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST, "%s",
		                     legacy ? "missing ?sessionId=; use the "
		                              "endpoint URL the /sse stream "
		                              "announced"
		                            : "missing Mcp-Session-Id header; "
		                              "send initialize first and "
		                              "repeat the id it returns"));
		return NULL;
	}
	s = mcp_session_find(srv, req->session_id, req->tenant);
	if (!s || s->legacy != legacy) {
		resp_fail(resp, 404,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "unknown or expired session; start a new "
		                     "one with initialize"));
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
	resp_fail(resp, 400,
	          rpc_errorf(NULL, RPC_INVALID_REQUEST,
	                     "unsupported MCP-Protocol-Version '%.40s' "
	                     "for a session; sessions speak 2025-11-25, "
	                     "2025-06-18, 2025-03-26 or 2024-11-05 (%s "
	                     "requests carry no Mcp-Session-Id)",
	                     req->protocol_version, MCP_MODERN_VERSION));
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

/* The responses of a POST answered as plain JSON (references). */
struct json_answer {
	struct mcp_msg *msgs[RPC_MAX_BATCH];
	size_t n;
	int status;
};

/*
 * Waits until a POST stream can be answered as JSON (every response is
 * there and nothing else was sent) or must become SSE. Returns true for
 * JSON, with references to the responses in ja for json_answer_finish();
 * false when resp holds a reader of the stream (or an error). Lock held.
 */
static bool answer_post(struct mcp_server *srv, struct session *s,
                        struct stream *st, bool batch,
                        struct mcp_http_resp *resp, struct json_answer *ja)
{
	struct timespec dl;

	mono_deadline(&dl, srv->cfg->keepalive_s * 1000);
	while (!st->sent_other && !st->sse && st->pending && !s->gone) {
		if (pthread_cond_timedwait(&st->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	if (!st->sent_other && !st->sse && (st->pending == 0 || s->gone)) {
		for (struct event *e = st->head; e; e = e->next) {
			if (!e->response || ja->n == RPC_MAX_BATCH)
				continue;
			ja->msgs[ja->n++] = mcp_msg_ref(e->msg);
			if (!batch)
				break;
		}
		mcp_events_end(st);
		/* 2026-07-28 errors have HTTP statuses of their own. */
		ja->status = s->stateless && ja->n
		                 ? mcp_revision_status(ja->msgs[0]->code)
		                 : 200;
		return true;
	}
	st->sse = true;
	resp->status = 200;
	resp->stream = mcp_reader_new(srv, st, 0);
	if (!resp->stream)
		resp_oom(resp);
	else
		resp->stream->post = true;
	return false;
}

/*
 * Joins the responses of a JSON answer into resp's body (an array for a
 * batch) and drops the references. Lock NOT held: results reach megabytes.
 */
static void json_answer_finish(struct mcp_http_resp *resp,
                               struct json_answer *ja, bool batch)
{
	size_t len = batch ? 2 : 0, off = 0;
	char *body;

	if (ja->n == 0 && !batch) {
		/* The request was cancelled: nothing to say. */
		resp->status = 202;
		return;
	}
	for (size_t i = 0; i < ja->n; i++)
		len += ja->msgs[i]->len + (i ? 1 : 0);
	body = malloc(len + 1);
	if (body) {
		if (batch)
			body[off++] = '[';
		for (size_t i = 0; i < ja->n; i++) {
			if (i)
				body[off++] = ',';
			memcpy(body + off, ja->msgs[i]->data, ja->msgs[i]->len);
			off += ja->msgs[i]->len;
		}
		if (batch)
			body[off++] = ']';
		body[off] = '\0';
		resp->status = ja->status ? ja->status : 200;
		resp->body = body;
	} else {
		resp_oom(resp);
	}
	for (size_t i = 0; i < ja->n; i++)
		mcp_msg_unref(ja->msgs[i]);
	ja->n = 0;
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

/* Whether the body as a whole is refused; resp says why. */
static bool parse_post(struct mcp_server *srv, const struct mcp_http_req *req,
                       struct rpc_batch *b, struct mcp_http_resp *resp)
{
	int code;
	const char *msg;

	if (rpc_parse(req->body, req->body_len, srv->cfg->max_json_depth, b,
	              &code, &msg) < 0) {
		resp_fail(resp, 400,
		          code == RPC_PARSE_ERROR
		              ? rpc_errorf(NULL, code,
		                           "parse error: %s; send one "
		                           "JSON-RPC message as a JSON object",
		                           msg ? msg : "malformed")
		              : rpc_errorf(NULL, code, "invalid request: %s",
		                           msg ? msg : "malformed"));
		return false;
	}
	return true;
}

/* Checks a body before any session is touched; false with resp filled. */
static bool check_post(const struct mcp_http_req *req,
                       const struct rpc_batch *b, struct mcp_http_resp *resp)
{
	if (!b->is_array && b->msgs[0].kind == RPC_KIND_INVALID) {
		resp_fail(resp, 400,
		          rpc_error(b->msgs[0].id_raw, b->msgs[0].invalid_code,
		                    b->msgs[0].invalid_msg, NULL));
		return false;
	}
	if (!batch_has_initialize(b))
		return true;
	if (b->is_array) {
		resp_fail(resp, 400,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "initialize must be sent alone, not in a "
		                     "batch"));
		return false;
	}
	if (req->session_id && req->session_id[0]) {
		resp_fail(resp, 400,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "initialize was sent with an "
		                     "Mcp-Session-Id; a session is initialized "
		                     "once. Send initialize without the header "
		                     "to start a new session"));
		return false;
	}
	return true;
}

/*
 * The session a POST goes to, with a reference: a new one for initialize,
 * else the one it names. NULL with resp filled when there is none. Lock
 * held.
 */
static struct session *post_session(struct mcp_server *srv,
                                    const struct mcp_http_req *req,
                                    const struct rpc_batch *b,
                                    struct mcp_http_resp *resp)
{
	struct session *s;
	int r;

	if (!batch_has_initialize(b)) {
		s = lookup_locked(srv, req, resp, false);
		if (s && b->is_array && strcmp(s->version, "2025-03-26") != 0) {
			mcp_session_unref(srv, s);
			resp_fail(
			    resp, 400,
			    rpc_errorf(NULL, RPC_INVALID_REQUEST,
			               "JSON-RPC batches are only allowed "
			               "in protocol version 2025-03-26; "
			               "send one message per request"));
			return NULL;
		}
		return s;
	}
	r = mcp_session_new(srv, req->tenant, false, &s);
	if (r == -EBUSY) {
		resp_fail(resp, 429,
		          rpc_errorf(NULL, RPC_INTERNAL_ERROR,
		                     "this token already has %u active "
		                     "sessions; end some (DELETE) or wait for "
		                     "them to go idle",
		                     srv->cfg->max_sessions_per_tenant));
		resp->retry_after = 30;
		return NULL;
	}
	if (r < 0) {
		resp_fail(resp, 500,
		          rpc_errorf(NULL, RPC_INTERNAL_ERROR,
		                     "cannot create a session"));
		return NULL;
	}
	s->refs++;
	mcp_session_set_client(s, req->client);
	snprintf(resp->session_id, sizeof(resp->session_id), "%s", s->id);
	return s;
}

/*
 * The stream that carries a POST's answers, held (a reference, and as a
 * reader so it is not trimmed, and as a response owed so it does not end)
 * until every message is dispatched. Lock held.
 */
static struct stream *post_stream(struct session *s)
{
	struct stream *st = mcp_events_new(s, STREAM_POST);

	if (!st)
		return NULL;
	mcp_events_hold(st);
	st->readers++;
	st->pending++;
	/* SEP-1699: the first event gives an id to resume from. */
	if (mcp_session_wants_priming(s))
		mcp_events_prime(st);
	return st;
}

/*
 * After dispatch: gives up the POST's hold on st and decides its answer.
 * Returns true when the answer is plain JSON, in ja. Lock held.
 */
static bool post_finish(struct mcp_server *srv, struct session *s,
                        struct stream *st, bool batch,
                        struct mcp_http_resp *resp, struct json_answer *ja)
{
	bool json;

	st->readers--;
	if (--st->pending == 0)
		mcp_events_end(st);
	json = answer_post(srv, s, st, batch, resp, ja);
	/* A stream answered as JSON is never resumed. */
	if (!resp->stream && !st->pending && !st->readers)
		mcp_events_drop(s, st);
	mcp_events_unref(srv, st);
	return json;
}

/*
 * A 2026-07-28 POST: one request (or notification) checked by mcp_revision.c,
 * then served like any other in a stateless session of its own, which ends
 * with the answer: at once for a JSON answer, or when the transport lets go
 * of the SSE stream (mcp_stream_release).
 */
static void post_stateless(struct mcp_server *srv,
                           const struct mcp_http_req *req, struct rpc_batch *b,
                           struct mcp_http_resp *resp)
{
	struct json_answer ja = {.n = 0};
	const struct rpc_msg *m = &b->msgs[0];
	struct mcp_meta meta;
	struct session *s;
	struct stream *st;
	char *err;
	int status, r;
	bool json;

	if (b->is_array) {
		resp_fail(resp, 400,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "protocol %s takes one message per "
		                     "request, not a batch",
		                     MCP_MODERN_VERSION));
		return;
	}
	if (m->kind == RPC_KIND_INVALID) {
		resp_fail(resp, 400,
		          rpc_error(m->id_raw, m->invalid_code, m->invalid_msg,
		                    NULL));
		return;
	}
	if (m->kind == RPC_KIND_RESPONSE) {
		resp_fail(resp, 400,
		          rpc_errorf(m->id_raw, RPC_INVALID_REQUEST,
		                     "protocol %s has no server-to-client "
		                     "requests to respond to",
		                     MCP_MODERN_VERSION));
		return;
	}
	/*
	 * Over HTTP no client notification means anything: cancelling is
	 * closing the request's stream. Accepted and ignored.
	 */
	if (m->kind == RPC_KIND_NOTIFICATION) {
		resp->status = 202;
		return;
	}
	if (mcp_revision_check(srv, req, m, &meta, &err, &status) < 0) {
		resp_fail(resp, status, err);
		return;
	}
	mcp_lock(srv);
	if (srv->stopping) {
		mcp_unlock(srv);
		resp_fail(resp, 503,
		          rpc_errorf(m->id_raw, RPC_INTERNAL_ERROR,
		                     "the server is shutting down; retry in a "
		                     "minute"));
		resp->retry_after = 30;
		return;
	}
	st = NULL;
	r = mcp_session_new_stateless(srv, req->tenant, &meta, &s);
	if (r == 0) {
		s->refs++;
		mcp_session_set_client(s, req->client);
		st = post_stream(s);
		if (!st) {
			mcp_session_end(srv, s);
			mcp_session_unref(srv, s);
		}
	}
	mcp_unlock(srv);
	if (r == -EBUSY) {
		resp_fail(resp, 429,
		          rpc_errorf(m->id_raw, RPC_INTERNAL_ERROR,
		                     "this token has too many requests in "
		                     "flight; wait for some to finish"));
		resp->retry_after = 5;
		return;
	}
	if (!st) {
		resp_oom(resp);
		return;
	}

	mcp_process_batch(srv, s, st, b);

	mcp_lock(srv);
	json = post_finish(srv, s, st, false, resp, &ja);
	/* Answered in full: the request, and its session, are over. */
	if (json)
		mcp_session_end(srv, s);
	mcp_session_unref(srv, s);
	mcp_unlock(srv);
	if (json)
		json_answer_finish(resp, &ja, false);
}

void mcp_http_post(struct mcp_server *srv, const struct mcp_http_req *req,
                   struct mcp_http_resp *resp)
{
	struct json_answer ja = {.n = 0};
	struct rpc_batch *b;
	struct session *s;
	struct stream *st = NULL;
	bool json = false;

	resp_init(resp);
	b = malloc(sizeof(*b));
	if (!b) {
		resp_oom(resp);
		return;
	}
	if (!parse_post(srv, req, b, resp)) {
		free(b);
		return;
	}
	if (mcp_revision_is_modern(req, b)) {
		post_stateless(srv, req, b, resp);
		goto out;
	}
	if (!check_version_header(req, resp) || !check_post(req, b, resp))
		goto out;
	mcp_lock(srv);
	s = post_session(srv, req, b, resp);
	if (s && count_answers(b) && !(st = post_stream(s))) {
		mcp_session_unref(srv, s);
		s = NULL;
		resp_oom(resp);
	}
	mcp_unlock(srv);
	if (!s)
		goto out;

	mcp_process_batch(srv, s, st, b);

	mcp_lock(srv);
	if (st)
		json = post_finish(srv, s, st, b->is_array, resp, &ja);
	else
		resp->status = 202;
	mcp_session_unref(srv, s);
	mcp_unlock(srv);
	if (json)
		json_answer_finish(resp, &ja, b->is_array);
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

/* GET with Last-Event-ID: a reader of the stream it names. Lock held. */
static void resume_stream(struct mcp_server *srv, struct session *s,
                          const char *last_event_id, struct mcp_http_resp *resp)
{
	struct stream *st;
	unsigned sid;
	unsigned long long seq;

	if (!parse_event_id(last_event_id, &sid, &seq) ||
	    !(st = mcp_session_find_stream(s, sid))) {
		resp_fail(resp, 404,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "Last-Event-ID names no stream this "
		                     "session still has; open a new stream "
		                     "without it"));
		return;
	}
	if (st->readers) {
		/* The old connection is gone but not yet noticed. */
		st->generation++;
		pthread_cond_broadcast(&st->cond);
	}
	if (seq < st->dropped_upto)
		log_info("resume from an event already dropped; the client "
		         "misses some messages");
	resp->status = 200;
	resp->stream = mcp_reader_new(srv, st, seq);
	if (!resp->stream)
		resp_oom(resp);
}

/* GET without Last-Event-ID: the standalone stream. Lock held. */
static void open_get_stream(struct mcp_server *srv, struct session *s,
                            struct mcp_http_resp *resp)
{
	struct stream *st = s->get_stream;

	if (st && st->readers) {
		resp_fail(resp, 409,
		          rpc_errorf(NULL, RPC_INVALID_REQUEST,
		                     "this session already has an open GET "
		                     "stream; only one is allowed"));
		return;
	}
	if (!st) {
		st = mcp_events_new(s, STREAM_GET);
		if (!st) {
			resp_oom(resp);
			return;
		}
		s->get_stream = st;
		if (mcp_session_wants_priming(s))
			mcp_events_prime(st);
	}
	resp->status = 200;
	/* Undelivered events wait for the new reader; old ones do not. */
	resp->stream = mcp_reader_new(srv, st, st->dropped_upto);
	if (!resp->stream)
		resp_oom(resp);
}

void mcp_http_get(struct mcp_server *srv, const struct mcp_http_req *req,
                  struct mcp_http_resp *resp)
{
	struct session *s;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	mcp_lock(srv);
	s = lookup_locked(srv, req, resp, false);
	if (s) {
		if (req->last_event_id && req->last_event_id[0])
			resume_stream(srv, s, req->last_event_id, resp);
		else
			open_get_stream(srv, s, resp);
		mcp_session_unref(srv, s);
	}
	mcp_unlock(srv);
}

void mcp_http_delete(struct mcp_server *srv, const struct mcp_http_req *req,
                     struct mcp_http_resp *resp)
{
	struct session *s;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	mcp_lock(srv);
	s = lookup_locked(srv, req, resp, false);
	if (s) {
		mcp_session_end(srv, s);
		mcp_session_unref(srv, s);
		resp->status = 200;
	}
	/* The cancel hooks of the session's calls run here. */
	mcp_unlock(srv);
}

void mcp_http_sse_open(struct mcp_server *srv, const struct mcp_http_req *req,
                       const char *endpoint_path, struct mcp_http_resp *resp)
{
	struct session *s;
	struct stream *st;
	int r;

	resp_init(resp);
	mcp_lock(srv);
	r = mcp_session_new(srv, req->tenant, true, &s);
	if (r < 0) {
		if (r == -EBUSY) {
			resp_fail(
			    resp, 429,
			    rpc_errorf(NULL, RPC_INTERNAL_ERROR,
			               "this token already has %u active "
			               "sessions; close some streams "
			               "first",
			               srv->cfg->max_sessions_per_tenant));
			resp->retry_after = 30;
		} else {
			resp_fail(resp, 500,
			          rpc_errorf(NULL, RPC_INTERNAL_ERROR,
			                     "cannot create a session"));
		}
		mcp_unlock(srv);
		return;
	}
	mcp_session_set_client(s, req->client);
	st = mcp_events_new(s, STREAM_LEGACY);
	if (st)
		s->get_stream = st;
	if (!st ||
	    mcp_events_push_raw(st,
	                        "event: endpoint\ndata: %s?sessionId=%s\n\n",
	                        endpoint_path, s->id) < 0 ||
	    !(resp->stream = mcp_reader_new(srv, st, 0))) {
		mcp_session_end(srv, s);
		resp_oom(resp);
	} else {
		resp->status = 200;
	}
	mcp_unlock(srv);
}

void mcp_http_sse_post(struct mcp_server *srv, const struct mcp_http_req *req,
                       struct mcp_http_resp *resp)
{
	struct rpc_batch *b;
	struct session *s;
	struct stream *st = NULL;

	resp_init(resp);
	mcp_lock(srv);
	s = lookup_locked(srv, req, resp, true);
	if (s && (st = s->get_stream))
		mcp_events_hold(st);
	mcp_unlock(srv);
	if (!s)
		return;
	b = malloc(sizeof(*b));
	if (!b) {
		resp_oom(resp);
		goto out;
	}
	if (!parse_post(srv, req, b, resp)) {
		free(b);
		goto out;
	}
	/* Everything, answers included, travels on the session's stream. */
	mcp_process_batch(srv, s, st, b);
	rpc_batch_finish(b);
	free(b);
	resp->status = 202;
out:
	mcp_lock(srv);
	if (st)
		mcp_events_unref(srv, st);
	mcp_session_unref(srv, s);
	mcp_unlock(srv);
}

/* ------------------------------------------------------------------ */
/* server-wide */

enum cron_next mcp_job_sweep(void *arg, long long deadline_ms)
{
	struct mcp_server *srv = arg;
	time_t t = mono_s();

	(void)deadline_ms; /* in memory, and bounded per tenant */
	mcp_lock(srv);
	for (struct session *s = srv->sessions, *next; s; s = next) {
		next = s->next;
		mcp_session_trim_streams(s, false);
		if (mcp_session_idle(s) &&
		    t - s->last_active > (time_t)srv->cfg->session_idle_s)
			mcp_session_end(srv, s);
	}
	/* What the sweep let go is freed here, outside the lock. */
	mcp_unlock(srv);
	return CRON_DONE;
}

struct mcp_server *mcp_server_create(const struct config *cfg)
{
	struct mcp_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	srv->cfg = cfg;
	request_state_key(cfg->file_secret, cfg->file_secret_len,
	                  srv->state_key);
	pthread_mutex_init(&srv->lock, NULL);
	mono_cond_init(&srv->drain_cond);
	mono_cond_init(&srv->hook_cond);
	return srv;
}

/*
 * Ends every session and every task; the cancel hooks of their calls run on
 * this thread.
 */
static void end_all_sessions(struct mcp_server *srv)
{
	mcp_lock(srv);
	while (srv->sessions)
		mcp_session_end(srv, srv->sessions);
	while (srv->stateless)
		mcp_session_end(srv, srv->stateless);
	mcp_task_cancel_all(srv);
	mcp_unlock(srv);
}

void mcp_server_destroy(struct mcp_server *srv)
{
	if (!srv)
		return;
	mcp_lock(srv);
	srv->stopping = true;
	mcp_unlock(srv);
	end_all_sessions(srv);
	/* Tool threads still running hold references; let them finish. */
	mcp_lock(srv);
	while (srv->calls_running)
		pthread_cond_wait(&srv->drain_cond, &srv->lock);
	mcp_unlock(srv);
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON_Delete(srv->tool_in_schema[i]);
		cJSON_Delete(srv->tool_out_schema[i]);
	}
	for (size_t i = 0; i < srv->n_prompts; i++)
		cJSON_Delete(srv->prompt_args[i]);
	pthread_cond_destroy(&srv->drain_cond);
	pthread_cond_destroy(&srv->hook_cond);
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

void mcp_server_add_header_param(struct mcp_server *srv, const char *property,
                                 const char *header)
{
	if (srv->n_params >= MAX_HEADER_PARAMS) {
		log_errorx("too many header parameters; '%s' not mirrored",
		           property);
		return;
	}
	srv->param_prop[srv->n_params] = property;
	srv->param_header[srv->n_params++] = header;
}

void mcp_server_set_tasks(struct mcp_server *srv, struct tasks *t)
{
	srv->tasks = t;
}

/*
 * Tells every initialized session with a standalone stream. The message is
 * serialized once, before the lock, and shared by every stream it goes to.
 */
void mcp_server_tools_changed(struct mcp_server *srv)
{
	struct mcp_msg *m = mcp_msg_new(
	    rpc_notification("notifications/tools/list_changed", NULL));

	if (!m)
		return;
	mcp_lock(srv);
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (s->initialized && s->get_stream)
			(void)mcp_events_push(s->get_stream, m, false);
	}
	mcp_unlock(srv);
	mcp_msg_unref(m);
	mcp_listen_broadcast(srv, LISTEN_TOOLS);
}

void mcp_server_prompts_changed(struct mcp_server *srv)
{
	mcp_listen_broadcast(srv, LISTEN_PROMPTS);
}

unsigned mcp_server_drain(struct mcp_server *srv, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned left;

	mono_deadline(&dl, timeout_ms);
	mcp_lock(srv);
	srv->draining = true;
	while (srv->calls_running) {
		if (pthread_cond_timedwait(&srv->drain_cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	left = srv->calls_running;
	mcp_unlock(srv);
	return left;
}

void mcp_server_close_sessions(struct mcp_server *srv)
{
	end_all_sessions(srv);
}

void mcp_server_stats(struct mcp_server *srv, struct mcp_stats *out)
{
	memset(out, 0, sizeof(*out));
	mcp_lock(srv);
	out->sessions = srv->n_sessions;
	for (struct session *s = srv->sessions; s; s = s->next) {
		for (struct stream *st = s->streams; st; st = st->next)
			out->streams_open += st->readers;
	}
	/* Calls still to be answered; the answered ones finishing their
	 * after-work (a shutdown still waits for them) apart. */
	out->calls_running = srv->calls_running - srv->calls_finishing;
	out->calls_finishing = srv->calls_finishing;
	out->calls_total = srv->calls_total;
	mcp_unlock(srv);
}
