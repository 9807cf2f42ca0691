/* SPDX-License-Identifier: MIT */
/*
 * mcp_call: the lifetime of a request in flight (struct mcp_call), from its
 * creation to its response, with its cancellation; the client's answers to
 * requests the server sent it (mcp_input.c sends them); the public
 * mcp_call_* API that tool and method handlers use; and the text result
 * helpers. Thread-safety: one mutex, srv->lock, guards all session state.
 * The public functions take it themselves and may be called from any
 * thread, tool threads included; the mcp_ functions declared in
 * mcp_internal.h expect it held unless their comment says otherwise.
 * Messages are serialized before the lock is taken, and cancel hooks run
 * after it is released: the thread that cancels claims the hook under the
 * lock and runs it from mcp_unlock(); whoever must know that no hook runs
 * any more (mcp_call_on_cancel(NULL), the end of the call) waits on
 * srv->hook_cond until the claim is over.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/log.h"

const char *const mcp_level_names[8] = {"debug",   "info",     "notice",
                                        "warning", "error",    "critical",
                                        "alert",   "emergency"};

cJSON *mcp_text_result(const char *text, bool is_error)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *content, *item;

	if (!r)
		return NULL;
	content = cJSON_AddArrayToObject(r, "content");
	item = cJSON_CreateObject();
	if (!content || !item) {
		cJSON_Delete(item);
		cJSON_Delete(r);
		return NULL;
	}
	cJSON_AddItemToArray(content, item);
	if (!cJSON_AddStringToObject(item, "type", "text") ||
	    !cJSON_AddStringToObject(item, "text", text) ||
	    (is_error && !cJSON_AddTrueToObject(r, "isError"))) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

cJSON *mcp_text_resultf(bool is_error, const char *fmt, ...)
{
	struct buf b;
	va_list ap;
	cJSON *r = NULL;
	int rc;

	buf_init(&b, 1024 * 1024);
	va_start(ap, fmt);
	rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc == 0)
		r = mcp_text_result(b.data, is_error);
	buf_finish(&b);
	return r;
}

/* ------------------------------------------------------------------ */
/* calls */

/* Claims c's hook for this thread to run from mcp_unlock(). */
static void claim_hook(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;

	c->hook_fn = c->cancel_fn;
	c->hook_arg = c->cancel_arg;
	c->cancel_fn = NULL;
	c->cancel_arg = NULL;
	c->hook_busy = true;
	c->hook_thread = pthread_self();
	c->hook_next = srv->later_hooks;
	srv->later_hooks = c;
}

/* Marks a claimed hook returned and wakes whoever waits for that. */
static void hook_returned(struct mcp_call *c)
{
	c->hook_fn = NULL;
	c->hook_arg = NULL;
	c->hook_busy = false;
	pthread_cond_broadcast(&c->srv->hook_cond);
}

/*
 * Waits until no hook of c runs on another thread. A hook running on this
 * thread (one that calls back into its own call) is not waited for: that
 * would wait for itself. Lock held.
 */
static void wait_hook(struct mcp_call *c)
{
	while (c->hook_busy && !pthread_equal(c->hook_thread, pthread_self()))
		pthread_cond_wait(&c->srv->hook_cond, &c->srv->lock);
}

void mcp_call_cancel_locked(struct mcp_call *c)
{
	if (c->cancelled || c->done)
		return;
	c->cancelled = true;
	for (struct pending *p = c->sess->pendings; p; p = p->next)
		pthread_cond_broadcast(&p->cond);
	if (c->cancel_fn)
		claim_hook(c);
}

void mcp_call_run_hooks(struct mcp_server *srv, struct mcp_call *list)
{
	while (list) {
		struct mcp_call *c = list;

		/* c stays alive while hook_busy: its end waits for it. */
		list = c->hook_next;
		c->hook_fn(c->hook_arg);
		pthread_mutex_lock(&srv->lock);
		hook_returned(c);
		pthread_mutex_unlock(&srv->lock);
	}
}

