// SPDX-License-Identifier: MIT
// Housekeeping with a budget, against the real daemon and engine: 2,000
// expired workspaces (planted in SANDBOX_ROOT as an earlier daemon leaves
// them: a marker in meta/ aged past WORKSPACE_RETENTION_SECONDS and a
// directory of files in workspaces/) are deleted by the retention sweep in
// many short runs (each stops at its budget and the next goes on where it
// stopped, as /metrics shows), never one long one; while the sweep is under
// way a run_code task is cancelled and its container is gone within the
// promised bound; and every planted workspace is gone in the end.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './lib/daemon.mjs';
import { TASK_CAPS, modernCall, waitTask } from './lib/modern.mjs';
import { containersOf, instanceName, removeContainersOf, startSandboxDaemon, waitNoContainers } from './lib/sandbox.mjs';

const PLANTED = 2000;
const FILES_EACH = 2;
const RETENTION_S = 10; // the sweep runs every 5 s

/** Plants n expired workspaces under root; returns their names. */
function plant(root, n) {
  const old = new Date(Date.now() - 2 * 86400_000);
  const names = [];
  mkdirSync(path.join(root, 'meta'), { recursive: true, mode: 0o700 });
  mkdirSync(path.join(root, 'workspaces'), { recursive: true, mode: 0o700 });
  for (let i = 0; i < n; i++) {
    const name = randomBytes(32).toString('hex');
    const dir = path.join(root, 'workspaces', name);
    mkdirSync(path.join(dir, 'out'), { recursive: true });
    for (let f = 0; f < FILES_EACH; f++) writeFileSync(path.join(dir, 'out', `f${f}.txt`), `data ${i} ${f}\n`);
    // Written last, as the daemon does: the marker commits the workspace.
    const marker = path.join(root, 'meta', name);
    writeFileSync(marker, '');
    utimesSync(marker, old, old);
    names.push(name);
  }
  return names;
}

/** How many of names still have their marker. */
function left(root, names) {
  const have = new Set(readdirSync(path.join(root, 'meta')));
  return names.filter((n) => have.has(n)).length;
}

/** The samples of /metrics whose line starts with prefix, as numbers. */
async function samples(d, prefix) {
  const text = await (await fetch(`${d.base}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(prefix))
    .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)));
}

const one = async (d, prefix) => (await samples(d, prefix))[0] ?? 0;

describe('the workspace sweep works in runs with a budget', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-housekeeping-root-'));
  const instance = instanceName('housekeeping');
  let names;
  let d;

  before(async () => {
    const t0 = Date.now();
    names = plant(root, PLANTED);
    console.log(`# planted ${PLANTED} expired workspaces of ${FILES_EACH} files in ${Date.now() - t0} ms`);
    d = await startSandboxDaemon({
      name: 'housekeeping',
      root,
      instance,
      connect: false,
      env: {
        SANDBOX_WARM: 'false',
        WORKSPACE_QUOTA_MODE: 'none',
        WORKSPACE_RETENTION_SECONDS: String(RETENTION_S),
        WORKSPACE_MAX_COUNT: '10000',
        WORKSPACE_MAX_PER_TENANT: '100',
      },
    });
  });

  after(async () => {
    await removeContainersOf(instance);
    await d?.stopClean();
  });

  test('a task cancelled while the sweep runs is stopped within 2 s', async (ctx) => {
    assert.equal(left(root, names), PLANTED, 'the sweep has not begun: the planting was too slow for the test');
    const created = await modernCall(
      d,
      'tools/call',
      { name: 'run_code', arguments: { conversationId: 'hk-cancel', language: 'python', code: 'import time\nprint("up", flush=True)\ntime.sleep(120)', timeout_seconds: 150 } },
      { caps: TASK_CAPS, timeoutMs: 30_000 },
    );
    assert.equal(created.resultType, 'task');
    let end = Date.now() + 60_000;
    while ((await containersOf(instance, { all: false })).length === 0) {
      assert.ok(Date.now() < end, 'the run started');
      await sleep(100);
    }
    // Wait until the sweep is under way: some deleted, most not yet.
    end = Date.now() + 30_000;
    let n;
    for (;;) {
      n = left(root, names);
      if (n < PLANTED) break;
      assert.ok(Date.now() < end, 'the sweep began');
      await sleep(20);
    }
    assert.ok(n > PLANTED / 4, `the sweep was still under way (${n} left) when the cancel was sent`);
    const t0 = Date.now();
    const ack = await modernCall(d, 'tasks/cancel', { taskId: created.taskId }, { caps: TASK_CAPS });
    const ackMs = Date.now() - t0;
    assert.equal(ack.resultType, 'complete');
    const gone = await waitNoContainers(instance, { timeoutMs: 2_000, all: true });
    const goneMs = Date.now() - t0;
    const during = left(root, names);
    ctx.diagnostic(`tasks/cancel answered in ${ackMs} ms, container gone ${goneMs} ms after; ${n} then ${during} planted workspaces left`);
    assert.ok(ackMs < 1_000, `tasks/cancel answered in ${ackMs} ms (bound 1000 ms)`);
    assert.deepEqual(gone.map((c) => c.State), [], `container gone ${goneMs} ms after tasks/cancel`);
    assert.ok(goneMs <= 2_000, `container gone ${goneMs} ms after tasks/cancel was sent (bound 2000 ms)`);
    const t = await waitTask(d, created.taskId, { deadlineMs: 10_000, intervalMs: 200 });
    assert.equal(t.status, 'cancelled');
  });

  test('every planted workspace is deleted, in many runs of at most about the budget', async (ctx) => {
    const end = Date.now() + 120_000;
    while (left(root, names) > 0) {
      assert.ok(Date.now() < end, `${left(root, names)} of ${PLANTED} planted workspaces still there after 2 minutes`);
      await sleep(200);
    }
    const gone = new Set(readdirSync(path.join(root, 'workspaces')));
    assert.equal(names.filter((x) => gone.has(x)).length, 0, 'their directories are gone too');
    const runs = await one(d, 'mcpsd_housekeeping_seconds_count{job="workspaces"}');
    const unfinished = await one(d, 'mcpsd_housekeeping_unfinished_total{job="workspaces"}');
    const within = await one(d, 'mcpsd_housekeeping_seconds_bucket{job="workspaces",le="0.5"}');
    const sum = await one(d, 'mcpsd_housekeeping_seconds_sum{job="workspaces"}');
    ctx.diagnostic(`workspaces job: ${runs} runs, ${unfinished} stopped at the budget, ${within} within 0.5 s, ${sum.toFixed(2)} s in all`);
    assert.ok(unfinished >= 2, `the sweep stopped at its budget and resumed (${unfinished} unfinished runs)`);
    // The budget is 100 ms; a run ends after the deletion that passes it.
    assert.equal(within, runs, `every run of the sweep took at most 0.5 s (${within} of ${runs})`);
    // The prompt lane's jobs ran meanwhile, on their own thread.
    assert.ok((await one(d, 'mcpsd_housekeeping_seconds_count{job="sessions"}')) >= 1, 'the sessions job ran');
  });
});
