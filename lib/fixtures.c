/* SPDX-License-Identifier: MIT */
/*
 * fixtures: conformance-suite fixtures. Each tool does what the suite's
 * scenario expects, through the same interfaces real tools use, so passing
 * the suite exercises the real transport, streams and server requests.
 */
#include "fixtures.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "rpc.h"

static const char png_b64[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg==";
static const char wav_b64[] =
    "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static cJSON *content_result(cJSON *item)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *c = cJSON_AddArrayToObject(r, "content");

	cJSON_AddItemToArray(c, item);
	return r;
}

static cJSON *image_item(void)
{
	cJSON *i = cJSON_CreateObject();

	cJSON_AddStringToObject(i, "type", "image");
	cJSON_AddStringToObject(i, "data", png_b64);
	cJSON_AddStringToObject(i, "mimeType", "image/png");
	return i;
}

static cJSON *resource_item(const char *uri, const char *mime, const char *text)
{
	cJSON *i = cJSON_CreateObject();
	cJSON *res = cJSON_AddObjectToObject(i, "resource");

	cJSON_AddStringToObject(i, "type", "resource");
	cJSON_AddStringToObject(res, "uri", uri);
	cJSON_AddStringToObject(res, "mimeType", mime);
	cJSON_AddStringToObject(res, "text", text);
	return i;
}

static cJSON *text_item(const char *text)
{
	cJSON *i = cJSON_CreateObject();

	cJSON_AddStringToObject(i, "type", "text");
	cJSON_AddStringToObject(i, "text", text);
	return i;
}

static cJSON *simple_text(void *d, struct mcp_call *c, const cJSON *a)
{
	return mcp_text_result("This is a simple text response for testing.",
	                       false);
}

static cJSON *image_content(void *d, struct mcp_call *c, const cJSON *a)
{
	return content_result(image_item());
}

static cJSON *audio_content(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *i = cJSON_CreateObject();

	cJSON_AddStringToObject(i, "type", "audio");
	cJSON_AddStringToObject(i, "data", wav_b64);
	cJSON_AddStringToObject(i, "mimeType", "audio/wav");
	return content_result(i);
}

static cJSON *embedded_resource(void *d, struct mcp_call *c, const cJSON *a)
{
	return content_result(
	    resource_item("test://embedded-resource", "text/plain",
	                  "This is an embedded resource content."));
}

static cJSON *multiple_types(void *d, struct mcp_call *c, const cJSON *a)
{
	cJSON *r = content_result(text_item("Multiple content types test:"));
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, "content");

	cJSON_AddItemToArray(arr, image_item());
	cJSON_AddItemToArray(
	    arr,
	    resource_item("test://mixed-content-resource", "application/json",
	                  "{\"test\":\"data\",\"value\":123}"));
	return r;
}

static cJSON *with_logging(void *d, struct mcp_call *c, const cJSON *a)
{
	static const char *const msgs[] = {"Tool execution started",
	                                   "Tool processing data",
	                                   "Tool execution completed"};

	for (size_t i = 0; i < 3; i++) {
		if (i)
			sleep_ms(50);
		mcp_call_log(c, MCP_LOG_INFO, NULL,
		             cJSON_CreateString(msgs[i]));
	}
	return mcp_text_result("Tool with logging executed successfully",
	                       false);
}

static cJSON *with_progress(void *d, struct mcp_call *c, const cJSON *a)
{
	for (int i = 0; i <= 2; i++) {
		char msg[64];

		if (i)
			sleep_ms(50);
		snprintf(msg, sizeof(msg), "Completed step %d of 100", i * 50);
		mcp_call_progress(c, i * 50, 100, msg);
	}
	return mcp_text_result("Progress test completed", false);
}

static cJSON *error_handling(void *d, struct mcp_call *c, const cJSON *a)
{
	return mcp_text_result(
	    "This tool intentionally returns an error for testing", true);
}

static cJSON *reconnection(void *d, struct mcp_call *c, const cJSON *a)
{
	sleep_ms(50);
	mcp_call_close_stream(c, 500);
	sleep_ms(100);
	return mcp_text_result(
	    "Reconnection test completed successfully. If you received "
	    "this, the client properly reconnected after stream closure.",
	    false);
}

