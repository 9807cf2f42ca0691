/* SPDX-License-Identifier: MIT */
/*
 * test_oneoff: one-off runs (run/oneoff.c) end to end against the fake
 * backend of fake_backend.h instead of Docker: the code directory mounted
 * read-only at /sandbox, the order create, attach, start, stream, inspect,
 * release, and how each ending is classified (completed, failed, timed
 * out, output limit, OOM, cancelled, image gone, engine refusal), with the
 * stream always closed before a kill (moby#41827). Run one case with
 * `test_oneoff CASE` (`--list` names them).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "fake_backend.h"
#include "run/oneoff.h"
#include "runner.h"
#include "tap.h"
#include "util/mono.h"

static struct config cfg;
static struct fake_backend fb;
static struct oneoff_context ctx;
static struct catalog_image img;
static char root[] = "/tmp/mcpsd-test-oneoff-XXXXXX";
static char s_python[] = "python",
            s_image[] = "mcp-sandboxd/runner-python:test",
            s_id[] = "sha256:0123", s_main[] = "main.py", s_empty[] = "",
            s_python3[] = "python3", s_path[] = "/sandbox/main.py";
static char *command[] = {s_python3, s_path};

static int setup(void)
{
	static const char *unset[] = {"MCP_API_TOKEN", "MCP_API_TOKENS",
	                              "FILE_SECRET", "STORE_URL", NULL};
	char err[1024] = "";

	for (size_t i = 0; unset[i]; i++)
		unsetenv(unset[i]);
	if (!mkdtemp(root))
		return -errno;
	setenv("MCP_AUTH", "none", 1);
	setenv("SANDBOX_ROOT", root, 1);
	setenv("MCP_LOG_LEVEL", "error", 1);
	setenv("SANDBOX_OUTPUT_MAX_BYTES", "1k", 1);
	setenv("SANDBOX_OUTPUT_INLINE_BYTES", "512", 1);
	setenv("DOCKER_TIMEOUT_SECONDS", "2", 1);
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		printf("# config: %s\n", err);
		return -EINVAL;
	}
	ctx.cfg = &cfg;
	ctx.be = &fb.base;
	snprintf(ctx.runs_dir, sizeof(ctx.runs_dir), "%s", root);
	snprintf(ctx.runs_host_dir, sizeof(ctx.runs_host_dir), "%s", root);
	img.language = s_python;
	img.image = s_image;
	img.image_id = s_id;
	img.filename = s_main;
	img.command = command;
	img.n_command = 2;
	img.version = img.description = s_empty;
	return 0;
}

/* Runs code with the script for its box; the caller finishes res. */
static int run(const struct fake_script *sc, struct runner_request *req,
               struct runner_result *res)
{
	fake_backend_init(&fb, BACKEND_CAN_STDIN);
	fb.code_name = "main.py";
	fake_backend_next(&fb, sc);
	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->timeout_s = req->timeout_s ? req->timeout_s : 1;
	req->language = "python";
	if (!req->code)
		req->code = "print('hi')\n";
	req->code_len = strlen(req->code);
	req->stdout_fd = req->stderr_fd = -1;
	return oneoff_run(&ctx, req, &img, res);
}

/* Whether the runs directory is empty again (the code directory went). */
static bool runs_empty(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "[ -z \"$(ls -A %s)\" ]", root);
	return system(cmd) == 0;
}

