/* SPDX-License-Identifier: MIT */
/*
 * tools_run_result: what run_code and list_runners say: the tool
 * descriptions and schemas (from the discovered runner images and the
 * settings), and the CallToolResult of a finished run, built in one place
 * (status, output, the warm session's state, the last value, advice).
 * Pure functions of their arguments; thread-safe.
 */
#include "tools/tools_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "egress/egress_log.h"
#include "run/packages.h"
#include "run/run_arguments.h"
#include "tools/tools_content.h"
#include "util/buf.h"
#include "workspace/files.h"

const char tools_run_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"status\":{\"type\":\"string\",\"enum\":[\"completed\",\"failed\","
    "\"timed_out\",\"oom_killed\",\"output_limit\",\"quota_exceeded\","
    "\"cancelled\",\"busy\",\"rate_limited\",\"error\"],\"description\":"
    "\"completed: exit code 0; failed: non-zero exit; timed_out, "
    "oom_killed, output_limit, quota_exceeded: stopped by a limit; busy: "
    "not run, retry later; "
    "rate_limited: not run, this "
    "tenant passed a limit of its own (see limit), retry after "
    "retry_after_seconds; error: the sandbox could not run it\"},"
    "\"exit_code\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],"
    "\"description\":\"null "
    "when the program did not exit by itself\"},"
    "\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"stdout_truncated\":{\"type\":\"boolean\",\"description\":\"only the "
    "head and tail of stdout are included\"},"
    "\"stderr_truncated\":{\"type\":\"boolean\"},"
    "\"stdout_bytes\":{\"type\":\"integer\",\"description\":\"bytes the "
    "program wrote to stdout\"},"
    "\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"duration_ms\":{\"type\":\"integer\",\"description\":\"run time from "
    "container start\"},"
    "\"queue_ms\":{\"type\":\"integer\",\"description\":\"time waiting for "
    "a free sandbox\"},"
    "\"timed_out\":{\"type\":\"boolean\"},"
    "\"oom_killed\":{\"type\":\"boolean\"},"
    "\"timeout_seconds\":{\"type\":\"integer\"},"
    "\"language\":{\"type\":\"string\"},"
    "\"runner_image\":{\"type\":\"string\"},"
    "\"runner_version\":{\"type\":\"string\"},"
    "\"retry_after_seconds\":{\"type\":\"integer\"},"
    "\"limit\":{\"type\":\"string\",\"enum\":[\"cpu_seconds\","
    "\"queued_runs\"],\"description\":\"rate_limited: the tenant's limit "
    "that was reached\"},"
    "\"files\":{\"type\":\"array\",\"description\":\"files in /data "
    "this run created or changed, with public URLs\",\"items\":{\"type\":"
    "\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
    "\"mimeType\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"},"
    "\"uri\":{\"type\":\"string\"},\"modified\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"string\",\"enum\":[\"created\","
    "\"modified\"]}},\"required\":[\"name\",\"size\",\"url\"]}},"
    "\"files_truncated\":{\"type\":\"boolean\",\"description\":\"more "
    "files changed than are listed; call list_files\"},"
    "\"stdout_url\":{\"type\":\"string\",\"description\":\"the whole "
    "stdout, saved when it was too long to return\"},"
    "\"stderr_url\":{\"type\":\"string\"},"
    "\"saved_outputs_deleted\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"string\"},\"description\":\"older saved outputs deleted to make "
    "room; their links are gone\"},"
    "\"workspace\":{\"type\":\"object\",\"description\":\"use of "
    "this conversation's /data against its quota\"},"
    "\"message\":{\"type\":\"string\",\"description\":\"what happened and "
    "what to do next\"},"
    "\"conversationId\":{\"type\":\"string\"},"
    "\"session\":{\"type\":\"object\",\"description\":\"what happened "
    "to the conversation's warm session: state new, continued, restarted "
    "(reason says why earlier state was lost) or none (a one-off run; "
    "reason says why); lost: this run ended the state\",\"properties\":{"
    "\"state\":{\"type\":\"string\",\"enum\":[\"new\",\"continued\","
    "\"restarted\",\"restored\",\"rewound\",\"none\"]},\"reason\":{\"type\":"
    "\"string\"},"
    "\"stateful\":{\"type\":\"boolean\"},\"lost\":{\"type\":\"boolean\"},"
    "\"lost_reason\":{\"type\":\"string\"},\"runs\":{\"type\":"
    "\"integer\"},\"memory_bytes\":{\"type\":\"integer\"},"
    "\"memory_peak_bytes\":{\"type\":\"integer\"},"
    "\"memory_limit_bytes\":{\"type\":\"integer\"},"
    "\"idle_expires_at\":{\"type\":\"string\"},\"expires_at\":"
    "{\"type\":\"string\"}},\"required\":[\"state\"]},"
    "\"value\":{\"type\":\"object\",\"description\":\"Sessions: the "
    "value of the last expression, by MIME type (text/plain; text/html, "
    "text/markdown when the object offers them)\",\"additionalProperties\":"
    "{\"type\":\"string\"}},"
    "\"error_name\":{\"type\":\"string\",\"description\":\"Sessions: "
    "the type of an uncaught exception\"},"
    "\"cpu_ms\":{\"type\":\"integer\",\"description\":\"CPU time of "
    "all the run's processes\"},"
    "\"memory_peak_bytes\":{\"type\":\"integer\",\"description\":"
    "\"highest memory use: a one-off run's own; in a warm session the "
    "session's so far, this run included\"},"
    "\"memory_mb\":{\"type\":\"integer\",\"description\":\"the "
    "memory limit that applied\"},"
    "\"cpus\":{\"type\":\"number\",\"description\":\"the CPU limit "
    "that applied, in cores\"},"
    "\"packages\":{\"type\":\"object\",\"description\":\"installed now, "
    "reused from the cache; failed: the code did not run\"},"

    "\"notebook_url\":{\"type\":\"string\"}},"
    "\"required\":[\"status\",\"exit_code\",\"stdout\",\"stderr\","
    "\"stdout_truncated\",\"stderr_truncated\",\"duration_ms\","
    "\"queue_ms\"]}";

