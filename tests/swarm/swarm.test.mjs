// SPDX-License-Identifier: MIT
// The swarm backend against a real Swarm: the lab of tests/swarm/lab.sh
// (three dockerds in network namespaces; n1 the drained manager, n2 and n3
// the sandbox workers), the daemon built from this tree with
// SANDBOX_BACKEND=swarm, and the official SDK client. tests/run.sh's swarm
// layer brings the lab up, runs this file and tears the lab down.
//
// Environment: MCPSD_LAB_DIR (the lab's state, with n1/docker.sock and the
// shared directory), MCPSD_BIN. The lab's engines must have the image
// mcp-sandboxd/runner-bash:latest (lab.sh up --images ...).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectHttp, freePort, sleep, startDaemon } from '../integration/lib/daemon.mjs';
import { runCode } from '../integration/lib/sandbox.mjs';
import { umountBelow } from '../integration/lib/faults.mjs';

const LAB = process.env.MCPSD_LAB_DIR ?? '/var/tmp/mcpsd-swarm-lab';
const LAB_SH = path.resolve('tests/swarm/lab.sh');
const sock = (n) => `${LAB}/${n}/docker.sock`;
// Without the lab every test would fail on a refused socket; say why once.
const NO_LAB = !existsSync(sock('n1')) && `no swarm lab at ${LAB}: start it with tests/swarm/lab.sh up (tests/run.sh --only swarm does)`;

/** GET on a lab engine's API; the parsed answer. */
function api(n, p) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock(n), path: `/v1.41${p}`, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        try {
          resolve(JSON.parse(body));
        } catch (e) {
          reject(new Error(`${p}: ${res.statusCode} ${body.slice(0, 200)}`));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${p}: timeout`)));
    req.on('error', reject);
    req.end();
  });
}

const lab = (...args) => execFileSync(LAB_SH, args, { encoding: 'utf8', env: { ...process.env, MCPSD_LAB_DIR: LAB } });

/** Services, tasks (manager) and containers (every node) left over. */
async function leftovers(nodes = ['n1', 'n2', 'n3']) {
  const services = (await api('n1', '/services')).map((s) => s.Spec.Name);
  const tasks = (await api('n1', '/tasks')).map((t) => `${t.ServiceID.slice(0, 8)}:${t.Status.State}`);
  const containers = [];
  for (const n of nodes) {
    for (const c of await api(n, '/containers/json?all=1')) containers.push(`${n}:${c.Id.slice(0, 12)}:${c.State}`);
  }
  return { services, tasks, containers };
}

async function waitClean(ms, nodes) {
  const t0 = Date.now();
  let l;
  for (;;) {
    l = await leftovers(nodes);
    if (!l.services.length && !l.tasks.length && !l.containers.length) return l;
    if (Date.now() - t0 > ms) return l;
    await sleep(500);
  }
}

/**
 * A unix socket in front of the manager's API for a daemon. Before it
 * passes on a DELETE of a service, it asks the manager for that service's
 * tasks and keeps them in `deletes` ({ id, tasks: [{ desired, state }] }).
 * Requests are parsed only as far as their heads and Content-Length bodies;
 * anything else (chunked bodies, upgrades) goes through as it is.
 */
async function deleteWatcher(file) {
  const deletes = [];
  const tasksOf = async (id) =>
    (await api('n1', `/tasks?filters=${encodeURIComponent(JSON.stringify({ service: [id] }))}`)).map((t) => ({ desired: t.DesiredState, state: t.Status.State }));
  const server = net.createServer((c) => {
    const up = net.connect(sock('n1'));
    let queue = Buffer.alloc(0);
    let body = 0;
    let raw = false;
    let busy = false;
    up.pipe(c);
    up.on('error', () => c.destroy());
    c.on('error', () => up.destroy());
    c.on('end', () => up.end());
    const pump = async () => {
      if (busy) return;
      busy = true;
      while (queue.length) {
        if (raw || body) {
          const n = raw ? queue.length : Math.min(body, queue.length);
          up.write(queue.subarray(0, n));
          queue = queue.subarray(n);
          if (!raw) body -= n;
          continue;
        }
        const end = queue.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = queue.subarray(0, end + 4).toString('latin1');
        const del = /^DELETE (?:\/v[\d.]+)?\/services\/([A-Za-z0-9]+) /.exec(head);
        if (del) deletes.push({ id: del[1], tasks: await tasksOf(del[1]).catch((e) => [{ error: e.message }]) });
        up.write(queue.subarray(0, end + 4));
        queue = queue.subarray(end + 4);
        body = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        raw = /\r\n(transfer-encoding:\s*chunked|upgrade:)/i.test(head);
      }
      busy = false;
    };
    c.on('data', (d) => {
      queue = Buffer.concat([queue, d]);
      pump();
    });
  });
  rmSync(file, { force: true });
  await new Promise((resolve, reject) => server.listen(file, resolve).on('error', reject));
  return { deletes, file, close: () => new Promise((resolve) => server.close(resolve)) };
}

const SECRET = randomBytes(32).toString('hex');
const TOKEN = randomBytes(24).toString('hex');

/** A daemon of the swarm backend on the lab, its root on the shared directory. */
async function swarmDaemon(name, env = {}) {
  const root = path.join(LAB, 'shared', name);
  mkdirSync(root, { recursive: true });
  const d = await startDaemon({
    name: `swarm-${name}`,
    root,
    keepRoot: true,
    env: {
      SANDBOX_BACKEND: 'swarm',
      DOCKER_HOST: `unix://${sock('n1')}`,
      MCP_INSTANCE_NAME: `lab-${name}`,
      MCP_API_TOKEN: TOKEN,
      FILE_SECRET: SECRET,
      DOCKER_TIMEOUT_SECONDS: '5',
      MCP_LOG_LEVEL: 'info',
      ...env,
    },
  });
  d.token = TOKEN;
  d.client = await connectHttp(d);
  return d;
}

