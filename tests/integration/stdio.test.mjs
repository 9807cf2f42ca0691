// SPDX-License-Identifier: MIT
// mcp-sandboxd --stdio: one local client on standard input and output, as
// Claude Desktop's "command" configuration starts it. The official SDK's
// StdioClientTransport runs code through it; the conversation is the one
// the HTTP token of the same tenant sees; bad lines get JSON-RPC errors on
// stdout (and nothing but JSON-RPC ever reaches stdout); closing stdin ends
// the daemon cleanly with no container left.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { BIN, connectHttp, freePort, sleep, umountBelow } from './lib/daemon.mjs';
import { instanceName, waitNoContainers } from './lib/sandbox.mjs';

/** The settings of one --stdio daemon (its own root, port and instance). */
async function stdioEnv(extra = {}) {
  const port = await freePort();
  const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-stdio-'));
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME ?? '/root',
    MCP_HTTP_ADDR: `127.0.0.1:${port}`,
    MCP_API_TOKEN: randomBytes(24).toString('hex'),
    FILE_SECRET: randomBytes(32).toString('hex'),
    SANDBOX_ROOT: root,
    MCP_INSTANCE_NAME: instanceName('stdio'),
    MCP_LOG_LEVEL: 'info',
    ...(process.env.ASAN_OPTIONS ? { ASAN_OPTIONS: process.env.ASAN_OPTIONS } : {}),
    ...(process.env.UBSAN_OPTIONS ? { UBSAN_OPTIONS: process.env.UBSAN_OPTIONS } : {}),
    ...extra,
  };
}

function cleanRoot(env) {
  umountBelow(env.SANDBOX_ROOT);
  rmSync(env.SANDBOX_ROOT, { recursive: true, force: true, maxRetries: 3 });
}

describe('the SDK client over --stdio', () => {
  let env;
  let transport;
  let client;
  let stderr = '';
  const conv = `stdio-${randomBytes(4).toString('hex')}`;

  before(async () => {
    env = await stdioEnv();
    transport = new StdioClientTransport({
      command: BIN,
      args: ['--stdio', '--env-file', '/dev/null'],
      env,
      stderr: 'pipe',
    });
    transport.stderr.on('data', (b) => {
      stderr += b.toString();
    });
    client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
  });
  after(async () => {
    await client?.close();
    if (env) cleanRoot(env);
  });

  test('lists the tools and runs Python', { timeout: 180_000 }, async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['run_code', 'list_files', 'upload_file', 'delete_file']) assert.ok(names.includes(n), `${n} in ${names}`);
    const r = await client.callTool(
      {
        name: 'run_code',
        arguments: { conversationId: conv, language: 'python', code: "open('out.csv','w').write('a,b\\n1,2\\n')\nprint(6*7)" },
      },
      undefined,
      { timeout: 170_000 },
    );
    assert.equal(r.structuredContent?.status, 'completed', JSON.stringify(r).slice(0, 2000));
    assert.equal(r.structuredContent.stdout, '42\n');
    const f = r.structuredContent.files.find((x) => x.name === 'out.csv');
    assert.ok(f, JSON.stringify(r.structuredContent.files));
    // The link is served by the same daemon's HTTP side.
    const got = await fetch(f.url);
    assert.equal(got.status, 200, f.url);
    assert.equal(await got.text(), 'a,b\n1,2\n');
  });

  test('a bad argument is a clear tool error, and the session goes on', { timeout: 60_000 }, async () => {
    const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'no-such-language', code: '1' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /no-such-language/);
    const l = await client.callTool({ name: 'list_files', arguments: { conversationId: conv } });
    assert.ok(l.structuredContent.files.some((x) => x.name === 'out.csv'));
  });

  test('the HTTP token of the same tenant sees the same conversation', { timeout: 60_000 }, async () => {
    const port = env.MCP_HTTP_ADDR.split(':')[1];
    const http = await connectHttp({ url: `http://127.0.0.1:${port}/mcp`, token: env.MCP_API_TOKEN });
    try {
      const l = await http.callTool({ name: 'list_files', arguments: { conversationId: conv } });
      assert.ok(l.structuredContent.files.some((x) => x.name === 'out.csv'), JSON.stringify(l.structuredContent));
    } finally {
      await http.close();
    }
  });

  test('nothing but logs on stderr', () => {
    assert.match(stderr, /serving MCP on standard input and output as tenant 'default'/);
  });
});