static cJSON *sampling(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(a, "prompt");
	cJSON *params = cJSON_CreateObject(), *msgs, *m, *content;
	cJSON *result = NULL, *error = NULL, *out;
	const cJSON *t;
	int r;

	if (!cJSON_IsString(prompt))
		return mcp_text_result("argument 'prompt' (string) is required",
		                       true);
	msgs = cJSON_AddArrayToObject(params, "messages");
	m = cJSON_CreateObject();
	cJSON_AddItemToArray(msgs, m);
	cJSON_AddStringToObject(m, "role", "user");
	content = cJSON_AddObjectToObject(m, "content");
	cJSON_AddStringToObject(content, "type", "text");
	cJSON_AddStringToObject(content, "text", prompt->valuestring);
	cJSON_AddNumberToObject(params, "maxTokens", 100);
	r = mcp_call_request(c, "sampling/createMessage", params, 30000,
	                     &result, &error);
	if (r < 0) {
		cJSON_Delete(error);
		return mcp_text_resultf(
		    false, "Sampling not supported or error: %s", strerror(-r));
	}
	t = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(result, "content"), "text");
	out = mcp_text_resultf(false, "LLM response: %s",
	                       cJSON_IsString(t) ? t->valuestring : "");
	cJSON_Delete(result);
	return out;
}

static cJSON *elicit(struct mcp_call *c, const char *params_json,
                     const char *message, const char *prefix)
{
	cJSON *params = cJSON_Parse(params_json);
	cJSON *result = NULL, *error = NULL, *out;
	const cJSON *action, *content;
	char *cs;
	int r;

	if (message)
		cJSON_AddStringToObject(params, "message", message);
	r = mcp_call_request(c, "elicitation/create", params, 30000, &result,
	                     &error);
	if (r < 0) {
		cJSON_Delete(error);
		return mcp_text_resultf(false,
		                        "Elicitation not supported or error: "
		                        "%s",
		                        strerror(-r));
	}
	action = cJSON_GetObjectItemCaseSensitive(result, "action");
	content = cJSON_GetObjectItemCaseSensitive(result, "content");
	cs = content ? cJSON_PrintUnformatted(content) : NULL;
	out = mcp_text_resultf(
	    false, "%s: action=%s, content=%s", prefix,
	    cJSON_IsString(action) ? action->valuestring : "?", cs ? cs : "{}");
	cJSON_free(cs);
	cJSON_Delete(result);
	return out;
}

static cJSON *elicitation(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(a, "message");

	if (!cJSON_IsString(msg))
		return mcp_text_result(
		    "argument 'message' (string) is required", true);
	return elicit(
	    c,
	    "{\"requestedSchema\":{\"type\":\"object\",\"properties\":"
	    "{\"username\":{\"type\":\"string\",\"description\":"
	    "\"User's response\"},\"email\":{\"type\":\"string\","
	    "\"description\":\"User's email address\"}},\"required\":"
	    "[\"username\",\"email\"]}}",
	    msg->valuestring, "User response");
}

static cJSON *elicitation_defaults(void *d, struct mcp_call *c, const cJSON *a)
{
	return elicit(
	    c,
	    "{\"mode\":\"form\",\"message\":\"Please review and update the "
	    "form fields with defaults\",\"requestedSchema\":{\"type\":"
	    "\"object\",\"properties\":{\"name\":{\"type\":\"string\","
	    "\"description\":\"User name\",\"default\":\"John Doe\"},"
	    "\"age\":{\"type\":\"integer\",\"description\":\"User age\","
	    "\"default\":30},\"score\":{\"type\":\"number\","
	    "\"description\":\"User score\",\"default\":95.5},\"status\":"
	    "{\"type\":\"string\",\"description\":\"User status\",\"enum\":"
	    "[\"active\",\"inactive\",\"pending\"],\"default\":\"active\"},"
	    "\"verified\":{\"type\":\"boolean\",\"description\":"
	    "\"Verification status\",\"default\":true}},\"required\":[]}}",
	    NULL, "Elicitation completed");
}

