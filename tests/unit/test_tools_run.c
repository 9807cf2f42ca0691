/* SPDX-License-Identifier: MIT */
/*
 * test_tools_run: how every run outcome becomes a CallToolResult:
 * structuredContent fields, isError, and advice the model can act on.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "runner.h"
#include "tap.h"
#include "tools/tools_run.h"

static char out_text[] = "hello\n", err_text[] = "";

static cJSON *result_for(enum runner_status st, int exit_code,
                         const struct config *cfg)
{
	struct runner_result r;

	memset(&r, 0, sizeof(r));
	r.status = st;
	r.exit_code = exit_code;
	r.out.text = out_text;
	r.out.total = 6;
	r.err.text = err_text;
	r.duration_ms = 120;
	r.queue_ms = 3;
	r.timeout_s = 30;
	r.retry_after_s = 7;
	memcpy(r.language, "python", 7);
	memcpy(r.version, "3.11.2", 7);
	memcpy(r.message, "Docker engine not reachable", 28);
	return tools_run_result(&r, cfg);
}

/*
 * A warm run whose state was restored (kind "restore") or rewound, in
 * language, with the kernel's checked state report.
 */
static cJSON *restored_for(const char *language, const char *state,
                           const char *reason, const struct config *cfg)
{
	static char report[] =
	    "{\"run\":4,\"kept\":[1,2,3],\"restored\":{\"kind\":\"restore\","
	    "\"run\":3,\"saved_at\":\"2026-11-28T23:47:52Z\",\"ms\":180,"
	    "\"names\":2,\"imports\":[\"dplyr\",\"tidyr\"],\"not_restored\":"
	    "[{\"name\":\"con\",\"why\":\"not saved: a connection\"}]}}";
	struct runner_result r;

	memset(&r, 0, sizeof(r));
	r.status = RUNNER_COMPLETED;
	r.out.text = out_text;
	r.err.text = err_text;
	r.session.warm = true;
	r.session.stateful = true;
	snprintf(r.session.state, sizeof(r.session.state), "%s", state);
	snprintf(r.session.reason, sizeof(r.session.reason), "%s", reason);
	snprintf(r.language, sizeof(r.language), "%s", language);
	r.state_json = report;
	return tools_run_result(&r, cfg);
}

static const cJSON *sc(const cJSON *res, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(res, "structuredContent"), k);
}

static const char *text(const cJSON *res)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(res, "content"),
	                       0),
	    "text"));
}

static bool is_error(const cJSON *res)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError"));
}