async function stopDaemon(d) {
  if (!d) return;
  await d.client?.close().catch(() => {});
  const ex = await d.stop('SIGTERM');
  umountBelow(d.root);
  return ex;
}

const bash = (client, code, args = {}, opts = {}) => runCode(client, { language: 'bash', code, ...args }, opts);

// What a run sees of its own confinement, one "key=value" a line.
const PROBE = [
  'st() { while IFS= read -r l; do case $l in "$1:"*) printf "%s=%s\\n" "$1" "$(echo ${l#*:})";; esac; done </proc/self/status; }',
  'st Uid; st CapEff; st CapBnd; st NoNewPrivs; st Seccomp',
  'echo "net=$(ls /sys/class/net | tr "\\n" " ")"',
  'echo "pids=$(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max)"',
  'echo "mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"',
  'if touch /probe 2>/dev/null; then echo root=rw; else echo root=ro; fi',
  'echo "cgroup=$(grep -o "mcpsdlab-n[0-9]" /proc/self/cgroup | head -1)"',
].join('\n');

function probeMap(text) {
  return Object.fromEntries(
    text
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1).trim()]),
  );
}

describe('swarm backend', { timeout: 120_000, skip: NO_LAB }, () => {
  let d, watch;
  before(async () => {
    watch = await deleteWatcher(path.join(LAB, 'shared', 'a-api.sock'));
    d = await swarmDaemon('a', { WORKSPACE_QUOTA_MODE: 'loop', WORKSPACE_QUOTA_MB: '8', SANDBOX_OUTPUT_INLINE_BYTES: '256k', DOCKER_HOST: `unix://${watch.file}` });
  });
  after(async () => {
    await stopDaemon(d);
    await watch?.close();
  });

  test('the lab is a swarm of a manager and two sandbox workers', async () => {
    const nodes = await api('n1', '/nodes');
    assert.equal(nodes.length, 3);
    assert.ok(nodes.every((n) => n.Status.State === 'ready'), JSON.stringify(nodes.map((n) => n.Status)));
    const sandbox = nodes.filter((n) => n.Spec.Labels?.['mcp-sandboxd.sandbox'] === 'true');
    assert.equal(sandbox.length, 2);
    // The daemon's node check ran the preamble on both.
    let h;
    for (let i = 0; i < 60; i++) {
      h = await d.health();
      if (h.swarm?.checked) break;
      await sleep(500);
    }
    assert.equal(h.swarm.sandbox_nodes, 2, JSON.stringify(h.swarm));
    assert.equal(h.swarm.sandbox_nodes_ok, 2, JSON.stringify(h.swarm));
  });

  test('runs land on the workers with the hardening of a local run', async (t) => {
    const seen = new Set();
    for (let i = 0; i < 4; i++) {
      const r = await bash(d.client, PROBE, { conversationId: `probe-${i}` });
      assert.equal(r.sc?.status, 'completed', r.text);
      const p = probeMap(r.sc.stdout);
      t.diagnostic(JSON.stringify(p));
      assert.match(p.cgroup, /^mcpsdlab-n[23]$/, 'ran on a worker, not the manager');
      seen.add(p.cgroup);
      assert.match(p.Uid, /^64321\b/);
      assert.equal(p.CapEff, '0000000000000000');
      assert.equal(p.CapBnd, '0000000000000000');
      assert.equal(p.NoNewPrivs, '1');
      assert.equal(p.Seccomp, '2');
      assert.equal(p.net, 'lo');
      assert.equal(p.pids, '128');
      assert.equal(p.mem, String(256 * 1024 * 1024));
      assert.equal(p.root, 'ro');
    }
    t.diagnostic(`nodes used: ${[...seen].join(', ')}`);
  });

  test('the same probe on the local engine shows the same confinement', async () => {
    const local = await startDaemon({ name: 'swarm-local', env: { MCP_INSTANCE_NAME: `lab-local-${process.pid}`, WORKSPACE_QUOTA_MODE: 'none', MCP_LOG_LEVEL: 'info' } });
    try {
      const lc = await connectHttp(local);
      const l = probeMap((await bash(lc, PROBE, { conversationId: 'probe-local' })).sc.stdout);
      const s = probeMap((await bash(d.client, PROBE, { conversationId: 'probe-swarm' })).sc.stdout);
      await lc.close();
      for (const k of ['Uid', 'CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp', 'net', 'pids', 'mem', 'root']) assert.equal(s[k], l[k], `${k}: swarm ${s[k]}, local ${l[k]}`);
    } finally {
      await local.stop();
    }
  });

  test('stdout and stderr come back separate and exact', async () => {
    // Lines under 16 KiB: engine 20.10's log path drops the newline that
    // ends a longer line (docs/deployment.md, "What does not work yet").
    const code = String.raw`for i in $(seq 1 500); do printf '%079d\n' $i; done; printf 'x\r\ny\n\tz'; printf 'err1\n' >&2; printf 'é€😀' ; printf 'tail-no-newline' >&2`;
    const r = await bash(d.client, code, { conversationId: 'bytes' });
    assert.equal(r.sc.status, 'completed', r.text);
    const lines = Array.from({ length: 500 }, (_, i) => String(i + 1).padStart(79, '0') + '\n').join('');
    const want = lines + 'x\r\ny\n\tzé€😀';
    assert.equal(r.sc.stdout.length, want.length, 'stdout length');
    assert.ok(r.sc.stdout === want, `stdout differs from byte ${[...want].findIndex((c, i) => c !== r.sc.stdout[i])}`);
    assert.equal(r.sc.stderr, 'err1\ntail-no-newline');
    assert.equal(r.sc.stdout_bytes, 40000 + 7 + 9);
    assert.equal(r.sc.stderr_bytes, 20);
  });

  test('stdin reaches the program, exit codes come back', async () => {
    const r = await bash(d.client, 'read a; read b; echo "$b $a"; exit 7', { conversationId: 'exit', stdin: 'one\ntwo\n' });
    assert.equal(r.sc.status, 'failed');
    assert.equal(r.sc.exit_code, 7);
    assert.equal(r.sc.stdout, 'two one\n');
    const ok = await bash(d.client, 'true', { conversationId: 'exit' });
    assert.equal(ok.sc.status, 'completed');
    assert.equal(ok.sc.exit_code, 0);
  });

  test('a run past its time limit is stopped and its service removed', async () => {
    const r = await bash(d.client, 'echo start; sleep 60', { conversationId: 'timeout', timeout_seconds: 3 });
    assert.equal(r.sc.status, 'timed_out', r.text);
    assert.equal(r.sc.stdout, 'start\n');
    assert.ok(r.sc.duration_ms >= 3000 && r.sc.duration_ms < 15000, `duration ${r.sc.duration_ms}`);
    const l = await waitClean(30_000);
    assert.deepEqual(l, { services: [], tasks: [], containers: [] });
  });

  test('a cancelled run is stopped and its service removed', async () => {
    const ac = new AbortController();
    const call = bash(d.client, 'echo started; sleep 60', { conversationId: 'cancel' }, { request: { signal: ac.signal } });
    const settled = call.then((r) => ({ r }), (e) => ({ e }));
    let running = false;
    for (let i = 0; i < 120 && !running; i++) {
      running = (await api('n1', '/tasks')).some((t) => t.Status.State === 'running');
      if (!running) await sleep(250);
    }
    assert.ok(running, 'the task ran before the cancel');
    ac.abort('the test cancels');
    assert.ok((await settled).e, 'the call rejects once aborted');
    const l = await waitClean(30_000);
    assert.deepEqual(l, { services: [], tasks: [], containers: [] });
  });

  test('the workspace quota holds on a worker', async () => {
    const r = await bash(d.client, 'head -c 20000000 /dev/zero > big; echo "rc=$?"; stat -c %s big', { conversationId: 'quota' });
    assert.match(r.sc.stderr, /No space left on device/, r.text);
    assert.match(r.sc.stdout, /rc=1/);
    const size = Number(r.sc.stdout.trim().split('\n').pop());
    assert.ok(size < 8 * 1024 * 1024, `the file stopped below the 8 MB quota: ${size}`);
  });

  // A service removed while Swarm's task reaper deletes one of its tasks can
  // crash the manager (moby/swarmkit#3216; it did in this lab). The reaper
  // deletes the stopped tasks whose desired state is "remove", which a scale
  // to 0 gives them: the daemon must remove a service only while none of its
  // tasks has it. The runs above ended both ways: by themselves (their task
  // is left as it is) and stopped by the daemon (time limit, cancel: scaled
  // to 0, and removed once the reaper took the task).
  test("no service is removed while Swarm's task reaper may be deleting one of its tasks", async (t) => {
    assert.deepEqual(await waitClean(30_000), { services: [], tasks: [], containers: [] });
    const ds = watch.deletes;
    const bad = ds.filter((x) => x.tasks.some((k) => k.desired === 'remove' || k.error));
    const ended = ds.filter((x) => x.tasks.length && !bad.includes(x));
    const reaped = ds.filter((x) => x.tasks.length === 0);
    t.diagnostic(`removals: ${ds.length}; with the task as it ended: ${ended.length}; after the reaper: ${reaped.length}; too early: ${bad.length}`);
    assert.deepEqual(bad, [], 'services removed while a task of theirs had the desired state "remove"');
    assert.ok(ended.length >= 8, `runs that ended by themselves: ${ended.length} of ${ds.length} removals`);
    assert.ok(reaped.length >= 2, `runs stopped by the daemon (time limit, cancel): ${reaped.length} of ${ds.length} removals`);
  });
});

