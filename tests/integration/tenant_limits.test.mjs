// SPDX-License-Identifier: MIT
// Per-tenant limits against the real daemon and engine, two tenants
// (MCP_API_TOKENS=alice:...,bob:...) with the SDK client: alice, past a
// small CPU budget, gets status rate_limited with retry_after_seconds and a
// text naming the limit while bob's runs go on; after a restart on the same
// SANDBOX_ROOT alice is still refused (the counters live in the store);
// alice cannot fill the queue: past TENANT_MAX_QUEUED her runs are refused
// at once, bob still queues, and the freed slot goes to bob before alice's
// earlier queued runs. Mostly one-off runs (SANDBOX_WARM=false), so every
// run is charged from its own container's cgroup; one test charges a warm
// run the CPU time its agent reports.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectHttp, sleep } from './lib/daemon.mjs';
import { describeRun, instanceName, removeContainersOf, runCode, startSandboxDaemon } from './lib/sandbox.mjs';

const ALICE = randomBytes(24).toString('hex');
const BOB = randomBytes(24).toString('hex');
const TOKENS = `alice:${ALICE},bob:${BOB}`;
// A window of a year, so it does not end while the test runs.
const YEAR = 31536000;

/** Waits (generously) until /healthz says what pred wants of its runs. */
async function waitRuns(d, pred, what, deadlineMs = 60_000) {
  const end = Date.now() + deadlineMs;
  let runs;
  while (Date.now() < end) {
    runs = (await d.health()).runs;
    if (pred(runs)) return runs;
    await sleep(100);
  }
  assert.fail(`${what}: runs stayed ${JSON.stringify(runs)}`);
}

function assertRateLimited(r, limit) {
  assert.equal(r.sc?.status, 'rate_limited', describeRun(r));
  assert.equal(r.result.isError, true);
  assert.equal(r.sc.limit, limit);
  assert.ok(Number.isInteger(r.sc.retry_after_seconds) && r.sc.retry_after_seconds >= 1, describeRun(r));
  assert.match(r.text, /Not run: this tenant/);
  assert.match(r.text, new RegExp(`retry in ${r.sc.retry_after_seconds} s`));
}

describe('per-tenant CPU budget', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-tenant-root-'));
  const instance = instanceName('tenant-cpu');
  const env = {
    SANDBOX_WARM: 'false',
    MCP_API_TOKENS: TOKENS,
    MCP_API_TOKEN: randomBytes(24).toString('hex'),
    FILE_SECRET: randomBytes(32).toString('hex'),
    TENANT_CPU_SECONDS: '1',
    TENANT_CPU_WINDOW_SECONDS: String(YEAR),
  };
  const start = () => startSandboxDaemon({ name: 'tenant-cpu', root, keepRoot: true, instance, env, connect: false });
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  test('alice past her budget is rate_limited, bob runs; a restart keeps the count', async () => {
    d = await start();
    let alice = await connectHttp(d, { token: ALICE });
    let bob = await connectHttp(d, { token: BOB });

    // 1.5 s of CPU: past the budget of 1 s, whether the run is charged its
    // measured CPU time or wall time x cpus.
    const burn = await runCode(alice, {
      conversationId: 'alice-cpu',
      language: 'python',
      code: 'import time\nwhile time.process_time() < 1.5:\n    pass\nprint("burnt")',
      timeout_seconds: 120,
    });
    assert.equal(burn.sc?.status, 'completed', describeRun(burn));

    const refused = await runCode(alice, { conversationId: 'alice-cpu', language: 'python', code: 'print(1)' });
    assertRateLimited(refused, 'cpu_seconds');
    assert.match(refused.text, /CPU budget/);
    assert.match(refused.text, /TENANT_CPU_SECONDS/);

    const b1 = await runCode(bob, { conversationId: 'bob-cpu', language: 'python', code: 'print("bob", 6 * 7)' });
    assert.equal(b1.sc?.status, 'completed', describeRun(b1));
    assert.match(b1.sc.stdout, /bob 42/);

    await alice.close();
    await bob.close();
    await d.stopClean();

    d = await start();
    alice = await connectHttp(d, { token: ALICE });
    bob = await connectHttp(d, { token: BOB });
    const again = await runCode(alice, { conversationId: 'alice-cpu', language: 'python', code: 'print(1)' });
    assertRateLimited(again, 'cpu_seconds');
    const b2 = await runCode(bob, { conversationId: 'bob-cpu', language: 'python', code: 'print("bob again")' });
    assert.equal(b2.sc?.status, 'completed', describeRun(b2));
    await alice.close();
    await bob.close();
  });
});

