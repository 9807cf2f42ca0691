// SPDX-License-Identifier: MIT
// Helpers for the warm-session tests (warm*.test.mjs): a daemon with warm
// sessions on (the pool on or off), run_code per conversation and
// language, waiting on /healthz's "warm" counters, the boxes of one
// daemon as the engine lists them (by its unique instance label only), and
// a teardown that checks nothing is left behind.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { sleep } from './daemon.mjs';
import { umountBelow, mountsBelow } from './faults.mjs';
import { callTool, containersOf, describeRun, removeContainersOf, runCode, startSandboxDaemon, waitNoContainers } from './sandbox.mjs';

/** Slower under the sanitizers. */
export const SLOW = process.env.MCPSD_SANITIZED ? 3 : 1;

/**
 * Starts a daemon with warm sessions on. opts.pool: pre-started boxes
 * (SANDBOX_POOL_SIZE=1 for python, typescript and bash, as lib/daemon.mjs
 * pins SANDBOX_POOL_LANGUAGES) or none; other opts
 * as for startSandboxDaemon. The SANDBOX_ROOT is kept for stopWarm, which
 * unmounts what is below it before removing it.
 */
export async function startWarm(opts = {}) {
  const pool = opts.pool ?? false;
  return startSandboxDaemon({
    ...opts,
    keepRoot: true,
    env: {
      SANDBOX_WARM: 'true',
      SANDBOX_POOL_SIZE: pool ? '1' : '0',
      // Durable sessions (saved Python state) are tested in
      // durable.test.mjs; the other warm tests see the state lost, as
      // they check the reasons. MCPSD_TEST_STATE=true runs them with it.
      SANDBOX_STATE: process.env.MCPSD_TEST_STATE ?? 'false',
      ...opts.env,
    },
  });
}

/**
 * Stops d with SIGTERM and checks that it exited 0 and left no container
 * and no mount behind; then removes its root. Safe after a failed test:
 * what is left is cleaned up before the assertions fail.
 */
export async function stopWarm(d) {
  if (!d) return;
  await d.client?.close().catch(() => {});
  const died = d.exited;
  let stopped = died;
  let left = [];
  let mounts = [];
  try {
    if (!died) stopped = await d.stop('SIGTERM');
    left = await waitNoContainers(d.instance, { timeoutMs: 10_000 * SLOW });
    mounts = mountsBelow(d.root);
  } finally {
    umountBelow(d.root);
    rmSync(d.root, { recursive: true, force: true, maxRetries: 3 });
    await removeContainersOf(d.instance).catch(() => {});
  }
  assert.equal(died, null, `the daemon died during the tests: ${JSON.stringify(died)}; log ${d.logPath}`);
  assert.deepEqual(stopped, { code: 0, sig: null }, `a clean SIGTERM exit; log ${d.logPath}`);
  assert.deepEqual(
    left.map((c) => `${c.Id.slice(0, 12)} ${c.Labels?.['sandbox.kind']} ${c.State}`),
    [],
    'no container of this daemon is left after it stopped',
  );
  assert.deepEqual(mounts, [], 'a clean stop unmounts the pool and the workspaces');
}

/** run_code of code in language for conversation conv (see runCode). */
export function run(client, conv, language, code, extra = {}, opts = {}) {
  return runCode(client, { conversationId: conv, language, code, ...extra }, opts);
}

/** run_code in Python. */
export const py = (client, conv, code, extra, opts) => run(client, conv, 'python', code, extra, opts);

/**
 * Starts run_code of code, which prints 'started' once it is under way.
 * Returns { done, started }: done is the call; started resolves when its
 * progress shows 'started', and rejects if the call ends first. request
 * goes to the SDK (a signal, say).
 */
export function startRun(client, conv, language, code, extra = {}, request = {}) {
  let started;
  const startedP = new Promise((r) => (started = r));
  const done = run(client, conv, language, code, extra, {
    request: { ...request, onprogress: (p) => String(p.message ?? '').includes('started') && started() },
  });
  const endedFirst = done.then((r) => assert.fail(`ended before it started: ${describeRun(r)}`));
  endedFirst.catch(() => {}); // read by the race only; done is the caller's
  return { done, started: Promise.race([startedP, endedFirst]) };
}

/** Asserts a run's status, with the run described on failure. */
export function expectStatus(r, status) {
  assert.ok(r.sc, `a structured result: ${r.text.slice(0, 500)}`);
  assert.equal(r.sc.status, status, describeRun(r) + ' session ' + JSON.stringify(r.sc.session));
}

/** Asserts the session report of a run: state, and reason when given. */
export function expectSession(r, state, reason) {
  const s = r.sc?.session;
  assert.ok(s, `a session report: ${describeRun(r)}`);
  assert.equal(s.state, state, `session ${JSON.stringify(s)}; ${describeRun(r)}`);
  if (reason !== undefined) assert.equal(s.reason, reason, `session ${JSON.stringify(s)}`);
}

