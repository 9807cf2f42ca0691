// SPDX-License-Identifier: MIT
// The client side of tests/bench/run.sh: drives a running mcp-sandboxd
// through the official MCP SDK client (Streamable HTTP, bearer token) and
// `docker run --rm`, and appends one JSON line per figure to a results file.
// Figures are printed, never asserted on; every loop is bounded.
//
//   node tests/bench/mcp_bench.mjs SECTION [--key value ...]
// Sections:
//   latency     run_code hello world per language, interleaved with
//               `docker run --rm` of the same create body (--langs, --runs,
//               --warmup, --gap-ms)
//   engine      create/start/wait/remove through the Engine API for the
//               daemon's create body and bare ones (--rounds 10)
//   throughput  Python hello world at several concurrencies (--levels 1,4,16
//               --calls 24,32,48)
//   rss         daemon VmRSS idle, with N open SSE streams, over M cheap
//               calls and K run_code calls (--sse 200 --calls 10000
//               --runs 200 --run-conc 4)
//   table       prints the figures of a results file (--markdown FILE)
// The daemon is named by the environment: BENCH_URL (…/mcp), BENCH_TOKEN,
// BENCH_PID, BENCH_LOG, BENCH_INSTANCE, BENCH_ENV_FILE (its settings, for
// create_body), BENCH_CREATE_BODY (the helper), BENCH_WORK (scratch dir),
// BENCH_RESULTS (JSON lines), BENCH_TAG (label value of the containers it
// makes itself), DOCKER_SOCK.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, mkdirSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { connectHttp } from '../integration/lib/daemon.mjs';
// The SDK lives in tests/integration/node_modules (one install for both).
import { ListToolsResultSchema } from '../integration/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js';

const env = process.env;
const SOCK = env.DOCKER_SOCK ?? '/var/run/docker.sock';
// Labels this run's own containers (`docker run` and warm) for cleanup.
const TAG = env.BENCH_TAG ?? `pid${process.pid}`;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const wallMs = () => performance.timeOrigin + performance.now();

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    o[a.slice(2)] = argv[i + 1];
    i++;
  }
  return o;
}
const ints = (s) => String(s).split(',').filter(Boolean).map((x) => parseInt(x, 10));

export function record(obj) {
  const line = JSON.stringify({ t: new Date().toISOString(), ...obj });
  if (env.BENCH_RESULTS) appendFileSync(env.BENCH_RESULTS, line + '\n');
}

// ---- statistics ------------------------------------------------------------
export function pct(values, p) {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
export const median = (v) => pct(v, 50);
export const mean = (v) => v.reduce((a, b) => a + b, 0) / (v.length || 1);
export const r1 = (x) => (Number.isFinite(x) ? Number(x.toFixed(1)) : null);
export const r2 = (x) => (Number.isFinite(x) ? Number(x.toFixed(2)) : null);

// The SDK's Streamable HTTP transport passes one shared AbortSignal to every
// fetch and undici leaves a listener on it per request (released only by
// GC), so thousands of calls on one client make Node warn once per call.
// Client-side, not the daemon (see docs/performance.md): count, don't spam.
let listenerWarnings = 0;
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name === 'MaxListenersExceededWarning') listenerWarnings++;
  else console.error(`${w.name}: ${w.message}`);
});

// ---- the machine -------------------------------------------------------------
export function loadavg() {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}
function cpuTimes() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + (f[4] || 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { idle, total };
}
function procCpuMs(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime+stime, USER_HZ=100
  } catch {
    return NaN;
  }
}
function pidsByComm(names) {
  const out = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const c = readFileSync(`/proc/${p}/comm`, 'utf8').trim();
      if (names.includes(c)) out.push(Number(p));
    } catch {
      /* gone */
    }
  }
  return out;
}
/** Samples machine and process CPU; end() returns the deltas. */
export function cpuMeter(daemonPid) {
  const engine = pidsByComm(['dockerd', 'containerd']);
  const c0 = cpuTimes();
  const d0 = procCpuMs(daemonPid);
  const e0 = engine.map(procCpuMs);
  const l0 = loadavg();
  const t0 = wallMs();
  return {
    end() {
      const c1 = cpuTimes();
      const busy = 1 - (c1.idle - c0.idle) / Math.max(1, c1.total - c0.total);
      return {
        wall_s: r1((wallMs() - t0) / 1000),
        machine_busy_pct: r1(busy * 100),
        load_start: l0,
        load_end: loadavg(),
        daemon_cpu_ms: r1(procCpuMs(daemonPid) - d0),
        engine_cpu_ms: r1(engine.map(procCpuMs).reduce((a, v, i) => a + (v - e0[i]), 0)),
      };
    },
  };
}
export function procStatus(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) || [])[1]);
  let fds = NaN;
  const kinds = {};
  try {
    const list = readdirSync(`/proc/${pid}/fd`);
    fds = list.length;
    for (const f of list) {
      let k;
      try {
        k = readlinkSync(`/proc/${pid}/fd/${f}`).replace(/:\[\d+\]$/, '').replace(/^anon_inode:\[?([^\]]*)\]?$/, '$1');
      } catch {
        continue;
      }
      if (k.startsWith('/')) k = k.startsWith('/dev/') ? k.replace(/\d+$/, 'N') : 'file';
      kinds[k] = (kinds[k] ?? 0) + 1;
    }
  } catch {
    /* not ours */
  }
  return { rss_kb: kb('VmRSS'), hwm_kb: kb('VmHWM'), threads: kb('Threads'), fds, fd_kinds: kinds };
}