describe('per-tenant CPU budget, warm sessions', () => {
  const instance = instanceName('tenant-warm');
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stop();
  });

  test("a warm run is charged the agent's CPU time", async () => {
    d = await startSandboxDaemon({
      name: 'tenant-warm',
      instance,
      connect: false,
      env: {
        SANDBOX_WARM: 'true',
        SANDBOX_POOL_SIZE: '0',
        MCP_API_TOKENS: TOKENS,
        TENANT_CPU_SECONDS: '1',
        TENANT_CPU_WINDOW_SECONDS: String(YEAR),
      },
    });
    const alice = await connectHttp(d, { token: ALICE });
    const bob = await connectHttp(d, { token: BOB });
    const args = { conversationId: 'alice-warm', language: 'python' };
    const burn = await runCode(alice, {
      ...args,
      code: 'import time\nwhile time.process_time() < 1.5:\n    pass\nprint("burnt")',
      timeout_seconds: 120,
    });
    assert.equal(burn.sc?.status, 'completed', describeRun(burn));
    assert.equal(burn.sc.session?.state, 'new', describeRun(burn));
    assert.equal(burn.sc.session.stateful, true, describeRun(burn));
    assert.ok(burn.sc.cpu_ms >= 1000, `cpu_ms ${burn.sc.cpu_ms}`);
    const refused = await runCode(alice, { ...args, code: 'print(1)' });
    assertRateLimited(refused, 'cpu_seconds');
    const b = await runCode(bob, { conversationId: 'bob-warm', language: 'python', code: 'print("bob")' });
    assert.equal(b.sc?.status, 'completed', describeRun(b));
    await alice.close();
    await bob.close();
  });
});

describe('per-tenant queue', () => {
  const instance = instanceName('tenant-queue');
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stop();
  });

  test('alice cannot fill the queue; the freed slot goes to bob first', async () => {
    d = await startSandboxDaemon({
      name: 'tenant-queue',
      instance,
      connect: false,
      env: {
        SANDBOX_WARM: 'false',
        MCP_API_TOKENS: TOKENS,
        SANDBOX_MAX_CONCURRENT: '1',
        SANDBOX_QUEUE_LENGTH: '4',
        TENANT_MAX_QUEUED: '2',
      },
    });
    const alice = await connectHttp(d, { token: ALICE });
    const bob = await connectHttp(d, { token: BOB });
    const done = [];
    const run = (client, who, code) =>
      runCode(client, { conversationId: `${who}-queue`, language: 'python', code }, { timeoutMs: 300_000 }).then(
        (r) => {
          done.push(who);
          return r;
        },
      );

    // alice holds the only slot, long enough for the rest to line up.
    const holder = run(alice, 'alice-holder', 'import time\ntime.sleep(12)\nprint("held")');
    await waitRuns(d, (r) => r.running === 1, 'the holder takes the slot');
    const more = [1, 2, 3, 4].map((i) => run(alice, `alice-${i}`, `print("alice ${i}")`));
    // Two wait; the other two are refused at once (which two depends on
    // the order the requests arrive in).
    const runs = await waitRuns(d, (r) => r.queued === 2, "alice's two runs wait");
    assert.equal(runs.running, 1);
    const end = Date.now() + 60_000;
    while (done.length < 2 && Date.now() < end) await sleep(100);
    assert.equal(done.length, 2, `two of alice's runs are refused at once (done: ${done.join(', ')})`);
    const b = run(bob, 'bob', 'print("bob")');
    await waitRuns(d, (r) => r.queued === 3, "bob's run waits too: alice did not fill the queue");

    const [held, bobRun, ...mine] = await Promise.all([holder, b, ...more]);
    assert.equal(held.sc?.status, 'completed', describeRun(held));
    assert.equal(bobRun.sc?.status, 'completed', describeRun(bobRun));
    const limited = mine.filter((r) => r.sc?.status === 'rate_limited');
    const ran = mine.filter((r) => r.sc?.status === 'completed');
    assert.equal(limited.length, 2, mine.map(describeRun).join('\n'));
    assert.equal(ran.length, 2, mine.map(describeRun).join('\n'));
    for (const r of limited) {
      assertRateLimited(r, 'queued_runs');
      assert.match(r.text, /TENANT_MAX_QUEUED/);
    }
    // bob arrived last but ran right after the holder, before alice's.
    const ranAt = [1, 2, 3, 4].filter((i) => mine[i - 1].sc?.status === 'completed').map((i) => done.indexOf(`alice-${i}`));
    const bobAt = done.indexOf('bob');
    assert.ok(done.indexOf('alice-holder') < bobAt, `completion order ${done.join(', ')}`);
    for (const at of ranAt) assert.ok(bobAt < at, `completion order ${done.join(', ')}`);
    const metrics = await (await fetch(`${d.base}/metrics`)).text();
    assert.match(metrics, /^mcpsd_runs_total\{status="rate_limited",language="python",tenant="alice"\} 2$/m);
    await alice.close();
    await bob.close();
  });
});
