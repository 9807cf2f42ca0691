// SPDX-License-Identifier: MIT
// Fairness between tenants in what the daemon keeps for them (issue 19 §3),
// against the real daemon with two tenants besides the default one
// (MCP_API_TOKENS=alice:...,bob:...): alice filling the server with
// upload_file on new conversation ids stops at her share of
// WORKSPACE_MAX_COUNT with a message saying what to do, while bob still
// opens new conversations; after a restart on the same SANDBOX_ROOT the
// counts come back from disk; a tenant creating workspaces faster than
// WORKSPACE_CREATE_BURST / WORKSPACE_CREATE_PER_HOUR is told when to try
// again while another is not slowed; the start-up log warns when
// WORKSPACE_MAX_COUNT x WORKSPACE_QUOTA_MB exceeds the free disk; and the
// results of ended tasks one token keeps in the store are bounded by
// MCP_TASK_RESULT_BYTES_PER_TENANT, its oldest ended tasks making room while
// another token's stay.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectHttp } from './lib/daemon.mjs';
import { TASK_CAPS, modernCall, waitTask } from './lib/modern.mjs';
import { callTool, instanceName, removeContainersOf, startSandboxDaemon } from './lib/sandbox.mjs';

const ALICE = randomBytes(24).toString('hex');
const BOB = randomBytes(24).toString('hex');
const TOKENS = `alice:${ALICE},bob:${BOB}`;

/** upload_file of a small new file into a conversation; { ok, text }. */
async function upload(client, conversationId) {
  const filename = `note-${randomBytes(4).toString('hex')}.txt`;
  const r = await callTool(client, 'upload_file', { conversationId, filename, text: 'hello' });
  return { ok: !(r.result.isError ?? false), text: r.text };
}

describe('workspaces per tenant', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-fair-root-'));
  const instance = instanceName('fair-ws');
  // Three tenants (default, alice, bob) share 6 workspaces: 2 each.
  const env = {
    MCP_API_TOKENS: TOKENS,
    MCP_API_TOKEN: randomBytes(24).toString('hex'),
    FILE_SECRET: randomBytes(32).toString('hex'),
    WORKSPACE_MAX_COUNT: '6',
    WORKSPACE_QUOTA_MB: '8',
  };
  const start = () => startSandboxDaemon({ name: 'fair-ws', root, keepRoot: true, instance, env, connect: false });
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  test('alice stops at her share of WORKSPACE_MAX_COUNT; bob still opens new conversations', async () => {
    d = await start();
    const alice = await connectHttp(d, { token: ALICE });
    const bob = await connectHttp(d, { token: BOB });
    // Alice tries to take every workspace the server has, and one more.
    let made = 0;
    let refusal;
    for (let i = 0; i <= 6 && !refusal; i++) {
      const r = await upload(alice, `alice-${i}`);
      if (r.ok) made++;
      else refusal = r.text;
    }
    assert.equal(made, 2, `alice made ${made} workspaces; refused with: ${refusal}`);
    assert.match(refusal, /this tenant already keeps 2 conversations' workspaces/);
    assert.match(refusal, /WORKSPACE_MAX_PER_TENANT/);
    assert.match(refusal, /WORKSPACE_RETENTION_HOURS/);
    assert.match(refusal, /conversationId of an earlier conversation/);
    // Her existing conversations still work.
    assert.equal((await upload(alice, 'alice-0')).ok, true, 'an existing conversation of alice');
    // Bob is not locked out.
    for (const id of ['bob-0', 'bob-1']) {
      const r = await upload(bob, id);
      assert.equal(r.ok, true, `bob's ${id}: ${r.text}`);
    }
    const h = await d.health();
    assert.equal(h.workspaces.count, 4);
    assert.equal(h.workspaces.maxPerTenant, 2);
    await alice.close();
    await bob.close();
  });

  test('after a restart the counts per tenant come back from disk', async () => {
    await d.stopClean();
    d = await start();
    const alice = await connectHttp(d, { token: ALICE });
    const dflt = await connectHttp(d);
    const r = await upload(alice, 'alice-new');
    assert.equal(r.ok, false, 'alice is still at her cap');
    assert.match(r.text, /keeps 2 conversations' workspaces/);
    const ok = await upload(dflt, 'default-0');
    assert.equal(ok.ok, true, `the default tenant has room: ${ok.text}`);
    await alice.close();
    await dflt.close();
  });
});

describe('the rate of new workspaces per tenant, and the disk check at start', () => {
  const instance = instanceName('fair-rate');
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stopClean();
  });

  test('a burst past WORKSPACE_CREATE_BURST is told when to retry; another tenant is not slowed', async () => {
    d = await startSandboxDaemon({
      name: 'fair-rate',
      instance,
      connect: false,
      env: {
        MCP_API_TOKENS: TOKENS,
        WORKSPACE_CREATE_BURST: '3',
        WORKSPACE_CREATE_PER_HOUR: '1',
        // 10 million workspaces of 100 MB: more than any disk here.
        WORKSPACE_MAX_COUNT: '10000000',
        WORKSPACE_QUOTA_MB: '100',
      },
    });
    const alice = await connectHttp(d, { token: ALICE });
    const bob = await connectHttp(d, { token: BOB });
    for (let i = 0; i < 3; i++) {
      const r = await upload(alice, `burst-${i}`);
      assert.equal(r.ok, true, `alice's ${i + 1} of 3: ${r.text}`);
    }
    const r = await upload(alice, 'burst-3');
    assert.equal(r.ok, false, 'the fourth at once is refused');
    assert.match(r.text, /faster than the server allows/);
    assert.match(r.text, /WORKSPACE_CREATE_BURST/);
    assert.match(r.text, /try again in \d+ s/);
    assert.equal((await upload(alice, 'burst-0')).ok, true, 'her existing conversations still work');
    const b = await upload(bob, 'burst-0');
    assert.equal(b.ok, true, `bob's first is not slowed: ${b.text}`);
    await alice.close();
    await bob.close();

    const log = readFileSync(d.logPath, 'utf8');
    assert.match(
      log,
      /WARN .*WORKSPACE_MAX_COUNT=10000000 workspaces of WORKSPACE_QUOTA_MB=100 can hold 1000000000 MB, more than the \d+ MB free under SANDBOX_ROOT=.*Lower WORKSPACE_MAX_COUNT to \d+( or WORKSPACE_QUOTA_MB to \d+)?, or give SANDBOX_ROOT more disk/,
      'the start-up log warns that the workspaces could outgrow the disk',
    );
  });
});