const char tools_run_input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"conversationId\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":256},"
    "\"language\":{\"type\":\"string\"},"
    "\"code\":{\"type\":\"string\"},"
    "\"stdin\":{\"type\":\"string\"},"
    "\"environment\":{\"type\":\"object\",\"additionalProperties\":"
    "{\"type\":\"string\"}},"
    "\"network\":{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"}}],\"default\":false},"
    "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1},"
    "\"memory_mb\":{\"type\":\"integer\"},"
    "\"cpus\":{\"type\":\"number\"},"
    "\"inputs\":{\"type\":\"object\"},"
    "\"packages\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"session\":{\"type\":\"string\",\"enum\":[\"continue\",\"new\"],"
    "\"default\":\"continue\"},"
    "\"rewind_to\":{\"type\":\"integer\"},"
    "\"fork_from\":{\"type\":\"string\"}},"
    "\"required\":[\"language\",\"code\"]}";

/* ---- descriptions from the catalog -------------------------------------- */

bool tools_run_packages_on(struct runner *runner)
{
	return runner_config(runner)->packages &&
	       backend_has(runner_backend(runner), BACKEND_CAN_PACKAGES);
}

int tools_run_describe_runners(struct buf *b, const struct catalog *cat,
                               bool packages)
{
	int r = 0;

	if (cat->n == 0)
		return buf_puts(b, "\n\nNo runner images are installed on this "
		                   "server yet; run_code will fail until the "
		                   "operator builds them (runners/build.sh).");
	r = buf_puts(b, "\n\nLanguages:");
	for (size_t i = 0; r == 0 && i < cat->n; i++) {
		const struct catalog_image *m = &cat->items[i];

		r = buf_printf(b, "\n- %s", m->language);
		if (r == 0 && m->version[0])
			r = buf_printf(b, " %s", m->version);
		for (size_t j = 0; r == 0 && j < m->n_aliases; j++)
			r = buf_printf(b, "%s%s%s",
			               j ? ", " : " (also: ", m->aliases[j],
			               j + 1 == m->n_aliases ? ")" : "");
		if (r == 0 && m->description[0])
			r = buf_printf(b, ": %s", m->description);
		if (r == 0)
			r = buf_printf(b, " The code is saved as /sandbox/%s.",
			               m->filename);
		for (size_t j = 0; r == 0 && j < m->n_libraries; j++)
			r = buf_printf(b, "%s%s", j ? ", " : " Libraries: ",
			               m->libraries[j]);
		if (r == 0 && packages && m->packages[0])
			r = buf_printf(b, ". More with packages (%s)",
			               m->packages);
	}
	return r;
}

/* A duration for a person: "90 seconds", "10 minutes", "2 hours". */
static void tools_run_span(char out[32], unsigned s)
{
	if (s % 3600 == 0)
		snprintf(out, 32, "%u hour%s", s / 3600, s == 3600 ? "" : "s");
	else if (s % 60 == 0)
		snprintf(out, 32, "%u minute%s", s / 60, s == 60 ? "" : "s");
	else
		snprintf(out, 32, "%u second%s", s, s == 1 ? "" : "s");
}

/* A size for a person: "16 MB" when whole megabytes, else bytes. */
static void tools_run_size(char out[32], size_t n)
{
	if (n >= 1048576 && n % 1048576 == 0)
		snprintf(out, 32, "%zu MB", n / 1048576);
	else
		snprintf(out, 32, "%zu bytes", n);
}

/* How many items of a description's " with a, b, c, d" list the summary keeps.
 */
#define TOOLS_RUN_LIST_KEPT 3

/*
 * Appends a runner description's summary: its first clause, up to the first
 * ". ", "; " or ", " outside parentheses, with a " with a, b, c, d, ..."
 * list in it cut to its first TOOLS_RUN_LIST_KEPT items and ", ..." (a
 * list's commas do not end the clause). The rest
 * (every library, flags, tips) is list_runners'; tools/list reaches every
 * conversation, so the summary keeps the name, the version and what the
 * language can and cannot use ("standard library only").
 */
static int tools_run_summary(struct buf *b, const char *d)
{
	int depth = 0, items = -1;
	size_t i;

	for (i = 0; d[i]; i++) {
		if (d[i] == '(')
			depth++;
		else if (d[i] == ')' && depth > 0)
			depth--;
		else if (depth == 0 && (d[i] == '.' || d[i] == ';') &&
		         (d[i + 1] == ' ' || d[i + 1] == '\0'))
			break;
		else if (depth == 0 && items < 0 &&
		         strncmp(d + i, " with ", 6) == 0)
			items = 0;
		else if (depth == 0 && items < 0 && d[i] == ',' &&
		         d[i + 1] == ' ')
			break;
		else if (depth == 0 && items >= 0 && d[i] == ',' &&
		         ++items == TOOLS_RUN_LIST_KEPT)
			return buf_printf(b, ": %.*s, ...", (int)i, d);
	}
	return i ? buf_printf(b, ": %.*s", (int)i, d) : 0;
}

/*
 * run_code's list of languages: each name (the enum carries the aliases)
 * and the summary of its description. Versions, libraries, the code file
 * and tips are list_runners' (tools_run_describe_runners).
 */
static int tools_run_describe_compact(struct buf *b, const struct catalog *cat,
                                      bool packages)
{
	int r;

	if (cat->n == 0)
		return buf_puts(b, "\n\nNo runner images are installed on this "
		                   "server yet; run_code will fail until the "
		                   "operator builds them (runners/build.sh).");
	r = buf_puts(b, "\n\nLanguages (details: list_runners):");
	for (size_t i = 0; r == 0 && i < cat->n; i++) {
		const struct catalog_image *m = &cat->items[i];

		r = buf_printf(b, "\n- %s", m->language);
		if (r == 0)
			r = tools_run_summary(b, m->description);
		if (r == 0 && packages && m->packages[0])
			r = buf_printf(b, "; packages: %s", m->packages);
	}
	return r;
}

