// SPDX-License-Identifier: MIT
// Warm sessions when the Docker engine goes away or hangs while sessions
// exist (a proxy socket the test controls stands in for the engine, as in
// faults.test.mjs). Over the channel socket (the default), live sessions
// do not notice: their calls run on, with their state, while the engine is
// away or hung, and only what needs the engine (a new box) fails, clearly
// and at once. Over the attach stream (SANDBOX_WARM_CHANNEL=attach), the
// sessions' streams go with the engine: clear errors within bounded time
// instead of hangs, recovery by itself once the engine is back, the lost
// state reported. Either way nothing is left on the engine after a clean
// stop. Containers are only ever
// looked at (and, after a test that failed, removed) by the unique
// instance label of the daemon that made them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { sleep } from './lib/daemon.mjs';
import { DockerProxy, faultsDir } from './lib/faults.mjs';
import { containersOf, describeRun, dockerApi, removeContainersOf } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startWarm, stopWarm, until, waitPool } from './lib/warm.mjs';

const DOCKER_TIMEOUT_S = 8;
const GRACE_MS = 1000;
const T = 240_000 * SLOW;

async function quickHealth(d) {
  const t0 = Date.now();
  const h = await d.health();
  return { h, ms: Date.now() - t0 };
}

describe('the engine stopped and hung while warm sessions exist (channel socket)', () => {
  let dir, px, d;
  const c = conv('sock');

  before(async () => {
    dir = faultsDir();
    px = new DockerProxy(path.join(dir, 'docker.sock'));
    await px.start();
    d = await startWarm({
      name: 'warm-faults-socket',
      pool: true,
      env: {
        DOCKER_HOST: px.url,
        DOCKER_TIMEOUT_SECONDS: String(DOCKER_TIMEOUT_S),
        SANDBOX_DISCOVERY_INTERVAL_SECONDS: '2',
        SANDBOX_REAP_INTERVAL_SECONDS: '2',
        SANDBOX_INTERRUPT_GRACE_MS: String(GRACE_MS),
        SANDBOX_WARM_CHANNEL: 'socket',
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
    await waitPool(d);
  });

  after(async () => {
    await px?.start().catch(() => {});
    px?.resume();
    try {
      await stopWarm(d);
    } finally {
      if (d) await removeContainersOf(d.instance).catch(() => {});
      await px?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  });

  test('engine stopped: live sessions run on with their state; a pool box is still claimed; a new box fails at once', { timeout: T }, async () => {
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    expectStatus(await run(d.client, c, 'bash', 'echo up >/tmp/f'), 'completed');
    await waitPool(d);
    await px.stop();
    const r = await py(d.client, c, 'x += 1\nprint(x)');
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, '2\n');
    const b = await run(d.client, c, 'bash', 'cat /tmp/f');
    expectStatus(b, 'completed');
    assert.equal(b.sc.stdout, 'up\n');
    // The pool's bash box is claimed without the engine (a mount on the host).
    const n1 = await run(d.client, conv('sock-new'), 'bash', 'echo claimed');
    expectStatus(n1, 'completed');
    assert.equal(n1.sc.session.from_pool, true, JSON.stringify(n1.sc.session));
    // The next new conversation needs a new box: a clear error, at once.
    const n2 = await run(d.client, conv('sock-new'), 'bash', 'echo up');
    expectStatus(n2, 'error');
    expectSession(n2, 'none');
    assert.match(n2.sc.message, /Docker engine not reachable/, describeRun(n2));
    assert.ok(n2.ms < 5000 * SLOW, `a new box refused in ${n2.ms} ms`);
    const { h, ms } = await quickHealth(d);
    assert.ok(ms < 1000, `/healthz in ${ms} ms`);
    assert.equal(h.docker.reachable, false);
  });

  test('engine hung during a run of a session: the run is not held up', { timeout: T }, async () => {
    const p = py(d.client, c, "import time\nprint('started', flush=True)\ntime.sleep(2)\nprint(x)", { timeout_seconds: 20 });
    await sleep(500);
    px.hang();
    let r;
    try {
      r = await p;
    } finally {
      px.resume();
    }
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, 'started\n2\n');
    assert.ok(r.ms < 6000 * SLOW, `answered after ${r.ms} ms`);
  });

  test('engine back: the sessions carry on as they were', { timeout: T }, async () => {
    await px.start();
    const h = await until(async () => (await d.health()).docker.reachable && (await d.health()), 10_000);
    assert.ok(h, 'health reports the engine reachable again without a call');
    const r = await py(d.client, c, 'print(x)');
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, '2\n');
    const n = await run(d.client, conv('sock-back'), 'bash', 'echo new');
    expectStatus(n, 'completed');
  });
});

describe('the engine stopped and hung while warm sessions exist (attach stream)', () => {
  let dir, px, d;
  const c = conv('engine');
  const other = conv('engine-other');

  before(async () => {
    dir = faultsDir();
    px = new DockerProxy(path.join(dir, 'docker.sock'));
    await px.start();
    d = await startWarm({
      name: 'warm-faults',
      pool: true,
      env: {
        DOCKER_HOST: px.url,
        SANDBOX_WARM_CHANNEL: 'attach',
        DOCKER_TIMEOUT_SECONDS: String(DOCKER_TIMEOUT_S),
        SANDBOX_DISCOVERY_INTERVAL_SECONDS: '2',
        SANDBOX_REAP_INTERVAL_SECONDS: '2',
        SANDBOX_INTERRUPT_GRACE_MS: String(GRACE_MS),
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
    await waitPool(d);
  });

  after(async () => {
    await px?.start().catch(() => {});
    px?.resume();
    try {
      await stopWarm(d);
    } finally {
      if (d) await removeContainersOf(d.instance).catch(() => {});
      await px?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  });

  test('sessions first: Python and Bash run warm through the proxy', { timeout: T }, async () => {
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    expectStatus(await py(d.client, other, 'y = 2'), 'completed');
    const b = await run(d.client, c, 'bash', 'echo up');
    expectStatus(b, 'completed');
    expectSession(b, 'new');
  });

  test('engine stopped: a run of a live session answers at once with a clear error; /healthz says so', { timeout: T }, async () => {
    await px.stop();
    const r = await py(d.client, c, 'x');
    expectStatus(r, 'error');
    assert.match(r.sc.message, /Docker engine not reachable/, describeRun(r));
    assert.match(r.sc.message, /problem on the server/);
    assert.ok(r.ms < 5000 * SLOW, `answered in ${r.ms} ms`);
    const b = await run(d.client, conv('engine-new'), 'bash', 'echo up');
    expectStatus(b, 'error');
    expectSession(b, 'none');
    assert.ok(b.ms < 5000 * SLOW, `a new conversation answered in ${b.ms} ms`);
    const { h, ms } = await quickHealth(d);
    assert.ok(ms < 1000, `/healthz in ${ms} ms`);
    assert.equal(h.docker.reachable, false);
    assert.equal(h.warm.busy, 0, JSON.stringify(h.warm));
  });

  test('engine back: runs recover by themselves and the lost state is reported', { timeout: T }, async () => {
    await px.start();
    const h = await until(async () => (await d.health()).docker.reachable && (await d.health()), 10_000);
    assert.ok(h, 'health reports the engine reachable again without a call');
    const r = await py(d.client, c, "print('x' in globals())");
    expectStatus(r, 'completed');
    expectSession(r, 'restarted');
    assert.equal(r.sc.stdout, 'False\n');
    assert.match(r.text, /^NOTE: the Python state of this conversation was lost before this run/);
    // The session untouched by the outage's runs lost its box too: its
    // stream went with the engine's connection.
    const o = await py(d.client, other, "print('y' in globals())");
    expectStatus(o, 'completed');
    assert.ok(['restarted', 'continued'].includes(o.sc.session.state), JSON.stringify(o.sc.session));
    const b = await run(d.client, c, 'bash', 'echo back');
    expectStatus(b, 'completed');
    assert.equal(b.sc.stdout, 'back\n');
    // The boxes cut off by the outage do not stay behind: only the live
    // sessions' and the pool's remain.
    const left = await until(async () => {
      const boxes = await boxesOf(d);
      const w = (await d.health()).warm;
      return boxes.length <= w.sessions + w.pool && boxes;
    }, 30_000 * SLOW);
    assert.ok(left, `no orphaned box: ${JSON.stringify(await boxesOf(d))} ${JSON.stringify((await d.health()).warm)}`);
  });

  test('engine stopped during a run of a session: the run ends at once with an error that names the engine', { timeout: T }, async () => {
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    let started;
    const startedP = new Promise((r) => (started = r));
    const p = py(d.client, c, "import time\nprint('started', flush=True)\ntime.sleep(30)", { timeout_seconds: 20 }, {
      request: { onprogress: (m) => String(m.message ?? '').includes('started') && started() },
    });
    await Promise.race([startedP, p]);
    const t0 = Date.now();
    await px.stop();
    let r;
    try {
      r = await p;
    } finally {
      await px.start();
    }
    const ms = Date.now() - t0;
    expectStatus(r, 'error');
    assert.match(r.sc.message, /Docker engine not reachable/, describeRun(r));
    assert.equal(r.sc.stdout, 'started\n', 'the output before the outage is kept');
    assert.equal(r.sc.session.lost, true);
    assert.equal(r.sc.session.lost_reason, 'sandbox_lost');
    assert.ok(ms < 10_000 * SLOW, `answered ${ms} ms after the engine went away`);
    const again = await until(async () => {
      const x = await py(d.client, c, "print('x' in globals())");
      return x.sc.status === 'completed' && x;
    }, 30_000);
    assert.ok(again, 'runs work again');
    expectSession(again, 'restarted', 'sandbox_lost');
    assert.match(again.text, /lost its connection to the server/);
  });

  test('engine hung during a run of a session: the call ends within its limit plus the grace and Docker timeouts', { timeout: T }, async () => {
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    const p = py(d.client, c, "import time\nprint('started', flush=True)\ntime.sleep(30)", { timeout_seconds: 3 });
    await sleep(1500);
    px.hang();
    let r;
    try {
      r = await p;
      const { ms } = await quickHealth(d);
      assert.ok(ms < 1000, `/healthz in ${ms} ms during the hang`);
    } finally {
      px.resume();
    }
    assert.ok(['error', 'timed_out'].includes(r.sc.status), describeRun(r));
    const limit = 3000 + 2 * GRACE_MS + 3 * DOCKER_TIMEOUT_S * 1000 + 3000;
    assert.ok(r.ms < limit * SLOW, `answered after ${r.ms} ms (limit ${limit})`);
    // After the hang, the conversation works again (its state may be gone).
    const again = await until(async () => {
      const x = await py(d.client, c, "print('after')");
      return x.sc.status === 'completed' && x;
    }, 20_000);
    assert.ok(again, 'runs work again after the hang');
    assert.equal(again.sc.stdout, 'after\n');
  });

  test('engine hung while a session is idle: its next run ends within bounded time', { timeout: T }, async () => {
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    px.hang();
    let r;
    try {
      r = await py(d.client, c, 'x', { timeout_seconds: 2 });
    } finally {
      px.resume();
    }
    assert.ok(['error', 'timed_out'].includes(r.sc.status), describeRun(r));
    const limit = 2000 + 2 * GRACE_MS + 3 * DOCKER_TIMEOUT_S * 1000 + 3000;
    assert.ok(r.ms < limit * SLOW, `answered after ${r.ms} ms (limit ${limit})`);
    const again = await until(async () => {
      const x = await py(d.client, c, "print('after')");
      return x.sc.status === 'completed' && x;
    }, 20_000);
    assert.ok(again, 'runs work again after the hang');
  });

  test('the boxes of this daemon are all accounted for after the outages', { timeout: T }, async () => {
    const all = await containersOf(d.instance, { all: true });
    const w = (await d.health()).warm;
    const running = all.filter((x) => x.State === 'running');
    const ok = await until(async () => {
      const now = (await containersOf(d.instance, { all: false })).length;
      const ww = (await d.health()).warm;
      return now <= ww.sessions + ww.pool;
    }, 30_000 * SLOW);
    assert.ok(ok, `running ${running.length}, warm ${JSON.stringify(w)}: ${running.map((x) => `${x.Id.slice(0, 12)} ${x.Labels['sandbox.kind']}`).join(', ')}`);
    // Stopped boxes are removed too.
    const gone = await until(async () => (await containersOf(d.instance, { all: true })).every((x) => x.State === 'running'), 30_000 * SLOW);
    assert.ok(gone, `stopped containers left: ${JSON.stringify((await containersOf(d.instance, { all: true })).map((x) => [x.Id.slice(0, 12), x.State]))}`);
    void dockerApi;
  });
});
