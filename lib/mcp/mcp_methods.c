/* SPDX-License-Identifier: MIT */
/*
 * mcp_methods: what the server does with each message a client sends: the
 * method handlers (initialize with protocol version negotiation, ping,
 * tools, resources, prompts, completion, logging, and for 2026-07-28
 * server/discover, subscriptions/listen and tasks), the dispatch of
 * requests and notifications, and the walk over a parsed body that hands
 * each message to its handler. A tools/call runs on a detached thread of
 * its own; everything else is answered on the transport's thread. Which
 * methods exist and how results look depends on the request's revision;
 * mcp_revision.c decides, the handlers ask. Every handler returns its whole
 * answer as JSON-RPC text, serialized without the lock: a result through
 * answer(), or an error through fail(), which record its code.
 * Thread-safety: one mutex, srv->lock, guards all session state; the
 * handlers run without it and take it only around the session state they
 * touch, so a slow tool or provider never holds it.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "util/buf.h"
#include "util/log.h"

#define TOOL_THREAD_STACK (1024 * 1024)

/* ------------------------------------------------------------------ */
/* method handlers: run with the lock NOT held */

/* An error answer to c (message printf-formatted), its code recorded. */
static char *fail(struct mcp_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static char *fail(struct mcp_call *c, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->answer_code = code;
	return rpc_error(c->id_raw, code, msg, NULL);
}

/*
 * The answer to c after its handler returned result (taken over): the
 * InputRequiredResult when the handler asked for input that is missing
 * (2026-07-28); the error the handler's input recorded, or internal_msg,
 * when result is NULL; else the result, shaped for the request's revision.
 */
static char *answer_as(struct mcp_call *c, cJSON *result,
                       const char *internal_msg)
{
	char *ir = mcp_input_answer(c);

	if (ir) {
		cJSON_Delete(result);
		return ir;
	}
	if (!result && c->fail_code) {
		c->answer_code = c->fail_code;
		result = c->fail_data;
		c->fail_data = NULL;
		return rpc_error(c->id_raw, c->fail_code,
		                 c->fail_msg ? c->fail_msg : "failed", result);
	}
	if (!result)
		return fail(c, RPC_INTERNAL_ERROR, "%s", internal_msg);
	return rpc_result(c->id_raw,
	                  mcp_revision_shape(c->sess, c->method, result));
}

/* answer_as() for handlers whose only failure is running out of memory. */
static char *answer(struct mcp_call *c, cJSON *result)
{
	return answer_as(c, result, "out of memory");
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

static cJSON *tool_entry(struct mcp_server *srv, const struct session *s,
                         size_t i)
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
	if (t->ui_meta && mcp_revision_client_has_ui(s->client_caps))
		cJSON_AddItemToObject(o, "_meta", cJSON_Parse(t->ui_meta));
	mcp_revision_annotate_tool(srv, s, i, o);
	return o;
}

static char *do_tools_list(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "tools") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		return answer(c, NULL);
	}
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON *e;

		if (srv->tools[i]->ui_only &&
		    !mcp_revision_client_has_ui(c->sess->client_caps))
			continue;
		e = tool_entry(srv, c->sess, i);
		if (e)
			cJSON_AddItemToArray(arr, e);
	}
	return answer(c, r);
}

/*
 * Runs on its own thread: a tools/call. The result, up to megabytes, is
 * serialized here, before mcp_call_finish() takes the lock.
 */
static void *tool_thread(void *arg)
{
	struct mcp_call *c = arg;
	struct mcp_server *srv = c->srv;
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	cJSON *empty = NULL;
	cJSON *result;
	void (*after)(void *);
	void *after_arg;

	/* A task answers its request now and runs on here. */
	if (c->tool->tasks != MCP_TASK_NEVER && !c->tool->task_deferred)
		(void)mcp_call_become_task(c);
	if (!cJSON_IsObject(args))
		args = empty = cJSON_CreateObject();
	result = args ? c->tool->call(c->tool->data, c, args) : NULL;
	cJSON_Delete(empty);
	/* Only this thread sets them (the handler): no lock needed. */
	after = c->after_fn;
	after_arg = c->after_arg;
	if (c->task)
		mcp_task_finish(c, result);
	else
		mcp_call_finish(c, answer_as(c, result,
		                             "the tool failed internally; the "
		                             "server log has details"));
	/* c is freed: what the tool left for after its answer. */
	if (after) {
		mcp_lock(srv);
		srv->calls_finishing++;
		mcp_unlock(srv);
		after(after_arg);
	}
	mcp_lock(srv);
	if (after)
		srv->calls_finishing--;
	srv->calls_running--;
	pthread_cond_broadcast(&srv->drain_cond);
	mcp_unlock(srv);
	return NULL;
}

