/* SPDX-License-Identifier: MIT */
/*
 * tools_audit: see tools_audit.h. The trail pointer is written once before
 * serving and only read afterwards.
 */
#include "tools/audit/tools_audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/usage.h"
#include "egress/egress_log.h"
#include "run/budget.h"
#include "util/buf.h"
#include "util/log.h"

#define TOOLS_AUDIT_FILES_MAX 200 /* files named in one entry */

static struct audit *tools_audit;

/* Wall clock in milliseconds. */
static long long tools_audit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * What the tenant is charged for the run, as the budget counts it
 * (runner.c): a warm box's measured CPU, else the run's, else wall time
 * x cpus; plus the installer's.
 */
static long long tools_audit_cpu_ms(const struct runner_result *res)
{
	bool est = false;
	long long ms;

	if (res->status == RUNNER_BUSY || res->status == RUNNER_RATE_LIMITED)
		return 0;
	ms = res->cpu_charge_known
	         ? res->cpu_charge_ms
	         : budget_charge_ms(res->cpu_ms, res->duration_ms, res->cpus,
	                            &est);
	return ms + (res->packages_cpu_ms > 0 ? res->packages_cpu_ms : 0);
}

/* How many packages the run installed (not reused, not preinstalled). */
static long long tools_audit_installed(const struct runner_result *res)
{
	cJSON *j = res->packages_json ? cJSON_Parse(res->packages_json) : NULL;
	long long n = cJSON_GetArraySize(
	    cJSON_GetObjectItemCaseSensitive(j, "installed"));

	cJSON_Delete(j);
	return n;
}

/* The files of structuredContent.files, borrowed from result. */
static size_t tools_audit_files(const cJSON *sc, struct audit_file *out,
                                size_t max)
{
	const cJSON *f;
	size_t n = 0;

	cJSON_ArrayForEach (f, cJSON_GetObjectItemCaseSensitive(sc, "files")) {
		const char *name = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(f, "name"));
		const cJSON *sz = cJSON_GetObjectItemCaseSensitive(f, "size");

		if (n == max)
			break;
		if (!name)
			continue;
		out[n].name = name;
		out[n].size =
		    cJSON_IsNumber(sz) ? (long long)sz->valuedouble : -1;
		n++;
	}
	return n;
}

/* A run's destinations through the egress proxy, as "host:port" texts. */
struct tools_audit_net {
	char text[EGRESS_FACTS_DEST_MAX][EGRESS_HOST_MAX + 8];
	const char *allowed[EGRESS_FACTS_DEST_MAX];
	const char *blocked[EGRESS_FACTS_DEST_MAX];
};

/* Fills r's network fields from what the proxy saw of the run (f may be
 * NULL: a run without network reached nothing). */
static void tools_audit_egress(const struct egress_facts *f,
                               struct tools_audit_net *net, struct audit_run *r)
{
	size_t na = 0, nb = 0;

	r->net_allowed = net->allowed;
	r->net_blocked = net->blocked;
	if (!f)
		return;
	for (size_t i = 0; i < f->n_dests && i < EGRESS_FACTS_DEST_MAX; i++) {
		const struct egress_dest *d = &f->dests[i];

		snprintf(net->text[i], sizeof(net->text[i]), "%s:%u", d->host,
		         d->port);
		if (d->verdict == EGRESS_ALLOWED)
			net->allowed[na++] = net->text[i];
		else
			net->blocked[nb++] = net->text[i];
	}
	r->n_net_allowed = na;
	r->n_net_blocked = nb;
	r->egress_bytes = f->bytes_in + f->bytes_out;
}

/*
 * The entry of a run, recorded now (later NULL) or prepared for
 * audit_write into *later.
 */
static void tools_audit_entry(struct mcp_call *call, const char *tool,
                              const char *conv,
                              const struct runner_request *req,
                              const struct runner_result *res,
                              const cJSON *result, struct audit_pending **later)
{
	const cJSON *sc =
	    cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
	const cJSON *used = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(sc, "workspace"), "bytesUsed");
	struct audit_file *files;
	struct tools_audit_net net = {0};
	struct audit_run r;
	int rc;

	if (later)
		*later = NULL;
	if (!tools_audit)
		return;
	files = calloc(TOOLS_AUDIT_FILES_MAX, sizeof(*files));
	memset(&r, 0, sizeof(r));
	r.tool = tool;
	r.tenant = mcp_call_tenant(call);
	r.client = mcp_call_client(call);
	r.conversation = conv ? conv : "";
	r.language = res->language[0] ? res->language : req->language;
	r.status = runner_status_name(res->status);
	r.exit_code = res->exit_code;
	r.code = req->code;
	r.code_len = req->code_len;
	r.timeout_s = res->timeout_s;
	r.memory_mb = res->memory_mb;
	r.cpus = res->cpus;
	r.network = req->network;
	r.duration_ms = res->duration_ms;
	r.cpu_ms = tools_audit_cpu_ms(res);
	r.memory_peak_bytes = res->memory_peak_bytes;
	r.storage_bytes =
	    cJSON_IsNumber(used) ? (long long)used->valuedouble : -1;
	r.packages = req->packages;
	r.n_packages = req->n_packages;
	r.packages_installed = tools_audit_installed(res);
	tools_audit_egress(res->egress, &net, &r);
	r.files = files;
	r.n_files =
	    files ? tools_audit_files(sc, files, TOOLS_AUDIT_FILES_MAX) : 0;
	/* Logged there: the run's answer goes out either way. */
	if (later)
		rc =
		    audit_prepare(tools_audit, &r, tools_audit_now_ms(), later);
	else
		rc = audit_record(tools_audit, &r, tools_audit_now_ms());
	if (rc < 0)
		log_debug("audit: the run above is not recorded");
	free(files);
}

