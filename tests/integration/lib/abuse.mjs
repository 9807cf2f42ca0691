// SPDX-License-Identifier: MIT
// Shared pieces of the abuse tests: a daemon per group with the
// sanitizer settings passed through, its memory, threads and CPU from
// /proc, a well-behaved SDK client that keeps calling a tool while the
// daemon is attacked, and a scan of the daemon's log for sanitizer reports.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { FIXTURES_BIN, connectHttp, initSession, sleep, startDaemon } from './daemon.mjs';

/** Settings every abuse daemon gets, plus the sanitizers' own. */
function baseEnv() {
  const env = {};
  // startDaemon passes only what it is given: forward the sanitizer
  // options so that a leak or an error changes the exit status.
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) {
    if (process.env[k]) env[k] = process.env[k];
  }
  return env;
}

export async function startAbuseDaemon(name, env = {}) {
  const d = await startDaemon({ bin: FIXTURES_BIN, name: `abuse-${name}`, env: { ...baseEnv(), ...env } });
  d.port = Number(new URL(d.base).port);
  d.pid = d.proc.pid;
  d.hostHeader = `127.0.0.1:${d.port}`;
  return d;
}

/** Fields of /proc/<pid>/status, in kB or counts. */
export function procStatus(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? NaN);
  return { rssKb: field('VmRSS'), vmSizeKb: field('VmSize'), threads: field('Threads') };
}

/** User plus system CPU time of a process, in seconds. */
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime; USER_HZ is 100 on Linux
}

/** AddressSanitizer reserves terabytes of shadow memory up front. */
export function sanitized(pid) {
  return procStatus(pid).vmSizeKb > 1024 * 1024 * 1024;
}

/**
 * How much the resident set may grow across one abuse group. 64 MB for a
 * plain build; the sanitizers keep freed memory in quarantine (256 MB by
 * default) and allocate redzones, so their bound is the quarantine more.
 */
export function rssBoundKb(pid) {
  return (sanitized(pid) ? 64 + 256 : 64) * 1024;
}

/**
 * Asserts the daemon runs and grew by less than the bound since rss0;
 * reports the figures as a diagnostic of test context t when given.
 */
export function assertBounded(d, rss0Kb, what, t) {
  assert.equal(d.exited, null, `daemon still running after ${what}`);
  const { rssKb } = procStatus(d.pid);
  const bound = rssBoundKb(d.pid);
  t?.diagnostic(`RSS ${rss0Kb} -> ${rssKb} kB (${rssKb - rss0Kb >= 0 ? '+' : ''}${rssKb - rss0Kb} kB, bound +${bound} kB${sanitized(d.pid) ? ', sanitizer build' : ''})`);
  assert.ok(rssKb - rss0Kb < bound, `RSS grew by ${rssKb - rss0Kb} kB during ${what} (bound ${bound} kB)`);
  return rssKb;
}

/** Sanitizer and crash reports in a daemon log. */
export function logFindings(logPath) {
  const text = readFileSync(logPath, 'utf8');
  return text.split('\n').filter((l) => /ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)/.test(l));
}

/** Stops the daemon with SIGTERM: exit 0 and a log without reports. */
export async function stopAndCheck(d) {
  await d.stopClean();
  assert.deepEqual(logFindings(d.logPath), [], `sanitizer reports in ${d.logPath}`);
}

/**
 * An SDK client over Streamable HTTP calling test_simple_text every
 * intervalMs until stop(), at most maxCalls times. Records the slowest
 * answer and every failure; stop() resolves with the figures.
 */
export async function wellBehaved(d, { intervalMs = 200, maxCalls = 1000 } = {}) {
  const client = await connectHttp(d);
  const stats = { calls: 0, failures: [], maxMs: 0 };
  let running = true;
  const loop = (async () => {
    while (running && stats.calls < maxCalls) {
      const t0 = Date.now();
      try {
        const r = await client.callTool({ name: 'test_simple_text', arguments: {} }, undefined, { timeout: 10000 });
        if (!/simple text/.test(r.content?.[0]?.text ?? '')) stats.failures.push(`unexpected result ${JSON.stringify(r)}`);
      } catch (e) {
        stats.failures.push(String(e?.message ?? e));
      }
      stats.calls++;
      stats.maxMs = Math.max(stats.maxMs, Date.now() - t0);
      await sleep(intervalMs);
    }
  })();
  return {
    stats,
    finished: loop, // resolves once maxCalls calls are made
    async stop() {
      running = false;
      await loop;
      await client.close();
      return stats;
    },
  };
}

/**
 * The client ends of the established TCP connections to 127.0.0.1:port, as
 * the kernel lists them (/proc/net/tcp), by local port: the connections
 * every process here holds to the daemon.
 */
export function connectionsTo(port) {
  const ports = [];
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, remote, state] = line.trim().split(/\s+/);
      // State 01 is ESTABLISHED; addresses are ADDR:PORT in hex.
      if (state === '01' && remote && parseInt(remote.split(':')[1], 16) === port) {
        ports.push(parseInt(local.split(':')[1], 16));
      }
    }
  }
  return ports.sort((a, b) => a - b);
}

/**
 * Waits until the set of connections to the daemon has stayed the same for
 * quietMs (at most maxMs), and returns it. An SDK client opens a spare
 * keep-alive connection when two of its requests overlap, as they do while
 * it connects (the initialized notification, the GET stream, the first
 * call); the spare then sits idle until the daemon closes it, after
 * MCP_HEADER_TIMEOUT_SECONDS and up to two watchdog ticks more. A test that
 * counts the daemon's free connection slots starts after that close, or a
 * slot frees at a moment it does not control.
 */
export async function settleConnections(port, quietMs, maxMs = 20000) {
  const t0 = Date.now();
  let last = connectionsTo(port).join();
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    assert.ok(Date.now() - t0 < maxMs, `connections to port ${port} still changing after ${maxMs} ms: ${last}`);
    await sleep(100);
    const now = connectionsTo(port).join();
    if (now !== last) {
      last = now;
      since = Date.now();
    }
  }
  return last ? last.split(',').map(Number) : [];
}

/** The answers of a well-behaved client were all right and prompt. */
export function assertServed(stats, t, maxMs = 2000) {
  t?.diagnostic(`well-behaved client: ${stats.calls} calls, slowest ${stats.maxMs} ms, ${stats.failures.length} failures`);
  assert.ok(stats.calls >= 3, `the well-behaved client made ${stats.calls} calls`);
  assert.deepEqual(stats.failures, [], 'every call of the well-behaved client succeeded');
  assert.ok(stats.maxMs < maxMs, `slowest answer ${stats.maxMs} ms (bound ${maxMs} ms)`);
}

/** Headers of an authenticated MCP POST as [name, value] pairs. */
export function mcpHeaders(d, sid, extra = []) {
  const h = [
    ['Host', d.hostHeader],
    ['Authorization', `Bearer ${d.token}`],
    ['Content-Type', 'application/json'],
    ['Accept', 'application/json, text/event-stream'],
  ];
  if (sid) h.push(['Mcp-Session-Id', sid]);
  return [...h, ...extra];
}

export { initSession, sleep };
