// SPDX-License-Identifier: MIT
// Warm sessions (docs/sessions.md) through the real MCP endpoint with the
// official SDK client, against the real engine and runner images: Python
// state kept across calls, notebook-style values and figures, the pool,
// session "new", isolation between conversations and tenants, warm
// TypeScript and Bash, and what ends a session's state (timeouts that the
// code ignores, memory, exit(), a hostile control channel) reported in the
// result. The slow limits (idle expiry, lifetime, long runs, eviction,
// kill -9) are in warm_limits.test.mjs.
//
// Timings: only the requirements of issue 10 are timed (a cancel stops the
// run within 2 s), with margins for a loaded 2-core machine; everything
// else waits generously.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connectHttp } from './lib/daemon.mjs';
import { describeRun } from './lib/sandbox.mjs';
import {
  PY_PROCS,
  SH_PROCS,
  SLOW,
  conv,
  expectSession,
  expectStatus,
  py,
  run,
  startWarm,
  stopWarm,
  waitPool,
} from './lib/warm.mjs';

const T = 240_000 * SLOW; // per test: generous, the machine is shared

/** GET a URL; the body as a Buffer. */
async function get(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  return { status: r.status, type: r.headers.get('content-type'), body: Buffer.from(await r.arrayBuffer()) };
}

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

// ---------------------------------------------------------------------------
// The core of a data-analysis conversation, with and without the pool: a
// pool box is claimed by its first run (its workspace mounted into the box
// from the host), a box without the pool is started for it.

