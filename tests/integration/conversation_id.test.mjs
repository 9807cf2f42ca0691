// SPDX-License-Identifier: MIT
// conversationId, the model's name for a chat, through the real endpoint
// with the official SDK client, against the real engine and runner images.
// All chats approved with one token are one tenant, so two chats that both
// call their conversation "demo" share its files and Python state: the
// tools must say that an id names one chat and must be unique to it, and a
// model that gives none gets an unguessable id minted by the server (in
// structuredContent and in a line of the text), which it passes in later
// calls of that chat. run_code and upload_file (the calls that may open a
// chat) mint; list_files and delete_file without an id are refused with a
// message that says to pass the id run_code returned. Also on the 2026-07-28
// wire (no Mcp-Param-Conversation-Id header when the argument is absent) and
// as a task.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { callTool, describeRun } from './lib/sandbox.mjs';
import { TASK_CAPS, modernCall, modernRequest, waitTask } from './lib/modern.mjs';
import { SLOW, run, startWarm, stopWarm } from './lib/warm.mjs';

const T = { timeout: 240_000 * SLOW };
const MINTED = /^c-[0-9a-f]{32}$/;

/** run_code without conversationId: { sc, result, text }. */
async function runNoId(client, code, extra = {}) {
  const r = await callTool(client, 'run_code', { language: 'python', code, ...extra }, { timeoutMs: 120_000 * SLOW });
  return r;
}

describe('conversationId: minted by the server when the model gives none', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'convid' });
  });
  after(() => stopWarm(d));

  test('the tools say an id names one chat, must be unique to it, and may be left out', T, async () => {
    const { tools } = await d.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ['run_code', 'upload_file']) {
      const s = byName[name].inputSchema;
      assert.ok(!(s.required ?? []).includes('conversationId'), `${name}: conversationId is optional`);
      const p = s.properties.conversationId.description;
      assert.match(p, /one chat/i, `${name}: ${p}`);
      assert.match(p, /unique/i, `${name}: ${p}`);
      assert.match(p, /omit/i, `${name}: ${p}`);
    }
    for (const name of ['list_files', 'delete_file']) {
      const s = byName[name].inputSchema;
      assert.ok(s.required.includes('conversationId'), `${name}: conversationId is required`);
      assert.match(s.properties.conversationId.description, /unique/i);
    }
    assert.match(byName.run_code.description, /unique to (that|one|this) chat/i, byName.run_code.description);
    assert.ok(byName.run_code.outputSchema.properties.conversationId, 'the output schema lists conversationId');
    // The server's instructions say it too (they said "pass the same id").
    assert.match(d.client.getInstructions(), /conversationId names one chat and must be unique to it/);
  });

  test('two calls without an id get two unguessable ids and share nothing; the returned id continues the chat', T, async () => {
    const a = await runNoId(d.client, "x = 41\nopen('/data/mine.txt', 'w').write('a')\nprint('set')");
    assert.equal(a.sc?.status, 'completed', describeRun(a));
    assert.match(a.sc.conversationId, MINTED, JSON.stringify(a.sc));
    assert.ok(a.text.includes(a.sc.conversationId), `the text carries the id: ${a.text}`);
    assert.match(a.text, /pass .*conversationId.* later call/i, a.text);

    const b = await runNoId(d.client, "import os\nprint('x' in globals(), os.path.exists('/data/mine.txt'))");
    assert.equal(b.sc?.status, 'completed', describeRun(b));
    assert.match(b.sc.conversationId, MINTED);
    assert.notEqual(b.sc.conversationId, a.sc.conversationId, 'a fresh id each time');
    assert.equal(b.sc.stdout, 'False False\n', 'another chat: neither the state nor the file is there');

    // The model passes the id back: the same chat, state and files kept.
    const again = await run(d.client, a.sc.conversationId, 'python', "print(x + 1, open('/data/mine.txt').read())");
    assert.equal(again.sc?.status, 'completed', describeRun(again));
    assert.equal(again.sc.stdout, '42 a\n');
    assert.equal(again.sc.session?.state, 'continued');
    assert.equal(again.sc.conversationId, a.sc.conversationId, 'a given id comes back as it was');
    assert.doesNotMatch(again.text, /pass .*conversationId.* later call/i, 'no note when the model gave the id');

    const files = await callTool(d.client, 'list_files', { conversationId: a.sc.conversationId });
    assert.ok(!files.result.isError, files.text);
    assert.deepEqual(
      files.sc.files.map((f) => f.name),
      ['mine.txt'],
    );
  });

  test('upload_file without an id mints one that run_code then uses', T, async () => {
    const up = await callTool(d.client, 'upload_file', { filename: 'in.csv', text: 'a,b\n1,2\n' });
    assert.ok(!up.result.isError, up.text);
    assert.match(up.sc.conversationId, MINTED, JSON.stringify(up.sc));
    assert.ok(up.text.includes(up.sc.conversationId), up.text);
    const r = await run(d.client, up.sc.conversationId, 'python', "print(open('/data/in.csv').read().split()[1])");
    assert.equal(r.sc?.stdout, '1,2\n', describeRun(r));
  });

  test('list_files and delete_file without an id say to pass the id run_code returned', T, async () => {
    for (const [name, args] of [
      ['list_files', {}],
      ['delete_file', { filename: 'x' }],
    ]) {
      const r = await callTool(d.client, name, args);
      assert.equal(r.result.isError, true, `${name}: ${r.text}`);
      assert.match(r.text, /conversationId is required/, r.text);
      assert.match(r.text, /run_code .*returned/, r.text);
    }
  });

  test('a bad id is still refused, not replaced', T, async () => {
    for (const bad of ['', 5, 'x'.repeat(300)]) {
      const r = await callTool(d.client, 'run_code', { conversationId: bad, language: 'python', code: 'print(1)' });
      assert.equal(r.result.isError, true, `${JSON.stringify(bad).slice(0, 20)}: ${r.text}`);
      assert.equal(r.sc, undefined, 'not run');
      assert.match(r.text, /conversationId/);
    }
  });

  test('2026-07-28: no argument wants no Mcp-Param-Conversation-Id header, and the minted id comes back', T, async () => {
    const r = await modernRequest(d, 'tools/call', { name: 'run_code', arguments: { language: 'python', code: 'print(7)' } });
    assert.equal(r.status, 200, r.text);
    const sc = r.message.result.structuredContent;
    assert.equal(sc.stdout, '7\n');
    assert.match(sc.conversationId, MINTED);
    // The next call of that chat mirrors the id in the header as usual.
    const next = await modernRequest(d, 'tools/call', {
      name: 'run_code',
      arguments: { conversationId: sc.conversationId, language: 'python', code: 'print(8)' },
    });
    assert.equal(next.status, 200, next.text);
    assert.equal(next.message.result.structuredContent.conversationId, sc.conversationId);
  });

  test('as a task: the minted id is in the task result', T, async () => {
    const created = await modernCall(
      d,
      'tools/call',
      { name: 'run_code', arguments: { language: 'python', code: 'print("task")' } },
      { caps: TASK_CAPS },
    );
    assert.equal(created.resultType, 'task');
    const t = await waitTask(d, created.taskId, { deadlineMs: 120_000 * SLOW, intervalMs: 300 });
    assert.equal(t.status, 'completed', JSON.stringify(t));
    assert.equal(t.result.structuredContent.stdout, 'task\n');
    assert.match(t.result.structuredContent.conversationId, MINTED);
  });
});
