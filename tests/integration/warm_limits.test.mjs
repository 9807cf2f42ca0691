// SPDX-License-Identifier: MIT
// The limits of warm sessions (docs/sessions.md) through the real MCP
// endpoint with the official SDK client: idle expiry and the maximum
// lifetime with short settings, long runs kept alive by progress for a
// client with a 60-second request timeout, eviction of the least recently
// used idle session, one-off runs when no warm session can be had, and the
// daemon killed with SIGKILL, or stopped with SIGTERM, and restarted on the
// same SANDBOX_ROOT.
//
// The long waits run side by side (each with a daemon of its own), so this
// file takes about two minutes however many there are.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { sleep } from './lib/daemon.mjs';
import { rmSync } from 'node:fs';
import { faultsDir, umountBelow } from './lib/faults.mjs';
import { callTool, containersOf, instanceName, removeContainersOf } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startRun, startWarm, stopWarm, testRunner, until, waitPool, waitWarm } from './lib/warm.mjs';

const T = 300_000 * SLOW;

/**
 * For a restart test: a SANDBOX_ROOT, an instance label and the secrets
 * that both daemons (before and after the restart) share.
 */
function restartSetup(name) {
  return {
    root: faultsDir('mcpsd-root-'),
    instance: instanceName(name),
    env: { FILE_SECRET: randomBytes(32).toString('hex'), MCP_API_TOKEN: randomBytes(24).toString('hex') },
  };
}

/**
 * After a restart test (d1 stopped or killed, d2 on the same root): stops
 * what still runs and removes the root and the instance's containers.
 */
async function restartCleanup(d1, d2, root, instance) {
  if (d1 && !d1.exited) await d1.stop('SIGKILL').catch(() => {});
  if (d2) {
    await stopWarm(d2);
    return;
  }
  umountBelow(root);
  rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  await removeContainersOf(instance).catch(() => {});
}

/** A Python run that prints 'started' and then runs code (see startRun). */
const startedRun = (client, c, code, extra = {}, request = {}) => startRun(client, c, 'python', `print('started', flush=True)\n${code}`, extra, request);

