// SPDX-License-Identifier: MIT
// Helpers of the file tests: GET/HEAD on a bare socket so request targets
// reach the daemon byte for byte (no URL normalization by a client), raw
// JSON-RPC bodies with bytes no JSON encoder would produce, and small
// utilities (SHA-256, PNG checks, tool calls). Every wait is bounded.
import { createHash } from 'node:crypto';
import net from 'node:net';

export const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Whether buf is a PNG whose IHDR is intact (magic, IHDR chunk, IEND at the end). */
export function isPng(buf) {
  return (
    buf.length > 8 + 25 + 12 &&
    buf.subarray(0, 8).equals(PNG_MAGIC) &&
    buf.subarray(12, 16).toString('latin1') === 'IHDR' &&
    buf.subarray(buf.length - 8, buf.length - 4).toString('latin1') === 'IEND'
  );
}

/** Width and height from a PNG's IHDR. */
export function pngSize(buf) {
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

/**
 * Sends `head` (and optional body bytes) on a fresh connection and reads one
 * response until the framing says it is complete or the server closes.
 * target is written verbatim (a Buffer may hold any bytes). Resolves
 * { status, headers (lower-case Map), body (Buffer), ms }; rejects after
 * timeoutMs. HEAD responses are complete at the end of the head.
 */
export function rawHttp(port, { method = 'GET', target, headers = [], body = null, timeoutMs = 10000, maxBytes = 64 << 20 }) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err, v) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(v);
    };
    const timer = setTimeout(
      () => finish(new Error(`no complete response within ${timeoutMs} ms (${buf.length} bytes so far: ${JSON.stringify(buf.subarray(0, 160).toString('latin1'))})`)),
      timeoutMs,
    );
    const tryParse = (eof) => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (eof) finish(new Error(`connection closed before a response head (${buf.length} bytes)`));
        return;
      }
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
      if (!m) return finish(new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`));
      const h = new Map();
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        const k = l.slice(0, i).trim().toLowerCase();
        const v = l.slice(i + 1).trim();
        h.set(k, h.has(k) ? `${h.get(k)}, ${v}` : v);
      }
      const status = Number(m[1]);
      const start = end + 4;
      const res = (b) => finish(null, { status, headers: h, body: b, ms: Date.now() - t0, raw: buf });
      if (method === 'HEAD' || status === 304 || status === 204) {
        // Nothing may follow; wait briefly to catch a body sent anyway.
        if (eof || buf.length > start) return res(buf.subarray(start));
        setTimeout(() => res(buf.subarray(start)), 150);
        return;
      }
      if (h.has('content-length')) {
        const n = Number(h.get('content-length'));
        if (buf.length >= start + n) return res(buf.subarray(start, start + n));
        if (eof) return finish(new Error(`closed after ${buf.length - start} of ${n} body bytes`));
        return;
      }
      if (/chunked/i.test(h.get('transfer-encoding') ?? '')) {
        const parts = [];
        let p = start;
        for (;;) {
          const le = buf.indexOf('\r\n', p);
          if (le < 0) return eof ? finish(new Error('truncated chunked body')) : undefined;
          const size = parseInt(buf.subarray(p, le).toString('latin1'), 16);
          if (buf.length < le + 2 + size + 2) return eof ? finish(new Error('truncated chunk')) : undefined;
          if (size === 0) return res(Buffer.concat(parts));
          parts.push(buf.subarray(le + 2, le + 2 + size));
          p = le + 2 + size + 2;
        }
      }
      if (eof) res(buf.subarray(start));
    };
    sock.on('connect', () => {
      const tgt = Buffer.isBuffer(target) ? target : Buffer.from(target, 'latin1');
      const hl = headers.some(([k]) => k.toLowerCase() === 'host') ? headers : [['Host', `127.0.0.1:${port}`], ...headers];
      const parts = [Buffer.from(`${method} `, 'latin1'), tgt, Buffer.from(' HTTP/1.1\r\n', 'latin1')];
      for (const [k, v] of hl) parts.push(Buffer.from(`${k}: ${v}\r\n`, 'latin1'));
      if (body !== null) parts.push(Buffer.from(`Content-Length: ${body.length}\r\n`, 'latin1'));
      parts.push(Buffer.from('Connection: close\r\n\r\n', 'latin1'));
      if (body !== null) parts.push(body);
      sock.write(Buffer.concat(parts));
    });
    sock.on('data', (d) => {
      if (buf.length < maxBytes) buf = Buffer.concat([buf, d]);
      tryParse(false);
    });
    sock.on('end', () => tryParse(true));
    sock.on('close', () => tryParse(true));
    sock.on('error', (e) => finish(e));
  });
}

/** The /files/ target of a file URL (path only, as sent). */
export function filesTarget(url) {
  return new URL(url).pathname;
}

/** Calls a tool through the SDK client and returns the result. */
export async function call(client, name, args, opts = {}) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: opts.timeout ?? 120000 });
}

/** The text of a tool result's text items, joined. */
export function textOf(r) {
  return (r.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/**
 * Settings every daemon of the file and browser tests gets: a run-time
 * instance name of its own (a daemon reaps containers that carry its
 * instance name and another boot id, and the default name is the host
 * name, shared by every daemon on this machine), plus the sanitizers'
 * options so that a leak changes the exit status under tests/run.sh.
 */
export function filesEnv(name, env = {}) {
  const out = { MCP_INSTANCE_NAME: `mcpsd-${name}-${process.pid}-${Math.random().toString(16).slice(2, 8)}` };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) {
    if (process.env[k]) out[k] = process.env[k];
  }
  return { ...out, ...env };
}

/** Time limits are stretched under the sanitizers (tests/run.sh sets MCPSD_SANITIZED). */
export const SLOW = process.env.MCPSD_SANITIZED ? 3 : 1;
