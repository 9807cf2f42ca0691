/* SPDX-License-Identifier: MIT */
/*
 * test_mcp: the MCP core through its public API only (mcp.h), as the HTTP
 * transport drives it: mcp_http_post/get/delete with the headers' values,
 * responses read as JSON bodies or drained from event streams with
 * mcp_stream_read. Test tools registered with mcp_server_add_tool stand in
 * for real ones: one echoes, one blocks until the test releases it (or its
 * cancel hook runs), one sends progress and log notifications, one asks the
 * client a question. Covered: initialize and session ids, version
 * negotiation and the MCP-Protocol-Version header, unknown and other
 * tenants' sessions, ping, batches, tools/list and tools/call,
 * notifications on the SSE stream, notifications/cancelled, DELETE,
 * resumption with Last-Event-ID, the standalone GET stream and broadcasts,
 * server-to-client requests, the legacy HTTP+SSE transport, drain, the
 * per-tenant session cap and idle expiry (driven by calling the sweep job).
 * Every wait is bounded.
 */
#include <limits.h>
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "tap.h"
#include "util/buf.h"
#include "util/log.h"

#define WAIT_MS 10000 /* liveness bound of every wait */

/* JSON-RPC error codes (JSON-RPC 2.0, section 5.1). */
#define E_INVALID_REQUEST -32600
#define E_METHOD_NOT_FOUND -32601
#define E_INVALID_PARAMS -32602

/* ------------------------------------------------------------------ */
/* the test tools */

/* What the blocking tool and its cancel hook share with the test. */
struct gate {
	sem_t started;  /* posted when a blocking call is waiting */
	sem_t wake;     /* posted by gate_release and by the cancel hook */
	sem_t finished; /* posted when a blocking call is about to return */
	atomic_int cancels;
	atomic_int saw_cancelled; /* mcp_call_cancelled() was true at the end */
};

static struct gate gate;

static bool sem_wait_ms(sem_t *s, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (;;) {
		if (sem_timedwait(s, &ts) == 0)
			return true;
		if (errno != EINTR)
			return false;
	}
}

static void sem_drain(sem_t *s)
{
	while (sem_trywait(s) == 0)
		;
}

static void gate_reset(void)
{
	sem_drain(&gate.started);
	sem_drain(&gate.wake);
	sem_drain(&gate.finished);
	atomic_store(&gate.cancels, 0);
	atomic_store(&gate.saw_cancelled, 0);
}

/* Runs under the server's lock: must not block, must not call mcp_*. */
static void gate_cancel_hook(void *arg)
{
	struct gate *g = arg;

	atomic_fetch_add(&g->cancels, 1);
	sem_post(&g->wake);
}

static cJSON *echo_call(void *data, struct mcp_call *call, const cJSON *args)
{
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(args, "text");

	(void)data;
	return mcp_text_resultf(
	    false, "%s|%s|%s", cJSON_IsString(text) ? text->valuestring : "",
	    mcp_call_tenant(call), mcp_call_protocol_version(call));
}

/*
 * Sends progress 0 (when asked for), then waits for release or cancel.
 * With "late": true it first waits, without a hook, until the call is
 * cancelled, and only then registers its hook (which must run at once).
 */
static cJSON *block_call(void *data, struct mcp_call *call, const cJSON *args)
{
	struct gate *g = data;
	bool released;
	bool cancelled;

	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "late"))) {
		sem_post(&g->started);
		for (int i = 0; i < WAIT_MS / 10 && !mcp_call_cancelled(call);
		     i++)
			usleep(10000);
	}
	mcp_call_on_cancel(call, gate_cancel_hook, g);
	(void)mcp_call_progress(call, 0, -1, "waiting");
	sem_post(&g->started);
	released = sem_wait_ms(&g->wake, 3 * WAIT_MS);
	/* After this returns the hook is not running and will not run. */
	mcp_call_on_cancel(call, NULL, NULL);
	cancelled = mcp_call_cancelled(call);
	atomic_store(&g->saw_cancelled, cancelled);
	sem_post(&g->finished);
	return mcp_text_result(cancelled  ? "cancelled"
	                       : released ? "released"
	                                  : "nobody released me",
	                       !released);
}

static cJSON *notify_call(void *data, struct mcp_call *call, const cJSON *args)
{
	bool has = mcp_call_has_progress(call);
	int p1, p2;

	(void)data;
	(void)args;
	p1 = mcp_call_progress(call, 1, 3, "one");
	p2 = mcp_call_progress(call, 2, 3, NULL);
	(void)mcp_call_log(call, MCP_LOG_DEBUG, "test",
	                   cJSON_CreateString("a debug line"));
	(void)mcp_call_log(call, MCP_LOG_WARNING, "test",
	                   cJSON_CreateString("a warning line"));
	return mcp_text_resultf(false, "progress %s %d %d", has ? "yes" : "no",
	                        p1, p2);
}

/* Asks the client for its roots and reports what came back. */
static cJSON *ask_call(void *data, struct mcp_call *call, const cJSON *args)
{
	cJSON *res = NULL, *err = NULL;
	int r, n;

	(void)data;
	(void)args;
	r = mcp_call_request(call, "roots/list", NULL, WAIT_MS, &res, &err);
	n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "roots"));
	cJSON_Delete(res);
	cJSON_Delete(err);
	return mcp_text_resultf(false, "rc %d roots %d", r, n);
}

static const struct tool_impl tool_echo = {
    .name = "echo",
    .title = "Echo",
    .description = "Returns its text, the tenant and the protocol version",
    .input_schema = "{\"type\":\"object\",\"properties\":{\"text\":"
                    "{\"type\":\"string\"}}}",
    .output_schema = NULL,
    .read_only = true,
    .idempotent = true,
    .call = echo_call,
};

static const struct tool_impl tool_block = {
    .name = "block",
    .description = "Waits until the test releases it or it is cancelled",
    .input_schema = "{\"type\":\"object\"}",
    .output_schema = "{\"type\":\"object\",\"properties\":{}}",
    .destructive = true,
    .open_world = true,
    .call = block_call,
    .data = &gate,
};

static const struct tool_impl tool_notify = {
    .name = "notify",
    .description = "Sends progress and log notifications",
    .input_schema = "{\"type\":\"object\"}",
    .call = notify_call,
};

static const struct tool_impl tool_ask = {
    .name = "ask",
    .description = "Asks the client for its roots",
    .input_schema = "{\"type\":\"object\"}",
    .call = ask_call,
};

/* Not registered: its schema is not an object. */
static const struct tool_impl tool_bad_schema = {
    .name = "bad_schema",
    .description = "never listed",
    .input_schema = "[1,2]",
    .call = echo_call,
};

