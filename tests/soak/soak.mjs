#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The soak test (issue 19): one daemon whose sweeps, idle limits and
// expiries are scaled down to seconds lives through several compressed
// "days". Each day two tenants send a burst of mixed traffic at the same
// time (new and old conversations in Python, Bash and TypeScript, a
// variable set and read in a warm session, files written by code and
// fetched by URL, upload_file, list_files and delete_file, run_code as a
// task, check_code, a cancelled run, a timeout, and an OAuth registration,
// consent and token exchange); then nobody calls for longer than every
// expiry (pool boxes, warm sessions, MCP sessions, workspaces, task
// records, OAuth codes, the sweep of leftover run directories); the end of
// each gap watches the idle pool boxes keep their directories through a
// whole lifetime. After each gap the next day checks what the gap should
// have ended, and the daemon's leftovers are counted: containers with its instance label,
// mounts under its SANDBOX_ROOT, loop devices backing its images, files in
// runs/ and pool/ beyond the live boxes', and its resident memory (day 2
// against the last day, within a margin).
//
// Every call's outcome is checked against what its code asked for; a
// state lost for a documented reason (restarted: idle_expired, ...) is
// accepted and counted; status "error" (the server could not run the
// code) is always a failure. The last line is
//   soak: N passed, N failed
// and the exit status is 1 when anything failed.
//
// Run from the repository root after a build (tests/run.sh --only soak does
// both). Environment: SOAK_DAYS (default 3), SOAK_GAP_SECONDS (default:
// longer than every expiry below), SOAK_RSS_MARGIN_MIB (30), MCPSD_BIN,
// MCPSD_LOG_DIR. See tests/soak/README.md.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { authHeaders, connectHttp, mountsBelow, post, sleep, startDaemon, umountBelow } from '../integration/lib/daemon.mjs';
import { TASK_CAPS, modernCall } from '../integration/lib/modern.mjs';
import { authorizeUrl, consent, pkce, register, tokenRequest } from '../integration/lib/oauth.mjs';
import {
  callTool,
  containersOf,
  describeRun,
  instanceName,
  removeContainersOf,
  rssKb,
  runCode,
  waitNoContainers,
} from '../integration/lib/sandbox.mjs';
import { startRun } from '../integration/lib/warm.mjs';

function envInt(name, dflt, min = 1) {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  if (!/^\d+$/.test(v) || Number(v) < min) {
    console.error(`${name}='${v}' must be a whole number of at least ${min}, e.g. ${name}=${dflt}`);
    process.exit(2);
  }
  return Number(v);
}

// The scaled-down timers, in seconds. The gap between days is longer than
// each of them plus the interval of the job that enforces it.
const T = {
  warmIdle: 3, // SANDBOX_WARM_IDLE_SECONDS (checked every second)
  warmMax: 15, // SANDBOX_WARM_MAX_SECONDS: sessions and pool boxes
  sessionIdle: 10, // MCP_SESSION_IDLE_SECONDS (swept every 5 s)
  workspace: 10, // WORKSPACE_RETENTION_SECONDS (swept every 5 s)
  task: 5, // MCP_TASK_RETENTION_SECONDS (checked when read)
  oauthCode: 5, // OAUTH_CODE_TTL_SECONDS (checked when exchanged)
  runsSweep: 10, // SANDBOX_RUNS_SWEEP_SECONDS (swept every reap, 1 s)
  maxTimeout: 20, // SANDBOX_MAX_TIMEOUT_SECONDS
  docker: 15, // DOCKER_TIMEOUT_SECONDS
};
const DAYS = envInt('SOAK_DAYS', 3);
// Longer than each expiry plus the interval of its job (the MCP session's
// 10 + 5 s is the longest but for the pool's), and than a pool box's whole
// lifetime: the end of the gap watches the waiting boxes live through the
// ages at which the runs sweep could take their directories.
const GAP_S = envInt('SOAK_GAP_SECONDS', T.warmMax + T.runsSweep + 5);
const RSS_MARGIN_KB = envInt('SOAK_RSS_MARGIN_MIB', 30, 0) * 1024;
const POOLED = ['python', 'bash'];
const ROOT_DIR = path.resolve(process.env.MCPSD_SOAK_ROOT ?? 'build/soak');
// A reason the model may be told its state was lost: documented in
// docs/sessions.md and each the consequence of a limit, not of a fault.
const LOST_OK = new Set(['idle_expired', 'max_lifetime', 'evicted', 'cancel_kill', 'timeout_kill']);

