/* SPDX-License-Identifier: MIT */
/*
 * backend_swarm: boxes as Swarm services; see backend_swarm.h. The
 * backend's own state is the manager's client, the queue of services to
 * remove (rm_*, guarded by lock, drained by one thread) and the outcome of
 * the last node check (guarded by lock, written by the check thread).
 */
#include "backend/swarm/backend_swarm.h"
#include "backend/swarm/swarm_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "backend/docker/backend_docker.h"
#include "backend/docker/docker.h"
#include "backend/docker/docker_stream.h"
#include "backend/swarm/swarm_spec.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/num.h"
#include "util/pct.h"
#include "util/stats.h"

/* ---- removal ------------------------------------------------------------ */

static void sw_rm_queue(struct sw_backend *be, struct sw_box *b)
{
	struct sw_rm *m = calloc(1, sizeof(*m));
	char err[256];

	if (!m) {
		if (swarm_service_delete(be, b->id, err, sizeof(err)) < 0)
			log_warnx("removing service %s: %s", b->name, err);
		return;
	}
	snprintf(m->id, sizeof(m->id), "%s", b->id);
	snprintf(m->name, sizeof(m->name), "%s", b->name);
	m->hard_deadline = b->hard_deadline;
	m->scaled = b->killed;
	pthread_mutex_lock(&be->lock);
	m->next = be->rm_head;
	be->rm_head = m;
	pthread_cond_broadcast(&be->cond);
	pthread_mutex_unlock(&be->lock);
}

/*
 * Removes a service where no later turn comes (another boot's leftovers,
 * or at shutdown): as in sw_rm_step, not while a task of it awaits Swarm's
 * task reaper, for which it waits up to SW_RM_REAP_STOP_MS, then removes
 * it anyway.
 */
static int sw_delete_after_reaper(struct sw_backend *be, const char *id,
                                  char *err, size_t errlen)
{
	long long until = mono_ms() + SW_RM_REAP_STOP_MS;
	struct sw_task t;

	while (swarm_task_get(be, id, &t, err, errlen) == 0 && t.reaping &&
	       mono_ms() < until)
		poll(NULL, 0, SW_RM_REAP_POLL_MS);
	return swarm_service_delete(be, id, err, errlen);
}

/*
 * One step of a removal; true when it is done. The service (and with it
 * the conversation's name) goes once its task is terminal, never before
 * the task stopped unless the node is past the run's hard deadline.
 *
 * Nor while Swarm's task reaper may be deleting one of its tasks: a scale
 * to 0 gives the task the desired state "remove", and the reaper deletes
 * it about 250 ms after it stopped. A service removed in that window can
 * crash the manager: its orchestrator looks the service's tasks up, then
 * updates each, and one the reaper deleted in between is a nil pointer
 * (moby/swarmkit#3216; dockerd 20.10's manager died of it in the swarm
 * lab). So a task that ended by itself is never scaled (the service goes
 * with the task as it is), and after a scale to 0 the service goes once
 * the reaper took the task, or after SW_RM_REAP_MS whatever.
 */
