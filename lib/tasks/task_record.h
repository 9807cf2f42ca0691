/* SPDX-License-Identifier: MIT */
/*
 * task_record: one task as recorded (its id, status, times, owner and, once
 * it ended, its result or error), what the tasks module (tasks.c) and its
 * backends (tasks_db.c, the memory one in tasks.c) share. It calls neither:
 * tasks.c chooses a backend and calls it, and both use the record, so
 * calls go one way (tasks -> tasks_db -> task_record).
 *
 * Threads: a record belongs to its caller; the functions are pure.
 */
#ifndef MCPSD_TASK_RECORD_H
#define MCPSD_TASK_RECORD_H

#include <stdbool.h>

#include "config/config.h"

/* 32 hex digits: 128 random bits, an unguessable handle. */
#define TASK_ID_LEN 32

enum task_status {
	TASK_WORKING = 0,
	TASK_INPUT_REQUIRED,
	TASK_COMPLETED,
	TASK_FAILED,
	TASK_CANCELLED,
};

/* A task as recorded. Strings are owned; free with task_record_finish. */
struct task_record {
	char id[TASK_ID_LEN + 1];
	enum task_status status;
	long long created_ms; /* wall clock, milliseconds since 1970 */
	long long updated_ms;
	long long ttl_ms; /* from created_ms until it may be deleted */
	unsigned poll_ms; /* suggested polling interval */
	char *message;    /* statusMessage, or NULL */
	char *result;     /* completed: the result object as JSON */
	char *error;      /* failed: the JSON-RPC error object */
	/* The replica running it (MCP_REPLICA_NAME), "" for the only daemon. */
	char owner[MCP_REPLICA_NAME_MAX + 1];
};

/* Frees a record's strings and clears it. NULL-safe. */
void task_record_finish(struct task_record *r);

/* "working", "input_required", "completed", "failed", "cancelled". */
const char *task_status_name(enum task_status s);

/* Whether s is completed, failed or cancelled. */
bool task_status_final(enum task_status s);

/* The bytes a record keeps: its message, result and error. */
long long task_record_bytes(const struct task_record *r);

#endif
