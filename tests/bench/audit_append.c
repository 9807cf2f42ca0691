/* SPDX-License-Identifier: MIT */
/*
 * audit_append: what recording a run costs the daemon. Side by side on one
 * store (a fresh SQLite file in a temporary directory, or the PostgreSQL
 * database given as the first argument): the per-run write the daemon
 * already made before the audit trail (budget_charge, one upsert), and
 * audit_record (the audit entry, hash-chained onto the head, and the usage
 * row, in one transaction), each N times from one thread and from four at
 * once; then audit_verify over the whole trail. Prints figures; never
 * fails on timing.
 *
 *   build/dev/tests/bench/audit_append [postgresql://...] [N]
 *   tests/lib/pg.sh run build/dev/tests/bench/audit_append   (a scratch
 *   PostgreSQL server: MCPSD_TEST_PG_URL)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "run/budget.h"
#include "schema.h"

#define THREADS 4

/* Monotonic microseconds. */
static long long mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct job {
	struct audit *a;
	struct budget *b;
	int n;
	int failed;
	double *lat; /* ms per operation */
};

static void *work(void *arg)
{
	struct job *j = arg;
	static const char code[] = "import time\nprint(time.time())\n";

	for (int i = 0; i < j->n; i++) {
		struct audit_run r = {
		    .tool = "run_code",
		    .tenant = "bench",
		    .client = "token:0123456789ab",
		    .conversation = "c-bench",
		    .language = "python",
		    .status = "completed",
		    .code = code,
		    .code_len = sizeof(code) - 1,
		    .timeout_s = 30,
		    .memory_mb = 512,
		    .cpus = 1,
		    .duration_ms = 120,
		    .cpu_ms = 80,
		    .memory_peak_bytes = 40 << 20,
		    .storage_bytes = 4096,
		};
		long long t0 = mono_us();
		int rc =
		    j->a ? audit_record(j->a, &r, (long long)time(NULL) * 1000)
		         : budget_charge(j->b, "bench", 80, time(NULL));

		j->lat[i] = (double)(mono_us() - t0) / 1000.0;
		j->failed += rc < 0;
	}
	return NULL;
}

static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static void run(const char *what, struct audit *a, struct budget *b, int n,
                int threads)
{
	struct job j[THREADS];
	pthread_t th[THREADS];
	double *lat = calloc((size_t)n, sizeof(*lat));
	int each = n / threads, failed = 0;
	long long t0 = mono_us();
	double s;

	for (int i = 0; i < threads; i++) {
		j[i] = (struct job){a, b, each, 0, lat + i * each};
		pthread_create(&th[i], NULL, work, &j[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		failed += j[i].failed;
	}
	s = (double)(mono_us() - t0) / 1e6;
	qsort(lat, (size_t)(each * threads), sizeof(*lat), cmp);
	printf("%-28s %d thread%s: %6.0f/s, median %.2f ms, p99 %.2f ms%s\n",
	       what, threads, threads == 1 ? " " : "s", each * threads / s,
	       lat[each * threads / 2], lat[each * threads * 99 / 100],
	       failed ? " (some failed)" : "");
	free(lat);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/mcpsd-audit-bench-XXXXXX", where[300], err[512];
	const char *url =
	    argc > 1 && strncmp(argv[1], "postgres", 8) == 0 ? argv[1] : NULL;
	const char *ns =
	    url ? (argc > 2 ? argv[2] : NULL) : (argc > 1 ? argv[1] : NULL);
	int n = ns ? (int)strtol(ns, NULL, 10) : 2000;

	if (!url)
		url = getenv("MCPSD_TEST_PG_URL");
	struct store *st = NULL;
	struct audit *a = NULL;
	struct budget *b = NULL;
	struct audit_verdict v;
	long long t0;

	if (n < THREADS)
		n = 2000;
	if (!url && !mkdtemp(dir))
		return 1;
	snprintf(where, sizeof(where), "%s/state.db", dir);
	if (schema_open(url ? url : where, &st, err, sizeof(err)) < 0 ||
	    audit_create(st, false, &a) < 0 ||
	    budget_create(st, 0, 3600, &b) < 0) {
		fprintf(stderr, "audit_append: %s\n", err);
		return 1;
	}
	printf("# %d operations each, %s\n", n, url ? "PostgreSQL" : where);
	run("baseline budget_charge", NULL, b, n, 1);
	run("audit_record", a, NULL, n, 1);
	run("baseline budget_charge", NULL, b, n, THREADS);
	run("audit_record", a, NULL, n, THREADS);
	t0 = mono_us();
	if (audit_verify(st, &v) == 0)
		printf("audit_verify: %lld entries in %.0f ms (%s)\n",
		       v.entries, (double)(mono_us() - t0) / 1000.0,
		       v.ok ? "intact" : v.reason);
	budget_destroy(b);
	audit_destroy(a);
	store_close(st);
	if (!url) {
		snprintf(where, sizeof(where), "rm -rf '%s'", dir);
		(void)!system(where);
	}
	return 0;
}