static bool sw_rm_step(struct sw_backend *be, struct sw_rm *m)
{
	struct sw_task t;
	char err[512], st[16] = "";
	long long now = mono_ms();
	bool ended;
	int rc;

	if (m->deleted) {
		cJSON *list = NULL;

		rc = swarm_tasks(be, m->id, &list, err, sizeof(err));
		if (rc == 0 && cJSON_GetArraySize(list) == 0) {
			cJSON_Delete(list);
			log_debug("service %s removed, no task left", m->name);
			return true;
		}
		cJSON_Delete(list);
		if (be->stop) {
			log_debug("service %s removed at shutdown", m->name);
			return true;
		}
		if (now > m->give_up_ms) {
			log_warnx("service %s is removed but its task is still "
			          "listed (its node is away?); Swarm removes "
			          "the container when the node is back",
			          m->name);
			return true;
		}
		m->next_ms = now + SW_RM_RETRY_MS;
		return false;
	}
	rc = swarm_task_get(be, m->id, &t, err, sizeof(err));
	if (rc < 0 && !be->stop) {
		/* Not knowing the task, neither scale nor remove. */
		log_info("removing service %s: its tasks could not be read, "
		         "retrying: %s",
		         m->name, err);
		m->next_ms = now + 5 * SW_RM_RETRY_MS;
		return false;
	}
	ended = rc == 0 && t.have && swarm_rank(t.state) == 2;
	if (rc == 0 && !ended && !m->scaled) {
		/* Running, or no task yet: none may start from now on. */
		int sc =
		    swarm_service_scale(be, m->id, 0, NULL, err, sizeof(err));

		if (sc == -ENOENT)
			return true;
		if (sc == 0) {
			m->scaled = true;
			m->next_ms = now + SW_RM_REAP_POLL_MS;
			return false;
		}
	}
	if (rc == 0 && t.have && !ended && t.node[0] &&
	    time(NULL) <= m->hard_deadline && !be->stop) {
		/* Still running (or its node is away): keep the lock. */
		if (swarm_node(be, t.node, st, sizeof(st), NULL, 0, err,
		               sizeof(err)) == 0 &&
		    strcmp(st, "ready") != 0)
			log_debug("service %s: its node is %s; removing it by "
			          "the run's hard deadline",
			          m->name, st);
		m->next_ms = now + SW_RM_RETRY_MS / 2;
		return false;
	}
	if (rc == 0 && t.reaping && time(NULL) <= m->hard_deadline &&
	    !be->stop) {
		if (!m->reap_by)
			m->reap_by = now + SW_RM_REAP_MS;
		if (now < m->reap_by) {
			m->next_ms = now + SW_RM_REAP_POLL_MS;
			return false;
		}
		log_info("service %s: Swarm did not delete its stopped task "
		         "within %d s; removing the service anyway",
		         m->name, SW_RM_REAP_MS / 1000);
	}
	/*
	 * At shutdown the remover takes no turns: the wait is here, unless the
	 * lookup above already saw no task awaiting the reaper.
	 */
	rc = be->stop && (rc < 0 || t.reaping)
	         ? sw_delete_after_reaper(be, m->id, err, sizeof(err))
	         : swarm_service_delete(be, m->id, err, sizeof(err));
	if (rc < 0 && rc != -ENOENT) {
		if (be->stop) {
			log_warnx("removing service %s: %s", m->name, err);
			return true;
		}
		log_info("removing service %s failed, retrying: %s", m->name,
		         err);
		m->next_ms = now + 5 * SW_RM_RETRY_MS;
		return false;
	}
	m->deleted = true;
	m->give_up_ms = now + SW_RM_VERIFY_MS;
	m->next_ms = now + SW_RM_RETRY_MS / 2;
	return be->stop;
}

/* Takes the first due removal off the list, or says when one is due. */
static struct sw_rm *sw_rm_due(struct sw_backend *be, long long *wake)
{
	struct sw_rm **pp, *m;
	long long now = mono_ms();

	*wake = now + 60000;
	for (pp = &be->rm_head; (m = *pp); pp = &m->next) {
		if (m->next_ms <= now || be->stop) {
			*pp = m->next;
			return m;
		}
		if (m->next_ms < *wake)
			*wake = m->next_ms;
	}
	return NULL;
}

