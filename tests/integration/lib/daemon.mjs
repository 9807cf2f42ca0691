// SPDX-License-Identifier: MIT
// Starts and stops a real mcp-sandboxd for a test, on a free loopback port,
// with fresh secrets and a private SANDBOX_ROOT. Connects real SDK clients.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

export const BIN = process.env.MCPSD_BIN ?? 'build/test-default/cmd/mcp-sandboxd';
export const FIXTURES_BIN = process.env.MCPSD_FIXTURES_BIN ?? 'build/test-fixtures/cmd/mcp-sandboxd';
const LOG_DIR = process.env.MCPSD_LOG_DIR ?? os.tmpdir();

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Mount points below dir (the pool's shared mount, workspace images). */
export function mountsBelow(dir) {
  const r = spawnSync('findmnt', ['-rn', '-o', 'TARGET']);
  return String(r.stdout)
    .split('\n')
    .filter((t) => t.startsWith(dir + '/'));
}

/**
 * Unmounts everything below dir, deepest first: what a daemon stopped with
 * SIGKILL leaves mounted (the warm pool's shared mount, workspaces bound
 * into pool boxes, loop images) before its root can be removed.
 */
export function umountBelow(dir) {
  for (const t of mountsBelow(dir).sort().reverse()) spawnSync('umount', ['-l', t]);
}

/**
 * Starts the daemon. opts.bin selects the binary, opts.env adds settings.
 * Returns { url, base, token, root, proc, logPath, stop(), health() }.
 */
export async function startDaemon(opts = {}) {
  const port = opts.port ?? (await freePort());
  const token = randomBytes(24).toString('hex');
  const root = opts.root ?? mkdtempSync(path.join(os.tmpdir(), 'mcpsd-root-'));
  const logPath = path.join(LOG_DIR, `daemon-${opts.name ?? 'test'}-${port}.log`);
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME ?? '/root',
    MCP_HTTP_ADDR: `127.0.0.1:${port}`,
    MCP_API_TOKEN: token,
    FILE_SECRET: randomBytes(32).toString('hex'),
    SANDBOX_ROOT: root,
    MCP_LOG_LEVEL: 'debug',
    // Three pooled languages, not the default's every one: each test
    // daemon would otherwise start nine pool boxes on the shared engine.
    // The default's pool is measured by tests/bench (first, poolmem).
    SANDBOX_POOL_LANGUAGES: 'python,typescript,bash',
    // A unix DOCKER_HOST (a second engine, e.g. one holding images under
    // test) reaches the daemon too; the tests' own engine calls follow it
    // (sandbox.mjs DOCKER_SOCK).
    ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
    // The warm channel under test (the default auto picks the socket here;
    // SANDBOX_WARM_CHANNEL=attach tests/run.sh runs every suite over the
    // attach stream); a test's own env still wins.
    ...(process.env.SANDBOX_WARM_CHANNEL ? { SANDBOX_WARM_CHANNEL: process.env.SANDBOX_WARM_CHANNEL } : {}),
    // Under the sanitizer layer, findings must reach the daemon's exit code.
    ...(process.env.ASAN_OPTIONS ? { ASAN_OPTIONS: process.env.ASAN_OPTIONS } : {}),
    ...(process.env.UBSAN_OPTIONS ? { UBSAN_OPTIONS: process.env.UBSAN_OPTIONS } : {}),
    ...opts.env,
  };
  const proc = spawn(opts.bin ?? BIN, ['--env-file', '/dev/null'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(logPath);
  proc.stdout.pipe(log);
  proc.stderr.pipe(log);
  let exited = null;
  proc.on('exit', (code, sig) => {
    exited = { code, sig };
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (exited) throw new Error(`daemon exited early (${JSON.stringify(exited)}); log: ${logPath}`);
    try {
      const r = await fetch(`${base}/healthz`);
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    await sleep(50);
  }
  const d = {
    url: `${base}/mcp`,
    base,
    token,
    root,
    proc,
    logPath,
    env,
    get exited() {
      return exited;
    },
    async health() {
      const r = await fetch(`${base}/healthz`);
      return r.json();
    },
    /**
     * The log once it matches re, waiting up to ms: the daemon's output
     * reaches logPath through this process's pipe, after the HTTP answer
     * that followed it may have. Fails with the log's tail.
     */
    async waitLog(re, ms = 5000, what = `a log line matching ${re}`) {
      const end = Date.now() + ms;
      for (;;) {
        const text = readFileSync(logPath, 'utf8');
        if (re.test(text)) return text;
        if (Date.now() > end) {
          const tail = text.split('\n').slice(-20).join('\n');
          throw new Error(`${what}: not in ${logPath} after ${ms} ms; its tail:\n${tail}`);
        }
        await sleep(50);
      }
    },
    /**
     * Stops the daemon and returns how it exited. A clean SIGTERM drain
     * exits 0; under the sanitizers a leak or an error makes it non-zero.
     */
    async stop(signal = 'SIGTERM') {
      if (!exited) {
        const done = new Promise((r) => proc.once('exit', r));
        proc.kill(signal);
        await done;
      }
      if (!opts.keepRoot) {
        umountBelow(root);
        rmSync(root, { recursive: true, force: true, maxRetries: 3 });
      }
      return exited;
    },
    /** Stops with SIGTERM and fails unless the exit was clean. */
    async stopClean() {
      const ex = await d.stop('SIGTERM');
      if (ex.code !== 0) {
        const tail = readFileSync(logPath, 'utf8').split('\n').slice(-40).join('\n');
        throw new Error(`daemon exited ${JSON.stringify(ex)}; log tail:\n${tail}`);
      }
    },
  };
  return d;
}

export function authHeaders(token) {
  return { Authorization: `Bearer ${token}` };
}

/** A connected SDK client over Streamable HTTP with the bearer header. */
export async function connectHttp(d, opts = {}) {
  const client = new Client({ name: 'mcpsd-test', version: '1.0.0' }, { capabilities: opts.capabilities ?? {} });
  const transport = new StreamableHTTPClientTransport(new URL(d.url), {
    requestInit: { headers: authHeaders(opts.token ?? d.token) },
  });
  await client.connect(transport);
  return client;
}

/** A connected SDK client over the legacy HTTP+SSE transport. */
export async function connectSse(d, opts = {}) {
  const client = new Client({ name: 'mcpsd-test-sse', version: '1.0.0' }, { capabilities: {} });
  const headers = authHeaders(opts.token ?? d.token);
  const transport = new SSEClientTransport(new URL(`${d.base}/sse`), {
    requestInit: { headers },
    eventSourceInit: {
      fetch: (url, init) => fetch(url, { ...init, headers: { ...(init?.headers ?? {}), ...headers } }),
    },
  });
  await client.connect(transport);
  return client;
}

/** Raw JSON-RPC POST helper for wire-level assertions. */
export async function post(d, body, headers = {}) {
  return fetch(d.url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...authHeaders(d.token),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

export async function initSession(d, version = '2025-11-25') {
  const r = await post(d, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  const sid = r.headers.get('mcp-session-id');
  await r.text();
  return sid;
}