/* ------------------------------------------------------------------ */
/* the transport's side */

typedef void (*http_fn)(struct mcp_server *, const struct mcp_http_req *,
                        struct mcp_http_resp *);

struct reply {
	int status;
	char sid[80];
	cJSON *json;               /* the parsed body, or NULL */
	struct mcp_stream *stream; /* owned: release with reply_finish */
	unsigned retry_after;
};

static void reply_finish(struct reply *r)
{
	cJSON_Delete(r->json);
	mcp_stream_release(r->stream);
	memset(r, 0, sizeof(*r));
}

struct req {
	const char *tenant;
	const char *sid;
	const char *version; /* MCP-Protocol-Version */
	const char *last_event_id;
};

static void call_http(struct mcp_server *s, http_fn fn, const struct req *q,
                      const char *body, struct reply *out)
{
	struct mcp_http_req req = {
	    .tenant = q->tenant ? q->tenant : "alice",
	    .session_id = q->sid,
	    .protocol_version = q->version,
	    .last_event_id = q->last_event_id,
	    .body = body,
	    .body_len = body ? strlen(body) : 0,
	};
	struct mcp_http_resp resp;

	memset(out, 0, sizeof(*out));
	fn(s, &req, &resp);
	out->status = resp.status;
	snprintf(out->sid, sizeof(out->sid), "%s", resp.session_id);
	out->json = resp.body ? cJSON_Parse(resp.body) : NULL;
	out->stream = resp.stream;
	out->retry_after = resp.retry_after;
	resp.stream = NULL;
	mcp_http_resp_finish(&resp);
}

/* One SSE event: its id ("" for none), type ("" for message) and data. */
struct sse_event {
	char id[48];
	char type[32];
	char data[1024]; /* the first data line, clipped */
	cJSON *msg;      /* data parsed as JSON, or NULL */
};

/* Drains a reply's stream event by event; text holds what is unparsed. */
struct sse {
	struct mcp_stream *st;
	struct buf text;
	bool ended;
};

static void sse_init(struct sse *s, struct mcp_stream *st)
{
	s->st = st;
	buf_init(&s->text, 0);
	s->ended = false;
}

static void sse_finish(struct sse *s)
{
	buf_finish(&s->text);
}

static void parse_event(char *rec, struct sse_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	for (char *line = rec; line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (strncmp(line, "id: ", 4) == 0)
			snprintf(ev->id, sizeof(ev->id), "%s", line + 4);
		else if (strncmp(line, "event: ", 7) == 0)
			snprintf(ev->type, sizeof(ev->type), "%s", line + 7);
		else if (strncmp(line, "data: ", 6) == 0 && !ev->data[0])
			snprintf(ev->data, sizeof(ev->data), "%s", line + 6);
		line = nl ? nl + 1 : NULL;
	}
	if (ev->data[0])
		ev->msg = cJSON_Parse(ev->data);
}

/*
 * The next event of the stream: 1 with *ev filled (free ev->msg), 0 at the
 * end of the stream, -1 when nothing came within ms.
 */
static int sse_next(struct sse *s, struct sse_event *ev, unsigned ms)
{
	struct timespec t0, now;
	char chunk[4096];

	memset(ev, 0, sizeof(*ev));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char *end = s->text.data ? strstr(s->text.data, "\n\n") : NULL;
		ssize_t n;

		if (end) {
			size_t len = (size_t)(end - s->text.data) + 2;

			end[1] = '\0';
			parse_event(s->text.data, ev);
			buf_consume(&s->text, len);
			return 1;
		}
		if (s->ended || !s->st)
			return 0;
		n = mcp_stream_read(s->st, chunk, sizeof(chunk), 100);
		if (n < 0) {
			s->ended = true;
			continue;
		}
		if (n > 0 && buf_append(&s->text, chunk, (size_t)n) < 0)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 +
		        (now.tv_nsec - t0.tv_nsec) / 1000000 >
		    (long)ms)
			return -1;
	}
}

/*
 * Every JSON-RPC message of a reply, in order, as a JSON array (caller
 * owns): the body (an object or a batch's array), or the stream's events
 * drained to its end. Sets *ended to whether the stream ended in time.
 */