/* The opening of run_code's description with warm sessions on. */
static int tools_run_describe_warm(struct buf *b, const struct config *cfg)
{
	char idle[32], life[32], out[32];

	tools_run_span(idle, cfg->warm_idle_s);
	tools_run_span(life, cfg->warm_max_s);
	tools_run_size(out, cfg->output_max_bytes);
	return buf_printf(
	    b,
	    "Run code in an isolated Linux sandbox. A conversationId is "
	    "unique to one chat, which keeps a warm session per language: "
	    "Python, R "
	    "and TypeScript/JavaScript keep variables, imports and loaded "
	    "data between calls and show the last expression's value like a "
	    "notebook cell (Python and R return plots as PNG); other "
	    "languages run as a fresh process. A session "
	    "ends after %s idle, after %s, or on a timeout the code ignores, "
	    "out of memory or exit(); the result's session.state says new, "
	    "continued, %s (then run your setup again). Background processes "
	    "stop when a run ends. /data, the working directory, belongs to "
	    "the chat: save files and charts there to keep them and get "
	    "links; print results to stdout. Limits per run: %u MB memory "
	    "(the session's), %g CPU, %u s, %u processes, %u MB /tmp, output "
	    "up to %s. %s",
	    idle, life,
	    cfg->state_save ? "restored (saved state back) or restarted"
	                    : "or restarted",
	    cfg->memory_mb, cfg->cpus, cfg->timeout_s, cfg->pids_limit,
	    cfg->tmp_mb, out,
	    cfg->allow_network
	        ? "No network unless network: true (or a list of allowed "
	          "names). Non-default memory_mb/cpus run one-off, without "
	          "the session's state."
	        : "No network. Non-default memory_mb/cpus run one-off, "
	          "without the session's state.");
}

/* ... and with every run in a fresh box. */
static int tools_run_describe_cold(struct buf *b, const struct config *cfg)
{
	char out[32];

	tools_run_size(out, cfg->output_max_bytes);
	return buf_printf(
	    b,
	    "Run code in a fresh, isolated Linux container. A conversationId "
	    "is unique to one chat. Each run starts clean except for /data, "
	    "the working directory, which belongs to the conversation: files "
	    "saved there stay for its later runs and come back as links; "
	    "print results to stdout. Limits per run: %u MB memory, %g "
	    "CPU, %u s, %u processes, %u MB /tmp, output up to %s. %s",
	    cfg->memory_mb, cfg->cpus, cfg->timeout_s, cfg->pids_limit,
	    cfg->tmp_mb, out,
	    cfg->allow_network ? "No network unless network: true (or a list "
	                         "of allowed names)."
	                       : "No network.");
}

void tools_run_describe(struct runner *runner, char **description,
                        cJSON **input_schema)
{
	const struct config *cfg = runner_config(runner);
	struct catalog *cat = runner_catalog_get(runner);
	cJSON *s = cJSON_Parse(tools_run_input_schema), *props, *p, *e;
	struct buf b;
	int r;

	buf_init(&b, 0);
	r = cfg->warm ? tools_run_describe_warm(&b, cfg)
	              : tools_run_describe_cold(&b, cfg);
	if (r == 0)
		r = tools_run_describe_compact(&b, cat,
		                               tools_run_packages_on(runner));
	if (r == 0)
		*description = buf_take(&b, NULL);
	buf_finish(&b);

	props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	p = cJSON_GetObjectItemCaseSensitive(props, "conversationId");
	cJSON_AddStringToObject(p, "description", TOOLS_CONV_DESCRIPTION);
	p = cJSON_GetObjectItemCaseSensitive(props, "language");
	if (cat->n > 0 && (e = cJSON_AddArrayToObject(p, "enum"))) {
		for (size_t i = 0; i < cat->n; i++) {
			cJSON_AddItemToArray(
			    e, cJSON_CreateString(cat->items[i].language));
			for (size_t j = 0; j < cat->items[i].n_aliases; j++)
				cJSON_AddItemToArray(
				    e, cJSON_CreateString(
				           cat->items[i].aliases[j]));
		}
	}
	p = cJSON_GetObjectItemCaseSensitive(props, "code");
	cJSON_AddNumberToObject(p, "maxLength", (double)cfg->code_max_bytes);
	p = cJSON_GetObjectItemCaseSensitive(props, "network");
	if (!cfg->allow_network)
		cJSON_AddStringToObject(p, "description",
		                        "Turned off on this server");
	p = cJSON_GetObjectItemCaseSensitive(props, "session");
	cJSON_AddStringToObject(
	    p, "description",
	    cfg->warm ? "new: end the warm session first, start afresh"
	              : "Warm sessions are off on this server: every run "
	                "starts fresh");
	p = cJSON_GetObjectItemCaseSensitive(props, "rewind_to");
	cJSON_AddStringToObject(p, "description",
	                        cfg->warm && cfg->state_save
	                            ? "Python, R: first go back to the "
	                              "state after this run"
	                            : "Off on this server");
	p = cJSON_GetObjectItemCaseSensitive(props, "fork_from");
	cJSON_AddStringToObject(p, "description",
	                        "Start as a copy of this conversation "
	                        "(files, state)");
	p = cJSON_GetObjectItemCaseSensitive(props, "memory_mb");
	cJSON_AddNumberToObject(p, "minimum", RUN_ARGUMENTS_MEMORY_MIN_MB);
	cJSON_AddNumberToObject(p, "maximum", cfg->memory_max_mb);
	cJSON_AddNumberToObject(p, "default", cfg->memory_mb);
	p = cJSON_GetObjectItemCaseSensitive(props, "cpus");
	cJSON_AddNumberToObject(p, "minimum", RUN_ARGUMENTS_CPUS_MIN);
	cJSON_AddNumberToObject(p, "maximum", cfg->cpus_max);
	cJSON_AddNumberToObject(p, "default", cfg->cpus);
	p = cJSON_GetObjectItemCaseSensitive(props, "inputs");
	cJSON_AddStringToObject(
	    p, "description",
	    "As /sandbox/inputs.json, and the variable inputs in Python and "
	    "TypeScript");
	p = cJSON_GetObjectItemCaseSensitive(props, "packages");
	cJSON_AddNumberToObject(p, "maxItems", PACKAGES_MAX);
	if (tools_run_packages_on(runner))
		cJSON_AddStringToObject(
		    p, "description",
		    "Installed first: pip specs for Python (\"polars==1.2.0\", "
		    "wheels only), npm for TypeScript (\"zod@3\"), CRAN for R "
		    "(\"glue\", \"glue@1.7.0\"; R code only, nothing to "
		    "compile)");
	else
		cJSON_AddStringToObject(p, "description",
		                        "Package installation is turned off on "
		                        "this server");
	p = cJSON_GetObjectItemCaseSensitive(props, "timeout_seconds");
	cJSON_AddNumberToObject(p, "maximum", cfg->max_timeout_s);
	cJSON_AddNumberToObject(p, "default", cfg->timeout_s);
	*input_schema = s;
	catalog_put(cat);
}

