/* SPDX-License-Identifier: MIT */
/*
 * mcp_methods: what the server does with each message a client sends: the
 * method handlers (initialize with protocol version negotiation, ping,
 * tools, resources, prompts, completion, logging), the dispatch of requests
 * and notifications, and the walk over a parsed body that hands each
 * message to its handler. A tools/call runs on a detached thread of its
 * own; everything else is answered on the transport's thread.
 * Thread-safety: one mutex, srv->lock, guards all session state; the
 * handlers run without it and take it only around the session state they
 * touch, so a slow tool or provider never holds it.
 */
#include "mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "build_config.h"
#include "log.h"

#define TOOL_THREAD_STACK (1024 * 1024)

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18",
                                             "2025-03-26", "2024-11-05", NULL};

bool mcp_version_supported(const char *v)
{
	for (size_t i = 0; mcp_protocol_versions[i]; i++) {
		if (strcmp(v, mcp_protocol_versions[i]) == 0)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* method handlers: run with the lock NOT held */

struct reply {
	cJSON *result; /* owned */
	int code;      /* when result is NULL */
	char msg[512];
};

static void reply_error(struct reply *rp, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_error(struct reply *rp, int code, const char *fmt, ...)
{
	va_list ap;

	cJSON_Delete(rp->result);
	rp->result = NULL;
	rp->code = code;
	va_start(ap, fmt);
	vsnprintf(rp->msg, sizeof(rp->msg), fmt, ap);
	va_end(ap);
}

static const struct tool_impl *find_tool(struct mcp_server *srv,
                                         const char *name, size_t *idx)
{
	for (size_t i = 0; i < srv->n_tools; i++) {
		if (strcmp(srv->tools[i]->name, name) == 0) {
			if (idx)
				*idx = i;
			return srv->tools[i];
		}
	}
	return NULL;
}

static cJSON *tool_entry(struct mcp_server *srv, size_t i)
{
	const struct tool_impl *t = srv->tools[i];
	cJSON *o = cJSON_CreateObject(), *ann;
	char *desc = NULL;
	cJSON *schema = NULL;

	if (!o)
		return NULL;
	if (t->describe)
		t->describe(t->data, &desc, &schema);
	cJSON_AddStringToObject(o, "name", t->name);
	if (t->title)
		cJSON_AddStringToObject(o, "title", t->title);
	cJSON_AddStringToObject(o, "description", desc ? desc : t->description);
	cJSON_AddItemToObject(
	    o, "inputSchema",
	    schema ? schema : cJSON_Duplicate(srv->tool_in_schema[i], true));
	if (srv->tool_out_schema[i])
		cJSON_AddItemToObject(
		    o, "outputSchema",
		    cJSON_Duplicate(srv->tool_out_schema[i], true));
	ann = cJSON_AddObjectToObject(o, "annotations");
	if (ann) {
		if (t->title)
			cJSON_AddStringToObject(ann, "title", t->title);
		cJSON_AddBoolToObject(ann, "readOnlyHint", t->read_only);
		cJSON_AddBoolToObject(ann, "destructiveHint", t->destructive);
		cJSON_AddBoolToObject(ann, "idempotentHint", t->idempotent);
		cJSON_AddBoolToObject(ann, "openWorldHint", t->open_world);
	}
	free(desc);
	return o;
}

static void do_tools_list(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "tools") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON *e = tool_entry(srv, i);

		if (e)
			cJSON_AddItemToArray(arr, e);
	}
	rp->result = r;
}

/* Runs on its own thread: a tools/call. */
static void *tool_thread(void *arg)
{
	struct mcp_call *c = arg;
	struct mcp_server *srv = c->srv;
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	cJSON *empty = NULL;
	cJSON *result;

	if (!cJSON_IsObject(args))
		args = empty = cJSON_CreateObject();
	result = args ? c->tool->call(c->tool->data, c, args) : NULL;
	cJSON_Delete(empty);
	pthread_mutex_lock(&srv->lock);
	if (result)
		mcp_call_finish_locked(c, result, 0, NULL);
	else
		mcp_call_finish_locked(c, NULL, RPC_INTERNAL_ERROR,
		                       "the tool failed internally; the server "
		                       "log has details");
	srv->calls_running--;
	pthread_cond_broadcast(&srv->drain_cond);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/*
 * tools/call: validates, then hands the call to a thread. Returns true when
 * the call was handed over (the thread answers), false when rp holds the
 * answer now.
 */
static bool do_tools_call(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	pthread_attr_t attr;
	pthread_t th;
	int r;

	if (!cJSON_IsString(name)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "tools/call needs params.name, the tool's name "
		            "(see tools/list)");
		return false;
	}
	c->tool = find_tool(srv, name->valuestring, NULL);
	if (!c->tool) {
		struct buf b;

		buf_init(&b, 2048);
		for (size_t i = 0; i < srv->n_tools; i++) {
			if (buf_printf(&b, "%s%s", i ? ", " : "",
			               srv->tools[i]->name) < 0)
				break;
		}
		reply_error(rp, RPC_INVALID_PARAMS,
		            "unknown tool '%.100s'; available: %s",
		            name->valuestring, b.data ? b.data : "none");
		buf_finish(&b);
		return false;
	}
	if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "tools/call params.arguments must be an object");
		return false;
	}
	pthread_mutex_lock(&srv->lock);
	if (srv->draining) {
		pthread_mutex_unlock(&srv->lock);
		rp->result = mcp_text_result(
		    "The server is shutting down and takes no new work. "
		    "Retry in a minute; it will be back.",
		    true);
		return false;
	}
	srv->calls_running++;
	srv->calls_total++;
	pthread_mutex_unlock(&srv->lock);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TOOL_THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&th, &attr, tool_thread, c);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		pthread_mutex_lock(&srv->lock);
		srv->calls_running--;
		pthread_cond_broadcast(&srv->drain_cond);
		pthread_mutex_unlock(&srv->lock);
		errno = r;
		log_warn("cannot start a thread for tools/call");
		reply_error(rp, RPC_INTERNAL_ERROR,
		            "the server is out of resources; retry shortly");
		return false;
	}
	return true;
}