describe('task results per tenant', () => {
  const instance = instanceName('fair-tasks');
  const BOUND = 8192;
  let d;

  after(async () => {
    await removeContainersOf(instance);
    await d?.stopClean();
  });

  /** A run_code task of token, waited for; resolves { id, bytes }. */
  async function task(token, conversationId, n) {
    const created = await modernCall(
      d,
      'tools/call',
      { name: 'run_code', arguments: { conversationId, language: 'python', code: `print("x" * ${n})` } },
      { caps: TASK_CAPS, token },
    );
    assert.equal(created.resultType, 'task');
    const id = created.taskId;
    const end = Date.now() + 120_000;
    let t;
    for (;;) {
      t = await modernCall(d, 'tasks/get', { taskId: id }, { caps: TASK_CAPS, token });
      if (!['working', 'input_required'].includes(t.status) || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal(t.status, 'completed', JSON.stringify(t).slice(0, 600));
    // What the store keeps of it: the result as JSON text (and a message).
    return { id, bytes: Buffer.byteLength(JSON.stringify(t.result)) };
  }

  /** Whether tasks/get of id by token finds it; the refusal's text if not. */
  async function lookup(token, id) {
    try {
      await modernCall(d, 'tasks/get', { taskId: id }, { caps: TASK_CAPS, token });
      return { found: true };
    } catch (e) {
      return { found: false, message: e.rpc?.message ?? String(e) };
    }
  }

  test('a token keeps at most MCP_TASK_RESULT_BYTES_PER_TENANT of results; the oldest make room', async () => {
    d = await startSandboxDaemon({
      name: 'fair-tasks',
      instance,
      connect: false,
      env: {
        MCP_API_TOKENS: TOKENS,
        MCP_TASK_RESULT_MAX_BYTES: '4096',
        MCP_TASK_RESULT_BYTES_PER_TENANT: String(BOUND),
      },
    });
    // Each result holds its output twice (text and structuredContent):
    // about 2.1 kB (the first of a conversation also links its notebook,
    // and a warm run's carries its timing in _meta: about 2.6 kB), so
    // three fit in 8 kB and a fourth does not.
    const b1 = await task(BOB, 'fair-bob', 440);
    const a = [];
    for (let i = 0; i < 3; i++) a.push(await task(ALICE, 'fair-alice', 440));
    const size = a[0].bytes;
    assert.ok(size > BOUND / 4 && size * 3 < BOUND - 300, `a result is ${size} bytes: three fit in ${BOUND}, four do not`);
    for (const t of a) assert.equal((await lookup(ALICE, t.id)).found, true, 'three results fit');
    a.push(await task(ALICE, 'fair-alice', 440));
    const gone = await lookup(ALICE, a[0].id);
    assert.equal(gone.found, false, "alice's oldest result made room for her fourth");
    assert.match(gone.message, /MCP_TASK_RESULT_BYTES_PER_TENANT/, 'the refusal names the bound');
    for (const t of a.slice(1)) assert.equal((await lookup(ALICE, t.id)).found, true, 'the three newest stay');
    assert.equal((await lookup(BOB, b1.id)).found, true, "bob's older result is not alice's to drop");
  });
});