/* ---- results ------------------------------------------------------------ */

/* What the model should do next, by outcome. */
static int tools_run_advice(struct buf *b, const struct runner_result *res,
                            const struct config *cfg)
{
	switch (res->status) {
	case RUNNER_COMPLETED:
		return 0;
	case RUNNER_FAILED:
		if (res->install_failed)
			return buf_printf(
			    b,
			    "The packages could not be installed, "
			    "so the code did not run: %s.",
			    res->message);
		return buf_printf(b,
		                  "The program exited with code %d. Read "
		                  "stderr, fix the code and run it again.",
		                  res->exit_code);
	case RUNNER_TIMED_OUT:
		return buf_printf(
		    b,
		    "Timed out after %u s and was %s. Make the code "
		    "faster or give it less work%s.",
		    res->timeout_s,
		    res->session.warm && !res->session.lost
		        ? "interrupted (the session's state is kept)"
		        : "killed",
		    res->timeout_s < cfg->max_timeout_s ? ", or raise "
		                                          "timeout_seconds"
		                                        : "");
	case RUNNER_OOM_KILLED:
		return buf_printf(
		    b,
		    "Killed: the memory limit of %u MB was "
		    "exceeded%s. Process the data in chunks, use "
		    "smaller data types, or free what is no "
		    "longer needed%s.",
		    res->memory_mb ? res->memory_mb : cfg->memory_mb,
		    res->session.warm ? (res->child_oom && !res->session.lost
		                             ? " by a child process (the "
		                               "session survived)"
		                             : "")
		    : res->exit_code == 0 ? " (by a child process)"
		                          : "",
		    (res->memory_mb ? res->memory_mb : cfg->memory_mb) <
		            cfg->memory_max_mb
		        ? ", or ask for more with memory_mb"
		        : "");
	case RUNNER_OUTPUT_LIMIT:
		return buf_printf(b,
		                  "Stopped: the output passed %zu bytes. Print "
		                  "less (a summary, the first and last lines) "
		                  "or write large results to a file in /data.",
		                  cfg->output_max_bytes);
	case RUNNER_CANCELLED:
		return buf_puts(b, "The run was cancelled.");
	case RUNNER_QUOTA_EXCEEDED:
		return buf_printf(b,
		                  "Stopped: %s. The files written so far are "
		                  "kept; delete files with delete_file before "
		                  "the next run, and write less to /data.",
		                  res->message);
	case RUNNER_BUSY:
		return buf_printf(
		    b,
		    "Not run: all sandboxes are busy. Retry in %u "
		    "s.",
		    res->retry_after_s);
	case RUNNER_RATE_LIMITED:
		return buf_printf(b, "Not run: %s.",
		                  res->message[0]
		                      ? res->message
		                      : "this tenant passed a limit");
	case RUNNER_ERROR:
		return buf_printf(
		    b,
		    "The sandbox could not run the code: %s. This "
		    "is a problem on the server, not in the code; "
		    "retry in a minute.",
		    res->message[0] ? res->message : "unknown error");
	}
	return 0;
}

static int tools_run_stream_text(struct buf *b, const char *name,
                                 const struct runner_output *o)
{
	int r;

	if (o->total == 0)
		return 0;
	r = buf_printf(b, "\n--- %s", name);
	if (r == 0 && o->truncated)
		r = buf_printf(b, " (%zu bytes; only the start and end shown)",
		               o->total);
	if (r == 0)
		r = buf_printf(b, " ---\n%s", o->text ? o->text : "");
	if (r == 0 && o->text && o->text[0] &&
	    o->text[strlen(o->text) - 1] != '\n')
		r = buf_putc(b, '\n');
	return r;
}

