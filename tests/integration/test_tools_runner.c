/* SPDX-License-Identifier: MIT */
/*
 * test_tools_runner: run_code and list_runners through the MCP core
 * (mcp_http_post, no HTTP socket) with the real runner, the real workspace
 * manager and the real Docker engine: the descriptions and the language
 * enum come from the images, results carry structuredContent per the
 * outputSchema, progress is sent, and every failure is an isError result
 * that says what to do. Skips when no engine or runner image is there.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "runner.h"
#include "tap.h"
#include "tools/tools_run.h"
#include "util/buf.h"
#include "util/log.h"
#include "workspace/workspace.h"

static struct mcp_server *srv;
static char session[80];

/* POSTs one message; returns the JSON-RPC response with id (caller owns). */
static cJSON *post(const char *body, struct buf *events)
{
	struct mcp_http_req req = {.tenant = "default",
	                           .session_id = session[0] ? session : NULL,
	                           .protocol_version =
	                               session[0] ? "2025-06-18" : NULL,
	                           .body = body,
	                           .body_len = strlen(body)};
	struct mcp_http_resp resp;
	cJSON *out = NULL;
	char chunk[65536];

	mcp_http_post(srv, &req, &resp);
	if (resp.session_id[0])
		snprintf(session, sizeof(session), "%s", resp.session_id);
	if (resp.body)
		out = cJSON_Parse(resp.body);
	if (resp.stream) {
		struct buf all;
		ssize_t n;

		buf_init(&all, 0);
		while ((n = mcp_stream_read(resp.stream, chunk, sizeof(chunk),
		                            1000)) >= 0)
			if (n > 0 && buf_append(&all, chunk, (size_t)n) < 0)
				break;
		/* SSE: the last "data:" line holding an id is the answer. */
		for (char *line = all.data; line && *line;) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			if (strncmp(line, "data: ", 6) == 0) {
				cJSON *j = cJSON_Parse(line + 6);

				if (j && cJSON_GetObjectItem(j, "id") &&
				    !cJSON_GetObjectItem(j, "method")) {
					cJSON_Delete(out);
					out = j;
				} else {
					if (events && buf_printf(events, "%s\n",
					                         line + 6) < 0)
						break;
					cJSON_Delete(j);
				}
			}
			line = nl ? nl + 1 : NULL;
		}
		buf_finish(&all);
	}
	mcp_http_resp_finish(&resp);
	return out;
}

static cJSON *call_tool(const char *args_json, struct buf *events)
{
	static int id = 10;
	char *body;
	size_t len = strlen(args_json) + 256;
	cJSON *r;

	body = malloc(len);
	snprintf(body, len,
	         "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
	         "\"params\":{%s,\"_meta\":{\"progressToken\":\"p%d\"}}}",
	         id, args_json, id);
	id++;
	r = post(body, events);
	free(body);
	return r;
}

static const cJSON *sc(const cJSON *resp, const char *k)
{
	return cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(resp, "result"),
	                        "structuredContent"),
	    k);
}

static bool is_error(const cJSON *resp)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(resp, "result"), "isError"));
}

static const char *text_of(const cJSON *resp)
{
	const cJSON *c = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(resp, "result"), "content"),
	    0);

	return cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
}

struct canceller {
	unsigned ms;
	const char *body;
};

static void *cancel_main(void *arg)
{
	struct canceller *c = arg;

	usleep(c->ms * 1000);
	cJSON_Delete(post(c->body, NULL));
	return NULL;
}

