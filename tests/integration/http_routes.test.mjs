// SPDX-License-Identifier: MIT
// The route table's policy against the real daemon on 127.0.0.1: a request
// refused on its head (401, 404, 405, 406, 413, 415) is answered at once
// and its body is not read beyond a small bounded linger, even from a
// client that keeps streaming after the server's FIN; well-behaved clients
// keep their keep-alive connections and read their refusals.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { authHeaders, initSession, sleep, startDaemon } from './lib/daemon.mjs';
import { connect, head, parseResponse } from './lib/rawhttp.mjs';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
// What a refused client may get accepted: the daemon's linger reads 1 MiB,
// the rest is what the two kernels' socket buffers hold.
const ACCEPTED_BOUND = 16 * MiB;
const FRAME = 64 * 1024;

let d;
let sid;
before(async () => {
  d = await startDaemon({ name: 'http-routes' });
  d.port = Number(new URL(d.base).port);
  sid = await initSession(d);
});
after(async () => {
  await d?.stopClean();
});

const mcpHead = (method, extra = []) =>
  head(method, '/mcp', [['Host', `127.0.0.1:${d.port}`], ['Content-Type', 'application/json'], ['Accept', 'application/json, text/event-stream'], ...extra]);

/**
 * Streams up to `total` body bytes after `headText` on a half-open socket:
 * like a hostile client, it keeps writing after the server's FIN, and stops
 * only when a write fails, the server closes, or maxMs pass. Returns the
 * response (parsed from what arrived), the body bytes the kernel accepted
 * from us, and whether and when the server closed.
 */
function stream(headText, { chunked = false, total = GiB, maxMs = 20000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port: d.port, allowHalfOpen: true });
    const t0 = Date.now();
    let received = Buffer.alloc(0);
    let sent = 0;
    let closedAt = null;
    let error = null;
    let done = false;
    const payload = Buffer.alloc(FRAME, 0x20);
    const frame = chunked ? Buffer.concat([Buffer.from(`${FRAME.toString(16)}\r\n`), payload, Buffer.from('\r\n')]) : payload;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      let response = null;
      try {
        response = parseResponse(received, true);
      } catch (e) {
        reject(e);
        return;
      }
      resolve({ response, sent, closedAfterMs: closedAt === null ? null : closedAt - t0, error });
    };
    const timer = setTimeout(finish, maxMs);
    sock.on('data', (b) => {
      if (received.length < 65536) received = Buffer.concat([received, b]);
    });
    sock.on('error', (e) => {
      error = e.code;
    });
    sock.on('close', () => {
      closedAt ??= Date.now();
      // Give a last read a moment, then report.
      setTimeout(finish, 50);
    });
    sock.on('connect', async () => {
      sock.write(headText);
      while (!done && closedAt === null && !error && sent < total) {
        const ok = await new Promise((res) => sock.write(frame, (e) => res(!e)));
        if (!ok) break;
        sent += FRAME;
      }
      // A stalled or failed write: wait for the server to close.
      const deadline = Date.now() + 10000;
      while (!done && closedAt === null && Date.now() < deadline) await sleep(20);
      finish();
    });
  });
}

/** Asserts a refusal on the head: status, close, and little accepted. */
function assertRefused(r, status, what) {
  assert.ok(r.response, `${what}: a response arrived (error ${r.error})`);
  assert.equal(r.response.status, status, `${what}: status (body ${r.response.body.slice(0, 200)})`);
  assert.equal(r.response.headers.get('connection'), 'close', `${what}: Connection: close`);
  assert.notEqual(r.closedAfterMs, null, `${what}: the server closed the connection`);
  assert.ok(r.sent < ACCEPTED_BOUND, `${what}: ${(r.sent / MiB).toFixed(1)} MiB accepted, fewer than ${ACCEPTED_BOUND / MiB} MiB`);
}

