/* SPDX-License-Identifier: MIT */
/*
 * mcp_input: input a handler asks the client for (elicitation, sampling,
 * roots), in every revision, behind one call, mcp_call_input(). In a
 * session it sends server-to-client requests on the request's stream and
 * waits for the client's responses; under 2026-07-28 (multi round-trip
 * requests, SEP-2322) it answers from the request's inputResponses and the
 * answers its requestState carries, and when some are missing the request
 * is answered with an InputRequiredResult whose requestState (request_state.h)
 * carries the answers so far, bound to the tenant, the method, the tool,
 * prompt or resource and its arguments; in a task it parks the task
 * (mcp_task.c). Thread-safety: the session parts run under srv->lock as
 * the rest of the module; the 2026-07-28 parts touch only the call, which
 * belongs to the thread running its handler.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "mcp/request_state.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/log.h"

/* How long a requestState stays valid: a person may take a while. */
#define STATE_TTL_S 3600
#define MAX_INPUTS 16

/* The client capability a question needs, or NULL for none. */
static const char *capability_of(const char *method)
{
	if (strcmp(method, "elicitation/create") == 0)
		return "elicitation";
	if (strcmp(method, "sampling/createMessage") == 0)
		return "sampling";
	if (strcmp(method, "roots/list") == 0)
		return "roots";
	return NULL;
}

static void free_params(struct mcp_input *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cJSON_Delete(in[i].params);
		in[i].params = NULL;
	}
}

static void free_results(struct mcp_input *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cJSON_Delete(in[i].result);
		cJSON_Delete(in[i].error);
		in[i].result = in[i].error = NULL;
	}
}

/* ------------------------------------------------------------------ */
/* sessions: requests to the client */

/* Sends the request m for p and queues p. Lock held. */
static int request_send(struct mcp_call *c, struct pending *p,
                        struct mcp_msg *m)
{
	struct session *s = c->sess;
	struct stream *to;
	int r;

	if (s->gone || c->cancelled)
		return s->gone ? -ENOTCONN : -ECANCELED;
	to = mcp_call_target(c);
	if (!to)
		return -ENOTCONN;
	r = mcp_events_push(to, m, false);
	if (r < 0)
		return r;
	p->next = s->pendings;
	s->pendings = p;
	return 0;
}

/* Waits for p's answer until dl, then unqueues it. Lock held. */
static int request_wait(struct mcp_call *c, struct pending *p,
                        const struct timespec *dl)
{
	struct session *s = c->sess;

	while (!p->done && !s->gone && !c->cancelled) {
		if (pthread_cond_timedwait(&p->cond, &c->srv->lock, dl) ==
		    ETIMEDOUT)
			break;
	}
	for (struct pending **pp = &s->pendings; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->done)
		return p->error ? -EPROTO : 0;
	return s->gone ? -ENOTCONN : c->cancelled ? -ECANCELED : -ETIMEDOUT;
}

static int session_input(struct mcp_call *c, struct mcp_input *in, size_t n,
                         unsigned timeout_ms)
{
	struct mcp_server *srv = c->srv;
	struct pending *p = calloc(n, sizeof(*p));
	struct mcp_msg **m = calloc(n, sizeof(*m));
	struct timespec dl;
	size_t sent = 0;
	int r = 0;

	if (!p || !m) {
		free(p);
		free(m);
		free_params(in, n);
		return -ENOMEM;
	}
	/* Ids and texts first: the lock is only for queueing. */
	for (size_t i = 0; i < n; i++) {
		unsigned long long id;
		char idbuf[48];

		mono_cond_init(&p[i].cond);
		mcp_lock(srv);
		id = ++c->sess->next_request_id;
		mcp_unlock(srv);
		snprintf(idbuf, sizeof(idbuf), "\"srv-%llu\"", id);
		p[i].id_key = buf_asprintf("s:srv-%llu", id);
		m[i] =
		    mcp_msg_new(rpc_request(idbuf, in[i].method, in[i].params));
		in[i].params = NULL;
		if (!p[i].id_key || !m[i])
			r = -ENOMEM;
	}
	mono_deadline(&dl, timeout_ms);
	mcp_lock(srv);
	while (r == 0 && sent < n) {
		r = request_send(c, &p[sent], m[sent]);
		if (r == 0)
			sent++;
	}
	for (size_t i = 0; i < sent; i++) {
		int w = request_wait(c, &p[i], &dl);

		if (w == 0 || w == -EPROTO) {
			in[i].result = p[i].result;
			in[i].error = p[i].error;
			p[i].result = p[i].error = NULL;
		}
		if (r == 0 || (r == -EPROTO && w != 0))
			r = w;
	}
	mcp_unlock(srv);
	for (size_t i = 0; i < n; i++) {
		cJSON_Delete(p[i].result);
		cJSON_Delete(p[i].error);
		free(p[i].id_key);
		pthread_cond_destroy(&p[i].cond);
		mcp_msg_unref(m[i]);
	}
	if (r < 0 && r != -EPROTO)
		free_results(in, n);
	free(p);
	free(m);
	return r;
}

