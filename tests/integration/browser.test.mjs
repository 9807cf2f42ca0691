// SPDX-License-Identifier: MIT
// What a person's browser does with files code wrote: a real headless
// Chromium (DevTools Protocol over a pipe) opens HTML and SVG files with
// script through their /files/ URLs, directly and embedded in another
// origin's page, and the script never runs. A local listener counts every
// request the script would make; a control copy of the same documents,
// served by that listener without the daemon's headers, shows the probes
// do fire when script runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { connectHttp, sleep, startDaemon } from './lib/daemon.mjs';
import { ensureChromium, launch } from './lib/browser-cdp.mjs';
import { SLOW, call, filesEnv, rawHttp, textOf } from './lib/files-http.mjs';

const chromium = ensureChromium();
const skip = chromium.bin ? false : `no Chromium: ${chromium.reason}`;

let d;
let c;
let browser;
let listener;
let lport;
const hits = []; // paths the listener saw
const control = new Map(); // path -> { type, body, headers } the listener serves
const files = {}; // name -> URL on the daemon

// The documents: each would set the title and call home if script ran.
const TITLE = 'original title';
const PWNED = 'pwned';
function documents(home) {
  const beacon = (tag) =>
    `document.title='${PWNED}';` +
    `fetch('${home}/hit/${tag}-fetch').catch(function(){});` +
    `new Image().src='${home}/hit/${tag}-img';`;
  return {
    'x.html':
      `<!doctype html><html><head><meta charset="utf-8"><title>${TITLE}</title></head>` +
      `<body onload="${beacon('html-onload').replace(/"/g, '&quot;')}">` +
      `<p>html</p><script>${beacon('html-script')}</script></body></html>`,
    'x.svg':
      `<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" ` +
      `onload="${beacon('svg-onload').replace(/"/g, '&quot;')}">` +
      `<title>${TITLE}</title><script>${beacon('svg-script')}</script>` +
      `<rect width="40" height="40" fill="red"/></svg>`,
    // The same HTML named .txt: served inline, but as text/plain + nosniff.
    'x.txt': `<!doctype html><html><head><title>${TITLE}</title></head><body><script>${beacon('txt-script')}</script></body></html>`,
    // HTML in disguise: inline as image/png, but nosniff keeps it an image.
    'x.html.png': `<!doctype html><html><head><title>${TITLE}</title></head><body><script>${beacon('png-script')}</script></body></html>`,
  };
}

before(async () => {
  if (skip) return;
  listener = http.createServer((req, res) => {
    hits.push(req.url);
    const doc = control.get(req.url);
    if (doc) {
      res.writeHead(200, { 'Content-Type': doc.type, ...doc.headers });
      res.end(doc.body);
      return;
    }
    res.writeHead(204);
    res.end();
  });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  lport = listener.address().port;
  const home = `http://127.0.0.1:${lport}`;

  d = await startDaemon({ name: 'browser', env: filesEnv('browser') });
  c = await connectHttp(d);
  const docs = documents(home);
  const r = await call(
    c,
    'run_code',
    {
      conversationId: `browser-${randomBytes(4).toString('hex')}`,
      language: 'python',
      stdin: JSON.stringify(docs),
      code: [
        'import json, sys',
        'import matplotlib.pyplot as plt',
        'docs = json.loads(sys.stdin.read())',
        'for name, body in docs.items():',
        "    open('/data/' + name, 'w').write(body)",
        'plt.figure(figsize=(3, 2)); plt.plot([1, 3, 2])',
        "plt.savefig('/data/chart.png', dpi=60)",
      ].join('\n'),
    },
    { timeout: 180000 * SLOW },
  );
  assert.equal(r.structuredContent.status, 'completed', textOf(r));
  for (const f of r.structuredContent.files) files[f.name] = f.url;
  assert.deepEqual(Object.keys(files).sort(), ['chart.png', 'x.html', 'x.html.png', 'x.svg', 'x.txt']);

  // Control copies: the same bytes from the listener, no daemon headers.
  control.set('/control/x.html', { type: 'text/html; charset=utf-8', body: docs['x.html'], headers: {} });
  control.set('/control/x.svg', { type: 'image/svg+xml', body: docs['x.svg'], headers: {} });
  // The same HTML inline with exactly the daemon's CSP and nosniff: what a
  // misconfigured allow-list would still be protected by.
  const real = await rawHttp(Number(new URL(d.base).port), { target: new URL(files['x.html']).pathname });
  control.set('/csp/x.html', {
    type: 'text/html; charset=utf-8',
    body: docs['x.html'],
    headers: {
      'Content-Security-Policy': real.headers.get('content-security-policy'),
      'X-Content-Type-Options': real.headers.get('x-content-type-options'),
    },
  });
  control.set('/csp/x.svg', {
    type: 'image/svg+xml',
    body: docs['x.svg'],
    headers: {
      'Content-Security-Policy': real.headers.get('content-security-policy'),
      'X-Content-Type-Options': 'nosniff',
    },
  });
  // Another origin's page that embeds the daemon's files every way.
  const embed = (u) =>
    `<!doctype html><html><head><title>embedder</title></head><body>` +
    `<iframe src="${u('x.html')}"></iframe><iframe src="${u('x.svg')}"></iframe>` +
    `<object data="${u('x.svg')}" type="image/svg+xml"></object>` +
    `<embed src="${u('x.svg')}" type="image/svg+xml">` +
    `<img id="svgimg" src="${u('x.svg')}"><img id="png" src="${u('chart.png')}">` +
    `</body></html>`;
  control.set('/embed.html', { type: 'text/html', body: embed((n) => files[n]), headers: {} });
  control.set('/embed-control.html', {
    type: 'text/html',
    body: embed((n) => (n === 'chart.png' ? files[n] : `/control/${n}`)),
    headers: {},
  });

  browser = await launch(chromium.bin, { startTimeoutMs: 30000 * SLOW });
});