static void do_resources_list(struct mcp_call *c, struct reply *rp,
                              bool templates)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(
	                     r, templates ? "resourceTemplates" : "resources")
	               : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];

		if (templates && p->templates)
			p->templates(p->data, arr);
		else if (!templates && p->list)
			p->list(p->data, c, arr);
	}
	rp->result = r;
}

static void do_resources_read(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	char err[512] = "";

	if (!cJSON_IsString(uri)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "resources/read needs params.uri");
		return;
	}
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];
		cJSON *contents = NULL;
		int r;

		if (!p->read)
			continue;
		r = p->read(p->data, c, uri->valuestring, &contents, err,
		            sizeof(err));
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			reply_error(rp,
			            r == -EINVAL ? RPC_INVALID_PARAMS
			                         : RPC_INTERNAL_ERROR,
			            "%s",
			            err[0] ? err : "cannot read the resource");
			return;
		}
		rp->result = cJSON_CreateObject();
		if (!rp->result) {
			cJSON_Delete(contents);
			reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
			return;
		}
		cJSON_AddItemToObject(rp->result, "contents", contents);
		return;
	}
	reply_error(rp, RPC_RESOURCE_NOT_FOUND,
	            "resource not found: %.300s%s%s", uri->valuestring,
	            err[0] ? "; " : "", err);
}

