// SPDX-License-Identifier: MIT
// Hostile code through the real MCP endpoint (run_code with the official SDK
// client) against the real Docker engine and runner images: resource bombs,
// floods, disk fills, network egress, privilege probes, host files and
// secrets, killing other processes, and link/FIFO/socket/name tricks in
// /data. Every probe asserts its expected outcome; every loop inside the
// sandbox is bounded in count and time. The test listens on loopback only;
// the addresses a sandbox tries (the bridge gateway, the metadata address)
// must be unreachable from it.
//
// Findings kept as failing tests (see each test): a sandbox can lower the
// OOM score the daemon gives it; one run can exhaust per-user kernel limits
// (inotify instances) for every other run, since all share SANDBOX_UID.
//
// The tests share one daemon and run one after the other: several of them
// look at the engine's containers of this daemon's instance and must be the
// only run in flight when they do.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync, readdirSync, readFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './lib/daemon.mjs';
import { umountBelow } from './lib/faults.mjs';
import {
  callTool,
  containersOf,
  describeRun,
  dockerApi,
  rawToolCall,
  removeContainersOf,
  rssKb,
  runCode,
  startSandboxDaemon,
  waitNoContainers,
} from './lib/sandbox.mjs';

const MiB = 1024 * 1024;
const QUOTA_MB = 20;
const MAX_FILES = 2000;
const OUTPUT_MAX = 16 * MiB;
const INLINE = 32 * 1024;

let d;

before(async () => {
  d = await startSandboxDaemon({
    name: 'sandbox',
    keepRoot: true,
    env: {
      WORKSPACE_QUOTA_MB: String(QUOTA_MB),
      WORKSPACE_MAX_FILES: String(MAX_FILES),
      SANDBOX_OUTPUT_MAX_BYTES: '16m',
      SANDBOX_OUTPUT_INLINE_BYTES: '32k',
    },
  });
});

after(async () => {
  if (!d) return;
  await d.client?.close().catch(() => {});
  const died = d.exited;
  let left = [];
  let stopped;
  try {
    if (!died) stopped = await d.stop('SIGTERM');
    left = await waitNoContainers(d.instance, { timeoutMs: 5000 });
  } finally {
    // A daemon that died leaves its workspace images mounted.
    umountBelow(d.root);
    rmSync(d.root, { recursive: true, force: true, maxRetries: 3 });
    await removeContainersOf(d.instance).catch(() => {});
  }
  assert.equal(died, null, `the daemon died during the tests: ${JSON.stringify(died)}; log ${d.logPath}`);
  assert.deepEqual(stopped, { code: 0, sig: null }, 'a clean SIGTERM exit');
  assert.deepEqual(left.map((c) => c.Id.slice(0, 12)), [], 'no container of this daemon is left after it stopped');
});

const run = (args, opts) => runCode(d.client, args, opts);

/**
 * Waits until no one-off container of the daemon runs (removal is in the
 * background). Warm sessions (on by default) keep a box per conversation
 * and language between runs, and the pool keeps pre-started ones: those may
 * run, as many as /healthz accounts for, and no more.
 */
async function noneRunning(ms = 10_000) {
  const end = Date.now() + ms;
  const warmKinds = ['warm', 'pool'];
  let left, boxes, w;
  for (;;) {
    const running = await containersOf(d.instance, { all: false });
    left = running.filter((c) => !warmKinds.includes(c.Labels?.['sandbox.kind']));
    boxes = running.length - left.length;
    w = (await d.health()).warm ?? { sessions: 0, pool: 0, pool_starting: 0 };
    if ((left.length === 0 && boxes <= w.sessions + w.pool + w.pool_starting) || Date.now() > end) break;
    await sleep(250);
  }
  assert.deepEqual(left.map((c) => `${c.Id.slice(0, 12)} ${c.State} ${c.Status}`), [], 'no one-off container of this daemon still runs');
  assert.ok(boxes <= w.sessions + w.pool + w.pool_starting, `${boxes} warm boxes run, the daemon accounts for ${JSON.stringify(w)}`);
}

/** Whether a run used a warm session (Python: a kernel, else a process). */
const warmRun = (r) => r.sc?.session?.state !== undefined && r.sc.session.state !== 'none';

async function healthyAndQuick() {
  const t0 = Date.now();
  const h = await d.health();
  const ms = Date.now() - t0;
  assert.equal(h.status, 'ok', JSON.stringify(h));
  assert.ok(ms < 2000, `/healthz answered in ${ms} ms`);
  return h;
}