static void *sw_rm_main(void *arg)
{
	struct sw_backend *be = arg;

	pthread_mutex_lock(&be->lock);
	for (;;) {
		long long wake;
		struct sw_rm *m = sw_rm_due(be, &wake);
		bool done;

		if (!m) {
			struct timespec ts;

			if (be->stop)
				break;
			mono_timespec(&ts, wake);
			pthread_cond_timedwait(&be->cond, &be->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&be->lock);
		done = sw_rm_step(be, m);
		pthread_mutex_lock(&be->lock);
		if (done) {
			free(m);
		} else {
			m->next = be->rm_head;
			be->rm_head = m;
		}
	}
	pthread_mutex_unlock(&be->lock);
	return NULL;
}

/* ---- boxes -------------------------------------------------------------- */

static int sw_box_create(struct backend *base, const struct box_spec *spec,
                         struct box **out, char *err, size_t errlen)
{
	struct sw_backend *be = sw_of(base);
	const struct config *cfg = be->cfg;
	char path[160];
	cJSON *img = NULL;
	struct sw_box *b;
	int rc;

	*out = NULL;
	if (spec->network) {
		snprintf(err, errlen,
		         "runs on the Swarm have no network (sandbox nodes "
		         "run with --bridge=none); run without network");
		return -EPERM;
	}
	if (spec->open_stdin && !spec->stdin_path) {
		/* One-off runs give stdin as a file; nothing else may ask. */
		log_debug("swarm: a box asked for a stdin stream");
	}
	/* The image must be known to the manager (runner discovery). */
	if (!spec->image || strlen(spec->image) > 100 ||
	    strpbrk(spec->image, "/?# ")) {
		snprintf(err, errlen, "invalid image id");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/images/%s/json", spec->image);
	rc =
	    docker_request(be->docker, "GET", path, NULL, 0, &img, err, errlen);
	cJSON_Delete(img);
	if (rc < 0)
		return rc;
	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	b->base.impl = &backend_swarm_impl;
	b->base.be = base;
	b->be = be;
	b->t_create = time(NULL);
	b->run_span = spec->deadline > b->t_create
	                  ? spec->deadline - b->t_create
	                  : (time_t)cfg->max_timeout_s + 60;
	b->label_deadline =
	    b->t_create + b->run_span + (time_t)cfg->swarm_queue_timeout_s;
	b->hard_deadline = b->label_deadline;
	if (swarm_spec_name(spec, b->name) < 0) {
		free(b);
		snprintf(err, errlen, "a box without a usable name");
		return -EINVAL;
	}
	b->sent = swarm_spec_body(cfg, b->name, cfg->instance_name, be->boot,
	                          b->label_deadline, spec, false);
	if (b->sent) {
		/* Created with no replica: nothing runs before the check. */
		cJSON *r = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(b->sent, "Mode"),
		    "Replicated");

		cJSON_DeleteItemFromObjectCaseSensitive(r, "Replicas");
		if (cJSON_AddNumberToObject(r, "Replicas", 0))
			b->body = cJSON_PrintUnformatted(b->sent);
	}
	if (!b->body) {
		cJSON_Delete(b->sent);
		free(b);
		snprintf(err, errlen, "a box spec a service cannot carry");
		return -EINVAL;
	}
	snprintf(b->base.id, sizeof(b->base.id), "%.12s", b->name + 8);
	*out = &b->base;
	return 0;
}

/*
 * Creates the service with no replica, checks what the manager kept, then
 * asks for the one replica. 1 when the name is taken (the conversation's
 * earlier run still holds it).
 */
static int sw_try_create(struct sw_box *b, char *err, size_t errlen)
{
	struct sw_backend *be = b->be;
	cJSON *j = NULL;
	const char *id;
	int rc;

	rc = docker_request(be->docker, "POST", "/services/create", b->body, 0,
	                    &j, err, errlen);
	if (rc == -EBUSY) {
		cJSON_Delete(j);
		return 1;
	}
	if (rc < 0)
		return rc;
	id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "ID"));
	if (!id || !swarm_id_ok(id)) {
		cJSON_Delete(j);
		snprintf(err, errlen, "the Swarm manager sent no service id");
		return -EPROTO;
	}
	snprintf(b->id, sizeof(b->id), "%s", id);
	cJSON_Delete(j);
	b->created = true;
	rc = swarm_service_scale(be, b->id, 1, b->sent, err, errlen);
	if (rc < 0) {
		char msg[256];

		log_warnx("service %s: %s", b->name, err);
		if (swarm_service_delete(be, b->id, msg, sizeof(msg)) < 0)
			log_warnx("removing service %s: %s", b->name, msg);
		b->created = false;
		b->id[0] = '\0';
		return rc;
	}
	return 0;
}

static int sw_box_start(struct box *base, char *err, size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	int rc = sw_try_create(b, err, errlen);

	b->queue_deadline =
	    mono_ms() + (long long)b->be->cfg->swarm_queue_timeout_s * 1000;
	return rc < 0 ? rc : 0;
}