// ---- Docker ------------------------------------------------------------------
function dockerGet(p) {
  return new Promise((resolve, reject) => {
    const rq = http.get({ socketPath: SOCK, path: p }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (b += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(b) : reject(new Error(`${p}: ${res.statusCode} ${b}`))));
    });
    rq.on('error', reject);
  });
}
/** One Engine API call; resolves { status, body (Buffer) }. */
export function dockerApi(method, p, body) {
  return new Promise((resolve, reject) => {
    const data = body ? JSON.stringify(body) : undefined;
    const rq = http.request(
      {
        socketPath: SOCK,
        method,
        path: `/v1.41${p}`,
        headers: data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {},
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    rq.setTimeout(60000, () => rq.destroy(new Error(`${method} ${p}: timed out`)));
    rq.on('error', reject);
    if (data) rq.write(data);
    rq.end();
  });
}

/** stdout of a multiplexed (non-TTY) attach/exec stream. */
function demuxStdout(buf) {
  let out = '';
  for (let i = 0; i + 8 <= buf.length; ) {
    const n = buf.readUInt32BE(i + 4);
    if (buf[i] === 1) out += buf.subarray(i + 8, i + 8 + n).toString();
    i += 8 + n;
  }
  return out;
}

/**
 * The warm-container estimate: one container made from the daemon's
 * create body but kept alive (`sleep infinity`), and each run a `docker
 * exec` of the runner's command through the Engine API, as the roadmap's
 * warm containers would do. Returns { run(), remove() }.
 */
async function warmContainer(body) {
  const b = { ...body, Cmd: ['sleep', 'infinity'], Labels: { 'mcpsd.bench': TAG, 'mcpsd.bench.kind': 'warm' } };
  b.OpenStdin = b.AttachStdin = b.StdinOnce = false;
  const c = await dockerApi('POST', '/containers/create', b);
  if (c.status !== 201) throw new Error(`warm create: ${c.status} ${c.body}`);
  const id = JSON.parse(c.body).Id;
  const s = await dockerApi('POST', `/containers/${id}/start`);
  if (s.status !== 204) throw new Error(`warm start: ${s.status} ${s.body}`);
  return {
    async run() {
      const t0 = wallMs();
      const e = await dockerApi('POST', `/containers/${id}/exec`, {
        AttachStdout: true,
        AttachStderr: true,
        Cmd: body.Cmd,
        Env: body.Env,
        User: body.User,
        WorkingDir: body.WorkingDir,
      });
      const eid = JSON.parse(e.body).Id;
      const st = await dockerApi('POST', `/exec/${eid}/start`, { Detach: false, Tty: false });
      const j = JSON.parse((await dockerApi('GET', `/exec/${eid}/json`)).body);
      return { t0, t1: wallMs(), code: j.ExitCode, out: demuxStdout(st.body) };
    },
    remove: () => dockerApi('DELETE', `/containers/${id}?force=1`),
  };
}

/** Container events (create/start/die/destroy) with wall-clock ms. */
function watchEvents() {
  const events = [];
  const q = encodeURIComponent(JSON.stringify({ type: ['container'] }));
  const rq = http.get({ socketPath: SOCK, path: `/events?filters=${q}` }, (res) => {
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (c) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (!line.trim()) continue;
        try {
          const e = JSON.parse(line);
          events.push({
            action: e.Action ?? e.status,
            id: e.id ?? e.Actor?.ID,
            ms: Number(BigInt(e.timeNano) / 1000n) / 1000,
            attrs: e.Actor?.Attributes ?? {},
          });
        } catch {
          /* partial */
        }
      }
    });
  });
  rq.on('error', () => {});
  return { events, stop: () => rq.destroy() };
}

/** Parses KEY=VALUE lines (the daemon's env file). */
function readEnvFile(p) {
  const o = {};
  for (const line of readFileSync(p, 'utf8').split('\n')) {
    const m = line.match(/^([A-Z0-9_]+)=(.*)$/);
    if (m) o[m[1]] = m[2];
  }
  return o;
}

/**
 * The `docker run` argv equivalent to the daemon's create body for lang:
 * same image, command, environment, user, limits, seccomp profile, tmpfs
 * and mounts. Returns { args, filename, unmapped }.
 */
