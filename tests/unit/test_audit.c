/* SPDX-License-Identifier: MIT */
/*
 * test_audit: the audit trail and the usage counters (lib/audit/).
 * Canonical encoding: sorted keys, integers only, the escapes and nothing
 * else, UTF-8 checked, duplicate keys refused; the same value built in
 * two orders encodes the same. The chain check over rows: a good chain
 * passes, and an altered text, a bad hash, a missing entry, a wrong prev
 * and a column that disagrees with the text are each reported at the
 * right seq. In the store (SQLite in a temporary directory, or the
 * PostgreSQL server MCPSD_TEST_PG_URL names, suite pg): runs recorded and
 * verified; entries tampered with by SQL (text changed, an entry deleted,
 * a column changed, the start deleted) are reported at the first broken
 * seq; pruning leaves a checkpoint and a verifiable trail, twice; two
 * connections ("replicas") with four threads each appending at once keep
 * one linear chain; an export filters by tenant and conversation and
 * each line checks on its own; the usage report sums per tenant and per
 * conversation with runs by status, in hour and day buckets and as CSV,
 * and never shows another tenant's rows; usage retention deletes old
 * hours.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/audit_canon.h"
#include "audit/usage.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"

static char where[256];

/* ---- the canonical encoding ---------------------------------------------- */

static void canon_is(const char *json, const char *want, const char *name)
{
	cJSON *v = cJSON_Parse(json);
	char err[128] = "";
	struct buf b;
	int r;

	buf_init(&b, 0);
	r = v ? audit_canon(v, &b, err, sizeof(err)) : -EINVAL;
	if (want)
		is_str(r == 0 && b.data ? b.data : err, want, name);
	else
		ok(r == -EINVAL && err[0], "%s: refused (%s)", name, err);
	buf_finish(&b);
	cJSON_Delete(v);
}

static void test_canon(void)
{
	cJSON *a = cJSON_CreateObject(), *b = cJSON_CreateObject();
	struct buf x, y;
	char err[64];

	canon_is(
	    "{\"b\":1,\"a\":[true,false,null],\"c\":{\"z\":\"\",\"y\":-"
	    "3}}",
	    "{\"a\":[true,false,null],\"b\":1,\"c\":{\"y\":-3,\"z\":\"\"}}",
	    "keys sorted at every level, no whitespace");
	canon_is("{\"s\":\"q\\\" b\\\\ n\\n t\\t c\\u0001 \\u00e9 \\/\"}",
	         "{\"s\":\"q\\\" b\\\\ n\\n t\\t c\\u0001 \xc3\xa9 /\"}",
	         "only quote, backslash and control bytes escaped");
	canon_is("[0,-0,9007199254740992,1e3]", "[0,0,9007199254740992,1000]",
	         "integers in decimal");
	canon_is("[1.5]", NULL, "a fraction");
	canon_is("[9007199254740994]", NULL, "past 2^53");
	canon_is("{\"a\":1,\"a\":2}", NULL, "a duplicate key");
	canon_is("[\"\xff\"]", NULL, "a string that is not UTF-8");
	canon_is("[\"\xed\xa0\x80\"]", NULL, "a surrogate in UTF-8");
	canon_is("{\"\xc3\xa9\":1,\"e\":2,\"E\":3}",
	         "{\"E\":3,\"e\":2,\"\xc3\xa9\":1}", "bytewise key order");

	/* The same value built in two orders. */
	cJSON_AddNumberToObject(a, "n", 1);
	cJSON_AddStringToObject(a, "s", "x");
	cJSON_AddStringToObject(b, "s", "x");
	cJSON_AddNumberToObject(b, "n", 1);
	buf_init(&x, 0);
	buf_init(&y, 0);
	ok(audit_canon(a, &x, err, sizeof(err)) == 0 &&
	       audit_canon(b, &y, err, sizeof(err)) == 0 && x.data && y.data &&
	       strcmp(x.data, y.data) == 0,
	   "insertion order does not matter");
	buf_finish(&x);
	buf_finish(&y);
	cJSON_Delete(a);
	cJSON_Delete(b);
	ok(audit_utf8_valid("\xf0\x9f\x98\x80", 4), "a 4-byte sequence");
	ok(!audit_utf8_valid("\xc0\xaf", 2), "an overlong form");
	ok(!audit_utf8_valid("\xe2\x82", 2), "a cut sequence");
}

