/* SPDX-License-Identifier: MIT */
/*
 * test_mcp_modern: MCP 2026-07-28 beside the session revisions, through
 * the core's HTTP entry point with real header lookups. Which revision a
 * POST speaks is decided per request; a stateless request's envelope is
 * checked (the _meta fields, MCP-Protocol-Version, Mcp-Method, Mcp-Name,
 * Mcp-Param-*) with the revision's error codes and HTTP statuses and the
 * request's id; methods exist per revision; results carry resultType,
 * caching hints and serverInfo only for 2026-07-28; input from the client
 * becomes an InputRequiredResult whose sealed state the client cannot alter
 * or reuse elsewhere; calls run as tasks only for clients that declare the
 * extension, are polled, updated with input, cancelled (their cancel hook
 * runs) and isolated between tenants; listen streams carry only what they
 * asked for; log messages need a level; a task's progress is its status
 * message.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "tap.h"
#include "tasks/tasks.h"
#include "util/mono.h"

#define V MCP_MODERN_VERSION
#define META_OK                                                                \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V "\","    \
	"\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define META_CAPS(caps)                                                        \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V "\","    \
	"\"io.modelcontextprotocol/clientCapabilities\":" caps "}"
#define TASKS_CAPS                                                             \
	"{\"elicitation\":{},\"extensions\":{\"io.modelcontextprotocol/"       \
	"tasks\":{}}}"

static struct config cfg;
static struct mcp_server *srv;
static struct tasks *tasks;

/* ------------------------------------------------------------------ */
/* requests */

struct hdrs {
	const char *name[8];
	const char *value[8];
	size_t n;
};

static const char *lookup(void *ctx, const char *name)
{
	const struct hdrs *h = ctx;

	for (size_t i = 0; i < h->n; i++) {
		if (strcasecmp(h->name[i], name) == 0)
			return h->value[i];
	}
	return NULL;
}

static void hdr(struct hdrs *h, const char *name, const char *value)
{
	h->name[h->n] = name;
	h->value[h->n++] = value;
}

/* The headers a conforming 2026-07-28 client sends. */
static struct hdrs std_hdrs(const char *method, const char *name)
{
	struct hdrs h = {.n = 0};

	hdr(&h, "Mcp-Method", method);
	if (name)
		hdr(&h, "Mcp-Name", name);
	return h;
}

/* Everything an answer carries, JSON body or SSE text (<= ms). */
static char *drain(struct mcp_http_resp *resp, long ms)
{
	long long end = mono_ms() + ms;
	size_t len = 0, cap = 1 << 16;
	char *out = calloc(1, cap);

	if (resp->body) {
		free(out);
		return strdup(resp->body);
	}
	while (resp->stream && mono_ms() < end && len + 4096 < cap) {
		ssize_t n = mcp_stream_read(resp->stream, out + len, 4096, 50);

		if (n < 0)
			break;
		len += (size_t)n;
	}
	return out;
}

/*
 * POSTs body with headers (the MCP-Protocol-Version one apart: pv, or
 * none) as tenant; returns the status and the answer text (caller frees).
 */
static int post_as(const char *tenant, const char *pv, struct hdrs *h,
                   const char *body, char **out)
{
	struct mcp_http_req req = {
	    .tenant = tenant,
	    .protocol_version = pv,
	    .body = body,
	    .body_len = strlen(body),
	    .header = lookup,
	    .hctx = h,
	};
	struct mcp_http_resp resp;
	int status;

	mcp_http_post(srv, &req, &resp);
	status = resp.status;
	*out = drain(&resp, 3000);
	mcp_http_resp_finish(&resp);
	return status;
}

static int post(const char *method, const char *name, const char *body,
                char **out)
{
	struct hdrs h = std_hdrs(method, name);

	return post_as("t1", V, &h, body, out);
}

