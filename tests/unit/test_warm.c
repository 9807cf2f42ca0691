/* SPDX-License-Identifier: MIT */
/*
 * test_warm: the warm session state machine (run/warm/warm.c with
 * warm_agent.c, warm_exec.c, warm_io.c) against the fake backend of
 * fake_backend.h, whose boxes run a scripted agent speaking the agent
 * protocol (docs/agent-protocol.md) on a real socket pair: no Docker. A
 * session is made by the first run and continued by the next; the pool
 * (a pool box claimed by a conversation, its workspace handed over, the
 * pool refilled); idle expiry, maximum lifetime, eviction at the memory
 * cap, a stream that ends mid-call, a lost kernel, a damaged box, a daemon
 * restart and `session: "new"` each end a session, and the next run says
 * `restarted` with the reason. Timers are the configuration's, set short.
 *
 * The pool's workspace hand-over is the backend's (box_hand_over): the
 * fake records the directory it was handed; the Docker backend's mounts
 * are test_backend's. Run one case with `test_warm CASE` (`--list` names them).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "fake_backend.h"
#include "run/catalog.h"
#include "runner.h"
#include "run/warm/warm.h"
#include "tap.h"
#include "util/log.h"
#include "workspace/workspace.h"

static struct config cfg;
static struct fake_backend fb;
static struct workspace_mgr *mgr;
static struct catalog_image img;
static struct catalog cat = {.n = 1, .items = &img};
static char root[] = "/tmp/mcpsd-test-warm-XXXXXX";
static char s_python[] = "python",
            s_image[] = "mcp-sandboxd/runner-python:test",
            s_id[] = "sha256:0123", s_main[] = "main.py", s_empty[] = "",
            s_python3[] = "python3", s_path[] = "/sandbox/main.py";
static char *command[] = {s_python3, s_path};
static char *pool_langs[] = {s_python, NULL};
static char **pool_langs_saved; /* the configuration's own, freed by it */

static void reset_cfg(void);

static int setup(void)
{
	static const char *unset[] = {"MCP_API_TOKEN",     "MCP_API_TOKENS",
	                              "FILE_SECRET",       "STORE_URL",
	                              "SANDBOX_HOST_PATH", NULL};
	char err[1024] = "";

	for (size_t i = 0; unset[i]; i++)
		unsetenv(unset[i]);
	if (!mkdtemp(root))
		return -errno;
	setenv("MCP_AUTH", "none", 1);
	setenv("SANDBOX_ROOT", root, 1);
	setenv("MCP_LOG_LEVEL", "error", 1);
	setenv("WORKSPACE_QUOTA_MODE", "none", 1);
	setenv("SANDBOX_POOL_SIZE", "0", 1);
	setenv("DOCKER_TIMEOUT_SECONDS", "2", 1);
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		printf("# config: %s\n", err);
		return -EINVAL;
	}
	/* Short timers and small caps, set per case from here. */
	cfg.memory_mb = 256;
	cfg.warm_max = 8;
	cfg.interrupt_grace_ms = 300;
	pool_langs_saved = cfg.pool_languages;
	reset_cfg();
	if (workspace_mgr_create(&cfg, &mgr, err, sizeof(err)) < 0) {
		printf("# workspaces: %s\n", err);
		return -EIO;
	}
	img.language = s_python;
	img.image = s_image;
	img.image_id = s_id;
	img.filename = s_main;
	img.command = command;
	img.n_command = 2;
	img.version = img.description = s_empty;
	return 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* The settings a case may change, back to the defaults of the tests. */
static void reset_cfg(void)
{
	cfg.warm_memory_mb = 8 * 256;
	cfg.warm_idle_s = 60;
	cfg.warm_max_s = 3600;
	cfg.pool_size = 0;
	cfg.pool_languages = pool_langs_saved;
}

/* A fresh fake backend whose boxes run agent, and a warm manager on it. */
static struct warm *start(const struct fake_agent *agent)
{
	struct fake_script sc = {.agent = agent};
	struct warm *w = NULL;
	char err[512] = "";

	fake_backend_init(&fb, BACKEND_CAN_WARM);
	fake_backend_next(&fb, &sc);
	if (warm_create(&cfg, &fb.base, "bootbootbootboot", &w, err,
	                sizeof(err)) < 0)
		printf("# warm_create: %s\n", err);
	return w;
}