/* ---- the chain check, without a store --------------------------------- */

#define N_ROWS 4

struct fake_chain {
	char body[N_ROWS][160];
	char hash[N_ROWS][AUDIT_HASH_HEX + 1];
	char prev[N_ROWS][AUDIT_HASH_HEX + 1];
	struct audit_row rows[N_ROWS];
};

static void fake_chain(struct fake_chain *c)
{
	for (int i = 0; i < N_ROWS; i++) {
		snprintf(c->body[i], sizeof(c->body[i]),
		         "{\"conversation\":\"c\",\"kind\":\"run\",\"n\":%d,"
		         "\"seq\":%d,\"tenant\":\"t\",\"time_ms\":%d}",
		         i * 7, i + 1, 1000 + i);
		snprintf(c->prev[i], sizeof(c->prev[i]), "%s",
		         i ? c->hash[i - 1] : AUDIT_GENESIS);
		if (audit_chain_hash(c->prev[i], c->body[i], strlen(c->body[i]),
		                     c->hash[i]) < 0)
			ok(false, "hash");
		c->rows[i] = (struct audit_row){
		    .seq = i + 1,
		    .time_ms = 1000 + i,
		    .kind = "run",
		    .tenant = "t",
		    .conversation = "c",
		    .prev = c->prev[i],
		    .hash = c->hash[i],
		    .body = c->body[i],
		};
	}
}

/* Walks c; returns the seq reported broken, 0 when intact. */
static long long walk(const struct fake_chain *c, int skip, char *why, size_t n)
{
	struct audit_check k;

	audit_check_begin(&k, 1, AUDIT_GENESIS);
	for (int i = 0; i < N_ROWS; i++)
		if (i != skip && !audit_check_row(&k, &c->rows[i]))
			break;
	snprintf(why, n, "%s", k.reason);
	return k.broken ? k.broken_seq : 0;
}

static void test_chain(void)
{
	struct fake_chain c;
	char why[300];

	fake_chain(&c);
	is_int(walk(&c, -1, why, sizeof(why)), 0, "a good chain passes");
	c.body[2][strlen(c.body[2]) - 2] = '9';
	is_int(walk(&c, -1, why, sizeof(why)), 3, "an altered text: seq 3");
	ok(strstr(why, "altered") != NULL, "says altered: %s", why);
	fake_chain(&c);
	is_int(walk(&c, 1, why, sizeof(why)), 2, "a missing entry: seq 2");
	ok(strstr(why, "missing") != NULL, "says missing: %s", why);
	fake_chain(&c);
	c.rows[3].prev = c.hash[1];
	is_int(walk(&c, -1, why, sizeof(why)), 4, "a wrong prev: seq 4");
	fake_chain(&c);
	c.rows[1].tenant = "other";
	is_int(walk(&c, -1, why, sizeof(why)), 2,
	       "a column that disagrees with the text: seq 2");
	ok(strstr(why, "column") != NULL, "says which: %s", why);
	fake_chain(&c);
	c.hash[0][5] ^= 1;
	is_int(walk(&c, -1, why, sizeof(why)), 1, "a wrong hash: seq 1");
}

/* ---- in the store ----------------------------------------------------- */

static struct store *open_store(void)
{
	char err[512] = "";
	struct store *st = NULL;

	if (schema_open(where, &st, err, sizeof(err)) < 0)
		ok(false, "store opens: %s", err);
	return st;
}

