/* SPDX-License-Identifier: MIT */
/*
 * fuzz_mcp_modern: a 2026-07-28 POST as the MCP core sees it: header lines
 * ("Name: value"), an empty line, then the body. It goes through the era
 * decision, the envelope checks (_meta fields, MCP-Protocol-Version,
 * Mcp-Method, Mcp-Name and Base64, Mcp-Param-*), inputResponses and
 * requestState, and method dispatch. The server is draining, so a
 * tools/call is answered on this thread after its checks. Every answer must
 * be one JSON object or an empty 202.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config.h"
#include "mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HDRS 16

struct hdrs {
	char *name[MAX_HDRS], *value[MAX_HDRS];
	size_t n;
};

static const char *lookup(void *ctx, const char *name)
{
	struct hdrs *h = ctx;

	for (size_t i = 0; i < h->n; i++) {
		if (strcasecmp(h->name[i], name) == 0)
			return h->value[i];
	}
	return NULL;
}

static cJSON *noop(void *d, struct mcp_call *c, const cJSON *a)
{
	return mcp_text_result("done", false);
}

/* A prompt that asks for input: multi round-trip on this thread. */
static cJSON *ask(void *d, struct mcp_call *c, const cJSON *a, char *err,
                  size_t errlen)
{
	struct mcp_input in = {
	    .key = "k",
	    .method = "elicitation/create",
	    .params = cJSON_CreateObject(),
	};
	cJSON *r;

	if (mcp_call_input(c, &in, 1, 10) < 0) {
		cJSON_Delete(in.result);
		cJSON_Delete(in.error);
		return NULL;
	}
	cJSON_Delete(in.result);
	r = cJSON_CreateObject();
	cJSON_AddArrayToObject(r, "messages");
	return r;
}

static const struct tool_impl tool = {
    .name = "t",
    .description = "t",
    .input_schema = "{\"type\":\"object\",\"properties\":{\"conversationId\":"
                    "{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},"
                    "\"b\":{\"type\":\"boolean\"}}}",
    .call = noop,
};

static const struct prompt_impl prompt = {
    .name = "p",
    .description = "p",
    .get = ask,
};

static struct mcp_server *server(void)
{
	static struct config cfg = {.keepalive_s = 1,
	                            .max_json_depth = 64,
	                            .max_sessions_per_tenant = 4,
	                            .max_inflight_per_session = 4};
	static struct mcp_server *srv;

	if (!srv) {
		srv = mcp_server_create(&cfg);
		mcp_server_add_tool(srv, &tool);
		mcp_server_add_prompt(srv, &prompt);
		mcp_server_add_header_param(srv, "conversationId",
		                            "Conversation-Id");
		mcp_server_add_header_param(srv, "n", "N");
		mcp_server_add_header_param(srv, "b", "B");
		/* Calls are answered at once, on this thread. */
		(void)mcp_server_drain(srv, 0);
	}
	return srv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *p, *end;
	struct hdrs h = {.n = 0};
	struct mcp_http_req req = {.tenant = "f", .header = lookup, .hctx = &h};
	struct mcp_http_resp resp;
	cJSON *answer;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	p = text;
	end = text + size;
	/* Header lines up to an empty line; the rest is the body. */
	while (p < end && *p != '\n' && h.n < MAX_HDRS) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *colon;

		if (!nl)
			break;
		*nl = '\0';
		colon = strchr(p, ':');
		if (colon) {
			*colon = '\0';
			h.name[h.n] = p;
			h.value[h.n++] = colon + 1;
		}
		p = nl + 1;
	}
	if (p < end && *p == '\n')
		p++;
	req.protocol_version = lookup(&h, "MCP-Protocol-Version");
	req.session_id = lookup(&h, "Mcp-Session-Id");
	req.body = p;
	req.body_len = (size_t)(end - p);
	mcp_http_post(server(), &req, &resp);
	if (resp.stream) {
		char buf[4096];

		while (mcp_stream_read(resp.stream, buf, sizeof(buf), 0) > 0)
			;
	} else if (resp.body) {
		answer = cJSON_Parse(resp.body);
		if (!cJSON_IsObject(answer) && !cJSON_IsArray(answer))
			abort();
		cJSON_Delete(answer);
	} else if (resp.status != 202 && resp.status != 200) {
		abort();
	}
	mcp_http_resp_finish(&resp);
	free(text);
	return 0;
}