// ---- bookkeeping ------------------------------------------------------

const results = { passed: 0, failed: 0, failures: [] };
let dayStats = newDayStats();

function newDayStats() {
  return { passed: 0, failed: 0, accepted: {}, ms: 0 };
}

/** Notes a state loss the code's limits explain (printed per day). */
function accepted(reason) {
  dayStats.accepted[reason] = (dayStats.accepted[reason] ?? 0) + 1;
}

/** Runs one named check; a thrown error is a failure with its message. */
async function check(day, who, what, fn) {
  try {
    await fn();
    results.passed++;
    dayStats.passed++;
  } catch (e) {
    results.failed++;
    dayStats.failed++;
    const msg = `day ${day} ${who}: ${what}: ${String(e?.message ?? e).slice(0, 1500)}`;
    results.failures.push(msg);
    console.log(`  FAIL ${msg}`);
  }
}

/** A run that completed with the output the code prints. */
function expectCompleted(r, stdout) {
  assert.ok(r.sc, `a structured result, not a refusal: ${r.text.slice(0, 500)}`);
  assert.notEqual(r.sc.status, 'error', `the server could not run the code: ${describeRun(r)}`);
  assert.equal(r.sc.status, 'completed', describeRun(r));
  if (stdout !== undefined) assert.equal(r.sc.stdout, stdout, describeRun(r));
}

/**
 * The session report of a run that should have kept its state: continued,
 * or restarted/new for a reason a limit explains (then false is returned:
 * the state is gone and the caller does not expect it).
 */
function sessionKept(r) {
  const s = r.sc?.session ?? {};
  if (s.state === 'continued') return true;
  const why = s.reason ?? s.lost_reason;
  assert.ok(
    (s.state === 'restarted' || s.state === 'new') && LOST_OK.has(why),
    `state kept or lost for a documented reason: session ${JSON.stringify(s)}; ${describeRun(r)}`,
  );
  accepted(why);
  return false;
}

const text = async (url) => {
  const r = await fetch(url);
  return { status: r.status, body: await r.text() };
};

// ---- the daemon and what it leaves ---------------------------------------

const instance = instanceName('soak');
const tenants = [
  { name: 'alice', token: `alice-${randomBytes(16).toString('hex')}` },
  { name: 'bob', token: `bob-${randomBytes(16).toString('hex')}` },
];

function daemonEnv() {
  return {
    MCP_INSTANCE_NAME: instance,
    MCP_LOG_LEVEL: 'info',
    MCP_API_TOKENS: tenants.map((t) => `${t.name}:${t.token}`).join(','),
    OAUTH_ENABLED: 'true',
    OAUTH_CODE_TTL_SECONDS: String(T.oauthCode),
    SANDBOX_WARM: 'true',
    SANDBOX_POOL_SIZE: '1',
    SANDBOX_POOL_LANGUAGES: POOLED.join(','),
    // A light preload: the pool restarts every SANDBOX_WARM_MAX_SECONDS on
    // two shared cores.
    SANDBOX_POOL_PRELOAD: 'json',
    SANDBOX_WARM_IDLE_SECONDS: String(T.warmIdle),
    SANDBOX_WARM_MAX_SECONDS: String(T.warmMax),
    MCP_SESSION_IDLE_SECONDS: String(T.sessionIdle),
    WORKSPACE_RETENTION_SECONDS: String(T.workspace),
    MCP_TASK_RETENTION_SECONDS: String(T.task),
    SANDBOX_REAP_INTERVAL_SECONDS: '1',
    SANDBOX_DISCOVERY_INTERVAL_SECONDS: '1',
    SANDBOX_TIMEOUT_SECONDS: String(T.maxTimeout),
    SANDBOX_MAX_TIMEOUT_SECONDS: String(T.maxTimeout),
    DOCKER_TIMEOUT_SECONDS: String(T.docker),
    // The age past which leftover run directories are swept (issue 19);
    // a daemon without the setting sweeps at max_timeout + 4 x docker
    // timeout + 300 s and ignores it.
    SANDBOX_RUNS_SWEEP_SECONDS: String(T.runsSweep),
    WORKSPACE_QUOTA_MODE: 'auto',
    // A day here is about 35 s, so a tenant's new conversations of a day
    // (about 7) come at some 700 an hour: the hourly pace of new workspaces
    // is compressed like the timers above (one a second; the burst stays
    // the default 30), or the default 300 an hour refuses them from the
    // tenth day on.
    WORKSPACE_CREATE_PER_HOUR: '3600',
  };
}

