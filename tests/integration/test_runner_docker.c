/* SPDX-License-Identifier: MIT */
/*
 * test_runner_docker: drives runner_run against the real Docker engine and
 * the real runner images (runners/build.sh), for every runner found or the
 * languages named on the command line. TAP output; skips everything when
 * no engine answers or no runner image exists. Needs root (or the docker
 * group) and socat for the engine-down test.
 *
 *   test_runner_docker [language...]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/docker/backend_docker.h"
#include "backend/docker/docker.h"
#include "config/config.h"
#include "runner.h"
#include "tap.h"
#include "util/log.h"

static char root[] = "/tmp/mcpsd-it-XXXXXX";
static char workspace[256];

struct lang_code {
	const char *lang;
	const char *hello, *stdin_echo, *env, *exit3, *sleep, *oom, *net, *rofs,
	    *whoami, *forkbomb, *flood, *data;
};

static const struct lang_code codes[] = {
    {"python", "print('hello')",
     "import sys\nprint(sys.stdin.read().upper(), end='')",
     "import os\nprint(os.environ['FOO'], os.environ['HOME'])",
     "import sys\nprint('bye')\nsys.exit(3)", "import time\ntime.sleep(60)",
     "a = []\nwhile True:\n    a.append(bytearray(16 << 20))",
     "import socket\n"
     "try:\n    socket.getaddrinfo('example.com', 80)\n    print('dns ok')\n"
     "except Exception as e:\n    print('dns failed')\n"
     "s = socket.socket()\ns.settimeout(3)\n"
     "try:\n    s.connect(('1.1.1.1', 80))\n    print('tcp ok')\n"
     "except Exception as e:\n    print('tcp failed')\n",
     "import os\n"
     "for p in ['/usr/x', '/etc/x', '/sandbox/x']:\n"
     "    try:\n        open(p, 'w')\n        print('wrote', p)\n"
     "    except OSError:\n        print('ro', p)\n"
     "open('/tmp/t', 'w').write('x')\nprint('tmp ok')",
     "import os\nprint(os.getuid(), os.getgid())",
     "import os, time\n"
     "n = 0\n"
     "try:\n    while True:\n        if os.fork() == 0:\n"
     "            time.sleep(30)\n            os._exit(0)\n        n += 1\n"
     "except OSError as e:\n    print('fork failed after', n)\n",
     "import sys\nb = b'x' * 65536\nwhile True:\n    "
     "sys.stdout.buffer.write(b)",
     "open('/data/out.txt', "
     "'w').write('data')\nprint(open('/data/out.txt').read())"},
    {"typescript", "console.log('hello')",
     "const t = await "
     "Bun.stdin.text();\nprocess.stdout.write(t.toUpperCase());",
     "console.log(process.env.FOO, process.env.HOME)",
     "console.log('bye');\nprocess.exit(3);",
     "await new Promise(r => setTimeout(r, 60000));",
     "const a: Uint8Array[] = [];\nwhile (true) { const b = new Uint8Array(16 "
     "<< 20); b.fill(1); a.push(b); }",
     "import dns from 'node:dns/promises';\nimport net from 'node:net';\n"
     "try { await dns.lookup('example.com'); console.log('dns ok'); } "
     "catch { console.log('dns failed'); }\n"
     "await new Promise<void>(res => { const s = net.connect(80, '1.1.1.1');"
     " s.setTimeout(3000);"
     " s.on('connect', () => { console.log('tcp ok'); s.destroy(); res(); });"
     " s.on('error', () => { console.log('tcp failed'); res(); });"
     " s.on('timeout', () => { console.log('tcp failed'); s.destroy(); res(); "
     "}); });",
     "import fs from 'node:fs';\n"
     "for (const p of ['/usr/x', '/etc/x', '/sandbox/x']) {\n"
     "  try { fs.writeFileSync(p, 'x'); console.log('wrote', p); }\n"
     "  catch { console.log('ro', p); }\n}\n"
     "fs.writeFileSync('/tmp/t', 'x'); console.log('tmp ok');",
     "console.log(process.getuid(), process.getgid())",
     "let n = 0;\ntry { while (true) { Bun.spawn(['sleep', '30']); n++; } }\n"
     "catch (e) { console.log('fork failed after', n); }",
     "import fs from 'node:fs';\nconst b = 'x'.repeat(65536);\n"
     "while (true) fs.writeSync(1, b);",
     "import fs from 'node:fs';\nfs.writeFileSync('/data/out.txt', 'data');\n"
     "console.log(fs.readFileSync('/data/out.txt', 'utf8'));"},
    {"bash", "echo hello", "tr a-z A-Z", "echo \"$FOO\" \"$HOME\"",
     "echo bye; exit 3", "sleep 60",
     "x=$(head -c 1000000000 /dev/zero | tr '\\0' a); echo ${#x}",
     "if getent hosts example.com >/dev/null; then echo 'dns ok'; else echo "
     "'dns failed'; fi\n"
     "if timeout 3 bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; then "
     "echo 'tcp ok'; else echo 'tcp failed'; fi",
     "for p in /usr/x /etc/x /sandbox/x; do if (echo x > $p) 2>/dev/null; "
     "then echo wrote $p; else echo ro $p; fi; done\n"
     "echo x > /tmp/t && echo tmp ok",
     "echo $(id -u) $(id -g)",
     /* The script forks once, before the bomb, and then runs only
      * builtins: bash retries a fork that fails with EAGAIN for 15 s and
      * then gives up on the script. The bomb's own complaints ("fork:
      * retry: Resource temporarily unavailable") are the proof. */
     "f() { f | f & }; : >/tmp/bomb; f 2>>/tmp/bomb & s=$SECONDS\n"
     "while (( SECONDS - s < 5 )); do :; done\n"
     "while read -r l; do [[ $l == *fork:*unavailable* ]] && "
     "{ echo fork failed after the bomb; break; }; done </tmp/bomb",
     "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
     "echo data > /data/out.txt; cat /data/out.txt"},
};

