// SPDX-License-Identifier: MIT
// Helpers for the sandbox abuse tests (sandbox.test.mjs) and the fault tests
// (faults.test.mjs): a daemon with its own instance name, run_code through
// the SDK client, and a read-only view of the Docker engine filtered by that
// instance's label, so other users' containers are never looked at or
// touched.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { connectHttp, sleep, startDaemon } from './daemon.mjs';

// The engine the daemons under test use: DOCKER_HOST when it is a unix
// socket (daemon.mjs passes it on), else the default.
export const DOCKER_SOCK = process.env.DOCKER_HOST?.startsWith('unix://')
  ? process.env.DOCKER_HOST.slice('unix://'.length)
  : '/var/run/docker.sock';

/** A unique MCP_INSTANCE_NAME for one daemon of one test file. */
export function instanceName(prefix) {
  return `${prefix}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * Starts a daemon with a unique instance name (d.instance) and a connected
 * SDK client (d.client). opts as for startDaemon.
 */
export async function startSandboxDaemon(opts = {}) {
  const instance = opts.instance ?? instanceName(opts.name ?? 'sbx');
  const d = await startDaemon({
    ...opts,
    env: { MCP_INSTANCE_NAME: instance, MCP_LOG_LEVEL: 'info', ...opts.env },
  });
  d.instance = instance;
  // A restarted daemon keeps the token it was given.
  if (opts.env?.MCP_API_TOKEN) d.token = opts.env.MCP_API_TOKEN;
  if (opts.connect !== false) d.client = await connectHttp(d);
  return d;
}

/**
 * Calls run_code and returns { sc, result, ms, text }. The SDK client
 * validates structuredContent against the tool's output schema.
 * Tool-level refusals (isError without structuredContent) come back with
 * sc undefined.
 */
export async function runCode(client, args, opts = {}) {
  const t0 = Date.now();
  const result = await client.callTool(
    { name: 'run_code', arguments: { conversationId: 'sbx-default', ...args } },
    undefined,
    { timeout: opts.timeoutMs ?? 120_000, ...opts.request },
  );
  const ms = Date.now() - t0;
  const text = (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
  return { sc: result.structuredContent, result, ms, text };
}

/** Short description of a run for assertion messages. */
export function describeRun(r) {
  const sc = r.sc ?? {};
  return JSON.stringify({
    status: sc.status,
    exit: sc.exit_code,
    ms: r.ms,
    duration_ms: sc.duration_ms,
    stdout: String(sc.stdout ?? '').slice(0, 1500),
    stderr: String(sc.stderr ?? '').slice(0, 800),
    message: sc.message,
    text: sc.status ? undefined : r.text.slice(0, 800),
  });
}

/** One request to the Docker Engine API over its unix socket. */
export function dockerApi(method, path, { socketPath = DOCKER_SOCK, timeoutMs = 10_000, body } = {}) {
  const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const headers = { Host: 'docker', ...(data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {}) };
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path, method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let json;
        try {
          json = body ? JSON.parse(body) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, body, json });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`docker ${method} ${path}: timeout`)));
    req.on('error', reject);
    req.end(data);
  });
}

/**
 * Containers carrying label sandbox.owner=<owner> (running only, or all
 * with all=true), as summaries of GET /containers/json.
 */
export async function containersOf(owner, { all = true } = {}) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`sandbox.owner=${owner}`] }));
  const r = await dockerApi('GET', `/containers/json?all=${all ? 1 : 0}&filters=${filters}`);
  if (r.status !== 200) throw new Error(`docker containers list: ${r.status} ${r.body}`);
  return r.json;
}

/**
 * Polls until no container of owner exists (all=true) or is running
 * (all=false); returns the ones still there after timeoutMs.
 */
export async function waitNoContainers(owner, { timeoutMs = 15_000, all = true } = {}) {
  const end = Date.now() + timeoutMs;
  let left = await containersOf(owner, { all });
  while (left.length > 0 && Date.now() < end) {
    await sleep(250);
    left = await containersOf(owner, { all });
  }
  return left;
}

/**
 * Removes containers of owner: only for cleanup after a test that failed
 * half-way, and only ever the given owner's, which is unique to this test.
 */
export async function removeContainersOf(owner) {
  if (!owner || !owner.includes('-')) throw new Error('refusing to clean without a unique owner');
  for (const c of await containersOf(owner, { all: true })) {
    if (c.Labels?.['sandbox.owner'] !== owner) continue;
    await dockerApi('DELETE', `/containers/${c.Id}?force=1&v=1`).catch(() => {});
  }
}

/** Resident set size of a process in kB (from /proc). */
export function rssKb(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : -1;
}

/** Calls a tool other than run_code; returns { sc, result, text }. */
export async function callTool(client, name, args, opts = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, {
    timeout: opts.timeoutMs ?? 60_000,
  });
  const text = (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
  return { sc: result.structuredContent, result, text };
}

/**
 * The raw JSON-RPC answer of one tools/call on a fresh session, parsed
 * from the wire by JSON.parse (SSE data lines or a plain JSON body), to
 * show that the bytes the daemon sends are valid JSON on their own.
 */
export async function rawToolCall(d, name, args) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${d.token}`,
  };
  let r = await fetch(d.url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
  const sid = r.headers.get('mcp-session-id');
  await r.text();
  headers['Mcp-Session-Id'] = sid;
  headers['MCP-Protocol-Version'] = '2025-06-18';
  r = await fetch(d.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  await r.text();
  r = await fetch(d.url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  // Strict decoding: invalid UTF-8 on the wire throws here.
  const raw = new TextDecoder('utf-8', { fatal: true }).decode(await r.arrayBuffer());
  let msg;
  if ((r.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    for (const block of raw.split(/\r?\n\r?\n/)) {
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      const m = JSON.parse(data); // throws on invalid JSON
      if (m.id === 1) msg = m;
    }
  } else {
    msg = JSON.parse(raw);
  }
  await fetch(d.url, { method: 'DELETE', headers }).catch(() => {});
  return { msg, raw };
}