static cJSON *elicitation_enums(void *d, struct mcp_call *c, const cJSON *a)
{
	return elicit(
	    c,
	    "{\"mode\":\"form\",\"message\":\"Please select options from "
	    "the enum fields\",\"requestedSchema\":{\"type\":\"object\","
	    "\"properties\":{\"untitledSingle\":{\"type\":\"string\","
	    "\"description\":\"Select one option\",\"enum\":[\"option1\","
	    "\"option2\",\"option3\"]},\"titledSingle\":{\"type\":"
	    "\"string\",\"description\":\"Select one option with titles\","
	    "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First Option\"},"
	    "{\"const\":\"value2\",\"title\":\"Second Option\"},{\"const\":"
	    "\"value3\",\"title\":\"Third Option\"}]},\"legacyEnum\":"
	    "{\"type\":\"string\",\"description\":\"Select one option "
	    "(legacy)\",\"enum\":[\"opt1\",\"opt2\",\"opt3\"],\"enumNames\":"
	    "[\"Option One\",\"Option Two\",\"Option Three\"]},"
	    "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select "
	    "multiple options\",\"minItems\":1,\"maxItems\":3,\"items\":"
	    "{\"type\":\"string\",\"enum\":[\"option1\",\"option2\","
	    "\"option3\"]}},\"titledMulti\":{\"type\":\"array\","
	    "\"description\":\"Select multiple options with titles\","
	    "\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":[{\"const\":"
	    "\"value1\",\"title\":\"First Choice\"},{\"const\":\"value2\","
	    "\"title\":\"Second Choice\"},{\"const\":\"value3\",\"title\":"
	    "\"Third Choice\"}]}}},\"required\":[]}}",
	    NULL, "Elicitation completed");
}

static cJSON *schema_2020_12(void *d, struct mcp_call *c, const cJSON *a)
{
	char *s = cJSON_PrintUnformatted(a);
	cJSON *r = mcp_text_resultf(
	    false, "JSON Schema 2020-12 tool called with: %s", s ? s : "{}");

	cJSON_free(s);
	return r;
}

/* Not a conformance fixture: a cancellable wait for the integration tests. */
static cJSON *sleep_tool(void *d, struct mcp_call *c, const cJSON *a)
{
	const cJSON *secs = cJSON_GetObjectItemCaseSensitive(a, "seconds");
	double total = cJSON_IsNumber(secs) ? secs->valuedouble : 5;
	int steps = (int)(total * 20);

	if (steps < 0 || steps > 20 * 600)
		return mcp_text_result("seconds must be from 0 to 600", true);
	for (int i = 0; i < steps; i++) {
		if (mcp_call_cancelled(c))
			return mcp_text_result("cancelled", true);
		if (i % 20 == 0)
			mcp_call_progress(c, i / 20, total, "sleeping");
		sleep_ms(50);
	}
	return mcp_text_resultf(false, "slept %g s", total);
}

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"

static const struct tool_impl tools[] = {
    {.name = "test_simple_text",
     .description = "Tests simple text content response",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = simple_text},
    {.name = "test_image_content",
     .description = "Tests image content response",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = image_content},
    {.name = "test_audio_content",
     .description = "Tests audio content response",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = audio_content},
    {.name = "test_embedded_resource",
     .description = "Tests embedded resource content response",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = embedded_resource},
    {.name = "test_multiple_content_types",
     .description = "Tests response with multiple content types (text, "
                    "image, resource)",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = multiple_types},
    {.name = "test_tool_with_logging",
     .description = "Tests tool that emits log messages during execution",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = with_logging},
    {.name = "test_tool_with_progress",
     .description = "Tests tool that reports progress notifications",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = with_progress},
    {.name = "test_error_handling",
     .description = "Tests error response handling",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = error_handling},
    {.name = "test_reconnection",
     .description = "Tests SSE stream disconnection and client "
                    "reconnection (SEP-1699). Server will close the "
                    "stream mid-call and send the result after client "
                    "reconnects.",
     .input_schema = NO_ARGS,
     .read_only = true,
     .call = reconnection},
    {.name = "test_sampling",
     .description = "Tests server-initiated sampling (LLM completion "
                    "request)",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"prompt\":"
                     "{\"type\":\"string\",\"description\":\"The prompt "
                     "to send to the LLM\"}},\"required\":[\"prompt\"]}",
     .call = sampling},
    {.name = "test_elicitation",
     .description = "Tests server-initiated elicitation (user input "
                    "request)",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"message\":"
                     "{\"type\":\"string\",\"description\":\"The message "
                     "to show the user\"}},\"required\":[\"message\"]}",
     .call = elicitation},
    {.name = "test_elicitation_sep1034_defaults",
     .description = "Tests elicitation with default values per SEP-1034",
     .input_schema = NO_ARGS,
     .call = elicitation_defaults},
    {.name = "test_elicitation_sep1330_enums",
     .description = "Tests elicitation with enum schema improvements per "
                    "SEP-1330",
     .input_schema = NO_ARGS,
     .call = elicitation_enums},
    {.name = "test_sleep",
     .description = "Sleeps for 'seconds' (default 5), reporting progress "
                    "each second; stops early when cancelled. Integration "
                    "test fixture.",
     .input_schema = "{\"type\":\"object\",\"properties\":{\"seconds\":"
                     "{\"type\":\"number\"}}}",
     .read_only = true,
     .call = sleep_tool},
    {.name = "json_schema_2020_12_tool",
     .description = "Tool with JSON Schema 2020-12 features for "
                    "conformance testing (SEP-1613)",
     .input_schema =
         "{\"$schema\":\"https://json-schema.org/draft/2020-12/"
         "schema\",\"type\":\"object\",\"$defs\":{\"address\":{"
         "\"$anchor\":\"addressDef\",\"type\":\"object\",\"properties\":"
         "{\"street\":{\"type\":\"string\"},\"city\":{\"type\":"
         "\"string\"}}}},\"properties\":{\"name\":{\"type\":\"string\"},"
         "\"address\":{\"$ref\":\"#/$defs/address\"},\"contactMethod\":"
         "{\"type\":\"string\",\"enum\":[\"phone\",\"email\"]},"
         "\"phone\":{\"type\":\"string\"},\"email\":{\"type\":"
         "\"string\"}},\"allOf\":[{\"anyOf\":[{\"required\":"
         "[\"phone\"]},{\"required\":[\"email\"]}]}],\"if\":{"
         "\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},"
         "\"required\":[\"contactMethod\"]},\"then\":{\"required\":"
         "[\"phone\"]},\"else\":{\"required\":[\"email\"]},"
         "\"additionalProperties\":false}",
     .read_only = true,
     .call = schema_2020_12},
};

/* ---- resources ---------------------------------------------------- */

static cJSON *resource_entry(const char *uri, const char *name,
                             const char *title, const char *desc,
                             const char *mime)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "uri", uri);
	cJSON_AddStringToObject(o, "name", name);
	if (title)
		cJSON_AddStringToObject(o, "title", title);
	cJSON_AddStringToObject(o, "description", desc);
	cJSON_AddStringToObject(o, "mimeType", mime);
	return o;
}

