// SPDX-License-Identifier: MIT
// Issue 22's side-by-side benchmark: this daemon's warm path next to a bare
// Jupyter kernel with the same limits (tests/bench/jupyter: the Python
// runner image plus Debian's python3-ipykernel, driven by Debian's
// python3-jupyter-client over ZeroMQ ipc sockets in a bind-mounted
// directory), quiet and while a load generator keeps starting and removing
// containers beside the measured calls; cold one-off runs and the first
// call in every language next to `docker run --rm` of the same image and
// code; idle pool box memory; the size of tools/list. Interleaved rounds in
// one run, medians and p95; one JSON line per figure to BENCH_RESULTS, and
// `mcp_bench.mjs table` prints them with issue 22's Must and Goal. Figures
// are printed, never asserted.
//
//   node tests/bench/kernel_bench.mjs SECTION [--key value ...]
// Sections (the daemon has warm sessions and its default pool on):
//   kernel      warm print(1) through MCP (the SDK client, and a raw
//               keep-alive HTTP client) vs the Jupyter kernel, quiet then
//               busy; df.describe() on 50,000 x 8 likewise; MCP ping vs
//               kernel_info; the idle kernel's memory
//               (--runs 25 --warmup 2 --load 2)
//   cold        a one-off run (memory_mb other than the default, so no warm
//               session) vs `docker run --rm` of the same image, code and
//               limits: memory_mb 512 (a pool box, its limits changed) and
//               128 (a container of its own) (--runs 25)
//   first       the first call of a new conversation in every language vs
//               `docker run --rm` of its hello world (--runs 3; each opens
//               a warm session: 9 x 3 and the pool fit the default 32
//               warm boxes, a fresh daemon)
//   poolmem     host memory of the idle pool boxes (cgroup + shim PSS)
//   tools       tools/list: names + descriptions + input schemas (what
//               reaches a model) per tool, output schemas apart
// The daemon and scratch space are named by the environment as for
// mcp_bench.mjs (BENCH_URL, BENCH_TOKEN, BENCH_PID, BENCH_INSTANCE,
// BENCH_ENV_FILE, BENCH_WORK, BENCH_RESULTS, BENCH_CREATE_BODY, BENCH_TAG);
// JUPYTER_DRIVER (tests/bench/jupyter/driver.py) and JUPYTER_PYTHON
// (/usr/bin/python3) for the baseline.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { connectHttp } from '../integration/lib/daemon.mjs';
import { daemon, dockerApi, health, loadavg, median, pct, r1, r2, record, runCli, sleep, wallMs } from './mcp_bench.mjs';
import { cgroupMemory, cliFor, shimMemory } from './warm_bench.mjs';

const env = process.env;
const TAG = env.BENCH_TAG ?? `pid${process.pid}`;
const MiB = 1024 * 1024;

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    o[argv[i].slice(2)] = argv[i + 1];
  }
  return o;
}

const FRAME =
  "import numpy as np\nimport pandas as pd\ndf = pd.DataFrame(np.random.default_rng(1).random((50000, 8)), columns=list('abcdefgh'))\nprint(len(df))";
const DESCRIBED = /count\s+50000/;