/* Runs one statement that changes rows (tampering), as an intruder would. */
static long long tamper(struct store *st, const char *sql)
{
	struct store_tx *tx;
	long long n = -1;

	if (store_begin(st, true, &tx) < 0)
		return -1;
	if (store_run(tx, store_stmt(tx, sql)) == 0)
		n = store_changes(tx);
	if (store_commit(tx) < 0)
		return -1;
	return n;
}

static void run_of(struct audit_run *out, const char *tenant, const char *conv,
                   const char *status, long long cpu_ms)
{
	static const char *const pk[] = {"numpy==2.1.0"};
	static const struct audit_file files[] = {{"out.png", 1234},
	                                          {"bad\xff.txt", 1}};
	struct audit_run r = {
	    .tool = "run_code",
	    .tenant = tenant,
	    .client = "token:abc",
	    .conversation = conv,
	    .language = "python",
	    .status = status,
	    .exit_code = 0,
	    .code = "print(1)\n",
	    .code_len = 9,
	    .timeout_s = 30,
	    .memory_mb = 512,
	    .cpus = 1,
	    .duration_ms = 2000,
	    .cpu_ms = cpu_ms,
	    .memory_peak_bytes = 64 << 20,
	    .storage_bytes = 4096,
	    .packages = pk,
	    .n_packages = 1,
	    .packages_installed = 1,
	    .files = files,
	    .n_files = 2,
	};

	*out = r;
}

static int record(struct audit *a, const char *tenant, const char *conv,
                  const char *status, long long cpu_ms, long long now_ms)
{
	struct audit_run r;

	run_of(&r, tenant, conv, status, cpu_ms);
	return audit_record(a, &r, now_ms);
}

static void verify_is(struct store *st, long long broken, const char *name)
{
	struct audit_verdict v;
	int r = audit_verify(st, &v);

	is_int(r, 0, "verify runs");
	if (broken == 0)
		ok(v.ok, "%s: intact (%lld entries, head %lld)%s%s", name,
		   v.entries, v.head_seq, v.ok ? "" : ": ", v.reason);
	else
		ok(!v.ok && v.broken_seq == broken,
		   "%s: broken at %lld (got %s at %lld: %s)", name, broken,
		   v.ok ? "intact" : "broken", v.broken_seq, v.reason);
}

static int count_line(void *arg, const char *line, size_t n)
{
	cJSON *j = cJSON_Parse(line), *e;
	char *prev, *hash, want[AUDIT_HASH_HEX + 1];
	struct buf b;
	int *lines = arg;
	char err[64];

	(void)n;
	prev = cJSON_GetStringValue(cJSON_GetObjectItem(j, "prev"));
	hash = cJSON_GetStringValue(cJSON_GetObjectItem(j, "hash"));
	e = cJSON_GetObjectItem(j, "entry");
	buf_init(&b, 0);
	/* A line checks alone: hash = SHA-256(prev "\n" canonical(entry)). */
	if (prev && hash && e && audit_canon(e, &b, err, sizeof(err)) == 0 &&
	    audit_chain_hash(prev, b.data, b.len, want) == 0 &&
	    strcmp(want, hash) == 0)
		lines[0]++;
	lines[1]++;
	buf_finish(&b);
	cJSON_Delete(j);
	return 0;
}

