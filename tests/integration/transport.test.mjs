// SPDX-License-Identifier: MIT
// The MCP transport against the real daemon with the official SDK client:
// both transports with a bearer header, tools, progress, logging,
// cancellation, auth failures, sessions and wire-level error handling.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  FIXTURES_BIN,
  authHeaders,
  connectHttp,
  connectSse,
  initSession,
  post,
  sleep,
  startDaemon,
} from './lib/daemon.mjs';

let d;

before(async () => {
  d = await startDaemon({ bin: FIXTURES_BIN, name: 'transport' });
});
after(async () => {
  await d?.stopClean();
});

describe('Streamable HTTP with the SDK client', () => {
  test('connects with a bearer header, lists and calls tools', async () => {
    const c = await connectHttp(d);
    const { tools } = await c.listTools();
    assert.ok(tools.some((t) => t.name === 'test_simple_text'));
    for (const t of tools) assert.equal(t.inputSchema.type, 'object');
    const r = await c.callTool({ name: 'test_simple_text', arguments: {} });
    assert.equal(r.content[0].type, 'text');
    assert.match(r.content[0].text, /simple text/);
    await c.close();
  });

  test('receives progress before the result', async () => {
    const c = await connectHttp(d);
    const seen = [];
    const r = await c.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p.progress),
    });
    assert.deepEqual(seen, [0, 50, 100]);
    assert.equal(r.isError, undefined);
    await c.close();
  });

  test('receives log messages at the level set', async () => {
    const c = await connectHttp(d);
    const logs = [];
    c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    await c.setLoggingLevel('warning');
    await c.callTool({ name: 'test_tool_with_logging', arguments: {} });
    await sleep(100);
    assert.equal(logs.length, 0, 'info messages are below warning');
    await c.setLoggingLevel('debug');
    await c.callTool({ name: 'test_tool_with_logging', arguments: {} });
    await sleep(100);
    assert.deepEqual(
      logs.map((l) => l.data),
      ['Tool execution started', 'Tool processing data', 'Tool execution completed'],
    );
    await c.close();
  });

  test('cancelling a call stops the handler', async () => {
    const c = await connectHttp(d);
    const ac = new AbortController();
    const call = c.callTool({ name: 'test_sleep', arguments: { seconds: 30 } }, undefined, {
      signal: ac.signal,
    });
    await sleep(300);
    assert.equal((await d.health()).calls_running, 1);
    ac.abort('test cancels');
    await assert.rejects(call);
    let running = 1;
    for (let i = 0; i < 60 && running; i++) {
      await sleep(50);
      running = (await d.health()).calls_running;
    }
    assert.equal(running, 0, 'the handler saw notifications/cancelled and returned');
    await c.close();
  });

  test('a tool error is a result with isError', async () => {
    const c = await connectHttp(d);
    const r = await c.callTool({ name: 'test_error_handling', arguments: {} });
    assert.equal(r.isError, true);
    await assert.rejects(c.callTool({ name: 'no_such_tool', arguments: {} }), /unknown tool/);
    await c.close();
  });
});