/* Ends the manager and the backend; checks no box is left. */
static void stop(struct warm *w, const char *name)
{
	warm_destroy(w);
	ok(fb.boxes == 0, "%s: every box released at the end (%d left)", name,
	   fb.boxes);
	backend_destroy(&fb.base);
	reset_cfg();
}

static struct workspace *conv(const char *id)
{
	struct workspace *ws = NULL;
	char err[512] = "";

	if (workspace_open(mgr, "tenant-a", id, true, &ws, err, sizeof(err)) <
	    0)
		printf("# workspace %s: %s\n", id, err);
	return ws;
}

/* One run of code in ws's warm session; the caller finishes res. */
static int wrun(struct warm *w, struct workspace *ws, const char *code,
                bool fresh, struct runner_result *res)
{
	struct runner_request req = {
	    .language = "python",
	    .code = code,
	    .code_len = strlen(code),
	    .workspace = ws,
	    .workspace_name = workspace_name(ws),
	    .workspace_host_path = workspace_host_path(ws),
	    .session_new = fresh,
	    .tenant = "tenant-a",
	    .stdout_fd = -1,
	    .stderr_fd = -1,
	};

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->timeout_s = 5;
	return warm_run(w, &req, &img, res);
}

/* A run that must succeed; says state and reason in one string. */
static void run_ok(struct warm *w, struct workspace *ws, bool fresh,
                   struct runner_result *res, const char *name)
{
	int rc = wrun(w, ws, "print(1)\n", fresh, res);

	ok(rc == 0 && res->status == RUNNER_COMPLETED,
	   "%s: the run completes (rc %d, %s: %s)", name, rc,
	   runner_status_name(res->status), res->message);
}

static void is_state(const struct runner_result *res, const char *state,
                     const char *reason, const char *name)
{
	char got[64], want[64];

	snprintf(got, sizeof(got), "%s/%s", res->session.state,
	         res->session.reason);
	snprintf(want, sizeof(want), "%s/%s", state, reason);
	is_str(got, want, name);
}

static void pause_ms(int ms)
{
	poll(NULL, 0, ms);
}

static struct warm_stats stats(struct warm *w)
{
	struct warm_stats s;

	warm_stats(w, &s);
	return s;
}

/* ---- a session ----------------------------------------------------------- */