// ---- the Jupyter kernel ------------------------------------------------------
/** Starts driver.py (which starts the kernel's container); a request/reply handle. */
async function startKernel() {
  const dir = path.join(env.BENCH_WORK ?? os.tmpdir(), `jupyter-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const py = env.JUPYTER_PYTHON ?? '/usr/bin/python3';
  const driver = env.JUPYTER_DRIVER ?? path.join(path.dirname(new URL(import.meta.url).pathname), 'jupyter', 'driver.py');
  const p = spawn(py, [driver, '--dir', dir, '--label', `mcpsd.bench=${TAG}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (c) => (err += c));
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the Jupyter driver ended: ${err.slice(-800)}`);
    return JSON.parse(value);
  };
  const ready = await next();
  if (!ready.ready) throw new Error(`the Jupyter driver did not start: ${JSON.stringify(ready)} ${err}`);
  const ask = async (req) => {
    p.stdin.write(JSON.stringify(req) + '\n');
    return next();
  };
  return {
    id: ready.id,
    exec: (code) => ask({ op: 'exec', code }),
    info: () => ask({ op: 'info' }),
    async stop() {
      p.stdin.write('{"op":"stop"}\n');
      p.stdin.end();
      await new Promise((r) => p.once('close', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---- a raw keep-alive HTTP client ----------------------------------------------
/**
 * JSON-RPC over one keep-alive connection, without the SDK: what is left
 * is the daemon's own time plus the agent's round trip.
 */
async function rawClient(d) {
  const u = new URL(d.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let sid = null;
  let proto = null;
  let id = 0;
  const post = (body) =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const headers = {
        Authorization: `Bearer ${d.token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'Content-Length': Buffer.byteLength(data),
      };
      if (sid) headers['Mcp-Session-Id'] = sid;
      if (proto) headers['MCP-Protocol-Version'] = proto;
      const rq = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent, headers }, (res) => {
        let txt = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (txt += c));
        res.on('end', () => {
          sid ??= res.headers['mcp-session-id'] ?? null;
          if (!txt) return resolve(null);
          if (String(res.headers['content-type']).startsWith('text/event-stream')) {
            const msgs = txt
              .split('\n')
              .filter((l) => l.startsWith('data:'))
              .map((l) => JSON.parse(l.slice(5)));
            return resolve(msgs.find((m) => m.id !== undefined) ?? null);
          }
          resolve(JSON.parse(txt));
        });
      });
      rq.on('error', reject);
      rq.setTimeout(300_000, () => rq.destroy(new Error('raw client: no answer within 300 s')));
      rq.end(data);
    });
  const init = await post({ jsonrpc: '2.0', id: id++, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-raw', version: '1' } } });
  proto = init?.result?.protocolVersion;
  if (!sid || !proto) throw new Error(`raw client: initialize failed: ${JSON.stringify(init)}`);
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return {
    async call(name, args) {
      const t0 = wallMs();
      const r = await post({ jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args } });
      return { ms: wallMs() - t0, result: r?.result, error: r?.error };
    },
    async ping() {
      const t0 = wallMs();
      const r = await post({ jsonrpc: '2.0', id: id++, method: 'ping' });
      return { ms: wallMs() - t0, ok: !!r?.result };
    },
    close: () => agent.destroy(),
  };
}

// ---- the busy engine -----------------------------------------------------------
/**
 * Keeps `n` loops of `docker run --rm` of a small image (the Bash runner,
 * `true`, no network) going until stop(); returns how many it ran.
 */
function startLoad(n) {
  let on = n > 0;
  let started = 0;
  let failed = 0;
  const args = ['run', '--rm', '--label', `mcpsd.bench=${TAG}`, '--label', 'mcpsd.bench.kind=load', '--network', 'none', '--log-driver', 'none', 'mcp-sandboxd/runner-bash:latest', 'true'];
  const loops = [];
  for (let i = 0; i < n; i++)
    loops.push(
      (async () => {
        while (on) {
          const r = await runCli(args);
          started++;
          if (r.code !== 0) {
            failed++;
            await sleep(200);
          }
        }
      })(),
    );
  return {
    async stop() {
      on = false;
      await Promise.all(loops);
      return { started, failed };
    },
  };
}

