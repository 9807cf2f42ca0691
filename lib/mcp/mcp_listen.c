/* SPDX-License-Identifier: MIT */
/*
 * mcp_listen: subscriptions/listen (2026-07-28), the stream on which a
 * client hears of changes outside its requests: the request's own SSE
 * answer, which starts with notifications/subscriptions/acknowledged and
 * stays open, carrying only the notification kinds the client asked for,
 * each tagged with the subscription id (the listen request's id). It ends
 * when the client closes it (its stateless session then ends) or, with a
 * final result, when the server shuts down. Every message a listener may
 * send is serialized when it is opened, so broadcasting only queues
 * references under the lock. Thread-safety: srv->lock guards the listener
 * list; functions say which expect it held.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Most resourceSubscriptions URIs acknowledged for one listener. */
#define MAX_RESOURCE_SUBS 256

static const char *const kind_field[LISTEN_KINDS] = {
    "toolsListChanged", "promptsListChanged", "resourcesListChanged"};
static const char *const kind_method[LISTEN_KINDS] = {
    "notifications/tools/list_changed", "notifications/prompts/list_changed",
    "notifications/resources/list_changed"};

/* {"_meta": {"io.modelcontextprotocol/subscriptionId": <id>}} */
static cJSON *tagged(const char *id_raw)
{
	cJSON *p = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(p, "_meta");

	cJSON_AddRawToObject(meta, META_SUBSCRIPTION, id_raw);
	return p;
}

static void listener_free(struct listener *l)
{
	for (int k = 0; k < LISTEN_KINDS; k++)
		mcp_msg_unref(l->note[k]);
	mcp_msg_unref(l->closing);
	free(l);
}

/* Whether the server can ever send notifications of kind k. */
static bool honored(const struct mcp_server *srv, enum listen_kind k)
{
	return k == LISTEN_TOOLS || (k == LISTEN_PROMPTS && srv->n_prompts) ||
	       (k == LISTEN_RESOURCES && srv->n_providers);
}

/*
 * Builds the acknowledgement (what is honored), the notifications and the
 * closing result of a listener for c. NULL with *err set (-EINVAL: bad
 * filter, -ENOMEM) on failure.
 */
static struct listener *listener_make(struct mcp_call *c, struct mcp_msg **ack,
                                      int *err)
{
	struct mcp_server *srv = c->srv;
	const cJSON *filter =
	    cJSON_GetObjectItemCaseSensitive(c->params, "notifications");
	const cJSON *subs =
	    cJSON_GetObjectItemCaseSensitive(filter, "resourceSubscriptions");
	struct listener *l;
	cJSON *p, *acked, *result;
	bool oom = false;

	*ack = NULL;
	*err = -EINVAL;
	if (!cJSON_IsObject(filter) || (subs && !cJSON_IsArray(subs)) ||
	    cJSON_GetArraySize(subs) > MAX_RESOURCE_SUBS)
		return NULL;
	*err = -ENOMEM;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	p = tagged(c->id_raw);
	acked = cJSON_AddObjectToObject(p, "notifications");
	for (int k = 0; k < LISTEN_KINDS; k++) {
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
		        filter, kind_field[k])) ||
		    !honored(srv, (enum listen_kind)k))
			continue;
		cJSON_AddTrueToObject(acked, kind_field[k]);
		l->note[k] = mcp_msg_new(
		    rpc_notification(kind_method[k], tagged(c->id_raw)));
		oom |= !l->note[k];
	}
	/* Resources never change but through tools: nothing will be due. */
	if (subs && srv->n_providers)
		cJSON_AddItemToObject(acked, "resourceSubscriptions",
		                      cJSON_Duplicate(subs, true));
	*ack = mcp_msg_new(
	    rpc_notification("notifications/subscriptions/acknowledged", p));
	result = mcp_revision_shape(c->sess, c->method, tagged(c->id_raw));
	l->closing = mcp_msg_new(rpc_result(c->id_raw, result));
	if (oom || !*ack || !l->closing) {
		mcp_msg_unref(*ack);
		*ack = NULL;
		listener_free(l);
		return NULL;
	}
	return l;
}

char *mcp_listen_open(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	const cJSON *filter =
	    cJSON_GetObjectItemCaseSensitive(c->params, "notifications");
	struct mcp_msg *ack;
	struct listener *l;
	int err;

	if (cJSON_GetObjectItemCaseSensitive(filter, "taskIds") &&
	    !mcp_revision_client_has(c->sess->client_caps, TASKS_EXTENSION)) {
		c->answer_code = RPC_MISSING_CAPABILITY;
		return rpc_error(c->id_raw, RPC_MISSING_CAPABILITY,
		                 "notifications about tasks need the client "
		                 "capability extensions[\"" TASKS_EXTENSION
		                 "\"]; declare it in this request's _meta",
		                 mcp_revision_missing(TASKS_EXTENSION));
	}
	l = listener_make(c, &ack, &err);
	if (!l) {
		c->answer_code =
		    err == -EINVAL ? RPC_INVALID_PARAMS : RPC_INTERNAL_ERROR;
		return rpc_errorf(c->id_raw, c->answer_code, "%s",
		                  err == -EINVAL
		                      ? "subscriptions/listen needs "
		                        "params.notifications, an object such "
		                        "as {\"toolsListChanged\": true} "
		                        "(resourceSubscriptions: at most 256 "
		                        "URIs)"
		                      : "out of memory");
	}
	mcp_lock(srv);
	if (c->sess->gone || c->cancelled || !c->st || srv->stopping) {
		mcp_unlock(srv);
		mcp_msg_unref(ack);
		listener_free(l);
		c->no_response = true;
		return NULL;
	}
	l->sess = c->sess;
	l->st = c->st;
	mcp_events_hold(l->st);
	/* The listener owes the closing result: the stream stays open. */
	l->st->pending++;
	(void)mcp_events_push(l->st, ack, false);
	l->next = srv->listeners;
	srv->listeners = l;
	mcp_unlock(srv);
	mcp_msg_unref(ack);
	/* The request itself is done; its stream is the listener's now. */
	c->no_response = true;
	return NULL;
}

/* Unlinks l, sends its closing result when graceful, ends its stream. */
static void drop(struct mcp_server *srv, struct listener *l, bool graceful)
{
	if (graceful)
		(void)mcp_events_push(l->st, l->closing, true);
	if (l->st->pending)
		l->st->pending--;
	mcp_events_end(l->st);
	mcp_events_unref(srv, l->st);
	listener_free(l);
}

void mcp_listen_drop_session(struct mcp_server *srv, struct session *s)
{
	for (struct listener **pp = &srv->listeners; *pp;) {
		struct listener *l = *pp;

		if (l->sess != s) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		drop(srv, l, srv->stopping);
	}
}

void mcp_listen_broadcast(struct mcp_server *srv, enum listen_kind k)
{
	mcp_lock(srv);
	for (struct listener *l = srv->listeners; l; l = l->next) {
		if (l->note[k])
			(void)mcp_events_push(l->st, l->note[k], false);
	}
	mcp_unlock(srv);
}
