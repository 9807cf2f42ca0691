// SPDX-License-Identifier: MIT
// The swarm backend's cost per run (docs/deployment.md, "Docker Swarm"),
// measured the way a client sees it: a trivial Bash run through the
// official MCP SDK client on a daemon with SANDBOX_BACKEND=swarm on the lab
// of tests/swarm/lab.sh, next to the same run through a daemon of the local
// Docker backend with SANDBOX_WARM=false (a one-off container), and next to
// `docker run --rm` of the same image with the local daemon's create body
// (mcp_bench.mjs's cliArgs: the same limits, hardening and mounts), on the
// host's engine and on one of the lab's sandbox workers. All four are
// interleaved, rotating the order, in the same minutes. One JSON line per
// path goes to BENCH_RESULTS; `mcp_bench.mjs table` prints them. Figures
// are printed, never asserted.
//
//   node tests/bench/swarm_bench.mjs swarm [--runs 30 --warmup 2 --gap-ms 200]
//
// Section nodes (warm sessions on every node, docs/deployment.md): starts
// what it measures itself, on a running lab (tests/swarm/lab.sh up with
// mcp-sandboxd/runner-python:latest): a daemon on each lab worker (n2, n3)
// on that worker's engine, a scratch PostgreSQL, HAProxy with
// deploy/haproxy-nodes.cfg, and a single-host daemon on the host's engine,
// all with warm sessions. Measures warm Python print(1) through the SDK
// client (2026-07-28, the conversation header) on the single host and
// through the balancer on the lab, interleaved; then restores on another
// node after a kill: a conversation with some state, its node's daemon
// SIGKILLed, the time until the next call (through the balancer) has its
// result, restored; the daemon started again; repeated.
//
//   node tests/bench/swarm_bench.mjs nodes [--runs 40 --kills 5 --lease 1]
// Environment: MCPSD_BIN, MCPSD_LAB_DIR, BENCH_RESULTS.
// Environment: as for mcp_bench.mjs for the local daemon (BENCH_URL,
// BENCH_TOKEN, BENCH_PID, BENCH_ENV_FILE, BENCH_WORK, BENCH_RESULTS,
// BENCH_CREATE_BODY, DOCKER_SOCK); BENCH_SWARM_URL, BENCH_SWARM_TOKEN,
// BENCH_SWARM_PID for the swarm daemon; BENCH_LAB_WORKER_SOCK, the unix
// socket of a lab worker's engine.
import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectHttp, freePort, startDaemon } from '../integration/lib/daemon.mjs';
import { connectModern } from '../integration/lib/modern.mjs';
import { startPg } from '../integration/lib/pg.mjs';
import { cliArgs, cpuMeter, loadavg, mean, median, pct, r1, r2, record, sleep, wallMs } from './mcp_bench.mjs';

const env = process.env;
const CODE = 'echo hello\n';

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    o[argv[i].slice(2)] = argv[i + 1];
  }
  return o;
}

/** One run_code call; { ms, ok, sc, text }. */
async function call(client, conv) {
  const t0 = wallMs();
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'bash', code: CODE } }, undefined, {
    timeout: 300_000,
  });
  const ms = wallMs() - t0;
  const sc = r.structuredContent ?? {};
  const ok = !r.isError && sc.status === 'completed' && sc.stdout === 'hello\n';
  return { ms, ok, sc, text: ok ? '' : JSON.stringify(r).slice(0, 400) };
}

/** `docker ARGS` against the engine at host (a DOCKER_HOST value); { ms, ok, err }. */
function dockerRun(args, host) {
  return new Promise((resolve) => {
    const t0 = wallMs();
    const p = spawn('docker', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, DOCKER_HOST: host } });
    let out = '';
    let err = '';
    p.stdout.on('data', (c) => (out += c));
    p.stderr.on('data', (c) => (err += c));
    p.on('close', (code) => resolve({ ms: wallMs() - t0, ok: code === 0 && out === 'hello\n', err: `${code}: ${err.slice(0, 300)}` }));
  });
}