/* The answer to a tools/call naming no tool this server has. */
static char *unknown_tool(struct mcp_call *c, const char *name)
{
	struct mcp_server *srv = c->srv;
	struct buf b;
	char *out;

	buf_init(&b, 2048);
	for (size_t i = 0, n = 0; i < srv->n_tools; i++) {
		if (srv->tools[i]->ui_only)
			continue;
		if (buf_printf(&b, "%s%s", n++ ? ", " : "",
		               srv->tools[i]->name) < 0)
			break;
	}
	out =
	    fail(c, RPC_INVALID_PARAMS, "unknown tool '%.100s'; available: %s",
	         name, b.data ? b.data : "none");
	buf_finish(&b);
	return out;
}

/*
 * A tool that runs only as a task, called by a client that cannot have
 * one: MissingRequiredClientCapabilityError under 2026-07-28.
 */
static char *task_required(struct mcp_call *c)
{
	if (!c->sess->stateless)
		return fail(c, RPC_INVALID_REQUEST,
		            "tool '%.100s' runs only as a task, which needs "
		            "protocol " MCP_MODERN_VERSION
		            " with the tasks extension",
		            c->tool->name);
	c->answer_code = RPC_MISSING_CAPABILITY;
	return rpc_error(c->id_raw, RPC_MISSING_CAPABILITY,
	                 "this tool runs only as a task: declare the client "
	                 "capability extensions["
	                 " TASKS_EXTENSION "
	                 "] in "
	                 "this request's _meta",
	                 mcp_revision_missing(TASKS_EXTENSION));
}

/*
 * tools/call: validates, then hands the call to a thread. Returns true when
 * the call was handed over (the thread answers), false when *out holds the
 * answer now.
 */
static bool do_tools_call(struct mcp_call *c, char **out)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	pthread_attr_t attr;
	pthread_t th;
	int r;

	if (!cJSON_IsString(name)) {
		*out =
		    fail(c, RPC_INVALID_PARAMS,
		         "tools/call needs params.name, the tool's name (see "
		         "tools/list)");
		return false;
	}
	c->tool = find_tool(srv, name->valuestring, NULL);
	if (!c->tool) {
		*out = unknown_tool(c, name->valuestring);
		return false;
	}
	if (c->tool->ui_only &&
	    !mcp_revision_client_has_ui(c->sess->client_caps)) {
		*out = fail(c, RPC_INVALID_PARAMS,
		            "tool '%s' serves the run viewer (an MCP App) "
		            "and is called by the view through a host that "
		            "declares the " MCP_UI_EXTENSION
		            " extension; call run_code or list_files instead",
		            c->tool->name);
		return false;
	}
	if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
		*out = fail(c, RPC_INVALID_PARAMS,
		            "tools/call params.arguments must be an object");
		return false;
	}
	if (c->tool->tasks == MCP_TASK_REQUIRED &&
	    !(c->sess->stateless && srv->tasks &&
	      mcp_revision_client_has(c->sess->client_caps, TASKS_EXTENSION))) {
		*out = task_required(c);
		return false;
	}
	if ((*out = mcp_input_load(c)))
		return false;
	mcp_lock(srv);
	if (srv->draining) {
		mcp_unlock(srv);
		*out = answer(c, mcp_text_result(
		                     "The server is shutting down and takes no "
		                     "new work. Retry in a minute; it will be "
		                     "back.",
		                     true));
		return false;
	}
	srv->calls_running++;
	srv->calls_total++;
	mcp_unlock(srv);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TOOL_THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&th, &attr, tool_thread, c);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		mcp_lock(srv);
		srv->calls_running--;
		pthread_cond_broadcast(&srv->drain_cond);
		mcp_unlock(srv);
		errno = r;
		log_warn("cannot start a thread for tools/call");
		*out = fail(c, RPC_INTERNAL_ERROR,
		            "the server is out of resources; retry shortly");
		return false;
	}
	return true;
}

