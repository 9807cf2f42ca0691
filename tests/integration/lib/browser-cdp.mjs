// SPDX-License-Identifier: MIT
// A headless Chromium driven over the Chrome DevTools Protocol through
// --remote-debugging-pipe (fd 3: commands in, fd 4: replies and events
// out, each message a JSON text ending in NUL), so no WebSocket client and
// no browser download are needed. Every wait is bounded.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The Chromium binary, or null when none is installed. */
export function findChromium() {
  const env = process.env.MCPSD_CHROMIUM;
  if (env) return existsSync(env) ? env : null;
  return CANDIDATES.find((p) => existsSync(p)) ?? null;
}

/**
 * Finds Chromium, installing the Debian package once if it is missing and
 * we are root with apt-get. Returns { bin } or { reason } when it cannot.
 */
export function ensureChromium() {
  let bin = findChromium();
  if (bin) return { bin };
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    return { reason: 'chromium is not installed and apt-get is not usable here (not root)' };
  }
  const r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    stdio: 'ignore',
    timeout: 600000,
  });
  bin = findChromium();
  if (bin) return { bin };
  return { reason: `chromium is not installed and 'apt-get install chromium' failed (status ${r.status})` };
}

/**
 * Launches Chromium with a fresh profile. Returns a browser with
 * send(method, params, sessionId), on(event, fn), waitFor(event, pred, ms),
 * newPage() and close().
 */