async function sectionSwarm(o) {
  const runs = parseInt(o.runs ?? '30', 10);
  const warmup = parseInt(o.warmup ?? '2', 10);
  const gap = parseInt(o['gap-ms'] ?? '200', 10);
  for (const k of ['BENCH_URL', 'BENCH_TOKEN', 'BENCH_SWARM_URL', 'BENCH_SWARM_TOKEN', 'BENCH_LAB_WORKER_SOCK'])
    if (!env[k]) throw new Error(`${k} is required (tests/bench/run.sh --only swarm sets it)`);
  const base = (u) => u.replace(/\/mcp$/, '');
  const local = await connectHttp({ url: env.BENCH_URL, base: base(env.BENCH_URL), token: env.BENCH_TOKEN });
  const swarm = await connectHttp({ url: env.BENCH_SWARM_URL, base: base(env.BENCH_SWARM_URL), token: env.BENCH_SWARM_TOKEN });
  const work = env.BENCH_WORK ?? os.tmpdir();
  const ws = path.join(work, 'swarm-cli-ws');
  const codeDir = path.join(work, 'swarm-cli-code');
  mkdirSync(ws, { recursive: true });
  mkdirSync(codeDir, { recursive: true });
  chownSync(ws, 64321, 64321);
  const { args, filename, unmapped } = await cliArgs('bash', ws, codeDir, work);
  writeFileSync(path.join(codeDir, filename), CODE);
  if (unmapped.length) console.log(`# bash: create body fields with no CLI flag: ${unmapped.join(', ')}`);
  console.log(`# CLI: docker ${args.map((x) => (x.includes(' ') ? `'${x}'` : x)).join(' ')}`);
  const hostEngine = `unix://${env.DOCKER_SOCK ?? '/var/run/docker.sock'}`;
  const worker = `unix://${env.BENCH_LAB_WORKER_SOCK}`;
  const paths = {
    'MCP, swarm backend (lab)': () => call(swarm, 'bench-swarm'),
    'MCP, local engine, SANDBOX_WARM=false': () => call(local, 'bench-local'),
    'docker run --rm, local engine': () => dockerRun(args, hostEngine),
    'docker run --rm, lab sandbox worker': () => dockerRun(args, worker),
  };
  const names = Object.keys(paths);
  const ms = Object.fromEntries(names.map((n) => [n, []]));
  const srv = Object.fromEntries(names.map((n) => [n, []]));
  const fails = Object.fromEntries(names.map((n) => [n, 0]));
  const meter = cpuMeter(Number(env.BENCH_SWARM_PID ?? env.BENCH_PID));
  for (let i = -warmup; i < runs; i++) {
    const k = ((i % names.length) + names.length) % names.length;
    for (const name of [...names.slice(k), ...names.slice(0, k)]) {
      const r = await paths[name]();
      if (!r.ok) {
        fails[name]++;
        console.log(`# ${name}: not completed: ${r.text ?? r.err}`);
      }
      if (i >= 0) {
        ms[name].push(r.ms);
        if (r.sc?.duration_ms !== undefined) srv[name].push(r.sc.duration_ms);
      }
      await sleep(gap);
    }
  }
  const cpu = meter.end();
  const cli = ms['docker run --rm, local engine'];
  for (const name of names) {
    const v = ms[name];
    const res = {
      section: 'swarm',
      path: name,
      runs,
      warmup,
      p50: r1(median(v)),
      p95: r1(pct(v, 95)),
      mean: r1(mean(v)),
      ratio_p50: r2(median(v) / median(cli)),
      ratio_p95: r2(pct(v, 95) / pct(cli, 95)),
      server_duration_p50: srv[name].length ? r1(median(srv[name])) : null,
      failures: fails[name],
      ...cpu,
    };
    record(res);
    console.log(
      `swarm ${name.padEnd(40)} p50 ${res.p50} p95 ${res.p95} ms | ratio to docker run p50 ${res.ratio_p50} p95 ${res.ratio_p95} | fails ${res.failures}`,
    );
  }
  console.log(`swarm: load ${cpu.load_start[0]}->${loadavg()[0]}, machine busy ${cpu.machine_busy_pct}%, ${cpu.wall_s} s`);
  await local.close();
  await swarm.close();
}