int swarm_refresh(struct sw_box *b, char *err, size_t errlen)
{
	int rc = swarm_task_get(b->be, b->id, &b->task, err, errlen);

	if (rc == 0 && b->task.have && swarm_rank(b->task.state) >= 1 &&
	    !b->started) {
		b->started = true;
		/* The in-task watchdog fires within run_span of now. */
		b->hard_deadline = time(NULL) + b->run_span;
	}
	return rc;
}

static int sw_box_wait_running(struct box *base, int cancel_fd, char *err,
                               size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	int rc;

	for (;;) {
		struct pollfd p = {.fd = cancel_fd, .events = POLLIN};

		if (!b->created) {
			rc = sw_try_create(b, err, errlen);
			if (rc < 0)
				return rc;
		}
		if (b->created) {
			if (b->stream && !b->stream->a) {
				rc =
				    swarm_stream_follow(b->stream, err, errlen);
				if (rc < 0)
					return rc;
			}
			rc = swarm_refresh(b, err, errlen);
			if (rc < 0)
				return rc;
			if (b->task.have && swarm_rank(b->task.state) >= 1)
				return 0;
		}
		if (mono_ms() > b->queue_deadline) {
			snprintf(err, errlen,
			         "no sandbox node had room for this run within "
			         "%u s (SWARM_QUEUE_TIMEOUT_SECONDS)%s%s; try "
			         "again later",
			         b->be->cfg->swarm_queue_timeout_s,
			         b->created ? "; Swarm says: " : "",
			         b->created
			             ? (b->task.message[0] ? b->task.message
			                                   : "no task yet")
			             : "; an earlier run of this "
			               "conversation still holds it");
			return -ETIMEDOUT;
		}
		if (poll(&p, cancel_fd >= 0 ? 1 : 0, SW_POLL_MS) > 0)
			return -ECANCELED;
	}
}

bool swarm_node_gone(struct sw_box *b)
{
	char st[16], err[256];

	if (b->node_lost)
		return true;
	if (!b->task.node[0] || mono_ms() < b->next_node_check)
		return false;
	b->next_node_check = mono_ms() + SW_NODE_POLL_MS;
	if (swarm_node(b->be, b->task.node, st, sizeof(st), b->node_host,
	               sizeof(b->node_host), err, sizeof(err)) < 0)
		return false; /* the manager's trouble, not the node's */
	b->node_lost =
	    strcmp(st, "down") == 0 || strcmp(st, "disconnected") == 0;
	return b->node_lost;
}

int swarm_lost_msg(struct sw_box *b, char *err, size_t errlen)
{
	struct tm tm;
	char when[32];

	gmtime_r(&b->hard_deadline, &tm);
	strftime(when, sizeof(when), "%H:%M:%SZ", &tm);
	snprintf(err, errlen,
	         "the sandbox node running this code (%s, %.12s) stopped "
	         "answering and the Swarm marked it down; output up to then "
	         "is shown, whether the code finished is unknown. This "
	         "conversation's next run waits until %s, when the node's "
	         "own watchdog has ended this one",
	         b->node_host[0] ? b->node_host : "unknown host", b->task.node,
	         when);
	return -EHOSTDOWN;
}

static int sw_box_wait(struct box *base, unsigned timeout_ms, char *err,
                       size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	long long end = mono_ms() + timeout_ms;
	int rc;

	if (!b->created)
		return 0;
	for (;;) {
		rc = swarm_refresh(b, err, errlen);
		if (rc == -ENOENT || (rc == 0 && !b->task.have && b->killed))
			return 0;
		if (rc < 0)
			return rc;
		if (b->task.have && swarm_rank(b->task.state) == 2)
			return 0;
		if (swarm_node_gone(b))
			return swarm_lost_msg(b, err, errlen);
		if (mono_ms() >= end) {
			snprintf(err, errlen,
			         "the run's task is still %s after %u ms",
			         b->task.have ? b->task.state : "unscheduled",
			         timeout_ms);
			return -ETIMEDOUT;
		}
		usleep(SW_POLL_MS * 1000);
	}
}

