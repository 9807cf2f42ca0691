// SPDX-License-Identifier: MIT
// Hostile HTTP against the real daemon on 127.0.0.1: bad tokens, malformed
// JSON-RPC, lying or conflicting framing, oversized heads and bodies, slow
// and idle clients, more connections than allowed. Each group runs its own
// daemon, checks that its memory stayed bounded and that it still exits 0
// on SIGTERM; a well-behaved SDK client is served throughout the slow and
// crowded ones. Raw sockets (lib/rawhttp.mjs) put bytes on the wire exactly
// as written. Every loop is bounded in count and every wait in time.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { authHeaders } from './lib/daemon.mjs';
import { connect, head, rawRequest } from './lib/rawhttp.mjs';
import {
  assertBounded,
  assertServed,
  cpuSeconds,
  initSession,
  mcpHeaders,
  procStatus,
  settleConnections,
  sleep,
  startAbuseDaemon,
  stopAndCheck,
  wellBehaved,
} from './lib/abuse.mjs';

const BODY_LIMIT = 2 * 1024 * 1024; // MCP_MAX_BODY_BYTES of the framing daemon
const HEADER_TIMEOUT = 2; // MCP_HEADER_TIMEOUT_SECONDS of the slow-client daemons
const BODY_TIMEOUT = 3; // MCP_BODY_TIMEOUT_SECONDS
// The watchdog looks once a second at whole-second deadlines: a deadline
// of T seconds cuts between T and T + 2 seconds; a little more for load.
const CUT_SLACK_MS = 3000;

const PING = (id) => `{"jsonrpc":"2.0","id":${id},"method":"ping"}`;
const WWW_MISSING = /^Bearer realm="mcp"$/;
const WWW_INVALID = /^Bearer realm="mcp", error="invalid_token", error_description="[^"\\]*MCP_API_TOKEN[^"\\]*"$/;

/** POSTs a body (string or bytes) exactly as given. */
async function postRaw(d, body, sid, headers = {}) {
  const r = await fetch(d.url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...authHeaders(d.token),
      ...(sid ? { 'Mcp-Session-Id': sid } : {}),
      ...headers,
    },
    body,
    signal: AbortSignal.timeout(10000),
  });
  return { status: r.status, text: await r.text(), headers: r.headers };
}

/** The id of a JSON-RPC answer as raw text (JSON.parse would round it). */
function rawId(text) {
  const m = /^\{"jsonrpc":"2\.0","id":(null|-?\d+|"(?:[^"\\]|\\.)*")[,}]/.exec(text);
  assert.ok(m, `not a JSON-RPC answer with an id first: ${text.slice(0, 200)}`);
  return m[1];
}

/** Asserts a clean JSON-RPC error: HTTP status, code and the id's text. */
function assertRpcError(r, status, code, id, what) {
  assert.equal(r.status, status, `${what}: HTTP status (body ${r.text.slice(0, 200)})`);
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/, `${what}: content type`);
  const j = JSON.parse(r.text);
  assert.equal(j.jsonrpc, '2.0', `${what}: envelope`);
  assert.equal(j.error?.code, code, `${what}: error code (message ${j.error?.message})`);
  assert.equal(typeof j.error.message, 'string');
  assert.equal(rawId(r.text), id, `${what}: id`);
}

/** Times from connect until the server closes, for each connection. */
async function closeTimes(conns, withinMs) {
  return Promise.all(
    conns.map(({ c, t0 }) =>
      c.closedWithin(withinMs).then(
        (t) => t - t0,
        () => Infinity,
      ),
    ),
  );
}