/** Loop devices whose backing file is under dir ("/dev/loopN file"). */
function loopsBelow(dir) {
  const r = spawnSync('losetup', ['--list', '--noheadings', '--raw', '-O', 'NAME,BACK-FILE']);
  if (r.status !== 0) return [];
  return String(r.stdout)
    .split('\n')
    .filter((l) => l.split(' ').slice(1).join(' ').startsWith(dir + '/'));
}

const ls = (dir) => (existsSync(dir) ? readdirSync(dir).sort() : []);

/** The daemon's running pool boxes, and the box id of each. */
async function poolBoxes(d) {
  const boxes = await containersOf(d.instance, { all: true });
  const live = boxes.filter((c) => c.State === 'running' && c.Labels?.['sandbox.kind'] === 'pool');
  for (const c of live) c.boxId = (c.Names?.[0] ?? '').replace(/^\/mcpsd-w-/, '');
  return { boxes, live };
}

/**
 * Ids of waiting pool boxes without their runs/w-<id> directory. A box
 * retired at the end of its lifetime loses its directory before the
 * engine has removed its container, so only boxes well inside their
 * lifetime count (Created is in whole seconds).
 */
async function boxesWithoutDir(d) {
  const { live } = await poolBoxes(d);
  const runs = ls(path.join(d.root, 'runs'));
  const now = Date.now() / 1000;
  return live.filter((c) => now - c.Created < T.warmMax - 2 && !runs.includes(`w-${c.boxId}`)).map((c) => c.boxId);
}

/**
 * Watches the pool for ms: every pool box lives SANDBOX_WARM_MAX_SECONDS,
 * so a watch that long sees each box through the ages past the runs
 * sweep's, when a sweep that takes a waiting box's directory would have
 * taken it. A box seen twice in a row without its directory fails.
 */
async function watchPool(d, ms) {
  const end = Date.now() + ms;
  let before = new Set();
  const lost = new Set();
  while (Date.now() < end) {
    const now = new Set(await boxesWithoutDir(d));
    for (const id of now) if (before.has(id)) lost.add(id);
    before = now;
    await sleep(500);
  }
  if (lost.size)
    throw new Error(
      `pool boxes waiting to be claimed lost their runs/ directory (swept?): ${[...lost].join(', ')}; ` +
        `the next conversation to claim one cannot run`,
    );
}

/**
 * What the daemon holds once every expiry has passed: only its pool boxes
 * may be left, each with its directory in runs/ (and pool/), and nothing
 * of any conversation. Returns a summary for the day's line; throws with
 * the leftovers otherwise. Waits up to 30 s for removals under way.
 */
