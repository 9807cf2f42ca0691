// SPDX-License-Identifier: MIT
// OAuth helpers for the integration tests: a person at the consent page
// (follow the authorization URL, submit the form with a tenant's API
// token, deliver the redirect to the client's callback as a browser
// would), dynamic registration, PKCE, and an in-memory OAuthClientProvider
// for the official SDK client whose "browser" is that person.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';

/** The hidden fields and action of the consent form in a page. */
export function consentForm(html) {
  const field = (name) => html.match(new RegExp(`name="${name}" value="([^"]*)"`))?.[1];
  const action = html.match(/<form method="post" action="([^"]*)"/)?.[1];
  return { request: field('request'), csrf: field('csrf'), action };
}

/**
 * Opens an authorization URL and answers its consent page.
 * opts: token (the tenant's API token), action ('approve' | 'deny'),
 * deliver (GET the redirect target, default true), origin (Origin header;
 * default the page's origin; null for none), cookie (override).
 * Returns { page, status, location, params, callbackStatus }.
 */
export async function consent(url, opts = {}) {
  const r = await fetch(url, { redirect: 'manual' });
  const page = await r.text();
  if (r.status !== 200) {
    return { page, status: r.status, location: r.headers.get('location'), pageResponse: r };
  }
  const cookie = opts.cookie ?? (r.headers.get('set-cookie') ?? '').split(';')[0];
  const form = consentForm(page);
  const body = new URLSearchParams({
    request: form.request ?? '',
    csrf: opts.csrf ?? form.csrf ?? '',
    action: opts.action ?? 'approve',
  });
  if (opts.token !== undefined && opts.token !== null) body.set('token', opts.token);
  const origin = opts.origin === undefined ? new URL(url).origin : opts.origin;
  const headers = { 'Content-Type': 'application/x-www-form-urlencoded' };
  if (cookie) headers.Cookie = cookie;
  if (origin) headers.Origin = origin;
  const p = await fetch(new URL(form.action ?? '/authorize', url), {
    method: 'POST',
    redirect: 'manual',
    headers,
    body,
  });
  const out = {
    page,
    form,
    cookie,
    status: p.status,
    location: p.headers.get('location'),
    response: p,
    body: await p.text(),
  };
  if (out.location) {
    out.params = new URL(out.location).searchParams;
    if (opts.deliver !== false) {
      try {
        const cb = await fetch(out.location);
        out.callbackStatus = cb.status;
        await cb.text();
      } catch (e) {
        out.callbackError = e.message;
      }
    }
  }
  return out;
}

export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

/** Registers a client; returns the parsed response (and status). */
export async function register(base, meta) {
  const r = await fetch(`${base}/register`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(meta),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.status, json, text, headers: r.headers };
}

/** An authorization URL for a registered client. */
export function authorizeUrl(base, p) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    state: p.state ?? 'st-' + randomBytes(6).toString('hex'),
    resource: p.resource ?? `${base}/mcp`,
    ...(p.extra ?? {}),
  });
  return `${base}/authorize?${q}`;
}

/** POSTs a form to the token (or revocation) endpoint. */
export async function tokenRequest(base, params, opts = {}) {
  const headers = { 'Content-Type': 'application/x-www-form-urlencoded', ...(opts.headers ?? {}) };
  const r = await fetch(`${base}${opts.path ?? '/token'}`, {
    method: 'POST',
    headers,
    body: new URLSearchParams(params),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.status, json, text, headers: r.headers };
}

/**
 * The whole code flow for a registered client with a loopback redirect:
 * returns the token response. opts: token (tenant API token).
 */
export async function codeFlow(base, client, token, opts = {}) {
  const { verifier, challenge } = pkce();
  const url = authorizeUrl(base, {
    clientId: client.client_id,
    redirectUri: client.redirect_uris[0],
    challenge,
    state: 'flow',
  });
  const c = await consent(url, { token, deliver: false });
  const code = c.params?.get('code');
  if (!code) throw new Error(`no code: ${c.status} ${c.location ?? c.body.slice(0, 300)}`);
  const params = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirect_uris[0],
    code_verifier: verifier,
    client_id: client.client_id,
    resource: `${base}/mcp`,
  };
  if (client.client_secret) params.client_secret = client.client_secret;
  return tokenRequest(base, { ...params, ...(opts.override ?? {}) });
}

/**
 * An OAuthClientProvider (SDK 1.x) kept in memory. Its "browser" is
 * consent(): redirectToAuthorization answers the page with the tenant's
 * token and keeps the code for finishAuth.
 */
export class MemoryProvider {
  constructor({ redirectUrl, token, name = 'mcpsd-oauth-test' }) {
    this._redirectUrl = redirectUrl;
    this.token = token;
    this.name = name;
    this.client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this.code = undefined;
    this.lastConsent = undefined;
    this.authorizations = 0;
  }
  get redirectUrl() {
    return this._redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: this.name,
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return 'sdk-' + randomBytes(8).toString('hex');
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(t) {
    this._tokens = t;
  }
  async redirectToAuthorization(url) {
    this.authorizations++;
    this.lastConsent = await consent(url.toString(), { token: this.token, deliver: false });
    this.code = this.lastConsent.params?.get('code');
  }
  saveCodeVerifier(v) {
    this._verifier = v;
  }
  codeVerifier() {
    return this._verifier;
  }
}

/** A loopback HTTP server recording every request (a client's callback). */
export async function callbackServer() {
  const hits = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url);
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end('callback received');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/callback`,
    port,
    hits,
    close: () => new Promise((r) => server.close(r)),
  };
}