// ---------------------------------------------------------------------
describe('bearer tokens', () => {
  let d;
  let sid;
  let rss0;
  before(async () => {
    d = await startAbuseDaemon('tokens');
    sid = await initSession(d);
    rss0 = procStatus(d.pid).rssKb;
  });
  after(async () => {
    if (d && !d.exited) await d.stop('SIGKILL');
  });

  // [name, Authorization header values, path, expected]
  const flip = (t, i) => t.slice(0, i) + (t[i] === 'a' ? 'b' : 'a') + t.slice(i + 1);
  const cases = (tok) => [
    ['missing', [], '/mcp', 'missing'],
    ['empty', ['Bearer '], '/mcp', 'missing'],
    ['scheme only', ['Bearer'], '/mcp', 'missing'],
    ['other scheme', [`Basic ${Buffer.from(`x:${tok}`).toString('base64')}`], '/mcp', 'missing'],
    ['one character short', [`Bearer ${tok.slice(0, -1)}`], '/mcp', 'invalid'],
    ['one character long', [`Bearer ${tok}0`], '/mcp', 'invalid'],
    ['twice as long', [`Bearer ${tok}${tok}`], '/mcp', 'invalid'],
    ['near miss, first character', [`Bearer ${flip(tok, 0)}`], '/mcp', 'invalid'],
    ['near miss, middle character', [`Bearer ${flip(tok, tok.length >> 1)}`], '/mcp', 'invalid'],
    ['near miss, last character', [`Bearer ${flip(tok, tok.length - 1)}`], '/mcp', 'invalid'],
    ['upper-cased token', [`Bearer ${tok.toUpperCase()}`], '/mcp', 'invalid'],
    ['token and a second word', [`Bearer ${tok} extra`], '/mcp', 'invalid'],
    ['two tokens in one header', [`Bearer ${tok}, Bearer ${tok}`], '/mcp', 'invalid'],
    ['lowercase scheme', [`bearer ${tok}`], '/mcp', 'ok'],
    ['uppercase scheme', [`BEARER ${tok}`], '/mcp', 'ok'],
    ['trailing spaces', [`Bearer ${tok}   `], '/mcp', 'ok'],
    ['several spaces before the token', [`Bearer    ${tok}`], '/mcp', 'ok'],
    ['token in the query string only', [], `/mcp?access_token=${tok}`, 'missing'],
    ['token in the query string, wrong header', ['Bearer nope-nope-nope'], `/mcp?access_token=${tok}`, 'invalid'],
    ['two headers, valid then invalid', [`Bearer ${tok}`, 'Bearer nope-nope-nope'], '/mcp', 'invalid'],
    ['two headers, invalid then valid', ['Bearer nope-nope-nope', `Bearer ${tok}`], '/mcp', 'invalid'],
    ['two headers, both valid', [`Bearer ${tok}`, `Bearer ${tok}`], '/mcp', 'invalid'],
  ];

  test('each token variant gets 401 with the right WWW-Authenticate, or an answer', async () => {
    let n = 0;
    for (const [name, auths, path, expected] of cases(d.token)) {
      const id = `"tok-${n++}"`;
      const body = PING(id);
      const hdrs = [
        ['Host', d.hostHeader],
        ...auths.map((a) => ['Authorization', a]),
        ['Content-Type', 'application/json'],
        ['Accept', 'application/json, text/event-stream'],
        ['Mcp-Session-Id', sid],
        ['Content-Length', String(Buffer.byteLength(body))],
      ];
      const r = await rawRequest(d.port, head('POST', path, hdrs) + body);
      if (expected === 'ok') {
        assert.equal(r.status, 200, `${name}: status`);
        assert.equal(r.body, `{"jsonrpc":"2.0","id":${id},"result":{}}`, `${name}: body`);
        assert.equal(r.headers.get('www-authenticate'), undefined, `${name}: no challenge`);
        continue;
      }
      assert.equal(r.status, 401, `${name}: status`);
      assert.match(r.headers.get('www-authenticate'), expected === 'missing' ? WWW_MISSING : WWW_INVALID, `${name}: WWW-Authenticate`);
      const j = JSON.parse(r.body);
      assert.equal(j.error.code, -32600, `${name}: JSON-RPC error`);
      assert.equal(j.id, null, `${name}: id null (the request was not read)`);
      assert.ok(!r.body.includes(d.token), `${name}: the token is not echoed`);
    }
  });

  test('every authenticated route refuses a missing and a near-miss token', async () => {
    const wrong = `Bearer ${d.token.slice(0, -1)}x`;
    for (const [method, path, accept] of [
      ['GET', '/mcp', 'text/event-stream'],
      ['DELETE', '/mcp', '*/*'],
      ['GET', '/sse', 'text/event-stream'],
      ['POST', '/messages?sessionId=x', 'application/json'],
    ]) {
      for (const auth of [undefined, wrong]) {
        const hdrs = [['Host', d.hostHeader], ['Accept', accept], ['Mcp-Session-Id', sid], ['Content-Length', '0']];
        if (auth) hdrs.push(['Authorization', auth]);
        const r = await rawRequest(d.port, head(method, path, hdrs));
        assert.equal(r.status, 401, `${method} ${path} ${auth ? 'wrong' : 'missing'}`);
        assert.match(r.headers.get('www-authenticate'), auth ? WWW_INVALID : WWW_MISSING);
      }
    }
  });

  test('no token, right or wrong, reaches the log', () => {
    const log = readFileSync(d.logPath, 'utf8');
    assert.ok(!log.includes(d.token), 'the configured token is not logged');
    assert.ok(!log.includes(d.token.slice(0, -1)), 'near misses are not logged');
  });

  test('memory bounded, still alive, exits 0 on SIGTERM', async (t) => {
    assertBounded(d, rss0, 'the token checks', t);
    await stopAndCheck(d);
  });
});