/* Words for a person: why a session's state was lost. */
static const char *tools_run_why(const char *reason)
{
	static const struct {
		const char *reason, *text;
	} why[] = {
	    {"timeout_kill", "a run timed out and did not stop when "
	                     "interrupted, so the interpreter was killed"},
	    {"cancel_kill", "a run was cancelled and did not stop when "
	                    "interrupted, so the interpreter was killed"},
	    {"output_limit_kill", "a run's output passed the limit and the "
	                          "interpreter was killed"},
	    {"quota_kill", "a run wrote past the workspace quota and did not "
	                   "stop when interrupted, so the interpreter was "
	                   "killed"},
	    {"killed", "the interpreter was killed"},
	    {"oom", "it ran out of memory"},
	    {"exit", "the code called exit() (or os._exit)"},
	    {"crash", "the interpreter crashed"},
	    {"protocol", "the code wrote garbage to the sandbox's control "
	                 "channel"},
	    {"unresponsive", "the sandbox stopped responding and was "
	                     "killed"},
	    {"sandbox_lost", "the sandbox was stopped or lost its connection "
	                     "to the server (the Docker engine restarted, "
	                     "say)"},
	    {"sandbox_damaged", "its sandbox was damaged on the server (its "
	                        "files or mounts were removed) and was "
	                        "replaced"},
	    {"idle_expired", "it was not used for too long"},
	    {"max_lifetime", "it reached its maximum lifetime"},
	    {"evicted", "the server needed room for other conversations"},
	    {"cpu_budget", "it kept using CPU between runs (a thread left "
	                   "running) after this tenant's CPU budget was used "
	                   "up"},
	    {"tenant_share", "this tenant holds its fair share of the "
	                     "server's warm sessions and all of them are "
	                     "busy"},
	    {"server_restarted", "the server restarted"},
	    {"moved", "the conversation moved to this server from another "
	              "one, which handed it over"},
	    {"server_lost", "the server that held the conversation stopped "
	                    "answering; its last saved state was loaded "
	                    "here"},
	    {"image_updated", "the runner image was updated"},
	    {"requested", "session \"new\" was asked for"},
	    {"forked", "this conversation was forked from another one"},
	    {"start_failed", "a sandbox could not be started"},
	    {"capacity", "the server has no room for another warm session "
	                 "right now"},
	    {"memory", "the server is short of memory for another warm "
	               "session"},
	    {"network", "runs with network use a one-off sandbox"},
	    {"one_off", "a one-off run was asked for"},
	    {"limits", "memory_mb or cpus other than the session's"},
	    {"disabled", "warm sessions are off on this server"},
	};

	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		if (strcmp(reason, why[i].reason) == 0)
			return why[i].text;
	return reason;
}

/* An ISO 8601 time, or "" for 0. */
static void tools_run_iso(time_t t, char out[FILES_ISO8601_LEN])
{
	if (t > 0)
		files_iso8601(t, out);
	else
		out[0] = '\0';
}

/*
 * CPU outside runs worth telling: below it, the agent's own work around a
 * call (its sweep, reading the result) that the run's cpu_ms leaves out.
 */
#define TOOLS_RUN_BACKGROUND_CPU_MS 100

/* Whether the session does work between runs worth telling. */
static bool tools_run_background(const struct runner_session *s)
{
	return s->warm &&
	       (s->background_threads > 0 || s->background_dropped_bytes > 0 ||
	        s->background_cpu_ms >= TOOLS_RUN_BACKGROUND_CPU_MS);
}

/* structuredContent.session.background. */
static void tools_run_background_json(cJSON *o, const struct runner_session *s)
{
	cJSON *bg;

	if (!tools_run_background(s))
		return;
	bg = cJSON_AddObjectToObject(o, "background");
	if (!bg)
		return;
	if (s->background_threads >= 0)
		cJSON_AddNumberToObject(bg, "threads", s->background_threads);
	cJSON_AddNumberToObject(bg, "dropped_output_bytes",
	                        (double)s->background_dropped_bytes);
	if (s->background_cpu_ms >= 0)
		cJSON_AddNumberToObject(bg, "cpu_ms",
		                        (double)s->background_cpu_ms);
}

/* structuredContent.session. */
static void tools_run_session_json(cJSON *sc, const struct runner_session *s)
{
	cJSON *o = cJSON_AddObjectToObject(sc, "session");
	char iso[FILES_ISO8601_LEN];

	if (!o)
		return;
	cJSON_AddStringToObject(o, "state", s->state[0] ? s->state : "none");
	if (s->reason[0])
		cJSON_AddStringToObject(o, "reason", s->reason);
	cJSON_AddBoolToObject(o, "stateful", s->warm && s->stateful);
	cJSON_AddBoolToObject(o, "lost", s->lost);
	if (s->lost)
		cJSON_AddStringToObject(o, "lost_reason", s->lost_reason);
	if (!s->warm) {
		/* A one-off run in a pool box (warm_run_once) says so. */
		if (s->from_pool)
			cJSON_AddBoolToObject(o, "from_pool", true);
		return;
	}
	cJSON_AddBoolToObject(o, "from_pool", s->from_pool);
	cJSON_AddNumberToObject(o, "runs", s->calls);
	if (s->memory_bytes >= 0)
		cJSON_AddNumberToObject(o, "memory_bytes",
		                        (double)s->memory_bytes);
	if (s->memory_peak_bytes >= 0)
		cJSON_AddNumberToObject(o, "memory_peak_bytes",
		                        (double)s->memory_peak_bytes);
	if (s->memory_limit_bytes >= 0)
		cJSON_AddNumberToObject(o, "memory_limit_bytes",
		                        (double)s->memory_limit_bytes);
	tools_run_iso(s->lost ? 0 : s->idle_expires_at, iso);
	if (iso[0])
		cJSON_AddStringToObject(o, "idle_expires_at", iso);
	tools_run_iso(s->lost ? 0 : s->expires_at, iso);
	if (iso[0])
		cJSON_AddStringToObject(o, "expires_at", iso);
	tools_run_background_json(o, s);
}

/* "a (why), b (why)" of a report's [{"name","why"}] list, at most 10. */
static int tools_run_state_names(struct buf *b, const cJSON *list)
{
	const cJSON *e;
	int n = 0, total = cJSON_GetArraySize(list), r = 0;

	cJSON_ArrayForEach (e, list) {
		const char *name = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "name"));
		const char *why = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "why"));

		if (n == 10) {
			r = buf_printf(b, " and %d more", total - n);
			break;
		}
		r = buf_printf(b, "%s%s (%s)", n ? ", " : "", name ? name : "?",
		               why ? why : "?");
		if (r < 0)
			break;
		n++;
	}
	return r;
}

