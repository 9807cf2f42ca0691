/* SPDX-License-Identifier: MIT */
/*
 * task_record: see task_record.h. Pure functions on caller memory.
 */
#include "tasks/task_record.h"

#include <stdlib.h>
#include <string.h>

void task_record_finish(struct task_record *r)
{
	if (!r)
		return;
	free(r->message);
	free(r->result);
	free(r->error);
	memset(r, 0, sizeof(*r));
}

const char *task_status_name(enum task_status s)
{
	static const char *const names[] = {"working", "input_required",
	                                    "completed", "failed", "cancelled"};

	return (unsigned)s < 5 ? names[s] : "failed";
}

bool task_status_final(enum task_status s)
{
	return s == TASK_COMPLETED || s == TASK_FAILED || s == TASK_CANCELLED;
}

long long task_record_bytes(const struct task_record *r)
{
	return (long long)((r->message ? strlen(r->message) : 0) +
	                   (r->result ? strlen(r->result) : 0) +
	                   (r->error ? strlen(r->error) : 0));
}