static int sw_box_inspect(struct box *base, struct box_state *out, char *err,
                          size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	size_t mark = strlen(SWARM_CHECK_MARK);
	int rc;

	memset(out, 0, sizeof(*out));
	out->exit_code = -1;
	if (b->node_lost)
		return swarm_lost_msg(b, err, errlen);
	if (b->created && !(b->task.have && swarm_rank(b->task.state) == 2)) {
		rc = swarm_refresh(b, err, errlen);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	out->running = b->task.have && swarm_rank(b->task.state) < 2;
	snprintf(out->status, sizeof(out->status), "%s",
	         b->task.have ? b->task.state : "removed");
	snprintf(out->error, sizeof(out->error), "%s", b->task.err);
	if (b->task.has_exit)
		out->exit_code = b->task.exit_code;
	if (b->task.has_exit && b->task.exit_code == SWARM_CHECK_EXIT &&
	    b->ehead_len > mark &&
	    memcmp(b->ehead, SWARM_CHECK_MARK, mark) == 0) {
		size_t n = strcspn(b->ehead, "\n");

		snprintf(err, errlen,
		         "the sandbox node %.12s is not configured as one: "
		         "its engine does not give%.*s; the code did not run "
		         "(see docs/deployment.md, sandbox nodes)",
		         b->task.node, (int)(n - mark), b->ehead + mark);
		return -EPERM;
	}
	if (b->task.have && !b->killed &&
	    (strcmp(b->task.state, "rejected") == 0 ||
	     (swarm_rank(b->task.state) == 2 && !b->task.has_exit))) {
		snprintf(err, errlen,
		         "the Swarm could not run the task on node %.12s: %s "
		         "(is the runner image loaded on every sandbox node?)",
		         b->task.node,
		         b->task.err[0] ? b->task.err : "no reason");
		return -EIO;
	}
	return 0;
}

static int sw_box_signal(struct box *base, const char *sig, char *err,
                         size_t errlen)
{
	struct sw_box *b = (struct sw_box *)base;
	int rc;

	if (strcmp(sig, "KILL") != 0) {
		snprintf(err, errlen, "a Swarm task takes no signal but KILL");
		return -ENOTSUP;
	}
	if (!b->created || b->killed)
		return -ESRCH;
	/* Scaled to none, not removed: the name stays the lock. */
	rc = swarm_service_scale(b->be, b->id, 0, NULL, err, errlen);
	if (rc == 0)
		b->killed = true;
	return rc;
}

static void sw_box_release(struct box *base)
{
	struct sw_box *b = (struct sw_box *)base;

	if (b->created)
		sw_rm_queue(b->be, b);
	cJSON_Delete(b->sent);
	cJSON_free(b->body);
	free(b);
}

/* ---- the node check ------------------------------------------------------ */

/*
 * Runs the preamble alone on every eligible node (a global service) and
 * records which nodes give what a service cannot carry.
 */
static void sw_check_nodes(struct sw_backend *be, const char *image)
{
	static const char *const cmd[] = {"true"};
	struct box_spec spec = {.image = image, .cmd = cmd, .n_cmd = 1};
	char name[SWARM_NAME_MAX], err[512], bad[512] = "", id[SW_ID_MAX] = "";
	unsigned eligible = 0, ok = 0;
	cJSON *body, *j = NULL, *list = NULL, *t;
	char *txt = NULL;
	long long end = mono_ms() + SW_CHECK_WAIT_MS;
	int rc;

	spec.labels[spec.n_labels++] =
	    (struct box_label){"sandbox.kind", "nodecheck"};
	snprintf(name, sizeof(name), "mcpsd-check-%s", be->boot);
	body = swarm_spec_body(be->cfg, name, be->cfg->instance_name, be->boot,
	                       time(NULL) + SW_CHECK_WAIT_MS / 1000 + 60, &spec,
	                       true);
	txt = body ? cJSON_PrintUnformatted(body) : NULL;
	if (!txt)
		goto out;
	rc = docker_request(be->docker, "POST", "/services/create", txt, 0, &j,
	                    err, sizeof(err));
	if (rc < 0) {
		log_warnx("swarm node check: %s", err);
		goto out;
	}
	{
		const char *v = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(j, "ID"));

		snprintf(id, sizeof(id), "%s", v && swarm_id_ok(v) ? v : "");
	}
	while (mono_ms() < end && !be->stop) {
		bool all = true;

		cJSON_Delete(list);
		list = NULL;
		usleep(500 * 1000);
		if (swarm_tasks(be, id, &list, err, sizeof(err)) < 0)
			continue;
		cJSON_ArrayForEach (t, list) {
			struct sw_task tk;

			swarm_task_fill(&tk, t);
			all = all && swarm_rank(tk.state) == 2;
		}
		/* Global tasks appear within a second of the service. */
		if (all && mono_ms() > end - SW_CHECK_WAIT_MS + 3000)
			break;
	}
	cJSON_ArrayForEach (t, list) {
		struct sw_task tk;
		char host[64] = "", st[16];
		size_t n = strlen(bad);

		swarm_task_fill(&tk, t);
		eligible++;
		if (tk.has_exit && tk.exit_code == 0) {
			ok++;
			continue;
		}
		if (swarm_node(be, tk.node, st, sizeof(st), host, sizeof(host),
		               err, sizeof(err)) < 0)
			snprintf(host, sizeof(host), "%.12s", tk.node);
		snprintf(bad + n, sizeof(bad) - n, "%s%s (%s)", n ? ", " : "",
		         host,
		         tk.has_exit && tk.exit_code == SWARM_CHECK_EXIT
		             ? "engine lacks no-new-privileges, seccomp, "
		               "capability drop, swap off or --bridge=none"
		             : (tk.err[0] ? tk.err : tk.state));
	}
	pthread_mutex_lock(&be->lock);
	be->checked = true;
	be->checked_at = time(NULL);
	be->nodes_eligible = eligible;
	be->nodes_ok = ok;
	snprintf(be->nodes_bad, sizeof(be->nodes_bad), "%s", bad);
	pthread_mutex_unlock(&be->lock);
	if (eligible == 0)
		log_warnx("swarm: no node matches SWARM_CONSTRAINTS='%s'; runs "
		          "wait until one joins",
		          be->cfg->swarm_constraints);
	else if (bad[0])
		log_warnx("swarm: %u of %u sandbox nodes are not configured "
		          "as docs/deployment.md asks, and runs placed there "
		          "fail: %s",
		          eligible - ok, eligible, bad);
	else
		log_info("swarm: %u sandbox nodes checked", eligible);
out:
	if (id[0] && swarm_service_delete(be, id, err, sizeof(err)) < 0 &&
	    !be->stop)
		log_warnx("removing the node check service: %s", err);
	cJSON_Delete(list);
	cJSON_Delete(j);
	cJSON_Delete(body);
	cJSON_free(txt);
}

