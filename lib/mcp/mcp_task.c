/* SPDX-License-Identifier: MIT */
/*
 * mcp_task: tools/call requests that run as tasks (the
 * io.modelcontextprotocol/tasks extension of 2026-07-28). A call becomes a
 * task by recording it (tasks.c, durably when there is a store) and
 * answering its request with CreateTaskResult; the handler goes on on its
 * thread, its progress messages become the task's status message, its
 * questions to the client wait for tasks/update, and its result is recorded
 * when it returns. While it runs, a struct task_run links the task id to
 * the call (for tasks/get, tasks/update and tasks/cancel); afterwards only
 * the record remains. The methods tasks/get, tasks/update and tasks/cancel
 * are answered here. Thread-safety: srv->lock guards the runs; records are
 * written and read without it (tasks.c has its own lock), and every message
 * is built outside it.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tasks/tasks.h"
#include "tasks/tasks_backend.h"
#include "util/log.h"

/* Most questions one task may have open at once. */
#define MAX_QUESTIONS 16
#define KEY_MAX 128

struct question {
	char key[KEY_MAX];
	char *request; /* {"method":..,"params":..} as JSON text */
	cJSON *answer; /* the client's, once given */
};

struct task_run {
	struct task_run *next; /* in srv->tasks_live */
	char id[TASK_ID_LEN + 1];
	struct mcp_call *call;
	enum task_status status; /* working or input_required */
	char *message;           /* the latest progress message, or NULL */
	long long created_ms, updated_ms, ttl_ms;
	unsigned poll_ms;
	struct question q[MAX_QUESTIONS];
	size_t n_q;
	unsigned long long keys; /* keys given out, for unique ones */
	pthread_cond_t cond;     /* an answer came, or the call was cancelled */
};

/* ------------------------------------------------------------------ */
/* building task objects */

#define ISO_LEN 64

static void iso8601(long long ms, char out[ISO_LEN])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, ISO_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/*
 * A Task object from a record (taken over: its strings move into the
 * object), plus the open questions (JSON texts, taken over) when there are
 * any. resultType is the caller's.
 */
static cJSON *task_object(struct task_record *r, char **keys, char **reqs,
                          size_t n)
{
	cJSON *o = cJSON_CreateObject();
	char t[ISO_LEN];

	cJSON_AddStringToObject(o, "taskId", r->id);
	cJSON_AddStringToObject(o, "status", task_status_name(r->status));
	if (r->message)
		cJSON_AddStringToObject(o, "statusMessage", r->message);
	iso8601(r->created_ms, t);
	cJSON_AddStringToObject(o, "createdAt", t);
	iso8601(r->updated_ms, t);
	cJSON_AddStringToObject(o, "lastUpdatedAt", t);
	cJSON_AddNumberToObject(o, "ttlMs", (double)r->ttl_ms);
	cJSON_AddNumberToObject(o, "pollIntervalMs", r->poll_ms);
	/* Stored texts were serialized by this server: kept as they are. */
	if (r->status == TASK_COMPLETED && r->result)
		cJSON_AddRawToObject(o, "result", r->result);
	if (r->status == TASK_FAILED && r->error)
		cJSON_AddRawToObject(o, "error", r->error);
	if (n) {
		cJSON *ir = cJSON_AddObjectToObject(o, "inputRequests");

		for (size_t i = 0; i < n; i++)
			cJSON_AddRawToObject(ir, keys[i], reqs[i]);
	}
	for (size_t i = 0; i < n; i++) {
		free(keys[i]);
		free(reqs[i]);
	}
	task_record_finish(r);
	return o;
}

static struct task_run *find_run(struct mcp_server *srv, const char *id,
                                 const char *tenant)
{
	for (struct task_run *t = srv->tasks_live; t; t = t->next) {
		if (strcmp(t->id, id) == 0)
			return strcmp(t->call->sess->tenant, tenant) == 0
			           ? t
			           : NULL;
	}
	return NULL;
}

static void run_free(struct task_run *t)
{
	for (size_t i = 0; i < t->n_q; i++) {
		free(t->q[i].request);
		cJSON_Delete(t->q[i].answer);
	}
	free(t->message);
	pthread_cond_destroy(&t->cond);
	free(t);
}

/* ------------------------------------------------------------------ */
/* a call becomes a task */

/* Whether c may become a task. */
static bool can_be_task(const struct mcp_call *c)
{
	return c->srv->tasks && c->sess->stateless && c->tool &&
	       c->tool->tasks != MCP_TASK_NEVER &&
	       strcmp(c->method, "tools/call") == 0 &&
	       mcp_revision_client_has(c->sess->client_caps, TASKS_EXTENSION);
}