export async function cliArgs(lang, ws, codeDir, work) {
  const q = encodeURIComponent(JSON.stringify({ label: ['sandbox.runner=true'] }));
  const images = await dockerGet(`/images/json?filters=${q}`);
  const daemonEnv = env.BENCH_ENV_FILE ? readEnvFile(env.BENCH_ENV_FILE) : {};
  const r = spawnSync(env.BENCH_CREATE_BODY, [lang, ws, codeDir], {
    input: images,
    env: { PATH: env.PATH, ...daemonEnv, MCP_HTTP_ADDR: '127.0.0.1:1' },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`create_body ${lang}: ${r.stderr}`);
  const body = JSON.parse(r.stdout);
  const filename = (r.stderr.match(/filename=(\S+)/) || [])[1];
  const hc = body.HostConfig;
  const a = ['run', '--rm', '--label', `mcpsd.bench=${TAG}`, '--label', 'mcpsd.bench.kind=cli'];
  const unmapped = [];
  if (body.OpenStdin) a.push('-i');
  if (body.Tty) a.push('-t');
  if (body.User) a.push('--user', body.User);
  if (body.WorkingDir) a.push('-w', body.WorkingDir);
  for (const e of body.Env ?? []) a.push('-e', e);
  const known = new Set(['Image', 'Cmd', 'Env', 'Labels', 'User', 'WorkingDir', 'Tty', 'AttachStdin',
    'OpenStdin', 'StdinOnce', 'AttachStdout', 'AttachStderr', 'HostConfig']);
  for (const k of Object.keys(body)) if (!known.has(k)) unmapped.push(k);
  for (const [k, v] of Object.entries(hc)) {
    switch (k) {
      case 'Memory': a.push('--memory', `${v}b`); break;
      case 'MemorySwap': a.push('--memory-swap', `${v}b`); break;
      case 'NanoCpus': a.push('--cpus', String(v / 1e9)); break;
      case 'PidsLimit': a.push('--pids-limit', String(v)); break;
      case 'ShmSize': a.push('--shm-size', `${v}b`); break;
      case 'OomScoreAdj': a.push('--oom-score-adj', String(v)); break;
      case 'OomKillDisable': if (v) a.push('--oom-kill-disable'); break;
      case 'NetworkMode': a.push('--network', v); break;
      case 'ReadonlyRootfs': if (v) a.push('--read-only'); break;
      case 'Init': if (v) a.push('--init'); break;
      case 'IpcMode': a.push('--ipc', v); break;
      case 'Privileged': if (v) a.push('--privileged'); break;
      case 'PublishAllPorts': if (v) a.push('-P'); break;
      case 'AutoRemove': break; // --rm above: the CLI's removal is part of its time
      case 'RestartPolicy': if (v?.Name && v.Name !== 'no') unmapped.push(k); break;
      case 'LogConfig': a.push('--log-driver', v.Type); break;
      case 'Tmpfs': for (const [p, o] of Object.entries(v)) a.push('--tmpfs', `${p}:${o}`); break;
      case 'CapDrop': for (const c of v) a.push('--cap-drop', c); break;
      case 'CapAdd': for (const c of v ?? []) a.push('--cap-add', c); break;
      case 'Runtime': if (v) a.push('--runtime', v); break;
      case 'SecurityOpt':
        for (const s of v) {
          if (s.startsWith('seccomp=')) {
            const f = path.join(work, 'seccomp.json');
            writeFileSync(f, s.slice(8));
            a.push('--security-opt', `seccomp=${f}`);
          } else a.push('--security-opt', s);
        }
        break;
      case 'Ulimits': for (const u of v) a.push('--ulimit', `${u.Name}=${u.Soft}:${u.Hard}`); break;
      case 'Mounts':
        for (const m of v) {
          let s = `type=${m.Type},src=${m.Source},dst=${m.Target}`;
          if (m.ReadOnly) s += ',readonly';
          if (m.BindOptions?.Propagation) s += `,bind-propagation=${m.BindOptions.Propagation}`;
          a.push('--mount', s);
        }
        break;
      default: unmapped.push(`HostConfig.${k}`);
    }
  }
  a.push(body.Image, ...body.Cmd);
  return { args: a, filename, unmapped, body };
}

export function runCli(args) {
  return new Promise((resolve) => {
    const t0 = wallMs();
    const p = spawn('docker', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (c) => (out += c));
    p.stderr.on('data', (c) => (err += c));
    p.on('close', (code) => resolve({ t0, t1: wallMs(), code, out, err }));
  });
}

// ---- MCP ---------------------------------------------------------------------
const HELLO = {
  python: "print('hello')\n",
  typescript: "console.log('hello')\n",
  bash: 'echo hello\n',
};

export function daemon() {
  if (!env.BENCH_URL || !env.BENCH_TOKEN) throw new Error('BENCH_URL and BENCH_TOKEN are required');
  return { url: env.BENCH_URL, base: env.BENCH_URL.replace(/\/mcp$/, ''), token: env.BENCH_TOKEN };
}

async function runCode(client, conv, lang, timeoutMs = 120000) {
  const t0 = wallMs();
  const r = await client.callTool(
    { name: 'run_code', arguments: { conversationId: conv, language: lang, code: HELLO[lang] } },
    undefined,
    { timeout: timeoutMs },
  );
  const t1 = wallMs();
  const sc = r.structuredContent ?? {};
  const ok = !r.isError && sc.status === 'completed' && sc.stdout === 'hello\n';
  return { t0, t1, ms: t1 - t0, ok, status: sc.status ?? 'no-structured-content', duration_ms: sc.duration_ms, queue_ms: sc.queue_ms, text: ok ? '' : JSON.stringify(r).slice(0, 400) };
}

export async function health(d) {
  const r = await fetch(`${d.base}/healthz`);
  return r.json();
}

// ---- latency -----------------------------------------------------------------
/** Phase medians from container events for runs {kind, t0, t1}. */
function phases(runs, events, isKind) {
  const byId = new Map();
  for (const e of events) {
    if (!e.id) continue;
    if (!byId.has(e.id)) byId.set(e.id, { attrs: e.attrs });
    const x = byId.get(e.id);
    if (!(e.action in x)) x[e.action] = e.ms;
  }
  const creates = [...byId.entries()].filter(([, x]) => x.create !== undefined);
  const out = { to_create: [], create_to_start: [], start_to_die: [], die_to_result: [], destroy_after_result: [] };
  for (const run of runs) {
    const hit = creates.find(([, x]) => isKind(x.attrs, run.kind) && x.create >= run.t0 - 1 && x.create <= run.t1 + 1);
    if (!hit) continue;
    const x = hit[1];
    out.to_create.push(x.create - run.t0);
    if (x.start !== undefined) out.create_to_start.push(x.start - x.create);
    if (x.start !== undefined && x.die !== undefined) out.start_to_die.push(x.die - x.start);
    if (x.die !== undefined) out.die_to_result.push(run.t1 - x.die);
    if (x.destroy !== undefined) out.destroy_after_result.push(x.destroy - run.t1);
  }
  const o = {};
  for (const [k, v] of Object.entries(out)) o[k] = v.length ? r1(median(v)) : null;
  o.n = out.to_create.length;
  return o;
}

/** Phases the daemon logs at debug level per run (create/attach/start/output/exit). */
function logPhases(logPath, ids) {
  let txt = '';
  try {
    txt = readFileSync(logPath, 'utf8');
  } catch {
    return null;
  }
  const acc = {};
  const re = /run ([0-9a-f]{12}): create (\d+) ms, attach (\d+) ms, start (\d+) ms, output (\d+) ms, exit (\d+) ms, inspect (\d+) ms/g;
  let m;
  while ((m = re.exec(txt))) {
    if (ids && !ids.has(m[1])) continue;
    const names = ['create', 'attach', 'start', 'output', 'exit', 'inspect'];
    names.forEach((n, i) => (acc[n] ??= []).push(Number(m[i + 2])));
  }
  const o = {};
  for (const [k, v] of Object.entries(acc)) o[k] = median(v);
  o.n = acc.create?.length ?? 0;
  return o.n ? o : null;
}

async function sectionLatency(o) {
  const d = daemon();
  const langs = (o.langs ?? 'python,typescript,bash').split(',');
  const runs = parseInt(o.runs ?? '20', 10);
  const warm = parseInt(o.warmup ?? '2', 10);
  const gap = parseInt(o['gap-ms'] ?? '200', 10);
  const work = env.BENCH_WORK ?? os.tmpdir();
  const client = await connectHttp(d);
  const ev = watchEvents();
  await sleep(200);
  const instance = env.BENCH_INSTANCE;
  const isKind = (attrs, kind) =>
    kind === 'cli' ? attrs['mcpsd.bench.kind'] === 'cli' && attrs['mcpsd.bench'] === TAG : attrs['sandbox.owner'] === instance;
  for (const lang of langs) {
    const ws = path.join(work, `cli-ws-${lang}`);
    const codeDir = path.join(work, `cli-code-${lang}`);
    mkdirSync(ws, { recursive: true });
    mkdirSync(codeDir, { recursive: true });
    chownSync(ws, 64321, 64321);
    const { args, filename, unmapped, body } = await cliArgs(lang, ws, codeDir, work);
    writeFileSync(path.join(codeDir, filename), HELLO[lang]);
    if (unmapped.length) console.log(`# ${lang}: create body fields with no CLI flag: ${unmapped.join(', ')}`);
    console.log(`# ${lang} CLI: docker ${args.map((x) => (x.includes(' ') ? `'${x}'` : x)).join(' ')}`);
    const conv = `bench-latency-${lang}`;
    const meter = cpuMeter(Number(env.BENCH_PID));
    const mine = [];
    const cli = [];
    const hot = [];
    const srv = [];
    const all = [];
    let failures = 0;
    const wc = await warmContainer(body);
    try {
      const kinds = ['mcp', 'cli', 'warm'];
      for (let i = -warm; i < runs; i++) {
        // Rotate the order so no path always follows the same one.
        const k = (((i % 3) + 3) % 3);
        const order = [...kinds.slice(k), ...kinds.slice(0, k)];
        for (const kind of order) {
          if (kind === 'warm') {
            const r = await wc.run();
            if (r.code !== 0 || r.out !== 'hello\n') {
              failures++;
              console.log(`# ${lang} warm exec failed (${r.code}): ${r.out.slice(0, 200)}`);
            }
            if (i >= 0) hot.push(r.t1 - r.t0);
            await sleep(gap);
            continue;
          }
          if (kind === 'mcp') {
            const r = await runCode(client, conv, lang);
            if (!r.ok) {
              failures++;
              console.log(`# ${lang} run_code not completed: ${r.text}`);
            }
            if (i >= 0) {
              mine.push(r.ms);
              srv.push(r.duration_ms);
              all.push({ kind, t0: r.t0, t1: r.t1 });
            }
          } else {
            const r = await runCli(args);
            if (r.code !== 0 || r.out !== 'hello\n') {
              failures++;
              console.log(`# ${lang} docker run failed (${r.code}): ${r.err.slice(0, 300)}`);
            }
            if (i >= 0) {
              cli.push(r.t1 - r.t0);
              all.push({ kind, t0: r.t0, t1: r.t1 });
            }
          }
          await sleep(gap);
        }
      }
    } finally {
      await wc.remove();
    }
    const cpu = meter.end();
    await sleep(1500); // late events (the daemon removes in the background)
    const res = {
      section: 'latency',
      lang,
      runs,
      mcp_p50: r1(median(mine)),
      mcp_p95: r1(pct(mine, 95)),
      mcp_mean: r1(mean(mine)),
      cli_p50: r1(median(cli)),
      cli_p95: r1(pct(cli, 95)),
      cli_mean: r1(mean(cli)),
      ratio_p50: r2(median(mine) / median(cli)),
      ratio_p95: r2(pct(mine, 95) / pct(cli, 95)),
      warm_exec_p50: r1(median(hot)),
      warm_exec_p95: r1(pct(hot, 95)),
      server_duration_p50: r1(median(srv)),
      failures,
      phases_mcp: phases(all.filter((x) => x.kind === 'mcp'), ev.events, isKind),
      phases_cli: phases(all.filter((x) => x.kind === 'cli'), ev.events, isKind),
      daemon_log_phases: env.BENCH_LOG ? logPhases(env.BENCH_LOG, null) : null,
      ...cpu,
    };
    record(res);
    console.log(
      `latency ${lang.padEnd(10)} MCP p50 ${res.mcp_p50} p95 ${res.mcp_p95} ms | docker run p50 ${res.cli_p50} p95 ${res.cli_p95} ms | ratio p50 ${res.ratio_p50} | warm exec p50 ${res.warm_exec_p50} ms | load ${cpu.load_start[0]}->${cpu.load_end[0]} busy ${cpu.machine_busy_pct}%`,
    );
    console.log(`  phases MCP ${JSON.stringify(res.phases_mcp)}`);
    console.log(`  phases CLI ${JSON.stringify(res.phases_cli)}`);
  }
  ev.stop();
  await client.close();
}

// ---- engine ------------------------------------------------------------------
/**
 * Where a cold run's time goes on the engine itself: create, start, wait
 * (until not running) and remove through the Engine API, for the daemon's
 * hardened create body and for bare bodies, interleaved.
 */
async function sectionEngine(o) {
  const rounds = parseInt(o.rounds ?? '10', 10);
  const lang = 'python';
  const work = env.BENCH_WORK ?? os.tmpdir();
  const ws = path.join(work, `engine-ws`);
  const codeDir = path.join(work, `engine-code`);
  mkdirSync(ws, { recursive: true });
  mkdirSync(codeDir, { recursive: true });
  chownSync(ws, 64321, 64321);
  const { filename, body } = await cliArgs(lang, ws, codeDir, work);
  writeFileSync(path.join(codeDir, filename), HELLO[lang]);
  const labels = { 'mcpsd.bench': TAG, 'mcpsd.bench.kind': 'engine' };
  const hardened = { ...body, Labels: labels, OpenStdin: false, AttachStdin: false, StdinOnce: false };
  // The same interpreter with nothing but the image, the command and the
  // network mode: no limits, mounts, seccomp profile, init or read-only root.
  const bare = (hc) => ({ Image: body.Image, Cmd: ['python3', '-c', "print('hello')"], Labels: labels, HostConfig: hc });
  const variants = {
    'daemon create body (hardened)': hardened,
    'bare, --network none': bare({ NetworkMode: 'none' }),
    'bare, default bridge network': bare({}),
  };
  const acc = {};
  for (let i = 0; i < rounds; i++) {
    for (const [name, b] of Object.entries(variants)) {
      const t = [wallMs()];
      const c = await dockerApi('POST', '/containers/create', b);
      t.push(wallMs());
      if (c.status !== 201) throw new Error(`${name}: create ${c.status} ${c.body}`);
      const id = JSON.parse(c.body).Id;
      const st = await dockerApi('POST', `/containers/${id}/start`);
      t.push(wallMs());
      await dockerApi('POST', `/containers/${id}/wait?condition=not-running`);
      t.push(wallMs());
      await dockerApi('DELETE', `/containers/${id}?force=1&v=1`);
      t.push(wallMs());
      if (st.status !== 204) throw new Error(`${name}: start ${st.status} ${st.body}`);
      const a = (acc[name] ??= { create: [], start: [], wait: [], remove: [], total: [] });
      a.create.push(t[1] - t[0]);
      a.start.push(t[2] - t[1]);
      a.wait.push(t[3] - t[2]);
      a.remove.push(t[4] - t[3]);
      a.total.push(t[4] - t[0]);
    }
  }
  for (const [name, a] of Object.entries(acc)) {
    const res = { section: 'engine', variant: name, lang, rounds };
    for (const [k, v] of Object.entries(a)) res[k] = r1(median(v));
    res.load = loadavg();
    record(res);
    console.log(`engine ${name.padEnd(30)} create ${res.create}  start ${res.start}  wait ${res.wait}  remove ${res.remove}  total ${res.total} ms (medians of ${rounds})`);
  }
}

// ---- throughput --------------------------------------------------------------
async function sectionThroughput(o) {
  const d = daemon();
  const levels = ints(o.levels ?? '1,4,16');
  const calls = ints(o.calls ?? '24,32,48');
  const maxc = Math.max(...levels);
  const clients = [];
  for (let i = 0; i < maxc; i++) clients.push(await connectHttp(d));
  // One conversation per client: runs of one conversation are serialized.
  // Warm-up: each conversation's workspace exists before measuring.
  await Promise.all(clients.map((c, i) => runCode(c, `bench-tp-${i}`, 'python')));
  const h0 = await health(d);
  const cap = h0.runs?.max_concurrent;
  for (let li = 0; li < levels.length; li++) {
    const c = levels[li];
    const total = calls[li] ?? calls[calls.length - 1];
    const lat = [];
    const queue = [];
    const statuses = {};
    let next = 0;
    let maxRunning = 0;
    let maxQueued = 0;
    let polling = true;
    const poller = (async () => {
      while (polling) {
        try {
          const h = await health(d);
          maxRunning = Math.max(maxRunning, h.runs?.running ?? 0);
          maxQueued = Math.max(maxQueued, h.runs?.queued ?? 0);
        } catch {
          /* ignore */
        }
        await sleep(100);
      }
    })();
    const meter = cpuMeter(Number(env.BENCH_PID));
    const t0 = wallMs();
    await Promise.all(
      Array.from({ length: c }, async (_, w) => {
        while (next < total) {
          next++;
          const r = await runCode(clients[w], `bench-tp-${w}`, 'python');
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
          if (r.ok) {
            lat.push(r.ms);
            queue.push(r.queue_ms ?? 0);
          }
        }
      }),
    );
    const wall = (wallMs() - t0) / 1000;
    polling = false;
    await poller;
    const cpu = meter.end();
    const res = {
      section: 'throughput',
      concurrency: c,
      calls: total,
      completed: lat.length,
      statuses,
      runs_per_s: r2(lat.length / wall),
      p50: r1(median(lat)),
      p95: r1(pct(lat, 95)),
      queue_p50: r1(median(queue)),
      queue_max: r1(Math.max(...queue)),
      max_concurrent: cap,
      seen_running_max: maxRunning,
      seen_queued_max: maxQueued,
      daemon_cpu_ms_per_run: r1(cpu.daemon_cpu_ms / Math.max(1, lat.length)),
      ...cpu,
    };
    record(res);
    console.log(
      `throughput c=${String(c).padEnd(3)} ${res.runs_per_s} runs/s  p50 ${res.p50} ms  p95 ${res.p95} ms  queue p50 ${res.queue_p50} max ${res.queue_max} ms  (cap ${cap}, seen running ${maxRunning} queued ${maxQueued}) ${JSON.stringify(statuses)} load ${cpu.load_start[0]}->${cpu.load_end[0]}`,
    );
    await sleep(1000);
  }
  await Promise.all(clients.map((c) => c.close()));
}

// ---- rss ---------------------------------------------------------------------
function openSse(d) {
  return new Promise((resolve) => {
    const u = new URL(`${d.base}/sse`);
    const rq = http.get(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        agent: false,
        headers: { Authorization: `Bearer ${d.token}`, Accept: 'text/event-stream' },
      },
      (res) => {
        let got = '';
        res.setEncoding('utf8');
        const done = (ok) => resolve({ ok, status: res.statusCode, rq, res });
        if (res.statusCode !== 200) {
          res.resume();
          return done(false);
        }
        res.on('data', (c) => {
          if (got === null) return;
          got += c;
          if (got.includes('endpoint')) {
            got = null;
            done(true);
          }
        });
      },
    );
    rq.on('error', () => resolve({ ok: false, status: 0, rq }));
    rq.setTimeout(15000, () => {
      rq.destroy();
      resolve({ ok: false, status: 'timeout', rq });
    });
  });
}