/* ------------------------------------------------------------------ */
/* 2026-07-28: multi round-trip requests */

/*
 * What a requestState is bound to: the SHA-256 (hex) of the tenant, the
 * method, the tool, prompt or resource and the arguments, so state from one
 * request cannot complete another, or another tenant's.
 */
static int binding(const struct mcp_call *c, char out[65])
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	char *a = args ? cJSON_PrintUnformatted(args) : NULL;
	const char *parts[4] = {c->sess->tenant, c->method,
	                        cJSON_IsString(name)  ? name->valuestring
	                        : cJSON_IsString(uri) ? uri->valuestring
	                                              : "",
	                        a ? a : ""};
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int r = -ENOMEM;

	if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
		r = 0;
		for (size_t i = 0; i < 4 && r == 0; i++) {
			/* NUL separators: the parts cannot run together. */
			if (EVP_DigestUpdate(ctx, parts[i],
			                     strlen(parts[i]) + 1) != 1)
				r = -EIO;
		}
		if (r == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
			r = -EIO;
	}
	EVP_MD_CTX_free(ctx);
	cJSON_free(a);
	if (r == 0)
		hex_encode(md, 32, out);
	return r;
}

/* An error answer for the request, with code recorded. */
static char *refuse(struct mcp_call *c, const char *msg)
{
	c->answer_code = RPC_INVALID_PARAMS;
	return rpc_errorf(c->id_raw, RPC_INVALID_PARAMS, "%s", msg);
}

char *mcp_input_load(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	cJSON *resp =
	    cJSON_GetObjectItemCaseSensitive(c->params, "inputResponses");
	const cJSON *state =
	    cJSON_GetObjectItemCaseSensitive(c->params, "requestState");
	cJSON *answers, *payload = NULL, *it;
	const cJSON *b, *a;
	char err[512], bind[65];
	int r;

	if (!c->sess->stateless || c->mrtr_loaded)
		return NULL;
	c->mrtr_loaded = true;
	if (resp && !cJSON_IsObject(resp))
		return refuse(c, "params.inputResponses must be an object of "
		                 "answers by the keys of the inputRequests");
	cJSON_ArrayForEach (it, resp) {
		if (!cJSON_IsObject(it)) {
			snprintf(err, sizeof(err),
			         "params.inputResponses[\"%.64s\"] must be the "
			         "client's result object for that input "
			         "request",
			         it->string);
			return refuse(c, err);
		}
	}
	if (state && !cJSON_IsString(state))
		return refuse(c, "params.requestState must be the string of "
		                 "the latest InputRequiredResult");
	if (binding(c, bind) < 0)
		return refuse(c, "out of memory");
	answers = cJSON_CreateObject();
	if (!answers)
		return refuse(c, "out of memory");
	if (state) {
		r = request_state_open(srv->state_key, state->valuestring,
		                       strlen(state->valuestring),
		                       (long long)time(NULL), &payload, err,
		                       sizeof(err));
		b = cJSON_GetObjectItemCaseSensitive(payload, "b");
		if (r == 0 &&
		    (!cJSON_IsString(b) || strcmp(b->valuestring, bind) != 0)) {
			r = -EINVAL;
			snprintf(
			    err, sizeof(err),
			    "requestState belongs to another request; send "
			    "it only with the request (and arguments) whose "
			    "InputRequiredResult carried it");
		}
		if (r < 0) {
			cJSON_Delete(payload);
			cJSON_Delete(answers);
			return refuse(c, err);
		}
		a = cJSON_GetObjectItemCaseSensitive(payload, "a");
		cJSON_ArrayForEach (it, a) {
			cJSON_AddItemToObject(answers, it->string,
			                      cJSON_Duplicate(it, true));
		}
		cJSON_Delete(payload);
	}
	/* This round's answers win over earlier ones of the same key. */
	cJSON_ArrayForEach (it, resp) {
		cJSON_DeleteItemFromObjectCaseSensitive(answers, it->string);
		cJSON_AddItemToObject(answers, it->string,
		                      cJSON_Duplicate(it, true));
	}
	c->mrtr_answers = answers;
	return NULL;
}