/** Waits until no pool box is starting (the pool is full); the warm counters. */
async function poolSettled(d, ms = 120_000) {
  const end = Date.now() + ms;
  let last = '';
  let since = Date.now();
  for (;;) {
    const w = (await health(d)).warm ?? {};
    if (!w.pool_enabled) return w;
    // The pool fills a language a tick: settled once nothing starts and
    // the count held still for 3 s (between two starts none is starting).
    const now = `${w.pool}/${w.pool_starting}`;
    if (now !== last) {
      last = now;
      since = Date.now();
    }
    if (w.pool > 0 && !w.pool_starting && Date.now() - since >= 3000) return w;
    // Every warm box in use: the pool cannot refill until a session ends.
    if (w.sessions + w.pool >= w.max && !w.pool_starting) return w;
    if (Date.now() > end) return w;
    await sleep(200);
  }
}

// ---- measuring ----------------------------------------------------------------
function stats(v) {
  return { n: v.length, p50: r1(median(v)), p95: r1(pct(v, 95)) };
}

/**
 * Runs each of fns once per round, rotating which goes first, after warmup
 * rounds; returns { name: { ms: [...], fails, last } }.
 */
async function rounds(runs, warmup, fns, gapMs = 50) {
  const out = Object.fromEntries(Object.keys(fns).map((k) => [k, { ms: [], fails: 0, extra: [] }]));
  const names = Object.keys(fns);
  for (let i = -warmup; i < runs; i++) {
    const k = ((i % names.length) + names.length) % names.length;
    for (const name of [...names.slice(k), ...names.slice(0, k)]) {
      const r = await fns[name]();
      if (!r.ok) {
        out[name].fails++;
        if (out[name].fails <= 3) console.log(`# ${name} failed: ${String(r.text ?? '').slice(0, 400)}`);
      }
      if (i >= 0) {
        out[name].ms.push(r.ms);
        if (r.extra !== undefined) out[name].extra.push(r.extra);
      }
      await sleep(gapMs);
    }
  }
  return out;
}

function report(rec) {
  record({ section: 'kernel', load: loadavg(), ...rec });
  const ratio = rec.ratio_p50 !== undefined ? `  ratio p50 ${rec.ratio_p50} p95 ${rec.ratio_p95}` : '';
  console.log(
    `kernel ${rec.measure.padEnd(46)} ${rec.engine.padEnd(5)} ours ${rec.ours_p50}/${rec.ours_p95} ms  ${rec.base_name ?? 'jupyter'} ${rec.base_p50 ?? '-'}/${rec.base_p95 ?? '-'} ms${ratio}  (n ${rec.n}, fails ${rec.fails}${rec.from_pool ? `, from the pool ${rec.from_pool}` : ''})`,
  );
}

function compare(measure, engine, ours, base, extra = {}) {
  const o = stats(ours.ms);
  const b = base ? stats(base.ms) : null;
  report({
    measure,
    engine,
    n: o.n,
    ours_p50: o.p50,
    ours_p95: o.p95,
    base_p50: b?.p50,
    base_p95: b?.p95,
    ratio_p50: b ? r2(median(ours.ms) / median(base.ms)) : undefined,
    ratio_p95: b ? r2(pct(ours.ms, 95) / pct(base.ms, 95)) : undefined,
    fails: ours.fails + (base?.fails ?? 0),
    ...extra,
  });
}

