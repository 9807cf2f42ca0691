// SPDX-License-Identifier: MIT
// Warm sessions on more than one replica (docs/deployment.md, "Warm sessions
// on every node"): two daemons with MCP_REPLICA_NAME r1 and r2, each with
// the Docker backend and warm sessions on, sharing one SANDBOX_ROOT and one
// PostgreSQL store (a scratch cluster of tests/lib/pg.sh), driven with the
// SDK client. Here both drive the same engine (the swarm layer runs the
// same design with a daemon per lab node); what keeps a conversation on one
// replica at a time is the lease in the store, not the engine. Checked: a
// conversation's Python state follows it when calls alternate between the
// replicas (handed over: restored, reason moved) and its runs never overlap
// even when both replicas get a call at once; a replica killed with SIGKILL
// costs only the work since the last save: the next call on the other one
// is restored (reason server_lost) with its variables and files, after at
// most the lease; the killed replica, started again under its name,
// removes the boxes of its earlier boot; a replica stopped with SIGTERM (a
// drained node) hands its conversations over, so the other one takes them
// at once; a replica cut off from the store mid-run stops that run itself
// (fencing) before its lease runs out, and the other replica restores the
// conversation; the metrics count it all; nothing is left on the engine.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { mountsBelow, sleep, umountBelow } from './lib/daemon.mjs';
import { DockerProxy } from './lib/faults.mjs';
import { PG_PASSWORD, startPg, skipReason as pgSkip } from './lib/pg.mjs';
import { removeContainersOf, startSandboxDaemon, waitNoContainers } from './lib/sandbox.mjs';
import { SLOW, conv, expectSession, expectStatus, py, startRun, waitSaved } from './lib/warm.mjs';

const pg = startPg();
const SKIP = !pg && pgSkip;
const LEASE_S = 2;
const TOKEN = randomBytes(24).toString('hex');
const SECRET = randomBytes(32).toString('hex');
const T = 240_000 * SLOW;

/** Replica `name` on the shared root and store. */
function replica(name, root, store, instance) {
  return startSandboxDaemon({
    name: `replica-${name}`,
    root,
    keepRoot: true,
    instance,
    env: {
      MCP_REPLICA_NAME: name,
      MCP_CONVERSATION_LEASE_SECONDS: String(LEASE_S),
      STORE_URL: store,
      MCP_API_TOKEN: TOKEN,
      FILE_SECRET: SECRET,
      SANDBOX_WARM: 'true',
      SANDBOX_POOL_SIZE: '0',
      SANDBOX_STATE: 'true',
    },
  });
}

