// SPDX-License-Identifier: MIT
// Warm sessions on more than one host (docs/deployment.md, "Warm sessions on
// every node"), on the lab of tests/swarm/lab.sh: a daemon per sandbox node
// (n2, n3), each with SANDBOX_BACKEND=docker driving its own node's engine,
// warm sessions, the pool and durable state on, sharing one SANDBOX_ROOT (the
// lab's shared directory) and one PostgreSQL store (a scratch cluster of
// tests/lib/pg.sh), behind Debian's HAProxy with deploy/haproxy-nodes.cfg as
// shipped. The daemons run as processes here, as Swarm's global service of
// deploy/stack-nodes.yml would run them on each node; which node ran a call
// is read from the engines (the box's host name is its container id).
// Checked through the balancer: a 2025-11-25 session (1.x SDK client) and
// 2026-07-28 conversations (v2 SDK client, hashed on
// Mcp-Param-Conversation-Id) keep their Python state across calls, each on
// one node, and conversations spread over both nodes; a pool box on a
// worker serves a conversation's first call; a node's daemon SIGKILLed
// mid-conversation: the next call is restored on the other node with its
// variables and files, never run on two nodes, and the node's boxes go
// when its daemon comes back; a node's daemon stopped as a drain stops it
// (SIGTERM) hands its conversations over and they continue on the other
// node at once.
//
// Environment: MCPSD_LAB_DIR, MCPSD_BIN, as swarm.test.mjs; the lab must
// hold mcp-sandboxd/runner-python:latest (tests/run.sh's swarm layer loads
// it).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectHttp, freePort, sleep, umountBelow } from '../integration/lib/daemon.mjs';
import { connectModern } from '../integration/lib/modern.mjs';
import { startPg, skipReason as pgSkip } from '../integration/lib/pg.mjs';
import { dockerApi, startSandboxDaemon } from '../integration/lib/sandbox.mjs';
import { waitSaved } from '../integration/lib/warm.mjs';

