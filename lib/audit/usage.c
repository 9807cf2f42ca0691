/* SPDX-License-Identifier: MIT */
/*
 * usage: see usage.h. Every query is a constant string the store prepares
 * once; a report reads one snapshot and folds its rows (one per tenant,
 * conversation, bucket and status, in that order) into the answer in C,
 * so the SQL stays the same on SQLite and PostgreSQL.
 */
#include "audit/usage.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/errmsg.h"
#include "util/num.h"

#define USAGE_DEFAULT_WINDOW_S (7 * 86400LL)
/* Far enough for any report; keeps the arithmetic within int64. */
#define USAGE_MAX_TIME_S 253402300799LL /* 9999-12-31T23:59:59Z */

static const char *const usage_statuses[] = {
    "completed", "failed", "timed_out", "oom_killed",   "output_limit",
    "cancelled", "busy",   "error",     "rate_limited", "quota_exceeded",
};
#define N_STATUSES (sizeof(usage_statuses) / sizeof(usage_statuses[0]))

static long long usage_pos(long long v)
{
	return v > 0 ? v : 0;
}

int usage_add_tx(struct store_tx *tx, const struct usage_delta *d)
{
	static const char sql[] =
	    "INSERT INTO usage_hourly (tenant, conversation, hour, status, "
	    "runs, cpu_ms, memory_mib_ms, packages, egress_bytes, "
	    "storage_bytes) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?) "
	    "ON CONFLICT (tenant, conversation, hour, status) DO UPDATE SET "
	    "runs = usage_hourly.runs + 1, "
	    "cpu_ms = usage_hourly.cpu_ms + excluded.cpu_ms, "
	    "memory_mib_ms = usage_hourly.memory_mib_ms + "
	    "excluded.memory_mib_ms, "
	    "packages = usage_hourly.packages + excluded.packages, "
	    "egress_bytes = usage_hourly.egress_bytes + excluded.egress_bytes, "
	    "storage_bytes = CASE WHEN excluded.storage_bytes > "
	    "usage_hourly.storage_bytes THEN excluded.storage_bytes ELSE "
	    "usage_hourly.storage_bytes END";
	struct store_stmt *s = store_stmt(tx, sql);
	long long hour = d->time_s - (d->time_s % 3600 + 3600) % 3600;

	store_bind_text(s, 1, d->tenant ? d->tenant : "");
	store_bind_text(s, 2, d->conversation ? d->conversation : "");
	store_bind_int64(s, 3, hour);
	store_bind_text(s, 4, d->status);
	store_bind_int64(s, 5, usage_pos(d->cpu_ms));
	store_bind_int64(s, 6, usage_pos(d->memory_mib_ms));
	store_bind_int64(s, 7, usage_pos(d->packages));
	store_bind_int64(s, 8, usage_pos(d->egress_bytes));
	store_bind_int64(s, 9, usage_pos(d->storage_bytes));
	return store_run(tx, s);
}

/* ---- the question ----------------------------------------------------- */

int usage_time_parse(const char *name, const char *v, long long *out, char *err,
                     size_t errlen)
{
	struct tm tm;
	int64_t n;
	char z = 0, end = 0;

	if (num_i64(v, 0, USAGE_MAX_TIME_S, &n) == 0) {
		*out = n;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	if (sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d%c%c", &tm.tm_year, &tm.tm_mon,
	           &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z,
	           &end) == 7 &&
	    z == 'Z' && tm.tm_mon >= 1 && tm.tm_mon <= 12 && tm.tm_mday >= 1 &&
	    tm.tm_mday <= 31 && tm.tm_hour <= 23 && tm.tm_min <= 59 &&
	    tm.tm_sec <= 60 && tm.tm_year >= 1970) {
		tm.tm_year -= 1900;
		tm.tm_mon -= 1;
		*out = (long long)timegm(&tm);
		return 0;
	}
	return errmsg_fail(-EINVAL, err, errlen,
	                   "%s: '%.40s' is not a time; give seconds since the "
	                   "epoch (1764324000) or a UTC time "
	                   "(2026-11-28T10:00:00Z)",
	                   name, v);
}

