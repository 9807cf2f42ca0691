/* SPDX-License-Identifier: MIT */
/*
 * fixtures_modern: the fixtures the conformance suite calls under protocol
 * 2026-07-28 and for the tasks extension (fixtures.h). Like the others,
 * each does what its scenario expects through the interfaces real tools
 * use: questions to the client go through mcp_call_input(), which turns
 * them into multi round-trip requests, task input or session requests as
 * the request's revision needs, and tasks are the core's, so the suite
 * exercises the real code. Compiled only with -Dfixtures=true.
 */
#include "fixtures.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"

static void nap_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* An elicitation/create params object asking for one property. */
static cJSON *elicit(const char *message, const char *prop, const char *type)
{
	cJSON *p = cJSON_CreateObject();
	cJSON *s = cJSON_AddObjectToObject(p, "requestedSchema");
	cJSON *props, *req;

	cJSON_AddStringToObject(p, "mode", "form");
	cJSON_AddStringToObject(p, "message", message);
	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(props, prop), "type",
	                        type);
	req = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(req, cJSON_CreateString(prop));
	return p;
}

/* A sampling/createMessage params object with one user message. */
static cJSON *sample(const char *text, int max_tokens)
{
	cJSON *p = cJSON_CreateObject();
	cJSON *msgs = cJSON_AddArrayToObject(p, "messages");
	cJSON *m = cJSON_CreateObject();
	cJSON *c = cJSON_AddObjectToObject(m, "content");

	cJSON_AddStringToObject(m, "role", "user");
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", text);
	cJSON_AddItemToArray(msgs, m);
	cJSON_AddNumberToObject(p, "maxTokens", max_tokens);
	return p;
}

/* content[field] of an elicitation answer, as text ("" when absent). */
static void answer_text(const cJSON *a, const char *field, char *out,
                        size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(a, "content"), field);
	char *s;

	if (cJSON_IsString(v)) {
		snprintf(out, len, "%s", v->valuestring);
		return;
	}
	s = v ? cJSON_PrintUnformatted(v) : NULL;
	snprintf(out, len, "%s", s ? s : "");
	cJSON_free(s);
}

/* The text of a sampling answer ("" when absent). */
static const char *sampled(const cJSON *a)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(a, "content"), "text");

	return cJSON_IsString(t) ? t->valuestring : "";
}

static int count_roots(const cJSON *a)
{
	return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(a, "roots"));
}

static void free_answers(struct mcp_input *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cJSON_Delete(in[i].result);
		cJSON_Delete(in[i].error);
	}
}

/* Asks one question; NULL when the core answers the request instead. */
static cJSON *ask(struct mcp_call *c, const char *key, const char *method,
                  cJSON *params)
{
	struct mcp_input in = {.key = key, .method = method, .params = params};

	if (mcp_call_input(c, &in, 1, 30000) < 0) {
		free_answers(&in, 1);
		return NULL;
	}
	return in.result;
}

/* ---- 2026-07-28 fixtures -------------------------------------------- */

static cJSON *missing_capability(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r =
	    ask(c, "sample", "sampling/createMessage", sample("Say hello", 20));
	cJSON *out;

	if (!r)
		return NULL;
	out = mcp_text_resultf(false, "Success: %s", sampled(r));
	cJSON_Delete(r);
	return out;
}

static cJSON *streaming_elicitation(void *d, struct mcp_call *c, const cJSON *a)
{
	char v[256];
	cJSON *r;

	mcp_call_progress(c, 50, 100, "asking");
	r = ask(c, "answer", "elicitation/create",
	        elicit("Anything to add?", "text", "string"));
	if (!r)
		return NULL;
	answer_text(r, "text", v, sizeof(v));
	cJSON_Delete(r);
	return mcp_text_resultf(false, "Streaming complete: %s", v);
}

static cJSON *logging_tool(void *d, struct mcp_call *c, const cJSON *a)
{
	mcp_call_log(c, MCP_LOG_INFO, NULL,
	             cJSON_CreateString("Diagnostic trace logging activated"));
	return mcp_text_result("Logging evaluated", false);
}

static cJSON *trigger_tools(void *d, struct mcp_call *c, const cJSON *a)
{
	mcp_server_tools_changed(d);
	return mcp_text_result("Mutation triggered", false);
}

static cJSON *trigger_prompts(void *d, struct mcp_call *c, const cJSON *a)
{
	mcp_server_prompts_changed(d);
	return mcp_text_result("Mutation triggered", false);
}