async function leftovers(d) {
  let last;
  const end = Date.now() + 30_000;
  for (;;) {
    const { boxes, live } = await poolBoxes(d);
    const ids = new Set(live.map((c) => c.boxId));
    const h = await d.health();
    const problems = [];
    const other = boxes.filter((c) => !live.includes(c));
    if (other.length)
      problems.push(`containers that are not idle pool boxes: ${other.map((c) => `${c.Names?.[0]} ${c.Labels?.['sandbox.kind']} ${c.State}`).join(', ')}`);
    if (live.length > POOLED.length) problems.push(`${live.length} pool boxes for ${POOLED.length} pooled languages`);
    const runs = ls(path.join(d.root, 'runs'));
    const strayRuns = runs.filter((n) => !(n.startsWith('w-') && ids.has(n.slice(2))));
    if (strayRuns.length) problems.push(`runs/ entries of no live box: ${strayRuns.join(', ')}`);
    const pool = ls(path.join(d.root, 'pool'));
    // A pool box's mount point is pool/<its name>, mcpsd-w-<id>.
    const strayPool = pool.filter((n) => !(n.startsWith('mcpsd-w-') && ids.has(n.slice('mcpsd-w-'.length))));
    if (strayPool.length) problems.push(`pool/ entries of no live box: ${strayPool.join(', ')}`);
    for (const sub of ['workspaces', 'meta', 'images']) {
      // images/ keeps the spare image a new workspace takes (at most one,
      // never attached: loopsBelow below would list it).
      const left = ls(path.join(d.root, sub)).filter((n) => !(sub === 'images' && n === '.spare.img'));
      if (left.length) problems.push(`${sub}/ still holds ${left.length} entries after the retention: ${left.slice(0, 5).join(', ')}`);
    }
    const mounts = mountsBelow(d.root).filter((m) => m !== path.join(d.root, 'pool'));
    if (mounts.length) problems.push(`mounts: ${mounts.join(', ')}`);
    const loops = loopsBelow(d.root);
    if (loops.length) problems.push(`loop devices: ${loops.join(', ')}`);
    if (h.warm?.sessions) problems.push(`${h.warm.sessions} warm sessions past the idle limit`);
    if (h.workspaces?.count) problems.push(`${h.workspaces.count} workspaces past the retention`);
    last = { problems, summary: `${live.length} pool boxes, ${runs.length} in runs/, ${mounts.length} mounts, ${loops.length} loops` };
    if (!problems.length || Date.now() > end) break;
    await sleep(1000);
  }
  if (last.problems.length) throw new Error(last.problems.join('; '));
  return last.summary;
}

// ---- one tenant's burst -------------------------------------------------

/** tasks/get of tenant t until the task ended. */
async function waitTaskOf(d, t, taskId, deadlineMs = 120_000) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const r = await modernCall(d, 'tasks/get', { taskId }, { caps: TASK_CAPS, token: t.token });
    if (['completed', 'failed', 'cancelled'].includes(r.status)) return r;
    if (Date.now() > end) throw new Error(`task ${taskId} still ${r.status} after ${deadlineMs} ms`);
    await sleep(500);
  }
}

