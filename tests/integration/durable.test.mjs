// SPDX-License-Identifier: MIT
// Durable sessions (docs/sessions.md, issue 21) through the real MCP
// endpoint with the official SDK client, against the real engine and the
// real Python runner image (with dill): a conversation's Python state is
// saved after every run and comes back after idle expiry, eviction, the
// maximum lifetime, a clean stop and restart of the daemon, a kill -9 and
// restart (as of the last save), and a runner image update; names that
// cannot be saved are reported; rewind_to returns to an earlier run's
// state; session "new" and exit() drop it; the size cap and the workspace
// quota hold; a conversation's saved state is never listed, served or
// loadable by another conversation or tenant.
//
// The slow cases run side by side, each with a daemon of its own.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { connectHttp, sleep } from './lib/daemon.mjs';
import { faultsDir, umountBelow } from './lib/faults.mjs';
import { callTool, describeRun, instanceName, removeContainersOf } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startWarm, stopWarm, testRunner, until, waitWarm } from './lib/warm.mjs';

const T = 300_000 * SLOW;
const STATE = { SANDBOX_STATE: 'true' };

/** A daemon with durable sessions on. */
const startDurable = (opts = {}) => startWarm({ ...opts, env: { ...STATE, ...opts.env } });

/** The setup of a data-analysis conversation: imports, a frame, a function,
 * a class and its instance, and three things that cannot be saved. */
const SETUP = String.raw`import math
import pandas as pd
import numpy as np
import threading
df = pd.DataFrame(np.arange(40.0).reshape(10, 4), columns=list('abcd'))
def twice(v):
    return 2 * v
class Point:
    def __init__(self, x): self.x = x
    def norm(self): return twice(self.x)
p = Point(21)
x = 41
gen = (i for i in range(3))
t = threading.Thread(target=lambda: None); t.start(); t.join()
print('set')`;

const CHECK = "print(x + 1, twice(21), p.norm(), isinstance(p, Point), int(df['d'].sum()), round(math.pi, 2), pd.__name__, 'gen' in globals(), 't' in globals())";
const CHECKED = '42 42 42 True 210 3.14 pandas False False\n';

/** Asserts that r restored the state saved after run `run`, for why. */
function expectRestored(r, why, run) {
  expectStatus(r, 'completed');
  expectSession(r, 'restored', why);
  const rs = r.sc.session.restored;
  assert.ok(rs, `a restore report: ${JSON.stringify(r.sc.session)}`);
  assert.equal(rs.kind, 'restore');
  if (run !== undefined) assert.equal(rs.run, run, JSON.stringify(rs));
  assert.ok(Date.parse(rs.saved_at) <= Date.now() + 1000, rs.saved_at);
  assert.ok(rs.ms >= 0 && rs.ms < 30_000 * SLOW, `restore ms ${rs.ms}`);
  // First, or right after the line that gives a new conversation its id.
  assert.match(r.text, /^(conversationId: .*\n)?NOTE: the Python state of this conversation was restored/, r.text.slice(0, 400));
  return rs;
}

/** Checks what the setup's restore says was left out and re-imported. */
function expectSetupReport(rs, r) {
  const missing = Object.fromEntries(rs.not_restored.map((n) => [n.name, n.why]));
  assert.match(missing.gen ?? '', /generator/, JSON.stringify(rs.not_restored));
  assert.match(missing.t ?? '', /thread/, JSON.stringify(rs.not_restored));
  for (const m of ['math', 'pandas as pd', 'numpy as np', 'threading']) assert.ok(rs.imports.includes(m), `${m} re-run: ${JSON.stringify(rs.imports)}`);
  assert.match(r.text, /Not restored: .*gen \(not saved: a generator\)/);
  assert.match(r.text, /Imports re-run: .*pandas as pd/);
}

/** For a restart test: a root, an instance and secrets both daemons share. */
function restartSetup(name) {
  return {
    root: faultsDir('mcpsd-root-'),
    instance: instanceName(name),
    env: { ...STATE, FILE_SECRET: randomBytes(32).toString('hex'), MCP_API_TOKEN: randomBytes(24).toString('hex') },
  };
}

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