static void test_new_then_continued(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-1");
	struct runner_result r1, r2;

	if (!w || !ws) {
		ok(0, "continued: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "first run");
	is_state(&r1, "new", "", "first run: a new session");
	ok(r1.session.warm && !r1.session.from_pool,
	   "first run: warm, a box of its own (no pool)");
	is_int(r1.session.calls, 1, "first run: call 1 of the session");
	is_str(r1.out.text, "fake0 call 1\n", "first run: the agent's output");
	ok(r1.value_json && strstr(r1.value_json, "\"text/plain\":\"1\""),
	   "first run: the value of X (%s)", r1.value_json);
	is_str(fb.exec_code, "print(1)\n",
	       "first run: the exec named the code file under /sandbox");
	is_str(fb.kind, "warm", "first run: labelled a warm box");
	is_str(fb.data, workspace_host_path(ws),
	       "first run: the workspace is /data");
	ok(fb.main_is_init, "first run: the agent is the box's init");
	ok(strstr(fb.log, "create channel start exec") == fb.log,
	   "first run: create, the lasting channel, start, then the exec (%s)",
	   fb.log);

	run_ok(w, ws, false, &r2, "second run");
	is_state(&r2, "continued", "", "second run: the session continues");
	is_int(r2.session.calls, 2, "second run: call 2 of the session");
	is_str(r2.container, r1.container, "second run: the same box");
	is_str(r2.out.text, "fake0 call 2\n",
	       "second run: the box's own second exec");
	is_int(fake_backend_count(&fb, "create"), 1,
	       "second run: no box made for it");
	ok(r2.session.idle_expires_at > time(NULL) + 50 &&
	       r2.session.expires_at > time(NULL) + 3500,
	   "second run: idle and lifetime deadlines from the settings");
	is_int(stats(w).sessions, 1, "stats: one session");
	is_int(stats(w).reused, 1, "stats: reused once");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "continued");
}

static void test_requested(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-requested");
	struct runner_result r1, r2;

	if (!w || !ws) {
		ok(0, "requested: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "requested: first");
	run_ok(w, ws, true, &r2, "requested: session new");
	is_state(&r2, "restarted", "requested",
	         "requested: session new says restarted/requested");
	ok(strcmp(r2.container, r1.container) != 0,
	   "requested: a fresh box (%s, then %s)", r1.container, r2.container);
	is_int(r2.session.calls, 1, "requested: its first call");
	is_int(fb.boxes, 1, "requested: the old box was released");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "requested");
}

/* ---- limits -------------------------------------------------------------- */

static void test_idle_expiry(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w;
	struct workspace *ws = conv("conv-idle");
	struct runner_result r1, r2, r3;

	cfg.warm_idle_s = 1;
	w = start(&ag);
	if (!w || !ws) {
		ok(0, "idle: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "idle: first");
	warm_tick(w, NULL);
	run_ok(w, ws, false, &r2, "idle: again at once");
	is_state(&r2, "continued", "",
	         "idle: a tick before the idle time "
	         "keeps the session");
	pause_ms(1200);
	warm_tick(w, NULL);
	is_int(stats(w).sessions, 0, "idle: the tick ended the idle session");
	is_int(stats(w).expired, 1, "idle: counted as expired");
	is_int(fb.boxes, 0, "idle: its box released");
	run_ok(w, ws, false, &r3, "idle: after the idle time");
	is_state(&r3, "restarted", "idle_expired",
	         "idle: the next run says restarted/idle_expired");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	runner_result_finish(&r3);
	workspace_close(ws);
	stop(w, "idle");
}

static void test_max_lifetime(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w;
	struct workspace *ws = conv("conv-lifetime");
	struct runner_result r1, r2;
	long long waited = 0;

	cfg.warm_max_s = 1;
	w = start(&ag);
	if (!w || !ws) {
		ok(0, "lifetime: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "lifetime: first");
	ok(r1.session.expires_at <= time(NULL) + 1,
	   "lifetime: the result says when the session ends");
	while (time(NULL) < r1.session.expires_at && waited < 3000) {
		pause_ms(50);
		waited += 50;
	}
	warm_tick(w, NULL);
	is_int(stats(w).sessions, 0,
	       "lifetime: ended by the tick although "
	       "used a moment ago");
	run_ok(w, ws, false, &r2, "lifetime: after it");
	is_state(&r2, "restarted", "max_lifetime",
	         "lifetime: the next run says restarted/max_lifetime");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "lifetime");
}

static void test_eviction(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w;
	struct workspace *a = conv("conv-a"), *b = conv("conv-b"),
	                 *c = conv("conv-c");
	struct runner_result r[6];

	/* Room for two boxes of SANDBOX_MEMORY_MB. */
	cfg.warm_memory_mb = 2 * cfg.memory_mb;
	w = start(&ag);
	if (!w || !a || !b || !c) {
		ok(0, "evict: a manager and three workspaces");
		return;
	}
	run_ok(w, a, false, &r[0], "evict: a");
	pause_ms(5);
	run_ok(w, b, false, &r[1], "evict: b");
	pause_ms(5);
	run_ok(w, a, false, &r[2],
	       "evict: a again (b is now the least "
	       "recently used)");
	pause_ms(5);
	run_ok(w, c, false, &r[3], "evict: c, over the memory cap");
	is_state(&r[3], "new", "", "evict: c gets a new session");
	is_int(stats(w).evicted, 1, "evict: one session evicted");
	is_int(stats(w).sessions, 2, "evict: still two sessions");
	is_int(fb.boxes, 2, "evict: two boxes");
	run_ok(w, a, false, &r[4], "evict: a once more");
	is_state(&r[4], "continued", "", "evict: a was not the victim");
	pause_ms(5);
	run_ok(w, b, false, &r[5], "evict: b's next run");
	is_state(&r[5], "restarted", "evicted",
	         "evict: b's next run says restarted/evicted");
	is_int(stats(w).evicted, 2,
	       "evict: b pushed out the least recently "
	       "used (c)");
	for (size_t i = 0; i < 6; i++)
		runner_result_finish(&r[i]);
	workspace_close(a);
	workspace_close(b);
	workspace_close(c);
	stop(w, "evict");
}

/* ---- a session that breaks ----------------------------------------------- */

static void test_sandbox_lost(void)
{
	static const struct fake_agent ag = {.die_at = 2};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-lost");
	struct runner_result r1, r2, r3;
	int rc;

	if (!w || !ws) {
		ok(0, "lost: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "lost: first");
	rc = wrun(w, ws, "print(2)\n", false, &r2);
	is_int(rc, 0, "lost: the run returns 0 (it ran; the box went)");
	is_str(runner_status_name(r2.status), "error",
	       "lost: the run is an error");
	ok(r2.session.lost, "lost: the run says it ended the state");
	is_str(r2.session.lost_reason, "sandbox_lost",
	       "lost: the stream ended with exit 0: sandbox_lost");
	is_str(r2.out.text, "fake0 call 2\n",
	       "lost: the output before the end is kept");
	ok(strstr(r2.message, "stopped (sandbox_lost)") &&
	       strstr(r2.message, "run again"),
	   "lost: the message says what and what to do (%s)", r2.message);
	is_int(fb.boxes, 0, "lost: the box is released");
	run_ok(w, ws, false, &r3, "lost: the next run");
	is_state(&r3, "restarted", "sandbox_lost",
	         "lost: the next run says restarted/sandbox_lost");
	ok(strcmp(r3.container, r1.container) != 0, "lost: in a fresh box");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	runner_result_finish(&r3);
	workspace_close(ws);
	stop(w, "lost");
}

static void kernel_lost(const struct fake_agent *ag)
{
	struct warm *w = start(ag);
	struct workspace *ws = conv("conv-kernel");
	struct runner_result r1, r2;

	if (!w || !ws) {
		ok(0, "kernel: a manager and a workspace");
		return;
	}
	is_int(wrun(w, ws, "exit(3)\n", false, &r1), 0,
	       "kernel: a run whose kernel exits");
	is_str(runner_status_name(r1.status), "failed",
	       "kernel: failed, with the kernel's exit status");
	is_int(r1.exit_code, 3, "kernel: exit code 3");
	ok(r1.session.lost, "kernel: the run says the state went");
	is_str(r1.session.lost_reason, "exit", "kernel: the agent's reason");
	run_ok(w, ws, false, &r2, "kernel: the next run");
	is_state(&r2, "restarted", "exit",
	         "kernel: the next run says restarted/exit");
	is_str(r2.container, r1.container,
	       "kernel: the box stays (a new "
	       "kernel in it)");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "kernel");
}

/* The new kernel's R 50 ms after the D, as a real kernel's start takes. */
static void test_kernel_lost(void)
{
	static const struct fake_agent ag = {.lose_at = 1};

	kernel_lost(&ag);
}

/*
 * The R in the same read as the D: it must not be taken for the old
 * kernel's (the next run then waited 30 s for an R that had come, and
 * ended as "unresponsive").
 */
static void test_kernel_lost_ready_at_once(void)
{
	static const struct fake_agent ag = {.lose_at = 1,
	                                     .ready_with_done = true};

	kernel_lost(&ag);
}

static void test_timeout_interrupt(void)
{
	static const struct fake_agent ag = {.hang_at = 1};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-timeout");
	struct runner_result r1, r2;
	struct runner_request req;
	int rc;

	if (!w || !ws) {
		ok(0, "timeout: a manager and a workspace");
		return;
	}
	memset(&req, 0, sizeof(req));
	req.code = "while True: pass\n";
	req.code_len = strlen(req.code);
	req.workspace = ws;
	req.workspace_name = workspace_name(ws);
	req.workspace_host_path = workspace_host_path(ws);
	req.stdout_fd = req.stderr_fd = -1;
	memset(&r1, 0, sizeof(r1));
	r1.timeout_s = 1;
	rc = warm_run(w, &req, &img, &r1);
	is_int(rc, 0, "timeout: returns 0");
	is_str(runner_status_name(r1.status), "timed_out", "timeout: status");
	ok(fake_backend_before(&fb, "exec", "interrupt"),
	   "timeout: the agent was sent an interrupt (%s)", fb.log);
	ok(!r1.session.lost && fake_backend_count(&fb, "kill") == 0,
	   "timeout: the interrupt was enough: state kept, no kill");
	run_ok(w, ws, false, &r2, "timeout: the next run");
	is_state(&r2, "continued", "", "timeout: the session continues");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "timeout");
}

static void test_damaged_session(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-damaged");
	struct runner_result r1, r2;
	char path[600];

	if (!w || !ws) {
		ok(0, "damaged: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "damaged: first");
	/* Something on the host removes the box's code directory. */
	snprintf(path, sizeof(path), "%s/main.py", fb.sandbox);
	ok(unlink(path) == 0 && rmdir(fb.sandbox) == 0,
	   "damaged: the code directory %s removed", fb.sandbox);
	fake_backend_clear(&fb);
	run_ok(w, ws, false, &r2, "damaged: the next run");
	is_state(&r2, "restarted", "sandbox_damaged",
	         "damaged: says restarted/sandbox_damaged");
	ok(strcmp(r2.container, r1.container) != 0,
	   "damaged: the run went to a fresh box");
	ok(fake_backend_before(&fb, "signal:KILL", "create") &&
	       fake_backend_count(&fb, "exec") == 1,
	   "damaged: the damaged box was killed, never sent the exec (%s)",
	   fb.log);
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "damaged");
}

static void test_server_restart(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start(&ag);
	struct workspace *ws = conv("conv-restart");
	struct runner_result r1, r2;
	char err[256];

	if (!w || !ws) {
		ok(0, "restart: a manager and a workspace");
		return;
	}
	run_ok(w, ws, false, &r1, "restart: first");
	warm_destroy(w);
	is_int(fb.boxes, 0, "restart: the stop ended the box");
	w = NULL;
	ok(warm_create(&cfg, &fb.base, "anotherbootidabc", &w, err,
	               sizeof(err)) == 0,
	   "restart: a new manager (another boot)");
	run_ok(w, ws, false, &r2, "restart: the next run");
	is_state(&r2, "restarted", "server_restarted",
	         "restart: says restarted/server_restarted");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
	workspace_close(ws);
	stop(w, "restart");
}

/* ---- the pool ------------------------------------------------------------ */

/* A manager with a pool of one Python box, ready; NULL when impossible. */
static struct warm *start_pool(const struct fake_agent *ag, const char *name)
{
	struct warm *w;

	cfg.pool_size = 1;
	cfg.pool_languages = pool_langs;
	w = start(ag);
	if (!w) {
		ok(0, "%s: a manager", name);
		return NULL;
	}
	ok(stats(w).pool_enabled, "%s: the pool is on", name);
	return w;
}

/* Ticks until the pool has a ready box, for at most three seconds. */
static bool pool_ready(struct warm *w)
{
	for (int i = 0; i < 300; i++) {
		warm_tick(w, &cat);
		if (stats(w).pool >= 1)
			return true;
		pause_ms(10);
	}
	return false;
}

static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static void test_pool_claim(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start_pool(&ag, "pool");
	struct workspace *ws = conv("conv-pool");
	struct runner_result r1, r2;
	char pool_box[16];

	if (!w || !ws)
		goto out;
	warm_tick(w, &cat);
	is_str(fb.kind, "pool", "pool: the tick starts a pool box");
	ok(fb.data[0] == '\0' && strcmp(fb.handover, "/data") == 0,
	   "pool: its /data is handed over later, not mounted now (%s, %s)",
	   fb.data, fb.handover);
	ok(fake_backend_before(&fb, "prepare", "create"),
	   "pool: the backend readied its hand-over first (%s)", fb.log);
	ok(pool_ready(w), "pool: the box is ready once its R is read");
	snprintf(pool_box, sizeof(pool_box), "fake%d", 0);
	run_ok(w, ws, false, &r1, "pool: a new conversation's first run");
	is_state(&r1, "new", "", "pool: a new session");
	ok(r1.session.from_pool, "pool: from the pool");
	is_str(r1.container, pool_box, "pool: the pool box itself");
	ok(fake_backend_before(&fb, "claim", "exec"),
	   "pool: claimed (C, A) before the exec (%s)", fb.log);
	ok(fake_backend_before(&fb, "handover", "claim"),
	   "pool: handed over before the agent's claim (%s)", fb.log);
	ok(same_dir(fb.handed, workspace_host_path(ws)),
	   "pool: the box was handed the workspace (%s)", fb.handed);
	is_int(stats(w).pool, 0, "pool: empty after the claim");
	warm_tick(w, &cat);
	is_int(stats(w).pool_starting, 1, "pool: the tick refills it");
	is_int(fb.boxes, 2, "pool: the session's box and a new pool box");
	ok(pool_ready(w), "pool: the new pool box gets ready");
	run_ok(w, ws, false, &r2, "pool: the conversation's next run");
	is_state(&r2, "continued", "", "pool: continues in the claimed box");
	is_int(stats(w).pool, 1,
	       "pool: the new pool box stays for another "
	       "conversation");
	runner_result_finish(&r1);
	runner_result_finish(&r2);
out:
	workspace_close(ws);
	if (w)
		stop(w, "pool");
	reset_cfg();
}

static void test_pool_damaged(void)
{
	static const struct fake_agent ag = {0};
	struct warm *w = start_pool(&ag, "pool damaged");
	struct workspace *ws = conv("conv-pool-damaged");
	struct runner_result r;

	if (!w || !ws)
		goto out;
	warm_tick(w, &cat);
	ok(pool_ready(w), "pool damaged: a ready pool box");
	/* The backend finds its hand-over place damaged (with Docker:
	 * something on the host removed the mount point). */
	fb.handover_broken = true;
	fake_backend_clear(&fb);
	run_ok(w, ws, false, &r, "pool damaged: a conversation's first run");
	ok(!r.session.from_pool, "pool damaged: not handed out");
	is_state(&r, "new", "", "pool damaged: a new session in a fresh box");
	ok(strcmp(r.container, "fake0") != 0 &&
	       fake_backend_count(&fb, "claim") == 0,
	   "pool damaged: never claimed (%s)", fb.log);
	is_int(fb.boxes, 1, "pool damaged: the damaged box was released");
	runner_result_finish(&r);
out:
	workspace_close(ws);
	if (w)
		stop(w, "pool damaged");
	reset_cfg();
}

static void test_pool_not_ready(void)
{
	static const struct fake_agent ag = {.no_ready = true}, ready = {0};
	struct warm *w = start_pool(&ag, "pool not ready");
	struct workspace *ws = conv("conv-pool-slow");
	struct runner_result r;
	int rc;

	if (!w || !ws)
		goto out;
	warm_tick(w, &cat);
	pause_ms(50);
	warm_tick(w, &cat);
	is_int(stats(w).pool_starting, 1, "pool not ready: still starting");
	/* The conversation's own box gets ready. */
	fake_backend_next(&fb, &(struct fake_script){.agent = &ready});
	rc = wrun(w, ws, "print(1)\n", false, &r);
	ok(rc == 0 && r.status == RUNNER_COMPLETED,
	   "pool not ready: the run completes in a box of its own");
	ok(!r.session.from_pool && fake_backend_count(&fb, "claim") == 0 &&
	       strcmp(r.container, "fake1") == 0,
	   "pool not ready: a box without its R is never handed out (%s)",
	   r.container);
	runner_result_finish(&r);
out:
	workspace_close(ws);
	if (w)
		stop(w, "pool not ready");
	reset_cfg();
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"continued", test_new_then_continued},
	    {"requested", test_requested},
	    {"idle", test_idle_expiry},
	    {"lifetime", test_max_lifetime},
	    {"evict", test_eviction},
	    {"lost", test_sandbox_lost},
	    {"kernel", test_kernel_lost},
	    {"kernel-ready-at-once", test_kernel_lost_ready_at_once},
	    {"timeout", test_timeout_interrupt},
	    {"damaged", test_damaged_session},
	    {"restart", test_server_restart},
	    {"pool", test_pool_claim},
	    {"pool-damaged", test_pool_damaged},
	    {"pool-not-ready", test_pool_not_ready},
	};
	char cmd[128];
	int rc;

	log_set_level(LOG_LEVEL_ERROR);
	if (setup() < 0) {
		printf("Bail out! cannot set up: a temporary directory, the "
		       "configuration and workspaces are needed\n");
		return 2;
	}
	rc = tap_run_cases(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
	workspace_mgr_destroy(mgr);
	config_finish(&cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	return rc;
}