async function burst(d, day, t) {
  const who = t.name;
  const c = (what, fn) => check(day, who, what, fn);
  const conv = (lang) => `${who}-day${day}-${lang}`;

  // Yesterday's MCP session ended with the idle limit. (The SDK client's
  // own session would not: its standalone GET stream stays open, and a
  // session with an open stream is not idle.)
  if (t.sid) {
    await c('an MCP session idle past MCP_SESSION_IDLE_SECONDS is gone', async () => {
      const r = await post(d, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, sessionHeaders(t, t.sid));
      const body = await r.text();
      assert.equal(r.status, 404, `tools/list in yesterday's session: ${r.status} ${body.slice(0, 300)}`);
    });
  }
  await t.client?.close().catch(() => {});
  t.client = await connectHttp(d, { token: t.token });
  const client = t.client;

  // A new conversation in a pooled language: its first run takes a pool
  // box that waited through the gap.
  const py = conv('py');
  let pyFile;
  await c('python: a new conversation sets a variable and writes a file', async () => {
    const r = await runCode(client, {
      conversationId: py,
      language: 'python',
      code: `x = 6 * 7\nopen('day.txt', 'w').write('${who} day ${day}\\n')\nprint(x)`,
    });
    expectCompleted(r, '42\n');
    pyFile = (r.sc.files ?? []).find((f) => f.name === 'day.txt');
    assert.ok(pyFile?.url, `day.txt among the files: ${JSON.stringify(r.sc.files)}`);
    // At once: a workspace idle for WORKSPACE_RETENTION_SECONDS (10) is
    // deleted, and a loaded machine can pause a burst that long.
    const g = await text(pyFile.url);
    assert.equal(g.status, 200, 'the file the code wrote is served at its URL');
    assert.equal(g.body, `${who} day ${day}\n`);
  });
  await c('python: the variable is still there in the warm session', async () => {
    const r = await runCode(client, { conversationId: py, language: 'python', code: 'print(x + 1)' });
    if (sessionKept(r)) expectCompleted(r, '43\n');
    else assert.match(r.sc.stderr, /NameError/, describeRun(r));
  });

  // Yesterday's conversation: its session and its workspace have expired.
  if (t.prev) {
    const old = t.prev;
    await c("yesterday's workspace was deleted by the retention", async () => {
      const l = await callTool(client, 'list_files', { conversationId: old.py });
      assert.notEqual(l.result.isError, true, l.text);
      assert.deepEqual(
        l.sc.files.map((f) => f.name),
        [],
        'no file of a workspace idle past WORKSPACE_RETENTION_SECONDS',
      );
      const g = await text(old.url);
      assert.equal(g.status, 404, `yesterday's file URL: ${g.status} ${g.body.slice(0, 200)}`);
    });
    await c("yesterday's python session says why its state is gone", async () => {
      const r = await runCode(client, { conversationId: old.py, language: 'python', code: 'print(x)' });
      assert.ok(r.sc, r.text.slice(0, 500));
      assert.notEqual(r.sc.status, 'error', describeRun(r));
      const s = r.sc.session ?? {};
      assert.notEqual(s.state, 'continued', `a session idle past SANDBOX_WARM_IDLE_SECONDS went on: ${JSON.stringify(s)}`);
      if (s.state === 'restarted') {
        assert.ok(LOST_OK.has(s.reason), `a documented reason: ${JSON.stringify(s)}`);
        accepted(s.reason);
      }
      assert.equal(r.sc.status, 'failed', describeRun(r));
      assert.match(r.sc.stderr, /NameError/, describeRun(r));
    });
    await c("yesterday's task is past MCP_TASK_RETENTION_SECONDS", async () => {
      await assert.rejects(
        modernCall(d, 'tasks/get', { taskId: old.taskId }, { caps: TASK_CAPS, token: t.token }),
        (e) => {
          assert.ok(e.rpc, `a JSON-RPC error: ${e.message}`);
          return true;
        },
      );
    });
  }

  // Bash: pooled too; a file written and fetched.
  await c('bash: a new conversation writes a file that is served', async () => {
    const r = await runCode(client, {
      conversationId: conv('sh'),
      language: 'bash',
      code: 'echo "$((6 * 7))" > out.txt && cat out.txt',
    });
    expectCompleted(r, '42\n');
    const f = (r.sc.files ?? []).find((x) => x.name === 'out.txt');
    assert.ok(f?.url, `out.txt among the files: ${JSON.stringify(r.sc.files)}`);
    const g = await text(f.url);
    assert.equal(g.status, 200);
    assert.equal(g.body, '42\n');
  });

  // TypeScript: not pooled; a warm box of its own.
  await c('typescript: a new conversation', async () => {
    const r = await runCode(client, {
      conversationId: conv('ts'),
      language: 'typescript',
      code: 'const a: number = 21;\nconsole.log(a * 2);',
    });
    expectCompleted(r, '42\n');
  });

  // upload_file, list_files, delete_file.
  await c('upload_file, list_files, delete_file', async () => {
    const body = `uploaded by ${who} on day ${day}\n`;
    const u = await callTool(client, 'upload_file', { conversationId: py, filename: 'in/up.txt', text: body });
    assert.notEqual(u.result.isError, true, u.text);
    assert.equal(u.sc.size, Buffer.byteLength(body));
    let g = await text(u.sc.url);
    assert.equal(g.status, 200);
    assert.equal(g.body, body);
    let l = await callTool(client, 'list_files', { conversationId: py });
    assert.ok(
      l.sc.files.some((f) => f.name === 'in/up.txt' && f.url === u.sc.url),
      JSON.stringify(l.sc.files),
    );
    const del = await callTool(client, 'delete_file', { conversationId: py, filename: 'in/up.txt' });
    assert.notEqual(del.result.isError, true, del.text);
    l = await callTool(client, 'list_files', { conversationId: py });
    assert.ok(!l.sc.files.some((f) => f.name === 'in/up.txt'), JSON.stringify(l.sc.files));
    g = await text(u.sc.url);
    assert.equal(g.status, 404, 'a deleted file is no longer served');
  });

  // run_code as a task (2026-07-28 with the tasks extension).
  let taskId;
  await c('run_code as a task completes and is read back', async () => {
    const created = await modernCall(
      d,
      'tools/call',
      { name: 'run_code', arguments: { conversationId: conv('task'), language: 'python', code: 'print("task", 6 * 7)' } },
      { caps: TASK_CAPS, token: t.token, timeoutMs: 60_000 },
    );
    assert.equal(created.resultType, 'task', JSON.stringify(created).slice(0, 500));
    taskId = created.taskId;
    const done = await waitTaskOf(d, t, taskId);
    assert.equal(done.status, 'completed', JSON.stringify(done).slice(0, 800));
    assert.equal(done.result?.structuredContent?.status, 'completed', JSON.stringify(done.result).slice(0, 800));
    assert.equal(done.result.structuredContent.stdout, 'task 42\n');
  });

  // check_code: the code is checked, never run.
  await c('check_code finds a syntax error', async () => {
    const r = await callTool(client, 'check_code', { conversationId: py, language: 'python', code: 'def f(:\n    pass\n' });
    assert.notEqual(r.result.isError, true, r.text.slice(0, 500));
    assert.equal(r.sc.ok, false, JSON.stringify(r.sc));
    assert.equal(r.sc.errors[0]?.line, 1, JSON.stringify(r.sc));
  });

  // A run cancelled by the client, then the conversation goes on.
  await c('a cancelled run ends, and the next run of the conversation works', async () => {
    const ac = new AbortController();
    const cv = conv('cancel');
    const { done, started } = startRun(
      client,
      cv,
      'python',
      'import time\nprint("started", flush=True)\ntime.sleep(60)',
      {},
      { signal: ac.signal },
    );
    await started;
    ac.abort('the user pressed stop');
    await assert.rejects(done, /abort|cancel|stop/i);
    const r = await runCode(client, { conversationId: cv, language: 'python', code: 'print("after")' });
    sessionKept(r);
    expectCompleted(r, 'after\n');
  });

  // A timeout the code asked for.
  await c('a run past its timeout_seconds is timed_out', async () => {
    const r = await runCode(client, {
      conversationId: conv('sh'),
      language: 'bash',
      code: 'echo up; sleep 30',
      timeout_seconds: 2,
    });
    assert.ok(r.sc, r.text.slice(0, 500));
    assert.equal(r.sc.status, 'timed_out', describeRun(r));
    assert.equal(r.sc.stdout, 'up\n', describeRun(r));
  });

  // A session that makes one call and is left alone (as a client that
  // went away does).
  await c('a session used once', async () => {
    t.sid = await initSession(d, t);
    const r = await post(d, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, sessionHeaders(t, t.sid));
    const body = await r.text();
    assert.equal(r.status, 200, body.slice(0, 300));
    assert.match(body, /run_code/);
  });

  t.prev = { py, url: pyFile?.url ?? `${d.base}/files/none`, taskId: taskId ?? 'none' };
}