describe('long waits, side by side', { concurrency: true }, () => {
  test('a 90-second run that prints completes for a client with a 60-second timeout that resets on progress', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-long-print' });
    try {
      const msgs = [];
      const r = await py(
        d.client,
        conv('long'),
        "import time\nfor i in range(9):\n    time.sleep(10)\n    print('tick', i, flush=True)\nprint('done')",
        { timeout_seconds: 150 },
        { timeoutMs: 60_000, request: { resetTimeoutOnProgress: true, onprogress: (p) => msgs.push(p) } },
      );
      expectStatus(r, 'completed');
      assert.ok(r.ms >= 90_000, `it ran ${r.ms} ms`);
      assert.match(r.sc.stdout, /tick 8\ndone\n$/);
      assert.ok(msgs.some((m) => /tick \d/.test(m.message ?? '')), 'progress carried the output');
    } finally {
      await stopWarm(d);
    }
  });

  test('a 90-second run that prints nothing completes too: the heartbeat resets the timeout', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-long-silent' });
    try {
      const c = conv('silent');
      const msgs = [];
      const quiet = py(d.client, c, "import time\ntime.sleep(90)\nprint('done')", { timeout_seconds: 150 }, {
        timeoutMs: 60_000,
        request: { resetTimeoutOnProgress: true, onprogress: (p) => msgs.push({ at: Date.now(), ...p }) },
      });
      // The control: the same run for a client that does not reset its
      // timeout gives up after 60 s (and its cancel stops the run).
      const control = py(d.client, conv('control'), "import time\ntime.sleep(90)\nprint('done')", { timeout_seconds: 150 }, {
        timeoutMs: 60_000,
        request: { onprogress: () => {} },
      }).then(
        (r) => ({ r }),
        (e) => ({ e }),
      );
      const r = await quiet;
      expectStatus(r, 'completed');
      assert.ok(r.ms >= 90_000, `it ran ${r.ms} ms`);
      assert.equal(r.sc.stdout, 'done\n');
      const beats = msgs.filter((m) => /^running \d+ s$/.test(m.message ?? ''));
      assert.ok(beats.length >= 10, `heartbeats: ${JSON.stringify(msgs.map((m) => m.message))}`);
      for (let i = 1; i < beats.length; i++) assert.ok(beats[i].at - beats[i - 1].at < 30_000, 'no long silence');
      const ctl = await control;
      assert.ok(ctl.e, `without resetTimeoutOnProgress the client gives up: ${JSON.stringify(ctl.r?.sc?.status)}`);
      assert.match(String(ctl.e.message), /timed out|Request timed out/i);
    } finally {
      await stopWarm(d);
    }
  });

  test('the maximum lifetime ends a session (SANDBOX_WARM_MAX_SECONDS=60), and the next run says so', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-lifetime', env: { SANDBOX_WARM_MAX_SECONDS: '60' } });
    try {
      const c = conv('life');
      const r1 = await py(d.client, c, 'x = 1');
      expectStatus(r1, 'completed');
      const expires = Date.parse(r1.sc.session.expires_at);
      assert.ok(expires - Date.now() <= 61_000 && expires - Date.now() > 20_000, `expires_at ${r1.sc.session.expires_at}`);
      // Used every 10 s, so idle expiry never comes first.
      while (Date.now() + 10_000 < expires - 10_000) {
        await sleep(10_000);
        const k = await py(d.client, c, 'x');
        expectSession(k, 'continued');
      }
      await waitWarm(d, (w) => w.expired >= 1, 60_000 * SLOW, 'the session to expire');
      await until(async () => (await boxesOf(d)).length === 0, 15_000);
      assert.deepEqual((await boxesOf(d)).map((b) => b.Id.slice(0, 12)), [], 'its box is gone');
      const r2 = await py(d.client, c, "print('x' in globals())");
      expectSession(r2, 'restarted', 'max_lifetime');
      assert.equal(r2.sc.stdout, 'False\n');
      assert.match(r2.text, /^NOTE: .*\(it reached its maximum lifetime\)/);
    } finally {
      await stopWarm(d);
    }
  });

  test('idle expiry ends an unused session (SANDBOX_WARM_IDLE_SECONDS=3), and the next run says so', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-idle', env: { SANDBOX_WARM_IDLE_SECONDS: '3' } });
    try {
      const c = conv('idle');
      const r1 = await py(d.client, c, 'x = 1');
      expectStatus(r1, 'completed');
      assert.ok(Date.parse(r1.sc.session.idle_expires_at) - Date.now() <= 4000, r1.sc.session.idle_expires_at);
      const b1 = await run(d.client, c, 'bash', 'echo hi');
      expectStatus(b1, 'completed');
      await waitWarm(d, (w) => w.expired >= 2 && w.sessions === 0, 60_000 * SLOW, 'both sessions to expire');
      await until(async () => (await boxesOf(d)).length === 0, 15_000);
      assert.deepEqual((await boxesOf(d)).map((b) => b.Id.slice(0, 12)), [], 'the boxes are gone');
      const r2 = await py(d.client, c, "print('x' in globals())");
      expectSession(r2, 'restarted', 'idle_expired');
      assert.equal(r2.sc.stdout, 'False\n');
      assert.match(r2.text, /^NOTE: .*\(it was not used for too long\)/);
      const b2 = await run(d.client, c, 'bash', 'echo hi');
      expectSession(b2, 'restarted', 'idle_expired');
      assert.doesNotMatch(b2.text, /^NOTE/, 'no note about Python state for Bash');
    } finally {
      await stopWarm(d);
    }
  });
});

