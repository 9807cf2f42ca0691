/* SPDX-License-Identifier: MIT */
/*
 * request: see request.h. The status names, the cancel (an eventfd that
 * stays readable once triggered, so a run polling it sees it at once, and
 * two flags) and the filling and freeing of results. Thread-safety: a
 * cancel's flags are atomics; the rest works on the caller's memory.
 */
#include "run/request.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "run/capture.h"
#include "util/log.h"

struct runner_cancel {
	int fd;
	atomic_bool flag;
	atomic_bool quota; /* by the quota watch, not the caller */
	atomic_bool lease; /* by the lease's fence, not the caller */
};

const char *runner_status_name(enum runner_status s)
{
	switch (s) {
	case RUNNER_COMPLETED:
		return "completed";
	case RUNNER_FAILED:
		return "failed";
	case RUNNER_TIMED_OUT:
		return "timed_out";
	case RUNNER_OOM_KILLED:
		return "oom_killed";
	case RUNNER_OUTPUT_LIMIT:
		return "output_limit";
	case RUNNER_CANCELLED:
		return "cancelled";
	case RUNNER_BUSY:
		return "busy";
	case RUNNER_RATE_LIMITED:
		return "rate_limited";
	case RUNNER_ERROR:
		return "error";
	case RUNNER_QUOTA_EXCEEDED:
		return "quota_exceeded";
	}
	return "error";
}

/* ---- cancellation ------------------------------------------------------- */

int runner_cancel_create(struct runner_cancel **out)
{
	struct runner_cancel *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->fd < 0) {
		int e = errno;

		free(c);
		return -e;
	}
	atomic_init(&c->flag, false);
	atomic_init(&c->quota, false);
	atomic_init(&c->lease, false);
	*out = c;
	return 0;
}

void runner_cancel_destroy(struct runner_cancel *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c);
}

void runner_cancel_trigger(void *arg)
{
	struct runner_cancel *c = arg;
	uint64_t one = 1;

	if (!c || atomic_exchange(&c->flag, true))
		return;
	/* Leaves the eventfd readable for good: pollers see it at once. */
	if (write(c->fd, &one, sizeof(one)) < 0)
		log_debug("cancel: eventfd write failed");
}

void runner_cancel_quota(struct runner_cancel *c)
{
	if (c)
		atomic_store(&c->quota, true);
	runner_cancel_trigger(c);
}

bool runner_cancel_for_quota(const struct runner_cancel *c)
{
	return c && atomic_load(&c->quota);
}

void runner_cancel_lease(void *cancel)
{
	struct runner_cancel *c = cancel;

	if (c)
		atomic_store(&c->lease, true);
	runner_cancel_trigger(c);
}

bool runner_cancel_for_lease(const struct runner_cancel *c)
{
	return c && atomic_load(&c->lease);
}

bool runner_cancel_requested(const struct runner_cancel *c)
{
	return c && atomic_load(&c->flag);
}

int runner_cancel_fd(const struct runner_cancel *c)
{
	return c ? c->fd : -1;
}

static int runner_output_fill(const struct capture *c, struct runner_output *o)
{
	if (!c->head)
		return 0; /* never initialized: nothing to say */
	o->total = c->total;
	o->saved = c->saved;
	o->text = capture_text(c, &o->truncated);
	return o->text ? 0 : -ENOMEM;
}

void runner_output_collect(struct capture *out, struct capture *err,
                           struct runner_result *res)
{
	if (runner_output_fill(out, &res->out) < 0 ||
	    runner_output_fill(err, &res->err) < 0) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message), "out of memory");
	}
	capture_finish(out);
	capture_finish(err);
}

void runner_result_finish(struct runner_result *res)
{
	if (!res)
		return;
	free(res->out.text);
	free(res->err.text);
	cJSON_free(res->value_json);
	cJSON_free(res->packages_json);
	cJSON_free(res->state_json);
	free(res->egress);
	res->egress = NULL;
	res->out.text = res->err.text = NULL;
	res->value_json = NULL;
	res->packages_json = NULL;
	res->state_json = NULL;
}
