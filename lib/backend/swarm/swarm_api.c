/* SPDX-License-Identifier: MIT */
/*
 * swarm_api: the Swarm manager's answers about services, tasks and nodes,
 * read through the Engine API client and bounded; see swarm_internal.h.
 */
#include "backend/swarm/swarm_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"
#include "util/num.h"
#include "util/pct.h"

/* ---- the manager's answers ---------------------------------------------- */

/* "<base>filters=<{"key":[value]}>" into path. */
int swarm_filter(char *path, size_t len, const char *base, const char *key,
                 const char *value)
{
	char json[256], enc[768];
	int n;

	n = snprintf(json, sizeof(json), "{\"%s\":[\"%s\"]}", key, value);
	if (n < 0 || (size_t)n >= sizeof(json) || strpbrk(value, "\"\\") ||
	    pct_encode_buf(json, false, enc, sizeof(enc)) < 0)
		return -EINVAL;
	n = snprintf(path, len, "%sfilters=%s", base, enc);
	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

static void swarm_copy(char *dst, size_t len, const cJSON *o, const char *path)
{
	const cJSON *x = o;
	char key[32];

	while (x && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key)) {
			x = NULL;
			break;
		}
		memcpy(key, path, n);
		key[n] = '\0';
		x = cJSON_GetObjectItemCaseSensitive(x, key);
		path += n + (path[n] == '.');
	}
	snprintf(dst, len, "%s", cJSON_IsString(x) ? x->valuestring : "");
}

/* 0: not started yet, 1: starting or running, 2: terminal. */
int swarm_rank(const char *state)
{
	static const char *const run[] = {"starting", "running"};
	static const char *const end[] = {"complete", "shutdown", "failed",
	                                  "rejected", "remove",   "orphaned"};

	for (size_t i = 0; i < sizeof(run) / sizeof(run[0]); i++)
		if (strcmp(state, run[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof(end) / sizeof(end[0]); i++)
		if (strcmp(state, end[i]) == 0)
			return 2;
	return 0;
}

void swarm_task_fill(struct sw_task *t, const cJSON *j)
{
	const cJSON *cs, *ec;

	memset(t, 0, sizeof(*t));
	t->have = true;
	swarm_copy(t->id, sizeof(t->id), j, "ID");
	swarm_copy(t->node, sizeof(t->node), j, "NodeID");
	swarm_copy(t->state, sizeof(t->state), j, "Status.State");
	swarm_copy(t->message, sizeof(t->message), j, "Status.Message");
	swarm_copy(t->err, sizeof(t->err), j, "Status.Err");
	cs = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "Status"), "ContainerStatus");
	ec = cJSON_GetObjectItemCaseSensitive(cs, "ExitCode");
	if (cJSON_IsNumber(ec) && swarm_rank(t->state) == 2 &&
	    cJSON_GetObjectItemCaseSensitive(cs, "ContainerID")) {
		t->has_exit = true;
		t->exit_code = (int)ec->valuedouble;
	}
}

/*
 * The tasks of a service (an array, caller owns). -ENOENT never: a
 * service that is gone has no tasks.
 */
int swarm_tasks(struct sw_backend *be, const char *svc, cJSON **out, char *err,
                size_t errlen)
{
	char path[1024];
	int rc;

	*out = NULL;
	if (swarm_filter(path, sizeof(path), "/tasks?", "service", svc) < 0) {
		snprintf(err, errlen, "invalid service id");
		return -EINVAL;
	}
	rc = docker_request(be->docker, "GET", path, NULL, 0, out, err, errlen);
	if (rc == 0 && !cJSON_IsArray(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		snprintf(err, errlen, "the Swarm manager sent no task list");
		return -EPROTO;
	}
	return rc;
}

/* The service's one task (the newest), or t->have false. */
int swarm_task_get(struct sw_backend *be, const char *svc, struct sw_task *t,
                   char *err, size_t errlen)
{
	cJSON *list = NULL, *j, *best = NULL;
	double best_v = -1;
	bool reaping = false;
	int rc;

	memset(t, 0, sizeof(*t));
	rc = swarm_tasks(be, svc, &list, err, errlen);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach (j, list) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(j, "Version"), "Index");
		double vi = cJSON_IsNumber(v) ? v->valuedouble : 0;
		const char *want = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(j, "DesiredState"));

		if (want && strcmp(want, "remove") == 0)
			reaping = true;
		if (!best || vi > best_v) {
			best = j;
			best_v = vi;
		}
	}
	if (best)
		swarm_task_fill(t, best);
	t->reaping = reaping;
	cJSON_Delete(list);
	return 0;
}

