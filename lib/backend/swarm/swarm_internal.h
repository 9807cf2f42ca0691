/* SPDX-License-Identifier: MIT */
/*
 * swarm_internal: what the Swarm backend's files share. backend_swarm.c
 * has the backend, boxes, removal and the node check; swarm_api.c the
 * manager's answers about services, tasks and nodes; swarm_logs.c a box's
 * stream (the service's logs). Locking as in backend_swarm.c.
 */
#ifndef MCPSD_SWARM_INTERNAL_H
#define MCPSD_SWARM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/docker/docker.h"
#include "backend/docker/docker_stream.h"
#include "backend/swarm/swarm_spec.h"

#define SW_CHUNK (64 * 1024)
#define SW_ID_MAX 64
#define SW_POLL_MS 200         /* task state while starting, running */
#define SW_NODE_POLL_MS 2000   /* the node of a running task */
#define SW_CHECK_EVERY_S 600   /* node check */
#define SW_CHECK_WAIT_MS 60000 /* a node check's tasks to end */
#define SW_RM_VERIFY_MS 120000 /* tasks to disappear after removal */
#define SW_RM_RETRY_MS 1000
#define SW_RM_REAP_POLL_MS 100  /* the task reaper, after a scale to 0 */
#define SW_RM_REAP_MS 15000     /* most waited for it; then remove anyway */
#define SW_RM_REAP_STOP_MS 3000 /* the same where no later turn comes */

struct sw_task {
	bool have;
	char id[SW_ID_MAX];
	char node[SW_ID_MAX];
	char state[16];
	char message[160];
	char err[256];
	bool has_exit;
	int exit_code;
	/*
	 * A task of the service (this one or another) has the desired state
	 * "remove": Swarm's task reaper deletes it once it has stopped, and
	 * the manager must not be asked to remove the service meanwhile
	 * (backend_swarm.c, removal).
	 */
	bool reaping;
};

struct sw_rm {
	struct sw_rm *next;
	char id[SW_ID_MAX];
	char name[SWARM_NAME_MAX];
	time_t hard_deadline; /* wall clock: remove by then whatever */
	bool scaled;
	bool deleted;
	long long next_ms;
	long long give_up_ms;
	long long reap_by; /* mono ms: the task reaper's time is up; 0 unset */
};

struct sw_backend {
	struct backend base;
	const struct config *cfg;
	struct docker *docker;
	char boot[17];

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct sw_rm *rm_head;
	pthread_t rm_thread, check_thread;
	bool rm_started, check_started;
	char probe_image[80]; /* a runner image id, for the node check */
	bool checked;
	unsigned nodes_eligible, nodes_ok;
	char nodes_bad[512];
	time_t checked_at;
};

struct sw_stream;

struct sw_box {
	struct box base;
	struct sw_backend *be;
	char name[SWARM_NAME_MAX];
	char id[SW_ID_MAX]; /* the service, once created */
	char *body;         /* the create body */
	cJSON *sent;
	bool created, started, killed, node_lost;
	time_t t_create;       /* wall clock */
	time_t run_span;       /* spec deadline - t_create */
	time_t label_deadline; /* on the service */
	time_t hard_deadline;  /* by then the in-task watchdog killed it */
	long long queue_deadline;
	long long next_node_check;
	struct sw_task task;
	char node_host[64];
	struct sw_stream *stream; /* borrowed, while open */
	char ehead[64];           /* the first bytes of stderr */
	size_t ehead_len;
};

struct sw_stream {
	struct box_stream base;
	struct sw_box *b;
	struct docker_attach *a; /* the follow connection, or NULL */
	int ep, tfd;
	struct docker_stream ds;
	bool final; /* feeding the read without follow */
	box_output_fn fn;
	void *arg;
	unsigned long long seen[2], skip[2];
	int error; /* sticky */
	bool ended;
	long long next_check;
	char *buf;
};

static inline struct sw_backend *sw_of(struct backend *be)
{
	return (struct sw_backend *)be;
}

/* ---- the manager's answers (swarm_api.c) ------------------------------- */

/* "<base>filters=<{"key":[value]}>" into path, percent-encoded. */
int swarm_filter(char *path, size_t len, const char *base, const char *key,
                 const char *value);
/* 0: not started yet, 1: starting or running, 2: terminal. */
int swarm_rank(const char *state);
/* A task from the manager's JSON, bounded. */
void swarm_task_fill(struct sw_task *t, const cJSON *j);
/* The tasks of a service (an array, caller owns); a service gone has none. */
int swarm_tasks(struct sw_backend *be, const char *svc, cJSON **out, char *err,
                size_t errlen);
/*
 * The service's one task (the newest), or t->have false; t->reaping says
 * whether any of its tasks has the desired state "remove".
 */
int swarm_task_get(struct sw_backend *be, const char *svc, struct sw_task *t,
                   char *err, size_t errlen);
/* A node's state ("ready", "down", ...) and host name. */
int swarm_node(struct sw_backend *be, const char *id, char *state, size_t slen,
               char *host, size_t hlen, char *err, size_t errlen);
/* Whether id looks like an id the manager gave. */
bool swarm_id_ok(const char *id);
int swarm_service_delete(struct sw_backend *be, const char *id, char *err,
                         size_t errlen);
/* Sets the replicas of a replicated service (must_match: its spec as the
 * engine has it). */
int swarm_service_scale(struct sw_backend *be, const char *id,
                        unsigned replicas, const cJSON *must_match, char *err,
                        size_t errlen);

/* ---- boxes (backend_swarm.c) ------------------------------------------- */

/* Reads b's task again. */
int swarm_refresh(struct sw_box *b, char *err, size_t errlen);
/* Whether the node of b's task was lost. */
bool swarm_node_gone(struct sw_box *b);
/* The message of a run whose node was lost; returns its errno. */
int swarm_lost_msg(struct sw_box *b, char *err, size_t errlen);

/* ---- a box's stream (swarm_logs.c) ------------------------------------- */

extern const struct box_stream_impl swarm_stream_impl;
/* Opens the follow connection of the service's logs. */
int swarm_stream_follow(struct sw_stream *s, char *err, size_t errlen);
/* backend_impl.box_attach. */
int swarm_box_attach(struct box *base, struct box_stream **out, char *err,
                     size_t errlen);

#endif