// ---- kernel -------------------------------------------------------------------
async function sectionKernel(o) {
  const d = daemon();
  const runs = parseInt(o.runs ?? '25', 10);
  const warmup = parseInt(o.warmup ?? '2', 10);
  const loadN = parseInt(o.load ?? '2', 10);
  const sdk = await connectHttp(d);
  const raw = await rawClient(d);
  const k = await startKernel();
  try {
    const conv = `bench-kernel-${Date.now()}`;
    const convRaw = `${conv}-raw`;
    const convDf = `${conv}-df`;
    const ok1 = (sc) => sc?.status === 'completed' && sc.stdout === '1\n';
    // The agent's round trip in ms: to the microsecond from the result's
    // _meta when the daemon gives it (warm runs), else duration_ms.
    const roundTrip = (res) => {
      const us = res?._meta?.['mcp-sandboxd/timing']?.run_us;
      return typeof us === 'number' ? us / 1000 : res?.structuredContent?.duration_ms;
    };
    const viaSdk = (c, code, check) => async () => {
      const t0 = wallMs();
      const r = await sdk.callTool({ name: 'run_code', arguments: { conversationId: c, language: 'python', code } }, undefined, { timeout: 300_000 });
      const ms = wallMs() - t0;
      const sc = r.structuredContent;
      const ok = !r.isError && check(sc) && sc.session?.state === 'continued';
      return { ms, ok, extra: roundTrip(r), text: ok ? '' : JSON.stringify({ status: sc?.status, session: sc?.session, stderr: sc?.stderr }) };
    };
    const viaRaw = (c, code, check) => async () => {
      const r = await raw.call('run_code', { conversationId: c, language: 'python', code });
      const sc = r.result?.structuredContent;
      const ok = !r.result?.isError && check(sc) && sc.session?.state === 'continued';
      return { ms: r.ms, ok, extra: roundTrip(r.result), text: ok ? '' : JSON.stringify(r.error ?? { status: sc?.status, session: sc?.session }) };
    };
    const viaKernel = (code, check) => async () => {
      const r = await k.exec(code);
      return { ms: r.ms, ok: r.ok && check(r), text: JSON.stringify(r).slice(0, 300) };
    };
    // Set-up: a warm session each, the frame loaded on both sides.
    for (const [c, code, check] of [
      [conv, 'print(1)', ok1],
      [convDf, FRAME, (sc) => sc?.stdout === '50000\n'],
    ]) {
      const r = await sdk.callTool({ name: 'run_code', arguments: { conversationId: c, language: 'python', code } }, undefined, { timeout: 300_000 });
      if (r.isError || !check(r.structuredContent)) throw new Error(`set-up of ${c} failed: ${JSON.stringify(r).slice(0, 600)}`);
    }
    const rr = await raw.call('run_code', { conversationId: convRaw, language: 'python', code: 'print(1)' });
    if (!ok1(rr.result?.structuredContent)) throw new Error(`set-up through the raw client failed: ${JSON.stringify(rr).slice(0, 600)}`);
    const kf = await k.exec(FRAME);
    if (!kf.ok || kf.stdout !== '50000\n') throw new Error(`loading the frame in the kernel failed: ${JSON.stringify(kf)}`);

    const pingSdk = async () => {
      const t0 = wallMs();
      await sdk.ping();
      return { ms: wallMs() - t0, ok: true };
    };
    for (const engine of ['quiet', 'busy']) {
      const load = engine === 'busy' ? startLoad(loadN) : null;
      if (load) await sleep(1000);
      const l0 = loadavg();
      const p = await rounds(runs, warmup, {
        sdk: viaSdk(conv, 'print(1)', ok1),
        raw: viaRaw(convRaw, 'print(1)', ok1),
        jupyter: viaKernel('print(1)', (r) => r.stdout === '1\n'),
      });
      const df = await rounds(runs, warmup, {
        sdk: viaSdk(convDf, 'df.describe()', (sc) => DESCRIBED.test(sc?.value?.['text/plain'] ?? '')),
        jupyter: viaKernel('df.describe()', (r) => DESCRIBED.test(r.text_plain)),
      });
      const pr = await rounds(runs, warmup, {
        ping: pingSdk,
        rawping: () => raw.ping(),
        info: async () => k.info(),
      });
      const ld = load ? await load.stop() : null;
      const extra = { load_start: l0, load_generator: ld ? `${loadN} loops of docker run --rm, ${ld.started} containers (${ld.failed} failed)` : 'off' };
      compare('warm print(1), SDK client', engine, p.sdk, p.jupyter, { ...extra, must: engine === 'busy' ? 'p50 <= 0.9x, p95 <= 1.0x' : 'p50 <= 0.9x', goal: engine === 'busy' ? 'p50 <= 0.6x, p95 <= 0.7x' : 'p50 <= 0.6x' });
      compare('warm print(1), raw keep-alive HTTP', engine, p.raw, p.jupyter, extra);
      compare('df.describe() on 50,000 x 8, SDK client', engine, df.sdk, df.jupyter, { ...extra, must: 'p50 <= 1.0x', goal: 'p50 <= 0.8x' });
      compare('protocol alone: MCP ping (SDK) / kernel_info', engine, pr.ping, pr.info, extra);
      compare('protocol alone: MCP ping (raw) / kernel_info', engine, pr.rawping, pr.info, extra);
      // The daemon's own time: the raw call minus the agent's round trip
      // as the daemon timed it (roundTrip), per call.
      const own = p.raw.ms.map((ms, i) => ms - (p.raw.extra[i] ?? NaN)).filter(Number.isFinite);
      if (own.length)
        report({
          measure: "daemon time beyond the agent's round trip (raw call - run_us)",
          engine,
          n: own.length,
          ours_p50: r1(median(own)),
          ours_p95: r1(pct(own, 95)),
          fails: 0,
          note: `the agent's round trip, as the daemon times it (_meta run_us), p50 ${r1(median(p.raw.extra))} ms`,
          must: '<= 0.5 ms',
          goal: '<= 0.2 ms',
          ...extra,
        });
    }
    // The idle kernel's memory (its cgroup + shim), the frame loaded.
    await sleep(3000);
    const cg = cgroupMemory(k.id);
    const shim = shimMemory(k.id);
    record({ section: 'kernel_memory', box: 'Jupyter kernel, frame loaded (numpy, pandas)', usage_mib: cg ? r1(cg.usage / MiB) : null, shim_pss_mib: shim ? r1(shim.pss_kb / 1024) : null, host_mib: cg && shim ? r1(cg.usage / MiB + shim.pss_kb / 1024) : null });
    console.log(`kernel memory: Jupyter kernel with the frame: cgroup ${cg ? r1(cg.usage / MiB) : '?'} MiB + shim PSS ${shim ? r1(shim.pss_kb / 1024) : '?'} MiB`);
  } finally {
    raw.close();
    await sdk.close();
    await k.stop();
  }
}