static void *sw_check_main(void *arg)
{
	struct sw_backend *be = arg;
	long long next = 0;

	pthread_mutex_lock(&be->lock);
	while (!be->stop) {
		char image[80];
		struct timespec ts;

		if (be->probe_image[0] && mono_ms() >= next) {
			snprintf(image, sizeof(image), "%s", be->probe_image);
			pthread_mutex_unlock(&be->lock);
			sw_check_nodes(be, image);
			pthread_mutex_lock(&be->lock);
			next = mono_ms() + SW_CHECK_EVERY_S * 1000LL;
			continue;
		}
		mono_timespec(&ts,
		              be->probe_image[0] ? next : mono_ms() + 60000);
		pthread_cond_timedwait(&be->cond, &be->lock, &ts);
	}
	pthread_mutex_unlock(&be->lock);
	return NULL;
}

/* ---- the engine --------------------------------------------------------- */

static int sw_images(struct backend *base, const char *label, cJSON **out,
                     char *err, size_t errlen)
{
	struct sw_backend *be = sw_of(base);
	const char *id;
	int rc;

	rc = docker_images_list(be->docker, label, out, err, errlen);
	if (rc < 0 || cJSON_GetArraySize(*out) == 0)
		return rc;
	id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(*out, 0), "Id"));
	pthread_mutex_lock(&be->lock);
	if (id && !be->probe_image[0] && strlen(id) < sizeof(be->probe_image)) {
		snprintf(be->probe_image, sizeof(be->probe_image), "%s", id);
		pthread_cond_broadcast(&be->cond);
	}
	pthread_mutex_unlock(&be->lock);
	return rc;
}