static cJSON *messages_of(struct reply *r, bool *ended)
{
	cJSON *all = cJSON_CreateArray();
	struct sse s;
	struct sse_event ev;
	int k;

	*ended = true;
	if (cJSON_IsArray(r->json)) {
		const cJSON *m;

		cJSON_ArrayForEach (m, r->json)
			cJSON_AddItemToArray(all, cJSON_Duplicate(m, true));
	} else if (r->json) {
		cJSON_AddItemToArray(all, cJSON_Duplicate(r->json, true));
	}
	if (!r->stream)
		return all;
	sse_init(&s, r->stream);
	while ((k = sse_next(&s, &ev, WAIT_MS)) == 1) {
		if (ev.msg)
			cJSON_AddItemToArray(all, ev.msg);
	}
	*ended = k == 0;
	sse_finish(&s);
	return all;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* The response with the given integer id in msgs (borrowed), or NULL. */
static const cJSON *response_with_id(const cJSON *msgs, int id)
{
	const cJSON *m;

	cJSON_ArrayForEach (m, msgs) {
		const cJSON *mid = get(m, "id");

		if (!get(m, "method") && cJSON_IsNumber(mid) &&
		    mid->valueint == id)
			return m;
	}
	return NULL;
}

/* The n-th message (from 0) with the given method, or NULL. */
static const cJSON *nth_method(const cJSON *msgs, const char *method, int n)
{
	const cJSON *m;

	cJSON_ArrayForEach (m, msgs) {
		if (cJSON_IsString(get(m, "method")) &&
		    strcmp(get(m, "method")->valuestring, method) == 0 &&
		    n-- == 0)
			return m;
	}
	return NULL;
}

static int count_method(const cJSON *msgs, const char *method)
{
	int n = 0;

	while (nth_method(msgs, method, n))
		n++;
	return n;
}

static int error_code(const cJSON *m)
{
	const cJSON *c = get(get(m, "error"), "code");

	return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const char *error_message(const cJSON *m)
{
	const char *s = cJSON_GetStringValue(get(get(m, "error"), "message"));

	return s ? s : "";
}

/* The text of a CallToolResult's first content item, or "". */
static const char *result_text(const cJSON *m)
{
	const char *s = cJSON_GetStringValue(get(
	    cJSON_GetArrayItem(get(get(m, "result"), "content"), 0), "text"));

	return s ? s : "";
}

static bool result_is_error(const cJSON *m)
{
	return cJSON_IsTrue(get(get(m, "result"), "isError"));
}

static struct mcp_stats stats_of(struct mcp_server *s)
{
	struct mcp_stats st;

	mcp_server_stats(s, &st);
	return st;
}

/* Polls until the server has no call running; returns how many still do. */
static unsigned wait_calls_done(struct mcp_server *s)
{
	unsigned n = stats_of(s).calls_running;

	for (int i = 0; i < WAIT_MS / 10 && n; i++) {
		usleep(10000);
		n = stats_of(s).calls_running;
	}
	return n;
}

static bool is_hex_id(const char *s)
{
	size_t n = strlen(s);

	if (n < 32)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* sessions */

/*
 * Initializes a session of tenant asking for version; sid receives its id
 * (empty on failure). Sends notifications/initialized too.
 */
static void open_session(struct mcp_server *s, const char *tenant,
                         const char *version, char sid[80])
{
	char body[512];
	struct reply r;

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
	         "\"params\":{\"protocolVersion\":\"%s\",\"capabilities\":"
	         "{\"roots\":{}},\"clientInfo\":{\"name\":\"t\","
	         "\"version\":\"1\"}}}",
	         version);
	call_http(s, mcp_http_post, &(struct req){.tenant = tenant}, body, &r);
	snprintf(sid, 80, "%s", r.status == 200 ? r.sid : "");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.tenant = tenant, .sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"method\":"
	          "\"notifications/initialized\"}",
	          &r);
	reply_finish(&r);
}

static void test_initialize(struct mcp_server *s)
{
	struct reply r;
	const cJSON *res;
	char a[80], b[80];

	call_http(s, mcp_http_post, &(struct req){0},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"protocolVersion\":\"2025-06-18\","
	          "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
	          "\"version\":\"1\"}}}",
	          &r);
	is_int(r.status, 200, "initialize: 200");
	ok(r.stream == NULL && r.json != NULL,
	   "initialize: answered as plain JSON");
	ok(is_hex_id(r.sid), "initialize: a session id of hex digits (%s)",
	   r.sid);
	res = get(r.json, "result");
	is_str(cJSON_GetStringValue(get(res, "protocolVersion")), "2025-06-18",
	       "a supported version asked for is granted");
	is_str(cJSON_GetStringValue(get(get(res, "serverInfo"), "name")),
	       "mcp-sandboxd", "serverInfo.name");
	ok(cJSON_IsTrue(
	       get(get(get(res, "capabilities"), "tools"), "listChanged")),
	   "capabilities.tools.listChanged");
	is_str(cJSON_GetStringValue(get(res, "instructions")),
	       "test instructions", "instructions");
	snprintf(a, sizeof(a), "%s", r.sid);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){0},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"protocolVersion\":\"1999-01-01\","
	          "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
	          "\"version\":\"1\"}}}",
	          &r);
	is_str(
	    cJSON_GetStringValue(get(get(r.json, "result"), "protocolVersion")),
	    mcp_protocol_versions[0],
	    "an unknown version asked for: the newest is offered");
	snprintf(b, sizeof(b), "%s", r.sid);
	ok(b[0] && strcmp(a, b) != 0, "each initialize: a new session id");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){0},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"capabilities\":{}}}",
	          &r);
	is_int(error_code(r.json), E_INVALID_PARAMS,
	       "initialize without protocolVersion: -32602");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = a},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"protocolVersion\":\"2025-06-18\"}}",
	          &r);
	is_int(r.status, 400, "initialize with an Mcp-Session-Id: 400");
	ok(strstr(error_message(r.json), "initialized once") != NULL,
	   "and the message says why: %s", error_message(r.json));
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){0},
	          "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"protocolVersion\":\"2025-03-26\"}}]",
	          &r);
	is_int(r.status, 400, "initialize in a batch: 400");
	ok(r.sid[0] == '\0', "and no session");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){0},
	          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}", &r);
	is_int(r.status, 400, "a request without Mcp-Session-Id: 400");
	ok(strstr(error_message(r.json), "Mcp-Session-Id") != NULL,
	   "naming the header: %s", error_message(r.json));
	reply_finish(&r);

	call_http(s, mcp_http_delete, &(struct req){.sid = a}, NULL, &r);
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = b}, NULL, &r);
	reply_finish(&r);
}

static void test_unknown_and_foreign_sessions(struct mcp_server *s)
{
	static const char ping[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}";
	struct reply r;
	char sid[80];
	const char *bogus =
	    "0000000000000000000000000000000000000000000000000000000000000000";

	open_session(s, "alice", "2025-11-25", sid);
	ok(sid[0] != '\0', "alice has a session");

	call_http(s, mcp_http_post, &(struct req){.sid = bogus}, ping, &r);
	is_int(r.status, 404, "POST with an unknown session: 404");
	ok(strstr(error_message(r.json), "initialize") != NULL,
	   "telling the client to initialize again: %s", error_message(r.json));
	reply_finish(&r);
	call_http(s, mcp_http_get, &(struct req){.sid = bogus}, NULL, &r);
	is_int(r.status, 404, "GET with an unknown session: 404");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = bogus}, NULL, &r);
	is_int(r.status, 404, "DELETE of an unknown session: 404");
	reply_finish(&r);

	/* Another tenant's session id is as good as unknown. */
	call_http(s, mcp_http_post, &(struct req){.tenant = "bob", .sid = sid},
	          ping, &r);
	is_int(r.status, 404, "bob POSTs on alice's session: 404");
	reply_finish(&r);
	call_http(s, mcp_http_get, &(struct req){.tenant = "bob", .sid = sid},
	          NULL, &r);
	is_int(r.status, 404, "bob GETs alice's session: 404");
	ok(r.stream == NULL, "and gets no stream");
	reply_finish(&r);
	call_http(s, mcp_http_delete,
	          &(struct req){.tenant = "bob", .sid = sid}, NULL, &r);
	is_int(r.status, 404, "bob DELETEs alice's session: 404");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid}, ping, &r);
	is_int(r.status, 200, "alice's session survived bob's DELETE");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_version_header(struct mcp_server *s)
{
	static const char ping[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}";
	struct reply r;
	char sid[80];

	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post,
	          &(struct req){.sid = sid, .version = "2099-01-01"}, ping, &r);
	is_int(r.status, 400, "POST with an unsupported version header: 400");
	ok(strstr(error_message(r.json), "MCP-Protocol-Version") &&
	       strstr(error_message(r.json), "2025-11-25"),
	   "naming the header and the supported versions: %s",
	   error_message(r.json));
	reply_finish(&r);
	call_http(s, mcp_http_get,
	          &(struct req){.sid = sid, .version = "2099-01-01"}, NULL, &r);
	is_int(r.status, 400, "GET with an unsupported version header: 400");
	ok(r.stream == NULL, "and no stream");
	reply_finish(&r);
	call_http(s, mcp_http_delete,
	          &(struct req){.sid = sid, .version = "bogus"}, NULL, &r);
	is_int(r.status, 400, "DELETE with an unsupported version header: 400");
	reply_finish(&r);

	call_http(s, mcp_http_post,
	          &(struct req){.sid = sid, .version = "2025-11-25"}, ping, &r);
	is_int(r.status, 200, "the negotiated version in the header: 200");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.sid = sid}, ping, &r);
	is_int(r.status, 200, "no version header: 200");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	is_int(r.status, 200, "the refused DELETE left the session; now 200");
	reply_finish(&r);
}

