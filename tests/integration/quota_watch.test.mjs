// SPDX-License-Identifier: MIT
// The quota watch: a workspace that no file system holds to its quota
// (WORKSPACE_QUOTA_MODE=none, what daemon replicas and shared file systems
// use) is measured about once a second while a run goes on, and a run
// that writes past the quota is stopped with status quota_exceeded. Real
// daemon, real engine, official SDK client; one-off and warm runs, bytes
// and files.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connectHttp, startDaemon } from './lib/daemon.mjs';
import { SLOW, call, filesEnv, textOf } from './lib/files-http.mjs';

const RUN_MS = 120_000 * SLOW;
const duBytes = (dir) => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
const duInodes = (dir) => Number(execFileSync('du', ['-s', '--inodes', dir], { encoding: 'utf8' }).split('\t')[0]);
const QUOTA_MB = 16;
const MIB = 1024 * 1024;

// Writes 1 MiB every 50 ms (about 20 MB/s) into 8 MiB files, for at most
// 20 s (400 MiB) unless stopped: the overshoot is what the watch lets
// through between two looks and the stop.
const WRITER = [
  'import os, time',
  "os.makedirs('/data/big', exist_ok=True)",
  "chunk = b'x' * (1024 * 1024)",
  'for i in range(400):',
  "    with open(f'/data/big/f{i // 8}.bin', 'ab') as f:",
  '        f.write(chunk)',
  '    time.sleep(0.05)',
  "print('not stopped')",
].join('\n');

for (const warm of [false, true]) {
  describe(`quota mode none, ${warm ? 'warm sessions' : 'one-off runs'}: the quota watch`, () => {
    let d;
    let c;

    before(async () => {
      d = await startDaemon({
        name: `quota-watch-${warm ? 'warm' : 'oneoff'}`,
        env: filesEnv(`quota-watch-${warm}`, {
          WORKSPACE_QUOTA_MODE: 'none',
          WORKSPACE_QUOTA_MB: String(QUOTA_MB),
          WORKSPACE_MAX_FILES: '500',
          SANDBOX_WARM: String(warm),
          SANDBOX_POOL_SIZE: '0',
        }),
      });
      c = await connectHttp(d);
      assert.equal((await d.health()).workspaces.quotaMode, 'none');
    });
    after(async () => {
      await c?.close();
      await d?.stopClean();
    });

    test('a run that writes past the bytes quota is stopped with quota_exceeded, and says how far', { timeout: RUN_MS * 2 }, async (t) => {
      const conv = `bytes-${randomBytes(4).toString('hex')}`;
      const r = await call(c, 'run_code', { conversationId: conv, language: 'python', timeout_seconds: 60, code: WRITER }, { timeout: RUN_MS });
      const sc = r.structuredContent;
      assert.equal(sc.status, 'quota_exceeded', textOf(r));
      assert.equal(r.isError, true);
      assert.doesNotMatch(sc.stdout, /not stopped/);
      // Only the bytes are over: the message names that limit, not the files'.
      assert.match(textOf(r), /passed the workspace quota during the run \(over \d+ bytes, over its quota of 16777216 bytes\)/);
      assert.doesNotMatch(textOf(r), /files and directories/);
      assert.match(textOf(r), /delete files/);
      if (warm) assert.equal(sc.session?.state, 'new', JSON.stringify(sc.session));

      // The daemon's own count stops at the first limit passed: what was
      // written is measured on the host, the whole SANDBOX_ROOT (nothing
      // else in it is large). Past the quota, and stopped within about
      // three seconds of writing (two looks a second apart, the stop):
      // 20 MB/s x 3 s.
      const used = duBytes(d.root);
      t.diagnostic(`written when stopped: ${(used / MIB).toFixed(1)} MiB (quota ${QUOTA_MB} MiB), in ${r.structuredContent.duration_ms} ms`);
      assert.ok(used > QUOTA_MB * MIB, `past the quota: ${used}`);
      assert.ok(used <= QUOTA_MB * MIB + 64 * MIB * SLOW, `stopped within the bound: ${used} bytes`);
      // Counted as what it was, not as a cancel.
      const metrics = await (await fetch(`${d.base}/metrics`)).text();
      assert.match(metrics, /^mcpsd_runs_total\{status="quota_exceeded",language="python"[^}]*\} [1-9]/m);
      assert.doesNotMatch(metrics, /^mcpsd_runs_total\{status="cancelled"/m);

      // Over the quota: the next run is refused and says what to do; after
      // deleting files it runs again.
      const again = await call(c, 'run_code', { conversationId: conv, language: 'bash', code: 'echo hi' });
      assert.equal(again.isError, true);
      assert.match(textOf(again), /over its quota.*delete_file/);
      const del = await call(c, 'delete_file', { conversationId: conv, filename: 'big', recursive: true });
      assert.ok(!del.isError, textOf(del));
      const ok = await call(c, 'run_code', { conversationId: conv, language: 'bash', code: 'echo hi' });
      assert.equal(ok.structuredContent?.status, 'completed', textOf(ok));
      assert.equal(ok.structuredContent.stdout, 'hi\n');
    });

    test('a run that makes files without end is stopped at the file quota', { timeout: RUN_MS * 2 }, async (t) => {
      const conv = `files-${randomBytes(4).toString('hex')}`;
      const code = [
        'import os, time',
        "os.makedirs('/data/many', exist_ok=True)",
        'for i in range(20000):',
        "    open(f'/data/many/f{i}', 'w').close()",
        '    if i % 50 == 0:',
        '        time.sleep(0.05)',
        "print('not stopped')",
      ].join('\n');
      const before = duInodes(d.root);
      const r = await call(c, 'run_code', { conversationId: conv, language: 'python', timeout_seconds: 60, code }, { timeout: RUN_MS });
      assert.equal(r.structuredContent.status, 'quota_exceeded', textOf(r));
      assert.doesNotMatch(r.structuredContent.stdout, /not stopped/);
      assert.match(textOf(r), /passed the workspace quota during the run \(over \d+ files and directories, over its quota of 500\)/);
      assert.doesNotMatch(textOf(r), /16777216/);
      // At most 1,000 files a second: past 500, and far short of 20,000.
      const files = duInodes(d.root) - before;
      t.diagnostic(`files made when stopped: ${files} (quota 500)`);
      assert.ok(files > 500 && files <= 500 + 3500 * SLOW, `files and directories made: ${files}`);
    });

    test('a run within the quota is not touched by the watch', { timeout: RUN_MS }, async () => {
      const conv = `within-${randomBytes(4).toString('hex')}`;
      const code = "import time\nfor i in range(4):\n    open(f'/data/f{i}.bin', 'wb').write(b'x' * 1024 * 1024)\n    time.sleep(0.6)\nprint('done')";
      const r = await call(c, 'run_code', { conversationId: conv, language: 'python', code }, { timeout: RUN_MS });
      assert.equal(r.structuredContent.status, 'completed', textOf(r));
      assert.equal(r.structuredContent.stdout, 'done\n');
    });
  });
}
