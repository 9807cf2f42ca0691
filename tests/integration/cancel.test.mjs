// SPDX-License-Identifier: MIT
// Cancellation end to end: the official SDK client over Streamable HTTP
// aborts a run_code (an AbortSignal on callTool, which sends
// notifications/cancelled). A one-off run's container is removed from the
// real engine within 2 s; a warm session's run is stopped within 2 s and
// its box stays for the next run; a Python run that ignores the interrupt
// is killed within 2 s, its state lost and said so. Containers are found
// only by the unique instance label (sandbox.owner) of this test's daemon.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sleep } from './lib/daemon.mjs';
import { containersOf, describeRun, removeContainersOf, runCode, startSandboxDaemon } from './lib/sandbox.mjs';
import { SH_PROCS, expectSession, expectStatus, run, startRun, startWarm, stopWarm } from './lib/warm.mjs';

// The bound. The sanitizer build is slower in everything it does,
// the calls to the engine included.
const GONE_WITHIN_MS = 2000 * (process.env.MCPSD_SANITIZED ? 3 : 1);

/**
 * Starts code (which prints 'started') in conversation conv of d, aborts
 * the call once progress shows it started, and checks that callTool
 * rejects. Returns when it aborted (Date.now()).
 */
async function abortOnceStarted(d, conv, language, code) {
  const ac = new AbortController();
  const { done, started } = startRun(d.client, conv, language, code, { timeout_seconds: 200 }, { signal: ac.signal });
  const settled = done.then(
    (r) => ({ r }),
    (e) => ({ e }),
  );
  await started;
  const tAbort = Date.now();
  ac.abort('the test cancels');
  assert.ok((await settled).e, 'callTool rejects once aborted');
  return tAbort;
}

const brief = (cs) => cs.map((c) => `${c.Id.slice(0, 12)} ${c.State} ${c.Labels?.['sandbox.run'] ?? ''}`).join('; ');

describe('cancelling a one-off run_code through the SDK', () => {
  let d;
  before(async () => {
    d = await startSandboxDaemon({ name: 'cancel', env: { SANDBOX_WARM: 'false', WORKSPACE_QUOTA_MODE: 'none' } });
  });
  after(async () => {
    if (d) await removeContainersOf(d.instance).catch(() => {});
    await d?.client?.close().catch(() => {});
    await d?.stopClean();
  });

  test('an aborted run_code has its container removed within 2 s', async (t) => {
    const ac = new AbortController();
    const call = runCode(d.client, { conversationId: 'cancel', language: 'bash', code: 'echo started; sleep 60' }, { request: { signal: ac.signal } });
    // A rejection before the abort would be a failure of its own: keep it.
    const settled = call.then(
      (r) => ({ r }),
      (e) => ({ e }),
    );

    // The run's container is up and running before the abort.
    let running = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 60_000) {
      running = (await containersOf(d.instance, { all: true })).filter((c) => c.State === 'running');
      if (running.length) break;
      await sleep(100);
    }
    assert.equal(running.length, 1, `one running container of ${d.instance} before the abort: ${brief(running)}`);
    assert.equal((await d.health()).calls_running, 1, 'the call is running');

    const tAbort = Date.now();
    ac.abort('the test cancels');
    const out = await settled;
    assert.ok(out.e, `callTool rejects once aborted (it resolved: ${out.r && describeRun({ sc: out.r.structuredContent, text: '', ms: 0 })})`);

    let left = await containersOf(d.instance, { all: true });
    while (left.length && Date.now() - tAbort < GONE_WITHIN_MS + 10_000) {
      await sleep(50);
      left = await containersOf(d.instance, { all: true });
    }
    const goneMs = Date.now() - tAbort;
    t.diagnostic(`container ${running[0].Id.slice(0, 12)} gone ${goneMs} ms after the abort`);
    assert.equal(brief(left), '', 'the container is removed');
    assert.ok(goneMs <= GONE_WITHIN_MS, `the container was removed ${goneMs} ms after the abort (bound ${GONE_WITHIN_MS} ms)`);
  });

  test('the daemon is healthy afterwards and the next run works', async () => {
    let h = await d.health();
    for (let i = 0; i < 50 && h.calls_running; i++) {
      await sleep(100);
      h = await d.health();
    }
    assert.equal(h.status, 'ok', JSON.stringify(h));
    assert.equal(h.calls_running, 0, 'the cancelled call has ended');
    const r = await runCode(d.client, { conversationId: 'cancel', language: 'bash', code: 'echo after the cancel' });
    assert.equal(r.sc?.status, 'completed', describeRun(r));
    assert.equal(r.sc.stdout, 'after the cancel\n', describeRun(r));
    assert.equal(d.exited, null, 'the daemon still runs');
  });
});

describe('cancelling a warm run_code through the SDK', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'cancel-warm', env: { WORKSPACE_QUOTA_MODE: 'none' } });
  });
  after(() => stopWarm(d));

  test('an aborted run_code in a warm session stops within 2 s; its box serves the next run', async (t) => {
    const conv = 'cancel-warm';
    expectSession(await run(d.client, conv, 'bash', 'echo warm'), 'new');
    const boxes = (await containersOf(d.instance, { all: false })).map((c) => c.Id);
    // SIGINT reaches the run's process group: the sleep ends, bash writes
    // the time it saw the interrupt.
    const code = "trap 'date +%s%N > /data/stopped-at; exit 130' INT\necho started\nsleep 60\necho never";
    const tAbort = await abortOnceStarted(d, conv, 'bash', code);

    // The next run of the conversation waits for the cancelled one to end.
    const r = await run(d.client, conv, 'bash', 'cat /data/stopped-at\n' + SH_PROCS);
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    const stoppedMs = Number(BigInt(r.sc.stdout.split('\n')[0]) / 1_000_000n) - tAbort;
    t.diagnostic(`the run saw its interrupt ${stoppedMs} ms after the abort`);
    assert.ok(stoppedMs <= GONE_WITHIN_MS, `the run stopped ${stoppedMs} ms after the abort (bound ${GONE_WITHIN_MS} ms)`);
    assert.doesNotMatch(r.sc.stdout, /sleep/, 'nothing of the cancelled run is left');
    const now = (await containersOf(d.instance, { all: false })).map((c) => c.Id);
    assert.deepEqual(now, boxes, 'the same box, no new container');
    assert.equal((await d.health()).calls_running, 0);
  });

  test('a Python run that ignores the interrupt is killed within 2 s of the abort, and the next run says why', async (t) => {
    const conv = 'cancel-warm-deaf';
    expectSession(await run(d.client, conv, 'python', 'x = 1'), 'new');
    const code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('started', flush=True)\nwhile True:\n    pass";
    const tAbort = await abortOnceStarted(d, conv, 'python', code);
    let running = 1;
    while (running > 0 && Date.now() - tAbort < 10_000) {
      running = (await d.health()).calls_running;
      if (running > 0) await sleep(25);
    }
    const endedMs = Date.now() - tAbort;
    t.diagnostic(`the run ended ${endedMs} ms after the abort`);
    assert.equal(running, 0, 'the run ended');
    assert.ok(endedMs <= GONE_WITHIN_MS, `the run ended ${endedMs} ms after the abort (bound ${GONE_WITHIN_MS} ms)`);

    const r = await run(d.client, conv, 'python', "print('x' in globals())");
    expectStatus(r, 'completed');
    expectSession(r, 'restarted', 'cancel_kill');
    assert.equal(r.sc.stdout, 'False\n');
  });
});