async function sectionRss(o) {
  const d = daemon();
  const pid = Number(env.BENCH_PID);
  const nSse = parseInt(o.sse ?? '200', 10);
  const nCalls = parseInt(o.calls ?? '10000', 10);
  const nRuns = parseInt(o.runs ?? '200', 10);
  const runConc = parseInt(o['run-conc'] ?? '4', 10);
  const points = [];
  const point = (label, extra = {}) => {
    const s = procStatus(pid);
    points.push({ label, ...s, ...extra });
    console.log(`rss ${label.padEnd(34)} VmRSS ${(s.rss_kb / 1024).toFixed(1)} MiB  threads ${s.threads}  fds ${s.fds} ${JSON.stringify(s.fd_kinds)}`);
  };
  await sleep(500);
  point('idle after start');

  // Open SSE streams, held open.
  const t0 = wallMs();
  const streams = [];
  for (let i = 0; i < nSse; i += 20) {
    const batch = await Promise.all(Array.from({ length: Math.min(20, nSse - i) }, () => openSse(d)));
    streams.push(...batch);
  }
  const openMs = wallMs() - t0;
  const okN = streams.filter((s) => s.ok).length;
  const refused = {};
  for (const s of streams) if (!s.ok) refused[s.status] = (refused[s.status] ?? 0) + 1;
  await sleep(1000);
  // A well-behaved client while they are open.
  const probe = await connectHttp(d);
  const tp = wallMs();
  await probe.listTools();
  const probeMs = wallMs() - tp;
  await probe.close();
  point(`${okN} SSE streams open`, { sse_open: okN, sse_refused: refused, open_ms: r1(openMs), tools_list_ms_meanwhile: r1(probeMs) });
  for (const s of streams) {
    s.res?.destroy();
    s.rq?.destroy();
  }
  await sleep(2000);
  point('SSE streams closed');

  // Cheap calls through one session.
  const c = await connectHttp(d);
  const step = Math.max(1, Math.floor(nCalls / 4));
  point('calls 0');
  const lat = [];
  const tc = wallMs();
  // client.listTools() compiles every tool's output schema on each call
  // (~10 ms of client CPU here); a plain request measures the server.
  for (let i = 1; i <= nCalls; i++) {
    const t = wallMs();
    if (i % 2) await c.request({ method: 'tools/list' }, ListToolsResultSchema);
    else await c.ping();
    lat.push(wallMs() - t);
    if (i % step === 0 || i === nCalls) point(`calls ${i}`);
  }
  const callWall = (wallMs() - tc) / 1000;
  console.log(`  ${nCalls} calls (tools/list and ping alternately) in ${callWall.toFixed(1)} s: p50 ${r1(median(lat))} ms p99 ${r1(pct(lat, 99))} ms max ${r1(Math.max(...lat))} ms`);

  // run_code calls.
  let runsDone = 0;
  let runsOk = 0;
  if (nRuns > 0) {
    const clients = [c];
    for (let i = 1; i < runConc; i++) clients.push(await connectHttp(d));
    const rstep = Math.max(1, Math.floor(nRuns / 4));
    let next = 0;
    let nextPoint = rstep;
    await Promise.all(
      clients.map(async (cl, w) => {
        while (next < nRuns) {
          next++;
          const r = await runCode(cl, `bench-rss-${w}`, 'python');
          runsDone++;
          if (r.ok) runsOk++;
          if (runsDone >= nextPoint) {
            nextPoint += rstep;
            point(`run_code ${runsDone}`);
          }
        }
      }),
    );
    for (const cl of clients.slice(1)) await cl.close();
  }
  await c.close();
  await sleep(3000);
  point('3 s after the last call');
  if (listenerWarnings)
    console.log(`  (client side: Node warned ${listenerWarnings} times about abort listeners piling up on the SDK transport's shared AbortSignal)`);
  record({
    section: 'rss',
    points,
    sse: nSse,
    calls: nCalls,
    call_p50: r1(median(lat)),
    call_p99: r1(pct(lat, 99)),
    call_max: r1(Math.max(...lat)),
    calls_per_s: r1(nCalls / callWall),
    runs: runsDone,
    runs_ok: runsOk,
  });
}