int main(void)
{
	static char root[] = "/tmp/mcpsd-tools-XXXXXX";
	struct config cfg;
	struct runner *r = NULL;
	struct workspace_mgr *wm = NULL;
	struct catalog *cat;
	struct buf ev;
	cJSON *resp, *tools;
	const cJSON *x, *t;
	char err[512];

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(root))
		return 1;
	setenv("SANDBOX_ROOT", root, 1);
	setenv("MCP_AUTH", "none", 1);
	{
		char inst[32];

		snprintf(inst, sizeof(inst), "it-tools-%d", (int)getpid());
		setenv("MCP_INSTANCE_NAME", inst, 1);
	}
	setenv("SANDBOX_MAX_TIMEOUT_SECONDS", "120", 1);
	setenv("WORKSPACE_QUOTA_MODE", "none", 1);
	log_set_level(LOG_LEVEL_WARN);
	memset(&cfg, 0, sizeof(cfg));
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0 ||
	    runner_create(&cfg, &r, err, sizeof(err)) < 0 ||
	    workspace_mgr_create(&cfg, &wm, err, sizeof(err)) < 0) {
		printf("Bail out! %s\n", err);
		return 1;
	}
	cat = runner_catalog_get(r);
	if (catalog_find(cat, "python") == NULL) {
		printf("1..0 # SKIP no python runner or no engine\n");
		return 0;
	}
	catalog_put(cat);
	srv = mcp_server_create(&cfg);
	tools_run_register(srv, r, wm);

	cJSON_Delete(post("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	                  "\"initialize\",\"params\":{\"protocolVersion\":"
	                  "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":"
	                  "{\"name\":\"t\",\"version\":\"1\"}}}",
	                  NULL));
	ok(session[0] != '\0', "session %s", session);
	cJSON_Delete(post("{\"jsonrpc\":\"2.0\",\"method\":"
	                  "\"notifications/initialized\"}",
	                  NULL));

	resp = post("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
	            NULL);
	tools =
	    cJSON_GetObjectItem(cJSON_GetObjectItem(resp, "result"), "tools");
	t = NULL;
	cJSON_ArrayForEach (x, tools) {
		if (strcmp(cJSON_GetObjectItem(x, "name")->valuestring,
		           "run_code") == 0)
			t = x;
	}
	ok(t != NULL, "run_code listed");
	x = cJSON_GetObjectItem(t, "description");
	/* The versions the labels name (Debian 12's images say 3.11 and
	 * numpy 1.24, Debian 13's 3.13 and numpy 2.2). */
	ok(x && strstr(x->valuestring, "python 3.") &&
	       strstr(x->valuestring, "numpy "),
	   "description built from the image labels");
	x = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(t, "inputSchema"),
	                            "properties"),
	        "language"),
	    "enum");
	{
		bool py = false, alias = false;
		const cJSON *e;

		cJSON_ArrayForEach (e, x) {
			py |= strcmp(e->valuestring, "python") == 0;
			alias |= strcmp(e->valuestring, "py") == 0;
		}
		ok(py && alias, "language enum has languages and aliases");
	}
	ok(cJSON_GetObjectItem(t, "outputSchema") != NULL, "outputSchema");
	cJSON_Delete(resp);

	/* A clean run, with progress. */
	buf_init(&ev, 0);
	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"py\","
	                 "\"code\":\"import os\\nprint(os.getcwd(), "
	                 "input())\\nopen('f.txt','w').write('x')\","
	                 "\"stdin\":\"typed\\n\",\"extra\":1}",
	                 &ev);
	ok(!is_error(resp), "clean run: not an error");
	is_str(cJSON_GetStringValue(sc(resp, "status")), "completed",
	       "status completed");
	is_str(cJSON_GetStringValue(sc(resp, "stdout")), "/data typed\n",
	       "stdout, stdin, cwd /data; unknown keys ignored");
	ok(cJSON_IsNumber(sc(resp, "exit_code")) &&
	       sc(resp, "exit_code")->valueint == 0,
	   "exit_code 0");
	ok(cJSON_IsNumber(sc(resp, "duration_ms")) &&
	       cJSON_IsNumber(sc(resp, "queue_ms")) &&
	       cJSON_IsFalse(sc(resp, "stdout_truncated")),
	   "durations and flags");
	ok(text_of(resp) && strstr(text_of(resp), "status: completed"),
	   "readable text: %s", text_of(resp));
	ok(ev.data && strstr(ev.data, "notifications/progress") &&
	       strstr(ev.data, "running"),
	   "progress notification sent");
	buf_finish(&ev);
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"bash\","
	                 "\"code\":\"cat f.txt; echo \\\"$FILE_BASE_URL\\\"\"}",
	                 NULL);
	x = sc(resp, "stdout");
	ok(x && strncmp(x->valuestring, "x", 1) == 0 &&
	       strstr(x->valuestring, "/files/"),
	   "same conversation shares /data; FILE_BASE_URL set: %s",
	   x ? x->valuestring : "");
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c2\",\"language\":\"bash\","
	                 "\"code\":\"ls /data | wc -l\"}",
	                 NULL);
	is_str(cJSON_GetStringValue(sc(resp, "stdout")), "0\n",
	       "another conversation has its own /data");
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"python\","
	                 "\"code\":\"import sys\\nsys.exit(4)\"}",
	                 NULL);
	ok(is_error(resp) &&
	       strcmp(cJSON_GetStringValue(sc(resp, "status")), "failed") ==
	           0 &&
	       sc(resp, "exit_code")->valueint == 4 &&
	       strstr(text_of(resp), "exited with code 4"),
	   "non-zero exit: isError, advice: %s", text_of(resp));
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"python\","
	                 "\"code\":\"import time\\ntime.sleep(30)\","
	                 "\"timeout_seconds\":1}",
	                 NULL);
	ok(is_error(resp) &&
	       strcmp(cJSON_GetStringValue(sc(resp, "status")), "timed_out") ==
	           0 &&
	       cJSON_IsNull(sc(resp, "exit_code")) &&
	       strstr(text_of(resp), "raise timeout_seconds"),
	   "timeout: exit_code null, advice: %s", text_of(resp));
	cJSON_Delete(resp);

	/* No runner image will ever be named this (rust has one now). */
	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":"
	                 "\"no-such-language\",\"code\":\"x\"}",
	                 NULL);
	ok(is_error(resp) && strstr(text_of(resp), "available: ") &&
	       strstr(text_of(resp), "python"),
	   "unknown language: %s", text_of(resp));
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"bash\","
	                 "\"code\":\"true\",\"network\":true}",
	                 NULL);
	ok(is_error(resp) && strstr(text_of(resp), "disabled by the operator"),
	   "network refused: %s", text_of(resp));
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"bash\","
	                 "\"code\":\"true\",\"environment\":{\"LD_PRELOAD\":"
	                 "\"/data/x.so\"}}",
	                 NULL);
	ok(is_error(resp) && strstr(text_of(resp), "LD_PRELOAD"),
	   "LD_PRELOAD refused: %s", text_of(resp));
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"bash\","
	                 "\"code\":\"echo $GREETING\",\"environment\":{"
	                 "\"GREETING\":\"hi there\"}}",
	                 NULL);
	is_str(cJSON_GetStringValue(sc(resp, "stdout")), "hi there\n",
	       "environment passed");
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"conversationId\":\"c1\",\"language\":\"bash\","
	                 "\"code\":\"true\",\"timeout_seconds\":9999}",
	                 NULL);
	ok(is_error(resp) && strstr(text_of(resp), "from 1 to 120"),
	   "timeout above the maximum: %s", text_of(resp));
	cJSON_Delete(resp);

	resp = call_tool("\"name\":\"run_code\",\"arguments\":{"
	                 "\"language\":\"bash\",\"code\":\"true\"}",
	                 NULL);
	/* No conversationId: the server mints one and says to pass it on. */
	{
		const char *minted =
		    cJSON_GetStringValue(sc(resp, "conversationId"));

		ok(!is_error(resp) && minted && strncmp(minted, "c-", 2) == 0 &&
		       strstr(text_of(resp), "pass it as conversationId"),
		   "missing conversationId: one is minted: %s", text_of(resp));
	}
	cJSON_Delete(resp);

	/* Cancellation from the client. */
	{
		struct canceller c = {
		    .ms = 1500,
		    .body = "{\"jsonrpc\":\"2.0\",\"method\":"
		            "\"notifications/cancelled\",\"params\":"
		            "{\"requestId\":99}}"};
		pthread_t th;
		char body[512];
		struct timespec t0, t1;
		double secs;
		char *txt;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		pthread_create(&th, NULL, cancel_main, &c);
		snprintf(body, sizeof(body),
		         "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/"
		         "call\",\"params\":{\"name\":\"run_code\","
		         "\"arguments\":{\"conversationId\":\"c3\","
		         "\"language\":\"bash\",\"code\":\"sleep 60\"}}}");
		resp = post(body, NULL);
		pthread_join(th, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		/*
		 * The run sleeps 60 s: a POST that returns well before that was
		 * ended by the cancellation, and a cancelled request is never
		 * answered (MCP: the server sends no response for it).
		 */
		txt = resp ? cJSON_PrintUnformatted(resp) : NULL;
		ok(resp == NULL, "cancelled call: no response (%s)",
		   txt ? txt : "none");
		cJSON_free(txt);
		ok(secs < 30, "cancelled call returned after %.1f s, not 60",
		   secs);
		cJSON_Delete(resp);
	}

	resp = call_tool("\"name\":\"list_runners\",\"arguments\":{}", NULL);
	x = sc(resp, "runners");
	ok(cJSON_GetArraySize(x) >= 1 &&
	       cJSON_GetObjectItem(cJSON_GetArrayItem(x, 0), "libraries"),
	   "list_runners: runners with libraries");
	x = sc(resp, "limits");
	ok(x && cJSON_GetObjectItem(x, "memory_mb")->valueint == 256 &&
	       cJSON_IsFalse(cJSON_GetObjectItem(x, "network_allowed")),
	   "list_runners: limits");
	ok(text_of(resp) && strstr(text_of(resp), "Limits per run"),
	   "list_runners: text");
	cJSON_Delete(resp);

	ok(mcp_server_drain(srv, 30000) == 0, "server drained");
	ok(runner_drain(r, 30000) == 0, "runner drained");
	mcp_server_destroy(srv);
	/* Warm sessions hold workspaces open: the runner goes first. */
	runner_destroy(r);
	workspace_mgr_destroy(wm);
	config_finish(&cfg);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", root);
	}
	return tap_done();
}