/* ---- nodes: warm sessions on every node -------------------------------- */

const LAB = env.MCPSD_LAB_DIR ?? '/var/tmp/mcpsd-swarm-lab';
const labSock = (n) => `${LAB}/${n}/docker.sock`;

/** A warm daemon; on a lab node n (with the shared settings) or the host. */
function warmDaemon(shared, n, port) {
  const node = n
    ? {
        DOCKER_HOST: `unix://${labSock(n)}`,
        MCP_REPLICA_NAME: n,
        MCP_INSTANCE_NAME: `bench-node-${n}`,
        MCP_CONVERSATION_LEASE_SECONDS: String(shared.lease),
        STORE_URL: shared.store,
        PUBLIC_BASE_URL: shared.lbBase,
      }
    : { MCP_INSTANCE_NAME: `bench-single-${process.pid}` };
  return startDaemon({
    name: n ? `bench-node-${n}` : 'bench-single',
    root: n ? shared.root : undefined,
    keepRoot: !!n,
    port,
    env: {
      MCP_API_TOKEN: shared.token,
      FILE_SECRET: shared.secret,
      MCP_LOG_LEVEL: 'info',
      SANDBOX_WARM: 'true',
      SANDBOX_POOL_SIZE: '1',
      SANDBOX_STATE: 'true',
      ...node,
    },
  }).then((d) => Object.assign(d, { token: shared.token }));
}

async function pyCall(client, conv, code) {
  const t0 = wallMs();
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code } }, undefined, { timeout: 300_000 });
  const sc = r.structuredContent ?? {};
  return { ms: wallMs() - t0, sc, ok: !r.isError && sc.status === 'completed' };
}

/** Which lab node has container h (a box's host name). */
async function labNodeOf(h) {
  for (const n of ['n2', 'n3']) {
    const ok = await new Promise((resolve) => {
      const p = spawn('docker', ['inspect', h], { env: { ...env, DOCKER_HOST: `unix://${labSock(n)}` }, stdio: 'ignore' });
      p.on('close', (c) => resolve(c === 0));
    });
    if (ok) return n;
  }
  return null;
}

