/* SPDX-License-Identifier: MIT */
/*
 * workspace_defer: deferred writes, at most one per interval per workspace
 * (workspace.h). The pending write lives on the workspace's entry (due,
 * conversation id, last write), under mgr->mu like every entry field; the
 * write itself runs with the workspace's run lock held and mgr->mu not.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/mono.h"
#include "workspace/workspace_internal.h"

void workspace_mgr_set_deferred(struct workspace_mgr *m, unsigned interval_ms,
                                workspace_deferred_fn fn, void *arg)
{
	pthread_mutex_lock(&m->mu);
	m->defer_fn = fn;
	m->defer_arg = arg;
	m->defer_interval_ms = interval_ms;
	pthread_mutex_unlock(&m->mu);
}

void workspace_defer_drop(struct ws_entry *e)
{
	free(e->defer_conv);
	e->defer_conv = NULL;
	e->defer_due = 0;
}

bool workspace_defer_holds(const struct workspace_mgr *m,
                           const struct ws_entry *e)
{
	return e->defer_due ||
	       (e->defer_last &&
	        mono_ms() - e->defer_last < (long long)m->defer_interval_ms);
}

/* Frees the entries kept only for a write that is an interval old. */
static void defer_forget(struct workspace_mgr *m)
{
	struct ws_entry *e, *next;

	pthread_mutex_lock(&m->mu);
	for (e = m->entries; e; e = next) {
		next = e->next;
		if (e->defer_last && !workspace_defer_holds(m, e))
			workspace_entry_maybe_free(m, e);
	}
	pthread_mutex_unlock(&m->mu);
}

/* Writes now for conv (ws locked); the entry's pending write is done. */
static void defer_write(struct workspace *ws, const char *conv)
{
	struct workspace_mgr *m = ws->mgr;
	workspace_deferred_fn fn;
	void *arg;

	pthread_mutex_lock(&m->mu);
	fn = m->defer_fn;
	arg = m->defer_arg;
	ws->e->defer_last = mono_ms();
	pthread_mutex_unlock(&m->mu);
	if (fn)
		fn(ws, conv, arg);
}

/* Takes the pending write of ws's entry (ws locked) and does it. */
static void defer_take(struct workspace *ws)
{
	struct workspace_mgr *m = ws->mgr;
	char *conv;

	pthread_mutex_lock(&m->mu);
	if (!ws->e->defer_due) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	conv = ws->e->defer_conv;
	ws->e->defer_conv = NULL;
	workspace_defer_drop(ws->e);
	pthread_mutex_unlock(&m->mu);
	defer_write(ws, conv);
	free(conv);
}

void workspace_defer(struct workspace *ws)
{
	struct workspace_mgr *m = ws->mgr;
	struct ws_entry *e = ws->e;
	long long now = mono_ms();
	char *conv;

	if (!ws->conv)
		return;
	pthread_mutex_lock(&m->mu);
	if (m->defer_fn && m->defer_interval_ms && e->defer_last &&
	    now - e->defer_last < (long long)m->defer_interval_ms) {
		if (!e->defer_conv || strcmp(e->defer_conv, ws->conv) != 0) {
			conv = strdup(ws->conv);
			if (conv) {
				free(e->defer_conv);
				e->defer_conv = conv;
			}
		}
		if (e->defer_conv) {
			if (!e->defer_due)
				e->defer_due =
				    e->defer_last + m->defer_interval_ms;
			pthread_mutex_unlock(&m->mu);
			return;
		}
	}
	/* Written now: what was pending is in this write. */
	workspace_defer_drop(e);
	pthread_mutex_unlock(&m->mu);
	defer_write(ws, ws->conv);
}

/* Releases the run lock of ws taken for a deferred write. */
static void defer_unlock(struct workspace *ws)
{
	struct workspace_mgr *m = ws->mgr;

	pthread_mutex_lock(&m->mu);
	workspace_entry_unlock(m, ws->e);
	ws->locked = false;
	pthread_mutex_unlock(&m->mu);
}

void workspace_flush_deferred(struct workspace *ws)
{
	struct workspace_mgr *m = ws->mgr;
	long long due;

	pthread_mutex_lock(&m->mu);
	due = ws->e->defer_due;
	pthread_mutex_unlock(&m->mu);
	if (!due || ws->locked || workspace_lock(ws, 0) < 0)
		return;
	defer_take(ws);
	defer_unlock(ws);
}

/*
 * The name of an entry whose write is due by until and was not looked at
 * in this pass (gen); false when there is none.
 */
static bool defer_next(struct workspace_mgr *m, long long until, unsigned gen,
                       char name[WORKSPACE_NAME_LEN + 1])
{
	bool found = false;

	pthread_mutex_lock(&m->mu);
	for (struct ws_entry *e = m->entries; e && !found; e = e->next) {
		if (!e->defer_due || e->defer_due > until ||
		    e->defer_gen == gen)
			continue;
		e->defer_gen = gen;
		memcpy(name, e->name, sizeof(e->name));
		found = true;
	}
	pthread_mutex_unlock(&m->mu);
	return found;
}

/* Drops the pending write of name, whose workspace cannot be opened. */
static void defer_drop_name(struct workspace_mgr *m, const char *name, int r)
{
	pthread_mutex_lock(&m->mu);
	for (struct ws_entry *e = m->entries; e; e = e->next) {
		if (strcmp(e->name, name) != 0 || !e->defer_due)
			continue;
		workspace_defer_drop(e);
		workspace_entry_maybe_free(m, e);
		break;
	}
	pthread_mutex_unlock(&m->mu);
	if (r != -ENOENT)
		log_warnx("workspace %.12s: a deferred write was dropped: the "
		          "workspace could not be opened (%s); the next run "
		          "writes it",
		          name, strerror(-r));
}

/*
 * One pass over the writes due by until, each lock waited for up to
 * wait_ms; stops after deadline_ms (one write at least). True when it
 * stopped with writes left.
 */
static bool defer_pass(struct workspace_mgr *m, long long until,
                       unsigned wait_ms, long long deadline_ms)
{
	char name[WORKSPACE_NAME_LEN + 1];
	unsigned gen;
	struct workspace *ws;
	int r;

	pthread_mutex_lock(&m->mu);
	gen = ++m->defer_gen;
	pthread_mutex_unlock(&m->mu);
	while (defer_next(m, until, gen, name)) {
		r = workspace_open_by_name(m, name, &ws);
		if (r < 0) {
			defer_drop_name(m, name, r);
			continue;
		}
		if (workspace_lock(ws, wait_ms) == 0) {
			defer_take(ws);
		} else {
			/* A run holds it: it writes or defers again itself. */
			pthread_mutex_lock(&m->mu);
			if (ws->e->defer_due)
				ws->e->defer_due =
				    mono_ms() + m->defer_interval_ms;
			pthread_mutex_unlock(&m->mu);
		}
		workspace_close(ws);
		if (deadline_ms && cron_past(deadline_ms))
			return true;
	}
	return false;
}

enum cron_next workspace_job_deferred(void *arg, long long deadline_ms)
{
	struct workspace_mgr *m = arg;

	if (defer_pass(m, mono_ms(), 0, deadline_ms))
		return CRON_MORE;
	defer_forget(m);
	return CRON_DONE;
}

void workspace_mgr_flush_deferred(struct workspace_mgr *m, unsigned wait_ms)
{
	(void)defer_pass(m, LLONG_MAX, wait_ms, 0);
}
