// SPDX-License-Identifier: MIT
// OAuth's limits and /metrics behind a proxy (issue 19, part 4), against the
// real daemon. Requests come from distinct loopback source addresses
// (127.0.0.x, bound with localAddress), which is how a person and an
// attacker on two hosts look to a daemon that is not behind a proxy; a
// proxy is 127.0.0.1 naming its client in CF-Connecting-IP or
// X-Forwarded-For.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { BIN, startDaemon } from './lib/daemon.mjs';
import { authorizeUrl, callbackServer, pkce } from './lib/oauth.mjs';

const ALICE = `alice-${randomBytes(16).toString('hex')}`;

function oauthEnv(extra = {}) {
  return {
    OAUTH_ENABLED: 'true',
    MCP_API_TOKENS: `alice:${ALICE}`,
    MCP_INSTANCE_NAME: `proxy-${process.pid}-${randomBytes(3).toString('hex')}`,
    ...extra,
  };
}

/** One HTTP request from a chosen local address, on its own connection. */
function req(url, { method = 'GET', headers = {}, body, from } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const h = { ...headers };
    if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
    const r = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h, localAddress: from, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
      },
    );
    r.on('error', reject);
    if (body !== undefined) r.write(body);
    r.end();
  });
}

async function registerClient(d, redirect, opts = {}) {
  const r = await req(`${d.base}/register`, {
    method: 'POST',
    from: opts.from,
    headers: { 'Content-Type': 'application/json', ...(opts.headers ?? {}) },
    body: JSON.stringify({ client_name: 'proxy test', redirect_uris: [redirect], token_endpoint_auth_method: 'none' }),
  });
  return { status: r.status, json: r.status === 201 ? JSON.parse(r.text) : null, text: r.text, headers: r.headers };
}

/** Opens a consent page: { status, text, cookie, request, csrf }. */
async function openPage(d, client, redirect, opts = {}) {
  const url = authorizeUrl(d.base, { clientId: client.client_id, redirectUri: redirect, challenge: pkce().challenge });
  const r = await req(url, { from: opts.from, headers: opts.headers });
  const field = (n) => r.text.match(new RegExp(`name="${n}" value="([^"]*)"`))?.[1];
  return {
    status: r.status,
    headers: r.headers,
    text: r.text,
    cookie: (r.headers['set-cookie']?.[0] ?? '').split(';')[0],
    request: field('request'),
    csrf: field('csrf'),
  };
}

/** Answers a consent page with token: { status, location, text }. */
async function submit(d, page, token, opts = {}) {
  const r = await req(`${d.base}/authorize`, {
    method: 'POST',
    from: opts.from,
    headers: {
      'Content-Type': 'application/x-www-form-urlencoded',
      Cookie: page.cookie,
      Origin: d.base,
      ...(opts.headers ?? {}),
    },
    body: new URLSearchParams({ request: page.request, csrf: page.csrf, action: 'approve', token }).toString(),
  });
  return { status: r.status, location: r.headers.location, text: r.text, headers: r.headers };
}

const wrong = () => `guess-${randomBytes(8).toString('hex')}`;

/** n wrong tokens from one client (opts: from, headers), five a page; statuses. */
async function wrongTokens(d, client, redirect, n, opts = {}) {
  const statuses = [];
  let page = null;
  for (let i = 0; i < n; i++) {
    if (!page || i % 5 === 0) {
      page = await openPage(d, client, redirect, opts);
      assert.equal(page.status, 200, page.text);
    }
    statuses.push((await submit(d, page, wrong(), opts)).status);
  }
  return statuses;
}