static int sw_list(struct sw_backend *be, const char *label, cJSON **out,
                   char *err, size_t errlen)
{
	char path[1024];
	int rc;

	*out = NULL;
	if (swarm_filter(path, sizeof(path), "/services?", "label", label) <
	    0) {
		snprintf(err, errlen, "invalid label filter");
		return -EINVAL;
	}
	rc = docker_request(be->docker, "GET", path, NULL, 0, out, err, errlen);
	if (rc == 0 && !cJSON_IsArray(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		snprintf(err, errlen, "the Swarm manager sent no service list");
		return -EPROTO;
	}
	return rc;
}

static int sw_reap(struct backend *base, char *err, size_t errlen)
{
	struct sw_backend *be = sw_of(base);
	cJSON *list = NULL, *s;
	time_t now = time(NULL);
	char msg[512];
	int rc, removed = 0;

	rc = sw_list(be, "sandbox.managed=true", &list, err, errlen);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "ID"));
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(s, "Spec");

		/* The labels are the service's: the same rule as containers. */
		if (!id || !backend_docker_reap_wanted(
		               spec, be->cfg->instance_name, be->boot, now,
		               be->cfg->reap_grace_s))
			continue;
		rc = sw_delete_after_reaper(be, id, msg, sizeof(msg));
		if (rc == 0 || rc == -ENOENT) {
			log_info("reaped leftover service %.25s", id);
			removed++;
		} else {
			log_warnx("reaping service %.25s: %s", id, msg);
		}
	}
	cJSON_Delete(list);
	return removed;
}

static void sw_sweep_own(struct backend *base)
{
	struct sw_backend *be = sw_of(base);
	char label[96], err[512];
	cJSON *list = NULL, *s;

	snprintf(label, sizeof(label), "sandbox.boot=%s", be->boot);
	if (sw_list(be, label, &list, err, sizeof(err)) < 0)
		return;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "ID"));

		if (id && sw_delete_after_reaper(be, id, err, sizeof(err)) < 0)
			log_warnx("removing service %.25s at shutdown: %s", id,
			          err);
	}
	cJSON_Delete(list);
}

static bool sw_health(struct backend *base, cJSON *health)
{
	struct sw_backend *be = sw_of(base);
	struct docker_health dh;
	cJSON *d;
	bool nodes_ok;

	docker_health(be->docker, &dh);
	d = cJSON_AddObjectToObject(health, "docker");
	if (d) {
		cJSON_AddBoolToObject(d, "reachable", dh.reachable);
		cJSON_AddStringToObject(d, "server_version", dh.server_version);
		cJSON_AddStringToObject(d, "api_version", dh.api_version);
		if (dh.last_error[0])
			cJSON_AddStringToObject(d, "last_error", dh.last_error);
		cJSON_AddNumberToObject(d, "last_ok", (double)dh.last_ok);
	}
	pthread_mutex_lock(&be->lock);
	nodes_ok = !be->checked || be->nodes_ok > 0;
	d = cJSON_AddObjectToObject(health, "swarm");
	if (d) {
		cJSON_AddBoolToObject(d, "checked", be->checked);
		cJSON_AddNumberToObject(d, "sandbox_nodes", be->nodes_eligible);
		cJSON_AddNumberToObject(d, "sandbox_nodes_ok", be->nodes_ok);
		if (be->nodes_bad[0])
			cJSON_AddStringToObject(d, "misconfigured",
			                        be->nodes_bad);
		cJSON_AddNumberToObject(d, "checked_at",
		                        (double)be->checked_at);
		cJSON_AddStringToObject(d, "constraints",
		                        be->cfg->swarm_constraints);
	}
	pthread_mutex_unlock(&be->lock);
	return dh.reachable && nodes_ok;
}

static int sw_ping(struct backend *base, char *err, size_t errlen)
{
	return docker_ping(sw_of(base)->docker, err, errlen);
}

/*
 * The sandbox nodes as the health report has it: how many are eligible and
 * passed the node check. Read at scrape time, so no second copy of the
 * state is kept.
 */
