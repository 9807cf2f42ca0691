// SPDX-License-Identifier: MIT
// Warm sessions (docs/sessions.md) measured the way a client sees them:
// run_code through the official MCP SDK client on a running mcp-sandboxd
// with SANDBOX_WARM on, next to `docker run --rm` of the same runner image
// with the daemon's own create body (the same hardening, limits and
// mounts; see mcp_bench.mjs's cliArgs), interleaved in the same run. One
// JSON line per figure goes to BENCH_RESULTS; `mcp_bench.mjs table` prints
// them with issue 10's Must and Goal. Figures are printed, never asserted.
//
//   node tests/bench/warm_bench.mjs SECTION [--key value ...]
// Sections:
//   warm         against a daemon with the pool on: warm print(1) p50/p95;
//                a follow-up df.describe() after import pandas; the first
//                call of a new conversation from the pool; warm TypeScript
//                and Bash hello; N conversations x M warm calls at once
//                (--runs 30 --pool-runs 12 --conc 16 --calls 20)
//   warm-memory  against a daemon without the pool: the host memory of idle
//                warm boxes (the container's memory cgroup and its
//                containerd-shim), Python with nothing imported, Python
//                with pandas and matplotlib, Bash (--settle-ms 5000)
// The daemon is named by the environment as for mcp_bench.mjs (BENCH_URL,
// BENCH_TOKEN, BENCH_PID, BENCH_INSTANCE, BENCH_ENV_FILE, BENCH_WORK,
// BENCH_RESULTS, BENCH_CREATE_BODY, DOCKER_SOCK).
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { connectHttp } from '../integration/lib/daemon.mjs';
import {
  cliArgs,
  cpuMeter,
  daemon,
  dockerApi,
  health,
  loadavg,
  median,
  pct,
  r1,
  r2,
  record,
  runCli,
  sleep,
  wallMs,
} from './mcp_bench.mjs';

const env = process.env;

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    o[argv[i].slice(2)] = argv[i + 1];
  }
  return o;
}

/** One run_code call; { ms, sc, ok, text } with ok per check(sc). */
async function call(client, conv, language, code, check, extra = {}) {
  const t0 = wallMs();
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language, code, ...extra } }, undefined, {
    timeout: 300_000,
  });
  const ms = wallMs() - t0;
  const sc = r.structuredContent ?? {};
  const ok = !r.isError && sc.status === 'completed' && check(sc);
  return { ms, sc, ok, text: ok ? '' : JSON.stringify({ status: sc.status, session: sc.session, stdout: sc.stdout, stderr: sc.stderr, message: sc.message }).slice(0, 600) };
}

/** `docker run --rm` of lang's runner with the daemon's create body, running code. */
export async function cliFor(lang, code) {
  const work = env.BENCH_WORK ?? os.tmpdir();
  const ws = path.join(work, `warm-cli-ws-${lang}`);
  const codeDir = path.join(work, `warm-cli-code-${lang}`);
  mkdirSync(ws, { recursive: true });
  mkdirSync(codeDir, { recursive: true });
  chownSync(ws, 64321, 64321);
  const { args, filename } = await cliArgs(lang, ws, codeDir, work);
  writeFileSync(path.join(codeDir, filename), code);
  return {
    args,
    async run() {
      const r = await runCli(args);
      return { ms: r.t1 - r.t0, ok: r.code === 0, out: r.out, err: r.err };
    },
  };
}

/**
 * Waits until the pool holds at least n boxes, none is starting and the
 * count held still for 2 s (the pool refills a box a tick: between two
 * starts nothing is starting). With every installed language pooled (the
 * default), pass the full pool's count: fewer boxes do not say that the
 * box a claim took was replaced (a claimed box keeps its pool label).
 */