static void res_list(void *d, struct mcp_call *c, cJSON *list)
{
	cJSON_AddItemToArray(
	    list,
	    resource_entry("test://static-text", "static-text",
	                   "Static Text Resource",
	                   "A static text resource for testing", "text/plain"));
	cJSON_AddItemToArray(
	    list, resource_entry("test://static-binary", "static-binary",
	                         "Static Binary Resource",
	                         "A static binary resource (image) for "
	                         "testing",
	                         "image/png"));
	cJSON_AddItemToArray(
	    list,
	    resource_entry("test://watched-resource", "watched-resource", NULL,
	                   "A resource that auto-updates every 3 "
	                   "seconds",
	                   "text/plain"));
}

static void res_templates(void *d, cJSON *list)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "uriTemplate", "test://template/{id}/data");
	cJSON_AddStringToObject(o, "name", "template");
	cJSON_AddStringToObject(o, "title", "Resource Template");
	cJSON_AddStringToObject(o, "description",
	                        "A resource template with parameter "
	                        "substitution");
	cJSON_AddStringToObject(o, "mimeType", "application/json");
	cJSON_AddItemToArray(list, o);
}

static cJSON *one_content(const char *uri, const char *mime, const char *key,
                          const char *value)
{
	cJSON *arr = cJSON_CreateArray();
	cJSON *o = cJSON_CreateObject();

	cJSON_AddItemToArray(arr, o);
	cJSON_AddStringToObject(o, "uri", uri);
	cJSON_AddStringToObject(o, "mimeType", mime);
	cJSON_AddStringToObject(o, key, value);
	return arr;
}

static int res_read(void *d, struct mcp_call *c, const char *uri,
                    cJSON **contents, char *err, size_t errlen)
{
	static const char tpl[] = "test://template/";

	if (strcmp(uri, "test://static-text") == 0) {
		*contents = one_content(uri, "text/plain", "text",
		                        "This is the content of the static "
		                        "text resource.");
		return 0;
	}
	if (strcmp(uri, "test://static-binary") == 0) {
		*contents = one_content(uri, "image/png", "blob", png_b64);
		return 0;
	}
	if (strcmp(uri, "test://watched-resource") == 0) {
		*contents = one_content(uri, "text/plain", "text",
		                        "Watched resource content");
		return 0;
	}
	if (strncmp(uri, tpl, sizeof(tpl) - 1) == 0) {
		const char *id = uri + sizeof(tpl) - 1;
		const char *slash = strchr(id, '/');
		cJSON *doc;
		char *text, data[300];

		if (!slash || strcmp(slash, "/data") != 0 || slash == id ||
		    slash - id > 200)
			return -ENOENT;
		doc = cJSON_CreateObject();
		snprintf(data, sizeof(data), "%.*s", (int)(slash - id), id);
		cJSON_AddStringToObject(doc, "id", data);
		cJSON_AddTrueToObject(doc, "templateTest");
		snprintf(data, sizeof(data), "Data for ID: %.*s",
		         (int)(slash - id), id);
		cJSON_AddStringToObject(doc, "data", data);
		text = cJSON_PrintUnformatted(doc);
		cJSON_Delete(doc);
		*contents = one_content(uri, "application/json", "text",
		                        text ? text : "{}");
		cJSON_free(text);
		return 0;
	}
	(void)err;
	(void)errlen;
	return -ENOENT;
}

