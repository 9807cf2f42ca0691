// SPDX-License-Identifier: MIT
// Whole outputs saved under /data/.mcp are bounded: one conversation floods
// its output twenty times (each flood is cut at SANDBOX_OUTPUT_MAX_BYTES,
// 16 MiB, and saved), and its workspace (100 MB) still takes a new file and
// a new run. The saved outputs kept are the newest, within
// SANDBOX_OUTPUT_SAVED_FILES and SANDBOX_OUTPUT_SAVED_BYTES; each result
// says which older ones were deleted, and their links are gone.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { callTool, runCode, startSandboxDaemon } from './lib/sandbox.mjs';

const MiB = 1024 * 1024;
const FLOODS = 20;
const SAVED_FILES = 10;
const SAVED_BYTES = 32 * MiB;
const OUTPUT_MAX = 16 * MiB;
const SAVED_URL = /\/files\/[0-9a-f]{64}\/\.mcp\/(stdout|stderr)-\d{8}T\d{6}Z-[0-9a-f]{6}\.txt$/;

let d;
before(async () => {
  // The defaults: 100 MB workspaces (a loop-mounted image where possible),
  // 16 MiB of output, 10 saved outputs and 32 MiB of them.
  d = await startSandboxDaemon({ name: 'saved-output' });
});
after(async () => {
  await d?.client?.close();
  await d?.stopClean();
});

/** The saved outputs in .mcp, by list_files: [{ name, size }]. */
async function savedOutputs(conv) {
  const l = await callTool(d.client, 'list_files', { conversationId: conv, path: '.mcp', limit: 1000 });
  assert.ok(l.sc, `list_files: ${l.text}`);
  return (l.sc.files ?? []).filter((f) => /^\.mcp\/std(out|err)-/.test(f.name));
}

describe('saved output is bounded', () => {
  const conv = `flood-${randomBytes(4).toString('hex')}`;
  const urls = [];
  const deleted = [];

  test(`${FLOODS} output floods in one conversation`, { timeout: 20 * 60_000 }, async () => {
    for (let i = 0; i < FLOODS; i++) {
      // Mostly stdout, some stderr, and now and then both at once (the
      // 16 MiB are for both streams together).
      const streams = i % 5 === 4 ? ['stdout', 'stderr'] : i % 2 ? ['stderr'] : ['stdout'];
      const each = streams.length === 2 ? 9 * MiB : 17 * MiB;
      const code = streams.map((s) => `head -c ${each} /dev/zero | tr '\\0' x${s === 'stderr' ? ' >&2' : ''}`).join(' &\n') + '\nwait';
      const r = await runCode(d.client, { conversationId: conv, language: 'bash', code, timeout_seconds: 120 }, { timeoutMs: 300_000 });
      const what = `flood ${i + 1} (${streams.join('+')})`;
      assert.equal(r.sc?.status, 'output_limit', `${what}: ${r.text.slice(0, 1500)}`);
      for (const s of streams) {
        const url = r.sc[`${s}_url`];
        assert.match(url ?? '', SAVED_URL, `${what}: ${s}_url (${r.text.slice(-1500)})`);
        assert.ok(r.text.includes(url), `${what}: the text links the saved ${s}`);
        urls.push(url);
      }
      const gone = r.sc.saved_outputs_deleted ?? [];
      for (const p of gone) {
        assert.match(p, /^\/data\/\.mcp\/std(out|err)-\d{8}T\d{6}Z-[0-9a-f]{6}\.txt$/, `${what}: deleted ${p}`);
        assert.ok(r.text.includes(p), `${what}: the text names ${p}`);
        deleted.push(p);
      }
      if (gone.length) assert.match(r.text, /older saved outputs? deleted/, `${what}: says what was deleted`);
      const saved = await savedOutputs(conv);
      const bytes = saved.reduce((n, f) => n + f.size, 0);
      assert.ok(saved.length <= SAVED_FILES, `${what}: ${saved.length} saved outputs kept`);
      assert.ok(bytes <= SAVED_BYTES, `${what}: ${bytes} bytes of saved outputs kept`);
      assert.ok(r.sc.workspace.bytesUsed < SAVED_BYTES + 8 * MiB, `${what}: the workspace holds ${r.sc.workspace.bytesUsed} bytes`);
    }
    // Each flood saved about 16 MiB: all but the last two or three were
    // deleted, and the results named every one of them.
    assert.ok(deleted.length >= urls.length - 3, `${deleted.length} of ${urls.length} saved outputs deleted`);
    assert.equal(new Set(deleted).size, deleted.length, 'each deleted once');
    for (const p of deleted) assert.ok(urls.some((u) => u.endsWith(p.slice('/data'.length))), `${p} was saved before`);
  });

  test('a deleted saved output is gone from its link; the newest is whole', { timeout: 120_000 }, async () => {
    assert.ok(urls.length >= FLOODS, 'the floods ran');
    let r = await fetch(urls[0]);
    assert.equal(r.status, 404, urls[0]);
    await r.arrayBuffer();
    r = await fetch(urls.at(-3));
    assert.equal(r.status, 200, urls.at(-3));
    assert.equal((await r.arrayBuffer()).byteLength, OUTPUT_MAX, 'a whole 16 MiB stream');
  });

  test('the workspace still takes a new file and a new run', { timeout: 300_000 }, async () => {
    const up = await callTool(d.client, 'upload_file', { conversationId: conv, filename: 'notes.txt', text: 'n'.repeat(5 * MiB) });
    assert.equal(up.result.isError ?? false, false, up.text);
    assert.equal(up.sc.size, 5 * MiB);
    // 40 MB more than the saved outputs could ever leave room for if
    // they were kept whole (20 x 16 MiB in a 100 MB workspace).
    const r = await runCode(
      d.client,
      { conversationId: conv, language: 'python', code: "open('big.bin', 'wb').write(b'x' * (40 * 1024 * 1024))\nprint('written')" },
      { timeoutMs: 300_000 },
    );
    assert.equal(r.sc?.status, 'completed', r.text.slice(0, 2000));
    assert.equal(r.sc.stdout, 'written\n');
    assert.ok(r.sc.files.some((f) => f.name === 'big.bin' && f.size === 40 * MiB), JSON.stringify(r.sc.files));
  });
});