/* The JSON-RPC message in an answer (the last data: line of SSE). */
static cJSON *msg_of(const char *text)
{
	const char *d = strstr(text, "data: "), *last = NULL;

	while (d) {
		last = d + 6;
		d = strstr(last, "data: ");
	}
	if (!last)
		return cJSON_Parse(text);
	return cJSON_ParseWithLength(last, strcspn(last, "\n"));
}

static int error_code(const cJSON *m)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(m, "error"), "code");

	return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const cJSON *result(const cJSON *m)
{
	return cJSON_GetObjectItemCaseSensitive(m, "result");
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *text0(const cJSON *r)
{
	return str(cJSON_GetArrayItem(
	               cJSON_GetObjectItemCaseSensitive(r, "content"), 0),
	           "text");
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ */
/* tools */

static cJSON *echo_tool(void *d, struct mcp_call *c, const cJSON *a)
{
	char *s = cJSON_PrintUnformatted(a);
	cJSON *r = mcp_text_resultf(false, "%s", s ? s : "");

	mcp_call_log(c, MCP_LOG_INFO, NULL, cJSON_CreateString("echoing"));
	free(s);
	return r;
}

static cJSON *ask_tool(void *d, struct mcp_call *c, const cJSON *a)
{
	struct mcp_input in = {
	    .key = "who",
	    .method = "elicitation/create",
	    .params = cJSON_Parse("{\"message\":\"Name?\",\"requestedSchema\":"
	                          "{\"type\":\"object\",\"properties\":{"
	                          "\"name\":{\"type\":\"string\"}}}}")};
	const cJSON *name;
	cJSON *r;

	if (mcp_call_input(c, &in, 1, 5000) < 0) {
		cJSON_Delete(in.result);
		cJSON_Delete(in.error);
		return NULL;
	}
	name = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(in.result, "content"), "name");
	r = mcp_text_resultf(false, "hi %s",
	                     cJSON_IsString(name) ? name->valuestring : "?");
	cJSON_Delete(in.result);
	return r;
}

static atomic_int hook_runs;

static void count_hook(void *arg)
{
	atomic_fetch_add(&hook_runs, 1);
}

/* Waits up to 10 s (cancellable), reporting progress each 100 ms. */
static cJSON *wait_tool(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(a, "ms");
	long total = cJSON_IsNumber(ms) ? (long)ms->valuedouble : 10000;

	mcp_call_on_cancel(c, count_hook, NULL);
	for (long t = 0; t < total && !mcp_call_cancelled(c); t += 20) {
		if (t % 100 == 0) {
			char m[64];

			snprintf(m, sizeof(m), "line %ld", t / 100);
			mcp_call_progress(c, (double)t + 1, -1, m);
		}
		sleep_ms(20);
	}
	mcp_call_on_cancel(c, NULL, NULL);
	return mcp_text_result(mcp_call_cancelled(c) ? "stopped" : "waited",
	                       false);
}

static const struct tool_impl tools[] = {
    {.name = "echo",
     .description = "echoes",
     .input_schema = "{\"type\":\"object\",\"properties\":{"
                     "\"conversationId\":{\"type\":\"string\"},\"n\":"
                     "{\"type\":\"integer\"}}}",
     .call = echo_tool},
    {.name = "ask",
     .description = "asks a name",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":"
                     "\"integer\"}}}",
     .call = ask_tool,
     .tasks = MCP_TASK_OPTIONAL},
    {.name = "wait",
     .description = "waits",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"ms\":"
                     "{\"type\":\"integer\"}}}",
     .call = wait_tool,
     .tasks = MCP_TASK_OPTIONAL},
};

/* ------------------------------------------------------------------ */
/* tests */

static void test_era(void)
{
	struct hdrs h = std_hdrs("tools/list", NULL);
	char *out;
	cJSON *m;
	int st;

	/* A session client's first request: initialize, no header. */
	st = post_as("t1", NULL, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	             "\"params\":{\"protocolVersion\":\"2025-11-25\","
	             "\"capabilities\":{},\"clientInfo\":{\"name\":\"c\","
	             "\"version\":\"1\"}}}",
	             &out);
	m = msg_of(out);
	is_int(st, 200, "initialize without 2026 markers starts a session");
	is_str(str(result(m), "protocolVersion"), "2025-11-25",
	       "session revision negotiated");
	ok(!cJSON_GetObjectItemCaseSensitive(result(m), "resultType"),
	   "session results carry no resultType");
	cJSON_Delete(m);
	free(out);

	/* The same method framed as 2026-07-28 does not exist. */
	st = post("initialize", NULL,
	          "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\","
	          "\"params\":{" META_OK "}}",
	          &out);
	m = msg_of(out);
	is_int(st, 404, "initialize in 2026-07-28: 404");
	is_int(error_code(m), -32601, "initialize in 2026-07-28: -32601");
	is_str(str(m, "id"), "i", "the error carries the request id");
	cJSON_Delete(m);
	free(out);

	st =
	    post("ping", NULL,
	         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":"
	         "{" META_OK "}}",
	         &out);
	is_int(st, 404, "ping is gone in 2026-07-28");
	free(out);
	st = post("no/such", NULL,
	          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"no/such\","
	          "\"params\":{" META_OK "}}",
	          &out);
	is_int(st, 404, "unknown method: 404");
	free(out);
}

static void expect_error(const char *pv, struct hdrs *h, const char *body,
                         int status, int code, const char *what)
{
	char *out;
	cJSON *m;
	int st = post_as("t1", pv, h, body, &out);

	m = msg_of(out);
	ok(st == status && error_code(m) == code &&
	       cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "id")),
	   "%s: HTTP %d, code %d, with id (got %d, %d)", what, status, code, st,
	   error_code(m));
	cJSON_Delete(m);
	free(out);
}