static const struct resource_provider resources = {
    .name = "fixtures",
    .list = res_list,
    .templates = res_templates,
    .read = res_read,
};

/* ---- prompts ------------------------------------------------------ */

static cJSON *prompt_result(cJSON *first, cJSON *second)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *msgs = cJSON_AddArrayToObject(r, "messages");

	for (cJSON *content = first; content;
	     content = content == first ? second : NULL) {
		cJSON *m = cJSON_CreateObject();

		cJSON_AddStringToObject(m, "role", "user");
		cJSON_AddItemToObject(m, "content", content);
		cJSON_AddItemToArray(msgs, m);
	}
	return r;
}

static cJSON *p_simple(void *d, struct mcp_call *c, const cJSON *a, char *err,
                       size_t errlen)
{
	return prompt_result(text_item("This is a simple prompt for testing."),
	                     NULL);
}

static const char *str_arg(const cJSON *a, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static cJSON *p_args(void *d, struct mcp_call *c, const cJSON *a, char *err,
                     size_t errlen)
{
	const char *a1 = str_arg(a, "arg1"), *a2 = str_arg(a, "arg2");
	struct buf b;
	cJSON *r;

	if (!a1 || !a2) {
		snprintf(err, errlen, "arguments arg1 and arg2 are required");
		return NULL;
	}
	buf_init(&b, 65536);
	if (buf_printf(&b, "Prompt with arguments: arg1='%s', arg2='%s'", a1,
	               a2) < 0) {
		buf_finish(&b);
		snprintf(err, errlen, "arguments too long");
		return NULL;
	}
	r = prompt_result(text_item(b.data), NULL);
	buf_finish(&b);
	return r;
}

static cJSON *p_resource(void *d, struct mcp_call *c, const cJSON *a, char *err,
                         size_t errlen)
{
	const char *uri = str_arg(a, "resourceUri");

	if (!uri) {
		snprintf(err, errlen, "argument resourceUri is required");
		return NULL;
	}
	return prompt_result(
	    resource_item(uri, "text/plain",
	                  "Embedded resource content for testing."),
	    text_item("Please process the embedded resource above."));
}

static cJSON *p_image(void *d, struct mcp_call *c, const cJSON *a, char *err,
                      size_t errlen)
{
	return prompt_result(image_item(),
	                     text_item("Please analyze the image above."));
}

static const struct prompt_impl prompts[] = {
    {.name = "test_simple_prompt",
     .description = "A simple prompt without arguments",
     .get = p_simple},
    {.name = "test_prompt_with_arguments",
     .description = "A prompt with required arguments",
     .arguments_json = "[{\"name\":\"arg1\",\"description\":\"First test "
                       "argument\",\"required\":true},{\"name\":\"arg2\","
                       "\"description\":\"Second test argument\","
                       "\"required\":true}]",
     .get = p_args},
    {.name = "test_prompt_with_embedded_resource",
     .description = "A prompt that includes an embedded resource",
     .arguments_json = "[{\"name\":\"resourceUri\",\"description\":\"URI "
                       "of the resource to embed\",\"required\":true}]",
     .get = p_resource},
    {.name = "test_prompt_with_image",
     .description = "A prompt that includes image content",
     .get = p_image},
};

static cJSON *complete(void *d, const cJSON *ref, const cJSON *arg,
                       const cJSON *ctx)
{
	return cJSON_CreateArray();
}

void fixtures_register(struct mcp_server *srv)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		mcp_server_add_tool(srv, &tools[i]);
	mcp_server_add_resources(srv, &resources);
	for (size_t i = 0; i < sizeof(prompts) / sizeof(prompts[0]); i++)
		mcp_server_add_prompt(srv, &prompts[i]);
	mcp_server_set_completion(srv, complete, NULL);
	fixtures_register_modern(srv);
}
