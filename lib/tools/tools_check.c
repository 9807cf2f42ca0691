/* SPDX-License-Identifier: MIT */
/*
 * tools_check: check_code. Arguments are checked by run_arguments, the check
 * runs through the runner like any one-off run (queue, limits, reaping), and
 * the outcome becomes a result here.
 */
#include "tools/tools_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "run/catalog.h"
#include "run/run_arguments.h"
#include "tools/check_output.h"
#include "tools/audit/tools_audit.h"
#include "util/buf.h"
#include "util/log.h"

/* conversationId is accepted (clients send it with every call) but not
 * listed: nothing is run, so it means nothing here. */
static const char tools_check_input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\"},"
    "\"code\":{\"type\":\"string\"}},"
    "\"required\":[\"language\",\"code\"]}";

const char tools_check_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"ok\":{\"type\":\"boolean\"},"
    "\"language\":{\"type\":\"string\"},"
    "\"errors\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"line\":{\"type\":\"integer\",\"minimum\":1},"
    "\"column\":{\"type\":\"integer\",\"minimum\":1},"
    "\"message\":{\"type\":\"string\"}},"
    "\"required\":[\"message\"]}},"
    "\"checker\":{\"type\":\"string\"},"
    "\"duration_ms\":{\"type\":\"number\"}},"
    "\"required\":[\"ok\",\"language\",\"errors\",\"checker\"]}";

struct tools_check_ctx {
	struct runner *runner;
};

static struct tools_check_ctx tools_check_ctx;

/* Errors of the checker's stderr, else of its stdout. */
static size_t tools_check_parse(const struct runner_result *res,
                                const char *filename,
                                struct check_output_error *e, size_t max)
{
	const struct runner_output *o[2] = {&res->err, &res->out};
	size_t n = 0;

	for (int i = 0; i < 2 && n == 0; i++)
		if (o[i]->text)
			n = check_output_errors(o[i]->text, strlen(o[i]->text),
			                        filename, e, max);
	if (n == 0) {
		/* Unlocated: the first line the checker said anything on. */
		for (int i = 0; i < 2 && n == 0; i++)
			if (o[i]->text &&
			    check_output_first_line(o[i]->text,
			                            strlen(o[i]->text), e) == 0)
				n = 1;
	}
	return n;
}

/* A check that did not end by itself, as an isError result. */
static cJSON *tools_check_failed(const struct runner_result *res)
{
	switch (res->status) {
	case RUNNER_TIMED_OUT:
		return mcp_text_resultf(
		    true,
		    "The %s syntax check did not finish "
		    "within %u s (the code may be too large "
		    "or pathological); check a smaller part",
		    res->language, res->timeout_s);
	case RUNNER_OOM_KILLED:
		return mcp_text_resultf(true,
		                        "The %s syntax check ran out of memory "
		                        "(%u MB); check a smaller part",
		                        res->language, res->memory_mb);
	case RUNNER_OUTPUT_LIMIT:
		return mcp_text_resultf(true,
		                        "The %s syntax checker wrote more "
		                        "output than allowed and was stopped "
		                        "before reporting an error",
		                        res->language);
	case RUNNER_BUSY:
		return mcp_text_resultf(true, "%s", res->message);
	case RUNNER_CANCELLED:
		return mcp_text_result("The syntax check was cancelled", true);
	default:
		return mcp_text_resultf(
		    true, "The syntax check could not run: %s",
		    res->message[0] ? res->message : "unknown error");
	}
}

cJSON *tools_check_result(const struct runner_result *res, const char *filename,
                          const char *checker)
{
	struct check_output_error e[CHECK_OUTPUT_ERRORS_MAX];
	bool ok = res->status == RUNNER_COMPLETED && res->exit_code == 0;
	size_t n = 0;
	cJSON *result, *sc, *errs, *content, *t;
	struct buf text;
	int r = 0;

	if (!ok && res->status != RUNNER_FAILED &&
	    res->status != RUNNER_OUTPUT_LIMIT)
		return tools_check_failed(res);
	if (!ok) {
		n = tools_check_parse(res, filename, e,
		                      CHECK_OUTPUT_ERRORS_MAX);
		if (res->status == RUNNER_OUTPUT_LIMIT &&
		    (n == 0 || !e[0].line))
			return tools_check_failed(res);
		if (n == 0) {
			snprintf(e[0].message, sizeof(e[0].message),
			         "the checker exited with status %d without a "
			         "message",
			         res->exit_code);
			e[0].line = e[0].column = 0;
			n = 1;
		}
	}
	result = cJSON_CreateObject();
	sc = cJSON_AddObjectToObject(result, "structuredContent");
	errs = cJSON_AddArrayToObject(sc, "errors");
	if (!errs)
		goto fail;
	cJSON_AddBoolToObject(sc, "ok", ok);
	cJSON_AddStringToObject(sc, "language", res->language);
	cJSON_AddStringToObject(sc, "checker", checker);
	cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(errs, o)) {
			cJSON_Delete(o);
			goto fail;
		}
		if (e[i].line)
			cJSON_AddNumberToObject(o, "line", e[i].line);
		if (e[i].column)
			cJSON_AddNumberToObject(o, "column", e[i].column);
		cJSON_AddStringToObject(o, "message", e[i].message);
	}
	buf_init(&text, 0);
	if (ok) {
		r = buf_printf(&text, "No syntax errors in the %s code (%s).",
		               res->language, checker);
	} else {
		if (e[0].line && e[0].column)
			r = buf_printf(&text, "Line %u, column %u: %s",
			               e[0].line, e[0].column, e[0].message);
		else if (e[0].line)
			r = buf_printf(&text, "Line %u: %s", e[0].line,
			               e[0].message);
		else
			r = buf_printf(&text, "The checker failed: %s",
			               e[0].message);
		if (r == 0)
			r = buf_printf(&text,
			               "\n%zu error%s found in the %s code "
			               "(%s); the code was not run.",
			               n, n == 1 ? "" : "s", res->language,
			               checker);
	}
	content = cJSON_AddArrayToObject(result, "content");
	t = cJSON_CreateObject();
	if (r < 0 || !content || !t || !cJSON_AddItemToArray(content, t)) {
		cJSON_Delete(t);
		buf_finish(&text);
		goto fail;
	}
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", text.data ? text.data : "");
	cJSON_AddBoolToObject(result, "isError", false);
	buf_finish(&text);
	return result;