// ---------------------------------------------------------------------
describe('malformed JSON-RPC', () => {
  let d;
  let sid; // 2025-11-25: one message per POST
  let old; // 2025-03-26: batches allowed
  let rss0;
  before(async () => {
    d = await startAbuseDaemon('jsonrpc');
    sid = await initSession(d);
    old = await initSession(d, '2025-03-26');
    rss0 = procStatus(d.pid).rssKb;
  });
  after(async () => {
    if (d && !d.exited) await d.stop('SIGKILL');
  });

  const N = 100000;
  const bytes = (...parts) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  const inString = (raw) => bytes('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"', raw, '"}}');

  test('10^5 levels of nesting are a parse error, not a crash', async () => {
    for (const [name, body] of [
      ['arrays', '['.repeat(N) + ']'.repeat(N)],
      ['objects', '{"a":'.repeat(N) + '1' + '}'.repeat(N)],
      ['alternating', '[{"a":'.repeat(N / 2) + '1' + '}]'.repeat(N / 2)],
      ['in params', '{"jsonrpc":"2.0","id":5,"method":"ping","params":' + '{"a":'.repeat(N) + '1' + '}'.repeat(N) + '}'],
      ['in a batch', '[' + '['.repeat(N) + ']'.repeat(N) + ']'],
      ['never closed', '['.repeat(N)],
    ]) {
      const r = await postRaw(d, body, name === 'in a batch' ? old : sid);
      assertRpcError(r, 400, -32700, 'null', `nesting, ${name}`);
      assert.match(JSON.parse(r.text).error.message, /nested too deeply|end of input/);
    }
  });

  test('NUL, control characters, lone surrogates and invalid UTF-8 are parse errors', async () => {
    for (const [name, body] of [
      ['escaped NUL in a value', inString('a\\u0000b')],
      ['escaped NUL in the method', '{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}'],
      ['escaped NUL in the id', '{"jsonrpc":"2.0","id":"a\\u0000","method":"ping"}'],
      ['escaped NUL in a key', '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\u0000":1}}'],
      ['raw NUL byte', inString([0x61, 0x00, 0x62])],
      ['raw control character', inString([0x01])],
      ['raw newline', inString('\n')],
      ['lone high surrogate', inString('\\ud800')],
      ['lone low surrogate', inString('\\udc00')],
      ['high surrogate then a letter', inString('\\ud800\\u0041')],
      ['surrogates reversed', inString('\\udc00\\ud800')],
      ['high surrogate at the end', inString('\\udbff')],
      ['bad escape', inString('\\x41')],
      ['short \\u escape', inString('\\u12')],
      ['byte 0xff', inString([0xff])],
      ['overlong slash', inString([0xc0, 0xaf])],
      ['overlong NUL', inString([0xc0, 0x80])],
      ['encoded surrogate (CESU-8)', inString([0xed, 0xa0, 0x80])],
      ['past U+10FFFF', inString([0xf4, 0x90, 0x80, 0x80])],
      ['truncated sequence', inString([0xe2, 0x82])],
      ['lone continuation byte', inString([0x80])],
      ['invalid UTF-8 outside strings', bytes('{"jsonrpc":"2.0","id":1,"method":"ping"', [0xff], '}')],
      ['byte order mark', bytes([0xef, 0xbb, 0xbf], PING(1))],
    ]) {
      assertRpcError(await postRaw(d, body, sid), 400, -32700, 'null', name);
    }
    // A valid pair, escaped or raw, is fine and comes back as sent.
    let r = await postRaw(d, PING('"\\ud83d\\ude00"'), sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":"\\ud83d\\ude00","result":{}}');
    r = await postRaw(d, PING('"😀 é"'), sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":"😀 é","result":{}}');
  });

  test('empty, blank, scalar, truncated and trailing bodies are parse errors', async () => {
    for (const [name, body] of [
      ['empty', ''],
      ['spaces', '   '],
      ['whitespace of every kind', ' \t\r\n \n\t'],
      ['number', '42'],
      ['string', '"ping"'],
      ['null', 'null'],
      ['true', 'true'],
      ['truncated', '{"jsonrpc":'],
      ['trailing comma', '{"jsonrpc":"2.0","id":1,"method":"ping",}'],
      ['single quotes', "{'jsonrpc':'2.0','id':1,'method':'ping'}"],
      ['trailing garbage', PING(1) + ' x'],
      ['two objects', PING(1) + PING(2)],
      ['NaN', '{"jsonrpc":"2.0","id":NaN,"method":"ping"}'],
      ['leading zero', '{"jsonrpc":"2.0","id":01,"method":"ping"}'],
      ['a number of 600 digits', PING('9'.repeat(600))],
    ]) {
      assertRpcError(await postRaw(d, body, sid), 400, -32700, 'null', name);
    }
  });

  test('wrong types for every envelope member: -32600, with the id when it is usable', async () => {
    for (const [name, body, id] of [
      ['jsonrpc a number', '{"jsonrpc":2.0,"id":1,"method":"ping"}', '1'],
      ['jsonrpc "1.0"', '{"jsonrpc":"1.0","id":1,"method":"ping"}', '1'],
      ['jsonrpc missing', '{"id":1,"method":"ping"}', '1'],
      ['jsonrpc null', '{"jsonrpc":null,"id":1,"method":"ping"}', '1'],
      ['jsonrpc an array', '{"jsonrpc":["2.0"],"id":1,"method":"ping"}', '1'],
      ['id an object', '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', 'null'],
      ['id an array', '{"jsonrpc":"2.0","id":[1],"method":"ping"}', 'null'],
      ['id true', '{"jsonrpc":"2.0","id":true,"method":"ping"}', 'null'],
      ['id false', '{"jsonrpc":"2.0","id":false,"method":"ping"}', 'null'],
      ['id a fraction', '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 'null'],
      ['id with an exponent', '{"jsonrpc":"2.0","id":1e2,"method":"ping"}', 'null'],
      ['id 1e999999', '{"jsonrpc":"2.0","id":1e999999,"method":"ping"}', 'null'],
      ['id -1e999999', '{"jsonrpc":"2.0","id":-1e999999,"method":"ping"}', 'null'],
      ['id null in a request', '{"jsonrpc":"2.0","id":null,"method":"ping"}', 'null'],
      ['method a number', '{"jsonrpc":"2.0","id":2,"method":42}', '2'],
      ['method null', '{"jsonrpc":"2.0","id":2,"method":null}', '2'],
      ['method empty', '{"jsonrpc":"2.0","id":2,"method":""}', '2'],
      ['method an object', '{"jsonrpc":"2.0","id":2,"method":{"name":"ping"}}', '2'],
      ['method an array', '{"jsonrpc":"2.0","id":"m","method":["ping"]}', '"m"'],
      ['params a string', '{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}', '3'],
      ['params a number', '{"jsonrpc":"2.0","id":3,"method":"ping","params":1e999999}', '3'],
      ['params true', '{"jsonrpc":"2.0","id":3,"method":"ping","params":true}', '3'],
      ['params null', '{"jsonrpc":"2.0","id":3,"method":"ping","params":null}', '3'],
      ['neither method nor result', '{"jsonrpc":"2.0","id":4}', '4'],
      ['result and error', '{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}', '4'],
      ['an empty object', '{}', 'null'],
    ]) {
      assertRpcError(await postRaw(d, body, sid), 400, -32600, id, name);
    }
  });

  test('wrong types inside params: -32602 with the id, HTTP 200', async () => {
    for (const [name, body] of [
      ['tools/call params an array', '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":["test_simple_text"]}'],
      ['tools/call name a number', '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":1e999999}}'],
      ['tools/call name an object', '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":{}}}'],
      ['tools/call arguments a string', '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"test_simple_text","arguments":"x"}}'],
      ['logging/setLevel level a number', '{"jsonrpc":"2.0","id":6,"method":"logging/setLevel","params":{"level":5}}'],
    ]) {
      assertRpcError(await postRaw(d, body, sid), 200, -32602, '6', name);
    }
  });

  test('ids come back exactly as sent', async () => {
    for (const id of [
      '0',
      '-0',
      '9007199254740993',
      '-9007199254740993',
      '9'.repeat(400),
      '-' + '1'.repeat(400),
      '""',
      '"  spaces, \\"quotes\\", \\\\ and \\/ "',
      '"\\u00e9\\u2028\\t"',
      '"' + 'x'.repeat(4000) + '"',
    ]) {
      const r = await postRaw(d, PING(id), sid);
      assert.equal(r.status, 200, `id ${id.slice(0, 40)}`);
      assert.equal(r.text, `{"jsonrpc":"2.0","id":${id},"result":{}}`);
    }
    // The same exactness on error answers.
    let r = await postRaw(d, `{"jsonrpc":"2.0","id":${'7'.repeat(400)},"method":"no/such"}`, sid);
    assertRpcError(r, 200, -32601, '7'.repeat(400), 'unknown method with a 400-digit id');
    // A string id longer than 4094 characters is refused, quoted back.
    const long = `"${'x'.repeat(10000)}"`;
    r = await postRaw(d, PING(long), sid);
    assertRpcError(r, 400, -32600, long, 'a 10000-character id');
  });

  test('huge numbers in params are harmless', async () => {
    const huge = `{"a":1e999999,"b":-1e999999,"c":1e-999999,"d":${'9'.repeat(400)},"e":-${'9'.repeat(400)}.5e-3}`;
    let r = await postRaw(d, `{"jsonrpc":"2.0","id":1,"method":"ping","params":${huge}}`, sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":1,"result":{}}');
    r = await postRaw(d, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":${huge}}}`, sid);
    assert.equal(r.status, 200);
    assert.match(JSON.parse(r.text).result.content[0].text, /simple text/);
    r = await postRaw(d, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":1e999999}}`, sid);
    assert.equal(r.status, 200);
    assert.equal(rawId(r.text), '3');
  });

  test('a numeric progressToken is echoed exactly, or not at all', async () => {
    // Integers below 2^53 survive cJSON's doubles and come back as sent.
    for (const tok of ['1', '-7', '9007199254740991']) {
      const r = await postRaw(
        d,
        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":${tok}}}}`,
        sid,
      );
      assert.equal(r.status, 200);
      assert.ok(r.text.includes(`"progressToken":${tok},`), `progressToken ${tok}`);
    }
    // Beyond that (or a fraction) the token cannot be echoed exactly, so the
    // request gets no progress rather than progress for a different token.
    for (const tok of ['9007199254740992', '9007199254740993', '9'.repeat(400), '1.5', '1e999999']) {
      const r = await postRaw(
        d,
        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":${tok}}}}`,
        sid,
      );
      assert.equal(r.status, 200);
      assert.ok(!r.text.includes('notifications/progress'), `no progress for ${tok.slice(0, 20)}`);
      assert.ok(r.text.includes('"result"'), 'the call still completes');
    }
  });

  test('duplicate keys: the first occurrence wins, for the id as for every member', async () => {
    let r = await postRaw(d, '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":1,"result":{}}');
    r = await postRaw(d, '{"jsonrpc":"2.0","\\u0069d":"esc","id":"plain","method":"ping"}', sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":"esc","result":{}}', 'an escaped spelling of "id" counts');
    r = await postRaw(d, '{"jsonrpc":"2.0","id":"a","method":"ping","method":"no/such"}', sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":"a","result":{}}');
    r = await postRaw(d, '{"jsonrpc":"2.0","id":{"x":1},"id":7,"method":"ping"}', sid);
    assertRpcError(r, 400, -32600, 'null', 'an unusable first id');
    r = await postRaw(d, '{"jsonrpc":"1.0","jsonrpc":"2.0","id":8,"method":"ping"}', sid);
    assertRpcError(r, 400, -32600, '8', 'a wrong first jsonrpc');
  });

  test('batches: over the cap refused whole, at the cap answered with every id', async () => {
    const batch = (n, id = (i) => i) => '[' + Array.from({ length: n }, (_, i) => PING(id(i))).join(',') + ']';
    for (const n of [65, 1000, 10000]) {
      assertRpcError(await postRaw(d, batch(n), old), 400, -32600, 'null', `batch of ${n}`);
    }
    assertRpcError(await postRaw(d, '[]', old), 400, -32600, 'null', 'empty batch');
    assertRpcError(await postRaw(d, batch(2), sid), 400, -32600, 'null', 'batch on 2025-11-25');
    const big = (i) => `${i + 1}${'0'.repeat(300)}`;
    const r = await postRaw(d, batch(64, big), old);
    assert.equal(r.status, 200);
    const ids = [...r.text.matchAll(/"id":(\d+)/g)].map((m) => m[1]).sort();
    assert.deepEqual(ids, Array.from({ length: 64 }, (_, i) => big(i)).sort());
  });

  test(
    'a batch answers every invalid member with an error (JSON-RPC 2.0 section 6)',
    async () => {
      let r = await postRaw(d, '[1,2]', old);
      assert.equal(r.status, 200);
      let j = JSON.parse(r.text);
      assert.equal(j.length, 2);
      for (const e of j) assert.equal(e.error.code, -32600);
      r = await postRaw(d, `[${PING(1)},{"jsonrpc":"2.0","id":{"a":1},"method":"ping"},{"foo":"boo"}]`, old);
      j = JSON.parse(r.text);
      assert.equal(j.length, 3);
    },
  );

  test('memory bounded, still alive, exits 0 on SIGTERM', async (t) => {
    assertBounded(d, rss0, 'the malformed JSON-RPC', t);
    await stopAndCheck(d);
  });
});

// ---------------------------------------------------------------------
describe('framing: Content-Length, Transfer-Encoding, header limits', () => {
  let d;
  let sid;
  let rss0;
  before(async () => {
    d = await startAbuseDaemon('framing', { MCP_MAX_BODY_BYTES: String(BODY_LIMIT) });
    sid = await initSession(d);
    rss0 = procStatus(d.pid).rssKb;
  });
  after(async () => {
    if (d && !d.exited) await d.stop('SIGKILL');
  });

  /** Sends a raw request; the response says whether the server then closed. */
  const send = (data, { kept = false } = {}) => rawRequest(d.port, data, { timeout: 5000, closeMs: kept ? 0 : 3000 });
  const post = (extra, body = '') => head('POST', '/mcp', mcpHeaders(d, sid, extra)) + body;

  test('invalid and negative Content-Length: 400 and the connection closed', async () => {
    // libmicrohttpd 0.9.75 answers these itself (and writes its status
    // line twice): only the status and the close are asserted.
    for (const v of ['-1', '-0', 'abc', '+5', '0x10', '5, 5', '5 5', '1e3', '']) {
      const r = await send(post([['Content-Length', v]], 'hello'));
      assert.equal(r.status, 400, `Content-Length: '${v}'`);
      assert.ok(r.closed, `Content-Length: '${v}' closes`);
    }
  });

  test('duplicated Content-Length, equal or not: 400 and closed', async () => {
    for (const [a, b] of [
      ['5', '6'],
      ['6', '5'],
      ['5', '5'],
    ]) {
      const r = await send(post([['Content-Length', a], ['Content-Length', b]], 'hello!'));
      assert.equal(r.status, 400, `${a} and ${b}`);
      assert.match(JSON.parse(r.body).error.message, /more than one Content-Length/);
      assert.ok(r.closed);
    }
  });

  test('Content-Length over the limit: 413 before any of the body is sent', async () => {
    for (const v of [String(BODY_LIMIT + 1), '9223372036854775807', '18446744073709551615']) {
      const c = await connect(d.port);
      try {
        await c.write(post([['Content-Length', v]])); // the head alone
        const r = await c.response(3000);
        assert.equal(r.status, 413, `Content-Length: ${v}`);
        assert.match(JSON.parse(r.body).error.message, /over the limit/);
        await c.closedWithin(3000);
      } finally {
        c.destroy();
      }
    }
    // Past 2^64 libmicrohttpd refuses it itself.
    let r = await send(post([['Content-Length', '99999999999999999999999']]));
    assert.equal(r.status, 413);
    // A client that asks first gets the 413 instead of 100 Continue.
    r = await send(post([['Content-Length', String(BODY_LIMIT + 1)], ['Expect', '100-continue']]));
    assert.equal(r.status, 413);
    // And within the limit, 100 Continue, then the answer.
    const c = await connect(d.port);
    try {
      await c.write(post([['Content-Length', String(PING(4).length)], ['Expect', '100-continue']]));
      assert.equal((await c.response(3000)).status, 100);
      await c.write(PING(4));
      assert.equal((await c.response(3000)).body, '{"jsonrpc":"2.0","id":4,"result":{}}');
    } finally {
      c.destroy();
    }
  });

  test('a client that sends an oversized body anyway still reads the 413', async () => {
    for (const size of [BODY_LIMIT + 1, 4 * BODY_LIMIT, 16 * BODY_LIMIT]) {
      const r = await postRaw(d, Buffer.alloc(size, 0x20), sid);
      assert.equal(r.status, 413, `${size} bytes`);
      assert.match(JSON.parse(r.text).error.message, /over the limit/);
    }
  });

  test('Transfer-Encoding with Content-Length, or not chunked: 400 and closed', async () => {
    const body = `${PING(1).length.toString(16)}\r\n${PING(1)}\r\n0\r\n\r\n`;
    for (const [name, extra] of [
      ['chunked and Content-Length', [['Transfer-Encoding', 'chunked'], ['Content-Length', String(body.length)]]],
      ['Content-Length and chunked', [['Content-Length', '5'], ['Transfer-Encoding', 'chunked']]],
      ['gzip', [['Transfer-Encoding', 'gzip']]],
      ['gzip, chunked', [['Transfer-Encoding', 'gzip, chunked']]],
      ['chunked, chunked', [['Transfer-Encoding', 'chunked, chunked']]],
      ['two headers', [['Transfer-Encoding', 'chunked'], ['Transfer-Encoding', 'chunked']]],
      ['identity', [['Transfer-Encoding', 'identity']]],
    ]) {
      const r = await send(post(extra, body));
      assert.equal(r.status, 400, name);
      assert.equal(JSON.parse(r.body).error.code, -32600, name);
      assert.ok(r.closed, `${name}: closed`);
    }
    // The honest forms work.
    let r = await send(post([['Transfer-Encoding', 'chunked']], body), { kept: true });
    assert.equal(r.body, '{"jsonrpc":"2.0","id":1,"result":{}}');
    r = await send(post([['Transfer-Encoding', 'chunked']], `${PING(2).length.toString(16)};ext=1\r\n${PING(2)}\r\n0\r\n\r\n`), { kept: true });
    assert.equal(r.body, '{"jsonrpc":"2.0","id":2,"result":{}}');
  });

  test('malformed chunks are refused', async () => {
    let r = await send(post([['Transfer-Encoding', 'chunked']], 'zz\r\nabc\r\n0\r\n\r\n'));
    assert.equal(r.status, 400);
    assert.ok(r.closed);
    r = await send(post([['Transfer-Encoding', 'chunked']], 'ffffffffffffffffffff\r\nabc'));
    assert.equal(r.status, 413);
    assert.ok(r.closed);
  });

  /** Streams chunks of 64 KiB until total bytes or the server stops it. */
  async function chunked(total, end) {
    const c = await connect(d.port);
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    await c.write(post([['Transfer-Encoding', 'chunked']]));
    let sent = 0;
    while (sent < total && !c.closed && !c.error) {
      if (!(await c.write(frame))) break;
      sent += chunk.length;
    }
    if (end) await c.write('0\r\n\r\n');
    return { c, sent };
  }

  test('a chunked body a little over the limit: 413 once it ends', async () => {
    const { c } = await chunked(BODY_LIMIT + BODY_LIMIT / 2, true);
    try {
      const r = await c.response(5000);
      assert.equal(r.status, 413);
      assert.match(JSON.parse(r.body).error.message, /over the limit/);
    } finally {
      c.destroy();
    }
  });

  test('huge chunked bodies are cut, in parallel too, and memory does not grow', async (t) => {
    const rssBefore = procStatus(d.pid).rssKb;
    const total = 40 * BODY_LIMIT; // 80 MiB offered per connection
    const runs = await Promise.all(Array.from({ length: 4 }, () => chunked(total, false)));
    try {
      for (const { c, sent } of runs) {
        await c.closedWithin(5000);
        assert.ok(sent < total, `cut after ${sent} of ${total} bytes`);
        // Cut past twice the limit: reset, or nothing said at all.
        assert.equal(c.received.length, 0);
      }
    } finally {
      for (const { c } of runs) c.destroy();
    }
    assertBounded(d, rssBefore, 'four huge chunked bodies', t);
  });

  test('huge headers: 431; more than 100 fields: 431; huge URL: 414; all closed', async () => {
    for (const [name, data, status] of [
      ['one 20 KiB header', post([['X-Big', 'a'.repeat(20 * 1024)]]), 431],
      ['one 1 MiB header', post([['X-Big', 'a'.repeat(1024 * 1024)]]), 431],
      ['120 small headers', post(Array.from({ length: 120 }, (_, i) => [`X-H${i}`, 'v'])), 431],
      ['101 headers in all', post(Array.from({ length: 101 - mcpHeaders(d, sid).length }, (_, i) => [`X-H${i}`, 'v'])), 431],
      ['5000 tiny headers', post(Array.from({ length: 5000 }, () => ['A', 'b'])), 431],
      ['a 30 KiB URL', head('GET', `/mcp?${'a'.repeat(30 * 1024)}`, mcpHeaders(d, sid)), 414],
      ['a 30 KiB method', head('A'.repeat(30 * 1024), '/mcp', mcpHeaders(d, sid)), 414],
    ]) {
      const r = await send(data);
      assert.equal(r.status, status, name);
      assert.ok(r.closed, `${name}: closed`);
    }
    // 100 fields exactly are fine.
    const r = await send(post([...Array.from({ length: 100 - mcpHeaders(d, sid).length - 1 }, (_, i) => [`X-H${i}`, 'v']), ['Content-Length', String(PING(3).length)]], PING(3)), { kept: true });
    assert.equal(r.body, '{"jsonrpc":"2.0","id":3,"result":{}}');
  });

  test('duplicate Host, missing Host, garbage request lines: refused and closed', async () => {
    for (const [name, data, status] of [
      ['two Host headers', `GET /healthz HTTP/1.1\r\nHost: ${d.hostHeader}\r\nHost: evil.example.com\r\n\r\n`, 400],
      ['no Host in HTTP/1.1', 'GET /healthz HTTP/1.1\r\n\r\n', 400],
      ['a header line without a colon', `GET /healthz HTTP/1.1\r\nHost: ${d.hostHeader}\r\nNoColon\r\n\r\n`, 400],
      ['HTTP/0.9', 'GET /\r\n\r\n', 400],
      ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 505],
    ]) {
      const r = await send(data);
      assert.equal(r.status, status, name);
      assert.ok(r.closed, `${name}: closed`);
    }
    // A TLS ClientHello on the plain port: closed without an answer.
    const c = await connect(d.port);
    await c.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, ...Buffer.alloc(64, 1), 0x0d, 0x0a, 0x0d, 0x0a]));
    await c.closedWithin(3000);
    c.destroy();
  });

  test('memory bounded, still alive and serving, exits 0 on SIGTERM', async (t) => {
    assertBounded(d, rss0, 'the framing abuse', t);
    const r = await postRaw(d, PING(9), sid);
    assert.equal(r.text, '{"jsonrpc":"2.0","id":9,"result":{}}');
    await stopAndCheck(d);
  });
});

// ---------------------------------------------------------------------
describe('slow clients', () => {
  let d;
  let sid;
  let rss0;
  let good;
  before(async () => {
    d = await startAbuseDaemon('slow', {
      MCP_HEADER_TIMEOUT_SECONDS: String(HEADER_TIMEOUT),
      MCP_BODY_TIMEOUT_SECONDS: String(BODY_TIMEOUT),
    });
    sid = await initSession(d);
    rss0 = procStatus(d.pid).rssKb;
    good = await wellBehaved(d);
  });
  after(async () => {
    await good?.stop().catch(() => {});
    if (d && !d.exited) await d.stop('SIGKILL');
  });

  /** Writes data one byte every stepMs until the peer closes or maxMs. */
  async function dribble(c, data, stepMs, maxMs) {
    const t0 = Date.now();
    for (let i = 0; i < data.length && !c.closed && !c.error && Date.now() - t0 < maxMs; i++) {
      if (!(await c.write(data.subarray(i, i + 1)))) break;
      await sleep(stepMs);
    }
  }

  test('slowloris: headers one byte a second are cut after the header timeout', async () => {
    const heads = [
      head('POST', '/mcp', mcpHeaders(d, sid, [['Content-Length', '2']])),
      head('GET', '/healthz', [['Host', d.hostHeader]]),
      head('GET', '/mcp', mcpHeaders(d, sid, [['Accept', 'text/event-stream']])),
    ];
    const conns = [];
    for (let i = 0; i < 30; i++) {
      const c = await connect(d.port);
      const t0 = Date.now();
      conns.push({ c, t0, run: dribble(c, Buffer.from(heads[i % heads.length]), 1000, 10000) });
    }
    // And header lines that keep coming but never end.
    for (let i = 0; i < 10; i++) {
      const c = await connect(d.port);
      const t0 = Date.now();
      const lines = Buffer.from(`GET /healthz HTTP/1.1\r\nHost: ${d.hostHeader}\r\n` + 'X-A: b\r\n'.repeat(40));
      conns.push({ c, t0, run: dribble(c, lines, 50, 10000) });
    }
    try {
      const times = await closeTimes(conns, HEADER_TIMEOUT * 1000 + CUT_SLACK_MS + 1000);
      for (const t of times) {
        assert.ok(t >= HEADER_TIMEOUT * 1000 - 100 && t <= HEADER_TIMEOUT * 1000 + CUT_SLACK_MS, `cut after ${t} ms`);
      }
      for (const { c } of conns) assert.equal(c.received.length, 0, 'no answer to a request never finished');
    } finally {
      for (const { c } of conns) c.destroy();
      await Promise.all(conns.map((x) => x.run));
    }
  });

  test('slow bodies are cut after the body timeout, whatever the method', async () => {
    const conns = [];
    for (let i = 0; i < 12; i++) {
      const [method, path] = [
        ['POST', '/mcp'],
        ['GET', '/healthz'],
        ['DELETE', '/mcp'],
        ['OPTIONS', '/mcp'],
      ][i % 4];
      const c = await connect(d.port);
      await c.write(head(method, path, mcpHeaders(d, sid, [['Content-Length', '1000']])));
      const t0 = Date.now();
      conns.push({ c, t0, run: dribble(c, Buffer.alloc(1000, 0x20), 500, 10000), what: `${method} ${path}` });
    }
    try {
      const times = await closeTimes(conns, BODY_TIMEOUT * 1000 + CUT_SLACK_MS + 1000);
      times.forEach((t, i) => {
        assert.ok(t >= BODY_TIMEOUT * 1000 - 100 && t <= BODY_TIMEOUT * 1000 + CUT_SLACK_MS, `${conns[i].what}: cut after ${t} ms`);
      });
    } finally {
      for (const { c } of conns) c.destroy();
      await Promise.all(conns.map((x) => x.run));
    }
  });

  test('300 idle keep-alive connections are closed after the header timeout', async () => {
    const conns = [];
    const req = head('GET', '/healthz', [['Host', d.hostHeader]]);
    try {
      // Keep-alive works: a second request on a connection is answered.
      // It is sent at once: a connection idle for the header timeout is
      // closed, and opening the 290 others can take longer than that on a
      // loaded machine.
      for (let i = 0; i < 10; i++) {
        const c = await connect(d.port);
        conns.push({ c });
        for (let k = 0; k < 2; k++) {
          await c.write(req);
          assert.equal((await c.response(3000)).status, 200, `request ${k + 1} on keep-alive connection ${i}`);
        }
      }
      for (let i = 0; i < 290; i++) {
        const c = await connect(d.port);
        await c.write(req);
        conns.push({ c });
      }
      for (const x of conns.slice(10)) {
        const r = await x.c.response(5000);
        assert.equal(r.status, 200);
      }
      // Idle from the moment its last answer arrived.
      for (const x of conns) x.t0 = x.c.receivedAt;
      const times = await closeTimes(conns, HEADER_TIMEOUT * 1000 + CUT_SLACK_MS + 1000);
      for (const t of times) assert.ok(t <= HEADER_TIMEOUT * 1000 + CUT_SLACK_MS, `idle for ${t} ms before the close`);
      // Closed by the server, so their threads are gone.
      let threads = Infinity;
      for (let i = 0; i < 40 && threads > 100; i++) {
        await sleep(50);
        threads = procStatus(d.pid).threads;
      }
      assert.ok(threads <= 100, `${threads} threads after the idle connections went`);
    } finally {
      for (const { c } of conns) c.destroy();
    }
  });

  test('the well-behaved client was answered throughout, promptly', async (t) => {
    const stats = await good.stop();
    good = null;
    assertServed(stats, t);
  });

  test('memory bounded, still alive, exits 0 on SIGTERM', async (t) => {
    assertBounded(d, rss0, 'the slow clients', t);
    await stopAndCheck(d);
  });
});

// ---------------------------------------------------------------------
describe('connection limit', () => {
  const LIMIT = 64;
  let d;
  let rss0;
  let good;
  before(async () => {
    d = await startAbuseDaemon('connlimit', {
      MCP_MAX_CONNECTIONS: String(LIMIT),
      MCP_HEADER_TIMEOUT_SECONDS: String(HEADER_TIMEOUT),
    });
    rss0 = procStatus(d.pid).rssKb;
    good = await wellBehaved(d);
    // The well-behaved client's spare keep-alive connection is closed
    // before the floods begin, so that only the holders free slots.
    await settleConnections(d.port, (HEADER_TIMEOUT + 2) * 1000 + 500);
  });
  after(async () => {
    await good?.stop().catch(() => {});
    if (d && !d.exited) await d.stop('SIGKILL');
  });

  const healthz = () => head('GET', '/healthz', [['Host', d.hostHeader], ['Connection', 'close']]);

  /** One request on a fresh connection: its status, or 0 when refused. */
  const tryHealthz = () =>
    rawRequest(d.port, healthz(), { timeout: 2000 }).then(
      (r) => r.status,
      () => 0,
    );

  /**
   * Idle connections, more than the limit, each with its connect time.
   * Opened all at once: one after the other they can take longer than
   * the header timeout on a loaded machine, and then the first are cut
   * before the last connect, which frees slots the test counts as held.
   */
  function flood() {
    return Promise.all(Array.from({ length: LIMIT + 16 }, () => connect(d.port).then((c) => ({ c, t0: Date.now() }))));
  }

  test('past the limit: extra connections are refused at once, no more threads, no spinning', async () => {
    const base = procStatus(d.pid).threads;
    const cpu0 = cpuSeconds(d.pid);
    const t0 = Date.now();
    const holders = (await flood()).map((h) => h.c);
    const probes = [];
    try {
      for (let i = 0; i < 10; i++) {
        const c = await connect(d.port);
        await c.write(healthz());
        probes.push(c);
      }
      await sleep(700); // well within the header timeout
      const { threads } = procStatus(d.pid);
      assert.ok(threads <= base + LIMIT + 2, `${threads} threads, ${base} before the flood, limit ${LIMIT}`);
      // libmicrohttpd accepts a connection past the limit and closes it.
      for (const c of probes) {
        assert.ok(c.closed || c.error, 'a probe past the limit is closed');
        assert.equal(c.received.length, 0, 'and not served');
      }
      assert.ok(holders.filter((c) => c.closed || c.error).length >= 16, 'the holders past the limit are closed too');
      const cpu = cpuSeconds(d.pid) - cpu0;
      assert.ok(cpu < 0.5 * ((Date.now() - t0) / 1000) + 0.2, `daemon used ${cpu} s of CPU while full`);
      assert.equal(d.exited, null);
    } finally {
      for (const c of [...holders, ...probes]) c.destroy();
    }
    // Once the holders are gone, new connections are served.
    let status = 0;
    const t1 = Date.now();
    for (let i = 0; i < 30 && status !== 200; i++) {
      status = await tryHealthz();
      if (status !== 200) await sleep(100);
    }
    assert.equal(status, 200, 'served again once the holders closed');
    assert.ok(Date.now() - t1 < 3000, `served again after ${Date.now() - t1} ms`);
  });

  test('holders that never speak are cut, and new connections are then served', async (t) => {
    const holders = await flood();
    let times;
    try {
      // Time each holder from its own connect to the server's close: those
      // past the limit are closed at once, those within it when the
      // watchdog cuts them for silence. Any other connection closing frees
      // a slot too, so the first probe served says nothing about the
      // holders; their own close times do.
      times = await closeTimes(holders, HEADER_TIMEOUT * 1000 + CUT_SLACK_MS + 1000);
    } finally {
      for (const { c } of holders) c.destroy();
    }
    for (const ms of times) assert.ok(Number.isFinite(ms), 'every holder is closed by the server');
    const early = HEADER_TIMEOUT * 1000 - 100;
    const refused = times.filter((ms) => ms < early);
    const cut = times.filter((ms) => ms >= early);
    t.diagnostic(`${refused.length} holders refused (slowest ${Math.max(...refused)} ms), ${cut.length} cut after ${Math.min(...cut)} to ${Math.max(...cut)} ms`);
    // The well-behaved client holds two slots (its POST connection and
    // its GET stream), so the first LIMIT - 2 holders are always let in
    // and must keep their slot until the header timeout; the rest are
    // refused at once (the previous test's subject), or let in late if
    // a slot was freed meanwhile. More refusals than that, or fewer
    // holders cut, means silent connections were dropped early.
    assert.ok(cut.length >= LIMIT - 4, `${cut.length} holders held a slot until the header timeout (limit ${LIMIT})`);
    assert.ok(refused.length <= 16 + 4, `${refused.length} holders were closed before the header timeout (16 past the limit)`);
    for (const ms of cut) {
      assert.ok(ms <= HEADER_TIMEOUT * 1000 + CUT_SLACK_MS, `a silent holder was cut ${ms} ms after it connected (header timeout ${HEADER_TIMEOUT} s)`);
    }
    // With the holders gone, a new connection is served.
    let status = 0;
    for (let i = 0; i < 30 && status !== 200; i++) {
      status = await tryHealthz();
      if (status !== 200) await sleep(100);
    }
    assert.equal(status, 200, 'a new connection is served once the holders were cut');
  });

  test('the already connected client was answered throughout, and a new one is too', async (t) => {
    const stats = await good.stop();
    good = null;
    assertServed(stats, t);
    const fresh = await wellBehaved(d, { intervalMs: 10, maxCalls: 3 });
    await fresh.finished;
    assertServed(await fresh.stop(), t);
  });

  test('memory bounded, still alive, exits 0 on SIGTERM', async (t) => {
    assertBounded(d, rss0, 'the connection flood', t);
    await stopAndCheck(d);
  });
});

// ---------------------------------------------------------------------
describe('many connections', () => {
  let d;
  after(async () => {
    if (d && !d.exited) await d.stop('SIGKILL');
  });
  // This process and the daemon (which inherits the limit) each hold 1100.
  const nofile = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 0);

  test('connections on descriptors past FD_SETSIZE (1024) are served', { skip: nofile < 2400 && `open files limited to ${nofile}` }, async (t) => {
    // Silent connections are cut after the header timeout (10 s by
    // default), and opening 1100 can take longer on a loaded machine:
    // this test is about descriptors, so the timeout is out of its way.
    d = await startAbuseDaemon('fdsetsize', { MCP_MAX_CONNECTIONS: '1200', MCP_HEADER_TIMEOUT_SECONDS: '600' });
    const rss0 = procStatus(d.pid).rssKb;
    const conns = [];
    try {
      for (let i = 0; i < 1100; i += 100) conns.push(...(await Promise.all(Array.from({ length: 100 }, () => connect(d.port)))));
      const r = await rawRequest(d.port, head('GET', '/healthz', [['Host', d.hostHeader]]));
      assert.equal(r.status, 200, 'the 1101st connection is served');
      await sleep(200);
      assert.equal(conns.filter((c) => c.closed).length, 0, 'none of the 1100 was dropped');
      assert.ok(procStatus(d.pid).threads >= 1100, 'one thread per connection');
    } finally {
      for (const c of conns) c.destroy();
    }
    let threads = Infinity;
    for (let i = 0; i < 60 && threads > 100; i++) {
      await sleep(50);
      threads = procStatus(d.pid).threads;
    }
    assert.ok(threads <= 100, `${threads} threads after the connections closed`);
    assertBounded(d, rss0, '1100 connections', t);
    await stopAndCheck(d);
  });
});