/** The value of a metric series in d's /metrics (0 when absent). */
async function metric(d, series) {
  const text = await (await fetch(`${d.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe('warm sessions across replicas', { skip: SKIP, timeout: T }, () => {
  let root;
  let r1;
  let r2;
  const inst = { r1: `wrep-r1-${process.pid}`, r2: `wrep-r2-${process.pid}`, r3: `wrep-r3-${process.pid}` };

  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-wrep-'));
    pg.psql('CREATE DATABASE warm_replicas OWNER mcpsd');
    const store = pg.url('warm_replicas');
    r1 = await replica('r1', root, store, inst.r1);
    r2 = await replica('r2', root, store, inst.r2);
  });

  after(async () => {
    for (const d of [r1, r2]) {
      await d?.client?.close().catch(() => {});
      if (d && !d.exited) await d.stop('SIGTERM');
    }
    for (const i of Object.values(inst)) await removeContainersOf(i).catch(() => {});
    if (root) {
      umountBelow(root);
      rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    }
    pg?.destroy();
  });

  test('state follows a conversation whose calls alternate between replicas', async () => {
    const c = conv('alt');
    let r = await py(r1.client, c, 'x = 41\nprint(x)');
    expectStatus(r, 'completed');
    expectSession(r, 'new');
    // r1 holds it; r2 asks, r1 saves and hands it over, r2 restores.
    r = await py(r2.client, c, 'x += 1\nprint(x)');
    expectStatus(r, 'completed');
    expectSession(r, 'restored', 'moved');
    assert.equal(r.sc.stdout, '42\n');
    assert.ok(r.ms < (LEASE_S * 1000 + 8000) * SLOW, `handed over in ${r.ms} ms`);
    r = await py(r2.client, c, 'x += 1\nprint(x)');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, '43\n');
    // Back to r1: its old box (x = 41) is stale and must not be used.
    r = await py(r1.client, c, 'x += 1\nprint(x)');
    expectSession(r, 'restored', 'moved');
    assert.equal(r.sc.stdout, '44\n');
    assert.ok((await metric(r1, 'mcpsd_conversation_handovers_total{direction="out"}')) >= 1);
    assert.ok((await metric(r2, 'mcpsd_conversation_handovers_total{direction="in"}')) >= 1);
    assert.ok((await metric(r1, 'mcpsd_conversation_restores_total{after="handover"}')) >= 1);
    assert.ok((await metric(r2, 'mcpsd_conversation_waits_total')) >= 1);
    assert.ok((await metric(r1, 'mcpsd_conversations_held')) >= 0);
  });

  test('runs of one conversation sent to both replicas at once never overlap', async () => {
    const c = conv('both');
    await py(r1.client, c, 'import time\nspans = []');
    const code = 'import time\na = time.time(); time.sleep(1.5); b = time.time()\nspans.append((a, b))\nprint(len(spans))';
    const [a, b] = await Promise.all([py(r1.client, c, code), py(r2.client, c, code)]);
    expectStatus(a, 'completed');
    expectStatus(b, 'completed');
    // Whichever ran second sees both spans: the state went along.
    const last = await py(r1.client, c, 'spans.sort()\nprint(len(spans), spans[1][0] >= spans[0][1])');
    assert.equal(last.sc.stdout, '2 True\n', `spans ${last.sc.stdout}`);
  });

  test('a replica killed mid-conversation: the other restores its last save', async () => {
    const c = conv('kill');
    let r = await py(r1.client, c, "y = {'k': [1, 2, 3]}\nopen('/data/kept.txt', 'w').write('file kept')\nprint('ok')");
    expectStatus(r, 'completed');
    // What a kill costs is the work since the last save: wait for it.
    await waitSaved(root, 'kept.txt', r.sc.session.run_number);
    const t0 = Date.now();
    r1.proc.kill('SIGKILL');
    await new Promise((res) => r1.proc.once('exit', res));
    r = await py(r2.client, c, "print(y['k'][2], open('/data/kept.txt').read())");
    const ms = Date.now() - t0;
    expectStatus(r, 'completed');
    expectSession(r, 'restored', 'server_lost');
    assert.equal(r.sc.stdout, '3 file kept\n');
    assert.ok(ms < (LEASE_S * 1000 + 10_000) * SLOW, `restored ${ms} ms after the kill`);
    assert.ok((await metric(r2, 'mcpsd_conversation_restores_total{after="server_lost"}')) >= 1);
    // r1 again under its name: its earlier boot's boxes go.
    await r1.client.close().catch(() => {});
    r1 = await replica('r1', root, pg.url('warm_replicas'), inst.r1);
    const left = await waitNoContainers(inst.r1, { timeoutMs: 30_000 * SLOW });
    assert.deepEqual(left, [], 'the killed replica\'s boxes were removed by its next boot');
    // And the conversation comes back to r1 with r2's newer state.
    r = await py(r1.client, c, "y['k'].append(4)\nprint(len(y['k']))");
    expectSession(r, 'restored', 'moved');
    assert.equal(r.sc.stdout, '4\n');
  });

  test('a replica cut off from the store stops its run before another may take the conversation', async () => {
    // r3 reaches PostgreSQL through a proxy of its unix socket that the
    // test cuts: the store is gone for r3 alone, as in a partition.
    const pgDir = decodeURIComponent(pg.url('warm_replicas').match(/[?&]host=([^&]+)/)[1]);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-pgcut-'));
    const px = new DockerProxy(path.join(dir, '.s.PGSQL.5432'), path.join(pgDir, '.s.PGSQL.5432'));
    await px.start();
    let r3;
    try {
      r3 = await replica('r3', root, `postgresql://mcpsd:${PG_PASSWORD}@/warm_replicas?host=${dir}&port=5432`, inst.r3);
      const c = conv('cut');
      let r = await py(r3.client, c, "n = 5\nopen('/data/cut.txt', 'w').write('kept')\nprint(n)");
      expectStatus(r, 'completed');
      await waitSaved(root, 'cut.txt', r.sc.session.run_number);
      // A run that would go on for a minute, beating into /data.
      const long = startRun(
        r3.client,
        c,
        'python',
        "import time\nprint('started', flush=True)\nwhile True:\n    open('/data/beat.txt', 'a').write('.')\n    time.sleep(0.1)",
        { timeout_seconds: 60 },
      );
      await long.started;
      await sleep(500);
      await px.stop();
      const t0 = Date.now();
      r = await long.done;
      const ms = Date.now() - t0;
      expectStatus(r, 'error');
      assert.match(r.sc.message, /lost touch with the store the servers share.*stopped the run before another server could take the conversation over/);
      // Two thirds of the lease, then the interrupt's grace at most.
      assert.ok(ms < (LEASE_S * 1000 + 2000 + 5000) * SLOW, `stopped ${ms} ms after the store went away`);
      assert.ok((await metric(r3, 'mcpsd_conversation_fenced_total')) >= 1, 'r3 counted the fenced run');
      await r3.waitLog(/WARN .*the store has not confirmed this replica's lease/);
      // r1 takes the conversation once r3's lease ran out: the last save.
      r = await py(r1.client, c, "import os\nprint(n, open('/data/cut.txt').read(), os.path.getsize('/data/beat.txt') > 0)");
      expectStatus(r, 'completed');
      expectSession(r, 'restored', 'server_lost');
      assert.equal(r.sc.stdout, '5 kept True\n');
      // Nothing of r3's run beats any more.
      const size = 'import os\nprint(os.path.getsize("/data/beat.txt"))';
      const a = await py(r1.client, c, size);
      await sleep(1000);
      const b = await py(r1.client, c, size);
      assert.equal(b.sc.stdout, a.sc.stdout, 'the cut-off run wrote nothing after r1 took over');
      // The store back, r3 stops cleanly and leaves no box.
      await px.start();
      await r3.client.close().catch(() => {});
      assert.deepEqual(await r3.stop('SIGTERM'), { code: 0, sig: null }, `clean stop; log ${r3.logPath}`);
      assert.deepEqual(await waitNoContainers(inst.r3, { timeoutMs: 15_000 * SLOW }), [], 'r3 left no box');
    } finally {
      await px.start().catch(() => {});
      if (r3 && !r3.exited) await r3.stop('SIGKILL');
      await px.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a replica that stops (a drained node) hands its conversations over first', async () => {
    const c = conv('drain');
    let r = await py(r2.client, c, 'z = 7\nprint(z)');
    expectStatus(r, 'completed');
    const stopped = await r2.stop('SIGTERM');
    assert.deepEqual(stopped, { code: 0, sig: null }, `clean stop; log ${r2.logPath}`);
    const t0 = Date.now();
    r = await py(r1.client, c, 'print(z * 6)');
    expectSession(r, 'restored', 'moved');
    assert.equal(r.sc.stdout, '42\n');
    // Released, not expired: no wait for the lease.
    assert.ok(Date.now() - t0 < LEASE_S * 1000 * SLOW + 2000, `taken in ${Date.now() - t0} ms`);
    assert.deepEqual(await waitNoContainers(inst.r2, { timeoutMs: 15_000 * SLOW }), [], 'r2 left no box');
    await r2.client.close().catch(() => {});
    r2 = null;
  });

  test('nothing is left after the replicas stop', async () => {
    await r1.client.close().catch(() => {});
    const ex = await r1.stop('SIGTERM');
    assert.deepEqual(ex, { code: 0, sig: null }, `log ${r1.logPath}`);
    for (const i of Object.values(inst)) assert.deepEqual(await waitNoContainers(i, { timeoutMs: 15_000 * SLOW }), [], i);
    assert.deepEqual(mountsBelow(root), [], 'no mount left under the shared root');
  });
});