static void test_ping_and_methods(struct mcp_server *s)
{
	struct reply r;
	char sid[80];

	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":\"p-1\",\"method\":\"ping\"}",
	          &r);
	is_int(r.status, 200, "ping: 200");
	ok(r.json && cJSON_IsObject(get(r.json, "result")) &&
	       get(r.json, "result")->child == NULL,
	   "ping: an empty result");
	is_str(cJSON_GetStringValue(get(r.json, "id")), "p-1",
	       "ping: a string id comes back");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"nope/nope\"}",
	          &r);
	is_int(error_code(r.json), E_METHOD_NOT_FOUND,
	       "an unknown method: -32601");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/foo\"}", &r);
	is_int(r.status, 202, "a notification: 202");
	ok(r.json == NULL && r.stream == NULL, "with no body");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":\"srv-77\",\"result\":{}}", &r);
	is_int(r.status, 202, "a response nobody waits for: 202");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":", &r);
	is_int(r.status, 400, "a body that is not JSON: 400");
	is_int(error_code(r.json), -32700, "parse error -32700");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_batches(struct mcp_server *s)
{
	struct reply r;
	char old[80], cur[80];
	struct buf big;
	bool ended;
	cJSON *msgs;

	open_session(s, "alice", "2025-03-26", old);
	call_http(s, mcp_http_post, &(struct req){.sid = old},
	          "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
	          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},"
	          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]",
	          &r);
	is_int(r.status, 200, "2025-03-26: a batch is answered");
	ok(cJSON_IsArray(r.json) && cJSON_GetArraySize(r.json) == 2,
	   "with an array of one answer per request");
	ok(cJSON_GetArraySize(r.json) == 2 &&
	       get(cJSON_GetArrayItem(r.json, 0), "id")->valueint == 1 &&
	       get(cJSON_GetArrayItem(r.json, 1), "id")->valueint == 2,
	   "in order");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = old},
	          "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"},"
	          "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":5}]",
	          &r);
	msgs = messages_of(&r, &ended);
	ok(response_with_id(msgs, 3) &&
	       get(response_with_id(msgs, 3), "result"),
	   "a batch with an invalid member: the valid one is answered");
	is_int(error_code(response_with_id(msgs, 4)), E_INVALID_REQUEST,
	       "and the invalid one gets -32600 with its id");
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = old},
	          "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}]", &r);
	is_int(r.status, 202, "a batch of notifications only: 202");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = old}, "[]", &r);
	is_int(r.status, 400, "an empty batch: 400");
	reply_finish(&r);

	buf_init(&big, 0);
	ok(buf_putc(&big, '[') == 0, "building a batch of 65");
	for (int i = 0; i < 65; i++) {
		if (buf_printf(&big,
		               "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
		               "\"ping\"}",
		               i ? "," : "", i) < 0)
			break;
	}
	if (buf_putc(&big, ']') == 0) {
		call_http(s, mcp_http_post, &(struct req){.sid = old}, big.data,
		          &r);
		is_int(r.status, 400, "a batch over 64 messages: 400");
		reply_finish(&r);
	}
	buf_finish(&big);

	open_session(s, "alice", "2025-11-25", cur);
	call_http(s, mcp_http_post, &(struct req){.sid = cur},
	          "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &r);
	is_int(r.status, 400, "2025-11-25: a batch is refused with 400");
	ok(strstr(error_message(r.json), "2025-03-26") != NULL,
	   "saying which version allows them: %s", error_message(r.json));
	reply_finish(&r);

	call_http(s, mcp_http_delete, &(struct req){.sid = old}, NULL, &r);
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = cur}, NULL, &r);
	reply_finish(&r);
}

static void test_tools_list_and_call(struct mcp_server *s)
{
	struct reply r;
	char sid[80];
	const cJSON *tools, *t;
	bool ended;
	cJSON *msgs;

	open_session(s, "alice", "2025-06-18", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}",
	          &r);
	tools = get(get(r.json, "result"), "tools");
	is_int(cJSON_GetArraySize(tools), 4,
	       "tools/list: the four valid tools (the bad schema was not "
	       "registered)");
	is_str(cJSON_GetStringValue(get(cJSON_GetArrayItem(tools, 0), "name")),
	       "echo", "in registration order: echo first");
	is_str(cJSON_GetStringValue(get(cJSON_GetArrayItem(tools, 1), "name")),
	       "block", "block second");
	t = cJSON_GetArrayItem(tools, 0);
	is_str(cJSON_GetStringValue(get(get(t, "inputSchema"), "type")),
	       "object", "inputSchema parsed from its text");
	is_str(cJSON_GetStringValue(get(t, "title")), "Echo", "title");
	ok(cJSON_IsTrue(get(get(t, "annotations"), "readOnlyHint")) &&
	       cJSON_IsFalse(get(get(t, "annotations"), "destructiveHint")),
	   "annotations from the table");
	ok(get(t, "outputSchema") == NULL, "no outputSchema when none given");
	ok(cJSON_IsObject(get(cJSON_GetArrayItem(tools, 1), "outputSchema")),
	   "outputSchema when given");
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":"
	          "\"hi\"}}}",
	          &r);
	msgs = messages_of(&r, &ended);
	is_int(r.status, 200, "tools/call echo: 200");
	is_str(result_text(response_with_id(msgs, 7)), "hi|alice|2025-06-18",
	       "the tool got its arguments, the tenant and the version");
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"nope\",\"arguments\":{}}}",
	          &r);
	msgs = messages_of(&r, &ended);
	is_int(error_code(response_with_id(msgs, 8)), E_INVALID_PARAMS,
	       "an unknown tool: -32602");
	ok(strstr(error_message(response_with_id(msgs, 8)),
	          "available: echo, block, notify, ask") != NULL,
	   "listing the tools there are: %s",
	   error_message(response_with_id(msgs, 8)));
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"echo\",\"arguments\":[1]}}",
	          &r);
	msgs = messages_of(&r, &ended);
	is_int(error_code(response_with_id(msgs, 9)), E_INVALID_PARAMS,
	       "arguments that are not an object: -32602");
	cJSON_Delete(msgs);
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