static void test_envelope(void)
{
	struct hdrs h = std_hdrs("server/discover", NULL);
	struct hdrs call = std_hdrs("tools/call", "echo");
	struct hdrs nameless = std_hdrs("tools/call", NULL);
	struct hdrs wrongm = std_hdrs("tools/list", NULL);
	char *out;
	cJSON *m, *d;
	int st;

	expect_error(NULL, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	             "discover\",\"params\":{" META_OK "}}",
	             400, -32020, "no MCP-Protocol-Version");
	expect_error(V, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	             "discover\",\"params\":{}}",
	             400, -32602, "no _meta");
	expect_error(V, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	             "discover\",\"params\":{\"_meta\":{\"io.modelcontext"
	             "protocol/protocolVersion\":\"" V "\"}}}",
	             400, -32602, "no clientCapabilities");
	expect_error(V, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	             "discover\",\"params\":{\"_meta\":{\"io.modelcontext"
	             "protocol/protocolVersion\":\"1999-01-01\",\"io."
	             "modelcontextprotocol/clientCapabilities\":{}}}}",
	             400, -32020, "header and body disagree");
	expect_error(V, &wrongm,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	             "discover\",\"params\":{" META_OK "}}",
	             400, -32020, "Mcp-Method disagrees");
	expect_error(V, &nameless,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	             "\"params\":{\"name\":\"echo\"," META_OK "}}",
	             400, -32020, "Mcp-Name missing");
	expect_error(V, &call,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	             "\"params\":{\"name\":\"ask\"," META_OK "}}",
	             400, -32020, "Mcp-Name disagrees");

	/* An unsupported version: -32022 naming what is supported. */
	st = post_as("t1", "2099-01-01", &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server/"
	             "discover\",\"params\":{\"_meta\":{\"io.modelcontext"
	             "protocol/protocolVersion\":\"2099-01-01\",\"io."
	             "modelcontextprotocol/clientCapabilities\":{}}}}",
	             &out);
	m = msg_of(out);
	d = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(m, "error"), "data");
	is_int(st, 400, "unsupported version: 400");
	is_int(error_code(m), -32022, "unsupported version: -32022");
	is_str(str(d, "requested"), "2099-01-01", "data.requested echoed");
	is_str(cJSON_GetArrayItem(
	           cJSON_GetObjectItemCaseSensitive(d, "supported"), 0)
	           ->valuestring,
	       V, "data.supported names " V);
	cJSON_Delete(m);
	free(out);

	/* White space around a value and the Base64 sentinel are fine. */
	{
		struct hdrs ws = std_hdrs("tools/call", "  echo\t");
		struct hdrs b64 = std_hdrs("tools/call", "=?base64?ZWNobw==?=");
		struct hdrs bad = std_hdrs("tools/call", "=?base64?ZWNobw?=");

		st = post_as("t1", V, &ws,
		             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
		             "call\",\"params\":{\"name\":\"echo\"," META_OK
		             "}}",
		             &out);
		is_int(st, 200, "Mcp-Name with white space around it");
		free(out);
		st = post_as("t1", V, &b64,
		             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
		             "call\",\"params\":{\"name\":\"echo\"," META_OK
		             "}}",
		             &out);
		is_int(st, 200, "Mcp-Name Base64-encoded");
		free(out);
		expect_error(V, &bad,
		             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
		             "call\",\"params\":{\"name\":\"echo\"," META_OK
		             "}}",
		             400, -32020, "Mcp-Name with bad Base64");
	}
}