static cJSON *irr_elicitation(void *d, struct mcp_call *c, const cJSON *a)
{
	char name[256];
	cJSON *r = ask(c, "user_name", "elicitation/create",
	               elicit("What is your name?", "name", "string"));

	if (!r)
		return NULL;
	answer_text(r, "name", name, sizeof(name));
	cJSON_Delete(r);
	return mcp_text_resultf(false, "Hello, %s!", name);
}

static cJSON *irr_sampling(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r = ask(c, "sample_request", "sampling/createMessage",
	               sample("What is the capital of France?", 100));
	cJSON *out;

	if (!r)
		return NULL;
	out = mcp_text_resultf(false, "Sampling result: %s", sampled(r));
	cJSON_Delete(r);
	return out;
}

static cJSON *irr_roots(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r = ask(c, "roots_request", "roots/list", cJSON_CreateObject());
	int n;

	if (!r)
		return NULL;
	n = count_roots(r);
	cJSON_Delete(r);
	return mcp_text_resultf(false, "Found %d root(s)", n);
}

static cJSON *irr_state(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r = ask(c, "confirm", "elicitation/create",
	               elicit("Please confirm", "ok", "boolean"));

	if (!r)
		return NULL;
	cJSON_Delete(r);
	/* The core has verified the requestState this answer came with. */
	return mcp_text_result("state-ok: requestState validated", false);
}

static cJSON *irr_multiple(void *d, struct mcp_call *c, const cJSON *a)
{
	struct mcp_input in[3] = {
	    {.key = "user_name",
	     .method = "elicitation/create",
	     .params = elicit("What is your name?", "name", "string")},
	    {.key = "greeting",
	     .method = "sampling/createMessage",
	     .params = sample("Generate a greeting", 50)},
	    {.key = "client_roots",
	     .method = "roots/list",
	     .params = cJSON_CreateObject()},
	};
	char name[256];
	cJSON *out;

	if (mcp_call_input(c, in, 3, 30000) < 0) {
		free_answers(in, 3);
		return NULL;
	}
	answer_text(in[0].result, "name", name, sizeof(name));
	out =
	    mcp_text_resultf(false, "Name: %s; Greeting: %s; Roots: %d", name,
	                     sampled(in[1].result), count_roots(in[2].result));
	free_answers(in, 3);
	return out;
}

static cJSON *irr_multi_round(void *d, struct mcp_call *c, const cJSON *a)
{
	char name[256], color[256];
	cJSON *r = ask(c, "step1", "elicitation/create",
	               elicit("Step 1: What is your name?", "name", "string"));

	if (!r)
		return NULL;
	answer_text(r, "name", name, sizeof(name));
	cJSON_Delete(r);
	r = ask(
	    c, "step2", "elicitation/create",
	    elicit("Step 2: What is your favorite color?", "color", "string"));
	if (!r)
		return NULL;
	answer_text(r, "color", color, sizeof(color));
	cJSON_Delete(r);
	return mcp_text_resultf(
	    false, "Multi-round complete for %s who likes %s", name, color);
}

static cJSON *irr_tampered(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r = ask(c, "confirm", "elicitation/create",
	               elicit("Please confirm", "ok", "boolean"));

	if (!r)
		return NULL;
	cJSON_Delete(r);
	return mcp_text_result("integrity-ok: state verified", false);
}

static cJSON *irr_capabilities(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *caps = mcp_call_client_capabilities(c);
	struct mcp_input in[2];
	size_t n = 0;
	struct buf b;
	cJSON *out;

	if (cJSON_GetObjectItemCaseSensitive(caps, "elicitation"))
		in[n++] = (struct mcp_input){
		    .key = "elicit_input",
		    .method = "elicitation/create",
		    .params = elicit("Elicitation input", "value", "string")};
	if (cJSON_GetObjectItemCaseSensitive(caps, "sampling"))
		in[n++] =
		    (struct mcp_input){.key = "sample_input",
		                       .method = "sampling/createMessage",
		                       .params = sample("Sample request", 50)};
	if (n == 0)
		return mcp_text_result("No supported capabilities declared",
		                       false);
	if (mcp_call_input(c, in, n, 30000) < 0) {
		free_answers(in, n);
		return NULL;
	}
	buf_init(&b, 1024);
	for (size_t i = 0; i < n; i++) {
		if (buf_printf(&b, "%s%s", i ? "," : "", in[i].key) < 0)
			break;
	}
	out = mcp_text_resultf(false, "capabilities-ok: received %s",
	                       b.data ? b.data : "");
	buf_finish(&b);
	free_answers(in, n);
	return out;
}

