// SPDX-License-Identifier: MIT
// The warm channel socket (SANDBOX_WARM_CHANNEL=socket, docs/security.md,
// "The warm channel"): code in a box attacks its own channel and looks for
// the channels of other boxes; the host side is checked too (the socket is
// gone once the agent holds it, the directory is root's, the mount
// read-only). The pool's hand-over works over it, and the attach stream
// stays available as SANDBOX_WARM_CHANNEL=attach.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { BIN } from './lib/daemon.mjs';
import { describeRun, dockerApi } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, py, run, startWarm, stopWarm, waitPool } from './lib/warm.mjs';

const T = 240_000 * SLOW;

// Python run in a box: what code can do against the channel. Prints JSON.
const ATTACK = String.raw`import json, os, socket, stat
out = {}
out['run_mcpsd'] = sorted(os.listdir('/run/mcpsd')) if os.path.isdir('/run/mcpsd') else None
def try_connect(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        return 'connected'
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
out['connect_own'] = try_connect('/run/mcpsd/channel')
try:
    open('/run/mcpsd/x', 'w')
    out['write'] = 'written'
except OSError as e:
    out['write'] = type(e).__name__
try:
    os.symlink('/etc/passwd', '/run/mcpsd/channel')
    out['symlink'] = 'made'
except OSError as e:
    out['symlink'] = type(e).__name__
socks = []
for top in ['/run', '/tmp', '/data', '/opt', '/sandbox', '/var', '/dev', '/home', '/root', '/mnt', '/srv']:
    for dp, dn, fn in os.walk(top):
        for n in fn + dn:
            p = os.path.join(dp, n)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    socks.append(p)
            except OSError:
                pass
out['sockets'] = socks
# Every unix socket this network namespace knows, path or abstract name.
names = []
with open('/proc/net/unix') as f:
    for line in f.readlines()[1:]:
        parts = line.split()
        if len(parts) >= 8:
            names.append(parts[7])
out['unix_names'] = names
out['connect_names'] = {n: try_connect('\0' + n[1:] if n.startswith('@') else n) for n in names}
try:
    os.listdir('/proc/1/fd')
    out['agent_fds'] = 'listed'
except OSError as e:
    out['agent_fds'] = type(e).__name__
print(json.dumps(out))`;

/** The mount of d's box whose destination is /run/mcpsd, or undefined. */
async function channelMount(id) {
  const c = (await dockerApi('GET', `/containers/${id}/json`)).json;
  return c.Mounts.find((m) => m.Destination === '/run/mcpsd');
}

describe('the warm channel socket', () => {
  let d;

  before(async () => {
    d = await startWarm({
      name: 'warm-channel',
      pool: true,
      env: { SANDBOX_WARM_CHANNEL: 'socket', SANDBOX_POOL_LANGUAGES: 'python,bash', SANDBOX_POOL_PRELOAD: 'json' },
    });
    await waitPool(d, 2);
  });
  after(() => stopWarm(d));

  test('code cannot reach its channel, nor another box\'s, nor make the daemon follow a path', { timeout: T }, async () => {
    const c1 = conv('chan-a');
    const c2 = conv('chan-b');
    // Two boxes at once: each looks for the other's channel too.
    const other = await run(d.client, c2, 'bash', 'echo other');
    expectStatus(other, 'completed');
    const r = await py(d.client, c1, ATTACK);
    expectStatus(r, 'completed');
    const o = JSON.parse(r.sc.stdout);
    assert.deepEqual(o.run_mcpsd, [], `the socket is gone once the agent holds it: ${r.sc.stdout}`);
    assert.equal(o.connect_own, 'FileNotFoundError', r.sc.stdout);
    assert.ok(['OSError', 'PermissionError'].includes(o.write), `the mount is read-only: ${r.sc.stdout}`);
    assert.ok(['OSError', 'PermissionError'].includes(o.symlink), `nothing planted for the daemon: ${r.sc.stdout}`);
    assert.deepEqual(o.sockets, [], `no socket file anywhere the code can see: ${r.sc.stdout}`);
    for (const [n, how] of Object.entries(o.connect_names))
      assert.notEqual(how, 'connected', `code connected to ${n}: ${r.sc.stdout}`);
    assert.equal(o.agent_fds, 'PermissionError', `the agent's descriptors stay closed: ${r.sc.stdout}`);

    // The host side: both boxes got a socket channel (read-only mount of
    // their own directory), now empty, below a root-only directory.
    const chan = path.join(d.root, 'chan');
    assert.equal(statSync(chan).mode & 0o777, 0o700, 'SANDBOX_ROOT/chan is root-only');
    const boxes = await boxesOf(d);
    const sources = new Set();
    for (const b of boxes) {
      const m = await channelMount(b.Id);
      assert.ok(m, `box ${b.Id.slice(0, 12)} has a channel mount`);
      assert.equal(m.RW, false, 'mounted read-only');
      assert.equal(path.dirname(m.Source), chan);
      sources.add(m.Source);
    }
    assert.equal(sources.size, boxes.length, 'one directory per box');
    for (const s of sources) {
      const name = path.basename(s);
      // A pool box still starting may hold its listener a moment longer.
      if (readdirSync(s).length) assert.ok(boxes.some((b) => b.Labels['sandbox.kind'] === 'pool' && b.Names[0] === `/${name}`));
    }
  });

  test('the pool hand-over and a claimed box work over the socket', { timeout: T }, async () => {
    const c = conv('chan-pool');
    await waitPool(d, 2);
    const r1 = await py(d.client, c, "open('/data/f.txt', 'w').write('here'); x = 7; print('ok')");
    expectStatus(r1, 'completed');
    assert.equal(r1.sc.session.from_pool, true, JSON.stringify(r1.sc.session));
    const r2 = await py(d.client, c, "print(open('/data/f.txt').read(), x)");
    expectStatus(r2, 'completed');
    expectSession(r2, 'continued');
    assert.equal(r2.sc.stdout, 'here 7\n', describeRun(r2));
  });
});

