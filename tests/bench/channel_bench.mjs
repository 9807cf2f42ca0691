// SPDX-License-Identifier: MIT
// The warm channel side by side (issue 22): two daemons on the same engine,
// one talking to its warm boxes over the channel socket
// (SANDBOX_WARM_CHANNEL=socket), one over the attach stream (attach, the
// baseline), each with one warm Python session; interleaved rounds of
// print(1) through the SDK client, quiet and then while a load generator
// keeps starting and removing containers (`docker run --rm`) beside the
// calls. Prints medians and p95 of the call (ms, client side) and of the
// agent's round trip as the daemon times it (duration_ms), and the ratio
// socket / attach. Figures are printed, never asserted.
//
//   MCPSD_BIN=build/dev/cmd/mcp-sandboxd node tests/bench/channel_bench.mjs [--runs 40] [--load 2]
// Run from the repository root (it uses tests/integration/lib).
import { spawn } from 'node:child_process';
import { conv, py, startWarm, stopWarm } from '../integration/lib/warm.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const RUNS = arg('runs', 40);
const LOAD = arg('load', 2);
const IMAGE = process.env.BENCH_LOAD_IMAGE ?? 'mcp-sandboxd/runner-bash';

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** Loops of `docker run --rm IMAGE true`, until stop() is called. */
function loadGen(n) {
  let stopping = false;
  let started = 0;
  const loops = Array.from({ length: n }, async () => {
    while (!stopping) {
      await new Promise((res) => {
        const p = spawn('docker', ['run', '--rm', '--network', 'none', IMAGE, 'true'], { stdio: 'ignore' });
        p.on('exit', res);
        p.on('error', res);
      });
      started++;
    }
  });
  return {
    async stop() {
      stopping = true;
      await Promise.all(loops);
      return started;
    },
  };
}

async function rounds(sides, label) {
  const figs = Object.fromEntries(sides.map((s) => [s.name, { ms: [], dur: [], fails: 0 }]));
  for (let i = 0; i < RUNS; i++) {
    // Interleaved, the order alternating, so drift hits both alike.
    const order = i % 2 ? [...sides].reverse() : sides;
    for (const s of order) {
      const r = await py(s.d.client, s.conv, 'print(1)');
      const f = figs[s.name];
      if (r.sc?.status !== 'completed' || r.sc.stdout !== '1\n') f.fails++;
      else {
        f.ms.push(r.ms);
        f.dur.push(r.sc.duration_ms);
      }
    }
  }
  const a = figs.attach;
  const b = figs.socket;
  for (const [name, f] of Object.entries(figs))
    console.log(
      `channel ${label} ${name.padEnd(6)} call p50 ${pct(f.ms, 50)} p95 ${pct(f.ms, 95)} ms; ` +
        `agent round trip (duration_ms) p50 ${pct(f.dur, 50)} p95 ${pct(f.dur, 95)} ms (n ${f.ms.length}, fails ${f.fails})`,
    );
  console.log(
    `channel ${label} ratio socket/attach: call p50 ${(pct(b.ms, 50) / pct(a.ms, 50)).toFixed(2)} ` +
      `p95 ${(pct(b.ms, 95) / pct(a.ms, 95)).toFixed(2)}`,
  );
}

const sides = [];
try {
  for (const name of ['attach', 'socket'])
    sides.push({
      name,
      conv: conv(`bench-${name}`),
      d: await startWarm({ name: `bench-channel-${name}`, env: { SANDBOX_WARM_CHANNEL: name, MCP_LOG_LEVEL: 'warn' } }),
    });
  for (const s of sides) await py(s.d.client, s.conv, 'x = 1'); // start the sessions
  for (const s of sides) for (let i = 0; i < 3; i++) await py(s.d.client, s.conv, 'print(1)');
  await rounds(sides, 'quiet');
  const g = loadGen(LOAD);
  await rounds(sides, 'busy ');
  console.log(`channel busy: ${LOAD} loops of docker run --rm, ${await g.stop()} containers`);
} finally {
  for (const s of sides) await stopWarm(s.d).catch((e) => console.error(String(e)));
}