const sessionHeaders = (t, sid) => ({
  ...authHeaders(t.token),
  'Mcp-Session-Id': sid,
  'MCP-Protocol-Version': '2025-11-25',
});

/** A 2025-11-25 session of tenant t on the wire; resolves its id. */
async function initSession(d, t) {
  const r = await post(
    d,
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'soak', version: '1' } },
    },
    authHeaders(t.token),
  );
  await r.text();
  const sid = r.headers.get('mcp-session-id');
  assert.equal(r.status, 200);
  assert.ok(sid, 'a session id');
  const n = await post(d, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionHeaders(t, sid));
  await n.text();
  return sid;
}

// ---- OAuth --------------------------------------------------------------

const REDIRECT = 'http://127.0.0.1:9/callback';

/** A code obtained through the consent page (not exchanged yet). */
async function codeFor(d, client, t) {
  const { verifier, challenge } = pkce();
  const cs = await consent(authorizeUrl(d.base, { clientId: client.client_id, redirectUri: REDIRECT, challenge }), {
    token: t.token,
    deliver: false,
  });
  const code = cs.params?.get('code');
  assert.ok(code, `a code from the consent page: ${cs.status} ${cs.location ?? String(cs.body ?? cs.page).slice(0, 300)}`);
  return { code, verifier, clientId: client.client_id };
}