static void sw_read_nodes(void *arg, stats_emit_fn emit, void *ctx)
{
	struct backend *be = arg;
	cJSON *h = cJSON_CreateObject();
	const cJSON *sw, *n;
	const char *const eligible[] = {"eligible", NULL};
	const char *const ok[] = {"ok", NULL};

	if (!h)
		return;
	(void)sw_health(be, h);
	sw = cJSON_GetObjectItemCaseSensitive(h, "swarm");
	n = cJSON_GetObjectItemCaseSensitive(sw, "sandbox_nodes");
	if (cJSON_IsNumber(n))
		emit(ctx, eligible, n->valuedouble);
	n = cJSON_GetObjectItemCaseSensitive(sw, "sandbox_nodes_ok");
	if (cJSON_IsNumber(n))
		emit(ctx, ok, n->valuedouble);
	cJSON_Delete(h);
}

static void sw_stats(struct backend *base, struct stats *s)
{
	static const char *const state[] = {"state", NULL};

	stats_gauge_fn(s, "mcpsd_swarm_sandbox_nodes",
	               "Swarm sandbox nodes: eligible by "
	               "SWARM_CONSTRAINTS, and passing the node check",
	               state, sw_read_nodes, base);
}

static const char *sw_lacks(unsigned feature)
{
	if (feature & BACKEND_CAN_NETWORK)
		return "sandbox nodes run their engine with --bridge=none, so "
		       "tasks have no network";
	if (feature & BACKEND_CAN_PACKAGES)
		return "its sandbox nodes have no network";
	if (feature & BACKEND_CAN_WARM)
		return "a service has no lasting stream to its task";
	if (feature & BACKEND_CAN_HOST_MOUNTS)
		return "its sandbox nodes may be other hosts";
	if (feature & BACKEND_CAN_STDIN)
		return "a service has no stdin (it is a file of the run)";
	return NULL;
}

static void sw_destroy(struct backend *base)
{
	struct sw_backend *be = sw_of(base);

	pthread_mutex_lock(&be->lock);
	be->stop = true;
	pthread_cond_broadcast(&be->cond);
	pthread_mutex_unlock(&be->lock);
	if (be->check_started)
		pthread_join(be->check_thread, NULL);
	if (be->rm_started) {
		/* The remover removes what is queued before it stops. */
		pthread_join(be->rm_thread, NULL);
		sw_sweep_own(base);
	}
	docker_destroy(be->docker);
	pthread_cond_destroy(&be->cond);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

const struct backend_impl backend_swarm_impl = {
    .name = "swarm",
    .features = BACKEND_CAN_REPLICAS,
    .configure = swarm_spec_configure,
    .create = backend_swarm_create,
    .lacks = sw_lacks,
    .destroy = sw_destroy,
    .images = sw_images,
    .reap = sw_reap,
    .sweep_own = sw_sweep_own,
    .health = sw_health,
    .ping = sw_ping,
    .stats = sw_stats,
    .box_create = sw_box_create,
    .box_attach = swarm_box_attach,
    .box_start = sw_box_start,
    .box_wait_running = sw_box_wait_running,
    .box_wait = sw_box_wait,
    .box_inspect = sw_box_inspect,
    .box_signal = sw_box_signal,
    .box_release = sw_box_release,
};

int backend_swarm_create(const struct config *cfg, const char *boot,
                         struct backend **out, char *err, size_t errlen)
{
	struct sw_backend *be = calloc(1, sizeof(*be));
	int rc;

	*out = NULL;
	if (!be) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	be->base.impl = &backend_swarm_impl;
	be->cfg = cfg;
	snprintf(be->boot, sizeof(be->boot), "%s", boot);
	pthread_mutex_init(&be->lock, NULL);
	mono_cond_init(&be->cond);
	rc = docker_create(cfg->docker_host, cfg->engine_timeout_s, &be->docker,
	                   err, errlen);
	if (rc < 0)
		goto fail;
	rc = pthread_create(&be->rm_thread, NULL, sw_rm_main, be);
	if (rc == 0) {
		be->rm_started = true;
		rc = pthread_create(&be->check_thread, NULL, sw_check_main, be);
		be->check_started = rc == 0;
	}
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	*out = &be->base;
	return 0;
fail:
	sw_destroy(&be->base);
	return rc;
}