static char *do_resources_list(struct mcp_call *c, bool templates)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(
	                     r, templates ? "resourceTemplates" : "resources")
	               : NULL;

	if (!arr) {
		cJSON_Delete(r);
		return answer(c, NULL);
	}
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];

		if (templates && p->templates)
			p->templates(p->data, arr);
		else if (!templates && p->list)
			p->list(p->data, c, arr);
	}
	return answer(c, r);
}

/*
 * An unknown resource: -32002 up to 2025-11-25; -32602 with the URI in
 * data from 2026-07-28 (SEP-2164).
 */
static char *not_found(struct mcp_call *c, const char *uri, const char *why)
{
	char msg[512];
	cJSON *data;

	snprintf(msg, sizeof(msg), "resource not found: %.300s%s%s", uri,
	         why[0] ? "; " : "", why);
	if (!c->sess->stateless) {
		c->answer_code = RPC_RESOURCE_NOT_FOUND;
		return rpc_error(c->id_raw, RPC_RESOURCE_NOT_FOUND, msg, NULL);
	}
	data = cJSON_CreateObject();
	cJSON_AddStringToObject(data, "uri", uri);
	c->answer_code = RPC_INVALID_PARAMS;
	return rpc_error(c->id_raw, RPC_INVALID_PARAMS, msg, data);
}

static char *do_resources_read(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	char err[512] = "", *out;

	if (!cJSON_IsString(uri))
		return fail(c, RPC_INVALID_PARAMS,
		            "resources/read needs params.uri");
	if ((out = mcp_input_load(c)))
		return out;
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];
		cJSON *contents = NULL, *r;
		int rc;

		if (!p->read)
			continue;
		rc = p->read(p->data, c, uri->valuestring, &contents, err,
		             sizeof(err));
		if (rc == -ENOENT)
			continue;
		if ((out = mcp_input_answer(c))) {
			cJSON_Delete(contents);
			return out;
		}
		if (rc < 0)
			return fail(c,
			            rc == -EINVAL ? RPC_INVALID_PARAMS
			                          : RPC_INTERNAL_ERROR,
			            "%s",
			            err[0] ? err : "cannot read the resource");
		r = cJSON_CreateObject();
		if (!r) {
			cJSON_Delete(contents);
			return answer(c, NULL);
		}
		cJSON_AddItemToObject(r, "contents", contents);
		return answer(c, r);
	}
	return not_found(c, uri->valuestring, err);
}

/*
 * resources/subscribe and unsubscribe: accepted for any URI and answered
 * with an empty result. No resource this server offers changes on its own
 * (workspace files change only through the tools, and the fixtures are
 * static), so no notifications/resources/updated is ever due and nothing
 * needs recording.
 */
static char *do_subscribe(struct mcp_call *c, bool on)
{
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");

	if (!cJSON_IsString(uri) || !uri->valuestring[0] ||
	    strlen(uri->valuestring) > 2048)
		return fail(c, RPC_INVALID_PARAMS,
		            "resources/%s needs params.uri",
		            on ? "subscribe" : "unsubscribe");
	return answer(c, cJSON_CreateObject());
}

static char *do_prompts_list(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "prompts") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		return answer(c, NULL);
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
	return answer(c, r);
}