bool mcp_call_become_task(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	struct task_record rec;
	struct task_run *run;
	struct mcp_msg *m;
	struct stream *st;
	cJSON *o;
	int r;

	if (c->task)
		return true;
	if (!can_be_task(c) || mcp_call_cancelled(c))
		return false;
	r = tasks_create(srv->tasks, c->sess->tenant, c->tool->name, &rec);
	if (r < 0) {
		log_warnx("cannot record a task for %s (%s); it runs in its "
		          "request instead",
		          c->tool->name, strerror(-r));
		return false;
	}
	run = calloc(1, sizeof(*run));
	if (!run) {
		if (tasks_finish(srv->tasks, rec.id, TASK_FAILED, NULL, NULL,
		                 "{\"code\":-32603,\"message\":\"out of "
		                 "memory\"}") < 0)
			log_warnx("task %.8s...: cannot record its end",
			          rec.id);
		task_record_finish(&rec);
		return false;
	}
	memcpy(run->id, rec.id, sizeof(run->id));
	run->call = c;
	run->status = TASK_WORKING;
	run->created_ms = rec.created_ms;
	run->updated_ms = rec.updated_ms;
	run->ttl_ms = rec.ttl_ms;
	run->poll_ms = rec.poll_ms;
	mono_cond_init(&run->cond);
	o = task_object(&rec, NULL, NULL, 0);
	cJSON_AddStringToObject(o, "resultType", "task");
	m = mcp_msg_new(
	    rpc_result(c->id_raw, mcp_revision_shape(c->sess, "", o)));

	mcp_lock(srv);
	run->next = srv->tasks_live;
	srv->tasks_live = run;
	c->task = run;
	st = c->st;
	c->st = NULL;
	if (st) {
		/* The request is answered now; the call is the task's. */
		if (m && !c->cancelled && !c->sess->gone &&
		    mcp_events_push(st, m, true) < 0)
			log_warnx("could not queue the answer that creates "
			          "task %.8s...",
			          run->id);
		if (st->pending && --st->pending == 0 &&
		    st->kind == STREAM_POST)
			mcp_events_end(st);
		mcp_events_unref(srv, st);
	}
	mcp_unlock(srv);
	mcp_msg_unref(m);
	log_info("task %.8s...: %s runs as a task", run->id, c->tool->name);
	return true;
}

void mcp_task_progress(struct mcp_call *c, const char *message)
{
	struct mcp_server *srv = c->srv;
	char *m = message ? strdup(message) : NULL;

	if (message && !m)
		return;
	mcp_lock(srv);
	if (c->task) {
		char *old = c->task->message;

		c->task->message = m;
		c->task->updated_ms = tasks_now_ms();
		m = old;
	}
	mcp_unlock(srv);
	free(m);
}

/* The JSON text of the error a failed task reports (caller frees). */
static char *error_text(struct mcp_call *c, const char *message)
{
	cJSON *e = cJSON_CreateObject();
	char *out;

	cJSON_AddNumberToObject(
	    e, "code", c->fail_code ? c->fail_code : RPC_INTERNAL_ERROR);
	cJSON_AddStringToObject(e, "message", message);
	if (c->fail_data) {
		cJSON_AddItemToObject(e, "data", c->fail_data);
		c->fail_data = NULL;
	}
	out = cJSON_PrintUnformatted(e);
	cJSON_Delete(e);
	return out;
}

void mcp_task_finish(struct mcp_call *c, cJSON *result)
{
	struct mcp_server *srv = c->srv;
	struct task_run *run = c->task;
	enum task_status status;
	const char *msg = NULL;
	char *res = NULL, *err = NULL;
	bool cancelled, stopping;
	int r;

	mcp_lock(srv);
	cancelled = c->cancelled;
	stopping = srv->stopping;
	mcp_unlock(srv);
	if (cancelled && stopping) {
		status = TASK_FAILED;
		msg = "The server shut down while this task was running; run "
		      "it again.";
		err = error_text(c, msg);
	} else if (cancelled) {
		status = TASK_CANCELLED;
		msg = "Cancelled at the client's request.";
	} else if (result) {
		status = TASK_COMPLETED;
		res = cJSON_PrintUnformatted(
		    mcp_revision_shape(c->sess, c->method, result));
		if (!res) {
			status = TASK_FAILED;
			msg = "out of memory";
			err = error_text(c, msg);
		}
	} else {
		status = TASK_FAILED;
		msg = c->fail_msg ? c->fail_msg
		                  : "The tool failed internally; the server "
		                    "log has details.";
		err = error_text(c, msg);
	}
	cJSON_Delete(result);
	r = tasks_finish(srv->tasks, run->id, status, msg, res, err);
	if (r < 0)
		log_warnx("task %.8s...: cannot record its end (%s)", run->id,
		          strerror(-r));
	else
		log_info("task %.8s...: %s", run->id, task_status_name(status));
	cJSON_free(res);
	cJSON_free(err);

	mcp_lock(srv);
	for (struct task_run **pp = &srv->tasks_live; *pp; pp = &(*pp)->next) {
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	}
	c->task = NULL;
	mcp_unlock(srv);
	run_free(run);
	c->no_response = true;
	mcp_call_finish(c, NULL);
}