describe('the state comes back after the session ended, side by side', { concurrency: true }, () => {
  test('idle expiry (SANDBOX_WARM_IDLE_SECONDS=3): restored with what was left out and the imports re-run', { timeout: T }, async () => {
    const d = await startDurable({ name: 'durable-idle', env: { SANDBOX_WARM_IDLE_SECONDS: '3' } });
    try {
      const c = conv('d-idle');
      const r1 = await py(d.client, c, SETUP);
      expectStatus(r1, 'completed');
      expectSession(r1, 'new');
      assert.equal(r1.sc.session.run_number, 1, JSON.stringify(r1.sc.session));
      await sleep(500); // a model's next step: the state is saved meanwhile
      // The next result reports the save of the run before it.
      const r2 = await py(d.client, c, CHECK);
      assert.equal(r2.sc.stdout, CHECKED.replace('False False', 'True True'), 'the live session has them all');
      const sv = r2.sc.session.autosave;
      assert.ok(sv?.ok, `the first run's state was saved: ${JSON.stringify(sv)}`);
      assert.equal(sv.run, 1);
      assert.deepEqual(sv.not_saved.map((n) => n.name).sort(), ['gen', 't'], JSON.stringify(sv));
      assert.match(r2.text, /state: saved after run 1 without gen \(a generator\), t \(a thread\)/);
      const r2b = await py(d.client, c, "open('/data/out.txt', 'w').write('o')");
      assert.deepEqual((r2b.sc.files ?? []).map((f) => f.name), ['out.txt'], 'a save is never one of the files a run made');
      await waitWarm(d, (w) => w.expired >= 1 && w.sessions === 0, 60_000 * SLOW, 'the session to expire');
      await until(async () => (await boxesOf(d)).length === 0, 15_000);

      const r3 = await py(d.client, c, CHECK);
      const rs = expectRestored(r3, 'idle_expired', 2);
      assert.equal(r3.sc.stdout, CHECKED, describeRun(r3));
      expectSetupReport(rs, r3);
      assert.match(r3.text, /restored \(it was not used for too long\)/);
      expectSession(await py(d.client, c, 'x'), 'continued');
    } finally {
      await stopWarm(d);
    }
  });

  test('the maximum lifetime (SANDBOX_WARM_MAX_SECONDS=10)', { timeout: T }, async () => {
    const d = await startDurable({ name: 'durable-life', env: { SANDBOX_WARM_MAX_SECONDS: '10' } });
    try {
      const c = conv('d-life');
      expectStatus(await py(d.client, c, 'x = 41\ndef twice(v): return 2 * v'), 'completed');
      await waitWarm(d, (w) => w.expired >= 1 && w.sessions === 0, 60_000 * SLOW, 'the session to reach its lifetime');
      const r = await py(d.client, c, 'print(twice(x) - x + 1)');
      expectRestored(r, 'max_lifetime', 1);
      assert.equal(r.sc.stdout, '42\n');
    } finally {
      await stopWarm(d);
    }
  });

  test('eviction (SANDBOX_WARM_MAX=1): the evicted conversation gets its state back', { timeout: T }, async () => {
    const d = await startDurable({ name: 'durable-evict', env: { SANDBOX_WARM_MAX: '1' } });
    try {
      const a = conv('d-evict-a');
      const b = conv('d-evict-b');
      expectStatus(await py(d.client, a, "secret_a = 'A'"), 'completed');
      await sleep(1000); // its save is done long before a person's next step
      expectStatus(await py(d.client, b, "secret_b = 'B'"), 'completed');
      const w = await waitWarm(d, (x) => x.evicted >= 1, 30_000, 'an eviction');
      assert.equal(w.evicted, 1);
      const ra = await py(d.client, a, "print(secret_a, 'secret_b' in globals())");
      expectRestored(ra, 'evicted', 1);
      assert.equal(ra.sc.stdout, 'A False\n');
    } finally {
      await stopWarm(d);
    }
  });

  test('a runner image update: the new box on the new image loads the state', { timeout: T }, async () => {
    // A Python runner of its own language (built FROM the Python runner
    // with labels only), rebuilt under the same tag during the test.
    const lang = 'pydurable';
    const img = testRunner(lang, 'mcp-sandboxd/runner-python:latest');
    const ids = img.ids;
    let d;
    try {
      img.build(1);
      d = await startDurable({ name: 'durable-image' });
      const runnerOf = () => img.runnerOf(d);
      assert.equal((await runnerOf())?.image_id, ids[0], 'the test runner is discovered');
      const c = conv('d-image');
      const r1 = await run(d.client, c, lang, 'import json\nx = 41');
      expectStatus(r1, 'completed');
      assert.equal(r1.sc.session.stateful, true, 'a runner whose command is python3 keeps state');
      img.build(2);
      assert.notEqual(ids[1], ids[0]);
      assert.equal((await runnerOf())?.image_id, ids[1], 'the rebuilt runner is discovered');
      const r2 = await run(d.client, c, lang, 'print(x + 1, json.dumps([1]))');
      expectRestored(r2, 'image_updated', 1);
      assert.equal(r2.sc.stdout, '42 [1]\n');
    } finally {
      if (d) await stopWarm(d);
      img.remove();
    }
  });
});

