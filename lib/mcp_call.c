/* SPDX-License-Identifier: MIT */
/*
 * mcp_call: the lifetime of a request in flight (struct mcp_call), from its
 * creation to its response, with its cancellation; requests the server
 * sends to the client and the client's answers to them; the public
 * mcp_call_* API that tool and method handlers use; and the text result
 * helpers. Thread-safety: one mutex, srv->lock, guards all session state.
 * The public functions take it themselves and may be called from any
 * thread, tool threads included; the mcp_ functions declared in
 * mcp_internal.h expect it held. Cancel hooks run with it held.
 */
#include "mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "log.h"

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

/*
 * Marks a call cancelled and runs its hook. The hook runs with the lock
 * held, so once mcp_call_on_cancel(NULL) returns no hook is running; hooks
 * therefore must not call back into this module.
 */
void mcp_call_cancel_locked(struct mcp_call *c)
{
	if (c->cancelled || c->done)
		return;
	c->cancelled = true;
	for (struct pending *p = c->sess->pendings; p; p = p->next)
		pthread_cond_broadcast(&p->cond);
	if (c->cancel_fn)
		c->cancel_fn(c->cancel_arg);
}

struct mcp_call *mcp_call_new(struct mcp_server *srv, struct session *s,
                              struct stream *st, const struct rpc_msg *m)
{
	struct mcp_call *c = calloc(1, sizeof(*c));
	cJSON *meta, *tok;

	if (!c)
		return NULL;
	c->srv = srv;
	c->sess = s;
	c->st = st;
	c->id_raw = strdup(m->id_raw);
	c->id_key = strdup(m->id_key);
	c->method = strdup(m->method);
	c->params =
	    m->params ? cJSON_Duplicate(m->params, true) : cJSON_CreateObject();
	if (!c->id_raw || !c->id_key || !c->method || !c->params) {
		free(c->id_raw);
		free(c->id_key);
		free(c->method);
		cJSON_Delete(c->params);
		free(c);
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
	s->refs++;
	c->next = s->calls;
	s->calls = c;
	s->n_calls++;
	if (st)
		st->pending++;
	return c;
}

static void call_free(struct mcp_call *c)
{
	free(c->id_raw);
	free(c->id_key);
	free(c->method);
	cJSON_Delete(c->params);
	cJSON_Delete(c->progress_token);
	free(c);
}

/*
 * Finishes a call with a result (or an error when result is NULL): queues
 * the response unless the client cancelled, unlinks and frees the call.
 * Takes ownership of result. Called with the lock held.
 */
void mcp_call_finish_locked(struct mcp_call *c, cJSON *result, int code,
                            const char *msg)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	struct stream *st = c->st;
	char *json;

	c->done = true;
	if (c->cancelled || s->gone || !st) {
		cJSON_Delete(result);
	} else {
		json = result ? rpc_result(c->id_raw, result)
		              : rpc_error(c->id_raw, code, msg, NULL);
		if (mcp_events_push(st, json, true) < 0)
			log_warnx("could not queue the response to a %s "
			          "request",
			          c->method);
	}
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
	mcp_session_unref(srv, s);
	call_free(c);
}

const char *mcp_call_tenant(const struct mcp_call *c)
{
	return c->sess->tenant;
}

const char *mcp_call_protocol_version(const struct mcp_call *c)
{
	return c->sess->version;
}

const cJSON *mcp_call_client_capabilities(const struct mcp_call *c)
{
	return c->sess->client_caps;
}

bool mcp_call_cancelled(const struct mcp_call *c)
{
	bool v;

	pthread_mutex_lock(&c->srv->lock);
	v = c->cancelled;
	pthread_mutex_unlock(&c->srv->lock);
	return v;
}

void mcp_call_on_cancel(struct mcp_call *c, void (*fn)(void *), void *arg)
{
	struct mcp_server *srv = c->srv;

	pthread_mutex_lock(&srv->lock);
	c->cancel_fn = fn;
	c->cancel_arg = arg;
	if (fn && c->cancelled)
		fn(arg);
	pthread_mutex_unlock(&srv->lock);
}

bool mcp_call_has_progress(const struct mcp_call *c)
{
	return c->progress_token != NULL;
}

