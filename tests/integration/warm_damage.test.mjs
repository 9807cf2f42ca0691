// SPDX-License-Identifier: MIT
// A warm box whose host side is damaged is never handed to a conversation,
// and a run that finds its box broken runs the code in a fresh one
// (issue 19). The first case is the bug that broke every deployment
// overnight: the sweep of leftover code directories removed the directory
// of a pool box that had waited for a claim longer than the sweep's age
// (12 minutes by default), and every new conversation in that language got
// "cannot write the code for the sandbox on the server" until a restart.
// The age is reached here by dating the directories back (as twelve idle
// minutes would) and, separately, by a sweep age scaled down to seconds and
// real waiting; the other cases damage a box by hand (its directory, its
// mount point, its container) the way a careless operator or a cleanup
// script on the host would.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, rmdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { mountsBelow, sleep } from './lib/daemon.mjs';
import { describeRun, dockerApi } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startWarm, stopWarm, until, waitPool } from './lib/warm.mjs';

const T = 300_000 * SLOW;

/** The runs/w-* directories of d's warm boxes. */
const warmDirs = (d) => readdirSync(path.join(d.root, 'runs')).filter((n) => n.startsWith('w-'));

/** The host directory mounted at dest in container id. */
async function mountOf(id, dest) {
  const c = (await dockerApi('GET', `/containers/${id}/json`)).json ?? {};
  const m = (c.Mounts ?? []).find((x) => x.Destination === dest);
  assert.ok(m, `container ${id.slice(0, 12)} mounts ${dest}: ${JSON.stringify(c.Mounts)}`);
  return m.Source;
}

