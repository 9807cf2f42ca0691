// SPDX-License-Identifier: MIT
// HTTP/1.1 on a bare socket, for tests that need bytes on the wire exactly
// as written: duplicated or malformed headers, conflicting framing, bodies
// sent slowly, connections held open. Every wait is bounded by a timeout.
import net from 'node:net';

/**
 * Parses one response at the start of buf; null while incomplete. With
 * eof, a body without framing is whatever arrived before the close.
 */
export function parseResponse(buf, eof = false) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
  const headers = new Map();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    const k = l.slice(0, i).trim().toLowerCase();
    const v = l.slice(i + 1).trim();
    headers.set(k, headers.has(k) ? `${headers.get(k)}, ${v}` : v);
  }
  const start = end + 4;
  const status = Number(m[1]);
  let body;
  let next;
  if ((status >= 100 && status < 200) || status === 204 || status === 304) {
    body = buf.subarray(start, start);
    next = start;
  } else if (headers.has('content-length')) {
    const n = Number(headers.get('content-length'));
    if (buf.length < start + n) return null;
    body = buf.subarray(start, start + n);
    next = start + n;
  } else if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
    const parts = [];
    let p = start;
    for (;;) {
      const le = buf.indexOf('\r\n', p);
      if (le < 0) return null;
      const size = parseInt(buf.subarray(p, le).toString('latin1'), 16);
      if (buf.length < le + 2 + size + 2) return null;
      if (size === 0) {
        next = le + 4;
        break;
      }
      parts.push(buf.subarray(le + 2, le + 2 + size));
      p = le + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  } else if (eof) {
    body = buf.subarray(start);
    next = buf.length;
  } else {
    return null; // delimited by the close
  }
  return { status, headers, body: body.toString('utf8'), length: next };
}

/**
 * Opens a connection to 127.0.0.1:port. Returns a handle whose
 * response() waits (bounded) for the next complete response, and whose
 * closed() waits (bounded) for the server to close the connection.
 */
export function connect(port, opts = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    let closedAt = null;
    let receivedAt = null;
    let error = null;
    const waiters = new Set();
    const poke = () => {
      for (const w of [...waiters]) w();
    };
    sock.setNoDelay(true);
    sock.on('data', (d) => {
      // Keep only a bounded amount: tests never need megabytes back.
      if (buf.length < (opts.maxRead ?? 1 << 20)) buf = Buffer.concat([buf, d]);
      receivedAt = Date.now();
      poke();
    });
    sock.on('error', (e) => {
      error = e;
      poke();
    });
    sock.on('close', () => {
      closedAt = Date.now();
      poke();
    });
    const wait = (pred, ms, what) =>
      new Promise((res, rej) => {
        const check = () => {
          let v;
          try {
            v = pred();
          } catch (e) {
            cleanup();
            rej(e);
            return;
          }
          if (v !== undefined) {
            cleanup();
            res(v);
          }
        };
        const t = setTimeout(() => {
          cleanup();
          rej(new Error(`timed out after ${ms} ms waiting for ${what}; got ${buf.length} bytes: ${JSON.stringify(buf.subarray(0, 200).toString('latin1'))}`));
        }, ms);
        const cleanup = () => {
          clearTimeout(t);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    const h = {
      sock,
      get closed() {
        return closedAt !== null;
      },
      get error() {
        return error;
      },
      get received() {
        return buf;
      },
      /** When the last bytes arrived (Date.now()), or null. */
      get receivedAt() {
        return receivedAt;
      },
      /** Writes, resolving false (not throwing) once the peer has gone. */
      write(data) {
        if (sock.destroyed || closedAt !== null) return Promise.resolve(false);
        return new Promise((res) => {
          sock.write(data, (e) => res(!e));
        });
      },
      /** The next complete response (consumed from the buffer). */
      response(ms = 5000) {
        return wait(
          () => {
            const r = parseResponse(buf);
            if (r) {
              buf = buf.subarray(r.length);
              return r;
            }
            if (closedAt !== null || error) {
              const r2 = parseResponse(buf, true);
              if (r2) {
                buf = buf.subarray(r2.length);
                return r2;
              }
              throw new Error(`connection closed before a response (${buf.length} bytes: ${JSON.stringify(buf.subarray(0, 200).toString('latin1'))})`);
            }
            return undefined;
          },
          ms,
          'a response',
        );
      },
      /** Resolves with the time of the close (or error) once it happens. */
      closedWithin(ms) {
        return wait(() => (closedAt !== null || error ? closedAt ?? Date.now() : undefined), ms, 'the server to close');
      },
      destroy() {
        sock.destroy();
      },
    };
    const t = setTimeout(() => {
      sock.destroy();
      reject(new Error('connect timed out'));
    }, opts.connectTimeout ?? 5000);
    sock.once('connect', () => {
      clearTimeout(t);
      resolve(h);
    });
    sock.once('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
}

/**
 * Sends one raw request on a fresh connection and returns the response,
 * plus whether the server then closed the connection (within closeMs).
 */
export async function rawRequest(port, data, { timeout = 5000, closeMs = 0 } = {}) {
  const c = await connect(port);
  try {
    await c.write(data);
    const r = await c.response(timeout);
    if (closeMs) {
      r.closed = await c.closedWithin(closeMs).then(
        () => true,
        () => false,
      );
    }
    return r;
  } finally {
    c.destroy();
  }
}

/** Builds a request head from a method, path and [name, value] pairs. */
export function head(method, path, headers) {
  return `${method} ${path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}