int usage_query_parse(const char *from, const char *to, const char *bucket,
                      long long now_s, struct usage_query *q, char *err,
                      size_t errlen)
{
	int r;

	memset(q, 0, sizeof(*q));
	q->to_s = now_s + 1;
	if (to && *to &&
	    (r = usage_time_parse("to", to, &q->to_s, err, errlen)) < 0)
		return r;
	q->from_s = q->to_s - USAGE_DEFAULT_WINDOW_S;
	if (from && *from &&
	    (r = usage_time_parse("from", from, &q->from_s, err, errlen)) < 0)
		return r;
	if (q->from_s >= q->to_s)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "from (%lld) must be before to (%lld)",
		                   q->from_s, q->to_s);
	/* Whole hours: the counters are kept per hour. */
	q->from_s -= q->from_s % 3600;
	q->to_s += (3600 - q->to_s % 3600) % 3600;
	if (!bucket || !*bucket || strcmp(bucket, "day") == 0)
		q->bucket_s = 86400;
	else if (strcmp(bucket, "hour") == 0)
		q->bucket_s = 3600;
	else if (strcmp(bucket, "none") == 0)
		q->bucket_s = 0;
	else
		return errmsg_fail(-EINVAL, err, errlen,
		                   "bucket: '%.20s' is not one of hour, day, "
		                   "none",
		                   bucket);
	return 0;
}

/* ---- the report ------------------------------------------------------- */

/* The row being folded. */
struct usage_fold {
	cJSON *rows;
	cJSON *row;                  /* current output row, or NULL */
	char tenant[300], conv[520]; /* conversation ids: up to 256 bytes */
	long long start;
	long long runs, cpu_ms, mem, pkgs, egress, storage;
	long long by_status[N_STATUSES];
	/* the conversation whose largest size is being found */
	char size_conv[520];
	long long size_max;
	size_t n;
	bool truncated;
};

static void usage_fold_flush(struct usage_fold *f, const struct usage_query *q)
{
	cJSON *o, *bs;
	long long end;

	if (!f->row)
		return;
	o = f->row;
	f->storage += f->size_max;
	f->size_max = 0;
	f->size_conv[0] = '\0';
	end = q->bucket_s ? f->start + q->bucket_s : q->to_s;
	if (end > q->to_s)
		end = q->to_s;
	/* A day bucket may begin before the window: say what was counted. */
	if (f->start < q->from_s)
		f->start = q->from_s;
	cJSON_AddStringToObject(o, "tenant", f->tenant);
	if (q->by_conversation)
		cJSON_AddStringToObject(o, "conversation", f->conv);
	cJSON_AddNumberToObject(o, "start", (double)f->start);
	cJSON_AddNumberToObject(o, "end", (double)end);
	cJSON_AddNumberToObject(o, "runs", (double)f->runs);
	bs = cJSON_AddObjectToObject(o, "runs_by_status");
	for (size_t i = 0; i < N_STATUSES; i++)
		if (f->by_status[i])
			cJSON_AddNumberToObject(bs, usage_statuses[i],
			                        (double)f->by_status[i]);
	cJSON_AddNumberToObject(o, "cpu_seconds", (double)f->cpu_ms / 1000.0);
	cJSON_AddNumberToObject(o, "memory_mib_seconds",
	                        (double)f->mem / 1000.0);
	cJSON_AddNumberToObject(o, "packages_installed", (double)f->pkgs);
	cJSON_AddNumberToObject(o, "egress_bytes", (double)f->egress);
	cJSON_AddNumberToObject(o, "storage_bytes", (double)f->storage);
	f->row = NULL;
}

/* Folds one result row into f; -ENOMEM. */
static int usage_fold_row(struct usage_fold *f, const struct usage_query *q,
                          struct store_stmt *s)
{
	const char *tenant = store_col_text(s, 0);
	const char *conv = store_col_text(s, 1);
	const char *status = store_col_text(s, 3);
	long long start = store_col_int64(s, 2);
	const char *key_conv = q->by_conversation ? conv : "";