static void test_trail(void)
{
	struct store *st = open_store();
	struct audit *a = NULL;
	long long t0 = 1764324000000LL; /* 2025-11-28T10:00:00Z */
	struct audit_filter f = {0};
	int lines[2] = {0, 0};
	long long last;

	if (!st || audit_create(st, true, &a) < 0) {
		ok(false, "audit opens");
		store_close(st);
		return;
	}
	verify_is(st, 0, "an empty trail");
	for (int i = 0; i < 6; i++)
		is_int(record(a, i % 2 ? "bob" : "alice", i < 4 ? "c1" : "c2",
		              i == 5 ? "failed" : "completed", 1000, t0 + i),
		       0, "run recorded");
	verify_is(st, 0, "six runs");

	f.tenant = "alice";
	is_int(audit_export(st, &f, count_line, lines, &last), 0, "export");
	is_int(lines[1], 3, "alice's three entries");
	is_int(lines[0], 3, "each line checks alone");
	f.conversation = "c2";
	lines[0] = lines[1] = 0;
	is_int(audit_export(st, &f, count_line, lines, &last), 0, "export");
	is_int(lines[1], 1, "alice's entries of c2");
	is_int(last, 5, "the last seq exported");

	/* Tampering, each undone by a fresh trail afterwards. */
	ok(tamper(st, "UPDATE audit_log SET body = replace(body, "
	              "'\"status\":\"completed\"', '\"status\":\"failed\"') "
	              "WHERE seq = 3") == 1,
	   "entry 3's text altered");
	verify_is(st, 3, "an altered text");
	ok(tamper(st, "UPDATE audit_log SET body = replace(body, "
	              "'\"status\":\"failed\"', '\"status\":\"completed\"') "
	              "WHERE seq = 3") == 1,
	   "and put back");
	verify_is(st, 0, "put back");
	ok(tamper(st,
	          "UPDATE audit_log SET tenant = 'mallory' WHERE seq = 2") == 1,
	   "entry 2's tenant column changed");
	verify_is(st, 2, "a column changed");
	ok(tamper(st, "UPDATE audit_log SET tenant = 'bob' WHERE seq = 2") == 1,
	   "and put back");
	ok(tamper(st, "DELETE FROM audit_log WHERE seq = 4") == 1,
	   "entry 4 deleted");
	verify_is(st, 4, "a deleted entry");
	ok(tamper(st, "DELETE FROM audit_log WHERE seq < 4") == 3,
	   "the start deleted too");
	verify_is(st, 5, "the start gone without a checkpoint");
	tamper(st, "DELETE FROM audit_log");

	/* Retention: a fresh trail, the older half pruned. */
	for (int i = 0; i < 6; i++)
		is_int(record(a, "alice", "c1", "completed", 10, t0 + i * 1000),
		       0, "run recorded");
	is_int(audit_prune(st, t0 + 2500, t0 + 10000), 3,
	       "three entries older than the cutoff pruned");
	verify_is(st, 0, "pruned, with its checkpoint");
	is_int(record(a, "alice", "c1", "completed", 10, t0 + 20000), 0,
	       "a run after the prune");
	is_int(audit_prune(st, t0 + 15000, t0 + 20000), 3,
	       "the rest of the old runs pruned (not the checkpoint after "
	       "them)");
	verify_is(st, 0, "pruned twice");
	ok(tamper(st, "UPDATE audit_log SET body = replace(body, "
	              "'pruned_entries\":3', 'pruned_entries\":2') "
	              "WHERE kind = 'checkpoint'") == 2,
	   "the checkpoints altered");
	{
		struct audit_verdict v;

		ok(audit_verify(st, &v) == 0 && !v.ok,
		   "an altered checkpoint is reported: %s", v.reason);
	}
	audit_destroy(a);
	store_close(st);
}

/* ---- many writers ------------------------------------------------------ */

#define WRITERS 4
#define EACH 25

struct writer {
	struct audit *a;
	const char *tenant;
	int failed;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (int i = 0; i < EACH; i++)
		if (record(w->a, w->tenant, "race", "completed", 1,
		           1764324000000LL + i) < 0)
			w->failed++;
	return NULL;
}

static void test_concurrent(void)
{
	struct store *st[2] = {open_store(), open_store()};
	struct audit *a[2] = {NULL, NULL};
	struct writer w[2 * WRITERS];
	pthread_t th[2 * WRITERS];
	struct audit_verdict v;
	int failed = 0;

	if (!st[0] || !st[1] || audit_create(st[0], false, &a[0]) < 0 ||
	    audit_create(st[1], false, &a[1]) < 0) {
		ok(false, "two connections open");
		goto out;
	}
	tamper(st[0], "DELETE FROM audit_log");
	for (int i = 0; i < 2 * WRITERS; i++) {
		w[i] = (struct writer){a[i % 2], i % 2 ? "r1" : "r0", 0};
		pthread_create(&th[i], NULL, writer_main, &w[i]);
	}
	for (int i = 0; i < 2 * WRITERS; i++) {
		pthread_join(th[i], NULL);
		failed += w[i].failed;
	}
	is_int(failed, 0, "no append failed");
	is_int(audit_verify(st[1], &v), 0, "verify");
	ok(v.ok, "one linear chain from two connections, eight threads: %s",
	   v.reason);
	is_int(v.entries, 2 * WRITERS * EACH, "every append is in it");
out:
	audit_destroy(a[0]);
	audit_destroy(a[1]);
	store_close(st[0]);
	store_close(st[1]);
}

