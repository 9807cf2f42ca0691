/* SPDX-License-Identifier: MIT */
/*
 * stats: see stats.h. One mutex guards every metric's series; a series is
 * found by a linear search over at most STATS_SERIES_MAX label tuples,
 * which is cheap next to anything worth counting here.
 */
#include "util/stats.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATS_VALUE_MAX 64 /* bytes of one label value */

enum stats_kind {
	STATS_COUNTER,
	STATS_GAUGE,
	STATS_HISTOGRAM,
	STATS_GAUGE_FN,
};

struct stats_series {
	char values[STATS_LABELS_MAX][STATS_VALUE_MAX];
	double value; /* counter, gauge; histogram: the sum */
	unsigned long long count;
	unsigned long long buckets[STATS_BUCKETS_MAX];
};

struct stats_metric {
	struct stats_metric *next;
	struct stats *owner;
	enum stats_kind kind;
	const char *name, *help;
	const char *labels[STATS_LABELS_MAX];
	size_t n_labels;
	double bounds[STATS_BUCKETS_MAX];
	size_t n_bounds;
	struct stats_series *series;
	size_t n_series;
	stats_read_fn fn;
	void *fn_arg;
};

struct stats {
	pthread_mutex_t lock;
	struct stats_metric *head, *tail;
};

struct stats *stats_create(void)
{
	struct stats *s = calloc(1, sizeof(*s));

	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

void stats_destroy(struct stats *s)
{
	struct stats_metric *m, *next;

	if (!s)
		return;
	for (m = s->head; m; m = next) {
		next = m->next;
		free(m->series);
		free(m);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static bool stats_name_ok(const char *n)
{
	if (!n || !((n[0] >= 'a' && n[0] <= 'z') || n[0] == '_'))
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= '0' && *n <= '9') ||
		      *n == '_'))
			return false;
	return true;
}

static struct stats_metric *stats_register(struct stats *s, enum stats_kind k,
                                           const char *name, const char *help,
                                           const char *const *labels)
{
	struct stats_metric *m;

	if (!s || !stats_name_ok(name))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->owner = s;
	m->kind = k;
	m->name = name;
	m->help = help;
	for (size_t i = 0; labels && labels[i] && i < STATS_LABELS_MAX; i++)
		m->labels[m->n_labels++] = labels[i];
	if (k != STATS_GAUGE_FN) {
		m->series = calloc(STATS_SERIES_MAX, sizeof(*m->series));
		if (!m->series) {
			free(m);
			return NULL;
		}
	}
	pthread_mutex_lock(&s->lock);
	for (struct stats_metric *o = s->head; o; o = o->next)
		if (strcmp(o->name, name) == 0) {
			pthread_mutex_unlock(&s->lock);
			free(m->series);
			free(m);
			return NULL;
		}
	if (s->tail)
		s->tail->next = m;
	else
		s->head = m;
	s->tail = m;
	pthread_mutex_unlock(&s->lock);
	return m;
}

struct stats_metric *stats_counter(struct stats *s, const char *name,
                                   const char *help, const char *const *labels)
{
	return stats_register(s, STATS_COUNTER, name, help, labels);
}

struct stats_metric *stats_gauge(struct stats *s, const char *name,
                                 const char *help, const char *const *labels)
{
	return stats_register(s, STATS_GAUGE, name, help, labels);
}

struct stats_metric *stats_histogram(struct stats *s, const char *name,
                                     const char *help,
                                     const char *const *labels,
                                     const double *bounds, size_t n_bounds)
{
	struct stats_metric *m =
	    stats_register(s, STATS_HISTOGRAM, name, help, labels);

	if (!m)
		return NULL;
	for (size_t i = 0; i < n_bounds && i < STATS_BUCKETS_MAX; i++)
		m->bounds[m->n_bounds++] = bounds[i];
	return m;
}

void stats_gauge_fn(struct stats *s, const char *name, const char *help,
                    const char *const *labels, stats_read_fn fn, void *arg)
{
	struct stats_metric *m =
	    stats_register(s, STATS_GAUGE_FN, name, help, labels);

	if (m) {
		m->fn = fn;
		m->fn_arg = arg;
	}
}

/* The series of values, made if new (or "other" when full). Lock held. */
static struct stats_series *stats_find(struct stats_metric *m,
                                       const char *const *values)
{
	char want[STATS_LABELS_MAX][STATS_VALUE_MAX];
	struct stats_series *x;
	size_t i, j;

	memset(want, 0, sizeof(want));
	for (i = 0; i < m->n_labels; i++)
		snprintf(want[i], sizeof(want[i]), "%s",
		         values && values[i] ? values[i] : "");
	for (j = 0; j < m->n_series; j++) {
		for (i = 0; i < m->n_labels; i++)
			if (strcmp(m->series[j].values[i], want[i]) != 0)
				break;
		if (i == m->n_labels)
			return &m->series[j];
	}
	if (m->n_series >= STATS_SERIES_MAX) {
		/* The last series collects whatever does not fit. */
		x = &m->series[STATS_SERIES_MAX - 1];
		for (i = 0; i < m->n_labels; i++)
			snprintf(x->values[i], sizeof(x->values[i]), "other");
		return x;
	}
	x = &m->series[m->n_series++];
	memcpy(x->values, want, sizeof(want));
	return x;
}

void stats_add(struct stats_metric *m, const char *const *values, double by)
{
	if (!m || m->kind == STATS_GAUGE_FN || m->kind == STATS_HISTOGRAM)
		return;
	pthread_mutex_lock(&m->owner->lock);
	stats_find(m, values)->value += by;
	pthread_mutex_unlock(&m->owner->lock);
}