	tenant = tenant ? tenant : "";
	conv = conv ? conv : "";
	if (!f->row || strcmp(f->tenant, tenant) != 0 || f->start != start ||
	    strcmp(f->conv, key_conv) != 0) {
		usage_fold_flush(f, q);
		if (f->n >= USAGE_REPORT_MAX_ROWS) {
			f->truncated = true;
			return 1;
		}
		f->row = cJSON_CreateObject();
		if (!f->row || !cJSON_AddItemToArray(f->rows, f->row)) {
			cJSON_Delete(f->row);
			f->row = NULL;
			return -ENOMEM;
		}
		f->n++;
		snprintf(f->tenant, sizeof(f->tenant), "%s", tenant);
		snprintf(f->conv, sizeof(f->conv), "%s", key_conv);
		f->start = start;
		f->runs = f->cpu_ms = f->mem = f->pkgs = f->egress = 0;
		f->storage = f->size_max = 0;
		f->size_conv[0] = '\0';
		memset(f->by_status, 0, sizeof(f->by_status));
	}
	f->runs += store_col_int64(s, 4);
	for (size_t i = 0; status && i < N_STATUSES; i++)
		if (strcmp(status, usage_statuses[i]) == 0)
			f->by_status[i] += store_col_int64(s, 4);
	f->cpu_ms += store_col_int64(s, 5);
	f->mem += store_col_int64(s, 6);
	f->pkgs += store_col_int64(s, 7);
	f->egress += store_col_int64(s, 8);
	/* Sizes: the largest per conversation, summed over conversations. */
	if (strcmp(f->size_conv, conv) != 0) {
		f->storage += f->size_max;
		f->size_max = 0;
		snprintf(f->size_conv, sizeof(f->size_conv), "%s", conv);
	}
	if (store_col_int64(s, 9) > f->size_max)
		f->size_max = store_col_int64(s, 9);
	return 0;
}

static int usage_query_rows(struct store *st, const struct usage_query *q,
                            struct usage_fold *f)
{
	/*
	 * ?5 is the bucket in seconds and ?6 where buckets are counted from:
	 * the epoch (days and hours in UTC), or for the whole window its
	 * start, with its length as the bucket. Ordered by tenant, bucket,
	 * conversation, so that one output row's input rows are adjacent,
	 * and within them one conversation's.
	 */
	static const char sql[] =
	    "SELECT tenant, conversation, ?6 + ((hour - ?6) / ?5) * ?5, "
	    "status, SUM(runs), SUM(cpu_ms), SUM(memory_mib_ms), "
	    "SUM(packages), SUM(egress_bytes), MAX(storage_bytes) "
	    "FROM usage_hourly WHERE hour >= ?1 AND hour < ?2 "
	    "AND (?3 = '' OR tenant = ?3) AND (?4 = '' OR conversation = ?4) "
	    "GROUP BY 1, 2, 3, 4 ORDER BY 1, 3, 2, 4";
	struct store_tx *tx;
	struct store_stmt *s;
	int r;

	r = store_begin(st, false, &tx);
	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, q->from_s);
	store_bind_int64(s, 2, q->to_s);
	store_bind_text(s, 3, q->tenant ? q->tenant : "");
	store_bind_text(s, 4, q->conversation ? q->conversation : "");
	store_bind_int64(s, 5, q->bucket_s ? q->bucket_s : q->to_s - q->from_s);
	store_bind_int64(s, 6, q->bucket_s ? 0 : q->from_s);
	while ((r = store_step(tx, s)) == 1) {
		r = usage_fold_row(f, q, s);
		if (r != 0)
			break;
	}
	usage_fold_flush(f, q);
	store_rollback(tx);
	return r < 0 ? r : 0;
}