/* A node's state ("ready", "down", ...) and host name. */
int swarm_node(struct sw_backend *be, const char *id, char *state, size_t slen,
               char *host, size_t hlen, char *err, size_t errlen)
{
	char path[128];
	cJSON *j = NULL;
	int rc;

	state[0] = '\0';
	if (host)
		host[0] = '\0';
	if (!id[0] || strlen(id) > 64 ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(id)) {
		snprintf(err, errlen, "invalid node id");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/nodes/%s", id);
	rc = docker_request(be->docker, "GET", path, NULL, 0, &j, err, errlen);
	if (rc == 0) {
		swarm_copy(state, slen, j, "Status.State");
		if (host)
			swarm_copy(host, hlen, j, "Description.Hostname");
	}
	cJSON_Delete(j);
	return rc;
}

bool swarm_id_ok(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n < SW_ID_MAX &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789") == n;
}

int swarm_service_delete(struct sw_backend *be, const char *id, char *err,
                         size_t errlen)
{
	char path[128];

	if (!swarm_id_ok(id)) {
		snprintf(err, errlen, "invalid service id");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/services/%s", id);
	return docker_request(be->docker, "DELETE", path, NULL, 0, NULL, err,
	                      errlen);
}

/* GET /services/{id}: the Spec and Version.Index. *spec is owned. */
static int swarm_service_get(struct sw_backend *be, const char *id, cJSON **svc,
                             cJSON **spec, double *version, char *err,
                             size_t errlen)
{
	char path[128];
	const cJSON *v;
	int rc;

	*svc = NULL;
	*spec = NULL;
	if (!swarm_id_ok(id)) {
		snprintf(err, errlen, "invalid service id");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/services/%s", id);
	rc = docker_request(be->docker, "GET", path, NULL, 0, svc, err, errlen);
	if (rc < 0)
		return rc;
	*spec = cJSON_GetObjectItemCaseSensitive(*svc, "Spec");
	v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(*svc, "Version"), "Index");
	if (!cJSON_IsObject(*spec) || !cJSON_IsNumber(v)) {
		cJSON_Delete(*svc);
		*svc = NULL;
		*spec = NULL;
		snprintf(err, errlen, "the Swarm manager sent no service spec");
		return -EPROTO;
	}
	*version = v->valuedouble;
	return 0;
}

/* Sets the replicas of a replicated service (the spec as the engine has it). */
int swarm_service_scale(struct sw_backend *be, const char *id,
                        unsigned replicas, const cJSON *must_match, char *err,
                        size_t errlen)
{
	cJSON *svc = NULL, *spec, *r;
	char path[160], *txt = NULL;
	double version = 0;
	int rc;

	rc = swarm_service_get(be, id, &svc, &spec, &version, err, errlen);
	if (rc < 0)
		return rc;
	if (must_match) {
		rc = swarm_spec_verify(must_match, spec, err, errlen);
		if (rc < 0)
			goto out;
	}
	r = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(spec, "Mode"), "Replicated");
	if (!cJSON_IsObject(r)) {
		snprintf(err, errlen, "the run's service is not replicated");
		rc = -EPROTO;
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(r, "Replicas");
	if (!cJSON_AddNumberToObject(r, "Replicas", replicas) ||
	    !(txt = cJSON_PrintUnformatted(spec))) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	snprintf(path, sizeof(path), "/services/%s/update?version=%.0f", id,
	         version);
	rc =
	    docker_request(be->docker, "POST", path, txt, 0, NULL, err, errlen);
out:
	cJSON_free(txt);
	cJSON_Delete(svc);
	return rc;
}
