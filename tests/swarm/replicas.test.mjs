// SPDX-License-Identifier: MIT
// Two daemon replicas behind HAProxy (Debian's, with deploy/haproxy.cfg as
// shipped), on the swarm lab of tests/swarm/lab.sh, sharing one
// SANDBOX_ROOT on the lab's shared directory and one PostgreSQL store (a
// scratch cluster of tests/lib/pg.sh). Through the balancer: sessions of
// MCP 2025-11-25 (Streamable HTTP and HTTP+SSE) stay with the replica whose
// name starts their id; requests of 2026-07-28 go to either replica and see
// one workspace; files are served by both. Tasks: a cancel sent to the
// other replica stops the run; killing a replica loses no finished result,
// and its running task is reported failed by the one left.
//
// Environment: MCPSD_LAB_DIR, MCPSD_BIN, as swarm.test.mjs.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectHttp, connectSse, freePort, sleep, startDaemon } from '../integration/lib/daemon.mjs';
import { TASK_CAPS, connectModern, modernCall, modernPost } from '../integration/lib/modern.mjs';
import { startPg, skipReason as pgSkip } from '../integration/lib/pg.mjs';
import { runCode } from '../integration/lib/sandbox.mjs';

const LAB = process.env.MCPSD_LAB_DIR ?? '/var/tmp/mcpsd-swarm-lab';
const LOG_DIR = process.env.MCPSD_LOG_DIR ?? 'build/test-logs';
const sock = (n) => `${LAB}/${n}/docker.sock`;
const NO_LAB = !existsSync(sock('n1')) && `no swarm lab at ${LAB}: start it with tests/swarm/lab.sh up (tests/run.sh --only swarm does)`;
const haveHaproxy = (() => {
  try {
    execFileSync('haproxy', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const SKIP0 = NO_LAB || (!haveHaproxy && 'haproxy is not installed (tests/run.sh installs it)');
// A scratch PostgreSQL (tests/lib/pg.sh) holds the replicas' shared store.
const pg = SKIP0 ? null : startPg();
const SKIP = SKIP0 || (!pg && pgSkip);

const SECRET = randomBytes(32).toString('hex');
const TOKEN = randomBytes(24).toString('hex');
const ROOT = path.join(LAB, 'shared', 'replicas');
const LEASE_S = 6;

/** GET on the manager's engine API; the parsed answer. */
function api(p) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock('n1'), path: `/v1.41${p}`, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        try {
          resolve(JSON.parse(body));
        } catch {
          reject(new Error(`${p}: ${res.statusCode} ${body.slice(0, 200)}`));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${p}: timeout`)));
    req.on('error', reject);
    req.end();
  });
}

/** The services of a daemon instance still on the swarm. */
async function servicesOf(instance) {
  const all = await api('/services');
  return all.filter((s) => Object.values(s.Spec.Labels ?? {}).includes(instance)).map((s) => s.Spec.Name);
}

async function until(what, fn, ms = 30_000, every = 250) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(every);
  }
}

/** A replica on the lab: swarm backend, the shared root and store. */
async function replica(name, lbPort, storeUrl, port, tag = '') {
  return startDaemon({
    name: `replica-${name}${tag}`,
    root: ROOT,
    keepRoot: true,
    port,
    env: {
      SANDBOX_BACKEND: 'swarm',
      DOCKER_HOST: `unix://${sock('n1')}`,
      MCP_INSTANCE_NAME: `lab-replica-${name}`,
      MCP_REPLICA_NAME: name,
      MCP_REPLICA_LEASE_SECONDS: String(LEASE_S),
      STORE_URL: storeUrl,
      MCP_API_TOKEN: TOKEN,
      FILE_SECRET: SECRET,
      PUBLIC_BASE_URL: `http://127.0.0.1:${lbPort}`,
      DOCKER_TIMEOUT_SECONDS: '5',
      MCP_LOG_LEVEL: 'info',
    },
  }).then((d) => Object.assign(d, { token: TOKEN, name }));
}

/** HAProxy with deploy/haproxy.cfg in front of r1 and r2. */
async function balancer(port, r1, r2) {
  const log = createWriteStream(path.join(LOG_DIR, `haproxy-replicas-${port}.log`));
  const proc = spawn('haproxy', ['-f', 'deploy/haproxy.cfg', '-db'], {
    env: {
      PATH: process.env.PATH,
      MCPSD_LB_BIND: `127.0.0.1:${port}`,
      MCPSD_R1: r1.base.replace('http://', ''),
      MCPSD_R2: r2.base.replace('http://', ''),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.pipe(log);
  proc.stderr.pipe(log);
  const base = `http://127.0.0.1:${port}`;
  await until('haproxy answers', async () => {
    try {
      return (await fetch(`${base}/healthz`)).ok;
    } catch {
      return false;
    }
  });
  return { proc, base, url: `${base}/mcp`, token: TOKEN };
}

/** Which replica served the last requests: the runs each one counted. */
async function runsOf(d) {
  const text = await (await fetch(`${d.base}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^mcpsd_runs_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

const bash = (client, code, args = {}) => runCode(client, { language: 'bash', code, ...args });

/** run_code as a task on d (a replica or the balancer); the task id. */
async function startTask(d, conversationId, code, extra = {}) {
  const r = await modernCall(
    d,
    'tools/call',
    { name: 'run_code', arguments: { conversationId, language: 'bash', code, ...extra } },
    { caps: TASK_CAPS, timeoutMs: 30_000 },
  );
  assert.ok(r.task?.taskId ?? r.taskId, `a task was created: ${JSON.stringify(r)}`);
  return r.task?.taskId ?? r.taskId;
}

const getTask = (d, taskId) => modernCall(d, 'tasks/get', { taskId }, { caps: TASK_CAPS, timeoutMs: 15_000 });

describe('daemon replicas behind HAProxy', { timeout: 300_000, skip: SKIP }, () => {
  let pgUrl, r1, r2, lb, lbPort;

  before(async () => {
    rmSync(ROOT, { recursive: true, force: true });
    mkdirSync(ROOT, { recursive: true });
    pg.psql('CREATE DATABASE replicas OWNER mcpsd');
    pgUrl = pg.url('replicas');
    lbPort = await freePort();
    r1 = await replica('r1', lbPort, pgUrl);
    r2 = await replica('r2', lbPort, pgUrl);
    lb = await balancer(lbPort, r1, r2);
  });
  after(async () => {
    lb?.proc.kill('SIGTERM');
    for (const d of [r1, r2]) await d?.stop('SIGTERM').catch(() => {});
    // Whatever a killed replica left is removed by its next boot, as here.
    for (const name of ['r1', 'r2']) {
      const d = await replica(name, lbPort, pgUrl, undefined, '-cleanup').catch(() => null);
      if (d) {
        await until(`lab-replica-${name}'s services gone`, async () => (await servicesOf(`lab-replica-${name}`)).length === 0, 30_000).catch(() => {});
        await d.stop('SIGTERM');
      }
    }
    pg?.destroy();
    rmSync(ROOT, { recursive: true, force: true });
  });

  test('a session of 2025-11-25 stays with the replica its id names; its files are served by either', async () => {
    const clients = [];
    for (let i = 0; i < 4; i++) clients.push(await connectHttp(lb));
    const ids = clients.map((c) => c.transport.sessionId);
    assert.ok(ids.some((s) => s.startsWith('r1.')) && ids.some((s) => s.startsWith('r2.')), `sessions on both replicas: ${ids}`);
    for (const [i, c] of clients.entries()) {
      let r;
      for (let k = 0; k < 3; k++) {
        r = await bash(c, `echo "call ${k}" >> /data/log.txt; wc -l < /data/log.txt`, { conversationId: `sess-${i}` });
        assert.equal(r.sc?.status, 'completed', r.text);
        assert.equal(r.sc.stdout.trim(), String(k + 1), 'every call of the session reached its workspace in order');
      }
      const f = r.sc.files?.find((x) => x.name === 'log.txt');
      assert.ok(f?.url?.startsWith(lb.base), `a file link on the balancer's URL: ${JSON.stringify(r.sc.files)}`);
      for (const base of [lb.base, r1.base, r2.base]) {
        const got = await fetch(f.url.replace(lb.base, base));
        assert.equal(got.status, 200, `${base} serves the file of session ${ids[i]}`);
        assert.equal(await got.text(), 'call 0\ncall 1\ncall 2\n');
      }
      await c.close();
    }
  });

  test('the HTTP+SSE transport through the balancer', async () => {
    const c = await connectSse(lb);
    const tools = await c.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'run_code'));
    for (let k = 0; k < 3; k++) {
      const r = await bash(c, `echo sse-${k}`, { conversationId: 'sse' });
      assert.equal(r.sc?.status, 'completed', r.text);
      assert.equal(r.sc.stdout, `sse-${k}\n`);
    }
    await c.close();
  });

  test('2026-07-28: either replica serves, both see one workspace, files from both', async () => {
    const before1 = await runsOf(r1);
    const before2 = await runsOf(r2);
    const c = await connectModern(lb, 'mcpsd-replicas');
    const outs = [];
    for (let k = 0; k < 6; k++) {
      const r = await c.callTool({ name: 'run_code', arguments: { conversationId: 'modern', language: 'bash', code: `echo ${k} >> /data/seen.txt; cat /data/seen.txt | tr '\\n' ' '` } });
      assert.equal(r.structuredContent?.status, 'completed', JSON.stringify(r.content));
      outs.push(r.structuredContent.stdout.trim());
    }
    assert.equal(outs.at(-1), '0 1 2 3 4 5', 'six calls, one workspace');
    const n1 = (await runsOf(r1)) - before1;
    const n2 = (await runsOf(r2)) - before2;
    assert.ok(n1 > 0 && n2 > 0, `both replicas ran some of the calls (r1 ${n1}, r2 ${n2})`);
    const r = await c.callTool({ name: 'run_code', arguments: { conversationId: 'modern', language: 'bash', code: 'printf "shared bytes" > /data/out.txt' } });
    const f = r.structuredContent.files.find((x) => x.name === 'out.txt');
    assert.ok(f?.url?.startsWith(lb.base), `a file link on the balancer's URL: ${JSON.stringify(r.structuredContent.files)}`);
    for (const base of [lb.base, r1.base, r2.base]) {
      const got = await fetch(f.url.replace(lb.base, base));
      assert.equal(got.status, 200, `${base} serves the file`);
      assert.equal(await got.text(), 'shared bytes');
    }
    await c.close();
  });

  test('a task cancelled through the other replica stops its run', async () => {
    const id = await startTask(r1, 'cancel-across', 'echo started; sleep 120', { timeout_seconds: 150 });
    await until('the run started on a worker', async () => (await servicesOf('lab-replica-r1')).length > 0, 60_000);
    await modernCall(r2, 'tasks/cancel', { taskId: id }, { caps: TASK_CAPS });
    const t = await until(
      'the task cancelled',
      async () => {
        const s = await getTask(r2, id);
        return ['cancelled', 'failed', 'completed'].includes(s.status) && s;
      },
      20_000,
    );
    assert.equal(t.status, 'cancelled', JSON.stringify(t));
    await until('its service removed', async () => (await servicesOf('lab-replica-r1')).length === 0, 20_000);
  });

  test('killing a replica loses no finished result, and its running task is reported failed', async () => {
    // Finished tasks from both replicas (the balancer alternates).
    const done = [];
    for (let k = 0; k < 4; k++) done.push(await startTask(lb, `kill-${k}`, `echo result-${k}`));
    for (const [k, id] of done.entries()) {
      const t = await until(`task ${k} completed`, async () => {
        const s = await getTask(lb, id);
        return s.status !== 'working' && s;
      }, 60_000);
      assert.equal(t.status, 'completed', JSON.stringify(t));
    }
    const running = await startTask(r1, 'kill-running', 'echo started; sleep 100', { timeout_seconds: 30 });
    await until('the run started on a worker', async () => (await servicesOf('lab-replica-r1')).length > 0, 60_000);
    const t0 = Date.now();
    await r1.stop('SIGKILL');
    // Every finished result, through the balancer (r2 only now).
    for (const [k, id] of done.entries()) {
      const t = await getTask(lb, id);
      assert.equal(t.status, 'completed', `task ${k} after r1 died: ${JSON.stringify(t)}`);
      assert.match(JSON.stringify(t.result ?? t), new RegExp(`result-${k}`));
    }
    const failed = await until(
      'the killed replica task failed',
      async () => {
        const s = await getTask(r2, running);
        return s.status !== 'working' && s;
      },
      (LEASE_S + 10) * 1000,
    );
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.match(failed.statusMessage ?? '', /replica/i, 'the reason names the replica');
    const waited = Date.now() - t0;
    assert.ok(waited <= (LEASE_S + 10) * 1000, `reported within the lease (${waited} ms)`);
    // A session that lived on r1 is gone; a new one works through r2.
    const c = await connectHttp(lb);
    assert.ok(c.transport.sessionId.startsWith('r2.'), c.transport.sessionId);
    const r = await bash(c, 'echo after', { conversationId: 'after-kill' });
    assert.equal(r.sc?.status, 'completed', r.text);
    await c.close();
    // r1 comes back under its name and removes what its last boot left.
    r1 = await replica('r1', lbPort, pgUrl, Number(new URL(r1.base).port), '-restarted');
    await until('r1 removed its earlier boot services', async () => (await servicesOf('lab-replica-r1')).length === 0, 30_000);
  });

  test('sessions of one replica are unknown to the other', async () => {
    const c = await connectHttp(r1);
    const sid = c.transport.sessionId;
    assert.ok(sid.startsWith('r1.'), sid);
    const r = await modernPost(r2, { jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Method': undefined } });
    assert.equal(r.status, 404, `r2 does not know r1's session: ${r.text}`);
    await c.close();
  });
});
