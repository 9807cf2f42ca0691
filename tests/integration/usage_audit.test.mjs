// SPDX-License-Identifier: MIT
// Usage per tenant and conversation, and the hash-chained audit trail,
// against the real daemon, engine and SDK client. Two tenants
// (MCP_API_TOKENS=alice:...,bob:...), one-off runs (SANDBOX_WARM=false, so
// every run's CPU time is its own container's cgroup figure, as the
// result's cpu_ms reports it). alice burns about 1 s of CPU, fails one run
// and runs in a second conversation; bob runs once. Then:
//  - /admin/usage (OPERATOR_TOKEN) says alice's CPU seconds within 10 % of
//    the sum of her results' cpu_ms, her runs by status, her two
//    conversations, as JSON and CSV; the API tokens do not open it;
//  - the `usage` tool shows each tenant its own figures and nothing of the
//    other's, even when asked for the other's conversation;
//  - /admin/audit lists every run of the test (the code's SHA-256 and, with
//    AUDIT_KEEP_CODE, the code; who; the conversation; status; limits; CPU),
//    each line checks on its own (SHA-256 of prev, "\n", the canonical
//    entry) and the lines link up;
//  - concurrent runs of both tenants keep one linear chain;
//  - an entry altered with the sqlite3 shell, then one deleted, are
//    reported at their seq by /admin/audit/verify (409) and by
//    `mcp-sandboxd audit verify` (exit 1).
// With PostgreSQL (a scratch server from tests/lib/pg.sh; skipped with the
// reason when it cannot start): two daemons sharing the store, runs ending
// on both at once, keep one chain, and an entry altered with psql is
// reported by both.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, connectHttp, freePort } from './lib/daemon.mjs';
import { skipReason, startPg } from './lib/pg.mjs';
import { callTool, describeRun, instanceName, removeContainersOf, runCode, startSandboxDaemon } from './lib/sandbox.mjs';

const ALICE = randomBytes(24).toString('hex');
const BOB = randomBytes(24).toString('hex');
const OPERATOR = randomBytes(24).toString('hex');
const BURN = 'import time\nwhile time.process_time() < 1.0:\n    pass\nprint("burnt")';

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

/** The canonical text of a value: sorted keys, no whitespace (audit_canon.h). */
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

