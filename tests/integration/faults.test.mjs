// SPDX-License-Identifier: MIT
// Faults around the daemon, through the real MCP endpoint with the official
// SDK client: the Docker engine stopped, hung and restarted (a proxy socket
// the test controls stands in for the engine), the daemon killed with
// SIGKILL or stopped with SIGTERM in the middle of runs, and the workspace
// file system full. Containers are only ever looked at (and, after a test
// that failed, removed) by the unique instance label of the daemon that
// made them.
//
// Findings kept as failing tests (see each test): a hang is misreported as
// a missing socket after an earlier outage; containers whose removal failed
// during an outage are left until the reaper grace and survive a clean stop;
// a runner image vanishing between discovery and a run crashes the daemon
// (use after free in runner_run); code can freeze the in-container watchdog
// so an orphan outlives its limit; SIGTERM can drop the results of runs in
// flight; sparse loop images on a filling host file system turn ENOSPC into
// EIO and a read-only workspace.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { connectHttp, sleep } from './lib/daemon.mjs';
import { DockerProxy, ImagesProxy, faultsDir, mountTmpfs, mountsBelow, umountBelow } from './lib/faults.mjs';
import {
  callTool,
  containersOf,
  describeRun,
  dockerApi,
  instanceName,
  removeContainersOf,
  runCode,
  startSandboxDaemon,
  waitNoContainers,
} from './lib/sandbox.mjs';

const DOCKER_TIMEOUT_S = 3;
const REAP_INTERVAL_S = 2;
const WATCHDOG_GRACE_S = 5; // RUNNER_WATCHDOG_GRACE_S

const ids = (cs) => cs.map((c) => `${c.Id.slice(0, 12)} ${c.State} ${c.Status}`);

/** Waits until fn() is truthy or ms pass; returns the last value. */
async function until(fn, ms, step = 200) {
  const end = Date.now() + ms;
  let v = await fn();
  while (!v && Date.now() < end) {
    await sleep(step);
    v = await fn();
  }
  return v;
}

async function quickHealth(d) {
  const t0 = Date.now();
  const h = await d.health();
  return { h, ms: Date.now() - t0 };
}