static void test_completed(void)
{
	struct fake_script sc = {.out = "hello\n", .err = "warn\n"};
	struct runner_request req = {.code = "print('hello')\n"};
	struct runner_result res;

	is_int(run(&sc, &req, &res), 0, "completed: returns 0");
	is_str(runner_status_name(res.status), "completed",
	       "completed: status");
	is_int(res.exit_code, 0, "completed: exit code");
	is_str(res.out.text, "hello\n", "completed: stdout");
	is_str(res.err.text, "warn\n", "completed: stderr");
	is_str(fb.code, "print('hello')\n",
	       "completed: the code was under /sandbox when the box was made");
	ok(fb.sandbox_ro, "completed: /sandbox is read-only");
	is_str(fb.image, "sha256:0123", "completed: made from the image id");
	ok(strstr(fb.log, "create attach start") == fb.log,
	   "completed: create, attach, start in that order (%s)", fb.log);
	ok(fake_backend_before(&fb, "stream_close", "inspect") &&
	       fake_backend_before(&fb, "inspect", "release"),
	   "completed: stream closed, inspected, released (%s)", fb.log);
	ok(strstr(fb.log, "signal") == NULL, "completed: nothing killed");
	is_int(fb.boxes, 0, "completed: no box left");
	ok(runs_empty(), "completed: the code directory is removed");
	is_int(res.memory_peak_bytes, 12345678, "completed: peak memory");
	is_int(res.cpu_ms, 42, "completed: CPU time");
	is_str(res.container, "fake0", "completed: the box's id");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_failed(void)
{
	struct fake_script sc = {.err = "Traceback\n", .exit_code = 3};
	struct runner_request req = {0};
	struct runner_result res;

	is_int(run(&sc, &req, &res), 0, "failed: returns 0");
	is_str(runner_status_name(res.status), "failed", "failed: status");
	is_int(res.exit_code, 3, "failed: the program's exit code");
	is_str(res.err.text, "Traceback\n", "failed: stderr");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_oom(void)
{
	struct fake_script sc = {.exit_code = 137, .oom = true};
	struct runner_request req = {0};
	struct runner_result res;

	is_int(run(&sc, &req, &res), 0, "oom: returns 0");
	is_str(runner_status_name(res.status), "oom_killed", "oom: status");
	ok(res.oom_killed, "oom: flagged");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_timeout(void)
{
	struct fake_script sc = {.out = "started\n", .hang = true};
	struct runner_request req = {.timeout_s = 1};
	struct runner_result res;
	long long t0 = mono_ms(), took;

	is_int(run(&sc, &req, &res), 0, "timeout: returns 0");
	took = mono_ms() - t0;
	is_str(runner_status_name(res.status), "timed_out", "timeout: status");
	ok(res.timed_out, "timeout: flagged");
	ok(took >= 950 && took < 5000, "timeout: after about 1 s (%lld ms)",
	   took);
	is_str(res.out.text, "started\n", "timeout: output so far kept");
	ok(fake_backend_before(&fb, "stream_close", "signal:KILL"),
	   "timeout: stream closed before the kill (%s)", fb.log);
	is_int(res.exit_code, -1, "timeout: no exit code of its own");
	is_int(fb.boxes, 0, "timeout: box released");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_output_limit(void)
{
	static char big[4000];
	struct fake_script sc = {
	    .out = big, .out_len = sizeof(big), .hang = true};
	struct runner_request req = {.timeout_s = 10};
	struct runner_result res;
	long long t0 = mono_ms();

	memset(big, 'x', sizeof(big));
	is_int(run(&sc, &req, &res), 0, "limit: returns 0");
	is_str(runner_status_name(res.status), "output_limit", "limit: status");
	ok(mono_ms() - t0 < 5000, "limit: stopped at once, not at the time "
	                          "limit");
	is_int(res.out.total, 1024, "limit: exactly the cap was taken");
	ok(fake_backend_before(&fb, "stream_close", "signal:KILL"),
	   "limit: stream closed before the kill (%s)", fb.log);
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void *cancel_later(void *c)
{
	poll(NULL, 0, 200);
	runner_cancel_trigger(c);
	return NULL;
}

static void test_cancel(void)
{
	struct fake_script sc = {.hang = true};
	struct runner_request req = {.timeout_s = 20};
	struct runner_result res;
	struct runner_cancel *c = NULL;
	long long t0 = mono_ms();
	pthread_t t;

	if (runner_cancel_create(&c) < 0) {
		ok(0, "cancel: a cancel flag");
		return;
	}
	req.cancel = c;
	pthread_create(&t, NULL, cancel_later, c);
	is_int(run(&sc, &req, &res), 0, "cancel: returns 0");
	pthread_join(t, NULL);
	is_str(runner_status_name(res.status), "cancelled", "cancel: status");
	ok(mono_ms() - t0 < 5000, "cancel: well before the time limit");
	ok(fake_backend_before(&fb, "stream_close", "signal:KILL"),
	   "cancel: stream closed before the kill (%s)", fb.log);
	runner_result_finish(&res);
	runner_cancel_destroy(c);
	backend_destroy(&fb.base);
}

static void test_image_gone(void)
{
	struct fake_script sc = {.create_rc = -ENOENT,
	                         .err_msg = "No such image"};
	struct runner_request req = {0};
	struct runner_result res;

	is_int(run(&sc, &req, &res), -ENOENT,
	       "image gone: -ENOENT so the caller retries");
	is_str(runner_status_name(res.status), "error", "image gone: status");
	ok(strstr(res.message, "is gone from the engine") &&
	       strstr(res.message, "No such image") &&
	       strstr(res.message, "try again"),
	   "image gone: the message says what and what to do (%s)",
	   res.message);
	ok(runs_empty(), "image gone: the code directory is removed");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_engine_down(void)
{
	struct fake_script sc = {.create_rc = -ECONNREFUSED,
	                         .err_msg = "the engine is not answering"};
	struct runner_request req = {0};
	struct runner_result res;

	is_int(run(&sc, &req, &res), 0, "engine down: returns 0");
	is_str(runner_status_name(res.status), "error", "engine down: status");
	is_str(res.message, "the engine is not answering",
	       "engine down: the engine's message");
	is_str(res.container, "", "engine down: no box");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

static void test_stdin(void)
{
	struct fake_script sc = {.out = "ok\n"};
	struct runner_request req = {.stdin_data = "line one\n",
	                             .stdin_len = 9};
	struct runner_result res;

	is_int(run(&sc, &req, &res), 0, "stdin: returns 0");
	is_str(fb.stdin_got, "line one\n", "stdin: sent through the stream");
	ok(fb.stdin_closed, "stdin: then closed");
	is_str(fb.stdin_path, "", "stdin: no stdin file");
	runner_result_finish(&res);
	backend_destroy(&fb.base);

	/* A backend without a stdin stream gets it as a file. */
	fake_backend_init(&fb, 0);
	fb.code_name = ".stdin";
	fake_backend_next(&fb, &sc);
	memset(&res, 0, sizeof(res));
	res.exit_code = -1;
	res.timeout_s = 1;
	is_int(oneoff_run(&ctx, &req, &img, &res), 0, "stdin file: returns 0");
	is_str(fb.code, "line one\n", "stdin file: beside the code");
	is_str(fb.stdin_path, "/sandbox/.stdin", "stdin file: its path");
	is_str(fb.stdin_got, "", "stdin file: nothing on the stream");
	runner_result_finish(&res);
	backend_destroy(&fb.base);
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"completed", test_completed},
	    {"failed", test_failed},
	    {"oom", test_oom},
	    {"timeout", test_timeout},
	    {"output-limit", test_output_limit},
	    {"cancel", test_cancel},
	    {"image-gone", test_image_gone},
	    {"engine-down", test_engine_down},
	    {"stdin", test_stdin},
	};
	int rc;

	if (setup() < 0) {
		printf("Bail out! cannot set up: a temporary directory and "
		       "the configuration are needed\n");
		return 2;
	}
	rc = tap_run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
	rmdir(root);
	config_finish(&cfg);
	return rc;
}