describe('a request refused on its head: answered at once, its body not read', () => {
  const chunkedHdr = ['Transfer-Encoding', 'chunked'];
  const gib = ['Content-Length', String(GiB)];
  const token = () => ['Authorization', `Bearer ${d.token}`];
  const cases = () => [
    ['a chunked body without a token', mcpHead('POST', [chunkedHdr]), true, 401],
    ['a Content-Length of 1 GiB without a token', mcpHead('POST', [gib]), false, 401],
    ['a chunked body with a wrong token', mcpHead('POST', [chunkedHdr, ['Authorization', 'Bearer not-the-token']]), true, 401],
    ['a method the route does not take', mcpHead('PUT', [chunkedHdr]), true, 405],
    ['a path that does not exist', head('POST', '/no/such/path', [['Host', `127.0.0.1:${d.port}`], gib]), false, 404],
    ['a body over the route limit (GET /healthz)', head('GET', '/healthz', [['Host', `127.0.0.1:${d.port}`], gib]), false, 413],
    ['1 GiB over MCP_MAX_BODY_BYTES, with a valid token', mcpHead('POST', [gib, token(), ['Mcp-Session-Id', sid]]), false, 413],
    [
      'a body that is not JSON, with a valid token',
      head('POST', '/mcp', [['Host', `127.0.0.1:${d.port}`], ['Content-Type', 'text/plain'], ['Accept', 'application/json, text/event-stream'], chunkedHdr, token()]),
      true,
      415,
    ],
    [
      'an Accept without text/event-stream, with a valid token',
      head('POST', '/mcp', [['Host', `127.0.0.1:${d.port}`], ['Content-Type', 'application/json'], ['Accept', 'application/json'], chunkedHdr, token()]),
      true,
      406,
    ],
  ];

  test('a client streaming up to 1 GiB after its head gets its answer and a close before 16 MiB', async () => {
    for (const [what, headText, chunked, status] of cases()) {
      const r = await stream(headText, { chunked });
      assertRefused(r, status, what);
      if (status === 401) {
        const j = JSON.parse(r.response.body);
        assert.equal(j.error.code, -32600, `${what}: JSON-RPC error`);
        assert.match(r.response.headers.get('www-authenticate') ?? '', /^Bearer realm="mcp"/, `${what}: challenge`);
      }
      if (status === 405) assert.equal(r.response.headers.get('allow'), 'GET, POST, DELETE', `${what}: Allow`);
    }
  });

  test('a client that stops at the FIN (rawhttp) reads its 401 and sees the close', async () => {
    const c = await connect(d.port);
    try {
      await c.write(mcpHead('POST', [chunkedHdr]));
      const frame = Buffer.concat([Buffer.from(`${FRAME.toString(16)}\r\n`), Buffer.alloc(FRAME, 0x20), Buffer.from('\r\n')]);
      let sent = 0;
      while (sent < GiB && !c.closed && !c.error) {
        if (!(await c.write(frame))) break;
        sent += FRAME;
      }
      const r = await c.response(5000);
      assert.equal(r.status, 401);
      await c.closedWithin(5000);
      assert.ok(sent < ACCEPTED_BOUND, `${(sent / MiB).toFixed(1)} MiB accepted`);
    } finally {
      c.destroy();
    }
  });

  test('fetch sending a 4 MiB body without a token reads its 401', async () => {
    const r = await fetch(d.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: Buffer.alloc(4 * MiB, 0x20),
      signal: AbortSignal.timeout(15000),
    });
    assert.equal(r.status, 401);
    assert.match((await r.json()).error.message, /missing bearer token/);
  });

  test('a small refused body: answered, then the connection is closed', async () => {
    const c = await connect(d.port);
    try {
      await c.write(mcpHead('POST', [['Content-Length', '40']]) + '{"jsonrpc":"2.0","id":1,"method":"ping"}');
      const r = await c.response(5000);
      assert.equal(r.status, 401);
      assert.equal(r.headers.get('connection'), 'close');
      await c.closedWithin(5000);
    } finally {
      c.destroy();
    }
  });

  test('refusals without a body keep the connection for the next request', async () => {
    const c = await connect(d.port);
    const host = ['Host', `127.0.0.1:${d.port}`];
    try {
      for (const [req, status] of [
        [head('GET', '/healthz', [host]), 200],
        [head('GET', '/no/such/path', [host]), 404],
        [mcpHead('POST', [['Content-Length', '0']]), 401],
        [head('DELETE', '/healthz', [host]), 405],
        [head('GET', '/healthz', [host]), 200],
      ]) {
        await c.write(req);
        const r = await c.response(5000);
        assert.equal(r.status, status, req.split('\r\n')[0]);
        assert.notEqual(r.headers.get('connection'), 'close', `${req.split('\r\n')[0]}: kept alive`);
      }
      assert.equal(c.closed, false, 'still open');
    } finally {
      c.destroy();
    }
  });

  test('a successful request keeps its connection too', async () => {
    const c = await connect(d.port);
    const body = '{"jsonrpc":"2.0","id":7,"method":"ping"}';
    try {
      for (let i = 0; i < 3; i++) {
        await c.write(mcpHead('POST', [['Content-Length', String(body.length)], ['Mcp-Session-Id', sid], ...Object.entries(authHeaders(d.token))]) + body);
        const r = await c.response(5000);
        assert.equal(r.status, 200);
        assert.equal(r.body, '{"jsonrpc":"2.0","id":7,"result":{}}');
      }
      // A body far over the small limit of other routes is read whole.
      const big = `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"pad":"${'x'.repeat(MiB)}"}}`;
      await c.write(mcpHead('POST', [['Content-Length', String(big.length)], ['Mcp-Session-Id', sid], ...Object.entries(authHeaders(d.token))]) + big);
      assert.equal((await c.response(10000)).body, '{"jsonrpc":"2.0","id":8,"result":{}}');
      assert.equal(c.closed, false);
    } finally {
      c.destroy();
    }
  });
});