/* Adds the durable state report (warm_state.h) to structuredContent.session. */
static void tools_run_state_json(cJSON *sc, const cJSON *st)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(sc, "session");
	const cJSON *v;

	if (!o || !st)
		return;
	v = cJSON_GetObjectItemCaseSensitive(st, "run");
	if (cJSON_IsNumber(v))
		cJSON_AddNumberToObject(o, "run_number", v->valuedouble);
	v = cJSON_GetObjectItemCaseSensitive(st, "kept");
	if (v)
		cJSON_AddItemToObject(o, "saved_runs",
		                      cJSON_Duplicate(v, true));
	v = cJSON_GetObjectItemCaseSensitive(st, "restored");
	if (v)
		cJSON_AddItemToObject(o, "restored", cJSON_Duplicate(v, true));
	v = cJSON_GetObjectItemCaseSensitive(st, "saved");
	if (v)
		cJSON_AddItemToObject(o, "autosave", cJSON_Duplicate(v, true));
}

/* The language's name in a sentence ("the TypeScript state"). */
static const char *tools_run_state_lang(const char *language)
{
	if (strcmp(language, "python") == 0 || !language[0])
		return "Python";
	if (strcmp(language, "typescript") == 0)
		return "TypeScript";
	if (strcmp(language, "r") == 0)
		return "R";
	return language;
}

/*
 * The first line of the text when the state was restored or rewound: when
 * it was saved, how long loading took, what did not come back and which
 * imports were run again (for R: the packages attached again).
 */
static int tools_run_state_note(struct buf *b, const struct runner_session *s,
                                const cJSON *st, const char *language)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "restored");
	const char *at = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(r, "saved_at"));
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(r, "run");
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "ms");
	const cJSON *nr = cJSON_GetObjectItemCaseSensitive(r, "not_restored");
	const cJSON *imp = cJSON_GetObjectItemCaseSensitive(r, "imports");
	const cJSON *e;
	bool rewind = strcmp(s->state, "rewound") == 0;
	/* Saved state comes from kernel.R (R) or kernel.py (Python, and the
	 * runners built from its image under another name). */
	bool r_lang = strcmp(language, "r") == 0;
	const char *lang = r_lang ? "R" : "Python";
	const char *again =
	    r_lang ? " Packages attached again: " : " Imports re-run: ";
	int rc, n = 0;

	if (!rewind && strcmp(s->state, "restored") != 0)
		return 0;
	if (rewind)
		rc = buf_printf(b,
		                "NOTE: the %s state was rewound to what "
		                "it was right after run %.0f",
		                lang,
		                cJSON_IsNumber(run) ? run->valuedouble : 0);
	else
		rc = buf_printf(
		    b,
		    "NOTE: the %s state of this conversation was restored "
		    "(%s) from its save after run %.0f",
		    lang,
		    s->reason[0] ? tools_run_why(s->reason)
		                 : "its session had ended",
		    cJSON_IsNumber(run) ? run->valuedouble : 0);
	if (rc == 0 && at)
		rc = buf_printf(b, " of %s", at);
	if (rc == 0 && cJSON_IsNumber(ms))
		rc = buf_printf(b, ", loaded in %.0f ms", ms->valuedouble);
	if (rc == 0)
		rc = buf_puts(b, ".");
	if (rc == 0 && cJSON_GetArraySize(nr) > 0) {
		rc = buf_puts(b, " Not restored: ");
		if (rc == 0)
			rc = tools_run_state_names(b, nr);
		if (rc == 0)
			rc = buf_puts(b, ".");
	}
	cJSON_ArrayForEach (e, imp) {
		if (rc < 0)
			break;
		rc = buf_printf(b, "%s%s", n++ ? ", " : again,
		                cJSON_GetStringValue(e));
	}
	if (rc == 0 && n)
		rc = buf_puts(b, ".");
	return rc < 0 ? rc : buf_putc(b, '\n');
}

/*
 * A line when the state of the previous run could not be saved, whole or
 * in part, or a restore failed.
 */
static int tools_run_state_line(struct buf *b, const cJSON *st)
{
	const cJSON *sv = cJSON_GetObjectItemCaseSensitive(st, "saved");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "restored");
	const char *err =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sv, "error"));
	const char *rerr =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "error"));
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(sv, "not_saved");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(sv, "run");
	double n = cJSON_IsNumber(run) ? run->valuedouble : 0;
	int rc = 0;

	if (rerr)
		rc = buf_printf(b,
		                "\nstate: the saved state could not be "
		                "restored: %s",
		                rerr);
	if (rc == 0 && sv &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sv, "ok")))
		rc = buf_printf(b, "\nstate: NOT saved after run %.0f: %s", n,
		                err ? err : "unknown error");
	else if (rc == 0 && cJSON_GetArraySize(ns) > 0) {
		rc = buf_printf(b, "\nstate: saved after run %.0f without ", n);
		if (rc == 0)
			rc = tools_run_state_names(b, ns);
		if (rc == 0)
			rc =
			    buf_puts(b, "; those would not come back after the "
			                "session ends");
	}
	return rc;
}

/*
 * The first line of the text when state was lost (before or by this run),
 * so a model reading only the start cannot miss it.
 */
static int tools_run_session_note(struct buf *b, const struct runner_session *s,
                                  const char *language)
{
	const char *lang = tools_run_state_lang(language);

	if (strcmp(s->state, "restarted") == 0 && s->stateful)
		return buf_printf(
		    b,
		    "NOTE: the %s state of this conversation "
		    "was lost before this run (%s). Variables, "
		    "imports and loaded data from earlier runs are "
		    "gone: run the setup code again.\n",
		    lang, tools_run_why(s->reason));
	if (s->lost && s->stateful)
		return buf_printf(
		    b,
		    "NOTE: this run ended the %s state (%s). "
		    "The next run starts with a fresh interpreter: "
		    "variables and imports are gone.\n",
		    lang, tools_run_why(s->lost_reason));
	return 0;
}