const exchange = (d, c) =>
  tokenRequest(d.base, {
    grant_type: 'authorization_code',
    code: c.code,
    redirect_uri: REDIRECT,
    code_verifier: c.verifier,
    client_id: c.clientId,
    resource: `${d.base}/mcp`,
  });

async function oauthDay(d, day, state) {
  const t = tenants[day % tenants.length];
  const c = (what, fn) => check(day, `oauth/${t.name}`, what, fn);
  if (state.code) {
    await c("yesterday's authorization code expired (OAUTH_CODE_TTL_SECONDS)", async () => {
      const r = await exchange(d, state.code);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json?.error, 'invalid_grant', r.text);
    });
  }
  await c('registration, consent, token exchange, and an MCP call with the token', async () => {
    const reg = await register(d.base, {
      client_name: `soak day ${day}`,
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
    });
    assert.equal(reg.status, 201, reg.text);
    const r = await exchange(d, await codeFor(d, reg.json, t));
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.access_token, r.text);
    const mc = await connectHttp(d, { token: r.json.access_token });
    try {
      const l = await callTool(mc, 'list_files', { conversationId: `${t.name}-oauth` });
      assert.notEqual(l.result.isError, true, l.text);
    } finally {
      await mc.close().catch(() => {});
    }
    state.code = await codeFor(d, reg.json, t);
  });
}

// ---- main -----------------------------------------------------------------