describe('swarm backend: the cluster queue and the conversation lock', { timeout: 180_000, skip: NO_LAB }, () => {
  let a, b;
  before(async () => {
    // Two daemons on one swarm, each with its own root (replicas.test.mjs
    // shares one): the conversation's lock is the service name, the same
    // on both, so it must hold across them. Quota mode none, as replicas
    // and hosts without a shared mount namespace use: the quota watch.
    const env = { WORKSPACE_QUOTA_MODE: 'none', WORKSPACE_QUOTA_MB: '8', SANDBOX_CPUS: '1', SANDBOX_MAX_CONCURRENT: '16', SANDBOX_QUEUE_LENGTH: '64' };
    a = await swarmDaemon('qa', env);
    b = await swarmDaemon('qb', env);
  });
  after(async () => {
    await stopDaemon(b);
    await stopDaemon(a);
  });

  test('quota mode none: a run on a worker writing past the quota is stopped by the watch (quota_exceeded)', async (t) => {
    const code = 'for i in $(seq 200); do head -c 1048576 /dev/zero >> big.$((i / 4)); sleep 0.05; done; echo not stopped';
    const r = await bash(a.client, code, { conversationId: 'quota-watch', timeout_seconds: 60 });
    assert.equal(r.sc.status, 'quota_exceeded', r.text);
    assert.doesNotMatch(r.sc.stdout, /not stopped/);
    assert.match(r.text, /passed the workspace quota during the run/);
    const next = await bash(a.client, 'echo hi', { conversationId: 'quota-watch' });
    assert.match(next.text, /over its quota/);
    t.diagnostic(`stopped after ${r.sc.duration_ms} ms`);
  });

  test('three times more runs than the cluster has room for all complete', async (t) => {
    // Two workers of 2 CPUs, 1 CPU reserved per run: room for 4.
    const n = 12;
    const t0 = Date.now();
    const code = 'date +%s%N; sleep 2; date +%s%N; grep -o "mcpsdlab-n[0-9]" /proc/self/cgroup | head -1';
    const runs = await Promise.all(Array.from({ length: n }, (_, i) => bash(i % 2 ? b.client : a.client, code, { conversationId: `q-${i}` })));
    for (const r of runs) assert.equal(r.sc.status, 'completed', r.text);
    const out = runs.map((r) => r.sc.stdout.trim().split('\n'));
    const spans = out.map(([s, e]) => [s, e].map((x) => Number(BigInt(x) / 1000000n)));
    const nodes = new Set(out.map((o) => o[2]));
    assert.deepEqual([...nodes].sort(), ['mcpsdlab-n2', 'mcpsdlab-n3'], 'the runs spread over both workers');
    // At no moment did more than 4 run at once.
    const events = spans.flatMap(([s, e]) => [
      [s, 1],
      [e, -1],
    ]);
    events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let cur = 0,
      max = 0;
    for (const [, dlt] of events) max = Math.max(max, (cur += dlt));
    const queued = runs.filter((r) => r.sc.queue_ms >= 1000).length;
    t.diagnostic(`${n} runs in ${Date.now() - t0} ms, at most ${max} at once, ${queued} waited >= 1 s`);
    assert.ok(max <= 4, `at most 4 at once, saw ${max}`);
    assert.ok(queued >= n - 4 - 2, `most runs waited in the Swarm's queue (${queued})`);
  });

  test('two runs of one conversation through two daemons never overlap', async () => {
    const code = 'date +%s%N; sleep 2; date +%s%N';
    const [r1, r2] = await Promise.all([bash(a.client, code, { conversationId: 'serial' }), bash(b.client, code, { conversationId: 'serial' })]);
    assert.equal(r1.sc.status, 'completed', r1.text);
    assert.equal(r2.sc.status, 'completed', r2.text);
    const span = (r) => r.sc.stdout.trim().split('\n').map((x) => BigInt(x));
    const [s1, e1] = span(r1);
    const [s2, e2] = span(r2);
    assert.ok(e1 <= s2 || e2 <= s1, `the runs overlapped: ${[s1, e1, s2, e2]}`);
    // The one that waited did so in the daemon (queue_ms), not in the task.
    assert.ok(Math.max(r1.sc.queue_ms, r2.sc.queue_ms) >= 1500, `queue_ms ${r1.sc.queue_ms}, ${r2.sc.queue_ms}`);
  });

  test('a worker cut off mid-run ends in a clear result, and the lock is freed', async (t) => {
    const call = bash(a.client, 'echo started; sleep 60', { conversationId: 'cut', timeout_seconds: 25 });
    let task;
    for (let i = 0; i < 120 && !task; i++) {
      task = (await api('n1', '/tasks')).find((x) => x.Status.State === 'running');
      if (!task) await sleep(250);
    }
    assert.ok(task, 'the run started');
    const node = ['n2', 'n3'].find((n) => lab('docker', n, 'info', '--format', '{{.Swarm.NodeID}}').trim() === task.NodeID);
    assert.ok(node, 'the task is on a worker');
    const tCut = Date.now();
    lab('cut', node);
    try {
      const r = await call;
      t.diagnostic(`result after ${Date.now() - tCut} ms: ${r.sc.status}: ${r.sc.message}`);
      assert.equal(r.sc.status, 'error', r.text);
      assert.match(r.sc.message, /stopped answering/);
      assert.equal(r.sc.stdout, 'started\n');
      // The next run of the conversation waits for the lost one's hard
      // deadline, not forever, and runs on the node that is left.
      const t1 = Date.now();
      const next = await bash(b.client, 'echo again', { conversationId: 'cut' }, { timeoutMs: 180_000 });
      t.diagnostic(`the next run of the conversation finished ${Date.now() - t1} ms later`);
      assert.equal(next.sc.status, 'completed', next.text);
    } finally {
      lab('heal', node);
    }
    // Healed: Swarm removes the lost task's container there too.
    const l = await waitClean(120_000);
    assert.deepEqual(l, { services: [], tasks: [], containers: [] });
  });
});