async function sectionNodes(o) {
  const runs = parseInt(o.runs ?? '40', 10);
  const kills = parseInt(o.kills ?? '5', 10);
  const lease = parseInt(o.lease ?? '1', 10);
  const { randomBytes } = await import('node:crypto');
  const { mkdirSync: mk, rmSync } = await import('node:fs');
  const pg = startPg();
  if (!pg) throw new Error('PostgreSQL cannot start here');
  pg.psql('CREATE DATABASE bench_nodes OWNER mcpsd');
  const lbPort = await freePort();
  const shared = {
    lease,
    store: pg.url('bench_nodes'),
    token: randomBytes(24).toString('hex'),
    secret: randomBytes(32).toString('hex'),
    root: path.join(LAB, 'shared', 'bench-nodes'),
    lbBase: `http://127.0.0.1:${lbPort}`,
  };
  rmSync(shared.root, { recursive: true, force: true });
  mk(shared.root, { recursive: true });
  const ports = { n2: await freePort(), n3: await freePort() };
  const d = { n2: await warmDaemon(shared, 'n2', ports.n2), n3: await warmDaemon(shared, 'n3', ports.n3) };
  const single = await warmDaemon(shared, null);
  const lb = spawn('haproxy', ['-f', 'deploy/haproxy-nodes.cfg', '-db'], {
    env: {
      PATH: env.PATH,
      MCPSD_LB_BIND: `127.0.0.1:${lbPort}`,
      MCPSD_N1: `127.0.0.1:${ports.n2}`,
      MCPSD_N1_NAME: 'n2',
      MCPSD_N2: `127.0.0.1:${ports.n3}`,
      MCPSD_N2_NAME: 'n3',
    },
    stdio: 'ignore',
  });
  await sleep(3000);
  try {
    const viaLb = await connectModern({ url: `${shared.lbBase}/mcp`, token: shared.token });
    const direct = await connectModern(single);
    const paths = {
      'warm print(1), single host': () => pyCall(direct, 'bench-warm', 'print(1)'),
      'warm print(1), through the balancer (lab)': () => pyCall(viaLb, 'bench-warm', 'print(1)'),
    };
    const names = Object.keys(paths);
    const ms = Object.fromEntries(names.map((n) => [n, []]));
    for (let i = -3; i < runs; i++) {
      for (const name of i % 2 ? names : [...names].reverse()) {
        const r = await paths[name]();
        if (!r.ok) console.log(`# ${name}: not completed: ${JSON.stringify(r.sc).slice(0, 300)}`);
        if (i >= 0) ms[name].push(r.ms);
        await sleep(100);
      }
    }
    const base = median(ms[names[0]]);
    for (const name of names) {
      const v = ms[name];
      const res = { section: 'nodes', path: name, runs, p50: r1(median(v)), p95: r1(pct(v, 95)), ratio_p50: r2(median(v) / base) };
      record(res);
      console.log(`nodes ${name.padEnd(44)} p50 ${res.p50} p95 ${res.p95} ms | ratio to single host p50 ${res.ratio_p50}`);
    }
    const restore = [];
    for (let k = 0; k < kills; k++) {
      const conv = `bench-kill-${process.pid}-${k}`;
      let r = await pyCall(viaLb, conv, "import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})\nxs = list(range(10000))\nimport socket\nprint(socket.gethostname())");
      const victim = await labNodeOf(r.sc.stdout.trim());
      await sleep(1500); // the save after the run (a kill loses what came after it)
      d[victim].proc.kill('SIGKILL');
      const t0 = wallMs();
      await new Promise((res) => d[victim].proc.once('exit', res));
      r = await pyCall(viaLb, conv, 'print(len(xs), int(df.a.sum()))');
      const took = wallMs() - t0;
      const ok = r.ok && r.sc.session?.state === 'restored' && r.sc.stdout === '10000 499500\n';
      if (!ok) console.log(`# kill ${k}: ${JSON.stringify(r.sc).slice(0, 300)}`);
      restore.push(took);
      console.log(`# kill ${k} on ${victim}: restored elsewhere after ${r1(took)} ms (${ok ? 'ok' : 'NOT OK'}; restore ${r.sc.session?.restored?.ms} ms)`);
      d[victim] = await warmDaemon(shared, victim, ports[victim]);
      await sleep(7000); // the balancer sees it up again
    }
    const res = { section: 'nodes', path: `restore on another node after a kill (lease ${lease} s)`, runs: kills, p50: r1(median(restore)), p95: r1(pct(restore, 95)) };
    record(res);
    console.log(`nodes ${res.path.padEnd(44)} p50 ${res.p50} p95 ${res.p95} ms`);
    await viaLb.close();
    await direct.close();
  } finally {
    lb.kill('SIGTERM');
    for (const x of [d.n2, d.n3, single]) await x.stop('SIGTERM').catch(() => {});
    rmSync(shared.root, { recursive: true, force: true });
    pg.destroy();
  }
}

const [section, ...rest] = process.argv.slice(2);
const sections = { swarm: sectionSwarm, nodes: sectionNodes };
if (!sections[section]) {
  console.error(`usage: swarm_bench.mjs ${Object.keys(sections).join('|')} [--key value ...]`);
  process.exit(2);
}
const flushExit = (code) => process.stdout.write('', () => process.exit(code));
try {
  await sections[section](parseArgs(rest));
  flushExit(0);
} catch (e) {
  console.error(`swarm_bench ${section}: ${e.stack ?? e}`);
  flushExit(1);
}