/* A blocking call, released by the test, answered on its SSE stream. */
static void test_blocking_call(struct mcp_server *s)
{
	struct reply r;
	char sid[80];
	struct sse sse;
	struct sse_event ev;
	unsigned long long total0 = stats_of(s).calls_total;
	bool got_progress = false, got_result = false;
	int k;

	gate_reset();
	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"_meta\":"
	          "{\"progressToken\":\"tok\"}}}",
	          &r);
	is_int(r.status, 200, "a call that sends progress: 200");
	ok(r.stream != NULL && r.json == NULL, "answered as an SSE stream");
	ok(sem_wait_ms(&gate.started, WAIT_MS), "the tool is running");
	is_int(stats_of(s).calls_running, 1, "stats: one call running");
	is_int(stats_of(s).calls_total, total0 + 1, "stats: calls_total + 1");
	is_int(stats_of(s).streams_open, 1, "stats: one stream open");

	sse_init(&sse, r.stream);
	k = sse_next(&sse, &ev, WAIT_MS);
	ok(k == 1 && ev.msg == NULL && strstr(ev.id, "_") && ev.data[0] == '\0',
	   "2025-11-25: a priming event with an id comes first (%s)", ev.id);
	cJSON_Delete(ev.msg);
	k = sse_next(&sse, &ev, WAIT_MS);
	got_progress = k == 1 &&
	               strcmp(cJSON_GetStringValue(get(ev.msg, "method")),
	                      "notifications/progress") == 0 &&
	               strcmp(cJSON_GetStringValue(
	                          get(get(ev.msg, "params"), "progressToken")),
	                      "tok") == 0;
	ok(got_progress, "then the progress, with the token: %s", ev.data);
	cJSON_Delete(ev.msg);
	k = sse_next(&sse, &ev, 200);
	is_int(k, -1, "then nothing while the tool waits");
	cJSON_Delete(ev.msg);

	sem_post(&gate.wake);
	k = sse_next(&sse, &ev, WAIT_MS);
	got_result = k == 1 && cJSON_IsNumber(get(ev.msg, "id")) &&
	             get(ev.msg, "id")->valueint == 10 &&
	             strcmp(result_text(ev.msg), "released") == 0;
	ok(got_result, "released: the result arrives on the stream: %s",
	   ev.data);
	cJSON_Delete(ev.msg);
	k = sse_next(&sse, &ev, WAIT_MS);
	is_int(k, 0, "and the stream ends after the response");
	cJSON_Delete(ev.msg);
	sse_finish(&sse);
	is_int(wait_calls_done(s), 0, "stats: no call running");
	reply_finish(&r);
	is_int(stats_of(s).streams_open, 0, "stats: no stream open");
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_notifications(struct mcp_server *s)
{
	struct reply r;
	char sid[80];
	cJSON *msgs;
	const cJSON *p, *m;
	bool ended;

	open_session(s, "alice", "2025-06-18", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"notify\",\"_meta\":"
	          "{\"progressToken\":42}}}",
	          &r);
	ok(r.stream != NULL, "a call that sends notifications: SSE");
	msgs = messages_of(&r, &ended);
	ok(ended, "the stream ends");
	is_int(count_method(msgs, "notifications/progress"), 2,
	       "two progress notifications");
	p = get(nth_method(msgs, "notifications/progress", 0), "params");
	ok(cJSON_IsNumber(get(p, "progressToken")) &&
	       get(p, "progressToken")->valueint == 42,
	   "an integer progress token comes back as an integer");
	ok(cJSON_IsNumber(get(p, "progress")) &&
	       get(p, "progress")->valuedouble == 1 &&
	       get(p, "total")->valuedouble == 3,
	   "progress 1 of 3");
	is_str(cJSON_GetStringValue(get(p, "message")), "one", "its message");
	p = get(nth_method(msgs, "notifications/progress", 1), "params");
	ok(p && get(p, "message") == NULL, "a NULL message is left out");
	is_int(count_method(msgs, "notifications/message"), 1,
	       "one log message: debug is below the default level info");
	m = get(nth_method(msgs, "notifications/message", 0), "params");
	is_str(cJSON_GetStringValue(get(m, "level")), "warning", "level");
	is_str(cJSON_GetStringValue(get(m, "logger")), "test", "logger");
	is_str(cJSON_GetStringValue(get(m, "data")), "a warning line", "data");
	is_str(result_text(response_with_id(msgs, 11)), "progress yes 0 0",
	       "the result comes last, after the notifications");
	ok(cJSON_GetArraySize(msgs) > 0 &&
	       get(cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1),
	           "result") != NULL,
	   "the response is the last message");
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":"
	          "\"logging/setLevel\",\"params\":{\"level\":\"debug\"}}",
	          &r);
	ok(get(r.json, "result") != NULL, "logging/setLevel debug");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"notify\"}}",
	          &r);
	msgs = messages_of(&r, &ended);
	is_int(count_method(msgs, "notifications/progress"), 0,
	       "no progress token: no progress sent");
	is_int(count_method(msgs, "notifications/message"), 2,
	       "level debug: both log lines");
	is_str(result_text(response_with_id(msgs, 13)), "progress no 0 0",
	       "the tool saw no progress token");
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":"
	          "\"logging/setLevel\",\"params\":{\"level\":\"loud\"}}",
	          &r);
	is_int(error_code(r.json), E_INVALID_PARAMS,
	       "an unknown level: -32602");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_cancel(struct mcp_server *s)
{
	struct reply r, c;
	char sid[80];
	cJSON *msgs;
	bool ended;

	gate_reset();
	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"_meta\":"
	          "{\"progressToken\":\"c\"}}}",
	          &r);
	ok(sem_wait_ms(&gate.started, WAIT_MS), "a blocking call runs");

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	          "\"params\":{\"requestId\":99}}",
	          &c);
	is_int(c.status, 202, "cancelling an id not in flight: 202");
	reply_finish(&c);
	is_int(atomic_load(&gate.cancels), 0, "and nothing is cancelled");

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	          "\"params\":{\"requestId\":20,\"reason\":\"test\"}}",
	          &c);
	is_int(c.status, 202, "notifications/cancelled: 202");
	reply_finish(&c);
	ok(sem_wait_ms(&gate.finished, WAIT_MS), "the tool returned");
	is_int(atomic_load(&gate.cancels), 1, "its cancel hook ran once");
	ok(atomic_load(&gate.saw_cancelled),
	   "mcp_call_cancelled() is true in the tool");
	msgs = messages_of(&r, &ended);
	ok(ended, "the call's stream ends");
	ok(response_with_id(msgs, 20) == NULL,
	   "without a response to the cancelled request");
	is_int(count_method(msgs, "notifications/progress"), 1,
	       "what was sent before the cancel is still delivered");
	cJSON_Delete(msgs);
	reply_finish(&r);
	is_int(wait_calls_done(s), 0, "no call running");

	/* A cancel hook registered after the cancellation runs at once. */
	gate_reset();
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"arguments\":"
	          "{\"late\":true}}}",
	          &r);
	ok(sem_wait_ms(&gate.started, WAIT_MS), "a call runs without a hook");
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	          "\"params\":{\"requestId\":21}}",
	          &c);
	reply_finish(&c);
	ok(sem_wait_ms(&gate.finished, WAIT_MS), "it saw the cancellation");
	is_int(atomic_load(&gate.cancels), 1,
	       "the hook it registered then ran at once");
	msgs = messages_of(&r, &ended);
	ok(ended && response_with_id(msgs, 21) == NULL,
	   "no response to it either");
	cJSON_Delete(msgs);
	reply_finish(&r);
	is_int(wait_calls_done(s), 0, "no call running");

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"ping\"}", &r);
	is_int(r.status, 200, "the session still serves");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_delete(struct mcp_server *s)
{
	struct reply r, g, g2;
	char sid[80];
	struct sse sse;
	struct sse_event ev;
	cJSON *msgs;
	bool ended;
	int k;
	unsigned sessions0;

	gate_reset();
	open_session(s, "alice", "2025-11-25", sid);
	sessions0 = stats_of(s).sessions;
	call_http(s, mcp_http_get, &(struct req){.sid = sid}, NULL, &g);
	is_int(g.status, 200, "GET opens the standalone stream");
	ok(g.stream != NULL, "a stream to read");
	call_http(s, mcp_http_get, &(struct req){.sid = sid}, NULL, &g2);
	is_int(g2.status, 409, "a second GET stream: 409");
	reply_finish(&g2);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"_meta\":"
	          "{\"progressToken\":\"d\"}}}",
	          &r);
	ok(sem_wait_ms(&gate.started, WAIT_MS), "a blocking call runs");

	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &g2);
	is_int(g2.status, 200, "DELETE: 200");
	reply_finish(&g2);
	is_int(stats_of(s).sessions, sessions0 - 1, "one session fewer");
	ok(sem_wait_ms(&gate.finished, WAIT_MS),
	   "DELETE cancelled the running call");
	is_int(atomic_load(&gate.cancels), 1, "through its cancel hook");

	sse_init(&sse, g.stream);
	while ((k = sse_next(&sse, &ev, WAIT_MS)) == 1)
		cJSON_Delete(ev.msg);
	is_int(k, 0, "the GET stream ends");
	sse_finish(&sse);
	reply_finish(&g);
	msgs = messages_of(&r, &ended);
	ok(ended && response_with_id(msgs, 30) == NULL,
	   "the call's stream ends without a response");
	cJSON_Delete(msgs);
	reply_finish(&r);
	is_int(wait_calls_done(s), 0, "no call running");

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"ping\"}", &r);
	is_int(r.status, 404, "the deleted session: 404");
	reply_finish(&r);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	is_int(r.status, 404, "a second DELETE: 404");
	reply_finish(&r);
}

