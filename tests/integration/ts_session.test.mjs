// SPDX-License-Identifier: MIT
// Stateful TypeScript/JavaScript sessions (docs/sessions.md): the
// TypeScript image's sandbox.kernel label starts kernel.ts, and a
// conversation's calls share one global scope. Through the real MCP
// endpoint with the official SDK client, against the real engine and the
// real runner image: declarations (const, let, function, class) and
// imports (node built-ins, the image's packages, a file in /data, a package
// installed on demand from a registry served here) kept across calls; the
// last expression's value shown; TypeScript syntax accepted and a syntax
// error reported with its line; a runtime error with the user's line; what
// restarts a session (process.exit, running out of memory, the box killed
// with durable sessions on) said in the result, never "restored"; output
// order with large output; an awaiting call stopped by its timeout keeps
// the state.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { containersOf, describeRun } from './lib/sandbox.mjs';
import { npmPackage, serveRegistry } from './lib/npmreg.mjs';
import { SLOW, conv, expectSession, expectStatus, run, startWarm, stopWarm } from './lib/warm.mjs';

const T = 240_000 * SLOW; // per test: generous, the machine is shared
const ts = (client, c, code, extra, opts) => run(client, c, 'typescript', code, extra, opts);

describe('TypeScript sessions keep their state', () => {
  let d, reg;
  const c = conv('ts-state');

  before(async () => {
    reg = await serveRegistry([npmPackage('mcpsd-good', '1.0.0', 'good-1')]);
    d = await startWarm({ name: 'ts-session', env: { SANDBOX_PACKAGES_NPM_REGISTRY: reg.url } });
  });
  after(async () => {
    await stopWarm(d);
    await reg?.close();
  });

  test('a variable, a function, a class and imported modules are kept across calls', { timeout: T }, async () => {
    const w = await ts(d.client, c, 'await Bun.write("/data/helper.ts", "export const helperValue: number = 7;\\n"); "written"');
    expectStatus(w, 'completed');
    expectSession(w, 'new');
    assert.equal(w.sc.session.stateful, true, JSON.stringify(w.sc.session));

    const r1 = await ts(
      d.client,
      c,
      [
        'import * as path from "node:path";',
        'import { z } from "zod";',
        'import { helperValue } from "./helper.ts";',
        'const x: number = 41;',
        'let counter = 0;',
        'function twice(v: number): number { return 2 * v; }',
        'class Box<T> { constructor(public v: T) {} get(): T { return this.v; } }',
        'const rows = [{ a: 1 }, { a: 2 }, { a: 3 }];',
        'console.log("set");',
      ].join('\n'),
    );
    expectStatus(r1, 'completed');
    expectSession(r1, 'continued');
    assert.equal(r1.sc.stdout, 'set\n');

    const r2 = await ts(
      d.client,
      c,
      'counter += 1;\nconsole.log(x + 1, twice(21), new Box("b").get(), path.basename("/a/b.txt"), z.string().parse("ok"), helperValue, rows.length, counter);',
    );
    expectStatus(r2, 'completed');
    expectSession(r2, 'continued');
    assert.equal(r2.sc.stdout, '42 42 b b.txt ok 7 3 1\n', describeRun(r2));
    assert.equal(r2.sc.session.runs, 3);

    // A change in one call is seen by the next, a redeclaration replaces.
    const r3 = await ts(d.client, c, 'counter += 1;\nconst x = "again";\nrows.push({ a: 4 });');
    expectStatus(r3, 'completed');
    const r4 = await ts(d.client, c, 'console.log(counter, x, rows.map((r) => r.a).join(","));');
    assert.equal(r4.sc.stdout, '2 again 1,2,3,4\n', describeRun(r4));
  });

  test('a package installed in the middle of a session is imported, the state kept', { timeout: T }, async () => {
    const r = await ts(d.client, c, 'import good from "mcpsd-good";\nconsole.log(good.value, counter);', { packages: ['mcpsd-good'] });
    expectStatus(r, 'completed');
    expectSession(r, 'continued');
    assert.equal(r.sc.stdout, 'good-1 2\n', describeRun(r));
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-good']);
    const again = await ts(d.client, c, 'good.value');
    assert.deepEqual(again.sc.value, { 'text/plain': '"good-1"' });
  });

  test('the last expression is shown; a statement has no value', { timeout: T }, async () => {
    const r = await ts(d.client, c, 'const o = { a: 1, b: [1, 2], s: "x" };\no');
    expectStatus(r, 'completed');
    assert.match(r.sc.value['text/plain'], /a: 1,\s+b: \[ 1, 2 \],\s+s: "x"/);
    assert.match(r.text, /--- value of the last expression ---\n/);

    const n = await ts(d.client, c, 'await Promise.resolve(6 * 7)');
    assert.deepEqual(n.sc.value, { 'text/plain': '42' });

    // run_code's inputs arrive as the global inputs, beside the state.
    const i = await ts(d.client, c, 'inputs.rows.length + counter', { inputs: { rows: [1, 2, 3] } });
    assert.deepEqual(i.sc.value, { 'text/plain': '5' }, describeRun(i));

    const s = await ts(d.client, c, 'for (let i = 0; i < 2; i++) counter += i;\nundefined');
    expectStatus(s, 'completed');
    assert.equal(s.sc.value, undefined, describeRun(s));
  });

  test('TypeScript syntax runs; a syntax error says where, the state stays', { timeout: T }, async () => {
    const r = await ts(
      d.client,
      c,
      [
        'interface Point { x: number; y: number }',
        'type Pair<T> = [T, T];',
        'enum Color { Red, Green }',
        'const p: Point = { x: 1, y: 2 };',
        'const pair: Pair<string> = ["a", "b"];',
        'const n = <number>(p.x + p.y);',
        '`${n} ${Color[Color.Green]} ${pair.join("")}`',
      ].join('\n'),
    );
    expectStatus(r, 'completed');
    assert.deepEqual(r.sc.value, { 'text/plain': '"3 Green ab"' }, describeRun(r));

    // Types are stripped, not checked (as bun run does): a type error runs.
    const t = await ts(d.client, c, 'const wrong: number = "a string" as any as number;\ntypeof wrong');
    expectStatus(t, 'completed');
    assert.deepEqual(t.sc.value, { 'text/plain': '"string"' });

    const e = await ts(d.client, c, 'const fine = 1;\nconst broken = ;\n');
    expectStatus(e, 'failed');
    expectSession(e, 'continued');
    assert.match(e.sc.stderr, /main\.ts:2:\d+: error: Unexpected ;/);
    assert.equal(e.sc.error_name, 'SyntaxError', describeRun(e));
    const after = await ts(d.client, c, 'console.log(counter, typeof fine)');
    assert.equal(after.sc.stdout, '3 undefined\n', 'nothing of the broken call ran; the state is kept');
  });

  test('a runtime error names the line of the user\'s code, the state stays', { timeout: T }, async () => {
    const code = [
      '// a comment',
      'function inner(v: number): number {',
      '  if (v > 1) {',
      '    throw new Error(`too big: ${v}`);',
      '  }',
      '  return v;',
      '}',
      'const ok = inner(1);',
      'inner(ok + 1);',
    ].join('\n');
    const r = await ts(d.client, c, code);
    expectStatus(r, 'failed');
    expectSession(r, 'continued');
    assert.match(r.sc.stderr, /^Error: too big: 2\n/);
    assert.match(r.sc.stderr, /at inner \(main\.ts:4\)/, describeRun(r));
    assert.match(r.sc.stderr, /at <top level> \(main\.ts:9\)/, describeRun(r));
    assert.doesNotMatch(r.sc.stderr, /kernel\.ts|mcpsd-call/, 'no frame of the kernel');

    // A function of an earlier call fails later: its own call is named.
    const later = await ts(d.client, c, 'inner(5)');
    expectStatus(later, 'failed');
    assert.match(later.sc.stderr, /at inner \(main\.ts \(call \d+\):4\)/, describeRun(later));
    const still = await ts(d.client, c, 'ok + counter');
    assert.deepEqual(still.sc.value, { 'text/plain': '4' });

    // A rejected promise nobody awaited, a timer that throws: said on
    // stderr, the session lives on.
    const floating = await ts(
      d.client,
      c,
      'Promise.reject(new Error("floating"));\nsetTimeout(() => { throw new Error("in a timer"); }, 0);\nawait Bun.sleep(100);\n"after"',
    );
    expectStatus(floating, 'completed');
    assert.match(floating.sc.stderr, /Uncaught \(in promise\) Error: floating/);
    assert.match(floating.sc.stderr, /Uncaught Error: in a timer/);
    const alive = await ts(d.client, c, 'ok + counter');
    expectSession(alive, 'continued');
    assert.deepEqual(alive.sc.value, { 'text/plain': '4' });
  });

  test('output keeps its order with large output', { timeout: T }, async () => {
    const r = await ts(
      d.client,
      c,
      'for (let i = 0; i < 20000; i++) console.log(`line ${i} ${"x".repeat(20)}`);\nconsole.error("to stderr");\nprocess.stdout.write("tail\\n");\n"done"',
    );
    expectStatus(r, 'completed');
    assert.equal(r.sc.stderr, 'to stderr\n');
    assert.deepEqual(r.sc.value, { 'text/plain': '"done"' });
    // 620 kB: the head and tail come inline, the whole is saved.
    assert.equal(r.sc.stdout_truncated, true, describeRun(r));
    assert.ok(r.sc.stdout.startsWith(`line 0 ${'x'.repeat(20)}\n`), describeRun(r));
    assert.ok(r.sc.stdout.endsWith(`line 19999 ${'x'.repeat(20)}\ntail\n`), describeRun(r));
    assert.ok(r.sc.stdout_url, `the whole output is saved: ${Object.keys(r.sc)}`);
    const whole = await fetch(r.sc.stdout_url, { signal: AbortSignal.timeout(15_000) });
    assert.equal(whole.status, 200);
    const all = (await whole.text()).split('\n');
    assert.equal(all.length, 20002);
    assert.ok(all.slice(0, 20000).every((l, i) => l === `line ${i} ${'x'.repeat(20)}`), 'every line, in order');
    assert.equal(all[20000], 'tail');
  });

  test('an awaiting call stopped by its timeout keeps the state', { timeout: T }, async () => {
    const r = await ts(d.client, c, 'console.log("waiting");\nawait new Promise((r) => setTimeout(r, 120_000));', { timeout_seconds: 2 });
    expectStatus(r, 'timed_out');
    assert.equal(r.sc.session.lost, false, describeRun(r));
    const after = await ts(d.client, c, 'counter');
    expectSession(after, 'continued');
    assert.deepEqual(after.sc.value, { 'text/plain': '3' });
  });

  test('process.exit() ends the session\'s state and says so', { timeout: T }, async () => {
    const r = await ts(d.client, c, 'console.log("bye");\nprocess.exit(3);');
    expectStatus(r, 'failed');
    assert.equal(r.sc.exit_code, 3);
    assert.equal(r.sc.stdout, 'bye\n');
    assert.equal(r.sc.session.lost, true);
    assert.equal(r.sc.session.lost_reason, 'exit');
    assert.match(r.text, /^NOTE: this run ended the TypeScript state/);
    const next = await ts(d.client, c, 'typeof counter');
    expectSession(next, 'restarted', 'exit');
    assert.match(next.text, /^NOTE: the TypeScript state of this conversation was lost before this run/);
    assert.deepEqual(next.sc.value, { 'text/plain': '"undefined"' }, 'a new, empty scope');
    const alive = await ts(d.client, c, 'const again = 1;\nagain + 1');
    expectSession(alive, 'continued');
    assert.deepEqual(alive.sc.value, { 'text/plain': '2' });
  });

  test('running out of memory restarts the session and says so', { timeout: T }, async () => {
    const o = conv('ts-oom');
    const set = await ts(d.client, o, 'const kept = 1;');
    expectStatus(set, 'completed');
    const r = await ts(d.client, o, 'const hog: Uint8Array[] = [];\nfor (;;) hog.push(new Uint8Array(16 << 20).fill(1));');
    expectStatus(r, 'oom_killed');
    assert.equal(r.sc.session.lost, true, describeRun(r));
    assert.equal(r.sc.session.lost_reason, 'oom');
    const next = await ts(d.client, o, 'typeof kept');
    expectStatus(next, 'completed');
    expectSession(next, 'restarted', 'oom');
    assert.deepEqual(next.sc.value, { 'text/plain': '"undefined"' });
  });
});