export async function waitPool(d, n, ms = 300_000) {
  const end = Date.now() + ms;
  let last = '';
  let since = Date.now();
  for (;;) {
    const w = (await health(d)).warm;
    if (!w) throw new Error('the daemon has no warm sessions (SANDBOX_WARM=false?)');
    if (!w.pool_enabled) throw new Error('the daemon has no pool (SANDBOX_POOL_SIZE=0?)');
    const now = `${w.pool}/${w.pool_starting}`;
    if (now !== last) {
      last = now;
      since = Date.now();
    }
    if (w.pool >= n && !w.pool_starting && Date.now() - since >= 2000) return w;
    if (Date.now() > end) throw new Error(`the pool did not fill: ${JSON.stringify(w)}`);
    await sleep(250);
  }
}

/**
 * Measures runs of mcp() (a warm call) and cli() (docker run --rm)
 * interleaved, rotating which goes first, after warmup rounds of both.
 */
async function sideBySide(label, runs, warmup, mcp, cli, gapMs = 100) {
  const m = [];
  const c = [];
  let fails = 0;
  for (let i = -warmup; i < runs; i++) {
    const order = i % 2 ? [mcp, cli] : [cli, mcp];
    for (const f of order) {
      const r = await f();
      if (!r.ok) {
        fails++;
        console.log(`# ${label}: ${f === mcp ? 'run_code' : 'docker run'} failed: ${r.text ?? r.err?.slice(0, 300)}`);
      }
      if (i >= 0) (f === mcp ? m : c).push(r.ms);
      await sleep(gapMs);
    }
  }
  return { m, c, fails };
}

function summary(name, m, c, extra = {}) {
  return {
    section: 'warm',
    measure: name,
    n: m.length,
    mcp_p50: r1(median(m)),
    mcp_p95: r1(pct(m, 95)),
    cli_p50: c.length ? r1(median(c)) : null,
    cli_p95: c.length ? r1(pct(c, 95)) : null,
    ratio_p50: c.length ? r2(median(m) / median(c)) : null,
    ratio_p95: c.length ? r2(pct(m, 95) / pct(c, 95)) : null,
    load: loadavg(),
    ...extra,
  };
}

function report(res) {
  record(res);
  const ratio = res.ratio_p50 !== null ? ` | docker run --rm p50 ${res.cli_p50} p95 ${res.cli_p95} ms | ratio p50 ${res.ratio_p50} p95 ${res.ratio_p95}` : '';
  console.log(`warm ${res.measure.padEnd(34)} p50 ${res.mcp_p50} p95 ${res.mcp_p95} ms (n ${res.n}, fails ${res.fails ?? 0})${ratio} | load ${res.load[0]}`);
}