static void test_header_param(void)
{
	struct hdrs none = std_hdrs("tools/call", "echo");
	struct hdrs right = std_hdrs("tools/call", "echo");
	struct hdrs wrong = std_hdrs("tools/call", "echo");
	struct hdrs b64 = std_hdrs("tools/call", "echo");
	struct hdrs list = std_hdrs("tools/list", NULL);
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
	                   "call\",\"params\":{\"name\":\"echo\",\"arguments\":"
	                   "{\"conversationId\":\"c-1\"}," META_OK "}}";
	const cJSON *props;
	char *out;
	cJSON *m;
	int st;

	hdr(&right, "mcp-param-conversation-id", "c-1");
	hdr(&wrong, "Mcp-Param-Conversation-Id", "c-2");
	hdr(&b64, "Mcp-Param-Conversation-Id", "=?base64?Yy0x?=");
	expect_error(V, &none, body, 400, -32020,
	             "conversationId without its header");
	expect_error(V, &wrong, body, 400, -32020,
	             "conversationId header disagrees");
	st = post_as("t1", V, &right, body, &out);
	is_int(st, 200, "conversationId header matches");
	free(out);
	st = post_as("t1", V, &b64, body, &out);
	is_int(st, 200, "conversationId header Base64-encoded");
	free(out);

	st = post_as("t1", V, &list,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
	             "\"params\":{" META_OK "}}",
	             &out);
	m = msg_of(out);
	props = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetArrayItem(
	            cJSON_GetObjectItemCaseSensitive(result(m), "tools"), 0),
	        "inputSchema"),
	    "properties");
	is_str(str(cJSON_GetObjectItemCaseSensitive(props, "conversationId"),
	           "x-mcp-header"),
	       "Conversation-Id", "tools/list annotates conversationId");
	is_str(str(result(m), "resultType"), "complete", "list resultType");
	ok(cJSON_IsNumber(
	       cJSON_GetObjectItemCaseSensitive(result(m), "ttlMs")) &&
	       strcmp(str(result(m), "cacheScope"), "private") == 0,
	   "list carries caching hints");
	is_str(str(cJSON_GetObjectItemCaseSensitive(
	               cJSON_GetObjectItemCaseSensitive(result(m), "_meta"),
	               "io.modelcontextprotocol/serverInfo"),
	           "name"),
	       "mcp-sandboxd", "serverInfo in the result's _meta");
	cJSON_Delete(m);
	free(out);
}