static void test_resume(struct mcp_server *s)
{
	struct reply r, g;
	char sid[80], last[48] = "", bad[64];
	struct sse sse;
	struct sse_event ev;
	cJSON *msgs;
	bool ended;

	gate_reset();
	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"_meta\":"
	          "{\"progressToken\":\"r\"}}}",
	          &r);
	ok(sem_wait_ms(&gate.started, WAIT_MS), "a blocking call runs");
	sse_init(&sse, r.stream);
	for (int i = 0; i < 2 && sse_next(&sse, &ev, WAIT_MS) == 1; i++) {
		snprintf(last, sizeof(last), "%s", ev.id);
		cJSON_Delete(ev.msg);
	}
	sse_finish(&sse);
	ok(last[0] != '\0', "the progress event has an id: %s", last);
	/* The client loses the connection. */
	reply_finish(&r);

	call_http(s, mcp_http_get, &(struct req){.sid = sid}, NULL, &g);
	ok(g.status == 200 && g.stream, "a plain GET is the standalone stream");
	reply_finish(&g);

	call_http(s, mcp_http_get,
	          &(struct req){.sid = sid, .last_event_id = last}, NULL, &g);
	is_int(g.status, 200, "GET with Last-Event-ID: 200");
	ok(g.stream != NULL, "resumes the call's stream");
	sem_post(&gate.wake);
	msgs = messages_of(&g, &ended);
	ok(ended, "which ends after the response");
	is_int(cJSON_GetArraySize(msgs), 1,
	       "only what came after the last event seen");
	is_str(result_text(response_with_id(msgs, 40)), "released",
	       "the response missed while disconnected");
	cJSON_Delete(msgs);
	reply_finish(&g);
	is_int(wait_calls_done(s), 0, "no call running");

	call_http(s, mcp_http_get,
	          &(struct req){.sid = sid, .last_event_id = last}, NULL, &g);
	msgs = messages_of(&g, &ended);
	ok(g.status == 200 && ended && cJSON_GetArraySize(msgs) == 1,
	   "resuming again replays the response (%d messages)",
	   cJSON_GetArraySize(msgs));
	cJSON_Delete(msgs);
	reply_finish(&g);

	snprintf(bad, sizeof(bad), "999%s", last);
	call_http(s, mcp_http_get,
	          &(struct req){.sid = sid, .last_event_id = bad}, NULL, &g);
	is_int(g.status, 404, "Last-Event-ID of no stream: 404");
	reply_finish(&g);
	call_http(s, mcp_http_get,
	          &(struct req){.sid = sid, .last_event_id = "x_y"}, NULL, &g);
	is_int(g.status, 404, "a malformed Last-Event-ID: 404");
	reply_finish(&g);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