/** Waits until pred(health.warm) holds; returns the last warm object. */
export async function waitWarm(d, pred, timeoutMs = 60_000 * SLOW, what = 'the warm counters') {
  const end = Date.now() + timeoutMs;
  let w = (await d.health()).warm;
  while (!pred(w) && Date.now() < end) {
    await sleep(200);
    w = (await d.health()).warm;
  }
  assert.ok(pred(w), `${what} never held: ${JSON.stringify(w)}`);
  return w;
}

/**
 * Waits until the pool holds n boxes (the tests' daemons pool three
 * languages, lib/daemon.mjs; Python's preloads numpy, pandas and
 * matplotlib: slow at 0.5 CPU on a loaded machine).
 */
export const waitPool = (d, n = 3, timeoutMs = 180_000 * SLOW) =>
  waitWarm(d, (w) => w.pool >= n, timeoutMs, `${n} pool boxes`);

/** The daemon's warm boxes (kind warm or pool) as the engine lists them. */
export async function boxesOf(d, { all = false } = {}) {
  return (await containersOf(d.instance, { all })).filter((c) => ['warm', 'pool'].includes(c.Labels?.['sandbox.kind']));
}

/**
 * Python code that prints the command lines of every process of its
 * container but the agent (PID 1) and the kernel itself, one per line.
 */
export const PY_PROCS = String.raw`import os
me = os.getpid()
for p in sorted(os.listdir('/proc')):
    if not p.isdigit() or int(p) in (1, me):
        continue
    try:
        cmd = open('/proc/%s/cmdline' % p, 'rb').read().replace(b'\0', b' ').decode().strip()
    except OSError:
        continue
    print(p, cmd)
`;

/** The same for Bash: every process but PID 1 and this shell's own. */
export const SH_PROCS = String.raw`for p in /proc/[0-9]*; do
  n=$(basename "$p")
  [ "$n" = 1 ] || [ "$n" = $$ ] || [ "$n" = "$BASHPID" ] && continue
  c=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) || continue
  [ -n "$c" ] && echo "$n $c"
done
true`;

/** Waits until fn() is truthy or ms pass; returns the last value. */
export async function until(fn, ms, step = 200) {
  const end = Date.now() + ms;
  let v = await fn();
  while (!v && Date.now() < end) {
    await sleep(step);
    v = await fn();
  }
  return v;
}

/** A unique conversation id. */
let convN = 0;
export const conv = (prefix = 'c') => `${prefix}-${process.pid}-${++convN}`;

/**
 * A runner of a language of its own for one test: built FROM an installed
 * runner image with labels only, and rebuilt under the same tag to stand
 * for an image update. build(gen) returns the new image id (also kept in
 * ids); runnerOf(d) is what d lists for it once past the rediscovery rate
 * limit; remove() deletes the tag and every image built.
 */
export function testRunner(lang, from) {
  const tag = `mcpsd-test/runner-${lang}:${process.pid}`;
  const ids = [];
  return {
    ids,
    build(gen) {
      const id = execFileSync('docker', ['build', '-q', '-t', tag, '-'], {
        input: `FROM ${from}\nLABEL sandbox.language="${lang}" sandbox.aliases="" sandbox.priority="1" mcpsd.test.generation="${gen}"\n`,
        encoding: 'utf8',
      }).trim();
      ids.push(id);
      return id;
    },
    async runnerOf(d) {
      await sleep(2100); // past the rediscovery rate limit
      return (await callTool(d.client, 'list_runners', {})).sc.runners.find((x) => x.language === lang);
    },
    remove() {
      for (const id of [tag, ...ids]) spawnSync('docker', ['image', 'rm', '-f', id], { stdio: 'ignore' });
    },
  };
}

/**
 * Waits until the workspace under root holding file marker has the save of
 * run n (its Python state after that run), at most ms.
 */
export async function waitSaved(root, marker, n, ms = 15_000) {
  const want = path.join('.mcp', 'state', 'python', `run-${n}.state`);
  const find = (dir, depth) => {
    let ents = [];
    try {
      ents = readdirSync(dir, { withFileTypes: true });
    } catch {
      return false;
    }
    if (ents.some((e) => e.name === marker) && existsSync(path.join(dir, want))) return true;
    return depth < 4 && ents.some((e) => e.isDirectory() && !e.name.startsWith('.') && find(path.join(dir, e.name), depth + 1));
  };
  const end = Date.now() + ms;
  while (!find(root, 0)) {
    if (Date.now() > end) throw new Error(`no save of run ${n} next to ${marker} under ${root} within ${ms} ms`);
    await sleep(100);
  }
}