static int mrtr_input(struct mcp_call *c, struct mcp_input *in, size_t n)
{
	size_t missing = 0;

	if (!c->mrtr_loaded) {
		/* Asked by a method that takes no input (SEP-2322). */
		free_params(in, n);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < n; i++) {
		char key[128];
		const cJSON *a;
		cJSON *q;

		if (in[i].key)
			snprintf(key, sizeof(key), "%.127s", in[i].key);
		else
			snprintf(key, sizeof(key), "input-%u", ++c->input_seq);
		a = cJSON_GetObjectItemCaseSensitive(c->mrtr_answers, key);
		if (a) {
			in[i].result = cJSON_Duplicate(a, true);
			if (!c->mrtr_used)
				c->mrtr_used = cJSON_CreateObject();
			if (!cJSON_GetObjectItemCaseSensitive(c->mrtr_used,
			                                      key))
				cJSON_AddItemToObject(c->mrtr_used, key,
				                      cJSON_Duplicate(a, true));
			continue;
		}
		if (!c->mrtr_missing)
			c->mrtr_missing = cJSON_CreateObject();
		q = cJSON_CreateObject();
		cJSON_AddStringToObject(q, "method", in[i].method);
		cJSON_AddItemToObject(q, "params", in[i].params);
		in[i].params = NULL;
		cJSON_AddItemToObject(c->mrtr_missing, key, q);
		missing++;
	}
	free_params(in, n);
	if (!missing)
		return 0;
	free_results(in, n);
	return -EAGAIN;
}

char *mcp_input_answer(struct mcp_call *c)
{
	cJSON *payload, *result;
	unsigned char nonce[8];
	char bind[65], nhex[17], *state;

	if (!c->mrtr_missing || !c->mrtr_missing->child)
		return NULL;
	if (binding(c, bind) < 0 || RAND_bytes(nonce, sizeof(nonce)) != 1)
		goto fail;
	hex_encode(nonce, sizeof(nonce), nhex);
	payload = cJSON_CreateObject();
	cJSON_AddNumberToObject(payload, "v", 1);
	cJSON_AddStringToObject(payload, "b", bind);
	cJSON_AddItemToObject(
	    payload, "a", c->mrtr_used ? c->mrtr_used : cJSON_CreateObject());
	c->mrtr_used = NULL;
	cJSON_AddStringToObject(payload, "n", nhex);
	state = request_state_seal(c->srv->state_key, payload,
	                           (long long)time(NULL) + STATE_TTL_S);
	cJSON_Delete(payload);
	if (!state) {
		c->answer_code = RPC_INTERNAL_ERROR;
		return rpc_errorf(c->id_raw, RPC_INTERNAL_ERROR,
		                  "the answers given so far are too large to "
		                  "carry to the next round; give shorter "
		                  "answers");
	}
	result = cJSON_CreateObject();
	cJSON_AddStringToObject(result, "resultType", "input_required");
	cJSON_AddItemToObject(result, "inputRequests", c->mrtr_missing);
	c->mrtr_missing = NULL;
	cJSON_AddStringToObject(result, "requestState", state);
	free(state);
	return rpc_result(c->id_raw,
	                  mcp_revision_shape(c->sess, c->method, result));
fail:
	c->answer_code = RPC_INTERNAL_ERROR;
	return rpc_errorf(c->id_raw, RPC_INTERNAL_ERROR, "out of memory");
}

void mcp_input_discard(struct mcp_call *c)
{
	cJSON_Delete(c->mrtr_answers);
	cJSON_Delete(c->mrtr_missing);
	cJSON_Delete(c->mrtr_used);
	c->mrtr_answers = c->mrtr_missing = c->mrtr_used = NULL;
}

/* ------------------------------------------------------------------ */
/* the API */

/* Records that a question needs a capability the client lacks. */
static int missing_capability(struct mcp_call *c, const char *cap)
{
	cJSON_Delete(c->fail_data);
	free(c->fail_msg);
	c->fail_code = RPC_MISSING_CAPABILITY;
	c->fail_data = mcp_revision_missing(cap);
	c->fail_msg = buf_asprintf(
	    "this tool needs the client capability '%s'; declare it in "
	    "params._meta[\"" META_CAPS "\"] and call again",
	    cap);
	return -EOPNOTSUPP;
}

int mcp_call_input(struct mcp_call *c, struct mcp_input *in, size_t n,
                   unsigned timeout_ms)
{
	for (size_t i = 0; i < n; i++)
		in[i].result = in[i].error = NULL;
	if (n == 0)
		return 0;
	if (n > MAX_INPUTS) {
		free_params(in, n);
		return -E2BIG;
	}
	if (c->sess->stateless) {
		for (size_t i = 0; i < n; i++) {
			const char *cap = capability_of(in[i].method);

			if (cap && !mcp_revision_client_has(
			               c->sess->client_caps, cap)) {
				free_params(in, n);
				return missing_capability(c, cap);
			}
		}
		if (c->task)
			return mcp_task_input(c, in, n, timeout_ms);
		return mrtr_input(c, in, n);
	}
	return session_input(c, in, n, timeout_ms);
}

int mcp_call_request(struct mcp_call *c, const char *method, cJSON *params,
                     unsigned timeout_ms, cJSON **result, cJSON **error)
{
	struct mcp_input in = {.method = method, .params = params};
	int r = mcp_call_input(c, &in, 1, timeout_ms);

	*result = in.result;
	*error = in.error;
	return r;
}