static void test_discover(void)
{
	struct hdrs h = std_hdrs("server/discover", NULL);
	char *out;
	cJSON *m;
	const cJSON *caps;
	int st = post_as("t1", V, &h,
	                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/"
	                 "discover\",\"params\":{" META_OK "}}",
	                 &out);

	m = msg_of(out);
	caps = cJSON_GetObjectItemCaseSensitive(result(m), "capabilities");
	is_int(st, 200, "server/discover answers");
	is_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                              result(m), "supportedVersions"),
	                          0)
	           ->valuestring,
	       V, "supportedVersions");
	ok(cJSON_GetObjectItemCaseSensitive(
	       cJSON_GetObjectItemCaseSensitive(caps, "extensions"),
	       "io.modelcontextprotocol/tasks") != NULL,
	   "the tasks extension is advertised");
	cJSON_Delete(m);
	free(out);
}

/* tools/call "ask" with params extra (",..." or ""); the message. */
static cJSON *ask(const char *extra, int *status)
{
	char body[8192], *out;
	cJSON *m;

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
	         "\"params\":{\"name\":\"ask\",\"arguments\":{\"x\":1}%s,"
	         "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" V
	         "\",\"io.modelcontextprotocol/clientCapabilities\":"
	         "{\"elicitation\":{}}}}}",
	         extra);
	*status = post("tools/call", "ask", body, &out);
	m = msg_of(out);
	free(out);
	return m;
}

static void test_mrtr(void)
{
	const char *answer = "{\"action\":\"accept\",\"content\":{\"name\":"
	                     "\"Ada\"}}";
	char extra[4096], *state;
	const cJSON *r;
	cJSON *m;
	int st;

	m = ask("", &st);
	r = result(m);
	is_str(str(r, "resultType"), "input_required",
	       "a question becomes an InputRequiredResult");
	is_str(str(cJSON_GetObjectItemCaseSensitive(
	               cJSON_GetObjectItemCaseSensitive(r, "inputRequests"),
	               "who"),
	           "method"),
	       "elicitation/create", "asked under the handler's key");
	state = strdup(str(r, "requestState"));
	ok(state[0] != '\0', "with a requestState");
	cJSON_Delete(m);

	snprintf(extra, sizeof(extra),
	         ",\"inputResponses\":{\"who\":%s},\"requestState\":\"%s\"",
	         answer, state);
	m = ask(extra, &st);
	is_str(text0(result(m)), "hi Ada", "the retry completes");
	is_str(str(result(m), "resultType"), "complete", "resultType complete");
	cJSON_Delete(m);

	snprintf(extra, sizeof(extra),
	         ",\"inputResponses\":{\"who\":%s},\"requestState\":\"%sX\"",
	         answer, state);
	m = ask(extra, &st);
	is_int(error_code(m), -32602, "a tampered state is refused");
	cJSON_Delete(m);

	/* The state belongs to its arguments: not to another call. */
	{
		char body[8192], *out;

		snprintf(body, sizeof(body),
		         "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/"
		         "call\",\"params\":{\"name\":\"ask\",\"arguments\":"
		         "{\"x\":2},\"inputResponses\":{\"who\":%s},"
		         "\"requestState\":\"%s\",\"_meta\":{\"io.model"
		         "contextprotocol/protocolVersion\":\"" V "\",\"io."
		         "modelcontextprotocol/clientCapabilities\":"
		         "{\"elicitation\":{}}}}}",
		         answer, state);
		post("tools/call", "ask", body, &out);
		m = msg_of(out);
		is_int(error_code(m), -32602,
		       "a state used with other arguments is refused");
		cJSON_Delete(m);
		free(out);
	}
	free(state);

	m = ask(",\"inputResponses\":{\"who\":7}", &st);
	is_int(error_code(m), -32602, "an answer that is not an object");
	cJSON_Delete(m);

	/* No elicitation capability: -32021 naming it, HTTP 400. */
	{
		char *out;

		st = post("tools/call", "ask",
		          "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/"
		          "call\",\"params\":{\"name\":\"ask\"," META_OK "}}",
		          &out);
		m = msg_of(out);
		is_int(st, 400, "missing capability: 400");
		is_int(error_code(m), -32021, "missing capability: -32021");
		ok(cJSON_GetObjectItemCaseSensitive(
		       cJSON_GetObjectItemCaseSensitive(
		           cJSON_GetObjectItemCaseSensitive(
		               cJSON_GetObjectItemCaseSensitive(m, "error"),
		               "data"),
		           "requiredCapabilities"),
		       "elicitation") != NULL,
		   "data.requiredCapabilities names elicitation");
		cJSON_Delete(m);
		free(out);
	}
}