/* ---- tasks extension fixtures --------------------------------------- */

static cJSON *greet(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "name");

	return mcp_text_resultf(false, "Hello, %s!",
	                        cJSON_IsString(n) ? n->valuestring : "World");
}

/* Waits ms, in steps, unless the call is cancelled; false if it was. */
static bool wait_or_cancel(struct mcp_call *c, unsigned ms)
{
	for (unsigned t = 0; t < ms; t += 50) {
		if (mcp_call_cancelled(c))
			return false;
		nap_ms(50);
	}
	return !mcp_call_cancelled(c);
}

static cJSON *slow_compute(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "seconds");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(a, "label");
	double secs = cJSON_IsNumber(s) ? s->valuedouble : 1;

	if (secs < 0 || secs > 600)
		return mcp_text_result("seconds must be from 0 to 600", true);
	mcp_call_progress(c, 0, secs, "computing");
	if (!wait_or_cancel(c, (unsigned)(secs * 1000)))
		return mcp_text_result("cancelled", true);
	return mcp_text_resultf(false, "Computed %s in %g s",
	                        cJSON_IsString(l) ? l->valuestring : "result",
	                        secs);
}

static cJSON *failing_job(void *d, struct mcp_call *c, const cJSON *a)
{
	if (!wait_or_cancel(c, 1000))
		return mcp_text_result("cancelled", true);
	return mcp_text_result("The job failed: its input was rejected", true);
}

static cJSON *protocol_error_job(void *d, struct mcp_call *c, const cJSON *a)
{
	/* NULL: an internal failure, a JSON-RPC error (-32603). */
	return NULL;
}

static cJSON *confirm_delete(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(a, "filename");
	const char *name = cJSON_IsString(f) ? f->valuestring : "file";
	cJSON *r, *ok, *out;
	char msg[300];

	snprintf(msg, sizeof(msg), "Delete %.200s?", name);
	r = ask(c, "confirm", "elicitation/create",
	        elicit(msg, "confirm", "boolean"));
	if (!r)
		return mcp_call_cancelled(c)
		           ? mcp_text_result("cancelled", true)
		           : NULL;
	ok = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(r, "content"), "confirm");
	out = mcp_text_resultf(false, "%s %s",
	                       cJSON_IsTrue(ok) ? "Deleted" : "Kept", name);
	cJSON_Delete(r);
	return out;
}

static cJSON *multi_input(void *d, struct mcp_call *c, const cJSON *a)
{
	struct mcp_input in[2] = {
	    {.key = "first",
	     .method = "elicitation/create",
	     .params = elicit("First name?", "name", "string")},
	    {.key = "second",
	     .method = "elicitation/create",
	     .params = elicit("Second name?", "name", "string")},
	};
	char n1[128], n2[128];

	if (mcp_call_input(c, in, 2, 30000) < 0) {
		free_answers(in, 2);
		return mcp_call_cancelled(c)
		           ? mcp_text_result("cancelled", true)
		           : NULL;
	}
	answer_text(in[0].result, "name", n1, sizeof(n1));
	answer_text(in[1].result, "name", n2, sizeof(n2));
	free_answers(in, 2);
	return mcp_text_resultf(false, "Got %s and %s", n1, n2);
}

static cJSON *tool_with_task(void *d, struct mcp_call *c, const cJSON *a)
{
	char name[256];
	cJSON *r = ask(c, "user_name", "elicitation/create",
	               elicit("What is your name?", "name", "string"));

	if (!r)
		return NULL;
	answer_text(r, "name", name, sizeof(name));
	cJSON_Delete(r);
	/* Input gathered in the request; the work goes on as a task. */
	(void)mcp_call_become_task(c);
	if (!wait_or_cancel(c, 500))
		return mcp_text_result("cancelled", true);
	return mcp_text_resultf(false, "Hello, %s, from a task!", name);
}

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"
#define DIAG(n, d, f)                                                          \
	{                                                                      \
		.name = (n), .description = (d), .input_schema = NO_ARGS,      \
		.call = (f)                                                    \
	}