int usage_report(struct store *st, const struct usage_query *q, cJSON **out,
                 char *err, size_t errlen)
{
	struct usage_fold f;
	cJSON *doc = cJSON_CreateObject();
	int r;

	*out = NULL;
	memset(&f, 0, sizeof(f));
	f.rows = doc ? cJSON_AddArrayToObject(doc, "rows") : NULL;
	if (!f.rows) {
		cJSON_Delete(doc);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	cJSON_AddNumberToObject(doc, "from", (double)q->from_s);
	cJSON_AddNumberToObject(doc, "to", (double)q->to_s);
	cJSON_AddStringToObject(doc, "bucket",
	                        q->bucket_s == 3600    ? "hour"
	                        : q->bucket_s == 86400 ? "day"
	                                               : "none");
	r = usage_query_rows(st, q, &f);
	if (r < 0) {
		cJSON_Delete(doc);
		return errmsg_fail(r, err, errlen,
		                   "the usage could not be read from the store "
		                   "(%s); retry, and see the daemon's log",
		                   strerror(-r));
	}
	cJSON_AddBoolToObject(doc, "truncated", f.truncated);
	*out = doc;
	return 0;
}

/* ---- CSV -------------------------------------------------------------- */

static int csv_text(struct buf *out, const char *s)
{
	int r = 0;

	if (!strpbrk(s, ",\"\r\n"))
		return buf_puts(out, s);
	r = buf_putc(out, '"');
	for (; *s && r == 0; s++)
		r = *s == '"' ? buf_puts(out, "\"\"") : buf_putc(out, *s);
	return r ? r : buf_putc(out, '"');
}

static double csv_num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

int usage_csv(const cJSON *report, struct buf *out)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(report, "rows");
	const cJSON *row;
	int r = buf_puts(out, "tenant,conversation,start,end,runs");

	for (size_t i = 0; i < N_STATUSES && r == 0; i++)
		r = buf_printf(out, ",%s", usage_statuses[i]);
	if (r == 0)
		r = buf_puts(out, ",cpu_seconds,memory_mib_seconds,"
		                  "packages_installed,egress_bytes,"
		                  "storage_bytes\r\n");
	cJSON_ArrayForEach (row, rows) {
		const cJSON *t =
		    cJSON_GetObjectItemCaseSensitive(row, "tenant");
		const cJSON *c =
		    cJSON_GetObjectItemCaseSensitive(row, "conversation");
		const cJSON *bs =
		    cJSON_GetObjectItemCaseSensitive(row, "runs_by_status");

		if (r == 0)
			r = csv_text(out,
			             cJSON_IsString(t) ? t->valuestring : "");
		if (r == 0)
			r = buf_putc(out, ',');
		if (r == 0)
			r = csv_text(out,
			             cJSON_IsString(c) ? c->valuestring : "");
		if (r == 0)
			r = buf_printf(
			    out, ",%.0f,%.0f,%.0f", csv_num(row, "start"),
			    csv_num(row, "end"), csv_num(row, "runs"));
		for (size_t i = 0; i < N_STATUSES && r == 0; i++)
			r = buf_printf(out, ",%.0f",
			               csv_num(bs, usage_statuses[i]));
		if (r == 0)
			r = buf_printf(out, ",%.3f,%.3f,%.0f,%.0f,%.0f\r\n",
			               csv_num(row, "cpu_seconds"),
			               csv_num(row, "memory_mib_seconds"),
			               csv_num(row, "packages_installed"),
			               csv_num(row, "egress_bytes"),
			               csv_num(row, "storage_bytes"));
	}
	return r;
}

/* ---- retention -------------------------------------------------------- */

int usage_prune(struct store *st, long long before_s)
{
	static const char sql[] = "DELETE FROM usage_hourly WHERE hour <= ?";
	struct store_tx *tx;
	struct store_stmt *s;
	long long n;
	int r;

	r = store_begin(st, true, &tx);
	if (r < 0)
		return r;
	/* An hour goes once it has wholly ended before the cutoff. */
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, before_s - 3600);
	r = store_run(tx, s);
	n = r == 0 ? store_changes(tx) : 0;
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	r = store_commit(tx);
	return r < 0 ? r : (int)(n > 1000000000 ? 1000000000 : n);
}