/* The standalone stream carries broadcasts; a request to the client. */
static void test_get_stream_and_requests(struct mcp_server *s)
{
	struct reply r, g, a;
	char sid[80], body[256];
	struct sse sse;
	struct sse_event ev;
	cJSON *msgs;
	bool ended, found = false;
	int k;

	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_get, &(struct req){.sid = sid}, NULL, &g);
	mcp_server_tools_changed(s);
	sse_init(&sse, g.stream);
	while (!found && (k = sse_next(&sse, &ev, WAIT_MS)) == 1) {
		found = ev.msg &&
		        strcmp(cJSON_GetStringValue(get(ev.msg, "method")),
		               "notifications/tools/list_changed") == 0;
		cJSON_Delete(ev.msg);
	}
	ok(found, "tools_changed reaches the GET stream");
	sse_finish(&sse);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":50,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"ask\"}}",
	          &r);
	ok(r.stream != NULL, "a call that asks the client: SSE");
	sse_init(&sse, r.stream);
	found = false;
	while (!found && sse_next(&sse, &ev, WAIT_MS) == 1) {
		found = ev.msg && cJSON_GetStringValue(get(ev.msg, "method")) &&
		        strcmp(get(ev.msg, "method")->valuestring,
		               "roots/list") == 0 &&
		        cJSON_IsString(get(ev.msg, "id"));
		if (found)
			snprintf(body, sizeof(body),
			         "{\"jsonrpc\":\"2.0\",\"id\":\"%s\","
			         "\"result\":{\"roots\":[{\"uri\":"
			         "\"file:///w\"}]}}",
			         get(ev.msg, "id")->valuestring);
		cJSON_Delete(ev.msg);
	}
	ok(found, "the request roots/list arrives on the call's stream");
	if (found) {
		call_http(s, mcp_http_post, &(struct req){.sid = sid}, body,
		          &a);
		is_int(a.status, 202, "the client's answer: 202");
		reply_finish(&a);
	}
	sse_finish(&sse);
	/* The rest of the stream: the tool's result. */
	msgs = messages_of(&r, &ended);
	is_str(result_text(response_with_id(msgs, 50)), "rc 0 roots 1",
	       "the tool got the client's answer");
	cJSON_Delete(msgs);
	reply_finish(&r);
	reply_finish(&g);
	call_http(s, mcp_http_delete, &(struct req){.sid = sid}, NULL, &r);
	reply_finish(&r);
}

static void test_legacy_sse(struct mcp_server *s)
{
	struct mcp_http_req req = {.tenant = "alice"};
	struct mcp_http_resp resp;
	struct reply r;
	struct sse sse;
	struct sse_event ev;
	char sid[80] = "", body[512];
	const char *q;
	unsigned sessions0 = stats_of(s).sessions;
	bool found = false;

	mcp_http_sse_open(s, &req, "/messages", &resp);
	is_int(resp.status, 200, "legacy GET /sse: 200");
	ok(resp.stream != NULL, "with a stream");
	sse_init(&sse, resp.stream);
	if (sse_next(&sse, &ev, WAIT_MS) == 1) {
		q = strstr(ev.data, "sessionId=");
		is_str(ev.type, "endpoint", "the first event is the endpoint");
		ok(strncmp(ev.data, "/messages?sessionId=", 20) == 0,
		   "naming the path and the session: %s", ev.data);
		snprintf(sid, sizeof(sid), "%s", q ? q + 10 : "");
		cJSON_Delete(ev.msg);
	}
	is_int(stats_of(s).sessions, sessions0 + 1, "a session per stream");

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":60,\"method\":\"initialize\","
	         "\"params\":{\"protocolVersion\":\"2024-11-05\","
	         "\"capabilities\":{},\"clientInfo\":{\"name\":\"l\","
	         "\"version\":\"1\"}}}");
	call_http(s, mcp_http_sse_post, &(struct req){.sid = sid}, body, &r);
	is_int(r.status, 202, "legacy POST: 202");
	ok(r.json == NULL, "with no body");
	reply_finish(&r);
	while (!found && sse_next(&sse, &ev, WAIT_MS) == 1) {
		found = cJSON_IsNumber(get(ev.msg, "id")) &&
		        get(ev.msg, "id")->valueint == 60 &&
		        strcmp(cJSON_GetStringValue(get(get(ev.msg, "result"),
		                                        "protocolVersion")),
		               "2024-11-05") == 0;
		cJSON_Delete(ev.msg);
	}
	ok(found, "the answer travels on the stream");
	sse_finish(&sse);

	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":61,\"method\":\"ping\"}", &r);
	is_int(r.status, 404,
	       "a legacy session is unknown to Streamable HTTP: 404");
	reply_finish(&r);

	/* The stream closes: the session ends with it. */
	mcp_http_resp_finish(&resp);
	is_int(stats_of(s).sessions, sessions0,
	       "closing the stream ends the session");
	call_http(s, mcp_http_sse_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":62,\"method\":\"ping\"}", &r);
	is_int(r.status, 404, "and its endpoint answers 404");
	reply_finish(&r);
}

static void test_drain(struct mcp_server *s)
{
	struct reply r, c;
	char sid[80];
	cJSON *msgs;
	bool ended;

	gate_reset();
	open_session(s, "alice", "2025-11-25", sid);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":70,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"block\",\"_meta\":"
	          "{\"progressToken\":\"x\"}}}",
	          &r);
	ok(sem_wait_ms(&gate.started, WAIT_MS), "a blocking call runs");
	is_int(mcp_server_drain(s, 50), 1,
	       "drain with a call running: 1 left after the timeout");
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":71,\"method\":\"tools/call\","
	          "\"params\":{\"name\":\"echo\"}}",
	          &c);
	msgs = messages_of(&c, &ended);
	ok(result_is_error(response_with_id(msgs, 71)) &&
	       strstr(result_text(response_with_id(msgs, 71)), "shutting down"),
	   "draining: a new call is refused with a result saying why: %s",
	   result_text(response_with_id(msgs, 71)));
	cJSON_Delete(msgs);
	reply_finish(&c);
	call_http(s, mcp_http_post, &(struct req){.sid = sid},
	          "{\"jsonrpc\":\"2.0\",\"id\":72,\"method\":\"ping\"}", &c);
	is_int(c.status, 200, "draining: other requests are served");
	reply_finish(&c);
	sem_post(&gate.wake);
	is_int(mcp_server_drain(s, WAIT_MS), 0,
	       "drain returns 0 once the call ended");
	msgs = messages_of(&r, &ended);
	is_str(result_text(response_with_id(msgs, 70)), "released",
	       "the running call finished normally");
	cJSON_Delete(msgs);
	reply_finish(&r);

	call_http(s, mcp_http_get, &(struct req){.sid = sid}, NULL, &c);
	mcp_server_close_sessions(s);
	msgs = messages_of(&c, &ended);
	ok(ended, "close_sessions ends the open streams");
	cJSON_Delete(msgs);
	reply_finish(&c);
	is_int(stats_of(s).sessions, 0, "and every session");
}