// ---------------------------------------------------------------------------
describe('the Docker engine stopped, hung and restarted', () => {
  let dir, px, d;
  let broken; // the container of the run cut by the engine going away

  before(async () => {
    dir = faultsDir();
    px = new DockerProxy(path.join(dir, 'docker.sock'));
    await px.start();
    d = await startSandboxDaemon({
      name: 'faults-engine',
      env: {
        // One-off runs, a box per run (what these tests watch on the
        // engine); warm_faults.test.mjs has the same faults with sessions.
        SANDBOX_WARM: 'false',
        DOCKER_HOST: px.url,
        DOCKER_TIMEOUT_SECONDS: String(DOCKER_TIMEOUT_S),
        SANDBOX_DISCOVERY_INTERVAL_SECONDS: '2',
        SANDBOX_REAP_INTERVAL_SECONDS: String(REAP_INTERVAL_S),
        WORKSPACE_QUOTA_MODE: 'none',
      },
    });
  });

  after(async () => {
    await px?.start().catch(() => {});
    px?.resume();
    await d?.client?.close().catch(() => {});
    if (d && !d.exited) await d.stop();
    if (d) await removeContainersOf(d.instance);
    await px?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const hello = (extra = {}) => runCode(d.client, { conversationId: 'engine', language: 'bash', code: 'echo up', ...extra });

  test('through the proxy, a run works', async () => {
    const r = await hello();
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.equal(r.sc.stdout, 'up\n');
  });

  test('engine stopped: run_code answers at once with a clear error, /healthz says unreachable', async () => {
    await px.stop();
    const r = await hello();
    assert.equal(r.sc.status, 'error', describeRun(r));
    assert.match(r.sc.message, /Docker engine not reachable/);
    assert.match(r.sc.message, /problem on the server/);
    assert.ok(r.ms < 2000, `answered in ${r.ms} ms`);
    // The operator sees the cause too, at warn (issue 19).
    await d.waitLog(/WARN.*failed on the server's side: .*Docker engine not reachable/, 5000, 'a warn line with the cause');
    const { h, ms } = await quickHealth(d);
    assert.ok(ms < 1000, `/healthz in ${ms} ms`);
    assert.equal(h.docker.reachable, false);
    assert.match(h.docker.last_error, /not reachable/);
    assert.notEqual(h.status, 'ok');
  });

  test('engine back: /healthz and runs recover by themselves', async () => {
    await px.start();
    // The discovery thread (every 2 s here) notices without any call.
    const h = await until(async () => (await d.health()).docker.reachable && (await d.health()), 8000);
    assert.ok(h, 'health reports the engine reachable again without a call');
    assert.equal(h.status, 'ok');
    for (let i = 0; i < 3; i++) {
      const r = await hello({ code: `echo back ${i}` });
      assert.equal(r.sc.status, 'completed', describeRun(r));
      assert.equal(r.sc.stdout, `back ${i}\n`, 'the output arrives whole');
    }
  });

  test('engine restarted again and again: each outage is reported, each return recovers', async () => {
    for (let i = 0; i < 3; i++) {
      await px.stop();
      const down = await hello();
      assert.equal(down.sc.status, 'error', describeRun(down));
      assert.match(down.sc.message, /not reachable/);
      await px.start();
      const up = await hello({ code: `echo cycle ${i}` });
      assert.equal(up.sc.status, 'completed', describeRun(up));
      assert.equal(up.sc.stdout, `cycle ${i}\n`);
    }
  });

  test('engine hung: the call fails within DOCKER_TIMEOUT_SECONDS; the daemon stays responsive', async () => {
    px.hang();
    let r;
    try {
      const p = hello();
      await sleep(300);
      // Things that do not need the engine answer at once meanwhile.
      const { ms } = await quickHealth(d);
      assert.ok(ms < 1000, `/healthz in ${ms} ms during the hang`);
      let t0 = Date.now();
      await d.client.listTools();
      assert.ok(Date.now() - t0 < 1000, 'tools/list answers during the hang');
      const c2 = await connectHttp(d);
      t0 = Date.now();
      const l = await callTool(c2, 'list_files', { conversationId: 'engine' });
      assert.notEqual(l.result.isError, true);
      assert.ok(Date.now() - t0 < 1000, 'list_files answers during the hang');
      await c2.close();
      r = await p;
      assert.equal(r.sc.status, 'error', describeRun(r));
      assert.ok(r.ms < DOCKER_TIMEOUT_S * 1000 + 2000, `failed after ${r.ms} ms`);
      const h = await d.health();
      assert.equal(h.docker.reachable, false, 'a hung engine is reported');
    } finally {
      px.resume();
    }
    const again = await until(async () => {
      const x = await hello({ code: 'echo after the hang' });
      return x.sc.status === 'completed' && x;
    }, 10_000);
    assert.ok(again, 'runs work again after the hang');
    assert.equal(again.sc.stdout, 'after the hang\n');
    // The diagnosis names a hang, not a missing socket: docker.c reads
    // CURLINFO_OS_ERRNO, which curl never resets on a pooled handle, so an
    // errno left from the earlier outage turns a timeout into "not
    // reachable: no such socket".
    assert.match(r.sc.message, /did not answer .* within 3000 ms/, 'a hang is reported as a hang');
    assert.doesNotMatch(r.sc.message, /no such socket/);
  });

  test('engine hung mid-run: the run ends with an error within its limit plus the Docker timeouts', async () => {
    const p = hello({ code: 'echo started; sleep 30', timeout_seconds: 3 });
    const up = await until(async () => (await containersOf(d.instance, { all: false })).length === 1, 5000);
    assert.ok(up, 'the run has a container');
    await sleep(800);
    px.hang();
    let r;
    try {
      r = await p;
    } finally {
      px.resume();
    }
    assert.ok(['error', 'timed_out'].includes(r.sc.status), describeRun(r));
    assert.equal(r.sc.stdout, 'started\n', 'output before the hang is kept');
    const limit = 3000 + 3 * DOCKER_TIMEOUT_S * 1000 + 2000;
    assert.ok(r.ms < limit, `answered after ${r.ms} ms (limit ${limit})`);
    const { ms } = await quickHealth(d);
    assert.ok(ms < 1000);
  });

  test('engine stopped mid-run: the run reports an error and its container stops at its limit', async () => {
    const p = hello({ code: 'echo started; sleep 60', timeout_seconds: 3 });
    const running = await until(async () => {
      const cs = await containersOf(d.instance, { all: false });
      return cs.length === 1 && cs[0];
    }, 5000);
    assert.ok(running, 'the run has a container');
    broken = { id: running.Id, deadline: Number(running.Labels['sandbox.deadline']), t0: Date.now() };
    await sleep(1000);
    await px.stop();
    const r = await p;
    assert.equal(r.sc.status, 'error', describeRun(r));
    assert.match(r.sc.message, /Docker engine/);
    assert.ok(r.ms < 3000 + 2 * DOCKER_TIMEOUT_S * 1000, `answered after ${r.ms} ms`);
    await px.start();
    // Nobody could kill it: the watchdog inside ends it at 3 + 5 s.
    const stopped = await until(async () => {
      const st = (await dockerApi('GET', `/containers/${broken.id}/json`)).json?.State;
      return !st || !st.Running;
    }, (3 + WATCHDOG_GRACE_S + 4) * 1000 - (Date.now() - broken.t0));
    assert.ok(stopped, 'the container of the broken run does not run past its limit');
  });

  test('after the engine is back, the broken run\'s container is gone by its deadline', async () => {
    assert.ok(broken, 'the previous test left a container to watch');
    const waitMs = (broken.deadline + REAP_INTERVAL_S + 5) * 1000 - Date.now();
    const gone = await until(async () => (await dockerApi('GET', `/containers/${broken.id}/json`)).status === 404, Math.max(waitMs, 1000), 500);
    const st = (await dockerApi('GET', `/containers/${broken.id}/json`)).json?.State;
    assert.ok(
      gone,
      `container ${broken.id.slice(0, 12)} still exists ${Math.round(Date.now() / 1000 - broken.deadline)} s after its ` +
        `deadline label (state ${st?.Status}); its removal failed while the engine was away and is not retried ` +
        'until the reaper grace (60 s) has passed',
    );
  });

  test('a clean stop after the outages leaves no container of this daemon behind', async () => {
    await d.client.close();
    const ex = await d.stop();
    assert.equal(ex.code, 0);
    const left = await containersOf(d.instance);
    assert.deepEqual(ids(left), [], 'containers whose removal failed during an outage are left on the engine');
  });
});

// ---------------------------------------------------------------------------
describe('a runner image removed or rebuilt between discovery and a run', () => {
  test('the run falls back to the image that is there now, and the daemon survives', async () => {
    // Only this daemon sees the phantom image (its engine answers through a
    // proxy that adds it to GET /images/json); then it vanishes, as the old
    // image does when runners/build.sh rebuilds one, and a run starts.
    const dir = faultsDir();
    const ip = new ImagesProxy(path.join(dir, 'engine.sock'));
    await ip.start();
    const filters = encodeURIComponent(JSON.stringify({ label: ['sandbox.runner=true', 'sandbox.language=bash'] }));
    const real = (await dockerApi('GET', `/images/json?filters=${filters}`)).json.find((i) => (i.RepoTags ?? []).includes('mcp-sandboxd/runner-bash:latest'));
    assert.ok(real, 'the bash runner image exists');
    let phantom = null;
    ip.imagesHook = (list) => (phantom ? [...list, phantom] : list);
    let d;
    try {
      d = await startSandboxDaemon({
        name: 'faults-images',
        env: { DOCKER_HOST: ip.url, SANDBOX_DISCOVERY_INTERVAL_SECONDS: '3600', WORKSPACE_QUOTA_MODE: 'none' },
      });
      for (let i = 0; i < 6; i++) {
        const tag = `mcp-sandboxd/runner-bash:phantom-${randomBytes(4).toString('hex')}`;
        phantom = {
          ...real,
          Id: `sha256:${randomBytes(32).toString('hex')}`,
          RepoTags: [tag],
          RepoDigests: [],
          Created: Math.floor(Date.now() / 1000),
          Labels: { ...real.Labels, 'sandbox.priority': '100000' },
        };
        await sleep(2100); // past the rediscovery rate limit
        const lr = await callTool(d.client, 'list_runners', {});
        assert.equal(lr.sc.runners.find((x) => x.language === 'bash')?.image, tag, 'the phantom image is the bash runner now');
        const vanished = phantom.Id;
        phantom = null; // rebuilt: the image the catalog names is gone
        const r = await runCode(d.client, { conversationId: 'images', language: 'bash', code: `echo survived ${i}` }).catch((e) => ({ e }));
        if (r.e) await until(() => d.exited, 2000);
        assert.equal(d.exited, null, `the daemon died in round ${i} (${JSON.stringify(d.exited)}): runner_run reads the catalog entry of the vanished image after releasing its catalog`);
        assert.ok(!r.e, `round ${i}: ${r.e?.message}`);
        assert.equal(r.sc.status, 'completed', describeRun(r));
        assert.equal(r.sc.stdout, `survived ${i}\n`);
        assert.equal(r.sc.runner_image, 'mcp-sandboxd/runner-bash:latest', 'the run fell back to the image that exists');
        assert.ok(ip.creates.includes(vanished), 'the vanished image was tried first');
      }
    } finally {
      await d?.client?.close().catch(() => {});
      if (d && !d.exited) await d.stop();
      else if (d) {
        umountBelow(d.root);
        rmSync(d.root, { recursive: true, force: true });
      }
      if (d) await removeContainersOf(d.instance);
      await ip.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------
describe('the daemon killed with SIGKILL in the middle of a run', () => {
  let root, instance, env, d1, d2;
  before(() => {
    root = faultsDir('mcpsd-root-');
    instance = instanceName('faults-kill');
    // The orphan of a one-off run; warm_limits.test.mjs kills a daemon with
    // warm sessions and its pool.
    env = { SANDBOX_WARM: 'false', FILE_SECRET: randomBytes(32).toString('hex'), MCP_API_TOKEN: randomBytes(24).toString('hex') };
  });
  after(async () => {
    for (const d of [d2, d1]) {
      await d?.client?.close().catch(() => {});
      if (d && !d.exited) await d.stop('SIGTERM');
    }
    await removeContainersOf(instance);
    umountBelow(root);
    rmSync(root, { recursive: true, force: true });
  });

  test('restarted with the same instance and SANDBOX_ROOT: the orphan is reaped at start-up, the workspace is intact', async () => {
    // Loop mode (the default): the workspace image outlives the process.
    d1 = await startSandboxDaemon({ name: 'faults-kill', root, keepRoot: true, instance, env });
    const seed = String.raw`import hashlib, os
os.makedirs('/data/sub/deeper', exist_ok=True)
open('/data/keep.txt', 'w').write('keep\n')
open('/data/sub/deeper/x.txt', 'w').write('deep\n')
data = os.urandom(1 << 20)
open('/data/blob.bin', 'wb').write(data)
print(hashlib.sha256(data).hexdigest())
`;
    const r1 = await runCode(d1.client, { conversationId: 'kill', language: 'python', code: seed });
    assert.equal(r1.sc.status, 'completed', describeRun(r1));
    const sha = r1.sc.stdout.trim();

    const inflight = runCode(d1.client, {
      conversationId: 'kill',
      language: 'bash',
      code: 'echo during > during.txt; sync; echo started; sleep 60',
      timeout_seconds: 30,
    }).then(
      (r) => ({ r }),
      (e) => ({ e }),
    );
    const running = await until(async () => (await containersOf(instance, { all: false })).length === 1, 8000);
    assert.ok(running, 'the run is in its container');
    await sleep(500);
    d1.proc.kill('SIGKILL');
    const lost = await inflight;
    assert.ok(lost.e || lost.r?.sc?.status === 'error', 'the caller learns that the call is lost');
    assert.equal((await containersOf(instance, { all: false })).length, 1, 'the orphan still runs after kill -9');

    d2 = await startSandboxDaemon({ name: 'faults-kill-2', root, keepRoot: true, instance, env });
    const left = await containersOf(instance);
    assert.deepEqual(ids(left), [], 'the orphan was reaped at start-up');

    const l = await callTool(d2.client, 'list_files', { conversationId: 'kill', limit: 100 });
    const names = l.sc.files.map((f) => f.name).sort();
    assert.deepEqual(names, ['blob.bin', 'during.txt', 'keep.txt', 'sub/deeper/x.txt'], l.text);
    const check = await runCode(d2.client, {
      conversationId: 'kill',
      language: 'bash',
      code: 'cat keep.txt sub/deeper/x.txt during.txt; sha256sum blob.bin | cut -c1-64; echo new > new.txt && echo writable',
    });
    assert.equal(check.sc.status, 'completed', describeRun(check));
    assert.equal(check.sc.stdout, `keep\ndeep\nduring\n${sha}\nwritable\n`);
    await d2.client.close();
    await d2.stopClean();
    assert.deepEqual(mountsBelow(root), [], 'a clean stop unmounts the workspace images');
    assert.deepEqual(ids(await containersOf(instance)), []);
  });

  test(
    'an orphan whose code froze the in-container watchdog still stops at its limit',
    // A known limit, written down in docs/security.md ("The in-container
    // watchdog is a second layer only"): it runs as the sandbox user.
    { todo: 'the watchdog runs as the sandbox user, so code can SIGSTOP it while the daemon is down' },
    async () => {
    // The watchdog (timeout -s KILL <limit+5>s) runs as the sandbox user,
    // so code can SIGSTOP it; with the daemon dead nothing else ends the
    // container until a daemon of this instance starts again.
    const inst = instanceName('faults-frozen');
    const froot = faultsDir('mcpsd-root-');
    let d, d3;
    try {
      d = await startSandboxDaemon({ name: 'faults-frozen', root: froot, keepRoot: true, instance: inst, env: { ...env, WORKSPACE_QUOTA_MODE: 'none' } });
      const p = runCode(d.client, {
        conversationId: 'frozen',
        language: 'bash',
        code: 'kill -STOP $PPID; echo frozen; sleep 60',
        timeout_seconds: 2,
      }).catch((e) => ({ e }));
      const up = await until(async () => (await containersOf(inst, { all: false })).length === 1, 8000);
      assert.ok(up);
      const t0 = Date.now();
      await sleep(700);
      d.proc.kill('SIGKILL');
      await p;
      const limitMs = (2 + WATCHDOG_GRACE_S + 3) * 1000;
      const stopped = await until(async () => (await containersOf(inst, { all: false })).length === 0, limitMs - (Date.now() - t0), 500);
      assert.ok(
        stopped,
        `the orphan still runs ${Math.round((Date.now() - t0) / 1000)} s after a 2 s limit: ` + ids(await containersOf(inst, { all: false })).join(', '),
      );
    } finally {
      // A restart of the instance reaps it in any case.
      d3 = await startSandboxDaemon({ name: 'faults-frozen-2', root: froot, keepRoot: true, instance: inst, env: { ...env, WORKSPACE_QUOTA_MODE: 'none' } }).catch(() => null);
      const left = await containersOf(inst);
      await d3?.client?.close().catch(() => {});
      await d3?.stop();
      await removeContainersOf(inst);
      umountBelow(froot);
      rmSync(froot, { recursive: true, force: true });
      assert.deepEqual(ids(left), [], 'a restarted daemon reaps the frozen orphan');
    }
    },
  );
});

// ---------------------------------------------------------------------------
describe('SIGTERM with runs in flight', () => {
  // Three rounds: the results of the last runs to finish race the shutdown.
  for (const round of [1, 2, 3]) {
    test(`round ${round}: running calls finish and their results arrive, new calls are refused clearly, exit 0, nothing left`, async () => {
      const d = await startSandboxDaemon({ name: 'faults-term', env: { WORKSPACE_QUOTA_MODE: 'none' } });
      const clients = [d.client, await connectHttp(d), await connectHttp(d)];
      try {
        const calls = clients.map((c, i) =>
          runCode(c, { conversationId: `term-${i}`, language: 'bash', code: `sleep 2; echo run ${i} done`, timeout_seconds: 20 }).then(
            (r) => ({ r }),
            (e) => ({ e }),
          ),
        );
        // Warm sessions (on by default) keep boxes between runs: count runs.
        const up = await until(async () => (await d.health()).runs?.running === 3, 8000);
        assert.ok(up, 'three runs are in flight');
        const exited = new Promise((res) => d.proc.once('exit', (code, signal) => res({ code, signal })));
        const t0 = Date.now();
        d.proc.kill('SIGTERM');
        await sleep(300);
        const refused = await runCode(clients[0], { conversationId: 'term-new', language: 'bash', code: 'echo new' });
        assert.equal(refused.result.isError, true, describeRun(refused));
        assert.match(refused.text, /shutting down/);
        assert.ok(Date.now() - t0 < 2000, 'refused at once');
        const results = await Promise.all(calls);
        const ex = await exited;
        assert.deepEqual(ex, { code: 0, signal: null });
        assert.ok(Date.now() - t0 < 15_000, 'the drain did not wait for the longest possible run');
        const left = await waitNoContainers(d.instance, { timeoutMs: 2000 });
        assert.deepEqual(ids(left), [], 'no container is left');
        results.forEach((x, i) => {
          assert.ok(
            x.r,
            `run ${i}: its result never arrived; the connection was closed without an answer (${x.e?.message}: ` +
              `${x.e?.cause?.message ?? ''}). main.c closes the sessions and the HTTP server as soon as ` +
              'mcp_server_drain sees no tool thread running, before the connection threads have written the results',
          );
          assert.equal(x.r.sc.status, 'completed', describeRun(x.r));
          assert.equal(x.r.sc.stdout, `run ${i} done\n`);
        });
      } finally {
        for (const c of clients) await c.close().catch(() => {});
        if (!d.exited) await d.stop('SIGKILL');
        else {
          umountBelow(d.root);
          rmSync(d.root, { recursive: true, force: true });
        }
        await removeContainersOf(d.instance);
      }
    });
  }
});

// ---------------------------------------------------------------------------
describe('disk full on the workspace file system', () => {
  const fill = (mb) => String.raw`import errno, os
n = 0
b = b'\1' * (1 << 20)
try:
    with open('/data/big.bin', 'wb') as f:
        for i in range(${mb}):
            f.write(b); f.flush(); os.fsync(f.fileno()); n += 1
    print('wrote all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;

  test('a full SANDBOX_ROOT (quota mode none): clear errors, the daemon is fine, recovery once space is back', async (t) => {
    const base = faultsDir();
    const root = path.join(base, 'root');
    const unmount = mountTmpfs(root, 24);
    if (!unmount) {
      t.skip('cannot mount a tmpfs here (not root?)');
      rmSync(base, { recursive: true, force: true });
      return;
    }
    let d;
    const filler = path.join(root, 'filler');
    try {
      d = await startSandboxDaemon({ name: 'faults-disk', root, keepRoot: true, env: { WORKSPACE_QUOTA_MODE: 'none' } });
      const ok = await runCode(d.client, { conversationId: 'disk', language: 'bash', code: 'echo before > before.txt; echo ok' });
      assert.equal(ok.sc.status, 'completed', describeRun(ok));
      // Fill the file system from outside: nothing is left for anyone.
      const fd = openSync(filler, 'w');
      const chunk = Buffer.alloc(1 << 20, 7);
      try {
        for (let i = 0; i < 64; i++) writeSync(fd, chunk);
        assert.fail('the tmpfs did not fill up');
      } catch (e) {
        if (e.code !== 'ENOSPC') throw e;
      }
      try {
        for (let i = 0; i < 4096; i++) writeSync(fd, chunk, 0, 4096);
      } catch (e) {
        if (e.code !== 'ENOSPC') throw e;
      }
      closeSync(fd);

      const r = await runCode(d.client, { conversationId: 'disk', language: 'bash', code: 'echo hello; echo x > /data/x.txt' });
      const said = r.sc ? `${r.sc.status} ${r.sc.message ?? ''} ${r.sc.stderr}` : r.text;
      assert.match(said, /space|full/i, `the answer says the disk is full: ${describeRun(r)}`);
      const up = await callTool(d.client, 'upload_file', { conversationId: 'disk', filename: 'up.txt', text: 'x'.repeat(10000) });
      assert.equal(up.result.isError, true);
      assert.match(up.text, /full|space/i);
      const { h, ms } = await quickHealth(d);
      assert.ok(ms < 1000 && h.docker.reachable, JSON.stringify(h));
      const l = await callTool(d.client, 'list_files', { conversationId: 'disk' });
      assert.ok(l.sc.files.some((f) => f.name === 'before.txt'), l.text);

      unlinkSync(filler);
      const again = await runCode(d.client, { conversationId: 'disk', language: 'bash', code: 'echo back > back.txt; cat before.txt back.txt' });
      assert.equal(again.sc.status, 'completed', describeRun(again));
      assert.equal(again.sc.stdout, 'before\nback\n');
    } finally {
      await d?.client?.close().catch(() => {});
      if (d && !d.exited) await d.stop();
      if (d) await removeContainersOf(d.instance);
      unmount();
      rmSync(base, { recursive: true, force: true });
    }
  });

  test('loop images on a host file system that fills up: a new workspace is refused cleanly, existing ones stay writable', async (t) => {
    // 30 MB quotas on a 40 MB file system: sparse images could promise more
    // than there is, so a workspace is admitted only while a whole quota
    // (plus a little) still fits on the host.
    const base = faultsDir();
    const root = path.join(base, 'root');
    const unmount = mountTmpfs(root, 40);
    if (!unmount) {
      t.skip('cannot mount a tmpfs here (not root?)');
      rmSync(base, { recursive: true, force: true });
      return;
    }
    let d;
    try {
      d = await startSandboxDaemon({ name: 'faults-loopfull', root, keepRoot: true, env: { WORKSPACE_QUOTA_MODE: 'loop', WORKSPACE_QUOTA_MB: '30' } });
      const a = await runCode(d.client, { conversationId: 'loop-a', language: 'python', code: fill(25), timeout_seconds: 30 });
      assert.equal(a.sc?.status, 'completed', describeRun(a));
      assert.match(a.sc.stdout, /wrote all 25/);
      const b = await runCode(d.client, { conversationId: 'loop-b', language: 'python', code: fill(25), timeout_seconds: 30 });
      assert.equal(b.result.isError, true, describeRun(b));
      assert.match(b.text, /disk is too full for a new workspace/, describeRun(b));
      const after = await runCode(d.client, {
        conversationId: 'loop-a',
        language: 'bash',
        code: "grep ' /data ' /proc/mounts | cut -d' ' -f4; if echo x > small.txt 2>/dev/null; then echo WRITABLE; else echo NOT-WRITABLE; fi",
      });
      assert.match(after.sc?.stdout ?? '', /WRITABLE/, describeRun(after));
      const { h } = await quickHealth(d);
      assert.ok(h.docker.reachable);
      assert.doesNotMatch(after.sc?.stdout ?? '', /NOT-WRITABLE|(^|,)ro(,|$)|emergency_ro/m, `the workspace was remounted read-only: ${after.sc?.stdout}`);
    } finally {
      await d?.client?.close().catch(() => {});
      if (d && !d.exited) await d.stop();
      if (d) await removeContainersOf(d.instance);
      umountBelow(root);
      unmount();
      rmSync(base, { recursive: true, force: true });
    }
  });
});