/* tools/call of tool with caps; returns the message. */
static cJSON *call_tool(const char *tenant, const char *tool, const char *args,
                        const char *caps, int *status)
{
	struct hdrs h = std_hdrs("tools/call", tool);
	char body[2048], *out;
	cJSON *m;

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
	         "\"params\":{\"name\":\"%s\",\"arguments\":%s,\"_meta\":{"
	         "\"io.modelcontextprotocol/protocolVersion\":\"" V "\","
	         "\"io.modelcontextprotocol/clientCapabilities\":%s}}}",
	         tool, args, caps);
	*status = post_as(tenant, V, &h, body, &out);
	m = msg_of(out);
	free(out);
	return m;
}

/* tasks/<what> of id as tenant with caps; returns the message. */
static cJSON *task_req(const char *tenant, const char *what, const char *id,
                       const char *extra, const char *caps)
{
	char method[32], body[4096], *out;
	struct hdrs h;
	cJSON *m;

	snprintf(method, sizeof(method), "tasks/%s", what);
	h = std_hdrs(method, id);
	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"%s\",\"params\":"
	         "{\"taskId\":\"%s\"%s,\"_meta\":{\"io.modelcontextprotocol/"
	         "protocolVersion\":\"" V "\",\"io.modelcontextprotocol/"
	         "clientCapabilities\":%s}}}",
	         method, id, extra, caps);
	post_as(tenant, V, &h, body, &out);
	m = msg_of(out);
	free(out);
	return m;
}

