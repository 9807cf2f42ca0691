/* SPDX-License-Identifier: MIT */
/*
 * test_request: what every part of the run layer shares (run/request.h):
 * the status names, the cancel (flags, the descriptor that becomes
 * readable, the quota cause, NULL safety) and the filling and freeing of
 * results from captures. Runs that use them: test_runner_docker.c.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "run/capture.h"
#include "run/request.h"
#include "tap.h"

/* Whether fd is readable now, without waiting. */
static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_status_names(void)
{
	static const struct {
		enum runner_status s;
		const char *name;
	} cases[] = {
	    {RUNNER_COMPLETED, "completed"},
	    {RUNNER_FAILED, "failed"},
	    {RUNNER_TIMED_OUT, "timed_out"},
	    {RUNNER_OOM_KILLED, "oom_killed"},
	    {RUNNER_OUTPUT_LIMIT, "output_limit"},
	    {RUNNER_CANCELLED, "cancelled"},
	    {RUNNER_BUSY, "busy"},
	    {RUNNER_RATE_LIMITED, "rate_limited"},
	    {RUNNER_ERROR, "error"},
	    {RUNNER_QUOTA_EXCEEDED, "quota_exceeded"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		is_str(runner_status_name(cases[i].s), cases[i].name,
		       "status name");
	is_str(runner_status_name((enum runner_status)99), "error",
	       "an unknown status is named error");
}

static void test_cancel(void)
{
	struct runner_cancel *c = NULL;
	int fd;

	is_int(runner_cancel_create(&c), 0, "cancel created");
	if (!c)
		return;
	fd = runner_cancel_fd(c);
	ok(fd >= 0, "a cancel has a descriptor");
	ok(!runner_cancel_requested(c), "not requested at first");
	ok(!readable(fd), "its descriptor is not readable at first");
	runner_cancel_trigger(c);
	ok(runner_cancel_requested(c), "requested after trigger");
	ok(readable(fd), "its descriptor is readable after trigger");
	ok(!runner_cancel_for_quota(c), "a caller's cancel is not the quota");
	runner_cancel_trigger(c);
	ok(readable(fd), "a second trigger leaves it readable");
	runner_cancel_destroy(c);

	is_int(runner_cancel_create(&c), 0, "second cancel created");
	if (!c)
		return;
	runner_cancel_quota(c);
	ok(runner_cancel_requested(c), "the quota watch cancels");
	ok(runner_cancel_for_quota(c), "and says it was the quota");
	ok(readable(runner_cancel_fd(c)), "its descriptor is readable");
	runner_cancel_destroy(c);
}

static void test_cancel_null(void)
{
	is_int(runner_cancel_fd(NULL), -1, "no cancel: descriptor -1");
	ok(!runner_cancel_requested(NULL), "no cancel: never requested");
	ok(!runner_cancel_for_quota(NULL), "no cancel: never the quota");
	runner_cancel_trigger(NULL);
	runner_cancel_quota(NULL);
	runner_cancel_destroy(NULL);
	ok(!runner_cancel_requested(NULL), "NULL triggers do nothing");
}

static void test_collect(void)
{
	struct capture out, err;
	struct runner_result res;

	memset(&res, 0, sizeof(res));
	memset(&out, 0, sizeof(out));
	memset(&err, 0, sizeof(err));
	is_int(capture_init(&out, 8, -1, 0), 0, "stdout capture");
	capture_add(&out, "0123456789abcdef", 16);
	runner_output_collect(&out, &err, &res);
	is_int(res.status, RUNNER_COMPLETED, "collecting keeps the status");
	is_int((long long)res.out.total, 16, "stdout total");
	ok(res.out.text && res.out.truncated, "stdout past the budget: cut");
	ok(res.out.text && strstr(res.out.text, "omitted") != NULL,
	   "the cut says how much was omitted");
	ok(res.err.text == NULL && res.err.total == 0,
	   "a capture never initialized leaves its output empty");
	ok(out.head == NULL, "collecting finishes the captures");

	res.value_json = malloc(4);
	res.packages_json = malloc(4);
	runner_result_finish(&res);
	ok(!res.out.text && !res.err.text && !res.value_json &&
	       !res.packages_json,
	   "finish frees the texts and clears them");
	/* A second finish must not free again (the sanitizer build sees it). */
	runner_result_finish(&res);
	runner_result_finish(NULL);
	ok(!res.value_json && !res.packages_json,
	   "finish on a finished result leaves it empty");
}

int main(void)
{
	test_status_names();
	test_cancel();
	test_cancel_null();
	test_collect();
	return tap_done();
}