// ---------------------------------------------------------------------------
describe('resource bombs', () => {
  test('bash fork bomb: the pids limit holds inside, the host and the daemon are unaffected', async () => {
    const code = [
      'read -r lim < /sys/fs/cgroup/pids/pids.max',
      ':(){ :|:& };: 2>/dev/null',
      // Builtins only from here: no fork is possible any more.
      // Until a fork was refused (3 s at least, 10 s at most: a loaded
      // machine grows the bomb slowly).
      'end=$((SECONDS+10)); min=$((SECONDS+3)); max=0; ev="max 0"',
      'while ((SECONDS<end)); do read -r cur < /sys/fs/cgroup/pids/pids.current; ((cur>max)) && max=$cur; read -r ev < /sys/fs/cgroup/pids/pids.events; [[ $ev != "max 0" ]] && ((SECONDS>=min)) && break; done',
      'echo "limit=$lim max=$max events=$ev"',
      'exit 0',
    ].join('\n');
    const p = run({ conversationId: 'bombs', language: 'bash', code, timeout_seconds: 20 });
    await sleep(1500);
    const fork = spawnSync('true');
    assert.equal(fork.status, 0, 'the host can still fork during the bomb');
    await healthyAndQuick();
    const r = await p;
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /limit=(\d+) max=(\d+) events=max (\d+)/.exec(r.sc.stdout);
    assert.ok(m, describeRun(r));
    assert.equal(Number(m[1]), 128, 'pids.max is SANDBOX_PIDS_LIMIT');
    assert.ok(Number(m[2]) <= 128, `never more than 128 tasks (${m[2]})`);
    assert.ok(Number(m[3]) > 0, 'forks were refused at the limit');
    assert.ok(r.ms < 20_000, `returned in ${r.ms} ms`);
    await noneRunning();
  });

  test('python fork bomb: fork fails with EAGAIN before 128 processes', async () => {
    const code = String.raw`import os, time
n = 0
try:
    while n < 100000:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
        n += 1
except OSError as e:
    print('fork failed after', n, e.errno)
`;
    const r = await run({ conversationId: 'bombs', language: 'python', code, timeout_seconds: 15 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /fork failed after (\d+) 11/.exec(r.sc.stdout);
    assert.ok(m && Number(m[1]) < 128, describeRun(r));
    // A run that waited for its children would take their 20 s. In a warm
    // session the forks copy a live interpreter, slower on a loaded machine.
    assert.ok(r.ms < (warmRun(r) ? 19_000 : 10_000), `the sleeping children did not hold the run open (${r.ms} ms)`);
    await noneRunning();
  });

  test('thread bomb: thread creation fails before 128 threads', async () => {
    const code = String.raw`import threading, time
n = 0
try:
    while n < 100000:
        threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
        n += 1
except RuntimeError as e:
    print('thread failed after', n)
`;
    const r = await run({ conversationId: 'bombs', language: 'python', code, timeout_seconds: 15 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /thread failed after (\d+)/.exec(r.sc.stdout);
    assert.ok(m && Number(m[1]) < 128, describeRun(r));
  });

  test('memory bomb: oom_killed', async () => {
    const code = "a = []\nwhile len(a) < 1000:\n    a.append(bytearray(16 << 20))\nprint('allocated', len(a))";
    const r = await run({ conversationId: 'bombs', language: 'python', code, timeout_seconds: 20 });
    assert.equal(r.sc.status, 'oom_killed', describeRun(r));
    assert.equal(r.sc.oom_killed, true);
    assert.doesNotMatch(r.sc.stdout, /allocated/);
    assert.ok(r.ms < 15_000, `returned in ${r.ms} ms`);
  });

  test('a child OOM-killed while the parent exits 0: oom_killed, exit code 0', async () => {
    const code = "import subprocess\np = subprocess.run(['python3', '-c', 'a = bytearray(1 << 30)'])\nprint('child exit', p.returncode)\n";
    const r = await run({ conversationId: 'bombs', language: 'python', code, timeout_seconds: 20 });
    assert.equal(r.sc.status, 'oom_killed', describeRun(r));
    assert.equal(r.sc.exit_code, 0);
    assert.equal(r.sc.oom_killed, true);
    assert.equal(r.sc.stdout, 'child exit -9\n');
    assert.match(r.sc.message, /child process/);
  });

  for (const [lang, code] of [
    ['bash', "trap '' TERM INT HUP\nfor ((i = 0; i < 2000000000; i++)); do :; done"],
    ['python', 'import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\nfor _ in range(10 ** 11):\n    pass'],
  ]) {
    test(`${lang} CPU spin ignoring SIGTERM: timed_out on time`, async () => {
      const r = await run({ conversationId: 'bombs', language: lang, code, timeout_seconds: 2 });
      assert.equal(r.sc.status, 'timed_out', describeRun(r));
      assert.equal(r.sc.timed_out, true);
      assert.equal(r.sc.exit_code, null);
      // A warm session interrupts first (ignored here) and kills after
      // SANDBOX_INTERRUPT_GRACE_MS (2 s); a one-off box is killed at once.
      const grace = warmRun(r) ? 2000 : 0;
      assert.ok(r.sc.duration_ms >= 2000 && r.sc.duration_ms < 4000 + grace, `stopped after ${r.sc.duration_ms} ms`);
      assert.ok(r.ms < 8000 + grace, `answered after ${r.ms} ms`);
      if (lang === 'python' && warmRun(r)) {
        assert.equal(r.sc.session.lost, true, 'the interpreter that ignored the interrupt was killed');
        assert.equal(r.sc.session.lost_reason, 'timeout_kill');
      }
      await noneRunning();
    });
  }
});

// ---------------------------------------------------------------------------
describe('daemonizing code', () => {
  // Each escaped process appends to /data/hb-<name> five times a second; a
  // later run in the same conversation (same /data) sees whether any file
  // still grows after the run ended and its container is gone.
  const beat = (name) => `for i in $(seq 1 600); do echo x >> /data/hb-${name}; sleep 0.2; done`;
  const cases = {
    bash: [
      `setsid bash -c '(trap "" HUP TERM; ${beat('setsid')}) & disown' </dev/null >/dev/null 2>&1 &`,
      `nohup bash -c '${beat('nohup')}' >/dev/null 2>&1 &`,
      `nohup bash -c '${beat('nohup_out')}' &`,
      `(trap '' HUP TERM; exec -a kworker bash -c '${beat('disguised')}') & disown`,
      'sleep 0.6',
      'n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "processes=$n"',
      'echo started',
    ].join('\n'),
    python: String.raw`import os, subprocess, time
def beat(name):
    for _ in range(600):
        with open('/data/hb-' + name, 'a') as f:
            f.write('x\n')
        time.sleep(0.2)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 3)
        beat('double_fork')
    os._exit(0)
subprocess.Popen(['nohup', 'bash', '-c', 'for i in $(seq 1 600); do echo x >> /data/hb-popen; sleep 0.2; done'],
                 start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.6)
print('processes=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]))
print('started')
`,
  };
  for (const [lang, code] of Object.entries(cases)) {
    test(`${lang}: setsid, double fork and nohup do not outlive the run`, async () => {
      const conv = 'daemon';
      const r = await run({ conversationId: conv, language: lang, code, timeout_seconds: 20 });
      assert.equal(r.sc.status, 'completed', describeRun(r));
      assert.match(r.sc.stdout, /started/);
      const procs = Number(/processes=(\d+)/.exec(r.sc.stdout)?.[1]);
      assert.ok(procs >= 4, `the escapes were running (${procs} processes)`);
      assert.ok(r.ms < 10_000, `the run did not wait for its daemons (${r.ms} ms)`);
      await noneRunning();
      // Their heartbeat files must have stopped growing.
      const probe = String.raw`import glob, os, time
def sizes():
    return {f: os.path.getsize(f) for f in sorted(glob.glob('/data/hb-*'))}
a = sizes(); time.sleep(1.5); b = sizes()
print(len(a), 'files', 'GROWING' if a != b else 'still', a, b)
`;
      const p = await run({ conversationId: conv, language: 'python', code: probe, timeout_seconds: 20 });
      assert.equal(p.sc.status, 'completed', describeRun(p));
      assert.match(p.sc.stdout, /^\d+ files still /, describeRun(p));
      assert.ok(Number(/^(\d+) files/.exec(p.sc.stdout)[1]) >= 2, 'the heartbeat files exist');
      await noneRunning();
    });
  }
});

// ---------------------------------------------------------------------------
describe('output floods', () => {
  const floods = [
    ['stdout with newlines', 'bash', "head -c 100000000 /dev/zero | tr '\\0' a | fold -w 100"],
    ['stdout without newlines', 'python', "import sys\nb = b'x' * (1 << 20)\nfor i in range(100):\n    sys.stdout.buffer.write(b)\n"],
    ['stderr with newlines', 'python', "import sys\nb = (b'e' * 99 + b'\\n') * 10486\nfor i in range(100):\n    sys.stderr.buffer.write(b)\n"],
    ['stderr without newlines', 'bash', "head -c 100000000 /dev/zero | tr '\\0' z >&2"],
    ['both streams at once', 'bash', "head -c 60000000 /dev/zero | tr '\\0' o &\nhead -c 60000000 /dev/zero | tr '\\0' e >&2\nwait"],
    ['stdout with newlines, again', 'bash', "yes 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy' | head -c 100000000"],
    ['stdout without newlines, again', 'bash', "head -c 100000000 /dev/zero | tr '\\0' q"],
  ];
  let rss0;
  const rss = [];
  before(() => {
    rss0 = rssKb(d.proc.pid);
  });
  floods.forEach(([name, lang, code], i) => {
    test(`~100 MB flood, ${name}: output_limit, inline text bounded`, async () => {
      const r = await run({ conversationId: 'flood', language: lang, code, timeout_seconds: 60 });
      assert.equal(r.sc.status, 'output_limit', describeRun(r));
      const total = r.sc.stdout_bytes + r.sc.stderr_bytes;
      assert.ok(total >= OUTPUT_MAX - 2 * MiB && total <= OUTPUT_MAX + 64 * 1024, `stopped at the cap (${total} bytes)`);
      assert.ok(r.sc.stdout.length <= INLINE + 256 && r.sc.stderr.length <= INLINE + 256, `inline stdout ${r.sc.stdout.length}, stderr ${r.sc.stderr.length}`);
      assert.ok(r.text.length < 2 * INLINE + 8192, `text content ${r.text.length} chars`);
      assert.ok(r.sc.stdout_truncated || r.sc.stderr_truncated);
      assert.ok(r.ms < 30_000, `stopped in ${r.ms} ms`);
      rss.push(rssKb(d.proc.pid));
      await noneRunning();
    });
  });
  test('binary output, invalid UTF-8, NULs and escapes come back as valid JSON and text', async () => {
    const code = "import os, sys\nsys.stdout.buffer.write(os.urandom(60000) + b'\\xed\\xa0\\x80\\x00\\x1b]0;title\\x07\\xc3')\nsys.stderr.buffer.write(b'\\xff\\xfe' * 40000)\n";
    const { msg, raw } = await rawToolCall(d, 'run_code', { conversationId: 'flood', language: 'python', code });
    const sc = msg.result.structuredContent;
    assert.equal(sc.status, 'completed', raw.slice(0, 300));
    assert.equal(sc.stdout_bytes, 60000 + 15);
    assert.equal(sc.stderr_bytes, 80000);
    for (const t of [sc.stdout, sc.stderr, msg.result.content[0].text]) {
      assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(t), 'no lone surrogate');
      assert.ok(Buffer.from(t, 'utf8').toString('utf8') === t);
      assert.ok(t.length <= INLINE + 256 || t === msg.result.content[0].text);
    }
  });

  test('multi-byte characters cut at the inline head and tail stay valid UTF-8 on the wire', async () => {
    // 4-byte and 3-byte characters, odd offsets, more than the inline cap.
    const code = String.raw`import sys
sys.stdout.write('x' + '\U0001F600\u4e2d' * 20011 + 'y')
sys.stderr.write('\u00e9' * 50001)
`;
    const { msg } = await rawToolCall(d, 'run_code', { conversationId: 'flood', language: 'python', code });
    const sc = msg.result.structuredContent;
    assert.equal(sc.status, 'completed');
    assert.equal(sc.stdout_truncated, true);
    assert.equal(sc.stderr_truncated, true);
    assert.ok(sc.stdout.startsWith('x\u{1F600}') && sc.stdout.endsWith('\u4e2dy'), 'head and tail are whole characters');
    assert.doesNotMatch(sc.stdout + sc.stderr, /\uFFFD/, 'no character was cut in half');
  });

  test('a megabyte of stdin that the program never reads does not block the run', async () => {
    const r = await run({ conversationId: 'flood', language: 'bash', code: 'sleep 1; echo done', stdin: 'x'.repeat(1000 * 1000), timeout_seconds: 10 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.equal(r.sc.stdout, 'done\n');
    assert.ok(r.ms < 6000, `${r.ms} ms`);
  });

  test('closing stdout and stderr then hanging: timed_out on time, output before kept', async () => {
    const r = await run({ conversationId: 'flood', language: 'bash', code: 'echo before; exec >&- 2>&- <&-; sleep 30', timeout_seconds: 2 });
    assert.equal(r.sc.status, 'timed_out', describeRun(r));
    assert.equal(r.sc.stdout, 'before\n');
    assert.ok(r.sc.duration_ms < 4000 && r.ms < 8000, `${r.sc.duration_ms} / ${r.ms} ms`);
  });

  test('daemon RSS stays bounded across the floods', () => {
    const peak = Math.max(...rss);
    assert.ok(peak - rss0 < 64 * 1024, `RSS ${rss0} kB before, ${rss.join(', ')} kB after each flood`);
    // No growth per flood: the last floods end where the first ones did.
    const early = Math.max(...rss.slice(0, 3));
    const late = Math.max(...rss.slice(-2));
    assert.ok(late - early < 8 * 1024, `RSS ${early} kB after the first floods, ${late} kB after the last`);
  });
});

// ---------------------------------------------------------------------------
describe('disk and inode fill', () => {
  test('/data: bytes stop at the quota with ENOSPC; the daemon is fine', async () => {
    const code = String.raw`import os, errno
n = 0
b = b'\0' * (1 << 20)
try:
    with open('/data/big.bin', 'wb') as f:
        for i in range(200):
            f.write(b); f.flush(); os.fsync(f.fileno()); n += 1
    print('wrote all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;
    const r = await run({ conversationId: 'fill-data', language: 'python', code, timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /stopped (\d+) (ENOSPC|EDQUOT)/.exec(r.sc.stdout);
    assert.ok(m, describeRun(r));
    assert.ok(Number(m[1]) <= QUOTA_MB, `${m[1]} MB written`);
    assert.ok(r.sc.workspace.bytesUsed <= r.sc.workspace.bytesQuota + MiB, JSON.stringify(r.sc.workspace));
    // The next call on the same conversation is answered clearly, and the
    // workspace can be freed with delete_file.
    const again = await run({ conversationId: 'fill-data', language: 'bash', code: 'echo next' });
    assert.ok(again.sc ? ['completed'].includes(again.sc.status) : /quota|delete/i.test(again.text), describeRun(again));
    const del = await callTool(d.client, 'delete_file', { conversationId: 'fill-data', filename: 'big.bin' });
    assert.notEqual(del.result.isError, true, del.text);
    const other = await run({ conversationId: 'misc', language: 'bash', code: 'echo fine' });
    assert.equal(other.sc.stdout, 'fine\n');
    await healthyAndQuick();
  });

  test('/data: inodes stop at WORKSPACE_MAX_FILES with ENOSPC', async () => {
    const code = String.raw`import os, errno
os.makedirs('/data/many', exist_ok=True)
n = 0
try:
    while n < 100000:
        open('/data/many/%d' % n, 'w').close(); n += 1
    print('created all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;
    const r = await run({ conversationId: 'fill-inodes', language: 'python', code, timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /stopped (\d+) (ENOSPC|EDQUOT)/.exec(r.sc.stdout);
    assert.ok(m, describeRun(r));
    assert.ok(Number(m[1]) <= MAX_FILES, `${m[1]} files created`);
    assert.ok(r.sc.files_truncated === true || r.sc.files.length <= 100, 'the manifest is bounded');
    const l = await callTool(d.client, 'list_files', { conversationId: 'fill-inodes', limit: 10 });
    assert.equal(l.sc.truncated, true);
    assert.equal(l.sc.files.length, 10);
    const del = await callTool(d.client, 'delete_file', { conversationId: 'fill-inodes', filename: 'many', recursive: true });
    assert.notEqual(del.result.isError, true, del.text);
  });

  test('/tmp: bytes stop at the tmpfs size (64 MB) with ENOSPC', async () => {
    const code = String.raw`import errno
n = 0
b = b'\1' * (1 << 20)
try:
    with open('/tmp/big.bin', 'wb') as f:
        for i in range(200):
            f.write(b); f.flush(); n += 1
    print('wrote all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;
    // Conversations of their own: a warm session's /tmp and /dev/shm live
    // as long as the session and count against its memory.
    const r = await run({ conversationId: 'fill-tmp', language: 'python', code, timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const m = /stopped (\d+) ENOSPC/.exec(r.sc.stdout);
    assert.ok(m && Number(m[1]) <= 64, describeRun(r));
  });

  test('/dev/shm: bytes stop at its size with ENOSPC', async () => {
    const code = String.raw`import errno
n = 0
b = b'' * (1 << 20)
try:
    with open('/dev/shm/big.bin', 'wb') as f:
        for i in range(300):
            f.write(b); f.flush(); n += 1
    print('wrote all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;
    const r = await run({ conversationId: 'fill-shm', language: 'python', code, timeout_seconds: 30 });
    assert.ok(r.sc.status === 'oom_killed' || /stopped (\d+) ENOSPC/.test(r.sc.stdout), describeRun(r));
    const m = /stopped (\d+)/.exec(r.sc.stdout);
    if (m) assert.ok(Number(m[1]) <= 64, `${m[1]} MB in /dev/shm`);
  });

  test('/tmp: an inode flood ends in ENOSPC or the memory limit, not in the host', async () => {
    const code = String.raw`import errno, os
n = 0
try:
    while n < 3000000:
        os.close(os.open('/tmp/f%d' % n, os.O_CREAT | os.O_WRONLY, 0o600)); n += 1
    print('created all', n)
except OSError as e:
    print('stopped', n, errno.errorcode[e.errno])
`;
    const r = await run({ conversationId: 'fill-tmp-inodes', language: 'python', code, timeout_seconds: 120 });
    assert.ok(
      (r.sc.status === 'completed' && /stopped \d+ ENOSPC/.test(r.sc.stdout)) || r.sc.status === 'oom_killed',
      describeRun(r),
    );
    await healthyAndQuick();
  });

  test('read-only root: writes fail with EROFS (or EACCES)', async () => {
    const code = String.raw`import errno, os
for p in ['/x', '/etc/x', '/usr/x', '/usr/local/bin/x', '/var/x', '/var/tmp/x', '/opt/x', '/home/x', '/srv/x', '/run/x', '/sandbox/x', '/sys/x', '/etc/passwd', '/root/x', '/dev/x']:
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, b'x'); os.close(fd)
        print('WROTE', p)
    except OSError as e:
        print(p, errno.errorcode[e.errno])
`;
    const r = await run({ conversationId: 'misc', language: 'python', code });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.doesNotMatch(r.sc.stdout, /WROTE/);
    const res = Object.fromEntries(r.sc.stdout.trim().split('\n').map((l) => l.split(' ')));
    for (const p of ['/x', '/etc/x', '/usr/x', '/usr/local/bin/x', '/var/x', '/var/tmp/x', '/opt/x', '/home/x', '/srv/x', '/run/x', '/sandbox/x', '/sys/x'])
      assert.equal(res[p], 'EROFS', `${p}: ${res[p]}`);
    // Existing files and root's directories: the permission check comes first.
    for (const p of ['/etc/passwd', '/root/x', '/dev/x']) assert.match(res[p], /^(EROFS|EACCES)$/, `${p}: ${res[p]}`);
  });
});

// ---------------------------------------------------------------------------
describe('network egress', () => {
  let servers = [];
  let hits = 0;
  const listeners = [];
  before(async () => {
    // A listener on the host's loopback (loopback only): any connection
    // from a sandbox that reaches it is counted.
    for (const host of ['127.0.0.1']) {
      const s = net.createServer((c) => {
        hits++;
        c.destroy();
      });
      await new Promise((res, rej) => {
        s.once('error', rej);
        s.listen(0, host, res);
      });
      servers.push(s);
      listeners.push([host, s.address().port]);
    }
  });
  after(() => {
    for (const s of servers) s.close();
    servers = [];
  });

  test('DNS, the host gateway, the metadata address, the host loopback and the Docker socket are all out of reach', async () => {
    const daemonPort = Number(new URL(d.base).port);
    const gateways = Object.entries(os.networkInterfaces())
      .filter(([n]) => n === 'docker0')
      .flatMap(([, l]) => l.filter((a) => a.family === 'IPv4').map((a) => a.address));
    const targets = [
      ...listeners,
      ...gateways.flatMap((g) => [[g, listeners[0][1]], [g, 22], [g, 2375]]),
      ['127.0.0.1', daemonPort],
      ['172.17.0.1', 2375],
      ['172.17.0.1', 2376],
      ['169.254.169.254', 80],
      ['1.1.1.1', 443],
      ['::1', daemonPort],
    ];
    const code = String.raw`import errno, json, os, socket, sys
targets = json.loads(sys.stdin.read())
def tcp(host, port):
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
    s.settimeout(2)
    try:
        s.connect((host, port))
        return 'CONNECTED'
    except socket.timeout:
        return 'TIMEOUT'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
out = {}
try:
    out['dns'] = 'RESOLVED %s' % socket.getaddrinfo('example.com', 80)[0][4][0]
except OSError as e:
    out['dns'] = 'failed'
try:
    socket.gethostbyname('host.docker.internal'); out['docker_internal'] = 'RESOLVED'
except OSError:
    out['docker_internal'] = 'failed'
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')] or ['8.8.8.8']
    u.sendto(b'\0', (ns[0], 53)); out['udp_dns'] = 'SENT'
except OSError as e:
    out['udp_dns'] = errno.errorcode.get(e.errno, str(e))
out['tcp'] = {'%s:%d' % (h, p): tcp(h, p) for h, p in targets}
out['ifaces'] = sorted(os.listdir('/sys/class/net'))
out['unix'] = [l.split()[-1] for l in open('/proc/net/unix').read().splitlines()[1:] if len(l.split()) > 7]
out['sockets'] = {p: os.path.exists(p) for p in ['/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock', '/var/run/docker', '/run/docker']}
def try_unix(p):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); return 'CONNECTED'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
out['unix_connect'] = {p: try_unix(p) for p in ['/var/run/docker.sock', '\0/containerd-shim', '\0docker'] + out['unix']}
# With SANDBOX_WARM_CHANNEL=socket: the channel's directory, empty once the
# agent's one connection was taken (the daemon unlinks its listener).
out['channel_dir'] = sorted(os.listdir('/run/mcpsd')) if os.path.isdir('/run/mcpsd') else None
print(json.dumps(out))
`;
    const r = await run({ conversationId: 'misc', language: 'python', code, stdin: JSON.stringify(targets), timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const out = JSON.parse(r.sc.stdout);
    assert.equal(out.dns, 'failed');
    assert.equal(out.docker_internal, 'failed');
    assert.match(out.udp_dns, /^(ENETUNREACH|EHOSTUNREACH|EPERM)$/);
    for (const [t, v] of Object.entries(out.tcp)) {
      if (t === `127.0.0.1:${daemonPort}`) assert.equal(v, 'ECONNREFUSED', `${t}: the container's own loopback, not the host's`);
      else if (t.startsWith('127.0.0.1:')) assert.equal(v, 'ECONNREFUSED', t);
      else assert.match(v, /^(ENETUNREACH|EHOSTUNREACH|EADDRNOTAVAIL|TIMEOUT)$/, `${t}: ${v}`);
    }
    assert.deepEqual(out.ifaces, ['lo'], 'no interface but loopback');
    // Over the socket channel (a warm box's agent connected out to the
    // daemon, docker_channel.h), the box's network namespace holds the far
    // end of that one connection, named as the daemon bound its listener
    // (/proc/self/fd/N/channel, through its directory's descriptor): no
    // path in the box, nothing to connect to (checked below). Any other
    // socket is a leak.
    if (out.channel_dir === null) assert.deepEqual(out.unix, [], 'no unix socket of the host is visible');
    else {
      assert.deepEqual(out.channel_dir, [], 'the channel directory is empty once the agent connected');
      assert.ok(out.unix.length <= 1 && out.unix.every((u) => /^\/proc\/self\/fd\/\d+\/channel$/.test(u)), `only the channel's own far end: ${JSON.stringify(out.unix)}`);
    }
    assert.deepEqual(Object.values(out.sockets), [false, false, false, false, false], JSON.stringify(out.sockets));
    for (const [p, v] of Object.entries(out.unix_connect)) assert.notEqual(v, 'CONNECTED', p);
    assert.equal(hits, 0, 'no connection reached a listener on the host');
  });

  test('bash: /dev/tcp to the gateway and getent fail', async () => {
    const code = [
      'if getent hosts example.com >/dev/null; then echo DNS-OK; else echo dns-failed; fi',
      ...[...listeners, ['172.17.0.1', 22]].map(([h, p]) => `if timeout 3 bash -c 'exec 3<>/dev/tcp/${h}/${p}' 2>/dev/null; then echo CONNECTED ${h}; else echo refused ${h}; fi`),
      "if timeout 3 bash -c 'exec 3<>/dev/tcp/169.254.169.254/80' 2>/dev/null; then echo CONNECTED metadata; else echo refused metadata; fi",
    ].join('\n');
    const r = await run({ conversationId: 'misc', language: 'bash', code, timeout_seconds: 20 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.match(r.sc.stdout, /dns-failed/);
    assert.doesNotMatch(r.sc.stdout, /CONNECTED|DNS-OK/);
    assert.equal(hits, 0);
  });

  test('asking for network is refused when the operator does not allow it', async () => {
    const r = await run({ conversationId: 'misc', language: 'bash', code: 'echo hi', network: true });
    assert.equal(r.result.isError, true);
    assert.match(r.text, /network/i);
  });
});

// ---------------------------------------------------------------------------
describe('privileges', () => {
  test('runs as 64321:64321 with no capabilities, no_new_privs and seccomp', async () => {
    const code = 'id\ngrep -E "^(Uid|Gid|Groups|Cap[A-Za-z]+|NoNewPrivs|Seccomp):" /proc/self/status';
    const r = await run({ conversationId: 'misc', language: 'bash', code });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const out = r.sc.stdout;
    assert.match(out, /^uid=64321\(sandbox\) gid=64321\(sandbox\) groups=64321\(sandbox\)$/m);
    assert.match(out, /^Uid:\s+64321\s+64321\s+64321\s+64321$/m);
    assert.match(out, /^Gid:\s+64321\s+64321\s+64321\s+64321$/m);
    for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'])
      assert.match(out, new RegExp(`^${cap}:\\s+0000000000000000$`, 'm'), `${cap} is all zero`);
    assert.match(out, /^NoNewPrivs:\s+1$/m);
    assert.match(out, /^Seccomp:\s+2$/m);
  });

  test('no setuid or setgid binary, and su cannot raise privileges', async () => {
    const code = [
      'find / -xdev \\( -perm -4000 -o -perm -2000 \\) -type f 2>/dev/null | sed "s/^/SETID /"',
      'for b in su sudo mount umount newgrp passwd chsh gpasswd; do p=$(command -v $b) && ls -l "$p"; done',
      'if command -v su >/dev/null; then echo | su -c id root 2>&1 | head -1; fi',
      'echo "uid still $(id -u)"',
    ].join('\n');
    const r = await run({ conversationId: 'misc', language: 'bash', code, timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.doesNotMatch(r.sc.stdout, /^SETID /m, describeRun(r));
    assert.doesNotMatch(r.sc.stdout, /^-..s/m, 'no setuid bit on a known helper');
    assert.doesNotMatch(r.sc.stdout, /uid=0/);
    assert.match(r.sc.stdout, /uid still 64321/);
  });

  test('namespaces, io_uring, mount, ptrace, modules, keyrings, bpf and friends fail', async () => {
    const code = String.raw`import ctypes, errno, json, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def sc(name, nr, *a):
    r = libc.syscall(nr, *a)
    out[name] = 'OK %d' % r if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
buf = ctypes.create_string_buffer(256)
sc('io_uring_setup', 425, 8, buf)
sc('unshare(CLONE_NEWUSER)', 272, 0x10000000)
sc('unshare(CLONE_NEWNS)', 272, 0x00020000)
sc('unshare(CLONE_NEWNET)', 272, 0x40000000)
sc('unshare(CLONE_NEWPID)', 272, 0x20000000)
sc('clone(CLONE_NEWUSER)', 56, 0x10000000 | 17, 0, 0, 0, 0)
sc('ptrace(PTRACE_ATTACH, 1)', 101, 16, 1, 0, 0)
sc('ptrace(PTRACE_TRACEME)', 101, 0, 0, 0, 0)
sc('mount', 165, b'none', b'/tmp', b'tmpfs', 0, 0)
sc('umount2', 166, b'/data', 2)
sc('pivot_root', 155, b'/tmp', b'/tmp')
sc('init_module', 175, 0, 0, b'')
sc('finit_module', 313, 0, b'', 0)
sc('delete_module', 176, b'ext4', 0)
sc('keyctl', 250, 0, 0, 0, 0)
sc('add_key', 248, b'user', b'x', b'y', 1, -3)
sc('request_key', 249, b'user', b'x', 0, -3)
sc('bpf', 321, 0, 0, 0)
sc('perf_event_open', 298, 0, 0, -1, -1, 0)
sc('kexec_load', 246, 0, 0, 0, 0)
sc('userfaultfd', 323, 0)
sc('setuid(0)', 105, 0)
sc('setgid(0)', 106, 0)
sc('chroot', 161, b'/tmp')
sc('mknod(/tmp/null)', 133, b'/tmp/null', 0o20666, (1 << 8) | 3)
sc('reboot', 169, 0xfee1dead, 672274793, 0x4321fedc, 0)
sc('swapon', 167, b'/tmp/x', 0)
sc('acct', 163, b'/tmp/x')
sc('settimeofday', 164, 0, 0)
sc('sethostname', 170, b'x', 1)
sc('open_by_handle_at', 304, 3, 0, 0)
sc('fsopen', 430, b'tmpfs', 0)
sc('move_mount', 429, -1, b'', -1, b'/tmp', 0)
sc('setns', 308, 0, 0)
if hasattr(os, 'unshare'):
    try:
        os.unshare(os.CLONE_NEWUSER); out['os.unshare'] = 'OK'
    except OSError as e:
        out['os.unshare'] = errno.errorcode[e.errno]
for p in ['/proc/sys/kernel/hostname', '/proc/sys/vm/drop_caches', '/proc/sys/kernel/core_pattern', '/proc/sys/kernel/modprobe', '/proc/sysrq-trigger', '/sys/kernel/uevent_helper', '/proc/sys/net/ipv4/ip_forward']:
    try:
        fd = os.open(p, os.O_WRONLY)
        try:
            os.write(fd, b'1\n'); out[p] = 'WROTE'
        finally:
            os.close(fd)
    except OSError as e:
        out[p] = errno.errorcode[e.errno]
for cmd in (['unshare', '-U', 'true'], ['unshare', '-r', 'id'], ['unshare', '-m', 'true'], ['mount', '-t', 'tmpfs', 'none', '/tmp'], ['modprobe', 'dummy'], ['insmod', '/x.ko']):
    try:
        out[' '.join(cmd)] = subprocess.run(cmd, capture_output=True, timeout=10).returncode
    except FileNotFoundError:
        out[' '.join(cmd)] = 'absent'
print(json.dumps(out))
`;
    const r = await run({ conversationId: 'misc', language: 'python', code, timeout_seconds: 30 });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const out = JSON.parse(r.sc.stdout);
    const bad = [];
    for (const [k, v] of Object.entries(out)) {
      if (typeof v === 'number') {
        if (v === 0) bad.push(`${k} exit 0`);
      } else if (v === 'absent') {
        /* not installed: nothing to run */
      } else if (/^OK|WROTE/.test(v)) bad.push(`${k}: ${v}`);
    }
    assert.deepEqual(bad, [], JSON.stringify(out));
    assert.match(out.io_uring_setup, /^(ENOSYS|EPERM)$/);
    assert.equal(out['unshare(CLONE_NEWUSER)'], 'EPERM');
    assert.equal(out['ptrace(PTRACE_ATTACH, 1)'], 'EPERM');
  });

  test('a sandbox that lowers its OOM score still goes before the daemon', async (t) => {
    // runner.c sets OomScoreAdj 1000 so that under host memory pressure the
    // kernel kills sandboxes first. An unprivileged process may lower its
    // own score to 0 (the engine leaves oom_score_adj_min at 0), so the
    // daemon lowers its own score below that when it runs as root.
    const code = [
      'echo "before $(cat /proc/self/oom_score_adj)"',
      'echo 0 > /proc/self/oom_score_adj 2>/dev/null',
      'echo -1 > /proc/self/oom_score_adj 2>/dev/null || echo "cannot go below 0"',
      'echo "after $(cat /proc/self/oom_score_adj)"',
    ].join('\n');
    const r = await run({ conversationId: 'misc', language: 'bash', code });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.match(r.sc.stdout, /^before 1000$/m);
    assert.match(r.sc.stdout, /cannot go below 0/);
    const lowest = Number(/^after (-?\d+)$/m.exec(r.sc.stdout)[1]);
    const daemon = Number(readFileSync(`/proc/${d.proc.pid}/oom_score_adj`, 'utf8'));
    if (/cannot lower this daemon's OOM score/.test(readFileSync(d.logPath, 'utf8'))) {
      // The daemon said so at start-up: it lacks CAP_SYS_RESOURCE here.
      t.skip(`the daemon cannot lower its own OOM score on this host (score ${daemon})`);
      return;
    }
    assert.ok(daemon < lowest, `daemon ${daemon} vs sandbox ${lowest}`);
  });
});

// ---------------------------------------------------------------------------
describe('host files and secrets', () => {
  let canaryDir;
  before(() => {
    canaryDir = path.join(os.tmpdir(), `mcpsd-canary-${randomBytes(6).toString('hex')}`);
    mkdirSync(canaryDir, { mode: 0o755 });
    writeFileSync(path.join(canaryDir, 'secret.txt'), `HOST-CANARY-${randomBytes(8).toString('hex')}\n`, { mode: 0o644 });
  });
  after(() => rmSync(canaryDir, { recursive: true, force: true }));

  test('host files are out of reach: /etc/shadow, host paths, the daemon root, pid 1 is the init or the agent', async () => {
    const hostShadow = existsSync('/etc/shadow') ? readFileSync('/etc/shadow', 'utf8') : '';
    const hostRootLine = hostShadow.split('\n').find((l) => l.startsWith('root:')) ?? '';
    const paths = [
      '/etc/shadow',
      path.join(canaryDir, 'secret.txt'),
      `/proc/1/root${canaryDir}/secret.txt`,
      `/data/../..${canaryDir}/secret.txt`,
      path.join(d.root, 'meta'),
      path.join(d.root, 'runs'),
      '/proc/1/root/etc/shadow',
      '/proc/kcore',
      '/dev/mem',
      '/sys/firmware/dmi/tables/DMI',
    ];
    const code = String.raw`import errno, json, os, sys
paths = json.loads(sys.stdin.read())
out = {}
for p in paths:
    try:
        with open(p, 'rb') as f:
            out[p] = 'READ ' + f.read(4096).decode('latin-1')
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
out['pid1'] = open('/proc/1/cmdline', 'rb').read().split(b'\0')[0].decode()
out['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
print(json.dumps(out))
`;
    const r = await run({ conversationId: 'misc', language: 'python', code, stdin: JSON.stringify(paths) });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const out = JSON.parse(r.sc.stdout);
    assert.equal(out['/etc/shadow'], 'EACCES', 'the image has its own, unreadable /etc/shadow');
    for (const p of paths) {
      if (p === '/etc/shadow') continue;
      assert.ok(!String(out[p]).startsWith('READ') || !out[p].includes('HOST-CANARY'), `${p}: ${out[p]}`);
      assert.doesNotMatch(String(out[p]), /^READ/, `${p} is not readable: ${String(out[p]).slice(0, 80)}`);
    }
    const hostHash = hostRootLine.split(':')[1] ?? '';
    if (hostHash.length > 12) assert.ok(!r.sc.stdout.includes(hostHash), 'no host shadow hash');
    // A one-off box runs under the engine's init; a warm box's PID 1 is
    // the agent (docs/agent-protocol.md), which code can neither signal nor
    // reach through /proc.
    assert.equal(out.pid1, warmRun(r) ? '/opt/mcp-sandboxd/mcpsd-agent' : '/sbin/docker-init', "pid 1 is the container's init");
    if (warmRun(r)) assert.equal(out[`/proc/1/root${canaryDir}/secret.txt`], 'EACCES', "the agent's /proc entries are closed to the code");
    assert.ok(out.pids.length < 10 && Math.max(...out.pids) < 1000, `only the sandbox's own processes are visible: ${out.pids}`);
  });

  test('the daemon secrets never reach a container: environment, /proc, files, the engine', async () => {
    const secrets = [d.env.FILE_SECRET, d.env.MCP_API_TOKEN];
    assert.ok(secrets.every((s) => s && s.length >= 32));
    const canary = `CANARY${randomBytes(8).toString('hex')}`;
    const code = String.raw`import json, os, sys, time
needles = [s.encode() for s in json.loads(sys.stdin.read())]
hits, scanned = [], 0
def check(path):
    global scanned
    try:
        with open(path, 'rb') as f:
            data = f.read(1 << 20)
    except OSError:
        return
    scanned += 1
    for i, n in enumerate(needles):
        if n in data:
            hits.append((i, path))
for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self', 'thread-self']:
    for name in ('environ', 'cmdline', 'mountinfo', 'status'):
        check('/proc/%s/%s' % (pid, name))
files = 0
for top in ('/etc', '/sandbox', '/data', '/tmp', '/run', '/var', '/opt', '/home', '/root', '/srv', '/mnt', '/media', '/dev/shm', '/usr/local'):
    for dirpath, dirnames, filenames in os.walk(top):
        for fn in filenames:
            files += 1
            if files > 20000:
                break
            p = os.path.join(dirpath, fn)
            if os.path.isfile(p) and not os.path.islink(p):
                check(p)
print(json.dumps({'hits': hits, 'scanned': scanned, 'environ': dict(os.environ)}))
sys.stdout.flush()
time.sleep(3)
`;
    const p = run({
      conversationId: 'misc',
      language: 'python',
      code,
      stdin: JSON.stringify([...secrets, canary]),
      environment: { MY_CANARY: canary },
      timeout_seconds: 30,
    });
    // While it runs: the engine's view of the containers of this daemon,
    // the run's and (warm sessions being on by default) the warm and pool
    // boxes: every one of them is hardened alike.
    let inspected = [];
    for (let i = 0; i < 40 && !inspected.length; i++) {
      await sleep(250);
      const h = await d.health();
      const cs = await containersOf(d.instance, { all: false });
      if (h.runs.running === 1 && cs.length >= 1)
        for (const c of cs) inspected.push((await dockerApi('GET', `/containers/${c.Id}/json`)).json);
    }
    const r = await p;
    assert.equal(r.sc.status, 'completed', describeRun(r));
    const out = JSON.parse(r.sc.stdout);
    assert.ok(out.scanned > 50, `scanned ${out.scanned} files`);
    // In a warm box the run's stdin is a file in /sandbox, and this run's
    // stdin is the list of needles itself (removed when the run ends).
    const ownStdin = (p) => warmRun(r) && p === '/sandbox/stdin';
    assert.deepEqual(out.hits.filter(([i, p]) => i < 2 && !ownStdin(p)), [], 'no secret in any readable file of the sandbox');
    // The scan works: it finds the canary, in the process environment of a
    // one-off run (a warm kernel sets a call's variables in os.environ,
    // which /proc does not show), or in the run's own stdin.
    assert.ok(out.hits.some(([i, p]) => i === 2 && (/environ/.test(p) || ownStdin(p))), `the scan does find a known value (the canary): ${JSON.stringify(out.hits)}`);
    // Only the image's own variables and what the run needs.
    const image = (await dockerApi('GET', `/images/${encodeURIComponent(r.sc.runner_image)}/json`)).json;
    const allowed = new Set([...(image?.Config?.Env ?? []).map((e) => e.split('=')[0]), 'HOSTNAME', 'HOME', 'LANG', 'FILE_BASE_URL', 'MY_CANARY']);
    assert.deepEqual(Object.keys(out.environ).filter((k) => !allowed.has(k)), [], 'no variable beyond the image, HOME, LANG, FILE_BASE_URL and the caller');
    assert.equal(out.environ.MY_CANARY, canary);
    for (const s of secrets) assert.ok(!r.sc.stdout.includes(s));

    assert.ok(inspected.length >= 1, 'the running containers were found by their label');
    for (const c of inspected) {
      const kind = c.Config.Labels['sandbox.kind'];
      const warm = kind === 'warm' || kind === 'pool';
      const what = `${c.Id.slice(0, 12)} (${kind})`;
      const env = c.Config.Env.join('\n');
      for (const s of secrets) assert.ok(!env.includes(s), `no secret in the container environment the engine holds: ${what}`);
      assert.doesNotMatch(env, /MCP_|FILE_SECRET|DOCKER_HOST|SANDBOX_/, what);
      const hc = c.HostConfig;
      assert.equal(hc.NetworkMode, 'none', what);
      assert.equal(hc.Privileged, false, what);
      assert.deepEqual(hc.CapDrop, ['ALL'], what);
      assert.ok(!hc.CapAdd || hc.CapAdd.length === 0, what);
      assert.ok(hc.SecurityOpt.includes('no-new-privileges:true'), what);
      assert.ok(hc.SecurityOpt.some((o) => o.startsWith('seccomp=') && o !== 'seccomp=unconfined'), what);
      assert.equal(hc.ReadonlyRootfs, true, what);
      assert.equal(hc.Memory, 256 * MiB, what);
      assert.equal(hc.MemorySwap, hc.Memory, what);
      assert.equal(hc.PidsLimit, 128, what);
      // A warm box's main process is the agent, as its PID 1 (no init).
      assert.equal(hc.Init, !warm, what);
      if (warm) assert.equal(c.Path, '/opt/mcp-sandboxd/mcpsd-agent', what);
      assert.equal(hc.IpcMode, 'private', what);
      assert.equal(hc.PidMode, '', what);
      assert.equal(hc.UsernsMode, '', what);
      assert.ok(!hc.Binds || hc.Binds.length === 0, `Mounts, never Binds: ${what}`);
      assert.equal(c.Config.User, '64321:64321', what);
      const mounts = c.Mounts.map((m) => m.Source);
      assert.ok(!mounts.some((s) => /docker\.sock|^\/var\/run|^\/run/.test(s)), JSON.stringify(mounts));
      // Warm boxes also have the agent, read-only, and over the socket
      // channel (the agent started with --channel) its directory, read-only.
      const chan = warm && c.Args.includes('--channel') ? ['/run/mcpsd'] : [];
      const want = warm ? ['/data', '/opt/mcp-sandboxd', ...chan, '/sandbox'] : ['/data', '/sandbox'];
      assert.deepEqual(c.Mounts.map((m) => m.Destination).sort(), want.sort(), what);
      for (const ro of warm ? ['/sandbox', '/opt/mcp-sandboxd', ...chan] : ['/sandbox'])
        assert.equal(c.Mounts.find((m) => m.Destination === ro).RW, false, `${ro} is read-only in ${what}`);
      assert.equal(hc.RestartPolicy.Name === '' || hc.RestartPolicy.Name === 'no', true, what);
      assert.equal(hc.LogConfig.Type, 'none', what);
    }
  });
});

// ---------------------------------------------------------------------------
describe('other runs and processes', () => {
  test('kill -9 -1 and a kill-everything loop end only their own run', async () => {
    const victim = run({
      conversationId: 'victim',
      language: 'bash',
      code: 'for i in 1 2 3 4 5 6 7 8; do sleep 0.5; echo tick $i; done; echo victim ok',
      timeout_seconds: 20,
    });
    await sleep(800);
    const killers = [
      run({
        conversationId: 'killer-a',
        language: 'bash',
        code: 'sleep 30 &\nfor p in $(seq 1 400); do kill -0 $p 2>/dev/null && echo "visible $p"; done\nkill -9 -1\necho "kill rc=$?"\nsleep 5\necho SURVIVED',
        timeout_seconds: 15,
      }),
      run({
        conversationId: 'killer-b',
        language: 'python',
        code: 'import os, signal, time\nfor p in range(1, 33000):\n    try:\n        os.kill(p, signal.SIGKILL)\n    except OSError:\n        pass\ntime.sleep(5)\nprint("SURVIVED")',
        timeout_seconds: 15,
      }),
    ];
    const [v, kb, kp] = await Promise.all([victim, ...killers]);
    assert.equal(v.sc.status, 'completed', describeRun(v));
    assert.match(v.sc.stdout, /tick 8\nvictim ok\n$/);
    for (const k of [kb, kp]) {
      assert.ok(['failed', 'completed'].includes(k.sc.status), describeRun(k));
      assert.ok(k.ms < 15_000, `${k.ms} ms`);
    }
    if (warmRun(kb)) {
      // In a warm box the agent is PID 1, out of reach: kill -9 -1 kills
      // the run's own background job and nothing else (not the killer,
      // which POSIX spares), so the run goes on to its end.
      assert.match(kb.sc.stdout, /kill rc=0\nSURVIVED\n$/, describeRun(kb));
      const again = await run({ conversationId: 'killer-a', language: 'bash', code: 'echo box alive' });
      assert.equal(again.sc.stdout, 'box alive\n', describeRun(again));
      assert.equal(again.sc.session.state, 'continued', 'the session survived');
    } else {
      // Killing the in-container watchdog ends the container: the run ends
      // at once with SIGKILL's exit code, not at its time limit.
      assert.doesNotMatch(kb.sc.stdout, /SURVIVED/);
      assert.ok(kb.ms < 8000, `${kb.ms} ms`);
    }
    // The Python killer kills everything it can see, itself included.
    assert.doesNotMatch(kp.sc.stdout, /SURVIVED/);
    if (warmRun(kp)) assert.equal(kp.sc.session.lost, true, `its interpreter is gone: ${JSON.stringify(kp.sc.session)}`);
    const visible = [...kb.sc.stdout.matchAll(/visible (\d+)/g)].map((m) => Number(m[1]));
    assert.ok(visible.length < 10 && visible.every((p) => p < 100), `the sandbox sees only its own pids: ${visible}`);
    assert.equal(d.exited, null, 'the daemon lives');
    const h = await healthyAndQuick();
    assert.equal(h.calls_running, 0);
    await noneRunning();
  });

  test(
    'per-user kernel limits are not shared between concurrent runs (inotify instances)',
    // A known limit, written down in docs/security.md ("Per-user kernel
    // limits"): every run uses SANDBOX_UID.
    { todo: 'all runs share SANDBOX_UID, so per-user kernel limits are shared' },
    async () => {
    // Every run uses SANDBOX_UID, and the kernel counts inotify instances
    // (fs.inotify.max_user_instances, 128 by default) per user across all
    // containers: one run holding them all starves every other run.
    const hog = run({
      conversationId: 'killer-a',
      language: 'python',
      timeout_seconds: 15,
      code: "import ctypes, sys, time\nlibc = ctypes.CDLL(None, use_errno=True)\nfds = []\nwhile len(fds) < 100000:\n    fd = libc.inotify_init()\n    if fd < 0:\n        break\n    fds.append(fd)\nprint('held', len(fds))\nsys.stdout.flush()\ntime.sleep(4)\n",
    });
    await sleep(1500);
    const victim = await run({
      conversationId: 'victim',
      language: 'python',
      code: "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.inotify_init()\nprint('inotify_init', 'ok' if fd >= 0 else errno.errorcode[ctypes.get_errno()])\n",
    });
    const h = await hog;
    assert.equal(h.sc.status, 'completed', describeRun(h));
    assert.equal(victim.sc.status, 'completed', describeRun(victim));
    assert.equal(victim.sc.stdout, 'inotify_init ok\n', `another run exhausted a per-user limit (${h.sc.stdout.trim()})`);
    },
  );
});

// ---------------------------------------------------------------------------
describe('links, FIFOs, sockets and hostile names in /data', () => {
  let canaryDir, canaryText, wsUrl;
  before(() => {
    canaryDir = path.join(os.tmpdir(), `mcpsd-canary-${randomBytes(6).toString('hex')}`);
    mkdirSync(path.join(canaryDir, 'sub'), { recursive: true });
    canaryText = `HOST-CANARY-${randomBytes(8).toString('hex')}`;
    writeFileSync(path.join(canaryDir, 'secret.txt'), canaryText);
    writeFileSync(path.join(canaryDir, 'sub', 'keep.txt'), 'keep');
  });
  after(() => rmSync(canaryDir, { recursive: true, force: true }));

  const hostileNames = [
    'cr\\rlf\\n.txt',
    'quote"and\\\'.txt',
    'back\\\\slash.txt',
    'tab\\t.txt',
    '\\xff\\xfe-invalid.txt',
    '\\xc3\\x28.txt',
    'esc\\x1b[31m.txt',
    'del\\x7f.txt',
    '\\xed\\xa0\\x80surrogate.txt',
  ];
  const okNames = ['-dash.txt', '%2e%2e.txt', 'sp ace .txt', '<img src=x onerror=alert(1)>.html', 'x'.repeat(250) + '.txt', 'ünï©ødé.txt'];

  test('the run that makes them and the next run both return a sane manifest', async () => {
    const code = String.raw`import os, socket
os.chdir('/data')
CANARY = os.environ['CANARY_DIR']
os.symlink(CANARY + '/secret.txt', 'host_secret.txt')
os.symlink('/etc/shadow', 'shadow_link.txt')
os.symlink('/proc/self/environ', 'environ_link.txt')
os.symlink('/', 'rootdir')
os.symlink('../../../../../../../..' + CANARY + '/secret.txt', 'relative_escape.txt')
os.symlink('loop_a', 'loop_b'); os.symlink('loop_b', 'loop_a')
os.mkfifo('fifo.txt')
os.mkfifo('fifo.png')
s = socket.socket(socket.AF_UNIX); s.bind('/data/sock.txt')
os.mkdir('dir')
os.symlink(CANARY, 'dir/canary_dir')
os.symlink(CANARY, 'canary_dir')
open('setuid.sh', 'w').write('#!/bin/sh\nid\n'); os.chmod('setuid.sh', 0o6755)
os.link('setuid.sh', 'hard.sh')
for n in [` + hostileNames.map((n) => `b'${n}'`).join(', ') + String.raw`]:
    with open(n, 'wb') as f: f.write(b'hostile name\n')
for n in ` + JSON.stringify(okNames) + String.raw`:
    with open(n, 'w') as f: f.write('plain name!\n')
p = 'deep'
for i in range(300):
    p += '/d'
os.makedirs(p)
open(p + '/bottom.txt', 'w').write('bottom')
print('made', len(os.listdir('.')))
`;
    const r1 = await run({ conversationId: 'tricks', language: 'python', code, environment: { CANARY_DIR: canaryDir } });
    assert.equal(r1.sc.status, 'completed', describeRun(r1));
    const checkManifest = (files, label) => {
      for (const f of files) {
        assert.doesNotMatch(f.name, /[\u0000-\u001f\u007f\\]/, `${label}: no control character or backslash in ${JSON.stringify(f.name)}`);
        assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(f.name), `${label}: no lone surrogate`);
        assert.doesNotMatch(f.name, /link|fifo|sock|rootdir|loop_|canary/, `${label}: only regular files are listed (${f.name})`);
        assert.ok(f.size > 0 && f.size <= 13, `${label}: ${f.name} has its own size, not a target's (${f.size})`);
        const u = new URL(f.url);
        assert.ok(!u.pathname.includes('/../') && !/[\r\n"'<> ]/.test(f.url), `${label}: URL is encoded: ${f.url}`);
      }
    };
    checkManifest(r1.sc.files, 'first run');
    const names = r1.sc.files.map((f) => f.name).sort();
    for (const n of okNames) assert.ok(names.includes(n), `${n} is listed: ${names}`);
    assert.ok(names.includes('setuid.sh') && names.includes('hard.sh'));
    assert.match(r1.text, /links, FIFOs or sockets created in \/data are never served/);
    assert.ok(!r1.text.includes(canaryText) && !JSON.stringify(r1.sc).includes(canaryText));
    wsUrl = /^(.*\/files\/[0-9a-f]{64})\//.exec(r1.sc.files[0].url)[1];

    const r2 = await run({ conversationId: 'tricks', language: 'bash', code: 'echo again > again.txt; ls -la | wc -l' });
    assert.equal(r2.sc.status, 'completed', describeRun(r2));
    assert.deepEqual(r2.sc.files.map((f) => f.name), ['again.txt'], 'the next run lists only what it wrote');
    checkManifest(r2.sc.files, 'next run');
  });

  test('list_files: valid JSON on the wire, links and specials skipped, bad names counted, never followed', async () => {
    const { msg } = await rawToolCall(d, 'list_files', { conversationId: 'tricks', limit: 1000 });
    assert.ok(msg.result, JSON.stringify(msg).slice(0, 500));
    const sc = msg.result.structuredContent;
    const kinds = Object.fromEntries(sc.skipped.map((s) => [s.name, s.type]));
    for (const n of ['host_secret.txt', 'shadow_link.txt', 'environ_link.txt', 'rootdir', 'relative_escape.txt', 'loop_a', 'loop_b', 'canary_dir', 'dir/canary_dir'])
      assert.equal(kinds[n], 'symlink', `${n}: ${kinds[n]}`);
    assert.equal(kinds['fifo.txt'], 'fifo');
    assert.equal(kinds['sock.txt'], 'socket');
    assert.ok(sc.unlistedNames >= hostileNames.length, `unlistedNames ${sc.unlistedNames}`);
    for (const f of sc.files) {
      assert.doesNotMatch(f.name, /[\u0000-\u001f\u007f\\]/);
      assert.doesNotMatch(f.name, /link|fifo|sock|canary|secret/);
    }
    assert.ok(!JSON.stringify(msg).includes(canaryText));
    assert.ok(!JSON.stringify(msg).includes('keep.txt'), 'the walk did not enter the linked host directory');
    // The SDK client parses and validates the same answer.
    const l = await callTool(d.client, 'list_files', { conversationId: 'tricks', limit: 1000 });
    assert.equal(l.sc.count, sc.count);
  });

  test('/files/ and resources/read refuse links, FIFOs and sockets promptly', async () => {
    for (const n of ['host_secret.txt', 'shadow_link.txt', 'environ_link.txt', 'relative_escape.txt', 'rootdir/etc/passwd', 'canary_dir/secret.txt', 'dir/canary_dir/secret.txt', 'fifo.txt', 'fifo.png', 'sock.txt', 'loop_a', 'deep/d/d/d']) {
      const t0 = Date.now();
      const res = await fetch(`${wsUrl}/${n.split('/').map(encodeURIComponent).join('/')}`, { signal: AbortSignal.timeout(5000) });
      const body = await res.text();
      assert.ok(res.status >= 400 && res.status < 500, `${n}: ${res.status}`);
      assert.ok(!body.includes(canaryText) && !body.includes('root:'), `${n}: nothing of the target is served`);
      assert.ok(Date.now() - t0 < 3000, `${n}: answered in ${Date.now() - t0} ms`);
    }
    const good = await fetch(`${wsUrl}/setuid.sh`);
    assert.equal(good.status, 200);
    assert.match(good.headers.get('content-disposition') ?? '', /attachment/);
    const html = await fetch(`${wsUrl}/${encodeURIComponent('<img src=x onerror=alert(1)>.html')}`);
    assert.equal(html.status, 200);
    assert.match(html.headers.get('content-disposition') ?? '', /^attachment/);
    assert.equal(html.headers.get('x-content-type-options'), 'nosniff');
    for (const n of ['host_secret.txt', 'fifo.txt', 'canary_dir/secret.txt']) {
      const t0 = Date.now();
      let text = '';
      try {
        const rr = await d.client.readResource({ uri: `sandbox://tricks/${n.split('/').map(encodeURIComponent).join('/')}` }, { timeout: 5000 });
        text = JSON.stringify(rr);
        assert.fail(`${n} was read: ${text.slice(0, 200)}`);
      } catch (e) {
        if (e.code === 'ERR_ASSERTION') throw e;
      }
      assert.ok(!text.includes(canaryText));
      assert.ok(Date.now() - t0 < 4000, `${n}: answered in ${Date.now() - t0} ms`);
    }
  });

  test('/data/.mcp made a link to a host directory: saved output and uploads never follow it', async () => {
    const before = readdirSync(canaryDir).sort();
    const r = await run({
      conversationId: 'tricks-mcp',
      language: 'bash',
      code: 'rm -rf .mcp; ln -s "$CANARY_DIR" .mcp; head -c 200000 /dev/zero | tr "\\0" a',
      environment: { CANARY_DIR: canaryDir },
    });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.equal(r.sc.stdout_truncated, true);
    assert.ok(!r.sc.stdout_url || !r.sc.stdout_url.includes('/.mcp/'), `not saved through the link: ${r.sc.stdout_url}`);
    assert.deepEqual(readdirSync(canaryDir).sort(), before, 'nothing was written into the linked host directory');
    const up = await callTool(d.client, 'upload_file', { conversationId: 'tricks-mcp', filename: '.mcp/up.txt', text: 'x' });
    assert.equal(up.result.isError, true);
    assert.match(up.text, /link/);
    assert.deepEqual(readdirSync(canaryDir).sort(), before);
    const fifo = await run({ conversationId: 'tricks-mcp', language: 'bash', code: 'rm -f .mcp; mkfifo .mcp; head -c 200000 /dev/zero | tr "\\0" b' });
    assert.equal(fifo.sc.status, 'completed', describeRun(fifo));
    assert.ok(fifo.ms < 5000, 'a FIFO in the place of .mcp does not block the result');
  });

  test('delete_file removes deep trees and directories holding links without following them; links are refused', async () => {
    for (const filename of ['canary_dir', 'host_secret.txt', 'rootdir', 'fifo.txt', 'sock.txt']) {
      const r = await callTool(d.client, 'delete_file', { conversationId: 'tricks', filename });
      assert.equal(r.result.isError, true, `${filename}: ${r.text}`);
      assert.match(r.text, /symlink|fifo|socket|not a (regular )?file/i, `${filename}: ${r.text}`);
    }
    for (const filename of ['dir', 'deep']) {
      const r = await callTool(d.client, 'delete_file', { conversationId: 'tricks', filename, recursive: true });
      assert.notEqual(r.result.isError, true, `${filename}: ${r.text}`);
    }
    assert.equal(readFileSync(path.join(canaryDir, 'secret.txt'), 'utf8'), canaryText, 'the link target survives');
    assert.deepEqual(readdirSync(path.join(canaryDir, 'sub')), ['keep.txt'], 'the linked directory survives');
    const l = await callTool(d.client, 'list_files', { conversationId: 'tricks', limit: 1000 });
    const skipped = l.sc.skipped.map((s) => s.name);
    assert.ok(!skipped.includes('dir/canary_dir'), 'the link inside the deleted directory is gone');
    assert.ok(skipped.includes('canary_dir') && skipped.includes('rootdir'), 'the refused links are still there');
    const r = await run({
      conversationId: 'tricks',
      language: 'bash',
      code: 'test -e deep && echo DEEP-LEFT; test -e dir && echo DIR-LEFT; rm -f canary_dir host_secret.txt rootdir relative_escape.txt; ls canary_dir rootdir 2>&1 | head -2',
    });
    assert.equal(r.sc.status, 'completed', describeRun(r));
    assert.doesNotMatch(r.sc.stdout, /DEEP-LEFT|DIR-LEFT/);
    assert.equal(readFileSync(path.join(canaryDir, 'secret.txt'), 'utf8'), canaryText);
  });
});