/* Polls tasks/get until the status is want (or final); the last one. */
static cJSON *poll_until(const char *id, const char *want)
{
	cJSON *m = NULL;

	for (int i = 0; i < 200; i++) {
		const char *s;

		cJSON_Delete(m);
		m = task_req("t1", "get", id, "", TASKS_CAPS);
		s = str(result(m), "status");
		if (strcmp(s, want) == 0 || strcmp(s, "completed") == 0 ||
		    strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
			break;
		sleep_ms(25);
	}
	return m;
}

static void test_tasks(void)
{
	char id[64];
	cJSON *m, *g;
	int st;

	/* Without the extension: no task, and no tasks/get. */
	m = call_tool("t1", "wait", "{\"ms\":10}", "{}", &st);
	is_str(text0(result(m)), "waited", "no extension: answered in place");
	cJSON_Delete(m);
	m = task_req("t1", "get", "abc", "", "{}");
	is_int(error_code(m), -32021, "tasks/get needs the extension");
	cJSON_Delete(m);

	m = call_tool("t1", "wait", "{\"ms\":300}", TASKS_CAPS, &st);
	is_str(str(result(m), "resultType"), "task", "a CreateTaskResult");
	is_str(str(result(m), "status"), "working", "working at first");
	snprintf(id, sizeof(id), "%s", str(result(m), "taskId"));
	ok(strlen(id) == TASK_ID_LEN, "with a task id");
	cJSON_Delete(m);
	g = task_req("t1", "get", id, "", TASKS_CAPS);
	is_str(str(result(g), "taskId"), id, "tasks/get resolves at once");
	is_str(str(result(g), "resultType"), "complete",
	       "tasks/get resultType");
	cJSON_Delete(g);
	sleep_ms(150);
	g = task_req("t1", "get", id, "", TASKS_CAPS);
	ok(strncmp(str(result(g), "statusMessage"), "line ", 5) == 0,
	   "progress is the status message");
	cJSON_Delete(g);
	g = task_req("t2", "get", id, "", TASKS_CAPS);
	is_int(error_code(g), -32602, "another tenant does not see it");
	cJSON_Delete(g);
	g = poll_until(id, "completed");
	is_str(str(result(g), "status"), "completed", "the task completes");
	is_str(text0(cJSON_GetObjectItemCaseSensitive(result(g), "result")),
	       "waited", "its result is inline");
	cJSON_Delete(g);
	g = task_req("t1", "cancel", id, "", TASKS_CAPS);
	ok(result(g) && !cJSON_GetObjectItemCaseSensitive(result(g), "status"),
	   "cancelling an ended task: an empty ack");
	cJSON_Delete(g);
	g = task_req("t1", "get", "0123456789abcdef0123456789abcdef", "",
	             TASKS_CAPS);
	is_int(error_code(g), -32602, "unknown task: -32602");
	cJSON_Delete(g);

	/* Cancel stops the run through its cancel hook. */
	atomic_store(&hook_runs, 0);
	m = call_tool("t1", "wait", "{\"ms\":10000}", TASKS_CAPS, &st);
	snprintf(id, sizeof(id), "%s", str(result(m), "taskId"));
	cJSON_Delete(m);
	sleep_ms(100);
	g = task_req("t1", "cancel", id, "", TASKS_CAPS);
	is_str(str(result(g), "resultType"), "complete", "cancel ack");
	cJSON_Delete(g);
	is_int(atomic_load(&hook_runs), 1, "the call's cancel hook ran");
	g = poll_until(id, "cancelled");
	is_str(str(result(g), "status"), "cancelled", "the task is cancelled");
	cJSON_Delete(g);

	/* Input in a task: input_required, then tasks/update. */
	m = call_tool("t1", "ask", "{}", TASKS_CAPS, &st);
	snprintf(id, sizeof(id), "%s", str(result(m), "taskId"));
	cJSON_Delete(m);
	g = poll_until(id, "input_required");
	is_str(str(result(g), "status"), "input_required", "input_required");
	ok(cJSON_GetObjectItemCaseSensitive(
	       cJSON_GetObjectItemCaseSensitive(result(g), "inputRequests"),
	       "who") != NULL,
	   "the question is in inputRequests");
	cJSON_Delete(g);
	g = task_req("t1", "update", id,
	             ",\"inputResponses\":{\"who\":{\"action\":\"accept\","
	             "\"content\":{\"name\":\"Bo\"}},\"other\":{}}",
	             TASKS_CAPS);
	is_str(str(result(g), "resultType"), "complete", "update ack");
	cJSON_Delete(g);
	g = poll_until(id, "completed");
	is_str(text0(cJSON_GetObjectItemCaseSensitive(result(g), "result")),
	       "hi Bo", "the task used the answer");
	cJSON_Delete(g);
}

static void test_listen_and_logs(void)
{
	struct hdrs h = std_hdrs("subscriptions/listen", NULL);
	struct hdrs e = std_hdrs("tools/call", "echo");
	struct mcp_http_req req = {
	    .tenant = "t1",
	    .protocol_version = V,
	    .body = "{\"jsonrpc\":\"2.0\",\"id\":\"sub-1\",\"method\":"
	            "\"subscriptions/listen\",\"params\":{\"notifications\":"
	            "{\"toolsListChanged\":true}," META_OK "}}",
	    .header = lookup,
	    .hctx = &h,
	};
	struct mcp_http_resp resp;
	char buf[8192] = "", *out;
	size_t len = 0;
	long long end;

	req.body_len = strlen(req.body);
	mcp_http_post(srv, &req, &resp);
	ok(resp.stream != NULL, "listen answers with a stream");
	mcp_server_tools_changed(srv);
	end = mono_ms() + 2000;
	while (resp.stream && mono_ms() < end &&
	       !strstr(buf, "tools/list_changed")) {
		ssize_t n = mcp_stream_read(resp.stream, buf + len,
		                            sizeof(buf) - len - 1, 50);

		if (n < 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
	ok(strstr(buf, "notifications/subscriptions/acknowledged") &&
	       strstr(buf, "notifications/subscriptions/acknowledged") <
	           strstr(buf, "tools/list_changed"),
	   "acknowledged first, then the change");
	ok(strstr(buf, "\"io.modelcontextprotocol/subscriptionId\":"
	               "\"sub-1\""),
	   "tagged with the subscription id");
	ok(!strstr(buf, "id: "), "no SSE event ids in 2026-07-28");
	mcp_http_resp_finish(&resp);

	post_as("t1", V, &e,
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	        "\"params\":{\"name\":\"echo\"," META_OK "}}",
	        &out);
	ok(!strstr(out, "notifications/message"),
	   "no log message without a logLevel");
	free(out);
	post_as("t1", V, &e,
	        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	        "\"params\":{\"name\":\"echo\",\"_meta\":{\"io.modelcontext"
	        "protocol/protocolVersion\":\"" V "\",\"io.modelcontext"
	        "protocol/clientCapabilities\":{},\"io.modelcontextprotocol/"
	        "logLevel\":\"debug\"}}}",
	        &out);
	ok(strstr(out, "notifications/message") != NULL,
	   "a log message with logLevel debug");
	free(out);
}

static void *bg_wait(void *arg)
{
	char *out;

	(void)arg;
	post("tools/call", "wait",
	     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
	     "\"params\":{\"name\":\"wait\",\"arguments\":{\"ms\":600}," META_OK
	     "}}",
	     &out);
	free(out);
	return NULL;
}

/* A tenant has at most as many requests in flight as sessions allow. */
static void test_tenant_cap(void)
{
	unsigned sessions = cfg.max_sessions_per_tenant;
	unsigned inflight = cfg.max_inflight_per_session;
	struct hdrs h = std_hdrs("tools/list", NULL);
	pthread_t th;
	char *out;
	int st;

	cfg.max_sessions_per_tenant = 1;
	cfg.max_inflight_per_session = 1;
	pthread_create(&th, NULL, bg_wait, NULL);
	sleep_ms(200);
	st = post("tools/list", NULL,
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
	          "\"params\":{" META_OK "}}",
	          &out);
	is_int(st, 429, "over the tenant's requests in flight: 429");
	free(out);
	st = post_as("t2", V, &h,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/"
	             "list\",\"params\":{" META_OK "}}",
	             &out);
	is_int(st, 200, "another tenant is not held back");
	free(out);
	pthread_join(th, NULL);
	st = post("tools/list", NULL,
	          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
	          "\"params\":{" META_OK "}}",
	          &out);
	is_int(st, 200, "served again once the other ended");
	free(out);
	cfg.max_sessions_per_tenant = sessions;
	cfg.max_inflight_per_session = inflight;
}

int main(void)
{
	char err[256];

	cfg.keepalive_s = 15;
	cfg.max_json_depth = 64;
	cfg.max_sessions_per_tenant = 16;
	cfg.max_inflight_per_session = 8;
	cfg.session_idle_s = 600;
	cfg.task_retention_s = 600;
	cfg.task_result_max_bytes = 1 << 20;
	cfg.task_max_per_tenant = 100;
	srv = mcp_server_create(&cfg);
	if (tasks_open(&cfg, NULL, &tasks, err, sizeof(err)) < 0)
		return 1;
	mcp_server_set_tasks(srv, tasks);
	mcp_server_add_header_param(srv, "conversationId", "Conversation-Id");
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		mcp_server_add_tool(srv, &tools[i]);

	test_era();
	test_envelope();
	test_header_param();
	test_discover();
	test_mrtr();
	test_tasks();
	test_listen_and_logs();
	test_tenant_cap();

	mcp_server_close_sessions(srv);
	mcp_server_destroy(srv);
	tasks_close(tasks);
	return tap_done();
}