static void req_init(struct runner_request *q, const char *lang,
                     const char *code)
{
	memset(q, 0, sizeof(*q));
	q->language = lang;
	q->code = code;
	q->code_len = strlen(code);
	q->stdout_fd = q->stderr_fd = -1;
	q->workspace_host_path = workspace;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int run(struct runner *r, const struct runner_request *q,
               struct runner_result *res)
{
	int rc = runner_run(r, q, res);

	if (rc < 0)
		printf("#   refused: %s\n", res->message);
	else if (res->status == RUNNER_ERROR)
		printf("#   error: %s\n", res->message);
	return rc;
}

static void test_language(struct runner *r, const struct lang_code *c)
{
	struct runner_request q;
	struct runner_result res;
	const char *env[] = {"FOO=bar baz"};
	char want[64];
	long before, after;

	printf("# language %s\n", c->lang);
	req_init(&q, c->lang, c->hello);
	if (run(r, &q, &res) == 0) {
		is_str(runner_status_name(res.status), "completed",
		       "hello: completed");
		is_str(res.out.text, "hello\n", "hello: stdout");
		is_int(res.exit_code, 0, "hello: exit 0");
		ok(res.duration_ms > 0 && res.duration_ms < 10000,
		   "hello: duration %lld ms", res.duration_ms);
	} else
		ok(0, "hello ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->stdin_echo);
	q.stdin_data = "some input\nline two\n";
	q.stdin_len = strlen(q.stdin_data);
	if (run(r, &q, &res) == 0)
		is_str(res.out.text, "SOME INPUT\nLINE TWO\n",
		       "stdin reaches the program");
	else
		ok(0, "stdin ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->env);
	q.env = env;
	q.n_env = 1;
	if (run(r, &q, &res) == 0)
		is_str(res.out.text, "bar baz /tmp\n",
		       "environment passed, HOME injected");
	else
		ok(0, "env ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->exit3);
	if (run(r, &q, &res) == 0) {
		is_str(runner_status_name(res.status), "failed",
		       "non-zero exit: failed");
		is_int(res.exit_code, 3, "non-zero exit: code 3");
		is_str(res.out.text, "bye\n", "non-zero exit: output kept");
	} else
		ok(0, "exit ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->sleep);
	q.timeout_s = 2;
	if (run(r, &q, &res) == 0) {
		is_str(runner_status_name(res.status), "timed_out",
		       "timeout: timed_out");
		ok(res.timed_out && res.duration_ms >= 2000 &&
		       res.duration_ms < 5000,
		   "timeout: after %lld ms", res.duration_ms);
	} else
		ok(0, "timeout ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->oom);
	q.timeout_s = 30;
	if (run(r, &q, &res) == 0) {
		is_str(runner_status_name(res.status), "oom_killed",
		       "memory limit: oom_killed");
		ok(res.oom_killed, "memory limit: flag set");
	} else
		ok(0, "oom ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->net);
	q.timeout_s = 20;
	if (run(r, &q, &res) == 0)
		is_str(res.out.text, "dns failed\ntcp failed\n",
		       "no network: DNS and TCP fail");
	else
		ok(0, "net ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->rofs);
	if (run(r, &q, &res) == 0)
		is_str(res.out.text,
		       "ro /usr/x\nro /etc/x\nro /sandbox/x\ntmp ok\n",
		       "read-only root and /sandbox, writable /tmp");
	else
		ok(0, "rofs ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->whoami);
	if (run(r, &q, &res) == 0)
		is_str(res.out.text, "64321 64321\n", "runs as 64321:64321");
	else
		ok(0, "uid ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->data);
	if (run(r, &q, &res) == 0)
		is_str(res.out.text, "data\n",
		       "/data is the writable workspace");
	else
		ok(0, "data ran");
	runner_result_finish(&res);

	req_init(&q, c->lang, c->forkbomb);
	q.timeout_s = 60; /* no time is asserted; a loaded ASan run is slow */
	if (run(r, &q, &res) == 0) {
		ok(strncmp(res.out.text, "fork failed after", 17) == 0,
		   "pids limit: fork fails inside (%s in %lld ms, %s)",
		   runner_status_name(res.status), res.duration_ms,
		   res.out.text);
	} else
		ok(0, "fork bomb ran");
	runner_result_finish(&res);
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	ok(pid > 0 && waitpid(pid, NULL, 0) == pid,
	   "pids limit: the host can still fork");

	before = rss_kb();
	req_init(&q, c->lang, c->flood);
	q.timeout_s = 60;
	if (run(r, &q, &res) == 0) {
		after = rss_kb();
		is_str(runner_status_name(res.status), "output_limit",
		       "flood: output_limit");
		ok(res.out.truncated && res.out.total == 16u * 1024 * 1024,
		   "flood: stopped at the cap (%zu bytes)", res.out.total);
		ok(strlen(res.out.text) < 40 * 1024,
		   "flood: inline text bounded (%zu)", strlen(res.out.text));
		ok(after - before < 4096, "flood: RSS flat (%ld -> %ld kB)",
		   before, after);
		ok(res.duration_ms < 30000, "flood: stopped in %lld ms",
		   res.duration_ms);
	} else
		ok(0, "flood ran");
	runner_result_finish(&res);

	snprintf(want, sizeof(want), "%s", c->lang);
	req_init(&q, want, c->hello);
	q.network = true;
	is_int(runner_run(r, &q, &res), -EPERM,
	       "network refused when the operator disallows it");
	runner_result_finish(&res);
}

/* ---- the seccomp profile in real containers -------------------------- */

static void expect_run(struct runner *r, const char *lang, const char *code,
                       const char *want, const char *name)
{
	struct runner_request q;
	struct runner_result res;

	req_init(&q, lang, code);
	q.timeout_s = 60;
	if (run(r, &q, &res) == 0) {
		ok(res.status == RUNNER_COMPLETED &&
		       strcmp(res.out.text, want) == 0,
		   "seccomp: %s", name);
		if (res.status != RUNNER_COMPLETED ||
		    strcmp(res.out.text, want))
			printf("#   status %s\n#   stdout %s\n#   stderr %s\n",
			       runner_status_name(res.status), res.out.text,
			       res.err.text);
	} else
		ok(0, "seccomp: %s ran", name);
	runner_result_finish(&res);
}

static void test_seccomp(struct runner *r, const struct catalog *cat)
{
	if (catalog_find(cat, "python")) {
		expect_run(r, "python",
		           "import ctypes, errno, os\n"
		           "libc = ctypes.CDLL(None, use_errno=True)\n"
		           "buf = ctypes.create_string_buffer(256)\n"
		           "rc = libc.syscall(425, 8, buf)\n"
		           "print('io_uring_setup', rc, "
		           "errno.errorcode[ctypes.get_errno()])\n"
		           "rc = libc.syscall(272, 0x10000000)\n"
		           "print('unshare', rc, "
		           "errno.errorcode[ctypes.get_errno()])\n"
		           "rc = libc.syscall(101, 16, 1, 0, 0)\n"
		           "print('ptrace', rc, "
		           "errno.errorcode[ctypes.get_errno()])\n",
		           "io_uring_setup -1 ENOSYS\nunshare -1 EPERM\nptrace "
		           "-1 EPERM\n",
		           "io_uring_setup ENOSYS, unshare and ptrace EPERM");
		expect_run(r, "python",
		           "import subprocess\n"
		           "p = subprocess.run(['unshare', '-U', 'true'], "
		           "capture_output=True)\n"
		           "print('unshare -U exit', p.returncode)\n",
		           "unshare -U exit 1\n", "unshare -U fails");
		expect_run(
		    r, "python",
		    "import numpy as np, pandas as pd, matplotlib\n"
		    "import matplotlib.pyplot as plt, os\n"
		    "df = pd.DataFrame({'x': np.arange(10), 'y': np.arange(10) "
		    "** "
		    "2})\n"
		    "df.plot(x='x', y='y')\nplt.savefig('/data/chart.png')\n"
		    "print(int(df.y.sum()), os.path.getsize('/data/chart.png') "
		    "> "
		    "1000)\n",
		    "285 True\n", "numpy, pandas, matplotlib write a PNG");
		{
			struct runner_request q;
			struct runner_result res;

			req_init(&q, "python",
			         "import subprocess\n"
			         "p = subprocess.run(['python3', '-c', 'a = "
			         "bytearray(1 << 30)'])\n"
			         "print('child exit', p.returncode)\n");
			q.timeout_s = 30;
			if (run(r, &q, &res) == 0)
				ok(res.status == RUNNER_OOM_KILLED &&
				       res.exit_code == 0 && res.oom_killed,
				   "child OOM-killed, parent exit 0: "
				   "oom_killed "
				   "(%s, exit %d, %s)",
				   runner_status_name(res.status),
				   res.exit_code, res.out.text);
			else
				ok(0, "child oom ran");
			runner_result_finish(&res);
		}
		expect_run(r, "python",
		           "import multiprocessing as mp\n"
		           "def sq(x):\n    return x * x\n"
		           "if __name__ == '__main__':\n"
		           "    with mp.Pool(4) as p:\n"
		           "        print(sum(p.map(sq, range(100))))\n",
		           "328350\n", "python multiprocessing");
	}
	if (catalog_find(cat, "typescript"))
		expect_run(
		    r, "typescript",
		    "interface P { n: number }\n"
		    "const ps: P[] = [1, 2, 3].map(n => ({ n }));\n"
		    "const out = Bun.spawnSync(['echo', 'child']);\n"
		    "await Bun.write('/tmp/x.json', JSON.stringify(ps));\n"
		    "const back = await Bun.file('/tmp/x.json').json();\n"
		    "console.log(back.length, out.stdout.toString().trim());\n",
		    "3 child\n", "bun runs TypeScript, spawns, writes");
	if (catalog_find(cat, "bash"))
		expect_run(
		    r, "bash",
		    "seq 1 100000 | sort -rn | head -3 | paste -sd+ | bc\n"
		    "echo '{\"a\":[1,2,3]}' | jq '.a | add'\n"
		    "unshare -U true 2>/dev/null || echo unshare refused\n",
		    "299997\n6\nunshare refused\n", "bash pipelines");
}

/* ---- kill -9 of the daemon -------------------------------------------- */

/*
 * Instance names of this process: two runs of the suite on one engine (a
 * developer's and a sanitizer build's) must not reap each other's boxes.
 */
static char inst_runner[32], inst_orphan[32];

static int count_containers(const char *filter)
{
	char cmd[300], line[128];
	int n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "docker ps -q %s", filter);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n++;
	pclose(f);
	return n;
}

/* Containers of instance inst (all: stopped ones too). */
static int count_owned(const char *inst, bool all)
{
	char filter[96];

	snprintf(filter, sizeof(filter), "%s--filter label=sandbox.owner=%s",
	         all ? "-a " : "", inst);
	return count_containers(filter);
}

static void test_kill9(void)
{
	struct config cfg;
	struct runner *r2 = NULL;
	char err[512];
	pid_t pid;
	int i, running = 0, all = 0;

	printf("# kill -9 of a daemon in the middle of a run\n");
	setenv("MCP_INSTANCE_NAME", inst_orphan, 1);
	pid = fork();
	if (pid == 0) {
		struct runner *r = NULL;
		struct runner_request q;
		struct runner_result res;

		memset(&cfg, 0, sizeof(cfg));
		if (config_load(&cfg, NULL, err, sizeof(err)) < 0 ||
		    runner_create(&cfg, &r, err, sizeof(err)) < 0)
			_exit(1);
		req_init(&q, "bash", "sleep 300");
		q.timeout_s = 3;
		_exit(runner_run(r, &q, &res) == 0 ? 0 : 1);
	}
	for (i = 0; i < 100 && running == 0; i++) {
		usleep(100 * 1000);
		running = count_owned(inst_orphan, false);
	}
	ok(running == 1, "the run's container is up");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok(count_owned(inst_orphan, false) == 1,
	   "after kill -9 the container is orphaned");
	/* The image's watchdog ends it at its limit plus grace (3 + 5 s). */
	for (i = 0; i < 150 && count_owned(inst_orphan, false) > 0; i++)
		usleep(100 * 1000);
	ok(i < 150, "the in-container watchdog stopped it after %.1f s",
	   i / 10.0);
	all = count_owned(inst_orphan, true);
	ok(all == 1, "the stopped container is still there");
	memset(&cfg, 0, sizeof(cfg));
	if (config_load(&cfg, NULL, err, sizeof(err)) == 0 &&
	    runner_create(&cfg, &r2, err, sizeof(err)) == 0) {
		ok(count_owned(inst_orphan, true) == 0,
		   "the restarted daemon reaped it at start-up");
		runner_destroy(r2);
	} else
		ok(0, "restart: %s", err);
	config_finish(&cfg);
	setenv("MCP_INSTANCE_NAME", inst_runner, 1);
}

/* ---- concurrency ----------------------------------------------------- */

struct conc {
	struct runner *r;
	char tenant[16];
	struct runner_result res;
	int rc;
	unsigned events;
};

static void on_event(void *arg, enum runner_event ev, unsigned n)
{
	struct conc *c = arg;

	if (ev == RUNNER_EVENT_QUEUED)
		c->events |= 1;
	else
		c->events |= 2;
}

static void *conc_main(void *arg)
{
	struct conc *c = arg;
	struct runner_request q;

	req_init(&q, "bash", "sleep 2; echo done");
	q.on_event = on_event;
	q.event_arg = c;
	q.tenant = c->tenant;
	c->rc = runner_run(c->r, &q, &c->res);
	return NULL;
}

static void test_concurrency(struct runner *r)
{
	struct conc c[5];
	pthread_t t[5];
	int done = 0, busy = 0, queued = 0;

	/*
	 * Five tenants: the shared queue's bound is under test, not a
	 * tenant's own (which leaves one of two places to others).
	 */
	printf("# concurrency: 2 at once, queue of 2, 5 callers\n");
	for (int i = 0; i < 5; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].r = r;
		snprintf(c[i].tenant, sizeof(c[i].tenant), "tenant-%d", i);
		pthread_create(&t[i], NULL, conc_main, &c[i]);
		usleep(100 * 1000);
	}
	for (int i = 0; i < 5; i++) {
		pthread_join(t[i], NULL);
		if (c[i].rc == 0 && c[i].res.status == RUNNER_COMPLETED)
			done++;
		if (c[i].rc == 0 && c[i].res.status == RUNNER_BUSY) {
			busy++;
			ok(c[i].res.retry_after_s >= 1 &&
			       c[i].res.queue_ms < 200,
			   "busy answered at once (%lld ms), retry in %u s: %s",
			   c[i].res.queue_ms, c[i].res.retry_after_s,
			   c[i].res.message);
		}
		if (c[i].events & 1)
			queued++;
		runner_result_finish(&c[i].res);
	}
	is_int(done, 4, "four runs completed");
	is_int(busy, 1, "one caller told the queue is full");
	is_int(queued, 2, "two runs waited in the queue");
}

/* ---- cancellation ---------------------------------------------------- */

struct cancel_arg {
	struct runner_cancel *c;
	unsigned ms;
};

static void *cancel_main(void *arg)
{
	struct cancel_arg *a = arg;

	usleep(a->ms * 1000);
	runner_cancel_trigger(a->c);
	return NULL;
}

static void test_cancel(struct runner *r)
{
	struct runner_request q;
	struct runner_result res;
	struct cancel_arg a = {.ms = 1500};
	pthread_t t;
	struct timespec t0, t1;

	if (runner_cancel_create(&a.c) < 0) {
		ok(0, "cancel token");
		return;
	}
	req_init(&q, "bash", "sleep 60");
	q.cancel = a.c;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&t, NULL, cancel_main, &a);
	if (run(r, &q, &res) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		is_str(runner_status_name(res.status), "cancelled",
		       "cancel: status cancelled");
		ok(t1.tv_sec - t0.tv_sec < 6, "cancel: returned promptly");
	} else
		ok(0, "cancel ran");
	pthread_join(t, NULL);
	runner_result_finish(&res);
	runner_cancel_destroy(a.c);
}

/* ---- engine down through a proxy ------------------------------------- */

static pid_t start_proxy(const char *sock)
{
	pid_t pid = fork();
	char listen[300];

	if (pid == 0) {
		/* Its own group, so that stop_proxy also stops the children
		 * serving open connections: a kept-alive one would otherwise
		 * still reach the engine after the "engine" went away. */
		setpgid(0, 0);
		snprintf(listen, sizeof(listen), "UNIX-LISTEN:%s,fork", sock);
		execlp("socat", "socat", listen,
		       "UNIX-CONNECT:/var/run/docker.sock", (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid); /* either side may win the race */
	for (int i = 0; i < 50; i++) {
		struct stat sb;

		if (stat(sock, &sb) == 0)
			break;
		usleep(50 * 1000);
	}
	return pid;
}

static void stop_proxy(pid_t pid, const char *sock)
{
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(sock);
}

static void test_engine_down(const char *lang)
{
	struct config cfg;
	struct runner *r = NULL;
	struct runner_request q;
	struct runner_result res;
	struct docker_health h;
	char sock[300], host[320], err[512];
	pid_t px;
	int rc;

	if (system("command -v socat >/dev/null") != 0) {
		printf("ok - # SKIP socat not installed\n");
		return;
	}
	snprintf(sock, sizeof(sock), "%s/proxy.sock", root);
	snprintf(host, sizeof(host), "unix://%s", sock);
	setenv("DOCKER_HOST", host, 1);
	setenv("DOCKER_TIMEOUT_SECONDS", "5", 1);
	memset(&cfg, 0, sizeof(cfg));
	rc = config_load(&cfg, NULL, err, sizeof(err));
	unsetenv("DOCKER_HOST");
	if (rc < 0) {
		ok(0, "config for the proxy: %s", err);
		config_finish(&cfg);
		return;
	}
	px = start_proxy(sock);
	rc = runner_create(&cfg, &r, err, sizeof(err));
	if (rc < 0) {
		ok(0, "runner through the proxy: %s", err);
		stop_proxy(px, sock);
		config_finish(&cfg);
		return;
	}
	req_init(&q, lang, "echo up");
	if (lang[0] == 'p')
		q.code = "print('up')", q.code_len = 11;
	else if (lang[0] == 't')
		q.code = "console.log('up')", q.code_len = 17;
	rc = run(r, &q, &res);
	ok(rc == 0 && res.status == RUNNER_COMPLETED, "proxy up: run works");
	runner_result_finish(&res);

	stop_proxy(px, sock);
	rc = run(r, &q, &res);
	ok(rc == 0 && res.status == RUNNER_ERROR &&
	       strstr(res.message, "not reachable"),
	   "proxy down: clear error: %s", res.message);
	runner_result_finish(&res);
	docker_health(backend_docker_client(runner_backend(r)), &h);
	ok(!h.reachable && strstr(h.last_error, "not reachable"),
	   "proxy down: health says unreachable: %s", h.last_error);

	px = start_proxy(sock);
	rc = run(r, &q, &res);
	ok(rc == 0 && res.status == RUNNER_COMPLETED,
	   "proxy back: recovers by itself");
	runner_result_finish(&res);
	docker_health(backend_docker_client(runner_backend(r)), &h);
	ok(h.reachable && h.last_error[0] == '\0' &&
	       strcmp(h.api_version, "1.41") >= 0,
	   "proxy back: health reachable, API %s", h.api_version);
	runner_drain(r, 10000);
	runner_destroy(r);
	stop_proxy(px, sock);
	config_finish(&cfg);
}

/* ---- reaping --------------------------------------------------------- */

static int make_orphan(struct docker *d, const char *owner, const char *boot,
                       const char *deadline, char id[DOCKER_ID_LEN + 1])
{
	const char *cmd[] = {"sleep", "600"};
	struct docker_kv labels[] = {{"sandbox.managed", "true"},
	                             {"sandbox.owner", owner},
	                             {"sandbox.boot", boot},
	                             {"sandbox.deadline", deadline}};
	struct docker_create_opts o = {.image = "mcp-sandboxd/runner-bash",
	                               .cmd = cmd,
	                               .n_cmd = 2,
	                               .labels = labels,
	                               .n_labels = 4,
	                               .network_mode = "none",
	                               .log_driver = "none"};
	char err[512];
	int rc = docker_container_create(d, NULL, &o, id, err, sizeof(err));

	if (rc == 0)
		rc = docker_container_start(d, id, err, sizeof(err));
	if (rc < 0)
		printf("#   orphan: %s\n", err);
	return rc;
}

static bool exists(struct docker *d, const char *id)
{
	struct docker_container_state st;
	char err[512];

	return docker_container_inspect(d, id, &st, err, sizeof(err)) == 0;
}

static void test_reap(struct runner *r, const struct config *cfg)
{
	struct docker *d = backend_docker_client(runner_backend(r));
	char old_boot[DOCKER_ID_LEN + 1], past[DOCKER_ID_LEN + 1],
	    other[DOCKER_ID_LEN + 1], mine[DOCKER_ID_LEN + 1];
	char past_s[32], future_s[32], err[512];
	int n;

	snprintf(past_s, sizeof(past_s), "%lld", (long long)time(NULL) - 3600);
	snprintf(future_s, sizeof(future_s), "%lld",
	         (long long)time(NULL) + 3600);
	if (make_orphan(d, cfg->instance_name, "0000000000000000", future_s,
	                old_boot) < 0 ||
	    make_orphan(d, "someone-else", "1111111111111111", past_s, past) <
	        0 ||
	    make_orphan(d, "someone-else", "1111111111111111", future_s,
	                other) < 0 ||
	    make_orphan(d, cfg->instance_name, runner_boot_id(r), future_s,
	                mine) < 0) {
		ok(0, "orphans created");
		return;
	}
	/*
	 * Another daemon on the same engine may reap the past-deadline one
	 * first (any instance does), so count only that the pass worked;
	 * the checks below say what is gone.
	 */
	n = runner_reap(r, err, sizeof(err));
	ok(n >= 0, "reaper pass succeeded (%d removed here)", n);
	ok(!exists(d, old_boot), "reaped: our owner, an earlier boot");
	ok(!exists(d, past), "reaped: another owner, past its deadline");
	ok(exists(d, other), "kept: another owner, before its deadline");
	ok(exists(d, mine), "kept: this boot, before its deadline");
	ok(docker_container_remove(d, other, err, sizeof(err)) == 0 &&
	       docker_container_remove(d, mine, err, sizeof(err)) == 0,
	   "kept containers removed by hand");
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct config cfg;
	struct runner *r = NULL;
	struct catalog *cat;
	struct docker_health h;
	char err[512], cmd[600];
	const char *only[8];
	int n_only = argc - 1 > 8 ? 8 : argc - 1;
	int rc;

	for (int i = 0; i < n_only; i++)
		only[i] = argv[i + 1];
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(workspace, sizeof(workspace), "%s/ws", root);
	if (mkdir(workspace, 0755) < 0 || chown(workspace, 64321, 64321) < 0) {
		printf("1..0 # SKIP cannot prepare a workspace (not root?)\n");
		return 0;
	}
	setenv("SANDBOX_ROOT", root, 1);
	snprintf(inst_runner, sizeof(inst_runner), "it-runner-%d",
	         (int)getpid());
	snprintf(inst_orphan, sizeof(inst_orphan), "it-orphan-%d",
	         (int)getpid());
	setenv("MCP_INSTANCE_NAME", inst_runner, 1);
	setenv("SANDBOX_MAX_CONCURRENT", "2", 1);
	setenv("SANDBOX_QUEUE_LENGTH", "2", 1);
	setenv("MCP_LOG_LEVEL", "warn", 1);
	setenv("MCP_AUTH", "none", 1);
	/* One-off runs (a box per run) are what this file tests. */
	setenv("SANDBOX_WARM", "false", 1);
	log_set_level(LOG_LEVEL_WARN);
	memset(&cfg, 0, sizeof(cfg));
	rc = config_load(&cfg, NULL, err, sizeof(err));
	if (rc < 0) {
		printf("Bail out! config: %s\n", err);
		return 1;
	}
	rc = runner_create(&cfg, &r, err, sizeof(err));
	if (rc < 0) {
		printf("Bail out! runner: %s\n", err);
		return 1;
	}
	docker_health(backend_docker_client(runner_backend(r)), &h);
	cat = runner_catalog_get(r);
	if (!h.reachable || cat->n == 0) {
		printf("1..0 # SKIP %s\n",
		       !h.reachable ? h.last_error
		                    : "no runner images; run runners/build.sh");
		catalog_put(cat);
		runner_destroy(r);
		return 0;
	}
	for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++) {
		bool want = n_only == 0;

		for (int j = 0; j < n_only; j++)
			want |= strcmp(only[j], codes[i].lang) == 0;
		if (!want)
			continue;
		if (!catalog_find(cat, codes[i].lang)) {
			printf("ok - # SKIP no %s runner\n", codes[i].lang);
			continue;
		}
		test_language(r, &codes[i]);
	}
	test_seccomp(r, cat);
	if (catalog_find(cat, "bash")) {
		test_kill9();
		test_concurrency(r);
		test_cancel(r);
		test_reap(r, &cfg);
		test_engine_down("bash");
	}
	catalog_put(cat);
	is_int(runner_drain(r, 30000), 0, "drain: nothing left running");
	runner_destroy(r);
	ok(count_owned(inst_runner, true) == 0,
	   "no container of this test is left");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	config_finish(&cfg);
	return tap_done();
}