for (const pool of [false, true]) {
  describe(`Python state across calls (pool ${pool ? 'on' : 'off'})`, () => {
    let d;
    const c1 = conv('state');

    before(async () => {
      d = await startWarm({ name: `warm-state-${pool ? 'pool' : 'nopool'}`, pool });
      if (pool) await waitPool(d);
    });
    after(() => stopWarm(d));

    test('variables, imports, a function and a DataFrame are kept', { timeout: T }, async () => {
      const r1 = await py(
        d.client,
        c1,
        String.raw`import math
import pandas as pd
def twice(v):
    return 2 * v
df = pd.DataFrame({'a': range(10), 'b': [i * i for i in range(10)]})
x = 41
print('set')`,
      );
      expectStatus(r1, 'completed');
      expectSession(r1, 'new');
      assert.equal(r1.sc.session.from_pool, pool, JSON.stringify(r1.sc.session));
      assert.equal(r1.sc.session.stateful, true);
      assert.equal(r1.sc.session.runs, 1);
      assert.match(r1.text, /session: new/);

      const r2 = await py(d.client, c1, "print(x + 1, twice(21), round(math.pi, 2), int(df['b'].sum()), pd.__name__)");
      expectStatus(r2, 'completed');
      expectSession(r2, 'continued');
      // The agent's round trip to the microsecond, beside the whole
      // milliseconds of duration_ms (for benchmarks of the daemon's own time).
      const us = r2.result._meta?.['mcp-sandboxd/timing']?.run_us;
      assert.ok(Number.isInteger(us) && us > 0, JSON.stringify(r2.result._meta));
      assert.equal(Math.floor(us / 1000), r2.sc.duration_ms, 'run_us is duration_ms to the microsecond');
      assert.equal(r2.sc.stdout, '42 42 3.14 285 pandas\n');
      assert.equal(r2.sc.session.runs, 2);
      assert.equal(r2.sc.session.lost, false);
      assert.ok(r2.sc.session.memory_bytes > 0 && r2.sc.session.memory_limit_bytes >= r2.sc.session.memory_bytes, JSON.stringify(r2.sc.session));
      assert.ok(Date.parse(r2.sc.session.idle_expires_at) > Date.now(), 'the idle expiry is in the future');
      assert.ok(Date.parse(r2.sc.session.expires_at) >= Date.parse(r2.sc.session.idle_expires_at) - 1000, JSON.stringify(r2.sc.session));
      assert.doesNotMatch(r2.text, /^NOTE/, 'no note when the state was kept');

      // A change in one call is seen by the next.
      const r3 = await py(d.client, c1, "df['c'] = df['a'] + df['b']\nx += 1");
      expectStatus(r3, 'completed');
      const r4 = await py(d.client, c1, "print(x, list(df.columns), int(df['c'].iloc[-1]))");
      assert.equal(r4.sc.stdout, "42 ['a', 'b', 'c'] 90\n", describeRun(r4));
    });

    test('the last expression is shown: text/plain, and a DataFrame as HTML', { timeout: T }, async () => {
      const r = await py(d.client, c1, 'x * 2');
      expectStatus(r, 'completed');
      assert.deepEqual(r.sc.value, { 'text/plain': '84' });
      assert.match(r.text, /--- value of the last expression ---\n84\n/);
      assert.doesNotMatch(r.text, /\(no output\)/);

      const f = await py(d.client, c1, "df[['a', 'b']].head(3)");
      expectStatus(f, 'completed');
      assert.match(f.sc.value['text/plain'], /a\s+b\n0\s+0\s+0\n1\s+1\s+1\n2\s+2\s+4/);
      assert.match(f.sc.value['text/html'], /<table[^>]*class="dataframe/);
      assert.match(f.sc.value['text/html'], /<th>b<\/th>/);

      // A statement, or an expression that is None, has no value.
      const n = await py(d.client, c1, 'y = 1\nNone');
      expectStatus(n, 'completed');
      assert.equal(n.sc.value, undefined);

      // An object's own HTML and Markdown come along.
      const o = await py(
        d.client,
        c1,
        "class Rich:\n    def __repr__(self): return 'Rich()'\n    def _repr_html_(self): return '<b>rich</b>'\n    def _repr_markdown_(self): return '**rich**'\nRich()",
      );
      assert.deepEqual(o.sc.value, { 'text/plain': 'Rich()', 'text/html': '<b>rich</b>', 'text/markdown': '**rich**' });
    });

    test('a matplotlib figure comes back inline and by URL', { timeout: T }, async () => {
      const r = await py(d.client, c1, "import matplotlib.pyplot as plt\nplt.plot(df['a'], df['b'])\nplt.title('squares')\nprint('plotted')");
      expectStatus(r, 'completed');
      const figs = (r.sc.files ?? []).filter((f) => /^figure-\d+-1\.png$/.test(f.name));
      assert.equal(figs.length, 1, `one figure file: ${JSON.stringify(r.sc.files)}`);
      assert.equal(figs[0].mimeType, 'image/png');
      const img = r.result.content.find((c) => c.type === 'image');
      assert.ok(img, `an image content item: ${JSON.stringify(r.result.content.map((c) => c.type))}`);
      assert.equal(img.mimeType, 'image/png');
      const inline = Buffer.from(img.data, 'base64');
      assert.ok(inline.subarray(0, 8).equals(PNG_MAGIC), 'the inline image is a PNG');
      const g = await get(figs[0].url);
      assert.equal(g.status, 200);
      assert.equal(g.type, 'image/png');
      assert.ok(g.body.equals(inline), 'the URL serves the same bytes');

      // plt.show() saves at once; the figure is closed, not saved twice.
      const s = await py(d.client, c1, 'plt.plot([3, 2, 1])\nplt.show()\nplt.plot([1, 1])');
      expectStatus(s, 'completed');
      const names = (s.sc.files ?? []).map((f) => f.name).filter((n) => n.startsWith('figure-')).sort();
      assert.equal(names.length, 2, JSON.stringify(names));
      assert.equal(s.result.content.filter((c) => c.type === 'image').length, 2);

      // Nothing open: no figure.
      const none = await py(d.client, c1, 'print(len(plt.get_fignums()))');
      assert.equal(none.sc.stdout, '0\n');
      assert.equal((none.sc.files ?? []).filter((f) => f.name.startsWith('figure-')).length, 0);
    });

    test('session "new" starts afresh and says so', { timeout: T }, async () => {
      const r = await py(d.client, c1, "print('x' in globals())", { session: 'new' });
      expectStatus(r, 'completed');
      expectSession(r, 'restarted', 'requested');
      assert.equal(r.sc.stdout, 'False\n');
      assert.match(r.text, /^NOTE: the Python state of this conversation was lost before this run \(session "new" was asked for\)/);
      assert.equal(r.sc.session.runs, 1);
      const again = await py(d.client, c1, "print('x' in globals())");
      expectSession(again, 'continued');
      // The files of the conversation are not part of the state.
      const files = await py(d.client, c1, "import os\nprint(any(n.startswith('figure-') for n in os.listdir('.')))");
      assert.equal(files.sc.stdout, 'True\n');
    });

    test('two conversations and two tenants share nothing', { timeout: T }, async () => {
      const a = conv('iso-a');
      const b = conv('iso-b');
      const mark = randomBytes(4).toString('hex');
      const ra = await py(
        d.client,
        a,
        `secret = '${mark}'\nopen('/tmp/secret-${mark}', 'w').write('x')\nopen('/data/secret-${mark}', 'w').write('x')\nimport os\nprint(os.getpid())`,
      );
      expectStatus(ra, 'completed');
      // A is busy with a child process while B looks around.
      let started;
      const startedP = new Promise((r) => (started = r));
      const busy = py(
        d.client,
        a,
        `import subprocess, time\np = subprocess.Popen(['sleep', '${parseInt(mark, 16) % 90000 + 10000}'])\nprint('started', flush=True)\ntime.sleep(6)`,
        {},
        { request: { onprogress: (p) => String(p.message ?? '').includes('started') && started() } },
      );
      await Promise.race([startedP, busy]);
      const look = String.raw`import os
print('secret' in globals())
print(os.path.exists('/tmp/secret-MARK'), os.path.exists('/data/secret-MARK'))
print(sorted(n for n in os.listdir('/data') if not n.startswith('.')))
`.replaceAll('MARK', mark) + PY_PROCS;
      const rb = await py(d.client, b, look);
      expectStatus(rb, 'completed');
      const lines = rb.sc.stdout.split('\n');
      assert.equal(lines[0], 'False', 'no variable of the other conversation');
      assert.equal(lines[1], 'False False', 'neither its /tmp nor its /data');
      assert.equal(lines[2], '[]');
      assert.ok(!rb.sc.stdout.includes('sleep'), `no process of the other conversation:\n${rb.sc.stdout}`);
      expectStatus(await busy, 'completed');

      // Another tenant with the very same conversationId.
      const tenants = await startWarm({
        name: `warm-tenants-${pool ? 'pool' : 'nopool'}`,
        pool,
        env: { MCP_API_TOKENS: `alice:${'a'.repeat(40)},bob:${'b'.repeat(40)}` },
        connect: false,
      });
      try {
        const alice = await connectHttp(tenants, { token: 'a'.repeat(40) });
        const bob = await connectHttp(tenants, { token: 'b'.repeat(40) });
        if (pool) await waitPool(tenants);
        const same = 'same-conversation';
        const al = await py(alice, same, `secret = '${mark}'\nopen('/tmp/t-${mark}', 'w').write('x')\nopen('/data/t-${mark}', 'w').write('x')\nsecret`);
        expectStatus(al, 'completed');
        assert.equal(al.sc.value['text/plain'], `'${mark}'`);
        const bo = await py(bob, same, `import os\nprint('secret' in globals(), os.path.exists('/tmp/t-${mark}'), os.listdir('/data'))`);
        expectStatus(bo, 'completed');
        expectSession(bo, 'new');
        assert.equal(bo.sc.stdout, 'False False []\n');
        const al2 = await py(alice, same, 'secret');
        expectSession(al2, 'continued');
        assert.equal(al2.sc.value['text/plain'], `'${mark}'`);
        await alice.close();
        await bob.close();
      } finally {
        await stopWarm(tenants);
      }
    });
  });
}

// ---------------------------------------------------------------------------
// What ends a session's state, and what does not. One daemon without the
// pool: each test uses conversations of its own.

describe('what keeps and what ends the state', () => {
  let d;

  before(async () => {
    d = await startWarm({ name: 'warm-ends', pool: false });
  });
  after(() => stopWarm(d));

  /** Sets x in a fresh conversation and returns its id. */
  async function withState(prefix, value = 1) {
    const c = conv(prefix);
    const r = await py(d.client, c, `x = ${value}`);
    expectStatus(r, 'completed');
    return c;
  }

  /** The next run of c finds x gone and was told why. */
  async function expectLost(c, reason) {
    const r = await py(d.client, c, "print('x' in globals())");
    expectStatus(r, 'completed');
    if (process.env.MCPSD_TEST_STATE === 'true' && r.sc.session.state === 'restored') {
      // Durable sessions on: the interpreter is a new one, for that
      // reason, and the last save came back (durable.test.mjs).
      expectSession(r, 'restored', reason);
      assert.equal(r.sc.stdout, 'True\n');
      assert.match(r.text, /^NOTE: the Python state of this conversation was restored \(/);
      expectSession(await py(d.client, c, 'x = 2'), 'continued');
      return;
    }
    expectSession(r, 'restarted', reason);
    assert.equal(r.sc.stdout, 'False\n');
    assert.match(r.text, /^NOTE: the Python state of this conversation was lost before this run \(/);
    // Told once: the run after that continues.
    const again = await py(d.client, c, 'x = 2');
    expectSession(again, 'continued');
  }

  /** The next run of c still has x == value. */
  async function expectKept(c, value = 1) {
    const r = await py(d.client, c, 'x');
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.value?.['text/plain'], String(value), describeRun(r));
  }

  test('an interrupt at the time limit keeps the state: time.sleep and a Python loop', { timeout: T }, async () => {
    const c = await withState('interrupt', 7);
    for (const code of ['import time\ntime.sleep(60)', 'n = 0\nwhile True:\n    n += 1']) {
      const r = await py(d.client, c, code, { timeout_seconds: 2 });
      expectStatus(r, 'timed_out');
      assert.equal(r.sc.timed_out, true);
      assert.equal(r.sc.session.lost, false, JSON.stringify(r.sc.session));
      assert.match(r.sc.stderr, /KeyboardInterrupt/);
      assert.match(r.sc.message, /interrupted \(the session's state is kept\)/);
      await expectKept(c, 7);
    }
    const n = await py(d.client, c, 'n > 0');
    assert.equal(n.sc.value['text/plain'], 'True', 'the loop ran until interrupted and its variable is kept');
  });

  test('code that ignores the interrupt is killed at the time limit: state lost, said so', { timeout: T }, async () => {
    const c = await withState('timeout-kill');
    const r = await py(d.client, c, 'sum(range(10**11))', { timeout_seconds: 2 });
    expectStatus(r, 'timed_out');
    assert.equal(r.sc.session.lost, true);
    assert.equal(r.sc.session.lost_reason, 'timeout_kill');
    assert.match(r.text, /^NOTE: this run ended the Python state \(a run timed out and did not stop when interrupted/);
    assert.match(r.sc.message, /was killed/);
    await expectLost(c, 'timeout_kill');
  });

  test('running out of memory: oom_killed, state lost, said so', { timeout: T }, async () => {
    const c = await withState('oom');
    const r = await py(d.client, c, "b = b'a' * (1 << 30)");
    expectStatus(r, 'oom_killed');
    assert.equal(r.sc.oom_killed, true);
    assert.equal(r.sc.session.lost_reason, 'oom');
    assert.ok(r.sc.session.memory_peak_bytes >= r.sc.session.memory_limit_bytes * 0.9, JSON.stringify(r.sc.session));
    await expectLost(c, 'oom');
  });

  test('a child process killed for memory: oom_killed, the interpreter and its state survive', { timeout: T }, async () => {
    const c = await withState('child-oom', 5);
    const r = await py(
      d.client,
      c,
      "import subprocess, sys\nr = subprocess.run([sys.executable, '-c', \"b = b'a' * (1 << 30)\"])\nprint('child', r.returncode)",
    );
    expectStatus(r, 'oom_killed');
    assert.equal(r.sc.session.lost, false, JSON.stringify(r.sc.session));
    assert.equal(r.sc.stdout, 'child -9\n');
    assert.match(r.sc.message, /by a child process \(the session survived\)/);
    await expectKept(c, 5);
  });

  test('exit() ends the interpreter with its code: state lost, said so', { timeout: T }, async () => {
    const c = await withState('exit');
    const r = await py(d.client, c, "print('bye')\nexit(3)");
    expectStatus(r, 'failed');
    assert.equal(r.sc.exit_code, 3);
    assert.equal(r.sc.stdout, 'bye\n');
    assert.equal(r.sc.session.lost_reason, 'exit');
    await expectLost(c, 'exit');
  });

  test('a cancel through the SDK stops the run within 2 s and keeps the state', { timeout: T }, async () => {
    const c = await withState('cancel', 9);
    for (let round = 0; round < 2; round++) {
      const ac = new AbortController();
      let started;
      const startedP = new Promise((r) => (started = r));
      const call = py(
        d.client,
        c,
        String.raw`import time
print('started', flush=True)
try:
    time.sleep(120)
except KeyboardInterrupt:
    open('/data/stopped-at', 'w').write(repr(time.time()))
    raise`,
        { timeout_seconds: 200 },
        {
          request: {
            signal: ac.signal,
            onprogress: (p) => String(p.message ?? '').includes('started') && started(),
          },
        },
      ).then(
        (r) => ({ r }),
        (e) => ({ e }),
      );
      const first = await Promise.race([startedP.then(() => null), call]);
      assert.equal(first, null, `the run started: ${JSON.stringify(first)}`);
      const tAbort = Date.now();
      ac.abort();
      const out = await call;
      assert.ok(out.e, 'the SDK rejects the aborted call');
      // The next run waits for the cancelled one: it finds the state and
      // the time the code saw its KeyboardInterrupt.
      const r = await py(d.client, c, "print(x, open('/data/stopped-at').read())");
      expectStatus(r, 'completed');
      expectSession(r, 'continued');
      const [x, at] = r.sc.stdout.trim().split(' ');
      assert.equal(x, '9', 'the state is kept');
      const stoppedMs = Number(at) * 1000 - tAbort;
      assert.ok(stoppedMs < 2000, `the run stopped ${Math.round(stoppedMs)} ms after the cancel`);
      await py(d.client, c, "import os\nos.remove('/data/stopped-at')");
    }
  });

  test('no process started by a call survives it: Python and Bash', { timeout: T }, async () => {
    const c = conv('background');
    const start = String.raw`import os, subprocess, time
subprocess.Popen(['sleep', '3031'], start_new_session=True)
os.system('setsid sleep 3032 &')
os.system('nohup sleep 3033 >/dev/null 2>&1 &')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '3034'])
    os._exit(0)
time.sleep(1)
` + PY_PROCS;
    const r1 = await py(d.client, c, start);
    expectStatus(r1, 'completed');
    for (const n of [3031, 3032, 3033, 3034]) assert.match(r1.sc.stdout, new RegExp(`sleep ${n}`), `sleep ${n} ran during the call`);
    const r2 = await py(d.client, c, PY_PROCS);
    expectStatus(r2, 'completed');
    expectSession(r2, 'continued');
    assert.doesNotMatch(r2.sc.stdout, /sleep/, 'nothing of the last call is left');

    const b1 = await run(d.client, c, 'bash', 'setsid sleep 3041 &\nnohup sleep 3042 >/dev/null 2>&1 &\n(sleep 3043 &)\ndisown -a\nsleep 1\n' + SH_PROCS);
    expectStatus(b1, 'completed');
    for (const n of [3041, 3042, 3043]) assert.match(b1.sc.stdout, new RegExp(`sleep ${n}`), `sleep ${n} ran during the call`);
    const b2 = await run(d.client, c, 'bash', SH_PROCS);
    expectStatus(b2, 'completed');
    expectSession(b2, 'continued');
    assert.doesNotMatch(b2.sc.stdout, /sleep/, 'nothing of the last call is left');
  });

  test('progress notifications carry the output lines while the code prints', { timeout: T }, async () => {
    const c = conv('progress');
    const msgs = [];
    const r = await py(
      d.client,
      c,
      "import time\nfor i in range(8):\n    print('line-%d' % i, flush=True)\n    time.sleep(0.5)",
      {},
      { request: { onprogress: (p) => msgs.push(p) } },
    );
    expectStatus(r, 'completed');
    const withOutput = msgs.filter((m) => /line-\d/.test(String(m.message ?? '')));
    assert.ok(withOutput.length >= 2, `progress with output lines: ${JSON.stringify(msgs)}`);
    assert.ok(withOutput.length <= 8 * 4, 'rate-limited');
    assert.match(withOutput.at(-1).message, /latest output:\n(line-\d\n)*line-\d$/);
    for (let i = 1; i < msgs.length; i++) assert.ok(msgs[i].progress > msgs[i - 1].progress, 'progress increases');
  });

  test('output is line-buffered, as on a terminal: lines stream without flush=True; a partial line comes at the end, before an error, an interrupt and exit()', { timeout: T }, async () => {
    const c = conv('linebuf');
    const msgs = [];
    const r = await py(d.client, c, "import time\nfor i in range(6):\n    print('tick-%d' % i)\n    time.sleep(0.5)", {}, { request: { onprogress: (p) => msgs.push(p) } });
    expectStatus(r, 'completed');
    const early = msgs.filter((m) => /tick-[0-3]/.test(String(m.message ?? '')));
    assert.ok(early.length >= 2, `lines streamed while the code ran: ${JSON.stringify(msgs)}`);
    // print(a, b) is one write; a write to the descriptor itself comes
    // before a line the interpreter has not ended yet, as on a terminal.
    const order = await py(d.client, c, "import os\nprint('a', end='')\nos.write(1, b'[fd]')\nprint('b', 2)\nprint('partial', end='')");
    assert.equal(order.sc.stdout, '[fd]ab 2\npartial');
    const err = await py(d.client, c, "print('before', end='')\n1/0");
    expectStatus(err, 'failed');
    assert.equal(err.sc.stdout, 'before');
    assert.match(err.sc.stderr, /ZeroDivisionError/);
    const slow = await py(d.client, c, "import time\nprint('waiting', end='')\ntime.sleep(60)", { timeout_seconds: 2 });
    expectStatus(slow, 'timed_out');
    assert.equal(slow.sc.stdout, 'waiting', describeRun(slow));
    const bye = await py(d.client, c, "print('bye', end='')\nexit(4)");
    assert.equal(bye.sc.exit_code, 4);
    assert.equal(bye.sc.stdout, 'bye');
  });

  test('garbage on the control channel ends only that conversation\'s state; the daemon and others are untouched', { timeout: T }, async () => {
    const other = await withState('bystander', 123);
    const hostile = [
      // A frame of an unknown type, a length past the limit, a closed
      // channel, the kernel killing itself.
      ['import os\nos.write(4, b"\\x00\\x00\\x00\\x05Zjunk")', 'protocol'],
      ['import os\nos.write(4, b"\\xff\\xff\\xff\\xff" + b"x" * 100)', 'protocol'],
      ['import os\nos.write(4, b"\\x00\\x00\\x00\\x10X{\\"id\\":999}")\nos.close(4)', 'protocol'],
      ['import os\nos.close(4)', 'protocol'],
      ['import os\nos.dup2(os.open("/dev/null", os.O_WRONLY), 4)', 'protocol'],
      ['import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', 'crash'],
    ];
    for (const [code, reason] of hostile) {
      const c = await withState('hostile');
      const r = await py(d.client, c, code);
      assert.ok(r.sc, r.text);
      assert.notEqual(r.sc.status, 'completed', describeRun(r));
      assert.equal(r.sc.session.lost, true, `${code}: ${JSON.stringify(r.sc.session)}`);
      assert.equal(r.sc.session.lost_reason, reason, `${code}: ${JSON.stringify(r.sc.session)}`);
      await expectLost(c, reason);
      await expectKept(other, 123);
    }

    // The kernel's input closed: the call itself ends normally, the next
    // one finds the kernel deaf, and it is replaced.
    {
      const c = await withState('deaf');
      const r = await py(d.client, c, 'import os\nos.close(3)\nprint("closed")');
      expectStatus(r, 'completed');
      const next = await py(d.client, c, 'print("never runs")');
      assert.equal(next.sc.session.lost_reason, 'protocol', describeRun(next) + JSON.stringify(next.sc.session));
      assert.equal(next.sc.stdout, '');
      await expectLost(c, 'protocol');
    }

    // Out of reach: the agent (PID 1) and its stream.
    const c = await withState('pid1');
    const r = await py(
      d.client,
      c,
      String.raw`import os, signal
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP):
    try:
        os.kill(1, s)
    except OSError as e:
        print('kill', s, type(e).__name__)
for p in ('/proc/1/fd/0', '/proc/1/fd/1'):
    try:
        open(p, 'wb').write(b'\0\0\0\x05Djunk')
        print('opened', p)
    except OSError as e:
        print('refused', p, type(e).__name__)
x += 1`,
    );
    expectStatus(r, 'completed');
    assert.doesNotMatch(r.sc.stdout, /opened/, r.sc.stdout);
    await expectKept(c, 2);

    // A flood of output: stopped at the limit, the session survives.
    const f = await py(d.client, c, "import os\nwhile True:\n    os.write(1, b'x' * 65536)");
    expectStatus(f, 'output_limit');
    await expectKept(c, 2);
    await expectKept(other, 123);

    const h = await d.health();
    assert.equal(h.status, 'ok', JSON.stringify(h));
    assert.equal(h.warm.busy, 0, JSON.stringify(h.warm));
  });

  test('TypeScript and Bash run warm: exit codes and stdin', { timeout: T }, async () => {
    const c = conv('langs');
    const b1 = await run(d.client, c, 'bash', 'read a; echo "got $a"; echo note >&2; exit 3', { stdin: 'hello\n' });
    expectStatus(b1, 'failed');
    expectSession(b1, 'new');
    assert.equal(b1.sc.exit_code, 3);
    assert.equal(b1.sc.stdout, 'got hello\n');
    assert.equal(b1.sc.stderr, 'note\n');
    assert.equal(b1.sc.session.stateful, false);
    const b2 = await run(d.client, c, 'bash', 'echo hi > /tmp/kept; cat /tmp/kept');
    expectStatus(b2, 'completed');
    expectSession(b2, 'continued');
    assert.equal(b2.sc.session.runs, 2);
    const b3 = await run(d.client, c, 'bash', 'cat /tmp/kept; read a || echo "no stdin"');
    assert.equal(b3.sc.stdout, 'hi\nno stdin\n', 'files in /tmp stay, stdin is empty without one');

    const t1 = await run(d.client, c, 'typescript', 'const t: string = await Bun.stdin.text();\nconsole.log("got " + t.trim());\nprocess.exit(4);', { stdin: 'from stdin\n' });
    expectStatus(t1, 'failed');
    expectSession(t1, 'new');
    assert.equal(t1.sc.exit_code, 4);
    assert.equal(t1.sc.stdout, 'got from stdin\n');
    assert.equal(t1.sc.session.lost_reason, 'exit', 'process.exit() ends the kernel (ts_session.test.mjs)');
    const t2 = await run(d.client, c, 'typescript', 'console.log([1, 2, 3].map((n: number) => n * 2).join(","));');
    expectStatus(t2, 'completed');
    expectSession(t2, 'restarted', 'exit');
    assert.equal(t2.sc.stdout, '2,4,6\n');
    // A TypeScript error is reported as a failure, not a dead session.
    const t3 = await run(d.client, c, 'typescript', 'throw new Error("boom");');
    expectStatus(t3, 'failed');
    assert.match(t3.sc.stderr, /boom/);
    const t4 = await run(d.client, c, 'typescript', 'console.log("alive")');
    expectSession(t4, 'continued');
    assert.equal(t4.sc.stdout, 'alive\n');
  });
});
