// SPDX-License-Identifier: MIT
// Fairness of warm sessions between tenants (issue 19 §3), through the real
// MCP endpoint with the official SDK client and two API tokens
// (MCP_API_TOKENS=alice:...,bob:...):
// - fair shares of SANDBOX_WARM_MAX: a tenant that opens more conversations
//   than its share evicts its own idle sessions, not another tenant's
//   Python state;
// - CPU between calls: a thread left spinning in a warm Python session is
//   charged to its tenant (measured on the host, between runs too), so the
//   tenant's next run is refused once its TENANT_CPU_SECONDS are used, and
//   the burning session is ended;
// - what threads left running print between calls is dropped with a count
//   in session.background, never shown in the next run's output unseen.
//
// The daemons run side by side; the file takes a minute or two.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connectHttp, sleep } from './lib/daemon.mjs';
import { describeRun } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startRun, startWarm, stopWarm, until } from './lib/warm.mjs';

const T = 300_000 * SLOW;
const ALICE = randomBytes(24).toString('hex');
const BOB = randomBytes(24).toString('hex');
const TOKENS = `alice:${ALICE},bob:${BOB}`;
const YEAR = 31536000; // a budget window that does not end during the test

/** A warm daemon with the two tenants' tokens and clients for both. */
async function twoTenants(name, env = {}) {
  const d = await startWarm({ name, connect: false, env: { MCP_API_TOKENS: TOKENS, ...env } });
  d.alice = await connectHttp(d, { token: ALICE });
  d.bob = await connectHttp(d, { token: BOB });
  return d;
}

async function stopTwo(d) {
  if (!d) return;
  await d.alice?.close().catch(() => {});
  await d.bob?.close().catch(() => {});
  await stopWarm(d);
}

