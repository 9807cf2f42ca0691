/* SPDX-License-Identifier: MIT */
/*
 * docker_internal: what the files of the docker module share with one
 * another and with nothing else: the client struct and the helpers
 * docker_attach.c (hijacked attach streams) uses from docker.c (requests,
 * the handle pool, version negotiation, health). Thread-safety as
 * docker.h: d->lock guards the pool and the health record and is never
 * held during I/O; the functions below take it themselves when needed.
 */
#ifndef MCPSD_DOCKER_INTERNAL_H
#define MCPSD_DOCKER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "backend/docker/docker.h"

#define DOCKER_POOL_MAX 8
#define DOCKER_CONNECT_TIMEOUT_MS 5000

struct docker {
	char *host;
	char *sock_path;
	unsigned timeout_ms;
	pthread_mutex_t lock;
	struct docker_health health; /* guarded by lock */
	CURL *pool[DOCKER_POOL_MAX]; /* guarded by lock */
	size_t n_pool;
};

/* Records the outcome of a call that reached the engine. */
void docker_mark_ok(struct docker *d);

/* Records a failure to reach the engine; forgets the negotiated version. */
void docker_mark_down(struct docker *d, const char *msg);

/* What an errno from connect() means for a person running the daemon, or
 * NULL. */
const char *docker_connect_hint(long oserr);

/*
 * The negotiated API version ("1.41") into ver, negotiating first if none
 * yet. 0, or a negative errno with a message in err.
 */
__attribute__((warn_unused_result)) int docker_api_version(struct docker *d,
                                                           char *ver, size_t n,
                                                           char *err,
                                                           size_t errlen);

/* Container ids and names: [A-Za-z0-9_.-], 1-128 characters. */
bool docker_id_ok(const char *id);

/* -EINVAL with "invalid Docker <what>" in err. */
__attribute__((warn_unused_result)) int docker_bad_id(const char *what,
                                                      char *err, size_t errlen);

#endif
