// SPDX-License-Identifier: MIT
// Durable sessions (docs/sessions.md, issue 21) measured the way a client
// sees them: run_code through the official MCP SDK client on real daemons
// (built binary in MCPSD_BIN) against the real engine and the Python
// runner image, side by side in one run. Prints a Markdown table with the
// issue's Must and Goal; never fails on timing.
//
//   MCPSD_BIN=build/dev/cmd/mcp-sandboxd node tests/bench/durable_bench.mjs [--runs N]
//
// Measures (the state: pandas imported and a 50,000 x 8 float DataFrame):
// - restore after idle expiry: the call after the session ended (its
//   restore step as the kernel reports it, and the whole call), p50;
// - the same setup (import pandas, read the frame's CSV from /data) in a
//   fresh session (session "new") for comparison, p50, and the ratio;
// - the save of that state (the kernel's own figure, reported by the next
//   call), p50;
// - warm print(1) with autosave on and off (two daemons, calls
//   interleaved), p50 each and the cost in percent;
// - a rewind to an earlier run (rewind_to) with the frame in the state,
//   p50, next to a plain call.
import { randomBytes } from 'node:crypto';
import { sleep } from '../integration/lib/daemon.mjs';
import { startWarm, stopWarm, waitWarm } from '../integration/lib/warm.mjs';

const argv = process.argv.slice(2);
const RUNS = Number(argv[argv.indexOf('--runs') + 1] || 9) || 9;

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};

async function call(client, conv, code, extra = {}) {
  const t0 = performance.now();
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code, ...extra } }, undefined, { timeout: 300_000 });
  const ms = performance.now() - t0;
  const sc = r.structuredContent ?? {};
  if (sc.status !== 'completed') throw new Error(`run failed: ${JSON.stringify({ status: sc.status, stderr: sc.stderr, session: sc.session }).slice(0, 800)}`);
  return { ms, sc };
}

const SETUP_CSV = String.raw`import numpy as np, pandas as pd
pd.DataFrame(np.random.default_rng(1).random((50000, 8)), columns=list('abcdefgh')).to_csv('/data/frame.csv', index=False)`;
const SETUP = "import pandas as pd\ndf = pd.read_csv('/data/frame.csv')\nprint(df.shape)";