static const struct tool_impl tools[] = {
    DIAG("test_missing_capability",
         "Needs the sampling capability (2026-07-28 -32021 check)",
         missing_capability),
    DIAG("test_streaming_elicitation",
         "Asks for input; the answer stream carries no server request",
         streaming_elicitation),
    DIAG("test_logging_tool", "Logs only when the request asks for a level",
         logging_tool),
    DIAG("test_input_required_result_elicitation",
         "MRTR: asks for a name (elicitation)", irr_elicitation),
    DIAG("test_input_required_result_sampling",
         "MRTR: asks for a completion (sampling)", irr_sampling),
    DIAG("test_input_required_result_list_roots",
         "MRTR: asks for the client's roots", irr_roots),
    DIAG("test_input_required_result_request_state",
         "MRTR: the answer comes back with the request state", irr_state),
    DIAG("test_input_required_result_multiple_inputs",
         "MRTR: three questions at once", irr_multiple),
    DIAG("test_input_required_result_multi_round",
         "MRTR: two rounds of questions", irr_multi_round),
    DIAG("test_input_required_result_tampered_state",
         "MRTR: a tampered request state is refused", irr_tampered),
    DIAG("test_input_required_result_capabilities",
         "MRTR: asks only what the client declared", irr_capabilities),
    {.name = "greet",
     .description = "Says hello to 'name' (never a task)",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"name\":"
                     "{\"type\":\"string\"}}}",
     .read_only = true,
     .call = greet},
    {.name = "slow_compute",
     .description = "Waits 'seconds' (a task when the client allows it)",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"seconds\":"
                     "{\"type\":\"number\"},\"label\":{\"type\":"
                     "\"string\"}}}",
     .read_only = true,
     .call = slow_compute,
     .tasks = MCP_TASK_OPTIONAL},
    {.name = "failing_job",
     .description = "Fails as a tool after a second (only as a task)",
     .input_schema = NO_ARGS,
     .call = failing_job,
     .tasks = MCP_TASK_REQUIRED},
    {.name = "protocol_error_job",
     .description = "Fails with a JSON-RPC error (a task when allowed)",
     .input_schema = NO_ARGS,
     .call = protocol_error_job,
     .tasks = MCP_TASK_OPTIONAL},
    {.name = "confirm_delete",
     .description = "Asks to confirm before 'deleting' filename",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"filename\":"
                     "{\"type\":\"string\"}}}",
     .call = confirm_delete,
     .tasks = MCP_TASK_OPTIONAL},
    {.name = "multi_input",
     .description = "Asks two questions at once",
     .input_schema = NO_ARGS,
     .call = multi_input,
     .tasks = MCP_TASK_OPTIONAL},
    {.name = "test_tool_with_task",
     .description = "Asks for a name, then runs on as a task",
     .input_schema = NO_ARGS,
     .call = tool_with_task,
     .tasks = MCP_TASK_REQUIRED,
     .task_deferred = true},
};

/* Tools that change the lists: they need the server. */
static struct tool_impl triggers[] = {
    DIAG("test_trigger_tool_change", "Tells listeners tools/list changed",
         trigger_tools),
    DIAG("test_trigger_prompt_change", "Tells listeners prompts/list changed",
         trigger_prompts),
};

/* ---- prompts ------------------------------------------------------- */

static cJSON *irr_prompt(void *d, struct mcp_call *c, const cJSON *a, char *err,
                         size_t errlen)
{
	char ctx[256], text[300];
	cJSON *r = ask(
	    c, "user_context", "elicitation/create",
	    elicit("What context should the prompt use?", "context", "string"));
	cJSON *out, *msgs, *m, *content;

	if (!r) {
		snprintf(err, errlen, "the context could not be asked for");
		return NULL;
	}
	answer_text(r, "context", ctx, sizeof(ctx));
	cJSON_Delete(r);
	out = cJSON_CreateObject();
	msgs = cJSON_AddArrayToObject(out, "messages");
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "role", "user");
	content = cJSON_AddObjectToObject(m, "content");
	cJSON_AddStringToObject(content, "type", "text");
	snprintf(text, sizeof(text), "Prompt with context: %s", ctx);
	cJSON_AddStringToObject(content, "text", text);
	cJSON_AddItemToArray(msgs, m);
	return out;
}

static const struct prompt_impl prompts[] = {
    {.name = "test_input_required_result_prompt",
     .description = "MRTR: asks for context before it is built",
     .get = irr_prompt},
};

void fixtures_register_modern(struct mcp_server *srv)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		mcp_server_add_tool(srv, &tools[i]);
	for (size_t i = 0; i < sizeof(triggers) / sizeof(triggers[0]); i++) {
		triggers[i].data = srv;
		mcp_server_add_tool(srv, &triggers[i]);
	}
	for (size_t i = 0; i < sizeof(prompts) / sizeof(prompts[0]); i++)
		mcp_server_add_prompt(srv, &prompts[i]);
}