static char *do_prompts_get(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	char err[512] = "", *out;

	if (!cJSON_IsString(name))
		return fail(c, RPC_INVALID_PARAMS,
		            "prompts/get needs params.name");
	if ((out = mcp_input_load(c)))
		return out;
	for (size_t i = 0; i < srv->n_prompts; i++) {
		const struct prompt_impl *p = srv->prompts[i];
		cJSON *r;

		if (strcmp(p->name, name->valuestring) != 0)
			continue;
		r = p->get(p->data, c, args, err, sizeof(err));
		if ((out = mcp_input_answer(c))) {
			cJSON_Delete(r);
			return out;
		}
		if (!r)
			return fail(c, RPC_INVALID_PARAMS, "%s",
			            err[0] ? err : "cannot build the prompt");
		return answer(c, r);
	}
	return fail(c, RPC_INVALID_PARAMS, "unknown prompt '%.100s'",
	            name->valuestring);
}

static char *do_complete(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(c->params, "ref");
	const cJSON *arg =
	    cJSON_GetObjectItemCaseSensitive(c->params, "argument");
	cJSON *values = NULL, *r, *comp;

	if (!cJSON_IsObject(ref) || !cJSON_IsObject(arg))
		return fail(c, RPC_INVALID_PARAMS,
		            "completion/complete needs params.ref and "
		            "params.argument");
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
		return answer(c, NULL);
	}
	int n = cJSON_GetArraySize(values);

	cJSON_AddItemToObject(comp, "values", values);
	cJSON_AddNumberToObject(comp, "total", n);
	cJSON_AddFalseToObject(comp, "hasMore");
	return answer(c, r);
}

static char *do_set_level(struct mcp_call *c)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(c->params, "level");

	for (size_t i = 0; cJSON_IsString(lv) && i < 8; i++) {
		if (strcmp(lv->valuestring, mcp_level_names[i]) == 0) {
			mcp_lock(c->srv);
			c->sess->log_level = (enum mcp_log_level)i;
			mcp_unlock(c->srv);
			return answer(c, cJSON_CreateObject());
		}
	}
	return fail(c, RPC_INVALID_PARAMS,
	            "params.level must be one of debug, info, notice, warning, "
	            "error, critical, alert, emergency");
}

static cJSON *initialize_result(struct mcp_server *srv, const char *version)
{
	cJSON *r = cJSON_CreateObject();

	if (!r)
		return NULL;
	cJSON_AddStringToObject(r, "protocolVersion", version);
	cJSON_AddItemToObject(r, "capabilities",
	                      mcp_revision_capabilities(srv, false));
	cJSON_AddItemToObject(r, "serverInfo", mcp_revision_server_info());
	if (srv->instructions)
		cJSON_AddStringToObject(r, "instructions", srv->instructions);
	return r;
}

/* server/discover (2026-07-28): versions, capabilities, instructions. */
static char *do_discover(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *v = cJSON_AddArrayToObject(r, "supportedVersions");

	cJSON_AddItemToArray(v, cJSON_CreateString(MCP_MODERN_VERSION));
	cJSON_AddItemToObject(r, "capabilities",
	                      mcp_revision_capabilities(srv, true));
	if (srv->instructions)
		cJSON_AddStringToObject(r, "instructions", srv->instructions);
	return answer(c, r);
}

/* Writes the log line that says who started a session. */
static void log_session(const struct session *s, const cJSON *ci,
                        const char *version)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(ci, "name");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(ci, "version");
	char fp[13];

	log_fingerprint(s->id, strlen(s->id), fp);
	log_info("session %s: tenant %s, client %.64s %.32s, protocol %s%s", fp,
	         s->tenant, cJSON_IsString(n) ? n->valuestring : "?",
	         cJSON_IsString(ver) ? ver->valuestring : "?", version,
	         s->legacy ? " (HTTP+SSE)" : "");
}