struct mcp_call *mcp_call_create(struct mcp_server *srv,
                                 const struct rpc_msg *m)
{
	struct mcp_call *c = calloc(1, sizeof(*c));
	cJSON *meta, *tok;

	if (!c)
		return NULL;
	c->srv = srv;
	c->id_raw = strdup(m->id_raw);
	c->id_key = strdup(m->id_key);
	c->method = strdup(m->method);
	c->params =
	    m->params ? cJSON_Duplicate(m->params, true) : cJSON_CreateObject();
	if (!c->id_raw || !c->id_key || !c->method || !c->params) {
		mcp_call_discard(c);
		return NULL;
	}
	meta = cJSON_GetObjectItemCaseSensitive(c->params, "_meta");
	tok = meta ? cJSON_GetObjectItemCaseSensitive(meta, "progressToken")
	           : NULL;
	if (cJSON_IsString(tok)) {
		c->progress_token = cJSON_Duplicate(tok, false);
	} else if (cJSON_IsNumber(tok)) {
		/*
		 * A token must come back exactly as sent, and cJSON keeps
		 * numbers as doubles: an integer below 2^53 is echoed as its
		 * digits; any other number cannot be, so it is ignored (the
		 * request then gets no progress, which the specification
		 * allows) rather than echoed wrong.
		 */
		char *key = rpc_id_key(tok);

		if (key && key[0] == 'n')
			c->progress_token = cJSON_CreateRaw(key + 2);
		else
			log_debug(
			    "progress token is not an integer up to 2^53; "
			    "no progress is sent for this request");
		free(key);
	}
	return c;
}

void mcp_call_discard(struct mcp_call *c)
{
	if (!c)
		return;
	free(c->id_raw);
	free(c->id_key);
	free(c->method);
	cJSON_Delete(c->params);
	cJSON_Delete(c->progress_token);
	cJSON_Delete(c->fail_data);
	free(c->fail_msg);
	mcp_input_discard(c);
	free(c);
}

void mcp_call_attach(struct mcp_call *c, struct session *s, struct stream *st)
{
	c->sess = s;
	c->st = st;
	s->refs++;
	c->next = s->calls;
	s->calls = c;
	s->n_calls++;
	if (st) {
		mcp_events_hold(st);
		st->pending++;
	}
}

/*
 * Finishes a call with its response: queues it unless the client
 * cancelled, unlinks and frees the call. The response was serialized by
 * the caller, without the lock, and is freed here after releasing it.
 */
void mcp_call_finish(struct mcp_call *c, char *json)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	struct stream *st = c->st;
	struct mcp_msg *m = mcp_msg_new(json);

	if (m)
		m->code = c->answer_code;
	mcp_lock(srv);
	wait_hook(c);
	c->done = true;
	c->cancel_fn = NULL;
	if (!c->no_response && !c->cancelled && !s->gone && st &&
	    mcp_events_push(st, m, true) < 0)
		log_warnx("could not queue the response to a %s request",
		          c->method);
	if (st && st->pending && --st->pending == 0 && st->kind == STREAM_POST)
		mcp_events_end(st);
	for (struct mcp_call **pp = &s->calls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			s->n_calls--;
			break;
		}
	}
	s->last_active = mono_s();
	if (st)
		mcp_events_unref(srv, st);
	mcp_session_unref(srv, s);
	mcp_unlock(srv);
	mcp_msg_unref(m);
	mcp_call_discard(c);
}

const char *mcp_call_tenant(const struct mcp_call *c)
{
	return c->sess->tenant;
}

const char *mcp_call_client(const struct mcp_call *c)
{
	return c->sess->client ? c->sess->client : "";
}

const char *mcp_call_protocol_version(const struct mcp_call *c)
{
	return c->sess->version;
}

const cJSON *mcp_call_client_capabilities(const struct mcp_call *c)
{
	return c->sess->client_caps;
}

bool mcp_call_client_has_ui(const struct mcp_call *c)
{
	return mcp_revision_client_has_ui(c->sess->client_caps);
}

bool mcp_call_cancelled(const struct mcp_call *c)
{
	bool v;

	mcp_lock(c->srv);
	v = c->cancelled;
	mcp_unlock(c->srv);
	return v;
}

/*
 * Registration and the hook's runs are ordered by the lock: a hook is
 * claimed and cleared under it, and whoever unregisters waits for a claim
 * in progress on another thread, so once it returns the hook neither runs
 * nor can be claimed. A hook registered on a cancelled call runs here, on
 * this thread, as a claim of its own.
 */
