/* SPDX-License-Identifier: MIT */
/*
 * audit_http: see audit_http.h. The context is set once before serving
 * and only read afterwards.
 */
#include "audit/audit_http.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "audit/usage.h"
#include "util/buf.h"
#include "util/num.h"

#define AUDIT_HTTP_LIMIT_DEFAULT 10000
#define AUDIT_HTTP_BODY_MAX (256u << 20) /* an export page, at most */

static struct {
	const struct config *cfg;
	struct store *st;
} audit_http;

static bool audit_http_allowed(struct http_request *rq)
{
	return http_operator_ok(rq, audit_http.cfg->operator_token,
	                        "OPERATOR_TOKEN", http_request_path(rq));
}

/* Answers 400 with msg; returns false, for "return audit_http_bad(...)". */
static bool audit_http_bad(struct http_request *rq, const char *msg)
{
	(void)http_reply_error(rq, 400, "%s", msg);
	return false;
}

static void usage_handle(void *data, struct http_request *rq)
{
	const char *by = http_request_query(rq, "by");
	const char *fmt = http_request_query(rq, "format");
	const char *accept = http_request_header(rq, "Accept");
	struct usage_query q;
	cJSON *rep = NULL;
	char err[256];
	bool csv;

	(void)data;
	audit_wait_written(AUDIT_WAIT_WRITTEN_MS);
	if (!audit_http_allowed(rq))
		return;
	if (usage_query_parse(
	        http_request_query(rq, "from"), http_request_query(rq, "to"),
	        http_request_query(rq, "bucket"), (long long)time(NULL), &q,
	        err, sizeof(err)) < 0) {
		(void)audit_http_bad(rq, err);
		return;
	}
	if (by && strcmp(by, "conversation") != 0 &&
	    strcmp(by, "tenant") != 0) {
		(void)audit_http_bad(rq, "by: give tenant (the default) or "
		                         "conversation");
		return;
	}
	if (fmt && strcmp(fmt, "csv") != 0 && strcmp(fmt, "json") != 0) {
		(void)audit_http_bad(rq, "format: give json (the default) or "
		                         "csv");
		return;
	}
	csv = fmt ? strcmp(fmt, "csv") == 0
	          : accept && http_accepts(accept, "text/csv") &&
	                !http_accepts(accept, "application/json");
	q.tenant = http_request_query(rq, "tenant");
	q.conversation = http_request_query(rq, "conversation");
	q.by_conversation = (by && strcmp(by, "conversation") == 0) ||
	                    (q.conversation && q.conversation[0]);
	if (usage_report(audit_http.st, &q, &rep, err, sizeof(err)) < 0) {
		(void)http_reply_error(rq, 503, "%s", err);
		return;
	}
	if (csv) {
		struct buf b;

		buf_init(&b, 0);
		if (usage_csv(rep, &b) == 0)
			(void)http_reply(rq, 200, "text/csv; charset=utf-8",
			                 b.data ? b.data : "", b.len);
		buf_finish(&b);
	} else {
		(void)http_reply_json(rq, 200, rep);
	}
	cJSON_Delete(rep);
}

static int audit_http_emit(void *arg, const char *line, size_t n)
{
	return buf_append(arg, line, n);
}

/* The export's filter from the query; false after answering 400. */
static bool audit_http_filter(struct http_request *rq, struct audit_filter *f)
{
	const char *from = http_request_query(rq, "from");
	const char *to = http_request_query(rq, "to");
	const char *after = http_request_query(rq, "after");
	const char *limit = http_request_query(rq, "limit");
	long long s;
	uint64_t v;
	char err[256];

	memset(f, 0, sizeof(*f));
	f->tenant = http_request_query(rq, "tenant");
	f->conversation = http_request_query(rq, "conversation");
	f->limit = AUDIT_HTTP_LIMIT_DEFAULT;
	if (from && usage_time_parse("from", from, &s, err, sizeof(err)) < 0)
		return audit_http_bad(rq, err);
	f->from_ms = from ? s * 1000 : 0;
	if (to && usage_time_parse("to", to, &s, err, sizeof(err)) < 0)
		return audit_http_bad(rq, err);
	f->to_ms = to ? s * 1000 : 0;
	if (after && num_u64(after, INT64_MAX, &v) < 0)
		return audit_http_bad(rq, "after: give the seq of the last "
		                          "entry you have (a whole number)");
	f->after_seq = after ? (long long)v : 0;
	if (limit && (num_u64(limit, AUDIT_EXPORT_MAX, &v) < 0 || v == 0)) {
		snprintf(err, sizeof(err),
		         "limit: give a whole number from 1 to %d",
		         AUDIT_EXPORT_MAX);
		return audit_http_bad(rq, err);
	}
	if (limit)
		f->limit = (unsigned)v;
	return true;
}