/* initialize on a session that exists (new, or legacy). Lock NOT held. */
static char *do_initialize(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	const cJSON *pv =
	    cJSON_GetObjectItemCaseSensitive(c->params, "protocolVersion");
	const cJSON *caps =
	    cJSON_GetObjectItemCaseSensitive(c->params, "capabilities");
	cJSON *client_caps, *old_caps;
	const char *v;

	if (!cJSON_IsString(pv))
		return fail(c, RPC_INVALID_PARAMS,
		            "initialize needs params.protocolVersion, e.g. "
		            "\"2025-11-25\"");
	v = mcp_version_supported(pv->valuestring) ? pv->valuestring
	                                           : mcp_protocol_versions[0];
	client_caps = cJSON_IsObject(caps) ? cJSON_Duplicate(caps, true)
	                                   : cJSON_CreateObject();
	mcp_lock(srv);
	if (s->initialized) {
		mcp_unlock(srv);
		cJSON_Delete(client_caps);
		return fail(c, RPC_INVALID_REQUEST,
		            "this session is already initialized; start a new "
		            "session (POST initialize without Mcp-Session-Id)");
	}
	s->initialized = true;
	snprintf(s->version, sizeof(s->version), "%s", v);
	old_caps = s->client_caps;
	s->client_caps = client_caps;
	mcp_unlock(srv);
	cJSON_Delete(old_caps);
	log_session(
	    s, cJSON_GetObjectItemCaseSensitive(c->params, "clientInfo"), v);
	return answer(c, initialize_result(srv, v));
}

/* The answer to a request that no tool thread takes over. */
static char *answer_request(struct mcp_call *c)
{
	const char *m = c->method;

	if (!mcp_revision_method_allowed(c->sess, m))
		goto unknown;
	if (strcmp(m, "initialize") == 0)
		return do_initialize(c);
	if (strcmp(m, "server/discover") == 0)
		return do_discover(c);
	if (strcmp(m, "ping") == 0)
		return answer(c, cJSON_CreateObject());
	if (strcmp(m, "tools/list") == 0)
		return do_tools_list(c);
	if (strcmp(m, "resources/list") == 0)
		return do_resources_list(c, false);
	if (strcmp(m, "resources/templates/list") == 0)
		return do_resources_list(c, true);
	if (strcmp(m, "resources/read") == 0)
		return do_resources_read(c);
	if (strcmp(m, "resources/subscribe") == 0)
		return do_subscribe(c, true);
	if (strcmp(m, "resources/unsubscribe") == 0)
		return do_subscribe(c, false);
	if (strcmp(m, "prompts/list") == 0)
		return do_prompts_list(c);
	if (strcmp(m, "prompts/get") == 0)
		return do_prompts_get(c);
	if (strcmp(m, "completion/complete") == 0)
		return do_complete(c);
	if (strcmp(m, "logging/setLevel") == 0)
		return do_set_level(c);
	if (strcmp(m, "subscriptions/listen") == 0)
		return mcp_listen_open(c);
	if (strcmp(m, "tasks/get") == 0)
		return mcp_task_get(c);
	if (strcmp(m, "tasks/update") == 0)
		return mcp_task_update(c);
	if (strcmp(m, "tasks/cancel") == 0)
		return mcp_task_cancel(c);
unknown:
	return fail(c, RPC_METHOD_NOT_FOUND,
	            "method '%.100s' is not supported by this server%s", m,
	            c->sess->stateless &&
	                    !mcp_revision_method_allowed(c->sess, m)
	                ? " in protocol " MCP_MODERN_VERSION
	                : "");
}

/*
 * Runs a request: a tools/call continues on a thread of its own, which
 * answers; anything else is answered here.
 */
static void dispatch_request(struct mcp_call *c)
{
	char *out = NULL;

	if (strcmp(c->method, "tools/call") == 0) {
		if (do_tools_call(c, &out))
			return;
	} else {
		out = answer_request(c);
	}
	mcp_call_finish(c, out);
}

/* A notification from the client. Lock NOT held. */
static void handle_notification(struct mcp_server *srv, struct session *s,
                                const struct rpc_msg *m)
{
	const cJSON *rid;
	char *key;

	/* initialized, roots/list_changed, progress: nothing to do. */
	if (strcmp(m->method, "notifications/cancelled") != 0)
		return;
	rid = m->params
	          ? cJSON_GetObjectItemCaseSensitive(m->params, "requestId")
	          : NULL;
	key = rid ? rpc_id_key(rid) : NULL;
	if (!key)
		return;
	mcp_lock(srv);
	for (struct mcp_call *c = s->calls; c; c = c->next) {
		if (strcmp(c->id_key, key) == 0) {
			if (strcmp(c->method, "initialize") != 0)
				mcp_call_cancel_locked(c);
			break;
		}
	}
	/* The call's cancel hook, if it has one, runs here. */
	mcp_unlock(srv);
	free(key);
}