describe('usage and the audit trail', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-audit-root-'));
  const instance = instanceName('usage-audit');
  const env = {
    SANDBOX_WARM: 'false',
    MCP_API_TOKENS: `alice:${ALICE},bob:${BOB}`,
    OPERATOR_TOKEN: OPERATOR,
    AUDIT_KEEP_CODE: 'true',
  };
  const ran = []; // every run of the test: { tenant, conv, code, sc }
  let d, alice, bob;

  const admin = (p, token = OPERATOR, headers = {}) =>
    fetch(`${d.base}${p}`, { headers: { Authorization: `Bearer ${token}`, ...headers } });

  async function run(client, tenant, args) {
    const r = await runCode(client, { language: 'python', timeout_seconds: 120, ...args });
    ran.push({ tenant, conv: args.conversationId, code: args.code, sc: r.sc });
    return r;
  }

  async function exportLines(query = '') {
    const r = await admin(`/admin/audit${query}`);
    assert.equal(r.status, 200, await r.clone().text());
    assert.match(r.headers.get('content-type'), /application\/x-ndjson/);
    return (await r.text())
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const j = JSON.parse(line);
        // The entry exactly as stored and hashed.
        j.raw = line.slice(line.indexOf('"entry":') + 8, -1);
        return j;
      });
  }

  before(async () => {
    d = await startSandboxDaemon({ name: 'usage-audit', root, keepRoot: true, instance, env, connect: false });
    alice = await connectHttp(d, { token: ALICE });
    bob = await connectHttp(d, { token: BOB });
  });

  after(async () => {
    await alice?.close();
    await bob?.close();
    await removeContainersOf(instance);
    // Clean, or the sanitizers' findings show here.
    await d?.stopClean();
    rmSync(root, { recursive: true, force: true });
  });

  test('runs of two tenants', async () => {
    const burn = await run(alice, 'alice', { conversationId: 'a-one', code: BURN });
    assert.equal(burn.sc?.status, 'completed', describeRun(burn));
    assert.ok(burn.sc.cpu_ms >= 950, `the loop used ${burn.sc.cpu_ms} ms of CPU`);
    const fail = await run(alice, 'alice', { conversationId: 'a-one', code: 'import sys\nsys.exit(3)' });
    assert.equal(fail.sc?.status, 'failed', describeRun(fail));
    const two = await run(alice, 'alice', { conversationId: 'a-two', code: 'open("/data/out.txt","w").write("x"*100)' });
    assert.equal(two.sc?.status, 'completed', describeRun(two));
    const b = await run(bob, 'bob', { conversationId: 'b-one', code: 'print(6 * 7)' });
    assert.equal(b.sc?.status, 'completed', describeRun(b));
  });

  test("/admin/usage: alice's CPU within 10 % of her runs' cgroup figures, runs by status", async (t) => {
    const mine = ran.filter((r) => r.tenant === 'alice');
    const cgroupS = mine.reduce((s, r) => s + r.sc.cpu_ms, 0) / 1000;
    const r = await admin('/admin/usage?tenant=alice&bucket=none');
    assert.equal(r.status, 200, await r.clone().text());
    const rep = await r.json();
    assert.equal(rep.bucket, 'none');
    assert.equal(rep.rows.length, 1, JSON.stringify(rep));
    const row = rep.rows[0];
    assert.equal(row.tenant, 'alice');
    t.diagnostic(`usage: ${row.cpu_seconds} CPU s; the runs' cgroups: ${cgroupS} s`);
    assert.ok(Math.abs(row.cpu_seconds - cgroupS) <= 0.1 * cgroupS, `usage says ${row.cpu_seconds} s, the cgroups ${cgroupS} s`);
    assert.equal(row.runs, 3);
    assert.deepEqual(row.runs_by_status, { completed: 2, failed: 1 });
    assert.ok(row.memory_mib_seconds > 0, JSON.stringify(row));
    assert.equal(row.egress_bytes, 0);
    assert.ok(row.storage_bytes >= 100, JSON.stringify(row));

    const all = await (await admin('/admin/usage?bucket=hour')).json();
    assert.deepEqual([...new Set(all.rows.map((x) => x.tenant))].sort(), ['alice', 'bob']);

    const byConv = await (await admin('/admin/usage?tenant=alice&by=conversation&bucket=none')).json();
    assert.deepEqual(
      byConv.rows.map((x) => [x.conversation, x.runs]),
      [
        ['a-one', 2],
        ['a-two', 1],
      ],
    );

    const csv = await admin('/admin/usage?tenant=alice&bucket=none&format=csv');
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type'), /text\/csv/);
    const lines = (await csv.text()).trim().split('\r\n');
    assert.match(lines[0], /^tenant,conversation,start,end,runs,completed,failed,/);
    assert.match(lines[1], /^alice,,\d+,\d+,3,2,1,/);
  });

  test('/admin/usage and /admin/audit need OPERATOR_TOKEN; bad questions say what to give', async () => {
    for (const p of ['/admin/usage', '/admin/audit', '/admin/audit/verify']) {
      const r = await admin(p, ALICE);
      assert.equal(r.status, 401, p);
      assert.match(await r.text(), /OPERATOR_TOKEN/);
      assert.equal((await fetch(`${d.base}${p}`)).status, 401, `${p} without a token`);
    }
    const bad = await admin('/admin/usage?from=yesterday');
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /2026-11-28T10:00:00Z/);
    const badBucket = await admin('/admin/usage?bucket=week');
    assert.equal(badBucket.status, 400);
    assert.match(await badBucket.text(), /hour, day, none/);
    const badLimit = await admin('/admin/audit?limit=0');
    assert.equal(badLimit.status, 400);
  });

  test('the usage tool shows a tenant its own usage only', async () => {
    const a = await callTool(alice, 'usage', { bucket: 'none' });
    assert.ok(!a.result.isError, a.text);
    assert.equal(a.sc.rows.length, 1);
    assert.equal(a.sc.rows[0].tenant, 'alice');
    assert.equal(a.sc.rows[0].runs, 3);
    assert.match(a.text, /^3 runs/);
    const b = await callTool(bob, 'usage', { bucket: 'none', by_conversation: true });
    assert.deepEqual(
      b.sc.rows.map((x) => [x.tenant, x.conversation, x.runs]),
      [['bob', 'b-one', 1]],
    );
    // Naming alice's conversation shows bob nothing of hers.
    const peek = await callTool(bob, 'usage', { bucket: 'none', conversationId: 'a-one' });
    assert.ok(!peek.result.isError, peek.text);
    assert.deepEqual(peek.sc.rows, []);
    const wrong = await callTool(bob, 'usage', { bucket: 'month' });
    assert.equal(wrong.result.isError, true);
    assert.match(wrong.text, /hour, day, none/);
  });

  test('/admin/audit lists every run, each line checks and the lines link up', async () => {
    const lines = await exportLines();
    assert.equal(lines.length, ran.length);
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i];
      const want = ran[i];
      assert.equal(l.seq, i + 1);
      assert.equal(l.prev, i ? lines[i - 1].hash : '0'.repeat(64));
      assert.equal(sha256(`${l.prev}\n${l.raw}`), l.hash, `line ${l.seq} checks alone`);
      assert.equal(canon(l.entry), l.raw, 'the stored text is canonical');
      const e = l.entry;
      assert.equal(e.kind, 'run');
      assert.equal(e.tool, 'run_code');
      assert.equal(e.tenant, want.tenant);
      assert.equal(e.conversation, want.conv);
      assert.equal(e.code_sha256, sha256(want.code));
      assert.equal(e.code, want.code);
      assert.equal(e.status, want.sc.status);
      assert.equal(e.language, 'python');
      assert.match(e.client, /^token:[0-9a-f]{12}$/);
      assert.equal(e.limits.network, false);
      assert.ok(e.limits.memory_mb > 0 && e.limits.timeout_s === 120, JSON.stringify(e.limits));
      assert.equal(e.used.cpu_ms, want.sc.cpu_ms);
      assert.deepEqual(e.network, { allowed: [], blocked: [], egress_bytes: 0 });
    }
    // Who: one client per token.
    assert.equal(lines[0].entry.client, lines[1].entry.client);
    assert.notEqual(lines[0].entry.client, lines[3].entry.client);
    // Files published.
    assert.deepEqual(lines[2].entry.files, [{ name: 'out.txt', size: 100 }]);

    const conv = await exportLines('?tenant=alice&conversation=a-one');
    assert.deepEqual(
      conv.map((l) => l.seq),
      [1, 2],
    );
    const page = await admin('/admin/audit?limit=2');
    assert.equal(page.headers.get('audit-last-seq'), '2');
    assert.deepEqual(
      (await exportLines('?after=2')).map((l) => l.seq),
      [3, 4],
    );
    const v = await (await admin('/admin/audit/verify')).json();
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.equal(v.entries, ran.length);
    assert.equal(v.head_hash, lines.at(-1).hash);
  });

  test('concurrent runs keep one linear chain', async () => {
    const before = ran.length;
    const rs = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((i) =>
        run(i % 2 ? bob : alice, i % 2 ? 'bob' : 'alice', { conversationId: `race-${i}`, code: `print(${i})` }),
      ),
    );
    for (const r of rs) assert.equal(r.sc?.status, 'completed', describeRun(r));
    const v = await (await admin('/admin/audit/verify')).json();
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.equal(v.entries, before + 6);
    const lines = await exportLines();
    assert.deepEqual(
      lines.map((l) => l.seq),
      lines.map((_, i) => i + 1),
    );
    assert.deepEqual(lines.slice(before).map((l) => l.entry.conversation).sort(), ['race-0', 'race-1', 'race-2', 'race-3', 'race-4', 'race-5']);
  });

  test('a tampered entry is reported by the endpoint and by `mcp-sandboxd audit verify`', async () => {
    const db = path.join(root, 'state.db');
    const cli = () =>
      spawnSync(BIN, ['--env-file', '/dev/null', 'audit', 'verify'], {
        // The daemon's own settings: the same store.
        env: { ...d.env, MCP_LOG_LEVEL: 'error' },
        encoding: 'utf8',
      });
    const ok = cli();
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(JSON.parse(ok.stdout).ok, true);

    // Entry 2 (alice's failed run) now claims to have completed.
    execFileSync('sqlite3', [db, `UPDATE audit_log SET body = replace(body, '"status":"failed"', '"status":"completed"') WHERE seq = 2`]);
    let r = await admin('/admin/audit/verify');
    assert.equal(r.status, 409);
    let v = await r.json();
    assert.equal(v.ok, false);
    assert.equal(v.broken_seq, 2);
    assert.match(v.reason, /entry 2 was altered/);
    const bad = cli();
    assert.equal(bad.status, 1, bad.stdout + bad.stderr);
    assert.equal(JSON.parse(bad.stdout).broken_seq, 2);
    assert.match(bad.stderr, /broken at entry 2/);

    // Put back, then remove entry 3 instead.
    execFileSync('sqlite3', [db, `UPDATE audit_log SET body = replace(body, '"status":"completed"', '"status":"failed"') WHERE seq = 2`]);
    assert.equal((await admin('/admin/audit/verify')).status, 200);
    execFileSync('sqlite3', [db, 'DELETE FROM audit_log WHERE seq = 3']);
    r = await admin('/admin/audit/verify');
    v = await r.json();
    assert.equal(r.status, 409);
    assert.equal(v.broken_seq, 3);
    assert.match(v.reason, /entry 3 is missing/);
  });
});