/** The name (mcpsd-w-<id>) of container summary b, a warm box. */
const boxName = (b) => b.Names[0].replace(/^\//, '');

/**
 * The boxes of language in d (containers carry their image's labels):
 * unclaimed pool boxes, and sessions. A claimed pool box keeps its label
 * 'pool'; the workspace bound on its pool/<name> tells it apart.
 */
async function boxesByRole(d, language) {
  const mounts = mountsBelow(d.root);
  const all = (await boxesOf(d)).filter((b) => b.Labels?.['sandbox.language'] === language);
  const claimed = (b) => b.Labels?.['sandbox.kind'] !== 'pool' || mounts.includes(path.join(d.root, 'pool', boxName(b)));
  return { pool: all.filter((b) => !claimed(b)), sessions: all.filter(claimed) };
}

const poolBox = async (d, language) => (await boxesByRole(d, language)).pool[0] ?? null;

/** Whether container id still runs. */
const running = async (d, id) => (await boxesOf(d)).some((b) => b.Id === id);

/** Dates every runs/w-* directory of d back by seconds. */
function ageWarmDirs(d, seconds) {
  const t = new Date(Date.now() - seconds * 1000);
  for (const n of warmDirs(d)) utimesSync(path.join(d.root, 'runs', n), t, t);
}

const logOf = (d) => readFileSync(d.logPath, 'utf8');

describe('pool boxes that wait for hours', () => {
  let d;
  before(async () => {
    d = await startWarm({
      name: 'warm-damage-age',
      pool: true,
      env: {
        SANDBOX_POOL_LANGUAGES: 'python,bash',
        SANDBOX_REAP_INTERVAL_SECONDS: '1',
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
    await waitPool(d, 2);
  });
  after(() => stopWarm(d));

  test('a pool box older than the leftover sweep still serves new conversations', { timeout: T }, async () => {
    const before = warmDirs(d);
    assert.equal(before.length, 2, `two pool boxes' code directories: ${before}`);
    // What twelve idle minutes (the default sweep age) do to their dates,
    // and a leftover of a crash beside them, held by nobody.
    mkdirSync(path.join(d.root, 'runs', 'w-crashleftover0'));
    writeFileSync(path.join(d.root, 'runs', 'w-crashleftover0', 'main.py'), 'print(1)\n');
    ageWarmDirs(d, 3600);
    // Several reap ticks (one a second) pass.
    const swept = await until(() => !existsSync(path.join(d.root, 'runs', 'w-crashleftover0')), 20_000 * SLOW);
    assert.ok(swept, 'the unheld leftover directory is removed by the sweep');
    await sleep(2500);
    for (const [language, code, want] of [
      ['bash', 'echo morning', 'morning\n'],
      ['python', 'print("morning")', 'morning\n'],
    ]) {
      const r = await run(d.client, conv('age'), language, code);
      expectStatus(r, 'completed');
      assert.equal(r.sc.stdout, want, describeRun(r));
      expectSession(r, 'new');
      assert.equal(r.sc.session.from_pool, true, `${language}: the waiting pool box served it: ${JSON.stringify(r.sc.session)}`);
    }
    const now = warmDirs(d);
    assert.deepEqual(before.filter((n) => !now.includes(n)), [], 'the waiting pool boxes kept their directories');
    assert.doesNotMatch(logOf(d), /failed on the server's side/);
  });
});

describe('the leftover sweep scaled down to seconds, and real waiting', () => {
  let d;
  before(async () => {
    d = await startWarm({
      name: 'warm-damage-wait',
      pool: true,
      env: {
        SANDBOX_POOL_LANGUAGES: 'bash',
        SANDBOX_REAP_INTERVAL_SECONDS: '1',
        SANDBOX_RUNS_SWEEP_SECONDS: '2',
        SANDBOX_WARM_IDLE_SECONDS: '3600',
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
    await waitPool(d, 1);
  });
  after(() => stopWarm(d));

  test('a pool box and an idle session outlive many sweeps', { timeout: T }, async () => {
    const c = conv('wait');
    const first = await run(d.client, c, 'bash', 'echo one');
    expectStatus(first, 'completed');
    // Four times the sweep's age, a sweep every second.
    await sleep(8_000);
    const again = await run(d.client, c, 'bash', 'echo two');
    expectStatus(again, 'completed');
    assert.equal(again.sc.stdout, 'two\n');
    expectSession(again, 'continued');
    await waitPool(d, 1);
    await sleep(8_000);
    const fresh = await run(d.client, conv('wait-new'), 'bash', 'echo three');
    expectStatus(fresh, 'completed');
    assert.equal(fresh.sc.stdout, 'three\n');
    expectSession(fresh, 'new');
  });
});

describe('boxes damaged on the host', () => {
  let d;
  before(async () => {
    d = await startWarm({
      name: 'warm-damage-host',
      pool: true,
      env: {
        SANDBOX_POOL_LANGUAGES: 'python,bash',
        // Slow housekeeping, so that most damage is met by a run first.
        SANDBOX_REAP_INTERVAL_SECONDS: '30',
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
    await waitPool(d, 2);
  });
  after(() => stopWarm(d));

  test("a pool box whose code directory was removed is not handed out", { timeout: T }, async () => {
    const b = await poolBox(d, 'bash');
    assert.ok(b, 'a bash pool box');
    const src = await mountOf(b.Id, '/sandbox');
    rmSync(src, { recursive: true, force: true });
    const r = await run(d.client, conv('rm-pool'), 'bash', 'echo fine');
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'fine\n');
    expectSession(r, 'new');
    assert.equal(await running(d, b.Id), false, 'the damaged box is gone');
    await d.waitLog(/WARN.*damaged: its code directory .* was removed/);
  });

  test('a session whose code directory was removed runs the code in a fresh box', { timeout: T }, async () => {
    const c = conv('rm-session');
    const set = await py(d.client, c, 'x = 41\nprint("set")');
    expectStatus(set, 'completed');
    const mine = (await boxesByRole(d, 'python')).sessions;
    assert.equal(mine.length, 1, 'one python session box');
    const src = await mountOf(mine[0].Id, '/sandbox');
    rmSync(src, { recursive: true, force: true });
    const r = await py(d.client, c, 'print("ran", "x" in globals())');
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'ran False\n', describeRun(r));
    expectSession(r, 'restarted', 'sandbox_damaged');
    assert.equal(r.sc.session.lost, false, JSON.stringify(r.sc.session));
    assert.match(r.text, /damaged/);
    assert.equal(await running(d, mine[0].Id), false, 'the damaged box is gone');
    const next = await py(d.client, c, 'x = 1\nprint(x + 1)');
    expectStatus(next, 'completed');
    expectSession(next, 'continued');
  });

  test('a pool box whose mount point was removed is not handed out', { timeout: T }, async () => {
    await waitPool(d, 2);
    const b = await poolBox(d, 'python');
    assert.ok(b, 'a python pool box');
    // pool/<box name> is the box's /data until it is claimed (the Docker
    // backend's hand-over).
    const mnt = path.join(d.root, 'pool', boxName(b));
    assert.ok(existsSync(mnt), `the pool box's mount point ${mnt}`);
    rmdirSync(mnt);
    const r = await py(d.client, conv('rm-mnt'), 'print(6 * 7)');
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, '42\n');
    expectSession(r, 'new');
    assert.equal(await running(d, b.Id), false, 'the damaged box is gone');
  });

  test('a pool box whose container was killed is not handed out', { timeout: T }, async () => {
    await waitPool(d, 2);
    const b = await poolBox(d, 'bash');
    assert.ok(b, 'a bash pool box');
    const k = await dockerApi('POST', `/containers/${b.Id}/kill`);
    assert.equal(k.status, 204, `killed: ${k.body}`);
    const r = await run(d.client, conv('kill-pool'), 'bash', 'echo alive');
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'alive\n');
    expectSession(r, 'new');
  });

  test('the sandbox agent removed from the host is installed again for the next box', { timeout: T }, async () => {
    rmSync(path.join(d.root, 'agent'), { recursive: true, force: true });
    // TypeScript has no pool here: its first run starts a box, which needs the agent.
    const r = await run(d.client, conv('agent'), 'typescript', 'console.log(6 * 7)');
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, '42\n');
    expectSession(r, 'new');
    await d.waitLog(/installed the sandbox agent/);
  });

  test('housekeeping replaces a damaged idle pool box by itself', { timeout: T }, async () => {
    await waitPool(d, 2);
    const b = await poolBox(d, 'bash');
    const src = await mountOf(b.Id, '/sandbox');
    rmSync(src, { recursive: true, force: true });
    // The next tick (30 s apart here) ends it and starts another.
    const gone = await until(async () => !(await boxesOf(d)).some((x) => x.Id === b.Id), 90_000 * SLOW, 500);
    assert.ok(gone, 'the damaged pool box was removed');
    await waitPool(d, 2);
  });
});