// ---- table -------------------------------------------------------------------
export function table(rows, head) {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i] ?? '').length)));
  const line = (r) => r.map((x, i) => String(x ?? '').padStart(w[i])).join('  ');
  return [line(head), line(w.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n');
}
export function mdTable(rows, head) {
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.map((x) => x ?? '').join(' | ')} |`)].join('\n');
}

function sectionTable(o) {
  const lines = readFileSync(o.results ?? env.BENCH_RESULTS, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const out = [];
  const md = [];
  const emit = (title, head, rows) => {
    if (!rows.length) return;
    out.push(`\n${title}\n${table(rows, head)}`);
    md.push(`\n#### ${title}\n\n${mdTable(rows, head)}`);
  };
  const lat = lines.filter((l) => l.section === 'latency');
  emit(
    'run_code hello world, client call-to-result (ms): MCP endpoint vs docker run --rm (ratio = MCP/CLI), and docker exec into a warm container (roadmap estimate), interleaved',
    ['language', 'runs', 'MCP p50', 'MCP p95', 'CLI p50', 'CLI p95', 'ratio p50', 'ratio p95', 'warm exec p50', 'warm exec p95', 'fails', 'load 1m', 'busy %'],
    lat.map((l) => [l.lang, l.runs, l.mcp_p50, l.mcp_p95, l.cli_p50, l.cli_p95, l.ratio_p50, l.ratio_p95, l.warm_exec_p50, l.warm_exec_p95, l.failures, `${l.load_start[0]}-${l.load_end[0]}`, l.machine_busy_pct]),
  );
  emit(
    'Where the time goes (medians, ms, from Docker events): call -> create done -> start done -> exit -> result',
    ['language', 'path', 'to create', 'create->start', 'start->exit', 'exit->result', 'removed (vs result)'],
    lat.flatMap((l) => [
      [l.lang, 'MCP', l.phases_mcp.to_create, l.phases_mcp.create_to_start, l.phases_mcp.start_to_die, l.phases_mcp.die_to_result, l.phases_mcp.destroy_after_result],
      [l.lang, 'CLI', l.phases_cli.to_create, l.phases_cli.create_to_start, l.phases_cli.start_to_die, l.phases_cli.die_to_result, l.phases_cli.destroy_after_result],
    ]),
  );
  const lp = lat.length ? lat[lat.length - 1].daemon_log_phases : null;
  if (lp)
    emit(
      "The daemon's own phases (debug log, medians over all its runs, ms)",
      ['runs', 'create', 'attach', 'start', 'output', 'exit', 'inspect'],
      [[lp.n, lp.create, lp.attach, lp.start, lp.output, lp.exit, lp.inspect]],
    );
  const sw = lines.filter((l) => l.section === 'swarm');
  emit(
    'Bash `echo hello`, client call-to-result (ms): the swarm backend on the lab next to a local one-off run and docker run --rm of the same image and limits (ratio = path / docker run on the local engine), interleaved',
    ['path', 'runs', 'p50', 'p95', 'mean', 'ratio p50', 'ratio p95', 'daemon duration_ms p50', 'fails', 'load 1m', 'busy %'],
    sw.map((l) => [l.path, l.runs, l.p50, l.p95, l.mean, l.ratio_p50, l.ratio_p95, l.server_duration_p50 ?? '', l.failures, `${l.load_start[0]}-${l.load_end[0]}`, l.machine_busy_pct]),
  );
  const warm = lines.filter((l) => l.section === 'warm');
  emit(
    'Warm sessions (SANDBOX_WARM=true, the pool on), client call-to-result (ms), next to docker run --rm of the same runner and code (ratio = warm/CLI), interleaved; Must and Goal from issue 10',
    ['measure', 'n', 'warm p50', 'warm p95', 'CLI p50', 'CLI p95', 'ratio p50', 'ratio p95', 'calls/s', 'fails / not completed', 'Must', 'Goal', 'load 1m'],
    warm.map((l) => [
      l.measure,
      l.n,
      l.mcp_p50,
      l.mcp_p95,
      l.cli_p50,
      l.cli_p95,
      l.ratio_p50,
      l.ratio_p95,
      l.calls_per_s ?? '',
      l.calls ? `${l.calls - l.completed} (busy ${l.busy}) ${JSON.stringify(l.statuses)}` : `${l.fails ?? 0}${l.pool_misses ? `, ${l.pool_misses} not from the pool` : ''}`,
      l.must,
      l.goal,
      l.load?.[0],
    ]),
  );
  const wmem = lines.filter((l) => l.section === 'warm_memory');
  emit(
    'Idle warm boxes, host memory (MiB): the container\'s memory cgroup (usage = rss + page cache + kernel) and its containerd-shim (PSS, RSS)',
    ['box', 'cgroup', 'cgroup usage', 'rss', 'cache', 'kernel', 'shim PSS', 'shim RSS', 'usage + shim PSS'],
    wmem.map((l) => [l.box, l.cgroup, l.usage_mib, l.rss_mib, l.cache_mib, l.kernel_mib, l.shim_pss_mib, l.shim_rss_mib, l.host_mib]),
  );
  const kern = lines.filter((l) => l.section === 'kernel');
  emit(
    "Issue 22: this daemon next to a bare Jupyter kernel (same image and limits, jupyter_client over ipc sockets) or docker run --rm (ms; ratio = ours / baseline; interleaved rounds; busy = 2 loops of docker run --rm beside the calls)",
    ['measure', 'engine', 'n', 'ours p50', 'ours p95', 'baseline', 'base p50', 'base p95', 'ratio p50', 'ratio p95', 'fails', 'Must', 'Goal', 'load 1m', 'note'],
    kern.map((l) => [
      l.measure,
      l.engine,
      l.n,
      l.ours_p50,
      l.ours_p95,
      l.base_p50 === undefined ? '' : l.base_name ?? 'Jupyter',
      l.base_p50 ?? '',
      l.base_p95 ?? '',
      l.ratio_p50 ?? '',
      l.ratio_p95 ?? '',
      l.fails,
      l.must ?? '',
      l.goal ?? '',
      `${l.load_start?.[0] ?? ''}${l.load_start ? '-' : ''}${l.load?.[0]}`,
      [l.from_pool ? `from the pool ${l.from_pool}` : '', l.note ?? '', l.engine === 'busy' ? l.load_generator ?? '' : ''].filter(Boolean).join('; '),
    ]),
  );
  const raw = lines.filter((l) => l.section === 'rawwarm');
  emit(
    'Warm calls through a raw keep-alive HTTP client (tests/bench/warm_raw.c), this build next to the baseline build, interleaved: call-to-result (ms), duration (the agent round trip as the daemon times it), call minus it, the daemon\'s CPU per call (ms, /proc/PID/stat), calls/s',
    ['build', 'engine', 'code', 'clients', 'calls', 'p50', 'p95', 'duration p50', 'call - duration p50', 'daemon CPU ms/call', 'calls/s', 'fails', 'Must', 'Goal', 'load 1m'],
    raw.map((l) => [l.build, l.engine, `\`${l.code ?? 'print(1)'}\``, l.clients, l.calls, r2(l.p50), r2(l.p95), l.duration_p50, r2(l.own_p50), r2(l.daemon_cpu_ms_per_call), Math.round(l.calls_per_s), l.fails, l.must ?? '', l.goal ?? '', l.load ?? '']),
  );
  const kmem = lines.filter((l) => l.section === 'kernel_memory');
  emit(
    'Idle boxes, host memory (MiB): memory cgroup usage + containerd-shim PSS',
    ['box', 'cgroup usage', 'shim PSS', 'host', 'Must', 'Goal'],
    kmem.map((l) => [l.box, l.usage_mib, l.shim_pss_mib, l.host_mib, l.must ?? '', l.goal ?? '']),
  );
  for (const t of lines.filter((l) => l.section === 'tools_size'))
    emit(
      `tools/list: ${t.model_chars} characters of names, descriptions and input schemas reach a model (Must ${t.must}, Goal ${t.goal}); output schemas ${t.output_chars} apart`,
      ['tool', 'description', 'input schema', 'output schema'],
      t.tools.map((x) => [x.tool, x.description, x.input_schema, x.output_schema]),
    );
  const eng = lines.filter((l) => l.section === 'engine');
  emit(
    'A cold run on the engine alone (Engine API, medians, ms): the hardening flags cost nothing measurable',
    ['create body', 'rounds', 'create', 'start', 'wait (run)', 'remove', 'total'],
    eng.map((l) => [l.variant, l.rounds, l.create, l.start, l.wait, l.remove, l.total]),
  );
  const tp = lines.filter((l) => l.section === 'throughput');
  emit(
    'Throughput, Python hello world, one session and conversation per concurrent caller',
    ['concurrent', 'calls', 'ok', 'runs/s', 'p50 ms', 'p95 ms', 'queue p50', 'queue max', 'cap', 'seen queued', 'daemon CPU ms/run', 'load 1m'],
    tp.map((l) => [l.concurrency, l.calls, l.completed, l.runs_per_s, l.p50, l.p95, l.queue_p50, l.queue_max, l.max_concurrent, l.seen_queued_max, l.daemon_cpu_ms_per_run, `${l.load_start[0]}-${l.load_end[0]}`]),
  );
  const wrk = lines.filter((l) => l.section === 'tools_list');
  emit(
    'tools/list with wrk (keep-alive connections, one MCP session per wrk thread)',
    ['connections', 'threads', 'seconds', 'requests', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'non-2xx', 'socket errors', 'not tools/list'],
    wrk.map((l) => [l.connections, l.threads, l.duration_s, l.requests, l.rps, l.p50, l.p90, l.p99, l.max, l.non2xx, l.errors, l.bad]),
  );
  const rss = lines.filter((l) => l.section === 'rss');
  for (const r of rss) {
    emit(
      `Daemon memory (VmRSS) at checkpoints (${r.calls} cheap calls: p50 ${r.call_p50} ms, p99 ${r.call_p99} ms, max ${r.call_max} ms, ${r.calls_per_s}/s; ${r.runs_ok}/${r.runs} run_code ok)`,
      ['checkpoint', 'VmRSS MiB', 'VmHWM MiB', 'threads', 'fds', 'note'],
      r.points.map((p) => [
        p.label,
        (p.rss_kb / 1024).toFixed(1),
        (p.hwm_kb / 1024).toFixed(1),
        p.threads,
        p.fds,
        p.sse_open !== undefined
          ? `opened in ${p.open_ms} ms; refused ${JSON.stringify(p.sse_refused)}; tools/list meanwhile ${p.tools_list_ms_meanwhile} ms`
          : p.note ?? '',
      ]),
    );
  }
  const extra = lines.filter((l) => l.section === 'rss_point');
  emit('Daemon memory, further checkpoints', ['checkpoint', 'VmRSS MiB', 'threads', 'fds'], extra.map((p) => [p.label, (p.rss_kb / 1024).toFixed(1), p.threads, p.fds]));
  console.log(out.join('\n'));
  if (o.markdown) writeFileSync(o.markdown, md.join('\n') + '\n');
}