async function main() {
  const rows = [];
  const push = rows.push.bind(rows);
  rows.push = (r) => {
    console.error(`measured: ${r.join(' | ')}`);
    return push(r);
  };
  const conv = (p) => `${p}-${randomBytes(4).toString('hex')}`;
  // A daemon as deployed (the pool on, pandas preloaded) with a short idle
  // expiry, and the same without autosave for print(1).
  const on = await startWarm({ name: 'bench-durable-on', pool: true, env: { SANDBOX_STATE: 'true', SANDBOX_WARM_IDLE_SECONDS: '2', SANDBOX_POOL_LANGUAGES: 'python' } });
  const off = await startWarm({ name: 'bench-durable-off', pool: true, env: { SANDBOX_STATE: 'false', SANDBOX_POOL_LANGUAGES: 'python' } });
  try {
    await waitWarm(on, (w) => w.pool >= 1, 240_000, 'the pool');
    await waitWarm(off, (w) => w.pool >= 1, 240_000, 'the pool');

    // Restore after idle expiry, and the save of the same state.
    const c = conv('restore');
    await call(on.client, c, SETUP_CSV);
    await call(on.client, c, SETUP);
    const restoreMs = [];
    const restoreCall = [];
    const saveMs = [];
    const setupMs = [];
    for (let i = 0; i < RUNS; i++) {
      const n = (await on.health()).warm.expired;
      await waitWarm(on, (w) => w.expired > n && w.sessions === 0, 60_000, 'the idle expiry');
      await waitWarm(on, (w) => w.pool >= 1, 240_000, 'the pool');
      const r = await call(on.client, c, 'df.shape');
      if (r.sc.session.state !== 'restored') throw new Error(`not restored: ${JSON.stringify(r.sc.session)}`);
      restoreMs.push(r.sc.session.restored.ms);
      restoreCall.push(r.ms);
      // The save of that state (after 0.1 s idle), told by the next call
      // of the same session (within its 2 s idle time).
      await sleep(500);
      const next = await call(on.client, c, 'df.shape');
      if (next.sc.session.autosave?.ok) saveMs.push(next.sc.session.autosave.ms);
      // The same setup again in a fresh session of another conversation
      // with the same files (a pool box, pandas preloaded, like the restore).
      await waitWarm(on, (w) => w.pool >= 1, 240_000, 'the pool');
      const f = conv('fresh');
      await call(on.client, f, SETUP_CSV);
      await waitWarm(on, (w) => w.pool >= 1, 240_000, 'the pool');
      const t = await call(on.client, f, SETUP, { session: 'new' });
      setupMs.push(t.ms);
    }
    rows.push(['restore after idle expiry (50,000 x 8 DataFrame, pandas), kernel restore step, p50', `${median(restoreMs).toFixed(0)} ms`, '≤ 600 ms', '≤ 250 ms']);
    rows.push(['the same, whole run_code call (new box from the pool + restore + df.shape), p50', `${median(restoreCall).toFixed(0)} ms`, '', '']);
    rows.push(['re-running the setup (read_csv, import) in a fresh session (session "new"), p50', `${median(setupMs).toFixed(0)} ms`, '', '']);
    rows.push(['restore call / setup call', `${(median(restoreCall) / median(setupMs)).toFixed(2)}x`, '≤ 0.5x', '≤ 0.2x']);
    rows.push(['save (autosave) of that state, p50', `${median(saveMs).toFixed(0)} ms`, '≤ 1 s', '≤ 300 ms']);

    // Rewind with the frame in the state.
    const rw = conv('rewind');
    await call(on.client, rw, SETUP_CSV);
    await call(on.client, rw, SETUP);
    await sleep(400);
    const rewindMs = [];
    const plainMs = [];
    for (let i = 0; i < RUNS; i++) {
      // A model's steps are seconds apart: each is saved (calls within
      // 0.1 s share a save), so the bench pauses like one.
      const first = await call(on.client, rw, 'df["a"] = df["a"] + 1');
      const back = first.sc.session.run_number;
      await sleep(400);
      await call(on.client, rw, 'df = None');
      await sleep(400);
      plainMs.push((await call(on.client, rw, 'print(1)')).ms);
      const r = await call(on.client, rw, 'df.shape', { rewind_to: back });
      if (r.sc.session.state !== 'rewound') throw new Error(`not rewound: ${JSON.stringify(r.sc.session)}`);
      rewindMs.push(r.ms);
    }
    rows.push(['rewind to an earlier run (the frame in the state), whole call, p50', `${median(rewindMs).toFixed(0)} ms`, '≤ 1 s', '≤ 200 ms']);
    rows.push(['(a plain warm print(1) in that session, p50)', `${median(plainMs).toFixed(0)} ms`, '', '']);

    // Autosave's cost on warm print(1): interleaved, same machine.
    const a = conv('p1-on');
    const b = conv('p1-off');
    await call(on.client, a, 'print(1)');
    await call(off.client, b, 'print(1)');
    const withSave = [];
    const without = [];
    for (let i = 0; i < RUNS * 6; i++) {
      withSave.push((await call(on.client, a, 'print(1)')).ms);
      without.push((await call(off.client, b, 'print(1)')).ms);
    }
    const cost = (median(withSave) / median(without) - 1) * 100;
    rows.push(['warm print(1), autosave on, p50', `${median(withSave).toFixed(1)} ms`, '', '']);
    rows.push(['warm print(1), autosave off, p50', `${median(without).toFixed(1)} ms`, '', '']);
    rows.push(["autosave's cost on warm print(1)", `${cost >= 0 ? '+' : ''}${cost.toFixed(0)} %`, '≤ +20 %', '≤ +5 %']);
  } finally {
    await stopWarm(on).catch((e) => console.error(String(e)));
    await stopWarm(off).catch((e) => console.error(String(e)));
  }
  console.log(`\n| Measure (runs: ${RUNS}) | Measured | Must | Goal |\n| --- | --- | --- | --- |`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