void stats_set(struct stats_metric *m, const char *const *values, double v)
{
	if (!m || m->kind != STATS_GAUGE)
		return;
	pthread_mutex_lock(&m->owner->lock);
	stats_find(m, values)->value = v;
	pthread_mutex_unlock(&m->owner->lock);
}

void stats_observe(struct stats_metric *m, const char *const *values, double v)
{
	struct stats_series *x;

	if (!m || m->kind != STATS_HISTOGRAM || !isfinite(v))
		return;
	pthread_mutex_lock(&m->owner->lock);
	x = stats_find(m, values);
	x->value += v;
	x->count++;
	for (size_t i = 0; i < m->n_bounds; i++)
		if (v <= m->bounds[i])
			x->buckets[i]++;
	pthread_mutex_unlock(&m->owner->lock);
}

double stats_total(struct stats_metric *m)
{
	double t = 0;

	if (!m || m->kind == STATS_GAUGE_FN)
		return 0;
	pthread_mutex_lock(&m->owner->lock);
	for (size_t i = 0; i < m->n_series; i++)
		t += m->kind == STATS_HISTOGRAM ? (double)m->series[i].count
		                                : m->series[i].value;
	pthread_mutex_unlock(&m->owner->lock);
	return t;
}

/* ---- the text exposition ------------------------------------------------- */

/* A label value escaped as the format wants (\\, \", \n). */
static int stats_put_value(struct buf *out, const char *v)
{
	int r = 0;

	for (; r == 0 && *v; v++) {
		if (*v == '\\')
			r = buf_puts(out, "\\\\");
		else if (*v == '"')
			r = buf_puts(out, "\\\"");
		else if (*v == '\n')
			r = buf_puts(out, "\\n");
		else
			r = buf_putc(out, *v);
	}
	return r;
}

/* {a="x",b="y"} with an extra le="..." when le is not NULL. */
static int stats_put_labels(struct buf *out, const struct stats_metric *m,
                            const char *const *values, const char *le)
{
	int r = 0;
	size_t i;

	if (m->n_labels == 0 && !le)
		return 0;
	r = buf_putc(out, '{');
	for (i = 0; r == 0 && i < m->n_labels; i++) {
		r = buf_printf(out, "%s%s=\"", i ? "," : "", m->labels[i]);
		if (r == 0)
			r = stats_put_value(out, values[i] ? values[i] : "");
		if (r == 0)
			r = buf_putc(out, '"');
	}
	if (r == 0 && le)
		r = buf_printf(out, "%sle=\"%s\"", i ? "," : "", le);
	if (r == 0)
		r = buf_putc(out, '}');
	return r;
}

static int stats_put_number(struct buf *out, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		return buf_printf(out, " %.0f\n", v);
	return buf_printf(out, " %.9g\n", v);
}

static int stats_render_series(struct buf *out, const struct stats_metric *m,
                               const struct stats_series *x)
{
	const char *values[STATS_LABELS_MAX];
	char le[32];
	int r = 0;

	for (size_t i = 0; i < m->n_labels; i++)
		values[i] = x->values[i];
	if (m->kind != STATS_HISTOGRAM) {
		r = buf_puts(out, m->name);
		if (r == 0)
			r = stats_put_labels(out, m, values, NULL);
		return r ? r : stats_put_number(out, x->value);
	}
	for (size_t b = 0; r == 0 && b <= m->n_bounds; b++) {
		if (b < m->n_bounds)
			snprintf(le, sizeof(le), "%g", m->bounds[b]);
		else
			snprintf(le, sizeof(le), "+Inf");
		r = buf_printf(out, "%s_bucket", m->name);
		if (r == 0)
			r = stats_put_labels(out, m, values, le);
		if (r == 0)
			r = stats_put_number(out, b < m->n_bounds
			                              ? (double)x->buckets[b]
			                              : (double)x->count);
	}
	if (r == 0)
		r = buf_printf(out, "%s_sum", m->name);
	if (r == 0)
		r = stats_put_labels(out, m, values, NULL);
	if (r == 0)
		r = stats_put_number(out, x->value);
	if (r == 0)
		r = buf_printf(out, "%s_count", m->name);
	if (r == 0)
		r = stats_put_labels(out, m, values, NULL);
	return r ? r : stats_put_number(out, (double)x->count);
}

struct stats_emit_ctx {
	struct buf *out;
	const struct stats_metric *m;
	int r;
};

static void stats_emit(void *arg, const char *const *values, double value)
{
	struct stats_emit_ctx *c = arg;

	if (c->r == 0)
		c->r = buf_puts(c->out, c->m->name);
	if (c->r == 0)
		c->r = stats_put_labels(c->out, c->m, values, NULL);
	if (c->r == 0)
		c->r = stats_put_number(c->out, value);
}

int stats_render(struct stats *s, struct buf *out)
{
	static const char *const kinds[] = {"counter", "gauge", "histogram",
	                                    "gauge"};
	struct stats_metric *m;
	int r = 0;

	pthread_mutex_lock(&s->lock);
	m = s->head;
	pthread_mutex_unlock(&s->lock);
	/* The list only grows at its tail: walking it unlocked is safe. */
	for (; r == 0 && m; m = m->next) {
		r = buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->name,
		               m->help, m->name, kinds[m->kind]);
		if (r == 0 && m->kind == STATS_GAUGE_FN) {
			struct stats_emit_ctx c = {.out = out, .m = m};

			m->fn(m->fn_arg, stats_emit, &c);
			r = c.r;
			continue;
		}
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; r == 0 && i < m->n_series; i++)
			r = stats_render_series(out, m, &m->series[i]);
		pthread_mutex_unlock(&s->lock);
	}
	return r;
}