static void do_subscribe(struct mcp_call *c, struct reply *rp, bool on)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	size_t free_slot = MAX_SUBSCRIPTIONS;

	if (!cJSON_IsString(uri) || !uri->valuestring[0] ||
	    strlen(uri->valuestring) > 2048) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "resources/%s needs params.uri",
		            on ? "subscribe" : "unsubscribe");
		return;
	}
	pthread_mutex_lock(&srv->lock);
	for (size_t i = 0; i < MAX_SUBSCRIPTIONS; i++) {
		if (s->subs[i] && strcmp(s->subs[i], uri->valuestring) == 0) {
			if (!on) {
				free(s->subs[i]);
				s->subs[i] = NULL;
			}
			goto done;
		}
		if (!s->subs[i] && free_slot == MAX_SUBSCRIPTIONS)
			free_slot = i;
	}
	if (on) {
		if (free_slot == MAX_SUBSCRIPTIONS) {
			pthread_mutex_unlock(&srv->lock);
			reply_error(rp, RPC_INVALID_PARAMS,
			            "a session may hold at most %d "
			            "subscriptions; unsubscribe from one first",
			            MAX_SUBSCRIPTIONS);
			return;
		}
		s->subs[free_slot] = strdup(uri->valuestring);
	}
done:
	pthread_mutex_unlock(&srv->lock);
	rp->result = cJSON_CreateObject();
}

static void do_prompts_list(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "prompts") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_prompts; i++) {
		const struct prompt_impl *p = srv->prompts[i];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", p->name);
		if (p->title)
			cJSON_AddStringToObject(o, "title", p->title);
		cJSON_AddStringToObject(o, "description", p->description);
		if (srv->prompt_args[i])
			cJSON_AddItemToObject(
			    o, "arguments",
			    cJSON_Duplicate(srv->prompt_args[i], true));
		cJSON_AddItemToArray(arr, o);
	}
	rp->result = r;
}

static void do_prompts_get(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	char err[512] = "";

	if (!cJSON_IsString(name)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "prompts/get needs params.name");
		return;
	}
	for (size_t i = 0; i < srv->n_prompts; i++) {
		const struct prompt_impl *p = srv->prompts[i];

		if (strcmp(p->name, name->valuestring) != 0)
			continue;
		rp->result = p->get(p->data, c, args, err, sizeof(err));
		if (!rp->result)
			reply_error(rp, RPC_INVALID_PARAMS, "%s",
			            err[0] ? err : "cannot build the prompt");
		return;
	}
	reply_error(rp, RPC_INVALID_PARAMS, "unknown prompt '%.100s'",
	            name->valuestring);
}

static void do_complete(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(c->params, "ref");
	const cJSON *arg =
	    cJSON_GetObjectItemCaseSensitive(c->params, "argument");
	cJSON *values = NULL, *r, *comp;

	if (!cJSON_IsObject(ref) || !cJSON_IsObject(arg)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "completion/complete needs params.ref and "
		            "params.argument");
		return;
	}
	if (srv->complete)
		values = srv->complete(
		    srv->complete_data, ref, arg,
		    cJSON_GetObjectItemCaseSensitive(c->params, "context"));
	if (!values)
		values = cJSON_CreateArray();
	r = cJSON_CreateObject();
	comp = r ? cJSON_AddObjectToObject(r, "completion") : NULL;
	if (!comp) {
		cJSON_Delete(values);
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	int n = cJSON_GetArraySize(values);

	cJSON_AddItemToObject(comp, "values", values);
	cJSON_AddNumberToObject(comp, "total", n);
	cJSON_AddFalseToObject(comp, "hasMore");
	rp->result = r;
}

static void do_set_level(struct mcp_call *c, struct reply *rp)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(c->params, "level");

	for (size_t i = 0; cJSON_IsString(lv) && i < 8; i++) {
		if (strcmp(lv->valuestring, mcp_level_names[i]) == 0) {
			pthread_mutex_lock(&c->srv->lock);
			c->sess->log_level = (enum mcp_log_level)i;
			pthread_mutex_unlock(&c->srv->lock);
			rp->result = cJSON_CreateObject();
			return;
		}
	}
	reply_error(rp, RPC_INVALID_PARAMS,
	            "params.level must be one of debug, info, notice, "
	            "warning, error, critical, alert, emergency");
}