async function main() {
  mkdirSync(ROOT_DIR, { recursive: true });
  const root = path.join(ROOT_DIR, `root-${process.pid}`);
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root);
  console.log(
    `soak: ${DAYS} days, gaps of ${GAP_S} s; timers (s): ${Object.entries(T)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  const d = await startDaemon({ name: 'soak', root, keepRoot: true, env: daemonEnv() });
  d.instance = instance;
  const rss = [];
  const oauth = {};
  let failedToStop = null;
  try {
    const h = await d.health();
    console.log(`soak: daemon pid ${d.proc.pid}, quota mode ${h.workspaces?.quotaMode}, log ${d.logPath}`);
    // The pool filled once, so that the first day starts as the others do.
    const end = Date.now() + 180_000;
    while ((await d.health()).warm?.pool < POOLED.length && Date.now() < end) await sleep(500);
    for (let day = 1; day <= DAYS; day++) {
      dayStats = newDayStats();
      const t0 = Date.now();
      await Promise.all([...tenants.map((t) => burst(d, day, t)), oauthDay(d, day, oauth)]);
      const busyS = ((Date.now() - t0) / 1000).toFixed(0);
      // The gap; its end is spent watching the pool boxes wait.
      const watchMs = Math.min(GAP_S, T.warmMax + 3) * 1000;
      await sleep(GAP_S * 1000 - watchMs);
      await check(day, 'daemon', 'every waiting pool box keeps its directory', () => watchPool(d, watchMs));
      let left = '';
      await check(day, 'daemon', 'nothing of the day is left after the gap', async () => {
        assert.equal(d.exited, null, `the daemon died: ${JSON.stringify(d.exited)}`);
        left = await leftovers(d);
      });
      rss.push(rssKb(d.proc.pid));
      const acc = Object.entries(dayStats.accepted)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      console.log(
        `day ${day}: ${dayStats.passed} passed, ${dayStats.failed} failed; burst ${busyS} s, gap ${GAP_S} s; ` +
          `state lost for documented reasons: ${acc || 'none'}; left: ${left || 'see failure'}; ` +
          `daemon RSS ${(rss.at(-1) / 1024).toFixed(1)} MiB`,
      );
    }
    dayStats = newDayStats();
    if (rss.length >= 3) {
      await check(DAYS, 'daemon', 'memory does not grow from day 2 to the last day', async () => {
        const grow = rss.at(-1) - rss[1];
        console.log(
          `soak: RSS day 2 ${(rss[1] / 1024).toFixed(1)} MiB, day ${DAYS} ${(rss.at(-1) / 1024).toFixed(1)} MiB ` +
            `(${grow >= 0 ? '+' : ''}${(grow / 1024).toFixed(1)} MiB; margin ${RSS_MARGIN_KB / 1024} MiB)`,
        );
        assert.ok(grow <= RSS_MARGIN_KB, `RSS grew by ${(grow / 1024).toFixed(1)} MiB`);
      });
    } else {
      console.log(`soak: RSS per day (MiB): ${rss.map((k) => (k / 1024).toFixed(1)).join(', ')} (3 days or more compare day 2 with the last)`);
    }
  } finally {
    for (const t of tenants) await t.client?.close().catch(() => {});
    // A clean stop leaves no container, mount, loop device or directory of
    // a box.
    await check(DAYS, 'daemon', 'a clean stop leaves nothing behind', async () => {
      const died = d.exited;
      const ex = died ?? (await d.stop('SIGTERM'));
      failedToStop = died;
      assert.equal(died, null, `the daemon died during the soak: ${JSON.stringify(died)}`);
      assert.deepEqual(ex, { code: 0, sig: null }, `a clean SIGTERM exit; log ${d.logPath}`);
      const left = await waitNoContainers(instance, { timeoutMs: 20_000 });
      assert.deepEqual(left.map((x) => `${x.Names?.[0]} ${x.State}`), [], 'no container left');
      assert.deepEqual(mountsBelow(root), [], 'no mount left');
      assert.deepEqual(loopsBelow(root), [], 'no loop device left');
      assert.deepEqual(
        ls(path.join(root, 'runs')).concat(ls(path.join(root, 'pool'))),
        [],
        'no box directory left in runs/ or pool/',
      );
    });
    // For the reader: warnings the daemon logged (a server-side status
    // error is logged at warn with its cause).
    const log = existsSync(d.logPath) ? readFileSync(d.logPath, 'utf8').split('\n') : [];
    const warns = log.filter((l) => / (WARN|ERROR) /.test(l));
    console.log(`soak: the daemon logged ${warns.length} warnings and errors${warns.length ? ':' : ''}`);
    for (const l of warns.slice(0, 10)) console.log(`  ${l.slice(0, 300)}`);
    umountBelow(root);
    await removeContainersOf(instance).catch(() => {});
    if (results.failed === 0) rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    else console.log(`soak: kept ${root} and the log ${d.logPath} for a look`);
    if (failedToStop) console.log(readFileSync(d.logPath, 'utf8').split('\n').slice(-30).join('\n'));
  }
}

try {
  await main();
} catch (e) {
  results.failed++;
  results.failures.push(`the soak stopped: ${e?.stack ?? e}`);
  console.log(`  FAIL the soak stopped: ${e?.stack ?? e}`);
}
if (results.failures.length) {
  console.log('soak failures:');
  for (const f of results.failures) console.log(`  ${f}`);
}
console.log(`soak: ${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed ? 1 : 0);
