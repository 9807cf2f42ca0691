/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for tools_check_result: what check_code answers for each way
 * a check can end, and that its structuredContent follows the schema's
 * shape.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runner.h"
#include "tap.h"
#include "tools/tools_check.h"

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *text_of(const cJSON *r)
{
	return cJSON_GetStringValue(
	    get(cJSON_GetArrayItem(get(r, "content"), 0), "text"));
}

static void result_init(struct runner_result *res, enum runner_status st,
                        int exit_code, char *err_text, char *out_text)
{
	memset(res, 0, sizeof(*res));
	res->status = st;
	res->exit_code = exit_code;
	res->err.text = err_text;
	res->out.text = out_text;
	res->timeout_s = 30;
	res->memory_mb = 256;
	snprintf(res->language, sizeof(res->language), "c");
}

int main(void)
{
	struct runner_result res;
	char err1[] = "/sandbox/main.c: In function 'main':\n"
	              "/sandbox/main.c:4:2: error: expected ';'\n"
	              "/sandbox/main.c:9:1: error: second\n";
	char none[] = "", odd[] = "\nsomething odd happened\n";
	const cJSON *sc, *errs, *e0;
	cJSON *r;

	result_init(&res, RUNNER_COMPLETED, 0, none, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	sc = get(r, "structuredContent");
	ok(cJSON_IsTrue(get(sc, "ok")), "exit 0: ok");
	is_int(cJSON_GetArraySize(get(sc, "errors")), 0, "ok: no errors");
	is_str(cJSON_GetStringValue(get(sc, "language")), "c", "language");
	is_str(cJSON_GetStringValue(get(sc, "checker")), "gcc (c 12.2.0)",
	       "checker");
	ok(cJSON_IsFalse(get(r, "isError")), "ok: not an error result");
	ok(text_of(r) && strstr(text_of(r), "No syntax errors"), "ok text");
	cJSON_Delete(r);

	result_init(&res, RUNNER_FAILED, 1, err1, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	sc = get(r, "structuredContent");
	errs = get(sc, "errors");
	e0 = cJSON_GetArrayItem(errs, 0);
	ok(cJSON_IsFalse(get(sc, "ok")), "errors: not ok");
	is_int(cJSON_GetArraySize(errs), 2, "both errors listed");
	is_int(get(e0, "line")->valueint, 4, "first error's line");
	is_int(get(e0, "column")->valueint, 2, "first error's column");
	is_str(cJSON_GetStringValue(get(e0, "message")), "expected ';'",
	       "first error's message");
	ok(cJSON_IsFalse(get(r, "isError")),
	   "syntax errors are a finding, not a tool error");
	ok(text_of(r) &&
	       strncmp(text_of(r), "Line 4, column 2: expected ';'", 30) == 0,
	   "text starts with the first error's line and message (%s)",
	   text_of(r) ? text_of(r) : "");
	cJSON_Delete(r);

	result_init(&res, RUNNER_FAILED, 1, none, odd);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	e0 = cJSON_GetArrayItem(get(get(r, "structuredContent"), "errors"), 0);
	ok(e0 && !get(e0, "line") &&
	       strcmp(cJSON_GetStringValue(get(e0, "message")),
	              "something odd happened") == 0,
	   "unlocated failure: the first line, no line number");
	cJSON_Delete(r);

	result_init(&res, RUNNER_FAILED, 3, none, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	e0 = cJSON_GetArrayItem(get(get(r, "structuredContent"), "errors"), 0);
	ok(e0 && strstr(cJSON_GetStringValue(get(e0, "message")), "status 3"),
	   "silent failure: says the exit status");
	cJSON_Delete(r);

	result_init(&res, RUNNER_TIMED_OUT, -1, none, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	ok(cJSON_IsTrue(get(r, "isError")) && !get(r, "structuredContent") &&
	       strstr(text_of(r), "30 s"),
	   "time limit: an error result naming the limit");
	cJSON_Delete(r);

	result_init(&res, RUNNER_OUTPUT_LIMIT, -1, none, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	ok(cJSON_IsTrue(get(r, "isError")),
	   "output flood without a located error: an error result");
	cJSON_Delete(r);

	result_init(&res, RUNNER_OUTPUT_LIMIT, -1, err1, none);
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	ok(cJSON_IsFalse(get(r, "isError")) &&
	       cJSON_IsFalse(get(get(r, "structuredContent"), "ok")),
	   "output flood after a located error: the errors");
	cJSON_Delete(r);

	result_init(&res, RUNNER_ERROR, -1, none, none);
	snprintf(res.message, sizeof(res.message), "engine down");
	r = tools_check_result(&res, "main.c", "gcc (c 12.2.0)");
	ok(cJSON_IsTrue(get(r, "isError")) && strstr(text_of(r), "engine down"),
	   "engine trouble: an error result with the reason");
	cJSON_Delete(r);
	return tap_done();
}