/* ---- usage ------------------------------------------------------------- */

static const cJSON *row_of(const cJSON *rep, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "rows"), i);
}

static double num_of(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(o, name);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void test_usage(void)
{
	struct store *st = open_store();
	struct audit *a = NULL;
	long long h0 = 1764324000LL; /* an hour's start, in seconds */
	struct usage_query q;
	cJSON *rep = NULL;
	char err[256] = "";
	struct buf csv;

	if (!st || audit_create(st, false, &a) < 0) {
		ok(false, "store opens");
		goto out;
	}
	/* alice: c1 twice in hour 0 (one failed), c2 once in hour 1. */
	is_int(record(a, "u-alice", "c1", "completed", 1500, h0 * 1000 + 10), 0,
	       "run");
	is_int(record(a, "u-alice", "c1", "failed", 500, h0 * 1000 + 20), 0,
	       "run");
	is_int(record(a, "u-alice", "c2", "completed", 250,
	              (h0 + 3600) * 1000 + 5),
	       0, "run");
	is_int(record(a, "u-bob", "c1", "completed", 9999, h0 * 1000 + 30), 0,
	       "run");

	is_int(usage_query_parse("2025-11-28T10:00:00Z", NULL, "hour",
	                         h0 + 7200, &q, err, sizeof(err)),
	       0, "an RFC 3339 time parses");
	is_int(q.from_s, h0, "from");
	q.tenant = "u-alice";
	is_int(usage_report(st, &q, &rep, err, sizeof(err)), 0, "report");
	is_int(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "rows")), 2,
	       "alice: two hours");
	ok(num_of(row_of(rep, 0), "cpu_seconds") == 2.0,
	   "hour 0: 2 CPU seconds");
	ok(num_of(row_of(rep, 0), "runs") == 2, "hour 0: two runs");
	ok(num_of(cJSON_GetObjectItem(row_of(rep, 0), "runs_by_status"),
	          "failed") == 1,
	   "hour 0: one failed");
	ok(num_of(row_of(rep, 0), "memory_mib_seconds") == 2 * 64 * 2.0,
	   "memory x time: 64 MiB x 2 s, twice");
	ok(num_of(row_of(rep, 0), "storage_bytes") == 4096,
	   "storage: the largest size of c1");
	{
		char *txt = cJSON_PrintUnformatted(rep);

		ok(txt && strstr(txt, "u-bob") == NULL, "no row of bob's");
		cJSON_free(txt);
	}
	cJSON_Delete(rep);

	is_int(usage_query_parse(NULL, NULL, "none", h0 + 7200, &q, err,
	                         sizeof(err)),
	       0, "the default window");
	q.tenant = "u-alice";
	q.by_conversation = true;
	is_int(usage_report(st, &q, &rep, err, sizeof(err)), 0, "report");
	is_int(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "rows")), 2,
	       "alice by conversation: c1 and c2");
	ok(num_of(row_of(rep, 1), "cpu_seconds") == 0.25, "c2: 0.25 s");
	buf_init(&csv, 0);
	is_int(usage_csv(rep, &csv), 0, "CSV");
	ok(csv.data && strstr(csv.data, "tenant,conversation,start,end,runs,"
	                                "completed,failed") == csv.data,
	   "CSV header");
	ok(csv.data && strstr(csv.data, "\r\nu-alice,c1,") != NULL,
	   "a CSV row: %s", csv.data ? csv.data : "");
	buf_finish(&csv);
	cJSON_Delete(rep);

	ok(usage_query_parse("yesterday", NULL, NULL, h0, &q, err,
	                     sizeof(err)) == -EINVAL &&
	       strstr(err, "2026-11-28T10:00:00Z"),
	   "a bad time says what to give: %s", err);
	ok(usage_query_parse(NULL, NULL, "week", h0, &q, err, sizeof(err)) ==
	           -EINVAL &&
	       strstr(err, "hour, day, none"),
	   "a bad bucket names the good ones: %s", err);
	ok(usage_query_parse("100", "50", NULL, h0, &q, err, sizeof(err)) ==
	       -EINVAL,
	   "from after to");

	ok(usage_prune(st, h0 + 3600) >= 2, "hour 0 pruned");
	is_int(usage_query_parse(NULL, NULL, "none", h0 + 7200, &q, err,
	                         sizeof(err)),
	       0, "query");
	q.tenant = "u-alice";
	is_int(usage_report(st, &q, &rep, err, sizeof(err)), 0, "report");
	ok(num_of(row_of(rep, 0), "runs") == 1, "only hour 1 is left");
	cJSON_Delete(rep);