describe('TypeScript sessions are not durable: after a restart they say so', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'ts-durable', env: { SANDBOX_STATE: 'true' } });
  });
  after(() => stopWarm(d));

  test('the box killed: the next call is "restarted", never "restored"; rewind_to is refused with the reason', { timeout: T }, async () => {
    const c = conv('ts-durable');
    const r1 = await ts(d.client, c, 'const v = 5;\nv');
    expectStatus(r1, 'completed');
    expectSession(r1, 'new');
    assert.equal(r1.sc.state, undefined, 'no state report: nothing is saved');

    const rw = await ts(d.client, c, 'v', { rewind_to: 1 });
    expectStatus(rw, 'failed');
    assert.match(rw.sc.stderr, /TypeScript sessions are not saved/);
    assert.equal(rw.sc.value, undefined, 'the code did not run');

    // The engine kills the box (as a host restart or crash would).
    const boxes = (await containersOf(d.instance, { all: false })).filter((b) => b.Labels?.['sandbox.kind'] === 'warm');
    assert.equal(boxes.length, 1, JSON.stringify(boxes.map((b) => b.Labels)));
    execFileSync('docker', ['kill', boxes[0].Id], { stdio: 'ignore' });
    const r2 = await ts(d.client, c, 'typeof v');
    expectStatus(r2, 'completed');
    assert.notEqual(r2.sc.session.state, 'restored', JSON.stringify(r2.sc.session));
    assert.match(r2.sc.session.state, /^(new|restarted)$/, JSON.stringify(r2.sc.session));
    assert.deepEqual(r2.sc.value, { 'text/plain': '"undefined"' });
  });
});