// ---- warm --------------------------------------------------------------------
async function sectionWarm(o) {
  const d = daemon();
  const runs = parseInt(o.runs ?? '30', 10);
  const poolRuns = parseInt(o['pool-runs'] ?? '12', 10);
  const warmup = parseInt(o.warmup ?? '2', 10);
  const conc = parseInt(o.conc ?? '16', 10);
  const perConv = parseInt(o.calls ?? '20', 10);
  const client = await connectHttp(d);
  // The full pool (every pooled language's box), what each pool hit waits for.
  const full = (await waitPool(d, 3)).pool;
  const meter = cpuMeter(Number(env.BENCH_PID));

  // 1. Warm print(1), next to docker run --rm of print(1).
  const pyCli = await cliFor('python', 'print(1)\n');
  console.log(`# python CLI: docker ${pyCli.args.join(' ').slice(0, 400)} ...`);
  const one = (sc) => sc.stdout === '1\n';
  const first = await call(client, 'bench-warm-print', 'python', 'print(1)', one);
  if (!first.ok) throw new Error(`the first warm run failed: ${first.text}`);
  const p = await sideBySide('print(1)', runs, warmup, () => call(client, 'bench-warm-print', 'python', 'print(1)', one), () => pyCli.run());
  report(summary('python print(1), warm', p.m, p.c, { fails: p.fails, must: 'p50 <= 0.15x, p95 <= 0.3x', goal: 'p50 <= 0.1x (~30 ms), p95 <= 0.25x' }));

  // 2. A follow-up after import pandas: df.describe() on a loaded frame.
  const setup = await call(
    client,
    'bench-warm-pandas',
    'python',
    "import numpy as np\nimport pandas as pd\ndf = pd.DataFrame(np.random.default_rng(1).random((50000, 8)), columns=list('abcdefgh'))\nprint(len(df))",
    (sc) => sc.stdout === '50000\n',
  );
  if (!setup.ok) throw new Error(`loading the frame failed: ${setup.text}`);
  const desc = [];
  let descFails = 0;
  for (let i = -warmup; i < runs; i++) {
    const r = await call(client, 'bench-warm-pandas', 'python', 'df.describe()', (sc) => /count\s+50000/.test(sc.value?.['text/plain'] ?? ''));
    if (!r.ok) {
      descFails++;
      console.log(`# df.describe() failed: ${r.text}`);
    }
    if (i >= 0) desc.push(r.ms);
    await sleep(100);
  }
  report(summary('df.describe() after import pandas', desc, [], { fails: descFails, must: 'p50 <= 150 ms', goal: 'p50 <= 80 ms', frame: '50,000 x 8 floats' }));

  // 3. The first call of a new conversation, from the pool.
  const pool = [];
  const poolCli = [];
  let poolFails = 0;
  let misses = 0;
  for (let i = 0; i < poolRuns; i++) {
    await waitPool(d, full);
    await sleep(500); // the refill's start is over
    const cl = await pyCli.run();
    poolCli.push(cl.ms);
    await sleep(100);
    const r = await call(client, `bench-warm-pool-${i}-${Date.now()}`, 'python', 'print(1)', one);
    if (!r.ok) {
      poolFails++;
      console.log(`# pool hit ${i} failed: ${r.text}`);
    }
    if (!r.sc.session?.from_pool) misses++;
    pool.push(r.ms);
  }
  report(summary('first call of a conversation (pool hit)', pool, poolCli, { fails: poolFails, pool_misses: misses, must: 'p50 <= 0.4x', goal: 'p50 <= 0.25x' }));

  // 4. Warm TypeScript and Bash hello.
  for (const [lang, code] of [
    ['typescript', "console.log('hello')\n"],
    ['bash', 'echo hello\n'],
  ]) {
    const cli = await cliFor(lang, code);
    const hello = (sc) => sc.stdout === 'hello\n';
    const conv = `bench-warm-${lang}`;
    const w = await call(client, conv, lang, code, hello);
    if (!w.ok) throw new Error(`the first warm ${lang} run failed: ${w.text}`);
    const r = await sideBySide(lang, runs, warmup, () => call(client, conv, lang, code, hello), () => cli.run());
    report(summary(`${lang} hello, warm`, r.m, r.c, { fails: r.fails, must: 'p50 <= 0.4x', goal: 'p50 <= 0.3x' }));
  }
  const cpu = meter.end();
  await client.close();

  // 5. N conversations x M warm calls at once, one SDK client each.
  const clients = [];
  for (let i = 0; i < conc; i++) clients.push(await connectHttp(d));
  const tag = Date.now();
  const warmed = await Promise.all(clients.map((c, i) => call(c, `bench-warm-conc-${tag}-${i}`, 'python', 'print(1)', one)));
  const notWarm = warmed.filter((r) => !r.ok).length;
  const statuses = {};
  const lat = [];
  let maxQueued = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      maxQueued = Math.max(maxQueued, (await health(d)).runs?.queued ?? 0);
      await sleep(100);
    }
  })();
  const m2 = cpuMeter(Number(env.BENCH_PID));
  const t0 = wallMs();
  await Promise.all(
    clients.map(async (c, i) => {
      for (let k = 0; k < perConv; k++) {
        const r = await call(c, `bench-warm-conc-${tag}-${i}`, 'python', 'print(1)', one);
        const st = r.sc.status ?? 'no-result';
        statuses[st] = (statuses[st] ?? 0) + 1;
        if (r.sc.session?.state !== 'continued') statuses[`session ${r.sc.session?.state}`] = (statuses[`session ${r.sc.session?.state}`] ?? 0) + 1;
        if (r.ok) lat.push(r.ms);
      }
    }),
  );
  const wall = (wallMs() - t0) / 1000;
  polling = false;
  await poller;
  const cpu2 = m2.end();
  await Promise.all(clients.map((c) => c.close()));
  const total = conc * perConv;
  const res = {
    section: 'warm',
    measure: `${conc} conversations x ${perConv} warm calls at once (one tenant)`,
    n: lat.length,
    calls: total,
    completed: statuses.completed ?? 0,
    busy: statuses.busy ?? 0,
    statuses,
    warmup_failures: notWarm,
    calls_per_s: r1(lat.length / wall),
    mcp_p50: r1(median(lat)),
    mcp_p95: r1(pct(lat, 95)),
    queued_max: maxQueued,
    wall_s: r1(wall),
    daemon_cpu_ms_per_call: r1(cpu2.daemon_cpu_ms / Math.max(1, lat.length)),
    machine_busy_pct: cpu2.machine_busy_pct,
    load: loadavg(),
    must: 'all complete, none busy',
    goal: '>= 30 calls/s',
  };
  record(res);
  console.log(
    `warm ${res.measure}: ${res.completed}/${total} completed, busy ${res.busy}, ${res.calls_per_s} calls/s, p50 ${res.mcp_p50} p95 ${res.mcp_p95} ms, queued max ${maxQueued}, ${JSON.stringify(statuses)}, CPU ${cpu2.machine_busy_pct}% busy`,
  );
  const h = await health(d);
  record({ section: 'warm_state', warm: h.warm, machine_busy_pct: cpu.machine_busy_pct, daemon_cpu_ms: cpu.daemon_cpu_ms });
  console.log(`# warm counters after the section: ${JSON.stringify(h.warm)}`);
}

