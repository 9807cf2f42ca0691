// SPDX-License-Identifier: MIT
// run_code's per-call options through the real MCP endpoint with the
// official SDK client, against the real engine and runner images: usage
// in every result (peak memory and CPU time from the kernel's accounting,
// one-off and warm), per-call memory_mb and cpus within the operator's
// maxima (enforced, and a warm session steps aside for other limits), the
// inputs object reaching Python, TypeScript and Bash (one-off and warm),
// and bad values refused with a message that names the allowed range.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { describeRun, runCode } from './lib/sandbox.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, run, startWarm, stopWarm, until, waitPool } from './lib/warm.mjs';

const T = 240_000 * SLOW;
const MB = 1024 * 1024;

/** Python that holds n MB, touched page by page, then prints 'held'. */
const hold = (n) => `b = bytearray(${n} * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('held')`;

/** A refusal: no structured result, isError, the text matching re. */
function expectRefused(r, re) {
  assert.equal(r.sc, undefined, `refused before running: ${describeRun(r)}`);
  assert.equal(r.result.isError, true);
  assert.match(r.text, re);
}

describe('one-off runs (warm sessions off)', () => {
  let d;
  before(async () => {
    d = await startWarm({
      name: 'runopts-oneoff',
      env: {
        SANDBOX_WARM: 'false',
        SANDBOX_MEMORY_MB: '256',
        SANDBOX_MEMORY_MAX_MB: '512',
        SANDBOX_CPUS_MAX: '1',
        SANDBOX_MAX_INPUTS_BYTES: '1k',
      },
    });
  });
  after(() => stopWarm(d));

  test('a run reports its peak memory and CPU time beside the wall time', { timeout: T }, async () => {
    const r = await runCode(d.client, { conversationId: 'usage', language: 'python', code: hold(100) });
    expectStatus(r, 'completed');
    assert.ok(r.sc.memory_peak_bytes >= 100 * MB, `peak ${r.sc.memory_peak_bytes}: ${describeRun(r)}`);
    assert.ok(r.sc.memory_peak_bytes <= 256 * MB, `peak within the limit: ${r.sc.memory_peak_bytes}`);
    assert.equal(r.sc.memory_mb, 256);
    assert.equal(r.sc.cpus, 0.5);
    assert.ok(r.sc.cpu_ms >= 0, `cpu_ms ${r.sc.cpu_ms}`);
    assert.match(r.text, /\nusage: peak memory \d+\.\d MB of 256 MB, CPU time \d+ ms\n/);

    const busy = await runCode(d.client, {
      conversationId: 'usage',
      language: 'python',
      code: 'import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\nprint("spun")',
    });
    expectStatus(busy, 'completed');
    assert.ok(busy.sc.cpu_ms >= 900, `a busy second is counted: ${busy.sc.cpu_ms} ms; ${describeRun(busy)}`);
    // One thread at 0.5 CPU cannot use more CPU time than wall time.
    assert.ok(busy.sc.cpu_ms <= busy.sc.duration_ms + 200, `cpu ${busy.sc.cpu_ms} ms, wall ${busy.sc.duration_ms} ms`);
    assert.ok(busy.sc.memory_peak_bytes < 100 * MB, `a small program's peak: ${busy.sc.memory_peak_bytes}`);

    const sh = await runCode(d.client, { conversationId: 'usage', language: 'bash', code: 'echo hi' });
    expectStatus(sh, 'completed');
    assert.ok(sh.sc.memory_peak_bytes > 0 && sh.sc.cpu_ms >= 0, `every language: ${JSON.stringify(sh.sc)}`);
  });

  test('memory_mb is enforced per call: over it the run is oom_killed, within it the run completes', { timeout: T }, async () => {
    const small = await runCode(d.client, { conversationId: 'mem', language: 'python', code: hold(150), memory_mb: 64 });
    expectStatus(small, 'oom_killed');
    assert.equal(small.sc.memory_mb, 64);
    assert.match(small.sc.message, /memory limit of 64 MB/);
    assert.match(small.sc.message, /memory_mb/, 'the advice names the way out');
    assert.ok(small.sc.memory_peak_bytes <= 64 * MB + MB, `peak ${small.sc.memory_peak_bytes} within 64 MB`);

    // 300 MB does not fit the default of 256 MB, but fits when asked for.
    const dflt = await runCode(d.client, { conversationId: 'mem', language: 'python', code: hold(300) });
    expectStatus(dflt, 'oom_killed');
    const big = await runCode(d.client, { conversationId: 'mem', language: 'python', code: hold(300), memory_mb: 450 });
    expectStatus(big, 'completed');
    assert.equal(big.sc.stdout, 'held\n');
    assert.equal(big.sc.memory_mb, 450);
    assert.ok(big.sc.memory_peak_bytes >= 300 * MB, `peak ${big.sc.memory_peak_bytes}`);
  });

  test('cpus is applied per call', { timeout: T }, async () => {
    const code = 'import os\nprint(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip(), open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read().strip())';
    const r = await runCode(d.client, { conversationId: 'cpu', language: 'python', code, cpus: 1 });
    expectStatus(r, 'completed');
    assert.equal(r.sc.cpus, 1);
    const [quota, period] = r.sc.stdout.trim().split(' ').map(Number);
    assert.equal(quota / period, 1, `the box's CPU quota: ${r.sc.stdout}`);
    const q = await runCode(d.client, { conversationId: 'cpu', language: 'python', code, cpus: 0.25 });
    expectStatus(q, 'completed');
    const [q2, p2] = q.sc.stdout.trim().split(' ').map(Number);
    assert.equal(q2 / p2, 0.25);
  });

  test('bad memory_mb, cpus and inputs are refused with the allowed range', { timeout: T }, async () => {
    const base = { conversationId: 'bad', language: 'python', code: 'print(1)' };
    expectRefused(await runCode(d.client, { ...base, memory_mb: 513 }), /memory_mb must be a whole number from 16 to 512/);
    expectRefused(await runCode(d.client, { ...base, memory_mb: 8 }), /from 16 to 512/);
    expectRefused(await runCode(d.client, { ...base, memory_mb: 100.5 }), /memory_mb must be a whole number/);
    expectRefused(await runCode(d.client, { ...base, memory_mb: '128' }), /memory_mb must be a whole number/);
    expectRefused(await runCode(d.client, { ...base, cpus: 2 }), /cpus must be a number from 0\.01 to 1 /);
    expectRefused(await runCode(d.client, { ...base, cpus: 0 }), /cpus must be a number from 0\.01 to 1 /);
    expectRefused(await runCode(d.client, { ...base, inputs: [1, 2] }), /inputs must be a JSON object/);
    expectRefused(await runCode(d.client, { ...base, inputs: 'x' }), /inputs must be a JSON object/);
    expectRefused(
      await runCode(d.client, { ...base, inputs: { blob: 'x'.repeat(2000) } }),
      /inputs is \d+ bytes as JSON, more than the 1024 allowed/,
    );
  });

  test('inputs reach Python and TypeScript as a variable and every language as /sandbox/inputs.json', { timeout: T }, async () => {
    const inputs = { n: 3, names: ['a', 'b'], nested: { ok: true }, text: 'é "q"' };
    const p = await runCode(d.client, {
      conversationId: 'inputs',
      language: 'python',
      inputs,
      code: 'import json\nprint(inputs["n"] * 2, inputs["names"], inputs["nested"]["ok"], inputs["text"])\nprint(json.load(open("/sandbox/inputs.json")) == inputs)',
    });
    expectStatus(p, 'completed');
    assert.equal(p.sc.stdout, "6 ['a', 'b'] True é \"q\"\nTrue\n");

    const ts = await runCode(d.client, {
      conversationId: 'inputs',
      language: 'typescript',
      inputs,
      code: 'import { readFileSync } from "node:fs";\nconst n: number = inputs.n;\nconsole.log(n * 2, inputs.names.join(","), inputs.text);\nconsole.log(JSON.parse(readFileSync("/sandbox/inputs.json", "utf8")).nested.ok);',
    });
    expectStatus(ts, 'completed');
    assert.equal(ts.sc.stdout, '6 a,b é "q"\ntrue\n');

    const sh = await runCode(d.client, { conversationId: 'inputs', language: 'bash', inputs: { k: 'v' }, code: 'cat /sandbox/inputs.json; echo; test -w /sandbox/inputs.json || echo read-only' });
    expectStatus(sh, 'completed');
    assert.equal(sh.sc.stdout, '{"k":"v"}\nread-only\n');

    // Tracebacks keep the user's line numbers; without inputs there is no variable.
    const tb = await runCode(d.client, { conversationId: 'inputs', language: 'python', inputs: { a: 1 }, code: 'x = inputs["a"]\nraise ValueError("boom")' });
    expectStatus(tb, 'failed');
    assert.match(tb.sc.stderr, /main\.py", line 2/);
    const none = await runCode(d.client, { conversationId: 'inputs', language: 'python', code: 'print("inputs" in dir(__builtins__))' });
    expectStatus(none, 'completed');
    assert.equal(none.sc.stdout, 'False\n');
  });
});

describe('warm sessions', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'runopts-warm', env: { SANDBOX_MEMORY_MB: '256', SANDBOX_MEMORY_MAX_MB: '512' } });
  });
  after(() => stopWarm(d));

  test('warm runs report CPU time and the session peak; other limits run one-off and say so', { timeout: T }, async () => {
    const c = conv('limits');
    const first = await run(d.client, c, 'python', hold(100));
    expectStatus(first, 'completed');
    expectSession(first, 'new');
    assert.ok(first.sc.cpu_ms >= 0, `cpu_ms ${first.sc.cpu_ms}`);
    assert.ok(first.sc.memory_peak_bytes >= 100 * MB, `session peak ${first.sc.memory_peak_bytes}`);
    assert.match(first.text, /\nusage: peak memory \d+\.\d MB of 256 MB \(the session's\), CPU time \d+ ms\n/);

    const same = await run(d.client, c, 'python', 'print(len(b))', { memory_mb: 256 });
    expectStatus(same, 'completed');
    expectSession(same, 'continued');

    const other = await run(d.client, c, 'python', hold(150), { memory_mb: 64 });
    expectStatus(other, 'oom_killed');
    expectSession(other, 'none', 'limits');
    assert.match(other.text, /session: none, a one-off sandbox \(memory_mb or cpus other than the session's\)/);

    const cpus = await run(d.client, c, 'python', 'print("ok")', { cpus: 1 });
    expectStatus(cpus, 'completed');
    expectSession(cpus, 'none', 'limits');
    assert.ok(cpus.sc.memory_peak_bytes > 0, 'a one-off run in a warm server is measured too');

    const back = await run(d.client, c, 'python', 'print(len(b))');
    expectStatus(back, 'completed');
    expectSession(back, 'continued');
    assert.equal(back.sc.stdout, `${100 * MB}\n`, 'the session kept its state meanwhile');
  });

  test('inputs reach a warm Python session and a warm TypeScript run', { timeout: T }, async () => {
    const c = conv('inputs');
    const a = await run(d.client, c, 'python', 'print(inputs["n"])', { inputs: { n: 1 } });
    expectStatus(a, 'completed');
    assert.equal(a.sc.stdout, '1\n');
    const b = await run(d.client, c, 'python', 'print(inputs["n"])', { inputs: { n: 2 } });
    expectStatus(b, 'completed');
    expectSession(b, 'continued');
    assert.equal(b.sc.stdout, '2\n', 'each call sets inputs afresh');
    const gone = await run(d.client, c, 'python', 'import os\nprint(os.path.exists("/sandbox/inputs.json"))');
    expectStatus(gone, 'completed');
    assert.equal(gone.sc.stdout, 'False\n', "a call's inputs file does not outlive it");

    const ts = await run(d.client, c, 'typescript', 'console.log(inputs.list.length)', { inputs: { list: [1, 2, 3] } });
    expectStatus(ts, 'completed');
    assert.equal(ts.sc.session.state, 'new');
    assert.equal(ts.sc.stdout, '3\n');
  });
});

/** Python that prints the box's memory limit (MB) and CPUs from its cgroup. */
const LIMITS = String.raw`import os
def first(*paths):
    for p in paths:
        if os.path.exists(p):
            return open(p).read().split()
m = first('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes')
c = first('/sys/fs/cgroup/cpu.max')
if c is None:
    c = [open('/sys/fs/cgroup/cpu/cpu.cfs_quota_us').read().strip(), open('/sys/fs/cgroup/cpu/cpu.cfs_period_us').read().strip()]
print('limits', int(m[0]) // (1024 * 1024), round(int(c[0]) / int(c[1]), 2), 'x' in globals())
`;

/** Python that says how it runs, counts kernels in its box and takes 100 MB. */
const SMALL = String.raw`import sys
n = 0
for p in os.listdir('/proc'):
    try:
        a = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\0')
    except OSError:
        continue
    n += a[0].startswith(b'python') and b'/opt/mcp-sandboxd/kernel.py' in a
print(__name__, sys.argv[0], 'kernels', n)
block = bytearray(100 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
print('allocated', len(block) >> 20, 'MB')
`;

describe('one-off runs from the pool', () => {
  let d;
  before(async () => {
    d = await startWarm({
      name: 'runopts-once',
      pool: true,
      env: { SANDBOX_MEMORY_MB: '256', SANDBOX_MEMORY_MAX_MB: '512', SANDBOX_STATE: 'true' },
    });
    await waitPool(d);
  });
  after(() => stopWarm(d));

  test('other limits take a pool box with its limits changed; the session and its saved state stay as they were', { timeout: T }, async () => {
    const c = conv('once');
    const first = await run(d.client, c, 'python', "x = 41\nprint('set')");
    expectStatus(first, 'completed');
    expectSession(first, 'new');
    const saved = first.sc.session.saved_runs;
    await waitPool(d);
    const idsBefore = new Set((await boxesOf(d)).map((b) => b.Id));

    const big = await run(d.client, c, 'python', LIMITS + hold(300), { memory_mb: 512, cpus: 1 });
    expectStatus(big, 'completed');
    expectSession(big, 'none', 'limits');
    assert.equal(big.sc.session.from_pool, true, 'a pre-started box, not a container of its own');
    assert.equal(big.sc.session.stateful, false, JSON.stringify(big.sc.session));
    assert.equal(big.sc.session.runs, undefined, 'no session figures for a one-off run');
    assert.match(big.text, /\nsession: none, a one-off sandbox \(memory_mb or cpus other than the session's\), pre-started\n/);
    assert.match(big.sc.stdout, /^limits 512 1(\.0)? False\nheld\n$/, 'its memory limit and CPUs are the run\'s; nothing of the session in it');
    assert.equal(big.sc.memory_mb, 512);

    // The pool box is gone once the run is over (ended by the next
    // housekeeping tick), and the pool is refilled.
    const gone = await until(async () => {
      const now = (await boxesOf(d)).map((b) => b.Id);
      return [...idsBefore].filter((id) => !now.includes(id)).length === 1;
    }, 15_000 * SLOW);
    assert.ok(gone, 'the one-off run\'s box was removed');
    await waitPool(d);

    const back = await run(d.client, c, 'python', 'print(x + 1)');
    expectStatus(back, 'completed');
    expectSession(back, 'continued');
    assert.equal(back.sc.stdout, '42\n', 'the session kept its state');
    assert.deepEqual(back.sc.session.saved_runs?.filter((n) => !(saved ?? []).includes(n)).length, 1,
      `the one-off run saved no state of its own: ${JSON.stringify(back.sc.session.saved_runs)} after ${JSON.stringify(saved)}`);

    const bash = await run(d.client, c, 'bash', 'nproc; echo ok', { cpus: 1 });
    expectStatus(bash, 'completed');
    expectSession(bash, 'none', 'limits');
    assert.equal(bash.sc.session.from_pool, true, 'every pooled language');

    // Below the default memory too: the claim ends the pool box's kernel
    // (and its preloaded libraries) first, so the program has the whole
    // limit, and runs as a program of its own, as in a container.
    const small = await run(d.client, c, 'python', LIMITS + SMALL, { memory_mb: 128 });
    expectStatus(small, 'completed');
    expectSession(small, 'none', 'limits');
    assert.equal(small.sc.session.from_pool, true, 'a pre-started box below the sessions\' memory too');
    assert.equal(small.sc.stdout, 'limits 128 0.5 False\n__main__ /sandbox/main.py kernels 0\nallocated 100 MB\n', small.text);
    await waitPool(d);
    const smallBash = await run(d.client, c, 'bash', 'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes', { memory_mb: 64 });
    expectStatus(smallBash, 'completed');
    expectSession(smallBash, 'none', 'limits');
    assert.equal(smallBash.sc.session.from_pool, true);
    assert.equal(Number(smallBash.sc.stdout.trim()), 64 * MB, 'its memory limit lowered to the run\'s');
  });
});