/** Parses a `wrk --latency` report (with tools_list.lua's line). */
function toMs(s) {
  const m = String(s).match(/^([\d.]+)(us|ms|s|m)$/);
  if (!m) return null;
  const v = Number(m[1]);
  return r1({ us: v / 1000, ms: v, s: v * 1000, m: v * 60000 }[m[2]]);
}
function sectionWrkParse(o) {
  const txt = readFileSync(o.file, 'utf8');
  const g = (re) => (txt.match(re) || [])[1];
  const sock = txt.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/);
  const res = {
    section: 'tools_list',
    connections: Number(o.connections),
    threads: Number(o.threads),
    requests: Number(g(/(\d+) requests in/)),
    duration_s: Number(g(/requests in ([\d.]+)s/)),
    rps: Number(g(/Requests\/sec:\s+([\d.]+)/)),
    p50: toMs(g(/\s50%\s+(\S+)/)),
    p75: toMs(g(/\s75%\s+(\S+)/)),
    p90: toMs(g(/\s90%\s+(\S+)/)),
    p99: toMs(g(/\s99%\s+(\S+)/)),
    max: toMs(g(/Latency\s+\S+\s+\S+\s+(\S+)/)),
    non2xx: Number(g(/Non-2xx or 3xx responses: (\d+)/) ?? 0),
    errors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
    good: Number(g(/lua: good (\d+)/)),
    bad: Number(g(/lua: good \d+ bad (\d+)/)),
  };
  record(res);
  console.log(
    `tools/list c=${String(res.connections).padEnd(3)} ${res.rps} req/s  p50 ${res.p50} ms  p90 ${res.p90} ms  p99 ${res.p99} ms  max ${res.max} ms  non-2xx ${res.non2xx}  socket errors ${res.errors}  not a tools/list result ${res.bad}`,
  );
  if (!res.requests) console.log(txt);
}

