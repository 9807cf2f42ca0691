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
// Environment: as for mcp_bench.mjs for the local daemon (BENCH_URL,
// BENCH_TOKEN, BENCH_PID, BENCH_ENV_FILE, BENCH_WORK, BENCH_RESULTS,
// BENCH_CREATE_BODY, DOCKER_SOCK); BENCH_SWARM_URL, BENCH_SWARM_TOKEN,
// BENCH_SWARM_PID for the swarm daemon; BENCH_LAB_WORKER_SOCK, the unix
// socket of a lab worker's engine.
import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectHttp } from '../integration/lib/daemon.mjs';
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

const [section, ...rest] = process.argv.slice(2);
const sections = { swarm: sectionSwarm };
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