static cJSON *initialize_result(struct mcp_server *srv, const char *version)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *caps, *info, *o;

	if (!r)
		return NULL;
	cJSON_AddStringToObject(r, "protocolVersion", version);
	caps = cJSON_AddObjectToObject(r, "capabilities");
	o = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddTrueToObject(o, "listChanged");
	if (srv->n_providers) {
		o = cJSON_AddObjectToObject(caps, "resources");
		cJSON_AddTrueToObject(o, "subscribe");
		cJSON_AddTrueToObject(o, "listChanged");
	}
	if (srv->n_prompts) {
		o = cJSON_AddObjectToObject(caps, "prompts");
		cJSON_AddFalseToObject(o, "listChanged");
	}
	cJSON_AddObjectToObject(caps, "logging");
	if (srv->complete)
		cJSON_AddObjectToObject(caps, "completions");
	info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", "mcp-sandboxd");
	cJSON_AddStringToObject(info, "title", "Code sandbox");
	cJSON_AddStringToObject(info, "version", MCPSD_VERSION);
	if (srv->instructions)
		cJSON_AddStringToObject(r, "instructions", srv->instructions);
	return r;
}

/* initialize on a session that exists (new, or legacy). Lock NOT held. */
static void do_initialize(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	const cJSON *pv =
	    cJSON_GetObjectItemCaseSensitive(c->params, "protocolVersion");
	const cJSON *caps =
	    cJSON_GetObjectItemCaseSensitive(c->params, "capabilities");
	const cJSON *ci =
	    cJSON_GetObjectItemCaseSensitive(c->params, "clientInfo");
	const char *v;

	if (!cJSON_IsString(pv)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "initialize needs params.protocolVersion, e.g. "
		            "\"2025-11-25\"");
		return;
	}
	v = mcp_version_supported(pv->valuestring) ? pv->valuestring
	                                           : mcp_protocol_versions[0];
	pthread_mutex_lock(&srv->lock);
	if (s->initialized) {
		pthread_mutex_unlock(&srv->lock);
		reply_error(rp, RPC_INVALID_REQUEST,
		            "this session is already initialized; start a new "
		            "session (POST initialize without Mcp-Session-Id)");
		return;
	}
	s->initialized = true;
	snprintf(s->version, sizeof(s->version), "%s", v);
	cJSON_Delete(s->client_caps);
	s->client_caps = cJSON_IsObject(caps) ? cJSON_Duplicate(caps, true)
	                                      : cJSON_CreateObject();
	pthread_mutex_unlock(&srv->lock);
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(ci, "name");
		const cJSON *ver =
		    cJSON_GetObjectItemCaseSensitive(ci, "version");
		char fp[13];

		log_fingerprint(s->id, strlen(s->id), fp);
		log_info("session %s: tenant %s, client %.64s %.32s, "
		         "protocol %s%s",
		         fp, s->tenant,
		         cJSON_IsString(n) ? n->valuestring : "?",
		         cJSON_IsString(ver) ? ver->valuestring : "?", v,
		         s->legacy ? " (HTTP+SSE)" : "");
	}
	rp->result = initialize_result(srv, v);
}

/*
 * Runs a request. Returns true if it continues on another thread (which
 * answers), false when it was answered (or failed) here.
 */
static bool dispatch_request(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	struct reply rp = {0};
	const char *m = c->method;

	if (strcmp(m, "initialize") == 0)
		do_initialize(c, &rp);
	else if (strcmp(m, "ping") == 0)
		rp.result = cJSON_CreateObject();
	else if (strcmp(m, "tools/list") == 0)
		do_tools_list(c, &rp);
	else if (strcmp(m, "tools/call") == 0) {
		if (do_tools_call(c, &rp))
			return true;
	} else if (strcmp(m, "resources/list") == 0)
		do_resources_list(c, &rp, false);
	else if (strcmp(m, "resources/templates/list") == 0)
		do_resources_list(c, &rp, true);
	else if (strcmp(m, "resources/read") == 0)
		do_resources_read(c, &rp);
	else if (strcmp(m, "resources/subscribe") == 0)
		do_subscribe(c, &rp, true);
	else if (strcmp(m, "resources/unsubscribe") == 0)
		do_subscribe(c, &rp, false);
	else if (strcmp(m, "prompts/list") == 0)
		do_prompts_list(c, &rp);
	else if (strcmp(m, "prompts/get") == 0)
		do_prompts_get(c, &rp);
	else if (strcmp(m, "completion/complete") == 0)
		do_complete(c, &rp);
	else if (strcmp(m, "logging/setLevel") == 0)
		do_set_level(c, &rp);
	else
		reply_error(&rp, RPC_METHOD_NOT_FOUND,
		            "method '%.100s' is not supported by this server",
		            m);
	if (!rp.result && !rp.code)
		reply_error(&rp, RPC_INTERNAL_ERROR, "out of memory");
	pthread_mutex_lock(&srv->lock);
	mcp_call_finish_locked(c, rp.result, rp.code, rp.msg);
	pthread_mutex_unlock(&srv->lock);
	return false;
}