describe('eviction and capacity (SANDBOX_WARM_MAX=2, SANDBOX_WARM_MEMORY_MB)', () => {
  test('a third conversation evicts the least recently used idle session, which is told', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-evict', env: { SANDBOX_WARM_MAX: '2' } });
    try {
      const [a, b, c, e, f, g] = ['a', 'b', 'c', 'e', 'f', 'g'].map((n) => conv(`evict-${n}`));
      for (const k of [a, b]) expectSession(await py(d.client, k, 'x = 1'), 'new');
      await py(d.client, b, 'x'); // b is now more recently used than a
      const rc = await py(d.client, c, 'x = 3');
      expectSession(rc, 'new');
      let w = (await d.health()).warm;
      assert.equal(w.evicted, 1, JSON.stringify(w));
      assert.equal(w.sessions, 2);
      const kb = await py(d.client, b, 'x');
      expectSession(kb, 'continued');
      const ra = await py(d.client, a, "print('x' in globals())");
      expectSession(ra, 'restarted', 'evicted');
      assert.equal(ra.sc.stdout, 'False\n');
      assert.match(ra.text, /^NOTE: .*\(the server needed room for other conversations\)/);

      // Both boxes busy: a third conversation runs one-off, and says why.
      const re = startedRun(d.client, e, 'import time\nx = 5\ntime.sleep(10)');
      await re.started;
      const rf = startedRun(d.client, f, 'import time\nx = 6\ntime.sleep(10)');
      await rf.started;
      w = (await d.health()).warm;
      assert.equal(w.busy, 2, JSON.stringify(w));
      const rg = await py(d.client, g, "print('one-off')");
      expectStatus(rg, 'completed');
      expectSession(rg, 'none', 'capacity');
      assert.equal(rg.sc.stdout, 'one-off\n');
      assert.equal(rg.sc.session.stateful, false);
      assert.match(rg.text, /session: none, a one-off sandbox \(the server has no room for another warm session right now\)/);
      // Busy sessions are never evicted.
      expectStatus(await re.done, 'completed');
      expectStatus(await rf.done, 'completed');
      for (const [k, v] of [[e, '5'], [f, '6']]) {
        const r = await py(d.client, k, 'x');
        expectSession(r, 'continued');
        assert.equal(r.sc.value['text/plain'], v);
      }
      w = (await d.health()).warm;
      assert.ok(w.sessions <= 2, JSON.stringify(w));
    } finally {
      await stopWarm(d);
    }
  });

  test('memory-aware admission (SANDBOX_WARM_MEMORY_MB=400: one 256 MB box): a busy box leaves no room, said so', { timeout: T }, async () => {
    const d = await startWarm({ name: 'warm-memory', env: { SANDBOX_WARM_MEMORY_MB: '400', SANDBOX_MEMORY_MB: '256' } });
    try {
      const [a, b] = ['a', 'b'].map((n) => conv(`mem-${n}`));
      const ra = startedRun(d.client, a, 'import time\nx = 1\ntime.sleep(8)');
      await ra.started;
      const w = (await d.health()).warm;
      assert.equal(w.memory_budget_mb, 400, JSON.stringify(w));
      assert.equal(w.memory_mb, 256, JSON.stringify(w));
      const rb = await py(d.client, b, "print('one-off')");
      expectStatus(rb, 'completed');
      expectSession(rb, 'none', 'memory');
      assert.equal(rb.sc.stdout, 'one-off\n');
      assert.match(rb.text, /session: none, a one-off sandbox \(the server is short of memory for another warm session\)/);
      expectStatus(await ra.done, 'completed');
      // Idle now: the next conversation takes its room (a's session is
      // evicted and told), within the budget.
      expectSession(await py(d.client, b, 'y = 2'), 'new');
      const again = await py(d.client, a, "print('x' in globals())");
      expectSession(again, 'restarted', 'evicted');
      const w2 = (await d.health()).warm;
      assert.ok(w2.memory_mb <= 400, JSON.stringify(w2));
    } finally {
      await stopWarm(d);
    }
  });
});

describe('the daemon killed with SIGKILL and restarted on the same SANDBOX_ROOT', () => {
  test('the old boxes are removed at start-up and each conversation is told server_restarted', { timeout: T }, async () => {
    const { root, instance, env } = restartSetup('warm-kill');
    let d1, d2;
    try {
      d1 = await startWarm({ name: 'warm-kill', pool: true, root, instance, env });
      await waitPool(d1);
      const c = conv('kill');
      const r1 = await py(d1.client, c, "x = 1\nopen('/data/before.txt', 'w').write('kept')");
      expectStatus(r1, 'completed');
      assert.equal(r1.sc.session.from_pool, true);
      expectStatus(await run(d1.client, c, 'bash', 'echo hi'), 'completed');
      await waitPool(d1); // refilled: 2 sessions and 3 pool boxes
      const old = (await boxesOf(d1)).map((b) => b.Id);
      assert.equal(old.length, 5, 'sessions and pool boxes run');

      await d1.client.close().catch(() => {});
      const gone = new Promise((r) => d1.proc.once('exit', r));
      d1.proc.kill('SIGKILL');
      await gone;
      const orphans = (await containersOf(instance, { all: false })).filter((x) => old.includes(x.Id));
      assert.equal(orphans.length, old.length, 'the boxes outlive a kill -9');

      d2 = await startWarm({ name: 'warm-kill-2', pool: true, root, instance, env });
      const left = (await containersOf(instance, { all: true })).filter((x) => old.includes(x.Id));
      assert.deepEqual(left.map((x) => `${x.Id.slice(0, 12)} ${x.Labels['sandbox.kind']} ${x.State}`), [], 'no box of the old boot is left');

      const r2 = await py(d2.client, c, "print('x' in globals(), open('/data/before.txt').read())");
      expectStatus(r2, 'completed');
      expectSession(r2, 'restarted', 'server_restarted');
      assert.equal(r2.sc.stdout, 'False kept\n');
      assert.match(r2.text, /^NOTE: .*\(the server restarted\)/);
      const b2 = await run(d2.client, c, 'bash', 'echo hi');
      expectSession(b2, 'restarted', 'server_restarted');
      const r3 = await py(d2.client, c, 'x = 2');
      expectSession(r3, 'continued');

      // The pool works again: a new conversation claims a pre-started box
      // and sees its own files in it.
      await waitPool(d2);
      const n = conv('after-kill');
      const r4 = await py(d2.client, n, "open('/data/mine.txt', 'w').write('x')\nimport os\nprint(sorted(os.listdir('/data')))");
      expectStatus(r4, 'completed');
      assert.equal(r4.sc.session.from_pool, true, JSON.stringify(r4.sc.session));
      assert.equal(r4.sc.stdout, "['mine.txt']\n");
      const l = await callTool(d2.client, 'list_files', { conversationId: n });
      assert.deepEqual(l.sc.files.map((x) => x.name), ['mine.txt']);
    } finally {
      await restartCleanup(d1, d2, root, instance);
    }
  });
});

