/* SPDX-License-Identifier: MIT */
/*
 * mcp_session: the session table of the mcp module: lookup by id and
 * tenant, creation with per-tenant accounting (at the cap the least
 * recently used idle session makes room), ending a session and the
 * reference counting that frees it once no call, reader or request handler
 * uses it. Thread-safety: every function here runs with srv->lock held, the
 * one mutex that guards all session state, except mcp_session_free(), which
 * mcp_unlock() calls after releasing it.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "util/hex.h"
#include "util/log.h"

/* Whether the session speaks 2025-11-25 or later (priming events). */
bool mcp_session_wants_priming(const struct session *s)
{
	/* 2026-07-28 has no resumable streams, so nothing to prime. */
	return !s->legacy && !s->stateless &&
	       strcmp(s->version, "2025-11-25") >= 0;
}

struct session *mcp_session_find(struct mcp_server *srv, const char *id,
                                 const char *tenant)
{
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (strcmp(s->id, id) == 0) {
			/* Another tenant's session id is as good as unknown. */
			if (s->gone || strcmp(s->tenant, tenant) != 0)
				return NULL;
			return s;
		}
	}
	return NULL;
}

bool mcp_session_idle(const struct session *s)
{
	if (s->n_calls)
		return false;
	for (const struct stream *st = s->streams; st; st = st->next) {
		if (st->readers)
			return false;
	}
	return true;
}

/* Ends a session: cancels its calls, ends its streams, forgets it. */
void mcp_session_end(struct mcp_server *srv, struct session *s)
{
	if (s->gone)
		return;
	s->gone = true;
	for (struct session **pp = s->stateless ? &srv->stateless
	                                        : &srv->sessions;
	     *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			if (!s->stateless)
				srv->n_sessions--;
			break;
		}
	}
	mcp_listen_drop_session(srv, s);
	/* A call that became a task outlives its request. */
	for (struct mcp_call *c = s->calls; c; c = c->next) {
		if (!c->task)
			mcp_call_cancel_locked(c);
	}
	for (struct stream *st = s->streams; st; st = st->next)
		mcp_events_end(st);
	for (struct pending *p = s->pendings; p; p = p->next)
		pthread_cond_broadcast(&p->cond);
	mcp_session_unref(srv, s);
}

/*
 * The last reference: no call, reader or handler uses s or its streams any
 * more, and s is out of the table (the table holds a reference while it is
 * there), so s goes to be freed once the lock is released.
 */
void mcp_session_unref(struct mcp_server *srv, struct session *s)
{
	if (--s->refs)
		return;
	while (s->streams)
		mcp_events_drop(s, s->streams);
	s->next = srv->later_sessions;
	srv->later_sessions = s;
}

void mcp_session_free(struct session *s)
{
	cJSON_Delete(s->client_caps);
	free(s->tenant);
	free(s->client);
	free(s);
}

void mcp_session_set_client(struct session *s, const char *client)
{
	free(s->client);
	s->client = client && client[0] ? strdup(client) : NULL;
}

int mcp_session_new_stateless(struct mcp_server *srv, const char *tenant,
                              const struct mcp_meta *meta, struct session **out)
{
	/* What a tenant could have in flight with sessions, at most. */
	unsigned long long cap =
	    (unsigned long long)srv->cfg->max_sessions_per_tenant *
	    srv->cfg->max_inflight_per_session;
	unsigned long long n = 0;
	struct session *s;

	*out = NULL;
	for (s = srv->stateless; s; s = s->next)
		n += strcmp(s->tenant, tenant) == 0;
	if (n >= cap)
		return -EBUSY;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tenant = strdup(tenant);
	s->client_caps = cJSON_Duplicate(meta->caps, true);
	if (!s->tenant || !s->client_caps) {
		cJSON_Delete(s->client_caps);
		free(s->tenant);
		free(s);
		return -ENOMEM;
	}
	s->srv = srv;
	s->refs = 1; /* the list's */
	s->stateless = true;
	s->initialized = true;
	s->log_level = meta->log_level;
	s->last_active = mono_s();
	snprintf(s->version, sizeof(s->version), "%s", meta->version);
	s->next = srv->stateless;
	srv->stateless = s;
	*out = s;
	return 0;
}

static unsigned tenant_sessions(struct mcp_server *srv, const char *tenant,
                                struct session **lru_idle)
{
	unsigned n = 0;

	*lru_idle = NULL;
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (strcmp(s->tenant, tenant) != 0)
			continue;
		n++;
		if (mcp_session_idle(s) &&
		    (!*lru_idle || s->last_active < (*lru_idle)->last_active))
			*lru_idle = s;
	}
	return n;
}

/*
 * Creates a session for tenant. At the per-tenant cap the least recently
 * used idle session makes room (its client will get 404 and
 * re-initialize); if none is idle, -EBUSY.
 */
int mcp_session_new(struct mcp_server *srv, const char *tenant, bool legacy,
                    struct session **out)
{
	unsigned char rnd[32];
	struct session *s, *lru;
	const char *rn;
	int n;

	*out = NULL;
	if (tenant_sessions(srv, tenant, &lru) >=
	    srv->cfg->max_sessions_per_tenant) {
		if (!lru)
			return -EBUSY;
		log_info("tenant %s is at %u sessions; ending the least "
		         "recently used idle one",
		         tenant, srv->cfg->max_sessions_per_tenant);
		mcp_session_end(srv, lru);
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tenant = strdup(tenant);
	if (!s->tenant) {
		free(s);
		return -ENOMEM;
	}
	/* "r1." + 64 hex digits behind a load balancer (MCP_REPLICA_NAME),
	 * else the 64 digits alone. */
	rn = srv->cfg->replica_name ? srv->cfg->replica_name : "";
	n = snprintf(s->id, sizeof(s->id), "%.*s%s", MCP_REPLICA_NAME_MAX, rn,
	             rn[0] ? "." : "");
	hex_encode(rnd, sizeof(rnd), s->id + n);
	s->srv = srv;
	s->refs = 1; /* the table's */
	s->legacy = legacy;
	s->log_level = MCP_LOG_INFO;
	s->last_active = mono_s();
	snprintf(s->version, sizeof(s->version), "%s",
	         legacy ? "2024-11-05" : "2025-03-26");
	s->next = srv->sessions;
	srv->sessions = s;
	srv->n_sessions++;
	*out = s;
	return 0;
}