describe('SANDBOX_WARM_CHANNEL=attach: the attach stream', () => {
  let d;

  before(async () => {
    d = await startWarm({ name: 'warm-attach', env: { SANDBOX_WARM_CHANNEL: 'attach' } });
  });
  after(() => stopWarm(d));

  test('warm state is kept over the attach stream; no channel mount', { timeout: T }, async () => {
    const c = conv('attach');
    expectStatus(await py(d.client, c, 'x = 5'), 'completed');
    const r = await py(d.client, c, 'print(x * 2)');
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, '10\n');
    const [b] = await boxesOf(d);
    assert.equal(await channelMount(b.Id), undefined);
  });
});

describe('the daemon in a PID namespace of its own (as in a container)', () => {
  let d;

  before(async () => {
    d = await startWarm({
      name: 'warm-channel-pidns',
      bin: path.join(path.dirname(new URL(import.meta.url).pathname), 'lib', 'pidns.sh'),
      env: { MCPSD_REAL_BIN: path.resolve(BIN), SANDBOX_WARM_CHANNEL: 'socket' },
    });
    // unshare does not pass signals on: stopWarm's SIGTERM goes to the
    // daemon, its child, and unshare exits with the daemon's status.
    const unshare = d.proc.pid;
    d.proc.kill = (sig) => {
      const kids = readFileSync(`/proc/${unshare}/task/${unshare}/children`, 'utf8').trim().split(/\s+/);
      for (const k of kids.filter(Boolean)) process.kill(Number(k), sig);
      return true;
    };
  });
  after(() => stopWarm(d));

  test("the agent's pid is not visible: the channel is taken on the uid and the ordering, and works", { timeout: T }, async () => {
    const c = conv('pidns');
    expectStatus(await py(d.client, c, 'x = 41'), 'completed');
    const r = await py(d.client, c, "import os\nx += 1\nprint(x, os.listdir('/run/mcpsd'))");
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, '42 []\n');
    const [b] = await boxesOf(d);
    assert.ok(await channelMount(b.Id), 'over the channel socket');
  });
});

describe('SANDBOX_WARM_CHANNEL=auto, the default: the socket on a local engine', () => {
  let d;

  before(async () => {
    d = await startWarm({ name: 'warm-auto', env: { SANDBOX_WARM_CHANNEL: 'auto' } });
  });
  after(() => stopWarm(d));

  test("the engine's /info decides once, and the box's agent connects over its socket", { timeout: T }, async () => {
    const c = conv('auto');
    expectStatus(await py(d.client, c, 'x = 1'), 'completed');
    const r = await py(d.client, c, "import os\nprint(x + 1, os.listdir('/run/mcpsd'))");
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, "2 []\n");
    const [b] = await boxesOf(d);
    assert.ok(await channelMount(b.Id), 'over the channel socket');
    const text = await d.waitLog(/SANDBOX_WARM_CHANNEL=auto: a local engine without user id remapping/);
    assert.equal(text.match(/SANDBOX_WARM_CHANNEL=auto:/g).length, 1, 'decided once');
  });
});

test('SANDBOX_WARM_CHANNEL takes auto, socket or attach: another value stops the start with why', () => {
  const p = spawnSync(BIN, ['--env-file', '/dev/null'], {
    env: { PATH: process.env.PATH, MCP_AUTH: 'none', SANDBOX_WARM_CHANNEL: 'pipe', MCP_HTTP_ADDR: '127.0.0.1:1' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.notEqual(p.status, 0);
  assert.match(p.stderr + p.stdout, /SANDBOX_WARM_CHANNEL must be 'auto' \(the default\), 'socket' or 'attach', not 'pipe'/);
});