/** The samples of a Prometheus text exposition: [{ name, labels, value }]. */
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_][a-z0-9_]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const sum = (samples, name, want = {}) =>
  samples.filter((s) => s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);

describe('swarm backend: /metrics', { timeout: 120_000, skip: NO_LAB }, () => {
  const METRICS = randomBytes(24).toString('hex');
  let d;
  before(async () => {
    d = await swarmDaemon('m', { WORKSPACE_QUOTA_MODE: 'none', METRICS_TOKEN: METRICS });
    for (let i = 0; i < 60 && !(await d.health()).swarm?.checked; i++) await sleep(500);
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('counts the swarm runs by status and language, and the engine and its nodes', async () => {
    const rs = await Promise.all([
      bash(d.client, 'echo a', { conversationId: 'm1' }),
      bash(d.client, 'echo b', { conversationId: 'm2' }),
      bash(d.client, 'exit 3', { conversationId: 'm3' }),
      bash(d.client, 'sleep 30', { conversationId: 'm4', timeout_seconds: 2 }),
    ]);
    assert.deepEqual(
      rs.map((r) => r.sc.status),
      ['completed', 'completed', 'failed', 'timed_out'],
    );
    const url = `${d.base}/metrics`;
    const none = await fetch(url);
    assert.equal(none.status, 401, 'METRICS_TOKEN set: no token, no metrics');
    const apiTok = await fetch(url, { headers: { Authorization: `Bearer ${d.token}` } });
    assert.equal(apiTok.status, 401, 'the API token does not open /metrics');
    const res = await fetch(url, { headers: { Authorization: `Bearer ${METRICS}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    const m = parseMetrics(await res.text());
    assert.equal(sum(m, 'mcpsd_runs_total', { status: 'completed', language: 'bash' }), 2);
    assert.equal(sum(m, 'mcpsd_runs_total', { status: 'failed', language: 'bash' }), 1);
    assert.equal(sum(m, 'mcpsd_runs_total', { status: 'timed_out', language: 'bash' }), 1);
    assert.equal(sum(m, 'mcpsd_run_queue_seconds_count'), 4);
    assert.equal(sum(m, 'mcpsd_run_duration_seconds_count', { language: 'bash' }), 4);
    assert.equal(sum(m, 'mcpsd_engine_up'), 1);
    assert.equal(sum(m, 'mcpsd_swarm_sandbox_nodes', { state: 'eligible' }), 2);
    assert.equal(sum(m, 'mcpsd_swarm_sandbox_nodes', { state: 'ok' }), 2);
    assert.ok(sum(m, 'mcpsd_http_requests_total', { route: '/mcp', status: '200' }) >= 4, 'HTTP requests by route and status');
    assert.ok(sum(m, 'mcpsd_http_requests_total', { route: '/metrics', status: '401' }) >= 2);
  });

  test("Debian's Prometheus scrapes it, and a query returns the runs above", async (t) => {
    const bin = ['/usr/bin/prometheus', '/usr/sbin/prometheus'].find((p) => existsSync(p));
    if (!bin) return t.skip('no prometheus (apt-get install prometheus; tests/run.sh does)');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-prom-'));
    const port = await freePort();
    writeFileSync(path.join(dir, 'token'), METRICS, { mode: 0o600 });
    writeFileSync(
      path.join(dir, 'prometheus.yml'),
      [
        'global: {scrape_interval: 1s, evaluation_interval: 1s}',
        'scrape_configs:',
        '  - job_name: mcpsd',
        `    authorization: {credentials_file: ${dir}/token}`,
        `    static_configs: [{targets: ['${new URL(d.base).host}']}]`,
      ].join('\n') + '\n',
    );
    const prom = spawn(bin, [`--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    prom.stderr.on('data', (c) => (log = (log + c).slice(-4000)));
    const query = async (q) => {
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
      const j = await r.json();
      return j.data?.result?.[0]?.value?.[1];
    };
    try {
      let got = {};
      for (let i = 0; i < 120; i++) {
        try {
          got = {
            up: await query('up{job="mcpsd"}'),
            completed: await query('sum(mcpsd_runs_total{job="mcpsd",status="completed",language="bash"})'),
            failed: await query('sum(mcpsd_runs_total{job="mcpsd",status="failed"})'),
            timed_out: await query('sum(mcpsd_runs_total{job="mcpsd",status="timed_out"})'),
          };
          if (got.up === '1' && got.completed !== undefined) break;
        } catch {
          /* not up yet */
        }
        await sleep(500);
      }
      assert.deepEqual(got, { up: '1', completed: '2', failed: '1', timed_out: '1' }, `prometheus log: ${log}`);
    } finally {
      const done = new Promise((r) => prom.once('exit', r));
      prom.kill('SIGTERM');
      await done;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The services of one daemon (its instance name), with their labels. */
async function servicesOf(instance) {
  const f = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${instance}`] }));
  return (await api('n1', `/services?filters=${f}`)).map((s) => ({ id: s.ID, name: s.Spec.Name, labels: s.Spec.Labels ?? {} }));
}

/** Tasks (manager) and containers (workers) of these service ids. */
async function remainsOf(ids) {
  const tasks = (await api('n1', '/tasks')).filter((t) => ids.includes(t.ServiceID)).map((t) => `${t.ServiceID.slice(0, 8)}:${t.Status.State}`);
  const containers = [];
  for (const n of ['n2', 'n3']) {
    for (const c of await api(n, '/containers/json?all=1')) {
      if (ids.includes(c.Labels?.['com.docker.swarm.service.id'])) containers.push(`${n}:${c.Id.slice(0, 12)}:${c.State}`);
    }
  }
  return { tasks, containers };
}

/** Polls fn every 500 ms until it returns a truthy value or ms pass; the last value. */
async function until(ms, fn) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v || Date.now() - t0 > ms) return v;
    await sleep(500);
  }
}

async function checked(d) {
  return until(60_000, async () => (await d.health()).swarm?.checked);
}

describe('swarm backend: a daemon killed with SIGKILL', { timeout: 300_000, skip: NO_LAB }, () => {
  // Two daemons of their own instance names run code; both are killed
  // with -9 while their services run. ka is started again (same name and
  // root, a new boot id): its start-up reaping removes the services of its
  // earlier boot. kb stays dead: its services (a short run, a short queue
  // timeout, so a deadline label about half a minute ahead) are reaped by
  // ka, a daemon of another name, once past that deadline and the reaper's
  // grace (SANDBOX_REAP_GRACE_SECONDS, 60 s by default, scaled down here).
  const GRACE_S = 10;
  const base = { WORKSPACE_QUOTA_MODE: 'none', SANDBOX_REAP_GRACE_SECONDS: String(GRACE_S) };
  let ka, kb, ka2;
  let kbServices = [];
  after(async () => {
    for (const d of [ka2, ka, kb]) await stopDaemon(d).catch(() => {});
  });

  test('a restarted daemon removes the services of its killed boot, and their tasks and containers', async (t) => {
    ka = await swarmDaemon('ka', base);
    kb = await swarmDaemon('kb', { ...base, SWARM_QUEUE_TIMEOUT_SECONDS: '1' });
    assert.ok(await checked(ka), 'ka checked its nodes');
    assert.ok(await checked(kb), 'kb checked its nodes');
    const calls = [
      bash(ka.client, 'echo started; sleep 300', { conversationId: 'kill-a1' }),
      bash(ka.client, 'echo started; sleep 300', { conversationId: 'kill-a2' }),
      bash(kb.client, 'echo started; sleep 300', { conversationId: 'kill-b1', timeout_seconds: 15 }),
      bash(kb.client, 'echo started; sleep 300', { conversationId: 'kill-b2', timeout_seconds: 15 }),
    ].map((c) => c.then((r) => ({ r }), (e) => ({ e })));
    const running = await until(90_000, async () => {
      const ids = [...(await servicesOf('lab-ka')), ...(await servicesOf('lab-kb'))].map((s) => s.id);
      const tasks = (await api('n1', '/tasks')).filter((x) => ids.includes(x.ServiceID) && x.Status.State === 'running');
      return tasks.length === 4 && tasks;
    });
    assert.ok(running, 'the four runs were running before the kill');
    await Promise.all([ka.stop('SIGKILL'), kb.stop('SIGKILL')]);
    for (const c of await Promise.all(calls)) assert.ok(c.e || c.r.sc?.status !== 'completed', `a run of a killed daemon did not complete: ${JSON.stringify(c.r?.sc)}`);
    // The kill left the services and their running tasks behind.
    const kaServices = await servicesOf('lab-ka');
    kbServices = await servicesOf('lab-kb');
    assert.equal(kaServices.length, 2, JSON.stringify(kaServices));
    assert.equal(kbServices.length, 2, JSON.stringify(kbServices));
    const kaIds = kaServices.map((s) => s.id);
    assert.equal((await remainsOf(kaIds)).containers.filter((c) => c.endsWith(':running')).length, 2, 'ka left its containers running');

    ka2 = await swarmDaemon('ka', { ...base, SANDBOX_REAP_INTERVAL_SECONDS: '2', SWARM_QUEUE_TIMEOUT_SECONDS: '60' });
    const t0 = Date.now();
    let left;
    const gone = await until(60_000, async () => {
      left = { services: (await servicesOf('lab-ka')).map((s) => s.id), ...(await remainsOf(kaIds)) };
      return !left.services.length && !left.tasks.length && !left.containers.length;
    });
    assert.ok(gone, `the restarted daemon removed its earlier boot's services, tasks and containers: ${JSON.stringify(left)}`);
    t.diagnostic(`ka's earlier boot cleaned up ${Date.now() - t0} ms after its restart began`);
    for (const id of kaIds) await ka2.waitLog(new RegExp(`reaped leftover service ${id}`), 5000, `ka's log names ${id}`);
    // Not kb's: their deadline is still ahead.
    const now = Date.now() / 1000;
    const still = await servicesOf('lab-kb');
    for (const s of kbServices) {
      if (now < Number(s.labels['sandbox.deadline']) + GRACE_S) assert.ok(still.some((x) => x.id === s.id), `kb's ${s.id} is kept until its deadline`);
    }
    for (const c of ['kill-a1', 'kill-a2']) {
      const r = await bash(ka2.client, 'echo again', { conversationId: c });
      assert.equal(r.sc?.status, 'completed', r.text);
      assert.equal(r.sc.stdout, 'again\n');
    }
  });

  test("another daemon reaps a killed daemon's services once past their deadline", async (t) => {
    assert.equal(kbServices.length, 2, 'the test before left kb killed with two services');
    const ids = kbServices.map((s) => s.id);
    const deadline = Math.max(...kbServices.map((s) => Number(s.labels['sandbox.deadline'])));
    assert.ok(deadline > 0 && deadline - Date.now() / 1000 < 120, `a near deadline label: ${deadline}`);
    // The reaper's grace and interval (2 s), with room for a slow machine.
    const budget = (deadline + GRACE_S - Date.now() / 1000) * 1000 + 45_000;
    let left;
    const gone = await until(budget, async () => {
      left = { services: (await servicesOf('lab-kb')).map((s) => s.id), ...(await remainsOf(ids)) };
      return !left.services.length && !left.tasks.length && !left.containers.length;
    });
    assert.ok(gone, `kb's services, tasks and containers were reaped: ${JSON.stringify(left)}`);
    const at = Date.now() / 1000;
    t.diagnostic(`kb's services gone ${Math.round(at - deadline)} s after their deadline label`);
    assert.ok(at >= deadline + GRACE_S, 'not before the deadline and the grace');
    for (const id of ids) await ka2.waitLog(new RegExp(`reaped leftover service ${id}`), 5000, `ka, of another instance name, reaped ${id}`);
    for (const c of ['kill-b1', 'kill-b2']) {
      const r = await bash(ka2.client, 'echo free', { conversationId: c });
      assert.equal(r.sc?.status, 'completed', r.text);
    }
    const l = await waitClean(60_000);
    assert.deepEqual(l, { services: [], tasks: [], containers: [] });
  });
});

describe('swarm backend: the end', { timeout: 90_000, skip: NO_LAB }, () => {
  test('after all of it no service, task or container is left on any node', async () => {
    const l = await waitClean(60_000);
    assert.deepEqual(l, { services: [], tasks: [], containers: [] });
  });
});