export async function launch(bin, opts = {}) {
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-chromium-'));
  const downloadDir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-downloads-'));
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-extensions',
    '--disable-default-apps',
    '--no-first-run',
    '--no-default-browser-check',
    '--no-proxy-server',
    '--mute-audio',
    `--user-data-dir=${userDataDir}`,
    '--remote-debugging-pipe',
    'about:blank',
  ];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    if (stderr.length < 65536) stderr += d.toString();
  });
  const toBrowser = proc.stdio[3];
  const fromBrowser = proc.stdio[4];
  let nextId = 1;
  const pending = new Map();
  const listeners = new Set();
  let exited = null;
  let rbuf = Buffer.alloc(0);
  fromBrowser.on('data', (d) => {
    rbuf = Buffer.concat([rbuf, d]);
    for (;;) {
      const z = rbuf.indexOf(0);
      if (z < 0) break;
      const text = rbuf.subarray(0, z).toString('utf8');
      rbuf = rbuf.subarray(z + 1);
      let msg;
      try {
        msg = JSON.parse(text);
      } catch {
        continue;
      }
      if (msg.id !== undefined && pending.has(msg.id)) {
        const p = pending.get(msg.id);
        pending.delete(msg.id);
        clearTimeout(p.timer);
        if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
        else p.resolve(msg.result);
      } else if (msg.method) {
        for (const l of [...listeners]) l(msg);
      }
    }
  });
  proc.on('exit', (code, sig) => {
    exited = { code, sig };
    for (const p of pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error(`chromium exited (${code ?? sig}) during ${p.method}; stderr: ${stderr.slice(-2000)}`));
    }
    pending.clear();
  });
  toBrowser.on('error', () => {});

  const b = {
    proc,
    downloadDir,
    get stderr() {
      return stderr;
    },
    send(method, params = {}, sessionId, ms = opts.commandTimeoutMs ?? 15000) {
      if (exited) return Promise.reject(new Error(`chromium has exited: ${JSON.stringify(exited)}`));
      const id = nextId++;
      const msg = { id, method, params };
      if (sessionId) msg.sessionId = sessionId;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`CDP ${method} timed out after ${ms} ms`));
        }, ms);
        pending.set(id, { resolve, reject, timer, method });
        toBrowser.write(`${JSON.stringify(msg)}\0`);
      });
    },
    /** Subscribes to every event; returns the unsubscribe function. */
    on(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    /** Waits (bounded) for an event matching pred; resolves it or null on timeout. */
    waitFor(pred, ms) {
      return new Promise((resolve) => {
        const off = b.on((m) => {
          if (pred(m)) {
            off();
            clearTimeout(t);
            resolve(m);
          }
        });
        const t = setTimeout(() => {
          off();
          resolve(null);
        }, ms);
      });
    },
    /** A new tab with Page, Runtime, Log and Network events on. */
    async newPage() {
      const { targetId } = await b.send('Target.createTarget', { url: 'about:blank' });
      const { sessionId } = await b.send('Target.attachToTarget', { targetId, flatten: true });
      const events = [];
      const off = b.on((m) => {
        if (m.sessionId === sessionId || (m.method?.startsWith('Browser.download') ?? false)) events.push(m);
      });
      for (const dom of ['Page', 'Runtime', 'Log', 'Network']) await b.send(`${dom}.enable`, {}, sessionId);
      const page = {
        targetId,
        sessionId,
        events,
        send: (method, params, ms) => b.send(method, params, sessionId, ms),
        /** Evaluates an expression in the page and returns its value. */
        async evaluate(expression) {
          const r = await b.send('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
          if (r.exceptionDetails) throw new Error(`evaluate failed: ${JSON.stringify(r.exceptionDetails).slice(0, 300)}`);
          return r.result.value;
        },
        /**
         * Navigates and waits (bounded) for the load event, a download
         * that replaces the navigation, or a navigation error. Resolves
         * { errorText, download (the Browser.downloadWillBegin params), loaded }.
         */
        async navigate(url, ms = 15000) {
          const start = events.length;
          const nav = await b.send('Page.navigate', { url }, sessionId, ms);
          const deadline = Date.now() + ms;
          let download = null;
          let loaded = false;
          const abortedUntil = Date.now() + 3000;
          while (Date.now() < deadline) {
            for (const m of events.slice(start)) {
              if (m.method === 'Browser.downloadWillBegin' || m.method === 'Page.downloadWillBegin') download = m.params;
              if (m.method === 'Page.loadEventFired') loaded = true;
            }
            if (loaded || download) break;
            // An attachment aborts the navigation before the download
            // event arrives: give that event a moment.
            if (nav.errorText && (nav.errorText !== 'net::ERR_ABORTED' || Date.now() > abortedUntil)) break;
            await new Promise((r) => setTimeout(r, 50));
          }
          if (download) {
            // Let the download finish so nothing is left half written (its
            // last progress event may already be in).
            const finished = () =>
              events.some(
                (m) => m.method === 'Browser.downloadProgress' && m.params.guid === download.guid && m.params.state !== 'inProgress',
              );
            for (const until = Date.now() + 5000; !finished() && Date.now() < until; ) {
              await new Promise((r) => setTimeout(r, 50));
            }
          }
          return { errorText: nav.errorText ?? null, download, loaded, frameId: nav.frameId };
        },
        /** Console messages, CSP reports and log entries seen so far, as text. */
        messages() {
          const out = [];
          for (const m of events) {
            if (m.method === 'Runtime.consoleAPICalled') out.push(m.params.args.map((a) => a.value ?? a.description ?? '').join(' '));
            if (m.method === 'Log.entryAdded') out.push(`${m.params.entry.source}: ${m.params.entry.text}`);
            if (m.method === 'Runtime.exceptionThrown') out.push(`exception: ${m.params.exceptionDetails.text}`);
          }
          return out;
        },
        async close() {
          off();
          await b.send('Target.closeTarget', { targetId }).catch(() => {});
        },
      };
      return page;
    },
    async close() {
      if (!exited) {
        const done = new Promise((r) => {
          if (exited) r();
          else proc.once('exit', r);
        });
        await b.send('Browser.close', {}, undefined, 3000).catch(() => {});
        const t = setTimeout(() => {
          if (!exited) proc.kill('SIGKILL');
        }, 5000);
        await Promise.race([done, new Promise((r) => setTimeout(r, 10000))]);
        clearTimeout(t);
      }
      rmSync(userDataDir, { recursive: true, force: true, maxRetries: 3 });
      rmSync(downloadDir, { recursive: true, force: true, maxRetries: 3 });
    },
  };
  // The first command proves the pipe works; fail fast with stderr if not.
  try {
    await b.send('Browser.getVersion', {}, undefined, opts.startTimeoutMs ?? 30000);
  } catch (e) {
    proc.kill('SIGKILL');
    rmSync(userDataDir, { recursive: true, force: true, maxRetries: 3 });
    rmSync(downloadDir, { recursive: true, force: true, maxRetries: 3 });
    throw new Error(`chromium did not answer on the DevTools pipe: ${e.message}; stderr: ${stderr.slice(-2000)}`);
  }
  await b.send('Browser.setDownloadBehavior', { behavior: 'allowAndName', downloadPath: downloadDir, eventsEnabled: true });
  return b;
}
