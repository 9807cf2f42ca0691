/* SPDX-License-Identifier: MIT */
/*
 * stats: the daemon's counters, gauges and timings in one place, shaped
 * like Prometheus metrics (a name, help text, up to STATS_LABELS_MAX label
 * names, one series per combination of label values). Modules register
 * their metrics at start-up and update them as things happen; /healthz
 * reads them, and the text exposition renders all of them for /metrics.
 * Gauges that are a view of a module's own state (queue depth, warm
 * sessions) are read through a callback at render time instead of being
 * kept in step.
 *
 * Label values come from bounded sets (status names, languages, tenants
 * from the configuration, routes): a metric keeps at most STATS_SERIES_MAX
 * series and folds any further ones into one with the value "other".
 *
 * Threads: every function is thread-safe; updates take a short mutex.
 */
#ifndef MCPSD_STATS_H
#define MCPSD_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

#define STATS_LABELS_MAX 3
#define STATS_SERIES_MAX 256
#define STATS_BUCKETS_MAX 16

struct stats;
struct stats_metric;

/* Caller owns; free with stats_destroy. NULL when out of memory. */
struct stats *stats_create(void);
void stats_destroy(struct stats *s);

/*
 * Registers a metric. name ([a-z_][a-z0-9_]*) and help are static strings;
 * labels is a NULL-terminated list of static label names (or NULL).
 * Histogram bucket bounds are given in ascending order (seconds, bytes,
 * ...). Returns the metric (owned by s) or NULL when out of memory or the
 * name is taken.
 */
struct stats_metric *stats_counter(struct stats *s, const char *name,
                                   const char *help, const char *const *labels);
struct stats_metric *stats_gauge(struct stats *s, const char *name,
                                 const char *help, const char *const *labels);
struct stats_metric *stats_histogram(struct stats *s, const char *name,
                                     const char *help,
                                     const char *const *labels,
                                     const double *bounds, size_t n_bounds);

/*
 * A gauge read at render time: fn fills value for each series it knows by
 * calling emit(ctx, label values, value) (label values NULL-terminated,
 * matching labels). fn runs on the rendering thread without stats' lock.
 */
typedef void (*stats_emit_fn)(void *ctx, const char *const *values,
                              double value);
typedef void (*stats_read_fn)(void *arg, stats_emit_fn emit, void *ctx);
void stats_gauge_fn(struct stats *s, const char *name, const char *help,
                    const char *const *labels, stats_read_fn fn, void *arg);

/*
 * Updates the series of values (NULL-terminated, one per label; NULL for
 * a metric without labels). NULL-safe in m so callers need not check that
 * registration succeeded.
 */
void stats_add(struct stats_metric *m, const char *const *values, double by);
void stats_set(struct stats_metric *m, const char *const *values, double v);
void stats_observe(struct stats_metric *m, const char *const *values, double v);

/* The sum over every series of a counter or gauge (for /healthz). */
double stats_total(struct stats_metric *m);

/*
 * Appends the Prometheus text exposition (version 0.0.4) of every metric
 * to out. 0 or a buf error.
 */
__attribute__((warn_unused_result)) int stats_render(struct stats *s,
                                                     struct buf *out);

#endif