out:
	audit_destroy(a);
	store_close(st);
}

/* A reader of the trail: waits for the entries prepared before it. */
struct later_reader {
	struct store *st;
	int lines[2];
	int rc;
	volatile int done;
};

static void *later_read(void *arg)
{
	struct later_reader *rd = arg;
	struct audit_filter f = {0};
	long long last;

	audit_wait_written(5000);
	f.tenant = "erin";
	rd->rc = audit_export(rd->st, &f, count_line, rd->lines, &last);
	rd->done = 1;
	return NULL;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* audit_prepare now, audit_write after the answer: readers wait for it. */
static void test_later(void)
{
	struct store *st = open_store();
	struct audit *a = NULL;
	struct audit_pending *p = NULL;
	struct later_reader rd = {.st = NULL};
	struct audit_run r;
	pthread_t th;
	long long t;

	if (!st || audit_create(st, false, &a) < 0) {
		ok(false, "audit opens");
		store_close(st);
		return;
	}
	t = now_ms();
	audit_wait_written(5000);
	ok(now_ms() - t < 1000, "nothing prepared: no wait");
	run_of(&r, "erin", "c9", "completed", 10);
	is_int(audit_prepare(a, &r, 1764324000000LL, &p), 0, "prepared");
	t = now_ms();
	audit_wait_written(100);
	ok(now_ms() - t >= 90, "a reader waits for it (up to its timeout)");
	rd.st = st;
	if (pthread_create(&th, NULL, later_read, &rd) != 0) {
		ok(false, "reader thread");
		(void)audit_write(p);
		store_close(st);
		audit_destroy(a);
		return;
	}
	usleep(100 * 1000);
	ok(!rd.done, "a reader is still waiting before the write");
	is_int(audit_write(p), 0, "written after the answer");
	pthread_join(th, NULL);
	is_int(rd.rc, 0, "the reader's export");
	ok(rd.done && rd.lines[1] == 1 && rd.lines[0] == 1,
	   "the reader then saw the entry (%d lines, %d checked)", rd.lines[1],
	   rd.lines[0]);
	verify_is(st, 0, "the trail with a late entry");
	audit_destroy(a);
	store_close(st);
}

int main(void)
{
	const char *pg = getenv("MCPSD_TEST_PG_URL");
	char dir[] = "/tmp/mcpsd-audit-test-XXXXXX", cmd[96];

	test_canon();
	test_chain();
	if (pg) {
		printf("# PostgreSQL\n");
		snprintf(where, sizeof(where), "%s", pg);
	} else {
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(where, sizeof(where), "%s/state.db", dir);
	}
	test_trail();
	test_concurrent();
	test_usage();
	test_later();
	if (!pg) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		(void)!system(cmd);
	}
	return tap_done();
}