// ---- cold -----------------------------------------------------------------------
// A one-off run: limits other than the warm sessions' (memory_mb), so no
// session. It runs in a pool box whose limits the daemon changes (the pool
// settled before each call, as after an idle moment: a one-off takes the
// pool box and the pool starts another), above the sessions' memory (512
// here) and below it (128: the claim ends the box's kernel first). Then
// one-off runs back to back (128, the pool not waited for): the pool cannot
// refill between them, so most start a container of their own, the path of
// a run the pool cannot serve. Each next to docker run --rm with the same
// memory.
async function sectionCold(o) {
  const d = daemon();
  const runs = parseInt(o.runs ?? '25', 10);
  const warmup = parseInt(o.warmup ?? '2', 10);
  const client = await connectHttp(d);
  try {
    for (const [memory, settle] of [[parseInt(o['memory-mb'] ?? '512', 10), true], [128, true], [128, false]]) {
      // docker run --rm with the daemon's create body, at the same memory.
      const cli = await cliFor('python', 'print(1)\n');
      for (const [i, a] of cli.args.entries()) if (a === '--memory' || a === '--memory-swap') cli.args[i + 1] = `${memory * MiB}b`;
      const conv = `bench-cold-${memory}-${Date.now()}`;
      const res = await rounds(runs, warmup, {
        oneoff: async () => {
          if (settle) await poolSettled(d);
          const t0 = wallMs();
          const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code: 'print(1)', memory_mb: memory } }, undefined, { timeout: 300_000 });
          const sc = r.structuredContent ?? {};
          const ok = !r.isError && sc.status === 'completed' && sc.stdout === '1\n' && (sc.session?.state ?? 'none') === 'none';
          return { ms: wallMs() - t0, ok, extra: sc.session?.from_pool === true, text: ok ? '' : JSON.stringify({ status: sc.status, session: sc.session }) };
        },
        cli: async () => {
          const r = await cli.run();
          return { ...r, ok: r.ok && r.out === '1\n', text: r.err };
        },
      }, 100);
      const hits = res.oneoff.extra.filter(Boolean).length;
      compare(`cold one-off python print(1) (memory_mb ${memory}${settle ? '' : ', back to back'}) vs docker run --rm`, 'quiet', res.oneoff, res.cli, {
        base_name: 'docker run --rm',
        must: 'p50 <= 0.85x',
        goal: 'p50 <= 0.7x',
        from_pool: `${hits}/${res.oneoff.extra.length}`,
      });
    }
  } finally {
    await client.close();
  }
}