/* The line after the status: the session in a few words. */
static int tools_run_session_line(struct buf *b, const struct runner_session *s,
                                  const struct config *cfg)
{
	int r;

	if (!s->warm)
		return s->reason[0] && strcmp(s->reason, "disabled") != 0
		           ? buf_printf(b,
		                        "\nsession: none, a one-off sandbox "
		                        "(%s)%s",
		                        tools_run_why(s->reason),
		                        s->from_pool ? ", pre-started" : "")
		           : 0;
	r = buf_printf(b, "\nsession: %s%s, run %u", s->state,
	               s->from_pool ? " (pre-started)" : "", s->calls);
	if (r == 0 && s->memory_bytes >= 0 && s->memory_limit_bytes > 0)
		r = buf_printf(b, "; memory %.1f MB of %.0f MB",
		               (double)s->memory_bytes / (1024 * 1024),
		               (double)s->memory_limit_bytes / (1024 * 1024));
	if (r == 0 && !s->lost) {
		char idle[32];

		tools_run_span(idle, cfg->warm_idle_s);
		r = buf_printf(b, "; %s ends after %s without a run",
		               s->stateful ? "state kept, it" : "it", idle);
	}
	if (r == 0 && tools_run_background(s) && !s->lost &&
	    s->background_threads > 0)
		r = buf_printf(
		    b,
		    "\nbackground: %d thread(s) of earlier code are still "
		    "running: they keep using CPU (%lld ms outside runs "
		    "since the last result, charged to this tenant's "
		    "budget); what they print during a run shows in its "
		    "output, what they print between runs is dropped "
		    "(%lld bytes since the last run). Stop them, or pass "
		    "session: \"new\", if they are not meant to run on",
		    s->background_threads,
		    s->background_cpu_ms > 0 ? s->background_cpu_ms : 0,
		    s->background_dropped_bytes);
	else if (r == 0 && tools_run_background(s) && !s->lost)
		r = buf_printf(b,
		               "\nbackground: since the last result, code of "
		               "earlier runs used %lld ms of CPU outside runs "
		               "(charged to this tenant's budget); what it "
		               "printed between runs is dropped (%lld bytes)",
		               s->background_cpu_ms > 0 ? s->background_cpu_ms
		                                        : 0,
		               s->background_dropped_bytes);
	return r;
}

/* structuredContent's usage figures and the text's usage line. */
static int tools_run_usage(cJSON *sc, struct buf *b,
                           const struct runner_result *res)
{
	const double mb = 1024.0 * 1024.0;
	int r = 0;

	if (res->memory_mb)
		cJSON_AddNumberToObject(sc, "memory_mb", res->memory_mb);
	if (res->cpus > 0)
		cJSON_AddNumberToObject(sc, "cpus", res->cpus);
	if (res->memory_peak_bytes >= 0)
		cJSON_AddNumberToObject(sc, "memory_peak_bytes",
		                        (double)res->memory_peak_bytes);
	if (res->memory_peak_bytes < 0 && res->cpu_ms < 0)
		return 0;
	r = buf_puts(b, "\nusage:");
	if (r == 0 && res->memory_peak_bytes >= 0)
		r = buf_printf(b, " peak memory %.1f MB of %u MB%s",
		               (double)res->memory_peak_bytes / mb,
		               res->memory_mb,
		               res->session.warm ? " (the session's)" : "");
	if (r == 0 && res->cpu_ms >= 0)
		r = buf_printf(b, "%s CPU time %lld ms",
		               res->memory_peak_bytes >= 0 ? "," : "",
		               res->cpu_ms);
	return r;
}

/* structuredContent.value and the text's value section. */
static int tools_run_value(cJSON *sc, struct buf *text,
                           const struct runner_result *res)
{
	cJSON *v = res->value_json ? cJSON_Parse(res->value_json) : NULL;
	const char *plain;
	int r = 0;

	if (!v)
		return 0;
	if (!cJSON_IsObject(v)) {
		cJSON_Delete(v);
		return 0;
	}
	plain = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(v, "text/plain"));
	if (plain)
		r = buf_printf(
		    text, "\n--- value of the last expression ---\n%s%s", plain,
		    plain[0] && plain[strlen(plain) - 1] == '\n' ? "" : "\n");
	cJSON_AddItemToObject(sc, "value", v);
	return r;
}

/*
 * A run with network: its egress facts in sc, and a line in text naming
 * what was blocked, so that a model can ask the person instead of
 * guessing.
 */
static int tools_run_egress(cJSON *sc, struct buf *text,
                            const struct egress_facts *f)
{
	cJSON *o = egress_facts_json(f);
	unsigned shown = 0;
	int r;

	if (!o || !cJSON_AddItemToObject(sc, "egress", o)) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	r = buf_printf(text, "\nnetwork: %u request%s allowed, %u blocked",
	               f->allowed, f->allowed == 1 ? "" : "s", f->blocked);
	for (size_t i = 0; r == 0 && i < f->n_dests; i++) {
		const struct egress_dest *d = &f->dests[i];

		if (d->verdict == EGRESS_ALLOWED || shown == 8)
			continue;
		r = buf_printf(text, "%s%s:%u (%s)", shown ? "; " : ": ",
		               d->host, d->port,
		               egress_verdict_reason(d->verdict));
		shown++;
	}
	if (r == 0 && f->blocked)
		r = buf_puts(text, ". Ask the person whether to allow them; "
		                   "the operator sets the allow-list");
	return r;
}

/*
 * _meta["mcp-sandboxd/timing"].run_us: duration_ms to the microsecond, for
 * tools that measure the server's own time per call beside the agent's
 * round trip (tests/bench/warm_raw.c); not part of structuredContent, whose
 * schema stays as it is.
 */
static int tools_run_timing(cJSON *result, const struct runner_result *res)
{
	cJSON *meta = cJSON_AddObjectToObject(result, "_meta");
	cJSON *t =
	    meta ? cJSON_AddObjectToObject(meta, TOOLS_RUN_META_TIMING) : NULL;

	return t && cJSON_AddNumberToObject(t, "run_us",
	                                    (double)res->duration_us)
	           ? 0
	           : -ENOMEM;
}