void tools_audit_run(struct mcp_call *call, const char *tool, const char *conv,
                     const struct runner_request *req,
                     const struct runner_result *res, const cJSON *result)
{
	tools_audit_entry(call, tool, conv, req, res, result, NULL);
}

struct audit_pending *tools_audit_prepare(struct mcp_call *call,
                                          const char *tool, const char *conv,
                                          const struct runner_request *req,
                                          const struct runner_result *res,
                                          const cJSON *result)
{
	struct audit_pending *p = NULL;

	tools_audit_entry(call, tool, conv, req, res, result, &p);
	return p;
}

/* ---- the usage tool ------------------------------------------------------ */

/* Short: every conversation's tools/list carries it (tool_list.test). */
static const char tools_usage_input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"},"
    "\"bucket\":{\"enum\":[\"hour\",\"day\",\"none\"]},"
    "\"conversationId\":{\"type\":\"string\"},"
    "\"by_conversation\":{\"type\":\"boolean\"}},"
    "\"additionalProperties\":false}";

static const char tools_usage_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"from\":{\"type\":\"integer\"},\"to\":{\"type\":\"integer\"},"
    "\"bucket\":{\"type\":\"string\"},"
    "\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
    "\"truncated\":{\"type\":\"boolean\"}},"
    "\"required\":[\"from\",\"to\",\"bucket\",\"rows\"]}";

/* A string argument, or NULL; *bad when present but not a string. */
static const char *tools_usage_arg(const cJSON *args, const char *name,
                                   const char **bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

	if (v && !cJSON_IsString(v))
		*bad = name;
	return cJSON_GetStringValue(v);
}

/* One line per row for people; the figures are in structuredContent. */
static int tools_usage_text(const cJSON *rep, struct buf *b)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(rep, "rows");
	const cJSON *row;
	double cpu = 0, runs = 0;
	int r = 0;

	cJSON_ArrayForEach (row, rows) {
		runs += cJSON_GetNumberValue(
		    cJSON_GetObjectItemCaseSensitive(row, "runs"));
		cpu += cJSON_GetNumberValue(
		    cJSON_GetObjectItemCaseSensitive(row, "cpu_seconds"));
	}
	r = buf_printf(b,
	               "%.0f runs, %.1f CPU seconds in the window (%d rows; "
	               "see structuredContent for runs by status, memory x "
	               "time, packages, egress and storage)",
	               runs, cpu, cJSON_GetArraySize(rows));
	if (r == 0 &&
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "truncated")))
		r = buf_printf(b, "; only the first %d rows: narrow the window",
		               USAGE_REPORT_MAX_ROWS);
	return r;
}

static cJSON *tools_usage_call(void *data, struct mcp_call *call,
                               const cJSON *args)
{
	const char *bad = NULL, *conv;
	const char *from = tools_usage_arg(args, "from", &bad);
	const char *to = tools_usage_arg(args, "to", &bad);
	const char *bucket = tools_usage_arg(args, "bucket", &bad);
	const cJSON *byc =
	    cJSON_GetObjectItemCaseSensitive(args, "by_conversation");
	struct usage_query q;
	cJSON *rep = NULL, *result;
	char err[256];
	struct buf b;

	(void)data;
	/* The runs already answered are in it. */
	audit_wait_written(AUDIT_WAIT_WRITTEN_MS);
	conv = tools_usage_arg(args, "conversationId", &bad);
	if (byc && !cJSON_IsBool(byc))
		bad = "by_conversation";
	if (bad)
		return mcp_text_resultf(
		    true,
		    "usage: %s must be a %s; see the tool's "
		    "input schema",
		    bad,
		    strcmp(bad, "by_conversation") == 0 ? "boolean" : "string");
	if (usage_query_parse(from, to, bucket, (long long)time(NULL), &q, err,
	                      sizeof(err)) < 0)
		return mcp_text_resultf(true, "usage: %s", err);
	/* The caller's own tenant, always: no argument names another. */
	q.tenant = mcp_call_tenant(call);
	q.conversation = conv;
	q.by_conversation = cJSON_IsTrue(byc) || (conv && conv[0]);
	if (usage_report(audit_store(tools_audit), &q, &rep, err, sizeof(err)) <
	    0)
		return mcp_text_resultf(true, "usage: %s", err);
	buf_init(&b, 0);
	if (tools_usage_text(rep, &b) < 0) {
		buf_finish(&b);
		cJSON_Delete(rep);
		return NULL;
	}
	result = mcp_text_result(b.data, false);
	buf_finish(&b);
	if (!result) {
		cJSON_Delete(rep);
		return NULL;
	}
	cJSON_AddItemToObject(result, "structuredContent", rep);
	return result;
}

static struct tool_impl tools_usage_tool = {
    .name = "usage",
    .title = "Your usage",
    .description = "Your usage (default: last 7 days, per day; from/to: UTC "
                   "time or epoch seconds): runs, CPU, memory, packages, "
                   "egress, storage.",
    .input_schema = tools_usage_input_schema,
    .output_schema = tools_usage_output_schema,
    .read_only = true,
    .destructive = false,
    .idempotent = true,
    .open_world = false,
    .call = tools_usage_call,
};

void tools_audit_register(struct mcp_server *srv, struct audit *a)
{
	tools_audit = a;
	mcp_server_add_tool(srv, &tools_usage_tool);
}
