/* SPDX-License-Identifier: MIT */
/*
 * tasks_backend: how the tasks module stores records, shared by tasks.c and
 * the backends and nothing else. A backend stores and finds; the rules
 * (ids, limits, retention, what a restart means) are tasks.c's. Every
 * operation is called with the tasks mutex held, never concurrently, and
 * returns 0 or a negative errno. Records passed in are borrowed.
 */
#ifndef MCPSD_TASKS_BACKEND_H
#define MCPSD_TASKS_BACKEND_H

#include <stdbool.h>

#include "tasks/task_record.h"

struct tasks_backend {
	const char *name;
	bool durable; /* records survive the process */
	/* Stores a new record (working) of tenant for tool. */
	int (*insert)(void *bd, const struct task_record *r, const char *tenant,
	              const char *tool);
	/*
	 * Ends record r->id, which must not have ended (-ENOENT): sets status,
	 * message, result, error and updated_ms, and a TTL that keeps it
	 * r->ttl_ms after updated_ms; records its size (the bytes of
	 * message, result and error). Then, when max_bytes is not 0, deletes
	 * the oldest other ended records of the same tenant while the
	 * tenant's ended records together are larger than max_bytes; *dropped
	 * is their number. One transaction.
	 */
	int (*finish)(void *bd, const struct task_record *r, size_t max_bytes,
	              unsigned *dropped);
	/* Copies record id of tenant into out (owned strings); -ENOENT. */
	int (*get)(void *bd, const char *tenant, const char *id,
	           struct task_record *out);
	/*
	 * Deletes tenant's oldest ended records while it has max or more;
	 * -EBUSY when none of the max has ended.
	 */
	int (*make_room)(void *bd, const char *tenant, unsigned max);
	/*
	 * Deletes at most max ended records whose created_ms + ttl_ms is
	 * before now_ms; *deleted is their number (fewer than max: no more).
	 */
	int (*purge)(void *bd, long long now_ms, unsigned max,
	             unsigned *deleted);
	/*
	 * Ends every record of owner r->owner still working or waiting for
	 * input as r says (status failed, message, error, updated_ms, ttl_ms
	 * as in finish).
	 */
	int (*fail_running)(void *bd, const struct task_record *r);
	/*
	 * Replicas (NULL in a backend that only one process uses; see
	 * tasks.h). request_cancel marks record id of tenant if it is still
	 * working or waiting for input (-ENOENT otherwise). take_cancels
	 * copies up to max ids of owner's marked running records into ids,
	 * *n their number, and clears those marks. heartbeat records owner as
	 * seen at now_ms, then ends as r says the running records of every
	 * other owner (not "") not seen since now_ms - lease_ms, *n their
	 * number.
	 */
	int (*request_cancel)(void *bd, const char *tenant, const char *id);
	int (*take_cancels)(void *bd, const char *owner,
	                    char (*ids)[TASK_ID_LEN + 1], size_t max,
	                    size_t *n);
	int (*heartbeat)(void *bd, const char *owner, long long now_ms,
	                 long long lease_ms, const struct task_record *r,
	                 long long *n);
	void (*destroy)(void *bd);
};

/* Wall clock in milliseconds since 1970. */
long long tasks_now_ms(void);

#endif