// ---- warm-memory -------------------------------------------------------------
/**
 * The memory cgroup directory of a container, or null: Docker's default
 * parents first, then a search two levels deep (the daemon gives its boxes a
 * parent of its own, e.g. /mcpsd-runs/mcpsd-w-...).
 */
function memCgroup(id) {
  for (const p of [
    `/sys/fs/cgroup/memory/docker/${id}`, // v1, cgroupfs driver
    `/sys/fs/cgroup/memory/system.slice/docker-${id}.scope`, // v1, systemd
    `/sys/fs/cgroup/system.slice/docker-${id}.scope`, // v2, systemd
    `/sys/fs/cgroup/docker/${id}`, // v2, cgroupfs
  ])
    if (existsSync(p)) return p;
  const root = existsSync('/sys/fs/cgroup/memory') ? '/sys/fs/cgroup/memory' : '/sys/fs/cgroup';
  const dirs = (d) => {
    try {
      return readdirSync(d, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => path.join(d, e.name));
    } catch {
      return [];
    }
  };
  for (const a of dirs(root)) for (const b of dirs(a)) if (existsSync(path.join(b, id))) return path.join(b, id);
  return null;
}

function readNum(p) {
  try {
    return Number(readFileSync(p, 'utf8').trim());
  } catch {
    return NaN;
  }
}

/** { usage, rss, cache, ... } of a container's memory cgroup, in bytes. */
export function cgroupMemory(id) {
  const dir = memCgroup(id);
  if (!dir) return null;
  const stat = {};
  for (const line of readFileSync(path.join(dir, 'memory.stat'), 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k) stat[k] = Number(v);
  }
  const v2 = existsSync(path.join(dir, 'memory.current'));
  return {
    cgroup: v2 ? 'v2' : 'v1',
    usage: readNum(path.join(dir, v2 ? 'memory.current' : 'memory.usage_in_bytes')),
    rss: v2 ? stat.anon : stat.total_rss ?? stat.rss,
    cache: v2 ? stat.file : stat.total_cache ?? stat.cache,
    kernel: v2 ? (stat.kernel ?? stat.slab ?? 0) : readNum(path.join(dir, 'memory.kmem.usage_in_bytes')),
  };
}