/** Records one RSS checkpoint (for run.sh after wrk). */
function sectionRssPoint(o) {
  const s = procStatus(Number(env.BENCH_PID));
  record({ section: 'rss_point', label: o.label ?? 'checkpoint', ...s });
  console.log(`rss ${(o.label ?? '').padEnd(34)} VmRSS ${(s.rss_kb / 1024).toFixed(1)} MiB  threads ${s.threads}  fds ${s.fds} ${JSON.stringify(s.fd_kinds)}`);
}

// ---- main --------------------------------------------------------------------
// Only when run as a script: warm_bench.mjs imports the helpers above.
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await main();

async function main() {
  const [section, ...rest] = process.argv.slice(2);
  const opts = parseArgs(rest);
  const sections = {
    latency: sectionLatency,
    engine: sectionEngine,
    throughput: sectionThroughput,
    rss: sectionRss,
    'rss-point': sectionRssPoint,
    'wrk-parse': sectionWrkParse,
    table: sectionTable,
  };
  if (!sections[section]) {
    console.error(`usage: mcp_bench.mjs ${Object.keys(sections).join('|')} [--key value ...]`);
    process.exit(2);
  }
  // Exits once stdout is flushed (a pipe is written asynchronously); the
  // explicit exit ends keep-alive sockets the SDK's fetch may still hold.
  const flushExit = (code) => process.stdout.write('', () => process.exit(code));
  try {
    await sections[section](opts);
    flushExit(0);
  } catch (e) {
    console.error(`mcp_bench ${section}: ${e.stack ?? e}`);
    flushExit(1);
  }
}