// ---- first ------------------------------------------------------------------------
const HELLO = {
  bash: 'echo hello',
  c: '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
  cpp: '#include <iostream>\nint main() { std::cout << "hello" << std::endl; }\n',
  go: 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n',
  php: '<?php echo "hello\\n";',
  python: "print('hello')",
  ruby: 'puts "hello"',
  rust: 'fn main() { println!("hello"); }\n',
  typescript: "console.log('hello')",
};

/** Languages with an idle pool box of this daemon now. */
async function poolLanguages() {
  const q = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${env.BENCH_INSTANCE}`, 'sandbox.kind=pool'] }));
  const list = JSON.parse((await dockerApi('GET', `/containers/json?filters=${q}`)).body);
  return new Set(list.map((c) => c.Labels['sandbox.language']));
}

async function sectionFirst(o) {
  const d = daemon();
  const runs = parseInt(o.runs ?? '3', 10);
  const client = await connectHttp(d);
  try {
    const { structuredContent: sc } = await client.callTool({ name: 'list_runners', arguments: {} });
    const langs = sc.runners.map((r) => r.language).filter((l) => HELLO[l]);
    const h0 = await poolSettled(d);
    const pooled = await poolLanguages();
    console.log(`# pool: ${h0.pool_enabled ? `${h0.pool} boxes (${[...pooled].join(', ')})` : 'off'}`);
    for (const lang of langs) {
      const cli = await cliFor(lang, HELLO[lang] + '\n');
      const first = [];
      const base = [];
      let fails = 0;
      let fromPool = 0;
      for (let i = 0; i < runs; i++) {
        // A full pool before each first call, as after an idle moment:
        // a pooled language's box is back (bounded wait).
        // (Its box exists once started, ready once nothing is starting.)
        for (let w = 0; pooled.has(lang) && w < 300 && !(await poolLanguages()).has(lang); w++) await sleep(200);
        await poolSettled(d);
        await sleep(300);
        const c = await cli.run();
        if (c.ok && c.out === 'hello\n') base.push(c.ms);
        else {
          fails++;
          console.log(`# ${lang} docker run failed: ${c.err.slice(0, 300)}`);
        }
        await sleep(100);
        const t0 = wallMs();
        const r = await client.callTool({ name: 'run_code', arguments: { conversationId: `bench-first-${lang}-${i}-${Date.now()}`, language: lang, code: HELLO[lang] } }, undefined, { timeout: 300_000 });
        const ms = wallMs() - t0;
        const s = r.structuredContent ?? {};
        if (!r.isError && s.status === 'completed' && s.stdout === 'hello\n') first.push(ms);
        else {
          fails++;
          console.log(`# ${lang} first call failed: ${JSON.stringify({ status: s.status, stderr: s.stderr, session: s.session }).slice(0, 300)}`);
        }
        if (s.session?.from_pool) fromPool++;
      }
      compare(`first call of a conversation: ${lang}`, 'quiet', { ms: first, fails }, { ms: base, fails: 0 }, { base_name: 'docker run --rm', from_pool: `${fromPool}/${runs}`, must: 'p50 <= 0.1x', goal: 'p50 <= 0.05x' });
    }
    // Evictions would mean the measure ran out of warm boxes (see run.sh).
    console.log(`# warm counters after the section: ${JSON.stringify((await health(d)).warm)}`);
  } finally {
    await client.close();
  }
}