after(async () => {
  // Each step runs even if an earlier one fails: a listener or a browser
  // left open would keep this process alive.
  try {
    await browser?.close();
  } finally {
    try {
      listener?.closeAllConnections?.();
      await new Promise((r) => (listener ? listener.close(r) : r()));
      await c?.close();
    } finally {
      await d?.stopClean();
    }
  }
});

/** Hits on the listener of one tag prefix (html-, svg-, txt-). */
const hitsOf = (prefix) => hits.filter((h) => h.startsWith(`/hit/${prefix}`));

/** Opens url in a fresh tab, lets any script run, returns what happened. */
async function open(url, settleMs = 1500) {
  const page = await browser.newPage();
  try {
    const nav = await page.navigate(url, 15000 * SLOW);
    await sleep(settleMs);
    const state = await page.evaluate(
      '({ title: document.title, href: location.href, type: document.contentType, ' +
        'text: document.body ? document.body.innerText.slice(0, 200) : "", ' +
        'images: Array.from(document.images).map(i => ({ id: i.id, w: i.naturalWidth, done: i.complete })) })',
    );
    return { nav, state, messages: page.messages() };
  } finally {
    await page.close();
  }
}

describe('headless Chromium opens files written by code', { skip }, () => {
  test('the probes work: the control copies run their script', { timeout: 60000 * SLOW }, async () => {
    const r = await open(`http://127.0.0.1:${lport}/control/x.html`);
    assert.equal(r.nav.errorText, null);
    assert.equal(r.state.title, PWNED, 'script ran in the control copy');
    await sleep(300);
    assert.ok(hitsOf('html-script').length >= 1, `listener hits: ${JSON.stringify(hits)}`);
    const s = await open(`http://127.0.0.1:${lport}/control/x.svg`);
    assert.equal(s.state.title, PWNED, 'SVG script ran in the control copy');
    assert.ok(hitsOf('svg-').length >= 1);
    hits.length = 0;
  });

  test('HTML navigated to directly: a download, the script never runs', { timeout: 60000 * SLOW }, async () => {
    const url = files['x.html'];
    const r = await open(url);
    assert.ok(r.nav.download, `expected a download, got ${JSON.stringify(r.nav)} ${JSON.stringify(r.state)}`);
    assert.equal(r.nav.download.url, url);
    assert.equal(r.nav.download.suggestedFilename, 'x.html');
    assert.notEqual(r.state.title, PWNED);
    assert.notEqual(r.state.href, url, 'the page did not become the HTML document');
    // The download holds the bytes as written; nothing rendered them.
    const got = readdirSync(browser.downloadDir).map((f) => readFileSync(path.join(browser.downloadDir, f), 'utf8'));
    assert.ok(got.includes(documents(`http://127.0.0.1:${lport}`)['x.html']), 'the downloaded file is the HTML as written');
    await sleep(500);
    assert.deepEqual(hitsOf('html-'), [], 'the listener was never called');
  });

  test('SVG navigated to directly: a download, the script never runs', { timeout: 60000 * SLOW }, async () => {
    const url = files['x.svg'];
    const r = await open(url);
    assert.ok(r.nav.download, `expected a download, got ${JSON.stringify(r.nav)} ${JSON.stringify(r.state)}`);
    assert.equal(r.nav.download.suggestedFilename, 'x.svg');
    assert.notEqual(r.state.title, PWNED);
    assert.notEqual(r.state.href, url);
    await sleep(500);
    assert.deepEqual(hitsOf('svg-'), []);
  });

  test('HTML in a .txt file renders as plain text, no script', { timeout: 60000 * SLOW }, async () => {
    const url = files['x.txt'];
    const r = await open(url);
    assert.equal(r.nav.errorText, null);
    assert.equal(r.state.href, url);
    assert.equal(r.state.type, 'text/plain');
    assert.match(r.state.text, /<script>/, 'the markup is shown as text');
    assert.notEqual(r.state.title, PWNED);
    await sleep(500);
    assert.deepEqual(hitsOf('txt-'), []);
  });

  test('HTML named .png is not rendered as HTML', { timeout: 60000 * SLOW }, async () => {
    const url = files['x.html.png'];
    const r = await open(url);
    assert.equal(r.nav.download, null);
    assert.notEqual(r.state.title, PWNED);
    assert.notEqual(r.state.type, 'text/html', 'nosniff: the browser does not sniff HTML');
    await sleep(500);
    assert.deepEqual(hitsOf('png-'), []);
  });

  test('embedded from another origin (iframe, object, embed, img): no script runs', { timeout: 60000 * SLOW }, async () => {
    // Control first: the same embedding of the listener's copies fires.
    let r = await open(`http://127.0.0.1:${lport}/embed-control.html`, 2500);
    await sleep(300);
    assert.ok(hitsOf('html-').length + hitsOf('svg-').length >= 1, `control embedding: ${JSON.stringify(hits)}`);
    hits.length = 0;

    r = await open(`http://127.0.0.1:${lport}/embed.html`, 2500);
    assert.equal(r.state.title, 'embedder');
    await sleep(500);
    assert.deepEqual(hitsOf('html-'), [], 'framed HTML never called home');
    assert.deepEqual(hitsOf('svg-'), [], 'framed/embedded SVG never called home');
    const png = r.state.images.find((i) => i.id === 'png');
    assert.ok(png.done && png.w > 0, `the PNG renders cross-origin: ${JSON.stringify(r.state.images)}`);
  });

  test('even served inline, the daemon\'s CSP alone stops the script', { timeout: 60000 * SLOW }, async () => {
    for (const [p, prefix] of [['/csp/x.html', 'html-'], ['/csp/x.svg', 'svg-']]) {
      hits.length = 0;
      const r = await open(`http://127.0.0.1:${lport}${p}`);
      assert.equal(r.nav.errorText, null, p);
      assert.equal(r.nav.download, null, `${p} is rendered, not downloaded`);
      assert.notEqual(r.state.title, PWNED, p);
      await sleep(500);
      assert.deepEqual(hitsOf(prefix), [], `${p}: the listener was never called`);
      assert.ok(
        r.messages.some((m) => /sandboxed|allow-scripts|Content Security Policy/i.test(m)),
        `${p}: the console reports the blocked script: ${JSON.stringify(r.messages)}`,
      );
    }
  });

  test('an inline PNG renders when navigated to', { timeout: 60000 * SLOW }, async () => {
    const url = files['chart.png'];
    const r = await open(url, 500);
    assert.equal(r.nav.errorText, null);
    assert.equal(r.nav.download, null);
    assert.ok(r.nav.loaded);
    assert.equal(r.state.href, url);
    assert.equal(r.state.type, 'image/png');
    assert.equal(r.state.images.length, 1);
    assert.ok(r.state.images[0].done && r.state.images[0].w === 180, JSON.stringify(r.state.images));
  });
});