describe('warm sessions shared fairly between tenants', { concurrency: true }, () => {
  test("a tenant's new conversations past its share evict its own idle sessions, not another tenant's state", { timeout: T }, async () => {
    const MAX = 4;
    const d = await twoTenants('warm-fair-share', { SANDBOX_WARM_MAX: String(MAX) });
    try {
      const a = conv('alice');
      let r = await py(d.alice, a, 'x = 41\nprint("set")');
      expectStatus(r, 'completed');
      expectSession(r, 'new');

      // Bob opens MAX + 2 conversations, one after the other: the box is
      // full after his third; from then on he is over his share (MAX / 2).
      const bobs = [];
      for (let i = 0; i < MAX + 2; i++) {
        const c = conv('bob');
        bobs.push(c);
        r = await run(d.bob, c, 'bash', `echo bob ${i}`);
        expectStatus(r, 'completed');
        expectSession(r, 'new');
        assert.equal(r.sc.stdout, `bob ${i}\n`);
      }
      const w = (await d.health()).warm;
      assert.ok(w.sessions <= MAX, `at most ${MAX} warm sessions: ${JSON.stringify(w)}`);
      assert.ok(w.evicted >= 2, `bob's own sessions were evicted: ${JSON.stringify(w)}`);

      // Alice's Python state survived all of it.
      r = await py(d.alice, a, 'print(x + 1)');
      expectStatus(r, 'completed');
      expectSession(r, 'continued');
      assert.equal(r.sc.stdout, '42\n', describeRun(r));

      // Bob's oldest conversation was the one given up: its state is gone
      // and its next run says why.
      r = await run(d.bob, bobs[0], 'bash', 'echo again');
      expectStatus(r, 'completed');
      expectSession(r, 'restarted', 'evicted');

      // Alice is under her share: a new conversation of hers may take the
      // place of one of Bob's (he holds more than his share), and her first
      // session still lives.
      r = await py(d.alice, conv('alice'), 'print("second")');
      expectStatus(r, 'completed');
      expectSession(r, 'new');
      r = await py(d.alice, a, 'print(x + 2)');
      expectSession(r, 'continued');
      assert.equal(r.sc.stdout, '43\n', describeRun(r));

      // Bob holds his share (2 of 4) and both his sessions are busy: a new
      // conversation of his runs one-off rather than evict Alice's idle
      // ones, and says why.
      const busy = [bobs[MAX + 1], bobs[0]].map((c) => startRun(d.bob, c, 'bash', 'echo started; sleep 8; echo done'));
      for (const b of busy) await b.started;
      r = await run(d.bob, conv('bob'), 'bash', 'echo one-off');
      expectStatus(r, 'completed');
      expectSession(r, 'none', 'tenant_share');
      assert.match(r.text, /holds its fair share of the server's warm sessions/);
      for (const b of busy) expectStatus(await b.done, 'completed');
      r = await py(d.alice, a, 'print(x + 3)');
      expectSession(r, 'continued');
      assert.equal(r.sc.stdout, '44\n', describeRun(r));
    } finally {
      await stopTwo(d);
    }
  });

  test('a thread left spinning between calls is charged to its tenant: over budget, the next run is refused and the session ended', { timeout: T }, async () => {
    const d = await twoTenants('warm-fair-cpu', { TENANT_CPU_SECONDS: '3', TENANT_CPU_WINDOW_SECONDS: String(YEAR) });
    try {
      const a = conv('spin');
      const spin = 'import threading\ndef spin():\n    while True:\n        pass\nthreading.Thread(target=spin, daemon=True).start()\nprint("spinning")';
      let r = await py(d.alice, a, spin);
      expectStatus(r, 'completed');

      // No run while it spins: only the housekeeping tick can see its CPU.
      // 3 CPU-seconds take ~6-30 s on a loaded 2-core machine; the tick
      // ends the session once the tenant is over its budget.
      const w = await until(async () => {
        const h = (await d.health()).warm;
        return h.cpu_budget_ended >= 1 ? h : null;
      }, 120_000 * SLOW, 500);

      // The tenant's next run is refused: the thread used its budget.
      r = await py(d.alice, a, 'print("more")');
      assert.equal(r.sc?.status, 'rate_limited', `the spinning thread was not charged: ${describeRun(r)} ${JSON.stringify(r.sc?.session)}`);
      assert.equal(r.sc.limit, 'cpu_seconds');
      assert.match(r.text, /TENANT_CPU_SECONDS/);
      assert.match(r.text, /threads left running in warm sessions use between runs counts too/);

      // And the burning session was ended, its box removed.
      assert.ok(w, `the spinning session was never ended: ${JSON.stringify((await d.health()).warm)}`);
      // Most of the 3 s were charged as idle CPU (the first run's own
      // charge, the box's CPU up to its result, holds the rest).
      assert.ok(w.idle_cpu_ms >= 2000, `idle CPU charged: ${JSON.stringify(w)}`);
      assert.equal(w.sessions, 0, `the session is gone: ${JSON.stringify(w)}`);
      const gone = await until(async () => (await boxesOf(d)).length === 0, 30_000 * SLOW, 500);
      assert.ok(gone, 'its box was removed');

      // The other tenant's budget is untouched.
      r = await py(d.bob, conv('bob'), 'print("bob")');
      expectStatus(r, 'completed');
    } finally {
      await stopTwo(d);
    }
  });

  test('what a leftover thread prints between calls is dropped and counted, not mixed into the next run', { timeout: T }, async () => {
    const d = await twoTenants('warm-fair-print');
    try {
      const a = conv('late');
      let r = await py(d.alice, a, 'import threading, time\ndef later():\n    time.sleep(2)\n    print("LATE-MARKER", flush=True)\nthreading.Thread(target=later).start()\nprint("first")');
      expectStatus(r, 'completed');
      assert.equal(r.sc.stdout, 'first\n');
      assert.equal(r.sc.session.background?.threads, 1, JSON.stringify(r.sc.session));
      assert.match(r.text, /background: 1 thread\(s\) of earlier code are still running/);
      await sleep(5000);
      r = await py(d.alice, a, 'print("next")');
      expectStatus(r, 'completed');
      assert.equal(r.sc.stdout, 'next\n', describeRun(r));
      assert.equal(r.sc.session.background?.dropped_output_bytes, 'LATE-MARKER\n'.length, JSON.stringify(r.sc.session));
      assert.equal(r.sc.session.background?.threads, 0, JSON.stringify(r.sc.session));
      assert.match(r.text, /printed between runs is dropped \(12 bytes\)/);
      // A quiet session says nothing of background work.
      r = await py(d.alice, a, 'print("quiet")');
      assert.equal(r.sc.session.background, undefined, JSON.stringify(r.sc.session));
      assert.doesNotMatch(r.text, /background:/);
    } finally {
      await stopTwo(d);
    }
  });
});