/* Queues a notification on the call's stream (or the session's). */
static int call_notify(struct mcp_call *c, const char *method, cJSON *params)
{
	struct mcp_server *srv = c->srv;
	char *json = rpc_notification(method, params);
	int r;

	if (!json)
		return -ENOMEM;
	pthread_mutex_lock(&srv->lock);
	if (c->sess->gone || c->cancelled) {
		free(json);
		r = -ECANCELED;
	} else if (c->st && !c->st->ended) {
		r = mcp_events_push(c->st, json, false);
	} else if (c->sess->get_stream) {
		r = mcp_events_push(c->sess->get_stream, json, false);
	} else {
		free(json);
		r = -ENOTCONN;
	}
	pthread_mutex_unlock(&srv->lock);
	return r;
}

int mcp_call_progress(struct mcp_call *c, double progress, double total,
                      const char *message)
{
	cJSON *p;

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

	pthread_mutex_lock(&c->srv->lock);
	threshold = c->sess->log_level;
	pthread_mutex_unlock(&c->srv->lock);
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

	pthread_mutex_lock(&srv->lock);
	if (c->st && c->st->kind == STREAM_POST && !c->st->ended &&
	    mcp_session_wants_priming(c->sess)) {
		c->st->retry_ms = retry_ms;
		c->st->sse = true;
		c->st->sent_other = true;
		c->st->cut_seq = c->st->next_seq;
		c->st->generation++;
		pthread_cond_broadcast(&c->st->cond);
	}
	pthread_mutex_unlock(&srv->lock);
}

/* ------------------------------------------------------------------ */
/* requests to the client */

int mcp_call_request(struct mcp_call *c, const char *method, cJSON *params,
                     unsigned timeout_ms, cJSON **result, cJSON **error)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	struct pending *p;
	struct timespec dl;
	char idbuf[48];
	char *json;
	int r = 0;

	*result = NULL;
	*error = NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		cJSON_Delete(params);
		return -ENOMEM;
	}
	mono_cond_init(&p->cond);
	pthread_mutex_lock(&srv->lock);
	snprintf(idbuf, sizeof(idbuf), "\"srv-%llu\"", ++s->next_request_id);
	json = rpc_request(idbuf, method, params);
	p->id_key = malloc(strlen(idbuf) + 1);
	if (!json || !p->id_key) {
		free(json);
		r = -ENOMEM;
		goto out;
	}
	/* "s:" + the id without its quotes. */
	snprintf(p->id_key, strlen(idbuf) + 1, "s:%.*s", (int)strlen(idbuf) - 2,
	         idbuf + 1);
	if (s->gone || c->cancelled) {
		free(json);
		r = s->gone ? -ENOTCONN : -ECANCELED;
		goto out;
	}
	if (c->st && !c->st->ended)
		r = mcp_events_push(c->st, json, false);
	else if (s->get_stream)
		r = mcp_events_push(s->get_stream, json, false);
	else {
		free(json);
		r = -ENOTCONN;
	}
	if (r < 0)
		goto out;
	p->next = s->pendings;
	s->pendings = p;
	mono_deadline(&dl, timeout_ms);
	while (!p->done && !s->gone && !c->cancelled) {
		if (pthread_cond_timedwait(&p->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	for (struct pending **pp = &s->pendings; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->done) {
		*result = p->result;
		*error = p->error;
		r = p->error ? -EPROTO : 0;
	} else {
		r = s->gone        ? -ENOTCONN
		    : c->cancelled ? -ECANCELED
		                   : -ETIMEDOUT;
		cJSON_Delete(p->result);
		cJSON_Delete(p->error);
	}
out:
	pthread_mutex_unlock(&srv->lock);
	free(p->id_key);
	pthread_cond_destroy(&p->cond);
	free(p);
	return r;
}

/* A response from the client to one of our requests. Lock held. */
void mcp_deliver_response(struct session *s, const struct rpc_msg *m)
{
	for (struct pending *p = s->pendings; p; p = p->next) {
		if (strcmp(p->id_key, m->id_key) != 0 || p->done)
			continue;
		cJSON *res = cJSON_GetObjectItemCaseSensitive(m->obj, "result");
		cJSON *err = cJSON_GetObjectItemCaseSensitive(m->obj, "error");

		p->result = res ? cJSON_Duplicate(res, true) : NULL;
		p->error = err ? cJSON_Duplicate(err, true) : NULL;
		if (!p->result && !p->error)
			p->error = cJSON_CreateString("empty response");
		p->done = true;
		pthread_cond_broadcast(&p->cond);
		return;
	}
	log_debug("response to an unknown or expired request ignored");
}
