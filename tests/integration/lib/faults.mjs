// SPDX-License-Identifier: MIT
// Fault injection for faults.test.mjs: a Docker Engine API proxy on a unix
// socket that the test controls (forward, hang, stop, start again), and a
// small tmpfs to fill up.
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DOCKER_SOCK } from './sandbox.mjs';

/**
 * A byte-for-byte proxy from a unix socket of ours to the engine's.
 *   mode 'forward': new connections are forwarded;
 *   hang():  existing connections stop moving bytes and new ones are
 *            accepted but never answered (an engine that hangs);
 *   resume(): forwarding again (hung connections are dropped, as a
 *            restarted engine would);
 *   stop():  the socket is gone and every connection is cut (engine down);
 *   start(): listening again.
 */
export class DockerProxy {
  constructor(sockPath, upstream = DOCKER_SOCK) {
    this.sockPath = sockPath;
    this.upstream = upstream;
    this.mode = 'forward';
    this.conns = new Set();
    this.server = null;
    this.accepted = 0;
  }

  get url() {
    return `unix://${this.sockPath}`;
  }

  async start() {
    if (this.server) return;
    if (existsSync(this.sockPath)) unlinkSync(this.sockPath);
    this.mode = 'forward';
    // Half-open on both sides: the daemon closes its write side of an
    // attach stream after stdin, and the output must still flow back.
    this.server = net.createServer({ allowHalfOpen: true }, (c) => this.#onConn(c));
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.sockPath, resolve);
    });
  }

  #onConn(client) {
    this.accepted++;
    const pair = { client, up: null, hung: this.mode === 'hang' };
    this.conns.add(pair);
    const drop = () => {
      client.destroy();
      pair.up?.destroy();
      this.conns.delete(pair);
    };
    client.on('error', drop);
    client.on('close', drop);
    if (pair.hung) {
      client.pause(); // accepted, never read, never answered
      return;
    }
    pair.up = net.connect({ path: this.upstream, allowHalfOpen: true });
    pair.up.on('error', drop);
    pair.up.on('close', drop);
    client.pipe(pair.up);
    pair.up.pipe(client);
  }

  /** Existing connections freeze; new ones are accepted and ignored. */
  hang() {
    this.mode = 'hang';
    for (const p of this.conns) {
      p.hung = true;
      p.client.unpipe();
      p.up?.unpipe();
      p.client.pause();
      p.up?.pause();
    }
  }

  /** Forward again; connections that hung are cut. */
  resume() {
    this.mode = 'forward';
    for (const p of [...this.conns]) {
      if (!p.hung) continue;
      p.client.destroy();
      p.up?.destroy();
      this.conns.delete(p);
    }
  }

  /** The engine goes away: the socket disappears and connections are cut. */
  async stop() {
    const s = this.server;
    this.server = null;
    for (const p of [...this.conns]) {
      p.client.destroy();
      p.up?.destroy();
    }
    this.conns.clear();
    if (s) await new Promise((r) => s.close(() => r()));
    if (existsSync(this.sockPath)) unlinkSync(this.sockPath);
  }
}

/**
 * An HTTP-level proxy to the engine whose answer to GET /images/json can be
 * rewritten by the test (imagesHook(list) -> list): a runner image can
 * appear to this daemon, and to no other user of the engine, and then
 * vanish, as it does when runners/build.sh rebuilds an image. Everything
 * else, hijacked attach streams included, goes to the real engine.
 */
export class ImagesProxy {
  constructor(sockPath, upstream = DOCKER_SOCK) {
    this.sockPath = sockPath;
    this.upstream = upstream;
    this.imagesHook = (l) => l;
    this.creates = [];
    this.server = null;
  }

  get url() {
    return `unix://${this.sockPath}`;
  }

  async start() {
    if (existsSync(this.sockPath)) unlinkSync(this.sockPath);
    this.server = http.createServer((req, res) => this.#onRequest(req, res));
    this.server.keepAliveTimeout = 60_000;
    this.server.on('upgrade', (req, socket, head) => {
      const up = net.connect({ path: this.upstream, allowHalfOpen: true });
      let h = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) h += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      up.write(`${h}\r\n`);
      if (head?.length) up.write(head);
      socket.pipe(up);
      up.pipe(socket);
      up.on('error', () => socket.destroy());
      socket.on('error', () => up.destroy());
    });
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.sockPath, resolve);
    });
  }

  #forward(req, res, body) {
    const up = http.request({ socketPath: this.upstream, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', (e) => {
      res.destroy(e);
    });
    up.end(body);
  }

  #onRequest(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && /\/containers\/create/.test(req.url)) {
        try {
          this.creates.push(JSON.parse(body.toString()).Image);
        } catch {
          /* not JSON: the engine will say so */
        }
      }
      if (req.method !== 'GET' || !/\/images\/json/.test(req.url)) return this.#forward(req, res, body);
      const up = http.request({ socketPath: this.upstream, path: req.url, method: 'GET', headers: req.headers }, (r) => {
        const parts = [];
        r.on('data', (c) => parts.push(c));
        r.on('end', () => {
          let out = Buffer.concat(parts);
          if (r.statusCode === 200) out = Buffer.from(JSON.stringify(this.imagesHook(JSON.parse(out.toString()))));
          const headers = { ...r.headers, 'content-length': String(out.length) };
          delete headers['transfer-encoding'];
          res.writeHead(r.statusCode, headers);
          res.end(out);
        });
      });
      up.on('error', (e) => res.destroy(e));
      up.end();
    });
  }

  async stop() {
    const s = this.server;
    this.server = null;
    if (s) {
      s.closeAllConnections?.();
      await new Promise((r) => s.close(() => r()));
    }
    if (existsSync(this.sockPath)) unlinkSync(this.sockPath);
  }
}

/** A fresh private directory for one fault test. */
export function faultsDir(prefix = 'mcpsd-faults-') {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Mounts a tmpfs of sizeMb at dir (root only). Returns an unmount function,
 * or null when mounting is not possible here.
 */
export function mountTmpfs(dir, sizeMb) {
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,mode=0711`, 'mcpsd-faults', dir]);
  if (r.status !== 0) return null;
  return () => {
    for (let i = 0; i < 20; i++) {
      if (spawnSync('umount', [dir]).status === 0) break;
      spawnSync('sleep', ['0.2']);
    }
    rmSync(dir, { recursive: true, force: true });
  };
}

// Mounts below a daemon's root (a killed daemon's workspaces and pool).
export { mountsBelow, umountBelow } from './daemon.mjs';