void mcp_call_on_cancel(struct mcp_call *c, void (*fn)(void *), void *arg)
{
	struct mcp_server *srv = c->srv;
	bool nested;

	mcp_lock(srv);
	c->cancel_fn = NULL;
	c->cancel_arg = NULL;
	wait_hook(c);
	if (!fn || !c->cancelled) {
		c->cancel_fn = fn;
		c->cancel_arg = fn ? arg : NULL;
		mcp_unlock(srv);
		return;
	}
	/* Already cancelled: fn runs now. From inside a hook, as a nested
	 * call on the claim that hook already holds. */
	nested = c->hook_busy;
	if (!nested) {
		c->hook_busy = true;
		c->hook_thread = pthread_self();
	}
	mcp_unlock(srv);
	fn(arg);
	if (!nested) {
		mcp_lock(srv);
		c->hook_busy = false;
		pthread_cond_broadcast(&srv->hook_cond);
		mcp_unlock(srv);
	}
}

void mcp_call_after(struct mcp_call *c, void (*fn)(void *), void *arg)
{
	c->after_fn = fn;
	c->after_arg = arg;
}

bool mcp_call_has_progress(const struct mcp_call *c)
{
	return c->progress_token != NULL || c->task != NULL;
}

struct stream *mcp_call_target(const struct mcp_call *c)
{
	if (c->st && !c->st->ended)
		return c->st;
	return c->sess->get_stream;
}

/* Queues a notification on the call's stream (or the session's). */
static int call_notify(struct mcp_call *c, const char *method, cJSON *params)
{
	struct mcp_server *srv = c->srv;
	struct mcp_msg *m = mcp_msg_new(rpc_notification(method, params));
	struct stream *to;
	int r;

	if (!m)
		return -ENOMEM;
	mcp_lock(srv);
	if (c->sess->gone || c->cancelled)
		r = -ECANCELED;
	else if ((to = mcp_call_target(c)))
		r = mcp_events_push(to, m, false);
	else
		r = -ENOTCONN;
	mcp_unlock(srv);
	mcp_msg_unref(m);
	return r;
}

int mcp_call_progress(struct mcp_call *c, double progress, double total,
                      const char *message)
{
	cJSON *p;

	/* A task reports its latest progress as its status message. */
	if (c->task) {
		mcp_task_progress(c, message);
		return 0;
	}
	if (!c->progress_token)
		return 0;
	p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	cJSON_AddItemToObject(p, "progressToken",
	                      cJSON_Duplicate(c->progress_token, false));
	cJSON_AddNumberToObject(p, "progress", progress);
	if (total >= 0)
		cJSON_AddNumberToObject(p, "total", total);
	if (message)
		cJSON_AddStringToObject(p, "message", message);
	return call_notify(c, "notifications/progress", p);
}

int mcp_call_log(struct mcp_call *c, enum mcp_log_level level,
                 const char *logger, cJSON *data)
{
	cJSON *p;
	enum mcp_log_level threshold;

	mcp_lock(c->srv);
	threshold = c->sess->log_level;
	mcp_unlock(c->srv);
	if (level < threshold) {
		cJSON_Delete(data);
		return 0;
	}
	p = cJSON_CreateObject();
	if (!p) {
		cJSON_Delete(data);
		return -ENOMEM;
	}
	cJSON_AddStringToObject(p, "level", mcp_level_names[level]);
	if (logger)
		cJSON_AddStringToObject(p, "logger", logger);
	cJSON_AddItemToObject(p, "data", data ? data : cJSON_CreateNull());
	return call_notify(c, "notifications/message", p);
}

void mcp_call_close_stream(struct mcp_call *c, unsigned retry_ms)
{
	struct mcp_server *srv = c->srv;

	mcp_lock(srv);
	if (c->st && c->st->kind == STREAM_POST && !c->st->ended &&
	    mcp_session_wants_priming(c->sess)) {
		c->st->retry_ms = retry_ms;
		c->st->sse = true;
		c->st->sent_other = true;
		c->st->cut_seq = c->st->next_seq;
		c->st->generation++;
		pthread_cond_broadcast(&c->st->cond);
	}
	mcp_unlock(srv);
}

/* ------------------------------------------------------------------ */
/* answers to requests to the client */

/* A response from the client to one of our requests. Lock held. */
bool mcp_deliver_response(struct session *s, const char *id_key, cJSON *result,
                          cJSON *error)
{
	for (struct pending *p = s->pendings; p; p = p->next) {
		if (strcmp(p->id_key, id_key) != 0 || p->done)
			continue;
		p->result = result;
		p->error = error;
		p->done = true;
		pthread_cond_broadcast(&p->cond);
		return true;
	}
	return false;
}