static void audit_handle(void *data, struct http_request *rq)
{
	struct audit_filter f;
	long long last = 0;
	struct buf b;
	char next[32];
	int r;

	(void)data;
	audit_wait_written(AUDIT_WAIT_WRITTEN_MS);
	if (!audit_http_allowed(rq) || !audit_http_filter(rq, &f))
		return;
	buf_init(&b, AUDIT_HTTP_BODY_MAX);
	r = audit_export(audit_http.st, &f, audit_http_emit, &b, &last);
	if (r < 0) {
		(void)http_reply_error(
		    rq, r == -ENOMEM ? 413 : 503,
		    "the audit trail could not be read (%s); "
		    "%s",
		    strerror(-r),
		    r == -ENOMEM ? "ask for fewer entries "
		                   "(limit=)"
		                 : "retry, and see the "
		                   "daemon's log");
		buf_finish(&b);
		return;
	}
	(void)http_reply(rq, 200, "application/x-ndjson; charset=utf-8",
	                 b.data ? b.data : "", b.len);
	buf_finish(&b);
	/* Where the next page starts (?after=). */
	if (last) {
		snprintf(next, sizeof(next), "%lld", last);
		(void)http_reply_header(rq, "Audit-Last-Seq", next);
	}
}

static void verify_handle(void *data, struct http_request *rq)
{
	struct audit_verdict v;
	cJSON *o;
	int r;

	(void)data;
	audit_wait_written(AUDIT_WAIT_WRITTEN_MS);
	if (!audit_http_allowed(rq))
		return;
	r = audit_verify(audit_http.st, &v);
	if (r < 0) {
		(void)http_reply_error(
		    rq, 503,
		    "the audit trail could not be read (%s); "
		    "retry, and see the daemon's log",
		    strerror(-r));
		return;
	}
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddBoolToObject(o, "ok", v.ok);
	cJSON_AddNumberToObject(o, "entries", (double)v.entries);
	cJSON_AddNumberToObject(o, "first_seq", (double)v.first_seq);
	cJSON_AddNumberToObject(o, "head_seq", (double)v.head_seq);
	cJSON_AddStringToObject(o, "head_hash", v.head_hash);
	if (!v.ok) {
		cJSON_AddNumberToObject(o, "broken_seq", (double)v.broken_seq);
		cJSON_AddStringToObject(o, "reason", v.reason);
	}
	(void)http_reply_json(rq, v.ok ? 200 : 409, o);
	cJSON_Delete(o);
}

int audit_http_register(struct http_server *hs, const struct config *cfg,
                        struct store *st, char *err, size_t errlen)
{
	static const struct http_route routes[] = {
	    {.path = "/admin/usage",
	     .methods = HTTP_GET | HTTP_HEAD,
	     .guard = true,
	     .early = true,
	     .handler = usage_handle},
	    {.path = "/admin/audit",
	     .methods = HTTP_GET | HTTP_HEAD,
	     .guard = true,
	     .early = true,
	     .handler = audit_handle},
	    {.path = "/admin/audit/verify",
	     .methods = HTTP_GET | HTTP_HEAD,
	     .guard = true,
	     .early = true,
	     .handler = verify_handle},
	};
	int r = 0;

	audit_http.cfg = cfg;
	audit_http.st = st;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && r == 0;
	     i++)
		r = http_server_add_route(hs, &routes[i], err, errlen);
	return r;
}