/** Runs fn(i) for i < n, `width` at a time; returns the results in order. */
async function pool(n, width, fn) {
  const out = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

const count = (xs) => xs.reduce((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

let cb;
before(async () => {
  cb = await callbackServer();
});
after(async () => {
  await cb?.close();
});

describe('a daemon without trusted proxies (the default)', () => {
  let d;
  let client;
  before(async () => {
    d = await startDaemon({ name: 'proxy-none', env: oauthEnv() });
    client = (await registerClient(d, cb.url)).json;
    assert.ok(client, 'registered');
  });
  after(async () => {
    await d?.stopClean();
  });

  test('60 wrong tokens from six addresses do not turn a right token from a seventh into 429', async () => {
    for (let a = 2; a <= 7; a++) {
      const st = await wrongTokens(d, client, cb.url, 10, { from: `127.0.0.${a}` });
      assert.deepEqual(count(st), { 403: 10 }, `address 127.0.0.${a}: each wrong token is checked and refused`);
    }
    const page = await openPage(d, client, cb.url, { from: '127.0.0.8' });
    const r = await submit(d, page, ALICE, { from: '127.0.0.8' });
    assert.equal(r.status, 303, `the right token is approved, not refused: ${r.status} ${r.text.slice(0, 200)}`);
    assert.match(r.location, /[?&]code=/);
    // The guessers' own limit still holds, and answers no oracle.
    const again = await openPage(d, client, cb.url, { from: '127.0.0.2' });
    assert.equal((await submit(d, again, ALICE, { from: '127.0.0.2' })).status, 429);
  });

  test('a flood of GET /authorize does not expire a person’s open consent page', async () => {
    const person = await openPage(d, client, cb.url, { from: '127.0.0.30' });
    assert.equal(person.status, 200);
    // 1,100 from one source: its first 64 wait, the rest get 429.
    const one = await pool(1100, 8, async () => {
      const p = await openPage(d, client, cb.url, { from: '127.0.0.31' });
      return { status: p.status, retry: p.headers['retry-after'], text: p.text };
    });
    // 64 each from 17 more sources: the table (1,024) fills, and the
    // sources holding the most lose their oldest pages first.
    const many = await pool(17 * 64, 8, async (i) => (await openPage(d, client, cb.url, { from: `127.0.1.${1 + (i % 17)}` })).status);
    const r = await submit(d, person, ALICE, { from: '127.0.0.30' });
    assert.equal(r.status, 303, `the person's page survived: ${r.status} ${r.text.match(/<title>([^<]*)/)?.[1]}`);
    assert.match(r.location, /[?&]code=/);

    assert.deepEqual(count(one.map((x) => x.status)), { 200: 64, 429: 1036 });
    const refused = one[one.length - 1];
    assert.match(refused.text, /Too many open approval requests/);
    assert.ok(Number(refused.retry) >= 1 && Number(refused.retry) <= 901, `Retry-After ${refused.retry}`);
    assert.deepEqual(count(many), { 200: 17 * 64 }, 'each of those sources is under its bound');
    await d.waitLog(/refused an authorization request from 127\.0\.0\.31: 64 consent pages from it are waiting/);
    // Another source is not affected by 127.0.0.31's bound.
    assert.equal((await openPage(d, client, cb.url, { from: '127.0.0.32' })).status, 200);
  });

  test('a forged CF-Connecting-IP or X-Forwarded-For is ignored', async () => {
    const from = '127.0.0.40';
    const st = await wrongTokens(d, client, cb.url, 10, { from, headers: { 'CF-Connecting-IP': '198.51.100.60' } });
    assert.deepEqual(count(st), { 403: 10 });
    const page = await openPage(d, client, cb.url, { from, headers: { 'CF-Connecting-IP': '198.51.100.61' } });
    const r = await submit(d, page, ALICE, { from, headers: { 'CF-Connecting-IP': '198.51.100.61', 'X-Forwarded-For': '198.51.100.62' } });
    assert.equal(r.status, 429, 'counted under the socket peer, whatever the headers say');
  });
});

describe('a daemon behind a trusted proxy (MCP_TRUSTED_PROXIES=127.0.0.1,::1)', () => {
  let d;
  let client;
  before(async () => {
    d = await startDaemon({ name: 'proxy-trusted', env: oauthEnv({ MCP_TRUSTED_PROXIES: '127.0.0.1, ::1' }) });
    client = (await registerClient(d, cb.url)).json;
    assert.ok(client, 'registered');
  });
  after(async () => {
    await d?.stopClean();
  });

  test('ten wrong tokens from one client (CF-Connecting-IP) do not lock out another', async () => {
    const a = { from: '127.0.0.1', headers: { 'CF-Connecting-IP': '198.51.100.1' } };
    const b = { from: '127.0.0.1', headers: { 'CF-Connecting-IP': '198.51.100.2' } };
    assert.deepEqual(count(await wrongTokens(d, client, cb.url, 10, a)), { 403: 10 });
    const pa = await openPage(d, client, cb.url, a);
    assert.equal((await submit(d, pa, wrong(), a)).status, 429, 'the guesser is limited');
    const pb = await openPage(d, client, cb.url, b);
    const r = await submit(d, pb, ALICE, b);
    assert.equal(r.status, 303, `another client behind the same proxy is approved: ${r.status}`);
    // X-Forwarded-For: the right-most entry the proxy added counts, not
    // what the client put in front of it.
    const x = { from: '127.0.0.1', headers: { 'X-Forwarded-For': '198.51.100.9, 198.51.100.1' } };
    const px = await openPage(d, client, cb.url, x);
    assert.equal((await submit(d, px, wrong(), x)).status, 429, 'a prepended address does not escape the limit');
  });

  test('twenty registrations from one client (X-Forwarded-For) do not lock out another', async () => {
    const a = { from: '127.0.0.1', headers: { 'X-Forwarded-For': '203.0.113.1' } };
    const st = [];
    for (let i = 0; i < 21; i++) st.push((await registerClient(d, cb.url, a)).status);
    assert.deepEqual(count(st), { 201: 20, 429: 1 });
    const r = await registerClient(d, cb.url, { from: '127.0.0.1', headers: { 'X-Forwarded-For': '203.0.113.2' } });
    assert.equal(r.status, 201, r.text);
  });

  test('a peer that is not a trusted proxy cannot choose its address', async () => {
    const from = '127.0.0.9';
    const st = await wrongTokens(d, client, cb.url, 10, { from, headers: { 'CF-Connecting-IP': '198.51.100.50' } });
    assert.deepEqual(count(st), { 403: 10 });
    const o = { from, headers: { 'CF-Connecting-IP': '198.51.100.51' } };
    const page = await openPage(d, client, cb.url, o);
    assert.equal((await submit(d, page, ALICE, o)).status, 429);
  });

  test('hostile header values are not taken as the client', async () => {
    // Garbage from a trusted peer: counted under the proxy itself, never
    // under a key the client chose. Five pages reach no limit; the point
    // is that the daemon answers and stays well.
    for (const h of [
      { 'CF-Connecting-IP': '1.2.3.4, 5.6.7.8' },
      { 'X-Forwarded-For': 'unknown' },
      { 'X-Forwarded-For': '1.2.3.4\t, [::1' },
      { 'X-Forwarded-For': `${'9'.repeat(4000)}` },
      { 'X-Forwarded-For': Array.from({ length: 200 }, (_, i) => `10.0.${i >> 8}.${i & 255}`).join(',') },
    ]) {
      const p = await openPage(d, client, cb.url, { from: '127.0.0.1', headers: h });
      assert.equal(p.status, 200, JSON.stringify(h));
    }
    assert.ok(await d.health(), 'the daemon still answers');
  });

  test('/metrics: a loopback proxy’s request for a remote client is refused', async () => {
    const r = await req(`${d.base}/metrics`, { from: '127.0.0.1', headers: { 'X-Forwarded-For': '203.0.113.9' } });
    assert.equal(r.status, 403);
    assert.match(r.text, /METRICS_TOKEN/);
    assert.equal((await req(`${d.base}/metrics`, { from: '127.0.0.1' })).status, 200, 'the host itself still scrapes');
  });
});

describe('MCP_TRUSTED_PROXY_HEADER=x-forwarded-for (a proxy that passes CF-Connecting-IP through)', () => {
  test('a client’s own CF-Connecting-IP does not choose its key; the proxy’s X-Forwarded-For does', async () => {
    const d = await startDaemon({
      name: 'proxy-xff',
      env: oauthEnv({ MCP_TRUSTED_PROXIES: '127.0.0.1', MCP_TRUSTED_PROXY_HEADER: 'x-forwarded-for' }),
    });
    try {
      const client = (await registerClient(d, cb.url)).json;
      const a = (cf) => ({ from: '127.0.0.1', headers: { 'CF-Connecting-IP': cf, 'X-Forwarded-For': '198.51.100.70' } });
      assert.deepEqual(count(await wrongTokens(d, client, cb.url, 10, a('198.51.100.71'))), { 403: 10 });
      const page = await openPage(d, client, cb.url, a('198.51.100.72'));
      assert.equal((await submit(d, page, ALICE, a('198.51.100.72'))).status, 429, 'a fresh CF-Connecting-IP does not escape');
      const b = { from: '127.0.0.1', headers: { 'X-Forwarded-For': '198.51.100.73' } };
      const pb = await openPage(d, client, cb.url, b);
      assert.equal((await submit(d, pb, ALICE, b)).status, 303);
    } finally {
      await d.stopClean();
    }
  });
});

describe('settings', () => {
  const check = (env) =>
    spawnSync(BIN, ['--env-file', '/dev/null', '--check-config'], {
      env: { PATH: process.env.PATH, MCP_API_TOKEN: ALICE, FILE_SECRET: randomBytes(32).toString('hex'), ...env },
      encoding: 'utf8',
    });
  test('bad MCP_TRUSTED_PROXIES and MCP_TRUSTED_PROXY_HEADER are refused with a message naming them', () => {
    for (const [v, re] of [
      ['localhost', /MCP_TRUSTED_PROXIES entry 'localhost' is not an IPv4 or IPv6 address/],
      ['10.0.0.1/8', /MCP_TRUSTED_PROXIES entry '10\.0\.0\.1\/8' has bits set past its prefix; write the network, e\.g\. 10\.0\.0\.0\/8/],
      ['127.0.0.1,,::1', /MCP_TRUSTED_PROXIES has an empty entry/],
    ]) {
      const r = check({ MCP_TRUSTED_PROXIES: v });
      assert.notEqual(r.status, 0, v);
      assert.match(r.stderr + r.stdout, re);
    }
    const r = check({ MCP_TRUSTED_PROXY_HEADER: 'forwarded' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr + r.stdout, /MCP_TRUSTED_PROXY_HEADER='forwarded' must be auto, cf-connecting-ip or x-forwarded-for/);
    const ok = check({ MCP_TRUSTED_PROXIES: ' 127.0.0.1, ::1, 10.0.0.0/8 ', MCP_TRUSTED_PROXY_HEADER: 'x-forwarded-for' });
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^MCP_TRUSTED_PROXIES= 127\.0\.0\.1, ::1, 10\.0\.0\.0\/8 $/m);
  });
});

describe('/metrics with a public PUBLIC_BASE_URL', () => {
  test('without METRICS_TOKEN it is closed, even to loopback; with it, the token opens it', async () => {
    const env = { PUBLIC_BASE_URL: 'https://sandbox.example.com', OAUTH_ENABLED: 'false' };
    const d = await startDaemon({ name: 'proxy-metrics', env });
    try {
      const r = await req(`${d.base}/metrics`, { from: '127.0.0.1' });
      assert.equal(r.status, 403, 'behind a tunnel every request is a loopback one');
      assert.match(r.text, /needs METRICS_TOKEN.*PUBLIC_BASE_URL/);
      await d.waitLog(/\/metrics is closed: PUBLIC_BASE_URL https:\/\/sandbox\.example\.com is not loopback/);
    } finally {
      await d.stopClean();
    }
    const token = randomBytes(24).toString('hex');
    const d2 = await startDaemon({ name: 'proxy-metrics-token', env: { ...env, METRICS_TOKEN: token } });
    try {
      assert.equal((await req(`${d2.base}/metrics`)).status, 401);
      const r = await req(`${d2.base}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
      assert.equal(r.status, 200);
      assert.match(r.text, /^mcpsd_http_requests_total/m);
    } finally {
      await d2.stopClean();
    }
  });
});