/** Spawns --stdio by hand: { proc, lines (parsed stdout), send(text), exit }. */
function rawStdio(env) {
  const proc = spawn(BIN, ['--stdio', '--env-file', '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  const notJson = [];
  let pending = '';
  let err = '';
  proc.stdout.on('data', (b) => {
    pending += b.toString();
    let i;
    while ((i = pending.indexOf('\n')) >= 0) {
      const l = pending.slice(0, i);
      pending = pending.slice(i + 1);
      try {
        lines.push(JSON.parse(l));
      } catch {
        notJson.push(l);
      }
    }
  });
  proc.stderr.on('data', (b) => {
    err += b.toString();
  });
  const exit = new Promise((r) => proc.once('exit', (code, sig) => r({ code, sig })));
  return {
    proc,
    lines,
    notJson,
    get stderr() {
      return err;
    },
    exit,
    send: (t) => proc.stdin.write(t),
    async waitFor(pred, what, ms = 30_000) {
      for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(20)) {
        const m = lines.find(pred);
        if (m) return m;
      }
      throw new Error(`no ${what} on stdout in ${ms} ms; stdout: ${JSON.stringify(lines).slice(0, 1000)}; stderr: ${err.slice(-2000)}`);
    },
  };
}

describe('the wire of --stdio', () => {
  let env;
  before(async () => {
    env = await stdioEnv({ MCP_MAX_BODY_BYTES: '4096' });
  });
  after(() => {
    if (env) cleanRoot(env);
  });

  test('bad lines get JSON-RPC errors; stdin closed ends the daemon', { timeout: 120_000 }, async () => {
    const s = rawStdio(env);
    s.send('this is not json\n');
    const parse = await s.waitFor((m) => m.error?.code === -32700, 'parse error');
    assert.equal(parse.id, null);
    assert.match(parse.error.message, /\S/);
    // Over MCP_MAX_BODY_BYTES: refused without reading it, with the limit named.
    s.send(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${'x'.repeat(10_000)}"}}\n`);
    const big = await s.waitFor((m) => m.error?.code === -32600, 'over-limit error');
    assert.match(big.error.message, /over the limit of 4096 \(MCP_MAX_BODY_BYTES\)/);
    // The session still works after both, with CRLF line ends too.
    s.send(
      `${JSON.stringify({
        jsonrpc: '2.0',
        id: 'init',
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      })}\r\n`,
    );
    const init = await s.waitFor((m) => m.id === 'init', 'initialize result');
    assert.equal(init.result?.protocolVersion, '2025-11-25', JSON.stringify(init));
    s.send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    s.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"conversationId":"raw","language":"bash","code":"echo hi; echo oops >&2"}}}\n');
    const run = await s.waitFor((m) => m.id === 2, 'run_code result', 100_000);
    assert.equal(run.result?.structuredContent?.stdout, 'hi\n', JSON.stringify(run).slice(0, 1500));
    assert.equal(run.result.structuredContent.stderr, 'oops\n');
    assert.deepEqual(s.notJson, [], 'stdout carries only JSON-RPC lines');
    s.proc.stdin.end();
    const ex = await Promise.race([s.exit, sleep(60_000).then(() => 'still running')]);
    assert.deepEqual(ex, { code: 0, sig: null }, `exit after stdin closed; stderr: ${s.stderr.slice(-2000)}`);
    assert.match(s.stderr, /standard input ended; stopping/);
    await waitNoContainers(env.MCP_INSTANCE_NAME);
  });

  test('a bad STDIO_TENANT is refused at start with the setting named', { timeout: 30_000 }, async () => {
    const s = rawStdio({ ...env, STDIO_TENANT: 'no spaces' });
    const ex = await s.exit;
    assert.notEqual(ex.code, 0);
    assert.match(s.stderr, /STDIO_TENANT='no spaces' must be/);
  });
});