/** RSS and PSS (kB) of the containerd-shim serving container id. */
export function shimMemory(id) {
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    let cmd;
    try {
      cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!cmd[0]?.includes('containerd-shim') || !cmd.includes(id)) continue;
    const status = readFileSync(`/proc/${p}/status`, 'utf8');
    const rss = Number((status.match(/^VmRSS:\s+(\d+)/m) ?? [])[1]);
    let pss = NaN;
    try {
      pss = Number((readFileSync(`/proc/${p}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+)/m) ?? [])[1]);
    } catch {
      /* old kernel */
    }
    return { pid: Number(p), rss_kb: rss, pss_kb: pss };
  }
  return null;
}

/** The container of the warm session of conv and language, by label. */
async function sessionBox(instance, language, before) {
  const q = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${instance}`, 'sandbox.kind=warm', `sandbox.language=${language}`] }));
  const r = await dockerApi('GET', `/containers/json?filters=${q}`);
  const list = JSON.parse(r.body).filter((c) => !before.has(c.Id));
  return list[0]?.Id;
}

async function sectionWarmMemory(o) {
  const d = daemon();
  const settle = parseInt(o['settle-ms'] ?? '5000', 10);
  const client = await connectHttp(d);
  const instance = env.BENCH_INSTANCE;
  const seen = new Set();
  const MiB = 1024 * 1024;
  const cases = [
    ['python', 'python, nothing imported', 'x = 1\nprint(x)'],
    ['python', 'python, pandas and matplotlib imported', 'import pandas, numpy, matplotlib.pyplot\nprint(1)'],
    ['bash', 'bash', 'echo 1'],
  ];
  let i = 0;
  for (const [lang, name, code] of cases) {
    const r = await call(client, `bench-warm-mem-${i++}-${Date.now()}`, lang, code, (sc) => sc.stdout === '1\n');
    if (!r.ok) throw new Error(`${name}: ${r.text}`);
    const id = await sessionBox(instance, lang, seen);
    if (!id) throw new Error(`${name}: no warm box found`);
    seen.add(id);
    await sleep(settle);
    const cg = cgroupMemory(id);
    const shim = shimMemory(id);
    const res = {
      section: 'warm_memory',
      box: name,
      cgroup: cg?.cgroup,
      usage_mib: cg ? r1(cg.usage / MiB) : null,
      rss_mib: cg ? r1(cg.rss / MiB) : null,
      cache_mib: cg ? r1(cg.cache / MiB) : null,
      kernel_mib: cg ? r1(cg.kernel / MiB) : null,
      shim_rss_mib: shim ? r1(shim.rss_kb / 1024) : null,
      shim_pss_mib: shim ? r1(shim.pss_kb / 1024) : null,
      host_mib: cg && shim ? r1(cg.usage / MiB + shim.pss_kb / 1024) : null,
      session_memory_mib: r.sc.session?.memory_bytes >= 0 ? r1(r.sc.session.memory_bytes / MiB) : null,
      load: loadavg(),
    };
    record(res);
    console.log(
      `warm memory ${name.padEnd(40)} cgroup ${res.usage_mib} MiB (rss ${res.rss_mib}, cache ${res.cache_mib}, kernel ${res.kernel_mib}) + shim PSS ${res.shim_pss_mib} (RSS ${res.shim_rss_mib}) = ${res.host_mib} MiB`,
    );
  }
  await client.close();
}

// ---- main --------------------------------------------------------------------
// Only when run as a script: kernel_bench.mjs imports the helpers above.
async function main() {
  const [section, ...rest] = process.argv.slice(2);
  const sections = { warm: sectionWarm, 'warm-memory': sectionWarmMemory };
  if (!sections[section]) {
    console.error(`usage: warm_bench.mjs ${Object.keys(sections).join('|')} [--key value ...]`);
    process.exit(2);
  }
  try {
    await sections[section](parseArgs(rest));
    process.stdout.write('', () => process.exit(0));
  } catch (e) {
    console.error(`warm_bench ${section}: ${e.stack ?? e}`);
    process.stdout.write('', () => process.exit(1));
  }
}
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await main();