/* ------------------------------------------------------------------ */
/* batches */

/* Queues an error answer (taken over) on st; NULL-safe in both. */
static void push_answer(struct mcp_server *srv, struct stream *st, char *json,
                        int code)
{
	struct mcp_msg *msg = mcp_msg_new(json);

	if (!msg || !st) {
		mcp_msg_unref(msg);
		return;
	}
	msg->code = code;
	mcp_lock(srv);
	/* A stream that ended (its session was deleted) takes no more. */
	if (mcp_events_push(st, msg, true) < 0)
		log_debug("an error response found its stream ended");
	mcp_unlock(srv);
	mcp_msg_unref(msg);
}

/* A response from the client: handed to the request waiting for it. */
static void handle_response(struct mcp_server *srv, struct session *s,
                            const struct rpc_msg *m)
{
	cJSON *res = cJSON_GetObjectItemCaseSensitive(m->obj, "result");
	cJSON *err = cJSON_GetObjectItemCaseSensitive(m->obj, "error");
	bool taken;

	/* Copied before the lock: a client's answer may be large. */
	res = res ? cJSON_Duplicate(res, true) : NULL;
	err = err ? cJSON_Duplicate(err, true) : NULL;
	if (!res && !err)
		err = cJSON_CreateString("empty response");
	mcp_lock(srv);
	taken = mcp_deliver_response(s, m->id_key, res, err);
	mcp_unlock(srv);
	if (!taken) {
		cJSON_Delete(res);
		cJSON_Delete(err);
		log_debug("response to an unknown or expired request ignored");
	}
}

/*
 * Starts a request: a call attached to s and st, or an error answer when
 * the session has too many in flight or one with the same id.
 */
static void handle_request(struct mcp_server *srv, struct session *s,
                           struct stream *st, const struct rpc_msg *m)
{
	struct mcp_call *c = mcp_call_create(srv, m), *o = NULL;
	bool full;

	if (!c) {
		push_answer(
		    srv, st,
		    rpc_errorf(m->id_raw, RPC_INTERNAL_ERROR, "out of memory"),
		    RPC_INTERNAL_ERROR);
		return;
	}
	mcp_lock(srv);
	full = s->n_calls >= srv->cfg->max_inflight_per_session;
	for (o = full ? NULL : s->calls; o; o = o->next) {
		if (strcmp(o->id_key, m->id_key) == 0)
			break;
	}
	if (!full && !o)
		mcp_call_attach(c, s, st);
	mcp_unlock(srv);
	if (!full && !o) {
		dispatch_request(c);
		return;
	}
	mcp_call_discard(c);
	if (full)
		push_answer(srv, st,
		            rpc_errorf(m->id_raw, RPC_INTERNAL_ERROR,
		                       "too many requests in flight on this "
		                       "session; wait for some to finish"),
		            RPC_INTERNAL_ERROR);
	else
		push_answer(srv, st,
		            rpc_errorf(m->id_raw, RPC_INVALID_REQUEST,
		                       "a request with this id is already in "
		                       "flight"),
		            RPC_INVALID_REQUEST);
}

/*
 * Hands each message of a parsed body to its handler. Requests are
 * attached to st (may be NULL only when there are none). Lock NOT held.
 */
void mcp_process_batch(struct mcp_server *srv, struct session *s,
                       struct stream *st, struct rpc_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		const struct rpc_msg *m = &b->msgs[i];

		switch (m->kind) {
		case RPC_KIND_RESPONSE:
			handle_response(srv, s, m);
			break;
		case RPC_KIND_NOTIFICATION:
			handle_notification(srv, s, m);
			break;
		case RPC_KIND_INVALID:
			/* JSON-RPC 2.0 section 6: answered, with id null if
			 * unknown. */
			push_answer(srv, st,
			            rpc_error(m->id_raw, m->invalid_code,
			                      m->invalid_msg, NULL),
			            m->invalid_code);
			break;
		case RPC_KIND_REQUEST:
			handle_request(srv, s, st, m);
			break;
		}
	}
}