describe('HTTP+SSE (legacy) with the SDK client', () => {
  test('connects with a bearer header, lists and calls tools with progress', async () => {
    const c = await connectSse(d);
    const { tools } = await c.listTools();
    assert.ok(tools.some((t) => t.name === 'test_tool_with_progress'));
    const seen = [];
    await c.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p.progress),
    });
    // The SDK's SSE client handles notifications a microtask late and the
    // response at once, so a notification in the same network read as the
    // result is dropped by the client: the last one may be missing here.
    assert.deepEqual(seen.slice(0, 2), [0, 50]);
    await c.close();
  });

  test('cancels a call', async () => {
    const c = await connectSse(d);
    const ac = new AbortController();
    const call = c.callTool({ name: 'test_sleep', arguments: { seconds: 30 } }, undefined, {
      signal: ac.signal,
    });
    await sleep(300);
    ac.abort();
    await assert.rejects(call);
    let running = 1;
    for (let i = 0; i < 60 && running; i++) {
      await sleep(50);
      running = (await d.health()).calls_running;
    }
    assert.equal(running, 0);
    await c.close();
  });

  test('POST /sse answers 405 so HTTP-first clients fall back', async () => {
    const r = await fetch(`${d.base}/sse`, { method: 'POST', headers: authHeaders(d.token) });
    assert.equal(r.status, 405);
  });

  test('unknown sessionId on /messages is 404 at once', async () => {
    const r = await fetch(`${d.base}/messages?sessionId=nope`, {
      method: 'POST',
      headers: { ...authHeaders(d.token), 'Content-Type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    assert.equal(r.status, 404);
  });
});

describe('authentication', () => {
  test('the SDK client without a token gets 401', async () => {
    const c = new Client({ name: 'noauth', version: '1' });
    await assert.rejects(c.connect(new StreamableHTTPClientTransport(new URL(d.url))), (e) => e.code === 401);
  });

  for (const [name, header, invalid] of [
    ['missing', undefined, false],
    ['empty', 'Bearer ', false],
    ['not bearer', 'Basic dXNlcjpwYXNz', false],
    ['wrong', 'Bearer 0000000000000000000000000000000000000000', true],
    ['near miss', null, true],
    ['wrong length', null, true],
  ]) {
    test(`${name} token: 401 with WWW-Authenticate`, async () => {
      let h = header;
      if (name === 'near miss') h = `Bearer ${d.token.slice(0, -1)}${d.token.endsWith('0') ? '1' : '0'}`;
      if (name === 'wrong length') h = `Bearer ${d.token}0`;
      const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
      if (h !== undefined) headers.Authorization = h;
      const r = await fetch(d.url, { method: 'POST', headers, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
      assert.equal(r.status, 401);
      const www = r.headers.get('www-authenticate');
      assert.match(www, /^Bearer realm="mcp"/);
      assert.equal(/invalid_token/.test(www), invalid);
      const body = await r.json();
      assert.equal(body.error.code, -32600);
    });
  }

  test('a token in the query string is not accepted', async () => {
    const r = await fetch(`${d.url}?access_token=${d.token}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    assert.equal(r.status, 401);
  });

  test('OAuth discovery paths are a clean 404', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const r = await fetch(`${d.base}${p}`);
      assert.equal(r.status, 404, p);
    }
  });

  test('/healthz is public and holds no secrets', async () => {
    const r = await fetch(`${d.base}/healthz`);
    assert.equal(r.status, 200);
    const text = await r.text();
    assert.ok(!text.includes(d.token));
    assert.equal(JSON.parse(text).status !== undefined, true);
  });
});

describe('sessions and the wire', () => {
  test('requests without Mcp-Session-Id are 400, unknown ids 404', async () => {
    let r = await post(d, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(r.status, 400);
    r = await post(d, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'Mcp-Session-Id': 'f'.repeat(64) });
    assert.equal(r.status, 404);
  });

  test('notifications get 202 with no body; ping gets {} with the exact id', async () => {
    const sid = await initSession(d);
    let r = await post(d, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'Mcp-Session-Id': sid });
    assert.equal(r.status, 202);
    assert.equal(await r.text(), '');
    r = await post(d, '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}', {
      'Mcp-Session-Id': sid,
    });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), '{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}');
    r = await post(d, { jsonrpc: '2.0', id: 'abc', method: 'ping' }, { 'Mcp-Session-Id': sid });
    assert.deepEqual(await r.json(), { jsonrpc: '2.0', id: 'abc', result: {} });
  });

  test('protocol version header: unsupported 400, other supported accepted', async () => {
    const sid = await initSession(d);
    let r = await post(d, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' });
    assert.equal(r.status, 400);
    r = await post(d, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-03-26' });
    assert.equal(r.status, 200);
  });

  test('version negotiation echoes supported versions and falls back to the newest', async () => {
    for (const [asked, got] of [
      ['2025-11-25', '2025-11-25'],
      ['2025-06-18', '2025-06-18'],
      ['2025-03-26', '2025-03-26'],
      ['2024-11-05', '2024-11-05'],
      ['2099-01-01', '2025-11-25'],
    ]) {
      const r = await post(d, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'v', version: '1' } },
      });
      assert.equal((await r.json()).result.protocolVersion, got);
    }
  });

  test('a second initialize on a session is refused', async () => {
    const sid = await initSession(d);
    const r = await post(
      d,
      { jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
      { 'Mcp-Session-Id': sid },
    );
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, -32600);
  });

  test('DELETE ends a session', async () => {
    const sid = await initSession(d);
    let r = await fetch(d.url, { method: 'DELETE', headers: { ...authHeaders(d.token), 'Mcp-Session-Id': sid } });
    assert.equal(r.status, 200);
    r = await post(d, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'Mcp-Session-Id': sid });
    assert.equal(r.status, 404);
  });

  test('malformed bodies: 400 with -32700, wrong media types 406/415', async () => {
    const sid = await initSession(d);
    let r = await post(d, '{"jsonrpc":', { 'Mcp-Session-Id': sid });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, -32700);
    r = await post(d, '['.repeat(100000) + ']'.repeat(100000), { 'Mcp-Session-Id': sid });
    assert.equal(r.status, 400);
    r = await post(d, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': sid, Accept: 'application/json' });
    assert.equal(r.status, 406);
    r = await post(d, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': sid, 'Content-Type': 'text/plain' });
    assert.equal(r.status, 415);
    r = await post(d, { jsonrpc: '2.0', id: 7, method: 'no/such' }, { 'Mcp-Session-Id': sid });
    assert.equal((await r.json()).error.code, -32601);
  });

  test('batches: allowed on 2025-03-26, refused later', async () => {
    const old = await initSession(d, '2025-03-26');
    let r = await post(
      d,
      [
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      ],
      { 'Mcp-Session-Id': old },
    );
    const arr = await r.json();
    assert.ok(Array.isArray(arr));
    assert.deepEqual(arr.map((m) => m.id).sort(), [1, 2]);
    const now = await initSession(d, '2025-11-25');
    r = await post(d, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], { 'Mcp-Session-Id': now });
    assert.equal(r.status, 400);
  });

  test('Host and Origin allow-lists (DNS rebinding)', async () => {
    const body = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
    const status = (headers) =>
      new Promise((resolve, reject) => {
        const req = http.request(d.url, { method: 'POST', headers: { ...headers, ...authHeaders(d.token), 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Content-Length': body.length } }, (res) => {
          res.resume();
          resolve(res.statusCode);
        });
        req.on('error', reject);
        req.end(body);
      });
    assert.equal(await status({ Host: 'evil.example.com' }), 403);
    assert.equal(await status({ Origin: 'http://evil.example.com' }), 403);
    assert.equal(await status({ Origin: 'http://localhost:6274' }), 400, 'allowed origin reaches the session check');
  });

  test('a second standalone GET stream on a session is 409', async () => {
    const sid = await initSession(d);
    const ac = new AbortController();
    const first = await fetch(d.url, { headers: { ...authHeaders(d.token), Accept: 'text/event-stream', 'Mcp-Session-Id': sid }, signal: ac.signal });
    assert.equal(first.status, 200);
    const second = await fetch(d.url, { headers: { ...authHeaders(d.token), Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
    assert.equal(second.status, 409);
    ac.abort();
  });
});

describe('load', () => {
  test('200 idle event streams do not starve a tool call', async () => {
    const streams = [];
    const agent = new http.Agent({ keepAlive: false, maxSockets: 1000 });
    try {
      for (let i = 0; i < 200; i++) {
        streams.push(
          await new Promise((resolve, reject) => {
            const req = http.get(`${d.base}/sse`, { agent, headers: { ...authHeaders(d.token), Accept: 'text/event-stream' } }, (res) => {
              res.once('data', () => resolve(req));
            });
            req.on('error', reject);
          }),
        );
      }
      assert.equal((await d.health()).streams_open >= 200, true);
      const c = await connectHttp(d);
      const seen = [];
      const r = await c.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
        onprogress: (p) => seen.push(p.progress),
      });
      assert.equal(seen.length, 3);
      assert.equal(r.isError, undefined);
      await c.close();
    } finally {
      for (const req of streams) req.destroy();
      agent.destroy();
    }
    let open = 200;
    for (let i = 0; i < 100 && open > 0; i++) {
      await sleep(50);
      open = (await d.health()).streams_open;
    }
    assert.equal(open, 0, 'closed streams are released');
  });
});