// ---- poolmem ------------------------------------------------------------------------
async function sectionPoolMem(o) {
  const d = daemon();
  const settle = parseInt(o['settle-ms'] ?? '5000', 10);
  const h = await poolSettled(d);
  if (!h.pool_enabled) throw new Error('the daemon has no pool (SANDBOX_POOL_SIZE=0?)');
  await sleep(settle);
  const q = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${env.BENCH_INSTANCE}`, 'sandbox.kind=pool'] }));
  const list = JSON.parse((await dockerApi('GET', `/containers/json?filters=${q}`)).body);
  if (!list.length) throw new Error(`no pool box of ${env.BENCH_INSTANCE} found`);
  for (const c of list) {
    const cg = cgroupMemory(c.Id);
    const shim = shimMemory(c.Id);
    const rec = {
      section: 'kernel_memory',
      box: `idle pool box: ${c.Labels['sandbox.language']}`,
      usage_mib: cg ? r1(cg.usage / MiB) : null,
      shim_pss_mib: shim ? r1(shim.pss_kb / 1024) : null,
      host_mib: cg && shim ? r1(cg.usage / MiB + shim.pss_kb / 1024) : null,
      must: c.Labels['sandbox.language'] === 'python' ? '' : '<= 12 MiB',
      goal: c.Labels['sandbox.language'] === 'python' ? '' : '<= 8 MiB',
    };
    record(rec);
    console.log(`pool memory ${rec.box.padEnd(28)} cgroup ${rec.usage_mib} MiB + shim PSS ${rec.shim_pss_mib} MiB = ${rec.host_mib} MiB`);
  }
}

// ---- tools --------------------------------------------------------------------------
async function sectionTools() {
  const d = daemon();
  const client = await connectHttp(d);
  try {
    const { tools } = await client.listTools();
    let model = 0;
    let out = 0;
    const per = [];
    for (const t of tools) {
      const desc = (t.description ?? '').length;
      const input = JSON.stringify(t.inputSchema).length;
      const output = t.outputSchema ? JSON.stringify(t.outputSchema).length : 0;
      model += t.name.length + desc + input;
      out += output;
      per.push({ tool: t.name, description: desc, input_schema: input, output_schema: output });
    }
    const langs = tools.find((t) => t.name === 'run_code')?.inputSchema?.properties?.language?.enum ?? [];
    record({ section: 'tools_size', tools: per, model_chars: model, output_chars: out, enum: langs.length, must: '<= 6,000', goal: '<= 4,000' });
    for (const p of per) console.log(`tools/list ${p.tool.padEnd(14)} description ${p.description}, input schema ${p.input_schema}, output schema ${p.output_schema}`);
    console.log(`tools/list: ${model} characters of names, descriptions and input schemas (${Math.round(model / 4)} tokens at ~4 characters a token); output schemas ${out} apart; ${langs.length} language names and aliases`);
  } finally {
    await client.close();
  }
}

// ---- main ---------------------------------------------------------------------------
const [section, ...rest] = process.argv.slice(2);
const sections = { kernel: sectionKernel, cold: sectionCold, first: sectionFirst, poolmem: sectionPoolMem, tools: sectionTools };
if (!sections[section]) {
  console.error(`usage: kernel_bench.mjs ${Object.keys(sections).join('|')} [--key value ...]`);
  process.exit(2);
}
try {
  await sections[section](parseArgs(rest));
  process.stdout.write('', () => process.exit(0));
} catch (e) {
  console.error(`kernel_bench ${section}: ${e.stack ?? e}`);
  process.stdout.write('', () => process.exit(1));
}