cJSON *tools_run_result(const struct runner_result *res,
                        const struct config *cfg)
{
	cJSON *result = cJSON_CreateObject(), *sc, *content, *t, *st = NULL;
	struct buf text, advice;
	char *txt = NULL, *adv = NULL;
	bool not_run =
	    res->status == RUNNER_BUSY || res->status == RUNNER_RATE_LIMITED;
	int r;

	buf_init(&text, 0);
	buf_init(&advice, 0);
	if (!result)
		goto fail;
	r = tools_run_advice(&advice, res, cfg);
	if (r < 0 || !(adv = buf_take(&advice, NULL)))
		goto fail;
	sc = cJSON_AddObjectToObject(result, "structuredContent");
	if (!sc)
		goto fail;
	if (res->duration_us > 0 && tools_run_timing(result, res) < 0)
		goto fail;
	cJSON_AddStringToObject(sc, "status", runner_status_name(res->status));
	if (res->exit_code >= 0)
		cJSON_AddNumberToObject(sc, "exit_code", res->exit_code);
	else
		cJSON_AddNullToObject(sc, "exit_code");
	cJSON_AddStringToObject(sc, "stdout",
	                        res->out.text ? res->out.text : "");
	cJSON_AddStringToObject(sc, "stderr",
	                        res->err.text ? res->err.text : "");
	cJSON_AddBoolToObject(sc, "stdout_truncated", res->out.truncated);
	cJSON_AddBoolToObject(sc, "stderr_truncated", res->err.truncated);
	cJSON_AddNumberToObject(sc, "stdout_bytes", (double)res->out.total);
	cJSON_AddNumberToObject(sc, "stderr_bytes", (double)res->err.total);
	cJSON_AddNumberToObject(sc, "duration_ms", (double)res->duration_ms);
	cJSON_AddNumberToObject(sc, "queue_ms", (double)res->queue_ms);
	cJSON_AddBoolToObject(sc, "timed_out", res->timed_out);
	cJSON_AddBoolToObject(sc, "oom_killed", res->oom_killed);
	cJSON_AddNumberToObject(sc, "timeout_seconds", res->timeout_s);
	if (res->language[0])
		cJSON_AddStringToObject(sc, "language", res->language);
	if (res->image[0])
		cJSON_AddStringToObject(sc, "runner_image", res->image);
	if (res->version[0])
		cJSON_AddStringToObject(sc, "runner_version", res->version);
	if (res->status == RUNNER_BUSY || res->status == RUNNER_RATE_LIMITED)
		cJSON_AddNumberToObject(sc, "retry_after_seconds",
		                        res->retry_after_s);
	if (res->status == RUNNER_RATE_LIMITED && res->limit[0])
		cJSON_AddStringToObject(sc, "limit", res->limit);
	if (adv[0])
		cJSON_AddStringToObject(sc, "message", adv);
	if (res->state_json)
		st = cJSON_Parse(res->state_json);
	if (!not_run)
		tools_run_session_json(sc, &res->session);
	if (!not_run)
		tools_run_state_json(sc, st);
	if (res->cpu_ms >= 0)
		cJSON_AddNumberToObject(sc, "cpu_ms", (double)res->cpu_ms);
	if (res->error_name[0])
		cJSON_AddStringToObject(sc, "error_name", res->error_name);
	if (res->packages_json && (t = cJSON_Parse(res->packages_json)) != NULL)
		cJSON_AddItemToObject(sc, "packages", t);

	r = tools_run_session_note(&text, &res->session, res->language);
	if (r == 0 && !not_run)
		r = tools_run_state_note(&text, &res->session, st,
		                         res->language);
	if (r == 0)
		r = buf_printf(&text, "status: %s",
		               runner_status_name(res->status));
	if (r == 0 && res->install_failed)
		r = buf_puts(&text, " while installing packages; the code "
		                    "did not run");
	if (r == 0 && res->exit_code >= 0)
		r = buf_printf(&text, ", exit code %d", res->exit_code);
	if (r == 0 && !not_run && res->status != RUNNER_ERROR &&
	    !res->install_failed)
		r = buf_printf(&text, ", %lld ms", res->duration_ms);
	if (r == 0 && res->queue_ms >= 1000)
		r = buf_printf(&text, " (queued %lld ms)", res->queue_ms);
	if (r == 0 && res->language[0])
		r = buf_printf(&text, " [%s%s%s]", res->language,
		               res->version[0] ? " " : "", res->version);
	if (r == 0 && !not_run && res->status != RUNNER_ERROR)
		r = tools_run_usage(sc, &text, res);
	if (r == 0 && !not_run)
		r = tools_run_session_line(&text, &res->session, cfg);
	if (r == 0 && !not_run && st)
		r = tools_run_state_line(&text, st);
	if (r == 0 && res->packages_note[0])
		r = buf_printf(&text, "\npackages: %s", res->packages_note);
	if (r == 0 && res->egress)
		r = tools_run_egress(sc, &text, res->egress);
	if (r == 0)
		r = tools_run_stream_text(&text, "stdout", &res->out);
	if (r == 0)
		r = tools_run_stream_text(&text, "stderr", &res->err);
	if (r == 0)
		r = tools_run_value(sc, &text, res);
	if (r == 0 && res->out.total == 0 && res->err.total == 0 &&
	    !res->value_json &&
	    (res->status == RUNNER_COMPLETED || res->status == RUNNER_FAILED))
		r = buf_puts(&text, "\n(no output)");
	if (r == 0 && adv[0])
		r = buf_printf(&text, "\n%s", adv);
	if (r < 0 || !(txt = buf_take(&text, NULL)))
		goto fail;
	content = cJSON_AddArrayToObject(result, "content");
	t = cJSON_CreateObject();
	if (!content || !t || !cJSON_AddItemToArray(content, t)) {
		cJSON_Delete(t);
		goto fail;
	}
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", txt);
	cJSON_AddBoolToObject(result, "isError",
	                      res->status != RUNNER_COMPLETED);
	free(txt);
	free(adv);
	cJSON_Delete(st);
	buf_finish(&text);
	buf_finish(&advice);
	return result;
fail:
	cJSON_Delete(st);
	free(txt);
	free(adv);
	buf_finish(&text);
	buf_finish(&advice);
	cJSON_Delete(result);
	return NULL;
}