void mcp_task_cancel_all(struct mcp_server *srv)
{
	for (struct task_run *t = srv->tasks_live; t; t = t->next) {
		mcp_call_cancel_locked(t->call);
		pthread_cond_broadcast(&t->cond);
	}
}

/* ------------------------------------------------------------------ */
/* questions asked by a task */

/* Whether every question of in has an answer in run. Lock held. */
static bool answered(const struct task_run *run, char (*keys)[KEY_MAX],
                     size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < run->n_q; j++) {
			if (strcmp(run->q[j].key, keys[i]) == 0 &&
			    !run->q[j].answer)
				return false;
		}
	}
	return true;
}

/* Takes question key's answer out of run and forgets it. Lock held. */
static cJSON *take_answer(struct task_run *run, const char *key)
{
	for (size_t j = 0; j < run->n_q; j++) {
		if (strcmp(run->q[j].key, key) != 0)
			continue;
		cJSON *a = run->q[j].answer;

		free(run->q[j].request);
		run->q[j] = run->q[--run->n_q];
		return a;
	}
	return NULL;
}

int mcp_task_input(struct mcp_call *c, struct mcp_input *in, size_t n,
                   unsigned timeout_ms)
{
	struct mcp_server *srv = c->srv;
	struct task_run *run;
	char(*keys)[KEY_MAX] = calloc(n, KEY_MAX);
	char **reqs = calloc(n, sizeof(char *));
	struct timespec dl;
	int r = 0;

	for (size_t i = 0; i < n && keys && reqs; i++) {
		cJSON *q = cJSON_CreateObject();

		cJSON_AddStringToObject(q, "method", in[i].method);
		cJSON_AddItemToObject(q, "params", in[i].params);
		in[i].params = NULL;
		reqs[i] = cJSON_PrintUnformatted(q);
		cJSON_Delete(q);
		if (!reqs[i])
			r = -ENOMEM;
	}
	if (!keys || !reqs || r < 0) {
		r = -ENOMEM;
		goto out;
	}
	mono_deadline(&dl, timeout_ms);
	mcp_lock(srv);
	run = c->task;
	if (run->n_q + n > MAX_QUESTIONS) {
		mcp_unlock(srv);
		r = -E2BIG;
		goto out;
	}
	/* Keys are unique over the task's life (SEP-2663). */
	for (size_t i = 0; i < n; i++) {
		struct question *q = &run->q[run->n_q++];

		unsigned long long seq = ++run->keys;

		if (!in[i].key)
			snprintf(keys[i], KEY_MAX, "input-%llu", seq);
		else if (seq == 1)
			snprintf(keys[i], KEY_MAX, "%.100s", in[i].key);
		else
			snprintf(keys[i], KEY_MAX, "%.100s-%llu", in[i].key,
			         seq);
		memcpy(q->key, keys[i], KEY_MAX);
		q->request = reqs[i];
		q->answer = NULL;
		reqs[i] = NULL;
	}
	run->status = TASK_INPUT_REQUIRED;
	run->updated_ms = tasks_now_ms();
	while (!answered(run, keys, n) && !c->cancelled) {
		if (pthread_cond_timedwait(&run->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	if (c->cancelled)
		r = -ECANCELED;
	else if (!answered(run, keys, n))
		r = -ETIMEDOUT;
	for (size_t i = 0; i < n; i++) {
		cJSON *a = take_answer(run, keys[i]);

		if (r == 0)
			in[i].result = a;
		else
			cJSON_Delete(a);
	}
	if (run->n_q == 0)
		run->status = TASK_WORKING;
	run->updated_ms = tasks_now_ms();
	mcp_unlock(srv);
out:
	for (size_t i = 0; reqs && i < n; i++)
		cJSON_free(reqs[i]);
	for (size_t i = 0; i < n; i++) {
		cJSON_Delete(in[i].params);
		in[i].params = NULL;
	}
	free(reqs);
	free(keys);
	return r;
}

/* ------------------------------------------------------------------ */
/* tasks/get, tasks/update, tasks/cancel */

/* The taskId a tasks/ request names, or NULL with *answer set. */
static const char *task_id_of(struct mcp_call *c, char **answer)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(c->params, "taskId");

	*answer = NULL;
	if (!mcp_revision_client_has(c->sess->client_caps, TASKS_EXTENSION)) {
		c->answer_code = RPC_MISSING_CAPABILITY;
		*answer = rpc_error(c->id_raw, RPC_MISSING_CAPABILITY,
		                    "tasks need the client capability "
		                    "extensions[\"" TASKS_EXTENSION "\"]; "
		                    "declare it in this request's _meta",
		                    mcp_revision_missing(TASKS_EXTENSION));
		return NULL;
	}
	if (!c->srv->tasks || !cJSON_IsString(id)) {
		c->answer_code = RPC_INVALID_PARAMS;
		*answer = rpc_errorf(c->id_raw, RPC_INVALID_PARAMS,
		                     "%s needs params.taskId, the id a "
		                     "tools/call answered with",
		                     c->method);
		return NULL;
	}
	return id->valuestring;
}

static char *unknown_task(struct mcp_call *c, const char *id)
{
	c->answer_code = RPC_INVALID_PARAMS;
	return rpc_errorf(c->id_raw, RPC_INVALID_PARAMS,
	                  "Task not found: '%.64s' is not a task of this "
	                  "token, or it ended more than "
	                  "MCP_TASK_RETENTION_SECONDS ago, or newer tasks "
	                  "of this token took its room "
	                  "(MCP_TASK_MAX_PER_TENANT, "
	                  "MCP_TASK_RESULT_BYTES_PER_TENANT)",
	                  id);
}

/* The answer to a tasks/update or tasks/cancel: an empty result. */
static char *ack(struct mcp_call *c)
{
	return rpc_result(c->id_raw, mcp_revision_shape(c->sess, c->method,
	                                                cJSON_CreateObject()));
}

/* Whether record id of c's tenant exists (ended, or just created). */
static bool recorded(struct mcp_call *c, const char *id)
{
	struct task_record rec;

	if (tasks_get(c->srv->tasks, c->sess->tenant, id, &rec) < 0)
		return false;
	task_record_finish(&rec);
	return true;
}

char *mcp_task_get(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	const char *id;
	char *answer, *keys[MAX_QUESTIONS], *reqs[MAX_QUESTIONS];
	struct task_record rec = {0};
	struct task_run *run;
	size_t n = 0;
	bool live = false;

	id = task_id_of(c, &answer);
	if (!id)
		return answer;
	mcp_lock(srv);
	run = find_run(srv, id, c->sess->tenant);
	if (run) {
		live = true;
		memcpy(rec.id, run->id, sizeof(rec.id));
		rec.status = run->status;
		rec.created_ms = run->created_ms;
		rec.updated_ms = run->updated_ms;
		rec.ttl_ms = run->ttl_ms;
		rec.poll_ms = run->poll_ms;
		rec.message = run->message ? strdup(run->message) : NULL;
		for (size_t i = 0; i < run->n_q; i++) {
			if (run->q[i].answer)
				continue;
			keys[n] = strdup(run->q[i].key);
			reqs[n] = strdup(run->q[i].request);
			n++;
		}
	}
	mcp_unlock(srv);
	for (size_t i = 0; i < n; i++) {
		if (!keys[i] || !reqs[i]) {
			for (size_t j = 0; j < n; j++) {
				free(keys[j]);
				free(reqs[j]);
			}
			task_record_finish(&rec);
			c->answer_code = RPC_INTERNAL_ERROR;
			return rpc_errorf(c->id_raw, RPC_INTERNAL_ERROR,
			                  "out of memory");
		}
	}
	if (!live && tasks_get(srv->tasks, c->sess->tenant, id, &rec) < 0)
		return unknown_task(c, id);
	/* Answered, and the handler not yet woken: working again. */
	if (rec.status == TASK_INPUT_REQUIRED && n == 0)
		rec.status = TASK_WORKING;
	return rpc_result(c->id_raw,
	                  mcp_revision_shape(c->sess, c->method,
	                                     task_object(&rec, keys, reqs, n)));
}

char *mcp_task_update(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	cJSON *resp =
	    cJSON_GetObjectItemCaseSensitive(c->params, "inputResponses");
	struct task_run *run;
	const char *id;
	char *answer;
	bool live;

	id = task_id_of(c, &answer);
	if (!id)
		return answer;
	if (!cJSON_IsObject(resp)) {
		c->answer_code = RPC_INVALID_PARAMS;
		return rpc_errorf(c->id_raw, RPC_INVALID_PARAMS,
		                  "tasks/update needs params.inputResponses, "
		                  "an object of answers by the keys of the "
		                  "task's inputRequests");
	}
	mcp_lock(srv);
	run = find_run(srv, id, c->sess->tenant);
	live = run != NULL;
	for (size_t i = 0; run && i < run->n_q; i++) {
		cJSON *a;

		if (run->q[i].answer)
			continue;
		/* Moved out of this request's own copy of its params. */
		a = cJSON_DetachItemFromObjectCaseSensitive(resp,
		                                            run->q[i].key);
		if (cJSON_IsObject(a))
			run->q[i].answer = a;
		else
			cJSON_Delete(a);
	}
	if (run) {
		run->updated_ms = tasks_now_ms();
		pthread_cond_broadcast(&run->cond);
	}
	mcp_unlock(srv);
	/* Answers to keys that are not open are ignored (SEP-2663). */
	if (!live) {
		struct task_record rec;
		bool elsewhere;

		if (tasks_get(srv->tasks, c->sess->tenant, id, &rec) < 0)
			return unknown_task(c, id);
		elsewhere = !task_status_final(rec.status) &&
		            srv->cfg->replica_name && srv->cfg->replica_name[0];
		task_record_finish(&rec);
		/* Its questions wait in the memory of the replica running
		 * it: dropping the answers silently would stall the task. */
		if (elsewhere) {
			c->answer_code = RPC_INVALID_PARAMS;
			return rpc_errorf(
			    c->id_raw, RPC_INVALID_PARAMS,
			    "task '%.64s' runs on another server replica, "
			    "which alone holds its questions; send "
			    "tasks/update again (a load balancer may route "
			    "it there), or cancel the task",
			    id);
		}
	}
	return ack(c);
}

char *mcp_task_cancel(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	struct task_run *run;
	const char *id;
	char *answer;
	bool live;

	id = task_id_of(c, &answer);
	if (!id)
		return answer;
	mcp_lock(srv);
	run = find_run(srv, id, c->sess->tenant);
	live = run != NULL;
	if (run) {
		/* The run's cancel hook (stopping its container) runs on
		 * this thread once the lock is released. */
		mcp_call_cancel_locked(run->call);
		pthread_cond_broadcast(&run->cond);
	}
	mcp_unlock(srv);
	if (live) {
		log_info("task %.8s...: cancelled by the client", id);
		return ack(c);
	}
	/* Running on another replica: it stops it within a second or two
	 * (mcp_job_task_cancels there). */
	if (tasks_request_cancel(srv->tasks, c->sess->tenant, id) == 0) {
		log_info("task %.8s...: cancelled by the client; its replica "
		         "is asked to stop it",
		         id);
		return ack(c);
	}
	if (!recorded(c, id))
		return unknown_task(c, id);
	return ack(c);
}

enum cron_next mcp_job_task_cancels(void *arg, long long deadline_ms)
{
	struct mcp_server *srv = arg;
	char ids[TASKS_MAX_CANCELS][TASK_ID_LEN + 1];
	size_t n;

	(void)deadline_ms; /* a batch of at most TASKS_MAX_CANCELS */
	if (!srv->tasks)
		return CRON_DONE;
	n = tasks_take_cancels(srv->tasks, ids, TASKS_MAX_CANCELS);
	for (size_t i = 0; i < n; i++) {
		struct task_run *run;

		mcp_lock(srv);
		for (run = srv->tasks_live; run; run = run->next) {
			if (strcmp(run->id, ids[i]) == 0)
				break;
		}
		if (run) {
			mcp_call_cancel_locked(run->call);
			pthread_cond_broadcast(&run->cond);
		}
		mcp_unlock(srv);
		log_info("task %.8s...: %s", ids[i],
		         run ? "cancelled by the client through another "
		               "replica"
		             : "a cancel from another replica found it ended");
	}
	/* A full batch: more may be waiting; the loop comes back soon. */
	return n == TASKS_MAX_CANCELS ? CRON_MORE : CRON_DONE;
}