describe('the daemon stopped with SIGTERM and started again on the same SANDBOX_ROOT', () => {
  test('a live session is told server_restarted, and a loss not yet told keeps its own reason', { timeout: T }, async () => {
    const { root, instance, env } = restartSetup('warm-term');
    let d1, d2;
    try {
      d1 = await startWarm({ name: 'warm-term', root, instance, env: { ...env, SANDBOX_WARM_IDLE_SECONDS: '3' } });
      const a = conv('term-idle');
      const b = conv('term-live');
      expectStatus(await py(d1.client, a, 'x = 1'), 'completed');
      await waitWarm(d1, (w) => w.expired >= 1 && w.sessions === 0, 60_000 * SLOW, 'the first session to expire');

      // b's run is in flight when SIGTERM comes: the daemon finishes it,
      // then stops with b's session alive.
      const live = startedRun(d1.client, b, 'y = 1\nimport time\ntime.sleep(2)');
      await live.started;
      const stopped = d1.stop('SIGTERM');
      expectStatus(await live.done, 'completed');
      assert.deepEqual(await stopped, { code: 0, sig: null }, `a clean SIGTERM exit; log ${d1.logPath}`);
      assert.deepEqual((await containersOf(instance, { all: true })).map((x) => x.Id.slice(0, 12)), [], 'the stop removed its boxes');

      d2 = await startWarm({ name: 'warm-term-2', root, instance, env });
      const rb = await py(d2.client, b, "print('y' in globals())");
      expectSession(rb, 'restarted', 'server_restarted');
      assert.equal(rb.sc.stdout, 'False\n');
      assert.match(rb.text, /^NOTE: .*\(the server restarted\)/);
      const ra = await py(d2.client, a, "print('x' in globals())");
      expectSession(ra, 'restarted', 'idle_expired');
      assert.match(ra.text, /^NOTE: .*\(it was not used for too long\)/);
      expectSession(await py(d2.client, b, 'y = 2'), 'continued');
      expectSession(await py(d2.client, conv('term-new'), 'z = 1'), 'new');
    } finally {
      await restartCleanup(d1, d2, root, instance);
    }
  });
});

describe('a runner image rebuilt under a live session', () => {
  test('the next run starts on the new image and says image_updated', { timeout: T }, async () => {
    // A runner of its own (a language no other test uses), built FROM the
    // Bash runner with labels only, then rebuilt under the same tag.
    const lang = 'updtest';
    const img = testRunner(lang, 'mcp-sandboxd/runner-bash:latest');
    const ids = img.ids;
    let d;
    try {
      img.build(1);
      d = await startWarm({ name: 'warm-image' });
      const runnerOf = () => img.runnerOf(d);
      assert.equal((await runnerOf())?.image_id, ids[0], 'the test runner is discovered');
      const c = conv('image');
      const r1 = await run(d.client, c, lang, 'echo one > /tmp/mark; echo ok');
      expectStatus(r1, 'completed');
      expectSession(r1, 'new');
      const r2 = await run(d.client, c, lang, 'cat /tmp/mark');
      expectSession(r2, 'continued');
      assert.equal(r2.sc.stdout, 'one\n', 'the same box: /tmp kept');

      img.build(2);
      assert.notEqual(ids[1], ids[0], 'the rebuild made a new image');
      assert.equal((await runnerOf())?.image_id, ids[1], 'the rebuilt runner is discovered');
      const r3 = await run(d.client, c, lang, 'cat /tmp/mark 2>/dev/null || echo fresh');
      expectStatus(r3, 'completed');
      expectSession(r3, 'restarted', 'image_updated');
      assert.equal(r3.sc.stdout, 'fresh\n', 'a new box on the new image');
      await until(async () => (await boxesOf(d, { all: true })).every((b) => b.ImageID !== ids[0]), 15_000);
      assert.deepEqual((await boxesOf(d, { all: true })).filter((b) => b.ImageID === ids[0]).map((b) => b.Id.slice(0, 12)), [], 'no box of the old image is left');
      expectSession(await run(d.client, c, lang, 'true'), 'continued');
    } finally {
      if (d) await stopWarm(d);
      img.remove();
    }
  });
});