describe('an older runner image without dill', () => {
  test('every run works and says the state cannot be saved, and why', { timeout: T }, async () => {
    const lang = 'pynodill';
    const tag = `mcpsd-test/runner-${lang}:${process.pid}`;
    let d;
    try {
      execFileSync('docker', ['build', '-q', '-t', tag, '-'], {
        input: `FROM mcp-sandboxd/runner-python:latest\nUSER root\nRUN rm -rf /usr/lib/python3/dist-packages/dill\nLABEL sandbox.language="${lang}" sandbox.aliases="" sandbox.priority="1"\n`,
        encoding: 'utf8',
      });
      d = await startDurable({ name: 'durable-nodill' });
      await sleep(2100); // past the rediscovery rate limit
      const c = conv('d-nodill');
      const r1 = await run(d.client, c, lang, 'x = 41');
      expectStatus(r1, 'completed');
      await sleep(500);
      const r2 = await run(d.client, c, lang, 'x + 1');
      expectStatus(r2, 'completed');
      assert.equal(r2.sc.value['text/plain'], '42', 'the session itself works');
      assert.equal(r2.sc.session.autosave.ok, false, JSON.stringify(r2.sc.session));
      assert.match(r2.sc.session.autosave.error, /this runner image has no dill \(python3-dill\): the Python state cannot be saved/);
      assert.match(r2.text, /state: NOT saved after run 1: this runner image has no dill/);
    } finally {
      if (d) await stopWarm(d);
      spawnSync('docker', ['image', 'rm', '-f', tag], { stdio: 'ignore' });
    }
  });
});

describe('the daemon stopped and started again on the same SANDBOX_ROOT', () => {
  test('SIGTERM and restart: server_restarted, restored', { timeout: T }, async () => {
    const { root, instance, env } = restartSetup('durable-term');
    let d1, d2;
    try {
      d1 = await startDurable({ name: 'durable-term', root, instance, env });
      const c = conv('d-term');
      expectStatus(await py(d1.client, c, SETUP), 'completed');
      await sleep(1500);
      assert.deepEqual(await d1.stop('SIGTERM'), { code: 0, sig: null }, `a clean SIGTERM exit; log ${d1.logPath}`);
      d2 = await startDurable({ name: 'durable-term-2', root, instance, env });
      const r = await py(d2.client, c, CHECK);
      const rs = expectRestored(r, 'server_restarted', 1);
      assert.equal(r.sc.stdout, CHECKED, describeRun(r));
      expectSetupReport(rs, r);
    } finally {
      await restartCleanup(d1, d2, root, instance);
    }
  });

  test('kill -9 and restart: the state as of the last save', { timeout: T }, async () => {
    const { root, instance, env } = restartSetup('durable-kill');
    let d1, d2;
    try {
      d1 = await startDurable({ name: 'durable-kill', root, instance, env });
      const c = conv('d-kill');
      expectStatus(await py(d1.client, c, 'x = 1'), 'completed');
      await sleep(500);
      const r2 = await py(d1.client, c, 'x = 2');
      expectStatus(r2, 'completed');
      assert.equal(r2.sc.session.run_number, 2);
      // Run 2's save is written after its result; wait for it on disk.
      const saved = await until(async () => {
        const l = spawnSync('sh', ['-c', `ls ${root}/workspaces/*/.mcp/state/python/ 2>/dev/null`], { encoding: 'utf8' }).stdout;
        return /run-2\.state/.test(l);
      }, 15_000);
      assert.ok(saved, 'run 2 was saved');
      await d1.client.close().catch(() => {});
      const gone = new Promise((r) => d1.proc.once('exit', r));
      d1.proc.kill('SIGKILL');
      await gone;
      d2 = await startDurable({ name: 'durable-kill-2', root, instance, env });
      const r = await py(d2.client, c, 'print(x)');
      expectRestored(r, 'server_restarted', 2);
      assert.equal(r.sc.stdout, '2\n');
    } finally {
      await restartCleanup(d1, d2, root, instance);
    }
  });
});