/* A notification from the client. Lock NOT held. */
static void handle_notification(struct mcp_server *srv, struct session *s,
                                const struct rpc_msg *m)
{
	if (strcmp(m->method, "notifications/cancelled") == 0) {
		const cJSON *rid = m->params ? cJSON_GetObjectItemCaseSensitive(
		                                   m->params, "requestId")
		                             : NULL;
		char *key = rid ? rpc_id_key(rid) : NULL;

		if (!key)
			return;
		pthread_mutex_lock(&srv->lock);
		for (struct mcp_call *c = s->calls; c; c = c->next) {
			if (strcmp(c->id_key, key) == 0) {
				if (strcmp(c->method, "initialize") != 0)
					mcp_call_cancel_locked(c);
				break;
			}
		}
		pthread_mutex_unlock(&srv->lock);
		free(key);
		return;
	}
	/* initialized, roots/list_changed, progress: nothing to do. */
}

/* ------------------------------------------------------------------ */
/* batches */

/*
 * Hands each message of a parsed body to its handler. Requests are
 * attached to st (may be NULL only when there are none). Lock NOT held.
 */
void mcp_process_batch(struct mcp_server *srv, struct session *s,
                       struct stream *st, struct rpc_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct rpc_msg *m = &b->msgs[i];
		struct mcp_call *c;

		switch (m->kind) {
		case RPC_KIND_RESPONSE:
			pthread_mutex_lock(&srv->lock);
			mcp_deliver_response(s, m);
			pthread_mutex_unlock(&srv->lock);
			break;
		case RPC_KIND_NOTIFICATION:
			handle_notification(srv, s, m);
			break;
		case RPC_KIND_INVALID:
			/* JSON-RPC 2.0 section 6: answered, with id null if
			 * unknown. */
			pthread_mutex_lock(&srv->lock);
			if (st)
				mcp_events_push(st,
				                rpc_error(m->id_raw,
				                          m->invalid_code,
				                          m->invalid_msg, NULL),
				                true);
			pthread_mutex_unlock(&srv->lock);
			break;
		case RPC_KIND_REQUEST:
			pthread_mutex_lock(&srv->lock);
			if (s->n_calls >= srv->cfg->max_inflight_per_session) {
				mcp_events_push(
				    st,
				    rpc_error(m->id_raw, RPC_INTERNAL_ERROR,
				              "too many requests in "
				              "flight on this session; "
				              "wait for some to finish",
				              NULL),
				    true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			for (c = s->calls; c; c = c->next) {
				if (strcmp(c->id_key, m->id_key) == 0)
					break;
			}
			if (c) {
				mcp_events_push(
				    st,
				    rpc_error(m->id_raw, RPC_INVALID_REQUEST,
				              "a request with this id "
				              "is already in flight",
				              NULL),
				    true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			c = mcp_call_new(srv, s, st, m);
			pthread_mutex_unlock(&srv->lock);
			if (!c) {
				pthread_mutex_lock(&srv->lock);
				mcp_events_push(
				    st,
				    rpc_error(m->id_raw, RPC_INTERNAL_ERROR,
				              "out of memory", NULL),
				    true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			dispatch_request(c);
			break;
		}
	}
}