fail:
	cJSON_Delete(result);
	return NULL;
}

/* "gcc (c 12.2.0)": the checker's program and the runner's version. */
static void tools_check_checker(struct runner *runner, const char *language,
                                char *filename, size_t flen, char *out,
                                size_t len)
{
	struct catalog *cat = runner_catalog_get(runner);
	const struct catalog_image *img = catalog_find(cat, language);
	const char *prog = "?", *slash;

	filename[0] = '\0';
	if (img && img->n_check) {
		prog = img->check[0];
		slash = strrchr(prog, '/');
		if (slash && slash[1])
			prog = slash + 1;
		snprintf(filename, flen, "%s", img->filename);
	}
	if (img && img->version[0])
		snprintf(out, len, "%.40s (%s %s)", prog, language,
		         img->version);
	else
		snprintf(out, len, "%.40s (%s)", prog, language);
	catalog_put(cat);
}

static cJSON *tools_check_call(void *data, struct mcp_call *call,
                               const cJSON *args)
{
	struct tools_check_ctx *ctx = data;
	const struct config *cfg = runner_config(ctx->runner);
	struct runner_request req;
	struct runner_result res;
	struct runner_cancel *cancel = NULL;
	char err[512], filename[256], checker[160];
	cJSON *result;
	int rc;

	memset(&req, 0, sizeof(req));
	memset(&res, 0, sizeof(res));
	req.stdout_fd = req.stderr_fd = -1;
	req.tenant = mcp_call_tenant(call);
	rc = run_arguments_check_parse(args, cfg, &req, err, sizeof(err));
	if (rc < 0)
		return mcp_text_result(err, true);
	if (runner_cancel_create(&cancel) < 0)
		return NULL;
	req.cancel = cancel;
	/* A client that gives up stops the check's box too. */
	mcp_call_on_cancel(call, runner_cancel_trigger, cancel);
	rc = runner_run(ctx->runner, &req, &res);
	mcp_call_on_cancel(call, NULL, NULL);
	if (rc < 0) {
		result = mcp_text_result(res.message, true);
	} else {
		tools_check_checker(ctx->runner, res.language, filename,
		                    sizeof(filename), checker, sizeof(checker));
		result = tools_check_result(&res, filename, checker);
		tools_audit_run(call, "check_code", "", &req, &res, NULL);
		log_info("check lang=%s status=%s exit=%d", res.language,
		         runner_status_name(res.status), res.exit_code);
		if (res.status == RUNNER_ERROR)
			log_warnx("check lang=%s failed on the server's side: "
			          "%s",
			          res.language,
			          res.message[0] ? res.message
			                         : "(no cause recorded)");
	}
	runner_result_finish(&res);
	runner_cancel_destroy(cancel);
	return result;
}

/* The description names the languages that can be checked now. */
static void tools_check_describe(void *data, char **description,
                                 cJSON **input_schema)
{
	struct tools_check_ctx *ctx = data;
	struct catalog *cat = runner_catalog_get(ctx->runner);
	char langs[256];

	(void)input_schema;
	catalog_checkable(cat, langs, sizeof(langs));
	catalog_put(cat);
	*description = buf_asprintf(
	    "Check code for syntax errors without running it; returns each "
	    "error's line and message. Languages: %s.",
	    langs);
}

static struct tool_impl tools_check_tool = {
    .name = "check_code",
    .title = "Check code for syntax errors",
    .description = "Check code for syntax errors without running it, and "
                   "return the first error's line and message.",
    .input_schema = tools_check_input_schema,
    .output_schema = tools_check_output_schema,
    .read_only = true,
    .destructive = false,
    .idempotent = true,
    .open_world = false,
    .describe = tools_check_describe,
    .call = tools_check_call,
};

void tools_check_register(struct mcp_server *srv, struct runner *r)
{
	tools_check_ctx.runner = r;
	tools_check_tool.data = &tools_check_ctx;
	mcp_server_add_tool(srv, &tools_check_tool);
}