const LAB = process.env.MCPSD_LAB_DIR ?? '/var/tmp/mcpsd-swarm-lab';
const LOG_DIR = process.env.MCPSD_LOG_DIR ?? 'build/test-logs';
const NODES = ['n2', 'n3'];
const sock = (n) => `${LAB}/${n}/docker.sock`;
const haveHaproxy = (() => {
  try {
    execFileSync('haproxy', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const NO_LAB = !existsSync(sock('n2')) && `no swarm lab at ${LAB}: start it with tests/swarm/lab.sh up (tests/run.sh --only swarm does)`;
async function labHasPython() {
  if (NO_LAB) return false;
  const r = await dockerApi('GET', '/images/mcp-sandboxd/runner-python:latest/json', { socketPath: sock('n2') }).catch(() => null);
  return r?.status === 200;
}
const SKIP0 =
  NO_LAB ||
  (!haveHaproxy && 'haproxy is not installed (tests/run.sh installs it)') ||
  (!(await labHasPython()) && 'the lab has no mcp-sandboxd/runner-python:latest (lab.sh up --images ...,mcp-sandboxd/runner-python:latest)');
const pg = SKIP0 ? null : startPg();
const SKIP = SKIP0 || (!pg && pgSkip);

const TOKEN = randomBytes(24).toString('hex');
const SECRET = randomBytes(32).toString('hex');
const ROOT = path.join(LAB, 'shared', 'nodes');
const LEASE_S = 2;
const inst = (n) => `lab-node-${n}-${process.pid}`;

// Per node: the package index its installer boxes reach (labIndex).
const indexes = {};
const PKG_NET = 'mcpsd-lab-pkg';

/**
 * A package index for node n: a bridge network of n's engine (the lab's
 * engines have no default bridge and no route out), and lab_index.mjs
 * serving on its gateway from inside n's network namespace.
 * Returns { url, proc, requests }.
 */
async function labIndex(n) {
  const k = Number(n.slice(1));
  const gw = `10.78.${k}.1`;
  await dockerApi('DELETE', `/networks/${PKG_NET}`, { socketPath: sock(n) }).catch(() => {});
  const made = await dockerApi('POST', '/networks/create', {
    socketPath: sock(n),
    body: { Name: PKG_NET, Driver: 'bridge', IPAM: { Config: [{ Subnet: `10.78.${k}.0/24`, Gateway: gw }] } },
  });
  assert.equal(made.status, 201, `a bridge network on ${n}: ${JSON.stringify(made.json)}`);
  const proc = spawn('nsenter', [`--net=/run/netns/mcpsdlab-${n}`, process.execPath, 'tests/swarm/lab_index.mjs', gw], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const requests = [];
  const url = await new Promise((resolve, reject) => {
    let buf = '';
    proc.once('exit', (code) => reject(new Error(`the index of ${n} exited (${code})`)));
    proc.stdout.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('{')) resolve(JSON.parse(line).url);
        else if (line.startsWith('GET ')) requests.push(line.slice(4));
      }
    });
  });
  return { url, proc, requests };
}

/** The daemon of node n, on port (kept across a restart). */
function nodeDaemon(n, port, storeUrl, lbPort, tag = '') {
  return startSandboxDaemon({
    name: `node-${n}${tag}`,
    root: ROOT,
    keepRoot: true,
    port,
    instance: inst(n),
    connect: false,
    env: {
      DOCKER_HOST: `unix://${sock(n)}`,
      MCP_REPLICA_NAME: n,
      MCP_CONVERSATION_LEASE_SECONDS: String(LEASE_S),
      STORE_URL: storeUrl,
      MCP_API_TOKEN: TOKEN,
      FILE_SECRET: SECRET,
      PUBLIC_BASE_URL: `http://127.0.0.1:${lbPort}`,
      SANDBOX_WARM: 'true',
      SANDBOX_POOL_SIZE: '1',
      SANDBOX_STATE: 'true',
      DOCKER_TIMEOUT_SECONDS: '10',
      SANDBOX_PACKAGES_NETWORK: PKG_NET,
      SANDBOX_PACKAGES_PIP_INDEX: indexes[n].url,
    },
  });
}

/** HAProxy with deploy/haproxy-nodes.cfg in front of the two nodes. */
async function balancer(port, a, b) {
  const log = createWriteStream(path.join(LOG_DIR, `haproxy-nodes-${port}.log`));
  const proc = spawn('haproxy', ['-f', 'deploy/haproxy-nodes.cfg', '-db'], {
    env: {
      PATH: process.env.PATH,
      MCPSD_LB_BIND: `127.0.0.1:${port}`,
      MCPSD_N1: a.base.replace('http://', ''),
      MCPSD_N1_NAME: 'n2',
      MCPSD_N2: b.base.replace('http://', ''),
      MCPSD_N2_NAME: 'n3',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.pipe(log);
  proc.stderr.pipe(log);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  return { proc, base, url: `${base}/mcp`, token: TOKEN };
}

/** Which node runs the container whose host name (short id) is h. */
async function nodeOf(h) {
  for (const n of NODES) {
    const r = await dockerApi('GET', `/containers/${h}/json`, { socketPath: sock(n) }).catch(() => null);
    if (r?.status === 200) return n;
  }
  return `none (${h})`;
}

/** The containers of instance i on node n: [{id, boot}]. */
async function boxesOn(n, i) {
  const f = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${i}`] }));
  const r = await dockerApi('GET', `/containers/json?all=1&filters=${f}`, { socketPath: sock(n) });
  return (r.json ?? []).map((c) => ({ id: c.Id, boot: c.Labels['sandbox.boot'] }));
}

/** The value of a series in d's /metrics (0 when absent). */
async function metric(d, series) {
  const text = await (await fetch(`${d.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const HOST = 'import socket\nprint(socket.gethostname())';

/** run_code in Python; { sc, text } (throws on a protocol error). */
async function py(client, conv, code) {
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code } }, undefined, { timeout: 180_000 });
  const text = (r.content ?? []).map((c) => c.text ?? '').join('\n');
  assert.equal(r.structuredContent?.status, 'completed', text.slice(0, 800));
  return { sc: r.structuredContent, text };
}

/** The node that ran a call whose code printed the host name last. */
const ranOn = (r) => nodeOf(r.sc.stdout.trim().split('\n').pop());

describe('warm sessions on every node', { skip: SKIP, timeout: 900_000 }, () => {
  const d = {};
  const ports = {};
  let lb;
  let storeUrl;
  let lbPort;

  before(async () => {
    rmSync(ROOT, { recursive: true, force: true });
    mkdirSync(ROOT, { recursive: true });
    pg.psql('CREATE DATABASE nodes OWNER mcpsd');
    storeUrl = pg.url('nodes');
    lbPort = await freePort();
    for (const n of NODES) indexes[n] = await labIndex(n);
    for (const n of NODES) {
      ports[n] = await freePort();
      d[n] = await nodeDaemon(n, ports[n], storeUrl, lbPort);
    }
    lb = await balancer(lbPort, d.n2, d.n3);
  });

  after(async () => {
    lb?.proc.kill('SIGTERM');
    for (const n of NODES) if (d[n] && !d[n].exited) await d[n].stop('SIGTERM');
    for (const n of NODES) {
      for (const b of await boxesOn(n, inst(n)).catch(() => [])) {
        await dockerApi('DELETE', `/containers/${b.id}?force=1`, { socketPath: sock(n) }).catch(() => {});
      }
    }
    for (const n of NODES) {
      indexes[n]?.proc.kill('SIGTERM');
      await dockerApi('DELETE', `/networks/${PKG_NET}`, { socketPath: sock(n) }).catch(() => {});
    }
    umountBelow(ROOT);
    rmSync(ROOT, { recursive: true, force: true, maxRetries: 3 });
    pg?.destroy();
  });

  test('the pool on a worker serves a conversation\'s first call', async () => {
    // One box per language the lab holds (Bash, Python), Python's with
    // pandas imported: that takes a while at half a CPU.
    for (const n of NODES) {
      const end = Date.now() + 240_000;
      while ((await d[n].health()).warm.pool < 2 && Date.now() < end) await sleep(500);
      assert.ok((await d[n].health()).warm.pool >= 2, `node ${n} has its pool ready`);
    }
    const c = await connectHttp(lb);
    const r = await py(c, `pool-${process.pid}`, `import pandas\n${HOST}`);
    assert.equal(r.sc.session.state, 'new');
    assert.equal(r.sc.session.from_pool, true, JSON.stringify(r.sc.session));
    await c.close();
  });

  test('packages on a worker: installed from the index its node reaches, into a session that keeps its state', async () => {
    const c = await connectModern(lb);
    const conv = `pkg-${process.pid}`;
    const call = (code, extra = {}) =>
      c.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code, ...extra } }, undefined, { timeout: 180_000 });
    let r = await call(`n = 1\n${HOST}`);
    assert.equal(r.structuredContent?.status, 'completed', JSON.stringify(r).slice(0, 800));
    const node = await ranOn({ sc: r.structuredContent });
    r = await call(`import mcpsd_lab_demo\nn += mcpsd_lab_demo.VALUE\nprint(n)\n${HOST}`, { packages: ['mcpsd-lab-demo'] });
    const text = (r.content ?? []).map((x) => x.text ?? '').join('\n');
    assert.equal(r.structuredContent?.status, 'completed', text.slice(0, 1200));
    const sc = r.structuredContent;
    assert.equal(sc.stdout.split('\n')[0], '43', 'the package imported into the live session, its variable kept');
    assert.equal(sc.session.state, 'continued', JSON.stringify(sc.session));
    assert.equal(await ranOn({ sc }), node, 'on the conversation\'s node');
    assert.deepEqual(sc.packages?.installed, ['mcpsd-lab-demo'], JSON.stringify(sc.packages));
    // The wheel came from that node's own index, through its installer box.
    assert.ok(indexes[node].requests.some((u) => u.startsWith('/files/mcpsd_lab_demo-1.0')), `${node}'s index served the wheel: ${JSON.stringify(indexes[node].requests)}`);
    await c.close();
  });

  test('2025-11-25 through the balancer: a session keeps its state on its node', async () => {
    const c = await connectHttp(lb);
    const sid = c.transport.sessionId;
    assert.match(sid, /^n[23]\./, `the session id names its node: ${sid}`);
    const conv = `old-${process.pid}`;
    let r = await py(c, conv, `v = 10\n${HOST}`);
    const node = await ranOn(r);
    assert.equal(node, sid.slice(0, 2), 'the run is on the session\'s node');
    for (let i = 1; i <= 3; i++) {
      r = await py(c, conv, `v += 1\nprint(v)\n${HOST}`);
      assert.equal(r.sc.stdout.split('\n')[0], String(10 + i));
      assert.equal(r.sc.session.state, 'continued');
      assert.equal(await ranOn(r), node);
    }
    await c.close();
  });

  test('2026-07-28 through the balancer: conversations hash to one node each, and spread', async () => {
    const c = await connectModern(lb);
    const seen = new Map();
    for (let k = 0; k < 10 && new Set(seen.values()).size < 2; k++) {
      const conv = `new-${process.pid}-${k}`;
      let r = await py(c, conv, `w = ${k}\n${HOST}`);
      const node = await ranOn(r);
      for (let i = 1; i <= 2; i++) {
        r = await py(c, conv, `w += 100\nprint(w)\n${HOST}`);
        assert.equal(r.sc.stdout.split('\n')[0], String(k + 100 * i));
        assert.equal(r.sc.session.state, 'continued', `${conv}: ${JSON.stringify(r.sc.session)}`);
        assert.equal(await ranOn(r), node, `${conv} stays on ${node}`);
      }
      seen.set(conv, node);
    }
    assert.equal(new Set(seen.values()).size, 2, `conversations on both nodes: ${JSON.stringify([...seen])}`);
    // Hashing kept every conversation on one node: nothing was handed over.
    for (const n of NODES) assert.equal(await metric(d[n], 'mcpsd_conversation_handovers_total{direction="out"}'), 0, n);
    await c.close();
  });

  test('a node\'s daemon SIGKILLed mid-conversation: restored on the other node, its boxes go when it is back', async () => {
    const c = await connectModern(lb);
    const conv = `kill-${process.pid}`;
    let r = await py(c, conv, `data = {'rows': [1, 2, 3]}\nopen('/data/kept.csv', 'w').write('a,b\\n1,2\\n')\n${HOST}`);
    const victim = await ranOn(r);
    const other = NODES.find((n) => n !== victim);
    r = await py(c, conv, `data['rows'].append(4)\n${HOST}`);
    // What a kill costs is the work since the last save: wait for it.
    await waitSaved(ROOT, 'kept.csv', r.sc.session.run_number);
    const oldBoots = new Set((await boxesOn(victim, inst(victim))).map((b) => b.boot));
    assert.ok(oldBoots.size > 0, 'the victim has boxes');
    const t0 = Date.now();
    d[victim].proc.kill('SIGKILL');
    await new Promise((res) => d[victim].proc.once('exit', res));
    // The balancer may close the client's keep-alive connection as the
    // node behind it dies; a POST sent on it that very moment fails in
    // the transport ("fetch failed", once in a CI run) before any server
    // saw it. A client retries that; so does the test, once.
    const check = `print(len(data['rows']), open('/data/kept.csv').read().splitlines()[1])\n${HOST}`;
    r = await py(c, conv, check).catch(async (e) => {
      if (!/fetch failed/.test(String(e?.message))) throw e;
      await sleep(500);
      return py(c, conv, check);
    });
    const ms = Date.now() - t0;
    assert.equal(r.sc.session.state, 'restored', JSON.stringify(r.sc.session));
    assert.equal(r.sc.session.reason, 'server_lost');
    assert.equal(r.sc.stdout.split('\n')[0], '4 1,2');
    assert.equal(await ranOn(r), other, 'served by the node left');
    assert.ok(ms < 20_000, `restored ${ms} ms after the kill`);
    assert.equal(await metric(d[other], 'mcpsd_conversation_restores_total{after="server_lost"}'), 1);
    // The victim's daemon comes back (Swarm restarts a global task): its
    // earlier boot's boxes are removed; the conversation stays where it is.
    d[victim] = await nodeDaemon(victim, ports[victim], storeUrl, lbPort, '-again');
    const end = Date.now() + 60_000;
    let left;
    do {
      left = (await boxesOn(victim, inst(victim))).filter((b) => oldBoots.has(b.boot));
      if (left.length) await sleep(500);
    } while (left.length && Date.now() < end);
    assert.deepEqual(left, [], 'no box of the killed daemon is left on its node');
    // The balancer sees it up again (rise 2 checks, 2 s apart).
    await sleep(6000);
    await c.close();
  });

  test('a drained node\'s daemon (SIGTERM) hands its conversations over with their state', async () => {
    const c = await connectModern(lb);
    const convs = [];
    for (let k = 0; k < 10 && convs.length < 2; k++) {
      const conv = `drain-${process.pid}-${k}`;
      const r = await py(c, conv, `u = ${k}\n${HOST}`);
      if ((await ranOn(r)) === 'n3') convs.push([conv, k]);
    }
    assert.equal(convs.length, 2, 'two conversations on n3');
    const ex = await d.n3.stop('SIGTERM');
    assert.deepEqual(ex, { code: 0, sig: null }, `a clean stop; log ${d.n3.logPath}`);
    for (const [conv, k] of convs) {
      const t0 = Date.now();
      const r = await py(c, conv, `print(u * 2)\n${HOST}`);
      assert.equal(r.sc.session.state, 'restored', JSON.stringify(r.sc.session));
      assert.equal(r.sc.session.reason, 'moved');
      assert.equal(r.sc.stdout.split('\n')[0], String(k * 2));
      assert.equal(await ranOn(r), 'n2');
      assert.ok(Date.now() - t0 < 15_000, `continued ${Date.now() - t0} ms later`);
    }
    assert.deepEqual(await boxesOn('n3', inst('n3')), [], 'the drained node kept no box');
    await c.close();
  });
});