describe('rewind, session "new", exit(), limits and isolation', () => {
  test('rewind_to returns to the state after an earlier run; a run not kept is refused with the runs there are', { timeout: T }, async () => {
    const d = await startDurable({ name: 'durable-rewind', env: { SANDBOX_STATE_KEEP: '4' } });
    try {
      const c = conv('d-rewind');
      // A model's steps are seconds apart; calls within 0.1 s of each
      // other share a save (the newest state wins), so the steps pause.
      for (const code of ['rows = [1, 2, 3]', 'rows.append(4)', 'rows.clear()  # a destructive step', 'note = "after"']) {
        expectStatus(await py(d.client, c, code), 'completed');
        await sleep(400);
      }
      const last = await py(d.client, c, 'rows');
      assert.deepEqual(last.sc.session.saved_runs, [1, 2, 3, 4], JSON.stringify(last.sc.session));
      const r = await py(d.client, c, "print(rows, 'note' in globals())", { rewind_to: 2 });
      expectStatus(r, 'completed');
      expectSession(r, 'rewound');
      assert.equal(r.sc.stdout, '[1, 2, 3, 4] False\n');
      await sleep(400);
      assert.equal(r.sc.session.restored.kind, 'rewind');
      assert.equal(r.sc.session.restored.run, 2);
      assert.match(r.text, /^NOTE: the Python state was rewound to what it was right after run 2/);
      expectSession(await py(d.client, c, 'rows'), 'continued');
      await sleep(400);

      const bad = await py(d.client, c, "print('ran')", { rewind_to: 1 });
      expectStatus(bad, 'failed');
      assert.equal(bad.sc.stdout, '', 'the code does not run');
      assert.match(bad.sc.stderr, /StateError: there is no saved state of run 1; the saved runs are/);
      const wrong = await py(d.client, c, 'pass', { rewind_to: 'two' }).catch((e) => e);
      assert.match(String(wrong.message ?? wrong.text), /rewind_to must be the number of an earlier run/);
    } finally {
      await stopWarm(d);
    }
  });

  test('a call that comes while a save is being written runs at once; the state after it is saved instead', { timeout: T }, async (t) => {
    const d = await startDurable({ name: 'durable-yield' });
    try {
      const c = conv('d-yield');
      // Two million ints: dill's pickler takes seconds over them at half a
      // CPU, a window to call into while the save is under way.
      const r1 = await py(d.client, c, 'big = list(range(1000, 2001000))\nx = 1');
      expectStatus(r1, 'completed');
      const run = r1.sc.session.run_number;
      const stateDir = `${d.root}/workspaces/*/.mcp/state/python/`;
      const ls = () => spawnSync('sh', ['-c', `ls -a ${stateDir} 2>/dev/null`], { encoding: 'utf8' }).stdout;
      const writing = new RegExp(`^\\.run-${run}\\.tmp-`, 'm');
      const done = new RegExp(`^run-${run}\\.state$`, 'm');
      const seen = await until(async () => writing.test(ls()), 30_000 * SLOW, 20);
      assert.ok(seen, `the save of run ${run} was being written: ${ls()}`);
      assert.doesNotMatch(ls(), done, 'the save had not ended yet');
      const t0 = Date.now();
      const r2 = await py(d.client, c, 'x = 2\nprint(x, len(big))');
      const ms = Date.now() - t0;
      t.diagnostic(`the call while the save was written: ${ms} ms`);
      expectStatus(r2, 'completed');
      assert.equal(r2.sc.stdout, '2 2000000\n');
      // The save gave up for the call: no report of it, and the state after
      // this call takes its number (as for a call within 0.1 s).
      assert.equal(r2.sc.session.autosave, undefined, `no save ended before the call (${ms} ms): ${JSON.stringify(r2.sc.session)}`);
      assert.equal(r2.sc.session.run_number, run, JSON.stringify(r2.sc.session));
      assert.doesNotMatch(r2.text, /^state:/m);
      // Left alone, the state after the second call is saved under that number.
      assert.ok(await until(async () => done.test(ls()), 60_000 * SLOW), `run ${run} saved at last: ${ls()}`);
      assert.doesNotMatch(ls(), /\.tmp-/, 'no half-written save left');
      const r3 = await py(d.client, c, 'print(x)');
      assert.equal(r3.sc.session.autosave?.ok, true, JSON.stringify(r3.sc.session));
      assert.equal(r3.sc.session.autosave.run, run);
      await sleep(400);
      const back = await py(d.client, c, 'print(x, len(big))', { rewind_to: run });
      expectSession(back, 'rewound');
      assert.equal(back.sc.stdout, '2 2000000\n', 'the saved state is the one after the second call');
    } finally {
      await stopWarm(d);
    }
  });

  test('session "new" and exit() drop the saved state; the size cap says what was not saved', { timeout: T }, async () => {
    const d = await startDurable({ name: 'durable-drop', env: { SANDBOX_WARM_IDLE_SECONDS: '3', SANDBOX_STATE_MAX_MB: '1' } });
    try {
      const expire = async () => {
        const n = (await d.health()).warm.expired;
        await waitWarm(d, (w) => w.expired > n && w.sessions === 0, 60_000 * SLOW, 'the session to expire');
      };
      const c = conv('d-new');
      expectStatus(await py(d.client, c, 'old = 1'), 'completed');
      const fresh = await py(d.client, c, "print('old' in globals())\nnew = 1", { session: 'new' });
      expectSession(fresh, 'restarted', 'requested');
      assert.equal(fresh.sc.stdout, 'False\n');
      await expire();
      const r = await py(d.client, c, "print('old' in globals(), 'new' in globals())");
      expectRestored(r, 'idle_expired', 1);
      assert.equal(r.sc.stdout, 'False True\n', 'only what came after session "new"');

      // Over the cap: not saved, said so; the earlier save stays.
      expectStatus(await py(d.client, c, 'big = bytes(3 << 20)'), 'completed');
      await sleep(1000);
      const told = await py(d.client, c, 'del big\nsmall = 2');
      assert.equal(told.sc.session.autosave.ok, false, JSON.stringify(told.sc.session.autosave));
      assert.match(told.sc.session.autosave.error, /larger than its cap of 1 MB \(SANDBOX_STATE_MAX_MB, at most half the workspace quota\)/);
      assert.match(told.text, /state: NOT saved after run \d+: the state is larger than its cap/);
      await expire();
      const back = await py(d.client, c, "print('big' in globals(), small)");
      expectSession(back, 'restored', 'idle_expired');
      assert.equal(back.sc.stdout, 'False 2\n');

      // exit() is the way to start over: nothing comes back.
      const ex = await py(d.client, c, 'exit()');
      assert.equal(ex.sc.session.lost_reason, 'exit');
      await expire();
      const after = await py(d.client, c, "print('small' in globals())");
      assert.notEqual(after.sc.session.state, 'restored', JSON.stringify(after.sc.session));
      assert.equal(after.sc.stdout, 'False\n');
    } finally {
      await stopWarm(d);
    }
  });

  test('the saved state counts against the workspace quota and a full workspace is reported, not failed', { timeout: T }, async () => {
    // 16 MB: a save may take 8 (half); 10 MB of files and a 6 MB state
    // do not fit together.
    const d = await startDurable({ name: 'durable-quota', env: { WORKSPACE_QUOTA_MB: '16', SANDBOX_STATE_MAX_MB: '64' } });
    try {
      const c = conv('d-quota');
      expectStatus(await py(d.client, c, "import os\nopen('/data/big.bin', 'wb').write(os.urandom(10 << 20))\nblob = os.urandom(6 << 20)"), 'completed');
      await sleep(3000); // the save after the run
      const r = await py(d.client, c, 'print(len(blob))');
      // In loop mode the save finds the workspace full; in none mode the
      // save lands and the workspace is then over its quota: either way
      // the state counts against the quota and the call is not failed by
      // the save.
      const sv = r.sc.session?.autosave;
      if (r.sc.status === 'completed') {
        assert.equal(sv.ok, false, JSON.stringify(sv));
        assert.match(sv.error, /could not be written .*workspace is full/);
      } else {
        assert.match(r.text, /quota/i, describeRun(r));
      }
    } finally {
      await stopWarm(d);
    }
  });

  test('fork_from: a new conversation starts from a copy of the files and state of another of the same tenant only', { timeout: T }, async () => {
    const d = await startDurable({
      name: 'durable-fork',
      env: { MCP_API_TOKENS: `alice:${'a'.repeat(40)},bob:${'b'.repeat(40)}` },
      connect: false,
    });
    try {
      const alice = await connectHttp(d, { token: 'a'.repeat(40) });
      const bob = await connectHttp(d, { token: 'b'.repeat(40) });
      const src = conv('d-fork-src');
      expectStatus(await py(alice, src, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nopen('/data/notes.txt', 'w').write('n')"), 'completed');
      await sleep(1000);
      // No conversationId: a new one is made, and it says so.
      const f = await py(alice, undefined, "df['b'] = df['a'] * 10\nprint(int(df['b'].sum()), open('/data/notes.txt').read())", { fork_from: src });
      expectRestored(f, 'forked', 1);
      assert.equal(f.sc.stdout, '60 n\n');
      assert.match(f.text, /restored \(this conversation was forked from another one\)/);
      const fork = f.sc.conversationId;
      assert.ok(fork && fork !== src, `a new conversation: ${fork}`);
      // The two go their own ways.
      const s2 = await py(alice, src, "print(list(df.columns))");
      assert.equal(s2.sc.stdout, "['a']\n");
      // Only an empty conversation can be a fork; only one's own source.
      const again = await py(alice, fork, 'pass', { fork_from: src });
      assert.match(again.text, /fork_from starts a new conversation, and this one has files already/);
      const other = await py(bob, undefined, 'pass', { fork_from: src });
      assert.match(other.text, /fork_from: there is no conversation '.*' of yours to copy/);
      const self = await py(alice, 'd-fork-self', 'pass', { fork_from: 'd-fork-self' });
      assert.match(self.text, /fork_from names this conversation itself/);
      await alice.close();
      await bob.close();
    } finally {
      await stopWarm(d);
    }
  });

  test("a conversation's saved state is never listed, served, or loaded by another conversation or tenant", { timeout: T }, async () => {
    const d = await startDurable({
      name: 'durable-iso',
      env: { MCP_API_TOKENS: `alice:${'a'.repeat(40)},bob:${'b'.repeat(40)}`, SANDBOX_WARM_IDLE_SECONDS: '3' },
      connect: false,
    });
    try {
      const alice = await connectHttp(d, { token: 'a'.repeat(40) });
      const bob = await connectHttp(d, { token: 'b'.repeat(40) });
      const same = conv('d-same');
      const a = await py(alice, same, "secret = 'alice'\nopen('/data/f.txt', 'w').write('x')");
      expectStatus(a, 'completed');
      await sleep(1000);
      // Not listed, not served, not readable as a resource.
      const l = await callTool(alice, 'list_files', { conversationId: same });
      const names = l.sc.files.map((f) => f.name);
      assert.ok(names.includes('f.txt') && !names.some((n) => n.startsWith('.mcp/state')), JSON.stringify(names));
      const lp = await callTool(alice, 'list_files', { conversationId: same, path: '.mcp/state' });
      assert.match(lp.text, /saved Python state, which is not listed/);
      const url = a.sc.files.find((f) => f.name === 'f.txt').url;
      const stateUrl = url.replace(/f\.txt$/, '.mcp/state/python/run-1.state');
      assert.equal((await fetch(stateUrl)).status, 404);
      assert.equal((await fetch(url)).status, 200);
      // Bob, same conversation id: his own workspace, nothing to load.
      const b = await py(bob, same, "import os\nprint('secret' in globals(), os.path.exists('/data/.mcp/state'))", { rewind_to: 1 });
      expectStatus(b, 'failed');
      assert.match(b.sc.stderr, /no saved state of run 1; the saved runs are none/);
      const b2 = await py(bob, same, "import os\nprint('secret' in globals(), 'f.txt' in os.listdir('/data'))");
      assert.equal(b2.sc.stdout, 'False False\n', 'nothing of hers: no variable, no file');
      // Another conversation of the same tenant: the same.
      const o = await py(alice, conv('d-other'), "print('secret' in globals())", { rewind_to: 1 });
      expectStatus(o, 'failed');
      assert.match(o.sc.stderr, /the saved runs are none/);
      await waitWarm(d, (w) => w.expired >= 3 && w.sessions === 0, 60_000 * SLOW, 'the sessions to expire');
      const b3 = await py(bob, same, "print('secret' in globals())");
      assert.equal(b3.sc.stdout, 'False\n');
      const a3 = await py(alice, same, 'print(secret)');
      expectRestored(a3, 'idle_expired');
      assert.equal(a3.sc.stdout, 'alice\n');
      await alice.close();
      await bob.close();
    } finally {
      await stopWarm(d);
    }
  });
});