const pg = startPg();

describe('the audit trail in a PostgreSQL store shared by two daemons', { skip: pg ? false : skipReason }, () => {
  const instances = [0, 1].map((i) => instanceName(`audit-pg-${i}`));
  const d = [];
  const clients = [];

  const verify = (x) => fetch(`${x.base}/admin/audit/verify`, { headers: { Authorization: `Bearer ${OPERATOR}` } });

  before(async () => {
    pg.psql('CREATE DATABASE mcpsd_audit OWNER mcpsd');
    const ports = [await freePort(), await freePort()];
    const env = {
      SANDBOX_WARM: 'false',
      STORE_URL: pg.url('mcpsd_audit'),
      MCP_API_TOKENS: `alice:${ALICE}`,
      OPERATOR_TOKEN: OPERATOR,
      PUBLIC_BASE_URL: `http://127.0.0.1:${ports[0]}`,
      FILE_SECRET: randomBytes(32).toString('hex'),
    };
    for (const i of [0, 1]) {
      d[i] = await startSandboxDaemon({ name: `audit-pg-${i}`, port: ports[i], instance: instances[i], env, connect: false });
      clients[i] = await connectHttp(d[i], { token: ALICE });
    }
  });

  after(async () => {
    for (const i of [0, 1]) {
      await clients[i]?.close();
      await removeContainersOf(instances[i]);
      await d[i]?.stopClean();
    }
    pg.destroy();
  });

  test('runs ending on both replicas at once keep one chain; psql tampering is reported by both', async () => {
    const rs = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((i) => runCode(clients[i % 2], { language: 'python', conversationId: `pg-${i}`, code: `print(${i})` })),
    );
    for (const r of rs) assert.equal(r.sc?.status, 'completed', describeRun(r));
    // A replica's readers wait for the entries of runs that replica
    // answered, not another's: ask both first, so each has written its own.
    await Promise.all(d.map(async (x) => (await verify(x)).text()));
    for (const x of d) {
      const v = await (await verify(x)).json();
      assert.equal(v.ok, true, JSON.stringify(v));
      assert.equal(v.entries, 6);
      assert.equal(v.head_seq, 6);
    }
    assert.equal(pg.psql('SELECT count(DISTINCT prev) FROM audit_log', 'mcpsd_audit'), '6', 'no two entries continue from one');
    pg.psql(`UPDATE audit_log SET body = replace(body, '"exit_code":0', '"exit_code":1') WHERE seq = 4`, 'mcpsd_audit');
    for (const x of d) {
      const r = await verify(x);
      assert.equal(r.status, 409);
      const v = await r.json();
      assert.equal(v.broken_seq, 4, JSON.stringify(v));
    }
  });
});
