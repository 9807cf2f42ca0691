/* SPDX-License-Identifier: MIT */
/* Unit tests for lib/stats: counters, gauges, histograms, the exposition. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/stats.h"

static void read_fn(void *arg, stats_emit_fn emit, void *ctx)
{
	const char *const busy[] = {"busy", NULL};
	const char *const idle[] = {"idle", NULL};

	(void)arg;
	emit(ctx, busy, 2);
	emit(ctx, idle, 5);
}

int main(void)
{
	struct stats *s = stats_create();
	const char *const status_lang[] = {"status", "language", NULL};
	const char *const ok_py[] = {"completed", "python", NULL};
	const char *const fail_py[] = {"failed", "python", NULL};
	const char *const quote[] = {"a\"b\\c\nd", "x", NULL};
	const char *const state[] = {"state", NULL};
	const double bounds[] = {0.1, 1, 10};
	struct stats_metric *runs, *dur, *up;
	struct buf b;
	char name[32];

	ok(s != NULL, "created");
	runs = stats_counter(s, "mcpsd_runs_total", "Runs by outcome",
	                     status_lang);
	dur = stats_histogram(s, "mcpsd_run_seconds", "Run time", NULL, bounds,
	                      3);
	up = stats_gauge(s, "mcpsd_up", "Whether it is up", NULL);
	stats_gauge_fn(s, "mcpsd_sessions", "Sessions", state, read_fn, NULL);
	ok(runs && dur && up, "registered");
	ok(stats_counter(s, "mcpsd_runs_total", "again", NULL) == NULL,
	   "a name is taken once");
	ok(stats_counter(s, "Bad-Name", "x", NULL) == NULL,
	   "names are checked");

	stats_add(runs, ok_py, 1);
	stats_add(runs, ok_py, 2);
	stats_add(runs, fail_py, 1);
	stats_add(runs, quote, 1);
	stats_add(NULL, ok_py, 1); /* NULL-safe */
	stats_observe(dur, NULL, 0.05);
	stats_observe(dur, NULL, 5);
	stats_observe(dur, NULL, 50);
	stats_set(up, NULL, 1);
	is_int((long long)stats_total(runs), 5, "total over the series");
	is_int((long long)stats_total(dur), 3, "histogram total is its count");

	buf_init(&b, 0);
	is_int(stats_render(s, &b), 0, "rendered");
	ok(strstr(b.data, "# TYPE mcpsd_runs_total counter\n") != NULL,
	   "type line");
	ok(strstr(b.data, "mcpsd_runs_total{status=\"completed\","
	                  "language=\"python\"} 3\n") != NULL,
	   "a counter series");
	ok(strstr(b.data, "status=\"a\\\"b\\\\c\\nd\"") != NULL,
	   "label values escaped");
	ok(strstr(b.data, "mcpsd_run_seconds_bucket{le=\"0.1\"} 1\n") &&
	       strstr(b.data, "mcpsd_run_seconds_bucket{le=\"10\"} 2\n") &&
	       strstr(b.data, "mcpsd_run_seconds_bucket{le=\"+Inf\"} 3\n") &&
	       strstr(b.data, "mcpsd_run_seconds_count 3\n") &&
	       strstr(b.data, "mcpsd_run_seconds_sum 55.05\n"),
	   "histogram buckets are cumulative, with sum and count");
	ok(strstr(b.data, "mcpsd_up 1\n") != NULL, "a gauge");
	ok(strstr(b.data, "mcpsd_sessions{state=\"idle\"} 5\n") != NULL,
	   "a gauge read at render time");
	buf_finish(&b);

	/* More series than allowed fold into "other". */
	for (int i = 0; i < STATS_SERIES_MAX + 10; i++) {
		const char *const v[] = {name, "x", NULL};

		snprintf(name, sizeof(name), "s%d", i);
		stats_add(runs, v, 1);
	}
	buf_init(&b, 0);
	is_int(stats_render(s, &b), 0, "rendered again");
	ok(strstr(b.data, "status=\"other\",language=\"other\"") != NULL,
	   "overflow series is 'other'");
	buf_finish(&b);
	stats_destroy(s);
	return tap_done();
}