int main(void)
{
	struct config cfg;
	cJSON *res, *schema, *req;
	const cJSON *it;

	memset(&cfg, 0, sizeof(cfg));
	cfg.memory_mb = 256;
	cfg.max_timeout_s = 300;
	cfg.output_max_bytes = 16u << 20;

	schema = cJSON_Parse(tools_run_output_schema);
	ok(schema != NULL, "outputSchema is JSON");
	req = cJSON_GetObjectItemCaseSensitive(schema, "required");

	res = result_for(RUNNER_COMPLETED, 0, &cfg);
	ok(!is_error(res), "completed: not an error");
	cJSON_ArrayForEach (it, req) {
		ok(sc(res, it->valuestring) != NULL,
		   "required field %s present", it->valuestring);
	}
	is_str(cJSON_GetStringValue(sc(res, "stdout")), "hello\n", "stdout");
	is_int(sc(res, "exit_code")->valueint, 0, "exit_code");
	ok(sc(res, "message") == NULL, "no advice for a clean run");
	ok(strstr(text(res), "status: completed") &&
	       strstr(text(res), "--- stdout ---\nhello\n"),
	   "readable text");
	cJSON_Delete(res);

	res = result_for(RUNNER_FAILED, 2, &cfg);
	ok(is_error(res) && strstr(text(res), "exited with code 2"),
	   "failed: isError, says the code");
	cJSON_Delete(res);

	res = result_for(RUNNER_TIMED_OUT, -1, &cfg);
	ok(is_error(res) && cJSON_IsNull(sc(res, "exit_code")) &&
	       strstr(text(res), "30 s") &&
	       strstr(text(res), "raise timeout_seconds"),
	   "timed_out: exit_code null, how to fix");
	cJSON_Delete(res);

	res = result_for(RUNNER_OOM_KILLED, 0, &cfg);
	ok(is_error(res) && strstr(text(res), "256 MB") &&
	       strstr(text(res), "child process") &&
	       strstr(text(res), "chunks"),
	   "oom_killed with exit 0: names the child, how to fix");
	cJSON_Delete(res);

	res = result_for(RUNNER_OUTPUT_LIMIT, -1, &cfg);
	ok(is_error(res) && strstr(text(res), "16777216 bytes") &&
	       strstr(text(res), "/data"),
	   "output_limit: how to fix");
	cJSON_Delete(res);

	res = result_for(RUNNER_BUSY, -1, &cfg);
	ok(is_error(res) && sc(res, "retry_after_seconds")->valueint == 7 &&
	       strstr(text(res), "Retry in 7 s"),
	   "busy: retry_after_seconds and text");
	cJSON_Delete(res);

	{
		struct runner_result r;
		const cJSON *st, *en;
		bool listed = false;

		memset(&r, 0, sizeof(r));
		r.status = RUNNER_RATE_LIMITED;
		r.exit_code = -1;
		r.retry_after_s = 42;
		r.cpu_ms = -1;
		memcpy(r.limit, "cpu_seconds", 12);
		snprintf(r.message, sizeof(r.message),
		         "this tenant used its CPU budget: 5.5 of 5 "
		         "CPU-seconds in the current 60 s window "
		         "(TENANT_CPU_SECONDS); retry in 42 s, when the "
		         "window ends");
		res = tools_run_result(&r, &cfg);
		ok(is_error(res) &&
		       strcmp(cJSON_GetStringValue(sc(res, "status")),
		              "rate_limited") == 0 &&
		       sc(res, "retry_after_seconds")->valueint == 42 &&
		       strcmp(cJSON_GetStringValue(sc(res, "limit")),
		              "cpu_seconds") == 0,
		   "rate_limited: status, retry_after_seconds, limit");
		ok(strstr(text(res), "CPU budget") &&
		       strstr(text(res), "retry in 42 s"),
		   "rate_limited: the text names the limit and when to retry");
		ok(!sc(res, "session") && !sc(res, "cpu_ms"),
		   "rate_limited: no session or usage of a run that never was");
		cJSON_Delete(res);
		st = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(schema, "properties"),
		    "status");
		cJSON_ArrayForEach (
		    en, cJSON_GetObjectItemCaseSensitive(st, "enum")) {
			if (strcmp(cJSON_GetStringValue(en), "rate_limited") ==
			    0)
				listed = true;
		}
		ok(listed, "outputSchema lists rate_limited");
	}

	res = result_for(RUNNER_ERROR, -1, &cfg);
	ok(is_error(res) && strstr(text(res), "Docker engine not reachable") &&
	       strstr(text(res), "retry in a minute"),
	   "error: the engine's message, what to do");
	cJSON_Delete(res);

	res = result_for(RUNNER_CANCELLED, -1, &cfg);
	ok(is_error(res) && strcmp(cJSON_GetStringValue(sc(res, "status")),
	                           "cancelled") == 0,
	   "cancelled");
	cJSON_Delete(res);
	res = restored_for("r", "restored", "idle_expired", &cfg);
	ok(strncmp(text(res),
	           "NOTE: the R state of this conversation was restored",
	           51) == 0 &&
	       strstr(text(res), "from its save after run 3 of "
	                         "2026-11-28T23:47:52Z, loaded in 180 ms.") &&
	       strstr(text(res),
	              "Not restored: con (not saved: a connection).") &&
	       strstr(text(res), "Packages attached again: dplyr, tidyr.\n"),
	   "R restored: the note names R and the packages attached again");
	cJSON_Delete(res);
	res = restored_for("r", "rewound", "", &cfg);
	ok(strncmp(text(res),
	           "NOTE: the R state was rewound to what it was right after "
	           "run 3",
	           62) == 0,
	   "R rewound: the note names R");
	cJSON_Delete(res);
	res = restored_for("pydurable", "restored", "image_updated", &cfg);
	ok(strncmp(text(res),
	           "NOTE: the Python state of this conversation was restored",
	           56) == 0,
	   "a runner built from the Python image: the Python state");
	cJSON_Delete(res);
	res = restored_for("python", "restored", "evicted", &cfg);
	ok(strncmp(text(res),
	           "NOTE: the Python state of this conversation was restored",
	           56) == 0 &&
	       strstr(text(res), "Imports re-run: dplyr, tidyr.\n"),
	   "Python restored: imports re-run");
	cJSON_Delete(res);

	cJSON_Delete(schema);
	return tap_done();
}