/* At the per-tenant cap the least recently used idle session goes. */
static void test_session_cap(const struct config *base)
{
	struct config cfg = *base;
	struct mcp_server *s;
	struct reply r, ga, gb;
	char a[80], b[80], c[80], d[80], e[80];

	cfg.max_sessions_per_tenant = 2;
	s = mcp_server_create(&cfg);
	ok(s != NULL, "a server with 2 sessions per tenant");
	if (!s)
		return;
	open_session(s, "alice", "2025-11-25", a);
	open_session(s, "alice", "2025-11-25", b);
	call_http(s, mcp_http_get, &(struct req){.sid = b}, NULL, &gb);
	open_session(s, "bob", "2025-11-25", e);
	ok(e[0] != '\0', "another tenant has a cap of its own");

	open_session(s, "alice", "2025-11-25", c);
	ok(c[0] != '\0', "at the cap: a new session is made");
	call_http(s, mcp_http_post, &(struct req){.sid = a},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 404, "by ending the idle one");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.sid = b},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 200, "the one with an open stream stays");
	reply_finish(&r);

	call_http(s, mcp_http_get, &(struct req){.sid = c}, NULL, &ga);
	call_http(s, mcp_http_post, &(struct req){0},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	          "\"params\":{\"protocolVersion\":\"2025-11-25\"}}",
	          &r);
	is_int(r.status, 429, "at the cap with none idle: 429");
	is_int(r.retry_after, 30, "with Retry-After");
	ok(strstr(error_message(r.json), "DELETE") != NULL,
	   "saying what to do: %s", error_message(r.json));
	reply_finish(&r);
	reply_finish(&ga);
	reply_finish(&gb);
	open_session(s, "alice", "2025-11-25", d);
	ok(d[0] != '\0', "once a stream closed, there is room again");
	mcp_server_destroy(s);
}

/*
 * Idle sessions expire; one with an open stream does not. The housekeeping
 * job (mcp_job_sweep, run by the daemon's cron) is called here directly.
 */
static void test_expiry(const struct config *base)
{
	struct config cfg = *base;
	struct mcp_server *s;
	struct reply r, g;
	char idle[80], busy[80];

	/*
	 * A session is ended when idle for more than session_idle_s whole
	 * seconds: 1 here, so a sweep at once ends nothing and one 2.2 s
	 * later ends what stayed idle.
	 */
	cfg.session_idle_s = 1;
	s = mcp_server_create(&cfg);
	ok(s != NULL, "a server whose sessions expire after 1 s idle");
	if (!s)
		return;
	open_session(s, "alice", "2025-11-25", idle);
	open_session(s, "alice", "2025-11-25", busy);
	call_http(s, mcp_http_get, &(struct req){.sid = busy}, NULL, &g);
	ok(g.stream != NULL, "one session has a stream open");
	(void)mcp_job_sweep(s, LLONG_MAX);
	is_int(stats_of(s).sessions, 2, "a sweep at once ends no session");
	usleep(2200 * 1000);
	(void)mcp_job_sweep(s, LLONG_MAX);
	is_int(stats_of(s).sessions, 1, "a sweep 2.2 s later ends one");
	call_http(s, mcp_http_post, &(struct req){.sid = idle},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 404, "the idle one: 404");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.sid = busy},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 200, "the session with a stream did not expire");
	reply_finish(&r);
	reply_finish(&g);
	usleep(2200 * 1000);
	(void)mcp_job_sweep(s, LLONG_MAX);
	is_int(stats_of(s).sessions, 0,
	       "once its stream closed and it idled, it expired too");
	mcp_server_destroy(s);
}

/*
 * With MCP_REPLICA_NAME a session id starts with it, so a load balancer
 * routes the session to its owner; the rest is the same 64 hex digits. The
 * session answers by that id, on both transports.
 */
static void test_replica_ids(const struct config *base)
{
	struct config cfg = *base;
	struct mcp_server *s;
	struct reply r;
	char a[80], name[] = "r7";

	cfg.replica_name = name;
	s = mcp_server_create(&cfg);
	ok(s != NULL, "a server named r7 among replicas");
	if (!s)
		return;
	open_session(s, "alice", "2025-11-25", a);
	ok(strncmp(a, "r7.", 3) == 0 && is_hex_id(a + 3),
	   "its session ids are r7. and 64 hex digits (%s)", a);
	call_http(s, mcp_http_post, &(struct req){.sid = a},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 200, "and the session answers by that id");
	reply_finish(&r);
	call_http(s, mcp_http_post, &(struct req){.sid = a + 3},
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
	is_int(r.status, 404, "not by the hex digits alone");
	reply_finish(&r);
	mcp_server_destroy(s);
}

int main(void)
{
	struct config cfg;
	struct mcp_server *s;

	log_set_level(LOG_LEVEL_ERROR);
	sem_init(&gate.started, 0, 0);
	sem_init(&gate.wake, 0, 0);
	sem_init(&gate.finished, 0, 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_json_depth = 64;
	cfg.keepalive_s = 5;
	cfg.session_idle_s = 3600;
	cfg.max_sessions_per_tenant = 64;
	cfg.max_inflight_per_session = 8;

	s = mcp_server_create(&cfg);
	ok(s != NULL, "mcp_server_create");
	if (!s)
		return tap_done();
	mcp_server_add_tool(s, &tool_echo);
	mcp_server_add_tool(s, &tool_block);
	mcp_server_add_tool(s, &tool_bad_schema);
	mcp_server_add_tool(s, &tool_notify);
	mcp_server_add_tool(s, &tool_ask);
	mcp_server_set_instructions(s, "test instructions");

	test_initialize(s);
	test_unknown_and_foreign_sessions(s);
	test_version_header(s);
	test_ping_and_methods(s);
	test_batches(s);
	test_tools_list_and_call(s);
	test_blocking_call(s);
	test_notifications(s);
	test_cancel(s);
	test_delete(s);
	test_resume(s);
	test_get_stream_and_requests(s);
	test_legacy_sse(s);
	test_drain(s);
	mcp_server_destroy(s);
	mcp_server_destroy(NULL);

	test_session_cap(&cfg);
	test_expiry(&cfg);
	test_replica_ids(&cfg);

	sem_destroy(&gate.started);
	sem_destroy(&gate.wake);
	sem_destroy(&gate.finished);
	return tap_done();
}
