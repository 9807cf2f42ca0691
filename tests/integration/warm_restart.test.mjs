// SPDX-License-Identifier: MIT
// Warm sessions survive a restart of the Docker engine (issue 22): with the
// channel socket (SANDBOX_WARM_CHANNEL=socket, docs/agent-protocol.md) the
// daemon talks to a warm box's agent without the engine, and with the
// engine's live-restore on the box keeps running while dockerd is away.
// The test starts an engine of its own (tests/integration/lib/own_engine.sh:
// its own network namespace, data root and socket; the shared engine is
// never restarted), copies the Bash runner into it (~4 s; Python's image
// takes ~60 s: MCPSD_RESTART_PYTHON=1 adds it), runs a daemon on it, and
// makes warm calls in a loop while it stops dockerd (SIGTERM) and starts it
// again: no call may fail, and the session's state (a file in the box's own
// /tmp, a Python variable) is kept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep, umountBelow } from './lib/daemon.mjs';
import { describeRun } from './lib/sandbox.mjs';
import { SLOW, conv, expectSession, expectStatus, py, run, startWarm } from './lib/warm.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ENGINE = path.join(HERE, 'lib', 'own_engine.sh');
// Its data root and socket: below MCPSD_ENGINE_DIR (default /var/tmp/mcpsd-engines).
const DIR = path.join(process.env.MCPSD_ENGINE_DIR ?? '/var/tmp/mcpsd-engines', `restart-${process.pid}`);
const WITH_PY = process.env.MCPSD_RESTART_PYTHON === '1';
const T = 300_000 * SLOW;

const engine = (cmd, ...args) =>
  execFileSync(ENGINE, [cmd, DIR, ...args], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 240_000 });

describe('warm sessions across a restart of dockerd (live-restore)', () => {
  let d;

  before(async () => {
    mkdirSync(path.dirname(DIR), { recursive: true });
    engine('up', 'mcp-sandboxd/runner-bash', ...(WITH_PY ? ['mcp-sandboxd/runner-python'] : []));
    d = await startWarm({
      name: 'warm-restart',
      env: {
        DOCKER_HOST: `unix://${DIR}/docker.sock`,
        // MCPSD_RESTART_CHANNEL=attach shows what the test catches.
        SANDBOX_WARM_CHANNEL: process.env.MCPSD_RESTART_CHANNEL ?? 'socket',
        // Engine calls fail fast while it is away.
        DOCKER_TIMEOUT_SECONDS: '5',
      },
    });
  });

  after(async () => {
    await d?.client?.close().catch(() => {});
    const died = d?.exited;
    if (d && !died) await d.stop('SIGTERM');
    if (d) {
      umountBelow(d.root);
      rmSync(d.root, { recursive: true, force: true, maxRetries: 3 });
    }
    engine('down');
    assert.equal(died ?? null, null, `the daemon died during the test; log ${d?.logPath}`);
  });

  test('calls in flight and after the restart succeed; the state is kept', { timeout: T }, async () => {
    const c = conv('restart');
    const cp = conv('restart-py');
    const first = await run(d.client, c, 'bash', 'echo kept >/tmp/state; echo started');
    expectStatus(first, 'completed');
    expectSession(first, 'new');
    if (WITH_PY) expectStatus(await py(d.client, cp, 'x = 41; print("set")'), 'completed');

    // A call that is running while dockerd stops and starts again.
    const inflight = run(d.client, c, 'bash', 'sleep 4; cat /tmp/state; echo inflight-done', { timeout: 60 });
    const results = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        // The in-flight call holds the session: these queue behind it,
        // then run one after another, before, during and after.
        const r = await run(d.client, c, 'bash', `cat /tmp/state; echo call-${i}`);
        r.endedAt = Date.now();
        results.push(r);
        if (WITH_PY) results.push(await py(d.client, cp, 'x += 1; print(x)'));
      }
    })();
    await sleep(1000);
    const t0 = Date.now();
    engine('stop');
    const downAt = Date.now();
    const downMs = downAt - t0;
    await sleep(3000); // calls continue while the engine is away
    const upAt = Date.now();
    engine('start');
    await sleep(3000);
    stop = true;
    await loop;
    const r = await inflight;
    expectStatus(r, 'completed');
    assert.match(r.sc.stdout, /kept\ninflight-done/, describeRun(r));
    assert.ok(results.length >= 3, `calls were made during the restart: ${results.length}`);
    const whileDown = results.filter((x) => x.endedAt > downAt && x.endedAt < upAt).length;
    assert.ok(whileDown >= 1, 'calls ended while dockerd was stopped');
    let pyx = 41;
    for (const x of results) {
      expectStatus(x, 'completed');
      expectSession(x, 'continued');
      if (x.sc.stdout.startsWith('kept')) continue;
      assert.equal(x.sc.stdout.trim(), String(++pyx), describeRun(x));
    }
    // And after it, the box is the one from before (its /tmp is its own).
    const last = await run(d.client, c, 'bash', 'cat /tmp/state');
    expectStatus(last, 'completed');
    expectSession(last, 'continued');
    assert.equal(last.sc.stdout, 'kept\n');
    console.log(
      `# RESTART engine stop took ${downMs} ms; ${results.length} calls around the restart ` +
        `(${whileDown} while dockerd was stopped), none failed`,
    );
  });
});
