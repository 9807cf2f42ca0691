// SPDX-License-Identifier: MIT
// The run viewer (an MCP App) in a real browser: headless Chromium
// (playwright-core, Debian's chromium) hosts the view the daemon serves as
// ui://mcp-sandboxd/run-viewer.html in a sandboxed frame, through the
// ext-apps SDK's own host bridge (AppBridge, bundled here with esbuild),
// whose tools/call and resources/read go to the real daemon through a real
// SDK client that declares the Apps extension. Screenshots go to
// build/test-logs/.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { connectHttp } from './lib/daemon.mjs';

const LOG_DIR = process.env.MCPSD_LOG_DIR ?? 'build/test-logs';
import { startWarm, stopWarm } from './lib/warm.mjs';

const UI = { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } };
const VIEW = 'ui://mcp-sandboxd/run-viewer.html';

let d, client, plain, browser, page, bridgeJs, html, listener, lport;
const opened = [];
const hits = [];
const conv = `viewer-${randomBytes(4).toString('hex')}`;

async function hostBundle() {
  const r = await build({
    stdin: {
      contents: 'export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";',
      resolveDir: path.dirname(new URL(import.meta.url).pathname),
    },
    bundle: true, write: false, format: 'iife', globalName: 'ExtApps', platform: 'browser',
  });
  return r.outputFiles[0].text;
}

// Shows one run_code call in a fresh frame, as a host would.
async function show(args, result) {
  await page.setContent('<!doctype html><html><body style="margin:0"><iframe id="v" sandbox="allow-scripts" style="width:1000px;height:900px;border:0"></iframe></body></html>');
  await page.addScriptTag({ content: bridgeJs });
  await page.evaluate(async ({ html, args, result }) => {
    const { AppBridge, PostMessageTransport } = window.ExtApps;
    const frame = document.getElementById('v');
    const bridge = new AppBridge(null, { name: 'mcpsd-test-host', version: '1.0.0' },
      { serverTools: {}, serverResources: {}, openLinks: {} });
    bridge.oncalltool = (p) => window.hostCallTool(p);
    bridge.onreadresource = (p) => window.hostReadResource(p);
    bridge.onopenlink = async ({ url }) => { await window.hostOpenLink(url); return {}; };
    bridge.oninitialized = () => { bridge.sendToolInput({ arguments: args }); bridge.sendToolResult(result); };
    // Listening before the view loads: it says ui/initialize at once.
    await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
    const loaded = new Promise((r) => frame.addEventListener('load', r, { once: true }));
    frame.srcdoc = html;
    await loaded;
  }, { html, args, result });
  return page.frames().find((f) => f !== page.mainFrame());
}

before(async () => {
  listener = http.createServer((req, res) => { hits.push(req.url); res.writeHead(204); res.end(); });
  await new Promise((r) => listener.listen(0, '127.0.0.1', r));
  lport = listener.address().port;
  d = await startWarm({ name: 'app-viewer' });
  client = await connectHttp(d, { capabilities: UI });
  plain = await connectHttp(d);
  bridgeJs = await hostBundle();
  html = (await client.readResource({ uri: VIEW })).contents[0].text;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  page.on('console', (m) => { if (process.env.MCPSD_VIEW_DEBUG) console.log('[browser]', m.text()); });
  page.on('pageerror', (e) => { if (process.env.MCPSD_VIEW_DEBUG) console.log('[browser error]', e.message); });
  await page.exposeFunction('hostCallTool', (p) => client.callTool(p));
  await page.exposeFunction('hostReadResource', (p) => client.readResource(p));
  await page.exposeFunction('hostOpenLink', (url) => { opened.push(url); });
});

after(async () => {
  await browser?.close();
  await client?.close();
  await plain?.close();
  if (d) await stopWarm(d);
  listener?.close();
});

describe('the run viewer as an MCP App', () => {
  test('only Apps hosts see the view, its link and view_table', async () => {
    const ui = await client.listTools();
    const base = await plain.listTools();
    const run = ui.tools.find((t) => t.name === 'run_code');
    assert.equal(run._meta.ui.resourceUri, VIEW);
    assert.deepEqual(ui.tools.find((t) => t.name === 'view_table')._meta.ui.visibility, ['app']);
    assert.equal(base.tools.find((t) => t.name === 'run_code')._meta, undefined);
    assert.equal(base.tools.find((t) => t.name === 'view_table'), undefined);
    assert.deepEqual((await plain.listResources()).resources.filter((r) => r.uri === VIEW), []);
    const res = (await client.readResource({ uri: VIEW })).contents[0];
    assert.equal(res.mimeType, 'text/html;profile=mcp-app');
    assert.deepEqual(res._meta.ui.csp, { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] });
    await assert.rejects(plain.callTool({ name: 'view_table', arguments: { conversationId: conv, table: '0123456789abcdef' } }), /MCP App/);
  });

  test('a 50,000-row frame pages and sorts through view_table', async () => {
    const args = {
      conversationId: conv, language: 'python',
      code: "import pandas as pd, numpy as np\ndf = pd.DataFrame({'i': np.arange(50000), 'mod97': np.arange(50000) % 97, 'name': ['row%05d' % k for k in range(50000)]})\nprint('rows', len(df))\ndf",
    };
    const result = await client.callTool({ name: 'run_code', arguments: args });
    assert.equal(result.structuredContent.status, 'completed');
    assert.match(result._meta['mcp-sandboxd/view'].table.id, /^[0-9a-f]{16}$/);
    const f = await show(args, result);
    await f.waitForFunction(() => /rows 1.50 of 50000/.test(document.getElementById('range').textContent));
    assert.equal(await f.locator('#tbody tr').count(), 50);
    await f.locator('#next').click();
    await f.waitForFunction(() => /rows 51.100 of 50000/.test(document.getElementById('range').textContent));
    assert.equal(await f.locator('#tbody tr').first().locator('td').first().textContent(), '50');
    await f.locator('th', { hasText: 'mod97' }).click();
    await f.waitForFunction(() => document.querySelector('th[aria-sort="ascending"]') && /rows 1.50/.test(document.getElementById('range').textContent));
    await f.locator('th', { hasText: 'mod97' }).click();
    await f.waitForFunction(() => document.querySelector('th[aria-sort="descending"]'));
    const first = await f.locator('#tbody tr').first().locator('td').allTextContents();
    assert.deepEqual(first, ['96', '96', 'row00096']);
    assert.match(await f.locator('#stdout').textContent(), /rows 50000/);
    assert.match(await f.locator('#code').textContent(), /np.arange\(50000\)/);
    await page.screenshot({ path: path.join(LOG_DIR, 'app-viewer-table.png') });
    // The frame the view pages is kept in /data/.mcp/view/ for it: the
    // model's file tools do not list it; the notebook under .mcp they do.
    const listed = (await client.callTool({ name: 'list_files', arguments: { conversationId: conv } }))
      .structuredContent.files.map((x) => x.name);
    assert.deepEqual(listed.filter((n) => /^\.mcp\/(view\/|value\.json)/.test(n)), [], listed.join(', '));
    const own = (await client.callTool({ name: 'list_files', arguments: { conversationId: conv, path: '.mcp' } }))
      .structuredContent.files.map((x) => x.name);
    assert.ok(own.includes('.mcp/notebook.ipynb'), own.join(', '));
    assert.equal(result.structuredContent.notebook_url, result._meta['mcp-sandboxd/view'].notebook_url);
  });

  test('a figure shows at full size and a file link opens through the host', async () => {
    await client.callTool({ name: 'upload_file', arguments: { conversationId: conv, filename: 'notes.txt', text: 'hello from /data\n' } });
    const args = {
      conversationId: conv, language: 'python',
      code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.figure(figsize=(6, 3))\nplt.plot(range(10), [k * k for k in range(10)])\nplt.title('squares')\nprint('plotted')",
    };
    const result = await client.callTool({ name: 'run_code', arguments: args });
    assert.equal(result.structuredContent.status, 'completed');
    const f = await show(args, result);
    await f.waitForFunction(() => { const i = document.querySelector('#figures img'); return i && i.complete && i.naturalWidth > 0; });
    const size = await f.locator('#figures img').first().evaluate((i) => [i.naturalWidth, i.width]);
    assert.equal(size[0], 600);
    assert.equal(size[1], 600, 'shown at its own size');
    await f.waitForSelector('ul.files a.file');
    await page.screenshot({ path: path.join(LOG_DIR, 'app-viewer-figure.png') });
    await f.locator('ul.files a.file', { hasText: 'notes.txt' }).click();
    await f.waitForFunction(() => true);
    for (let k = 0; k < 50 && !opened.some((u) => u.endsWith('/notes.txt')); k++) await new Promise((r) => setTimeout(r, 100));
    const url = opened.find((u) => u.endsWith('/notes.txt'));
    assert.ok(url, `the host was asked to open the file (asked: ${opened.join(', ')})`);
    assert.equal(await (await fetch(url)).text(), 'hello from /data\n');
  });

  test("the view's CSP blocks a fetch to another origin", async () => {
    const f = page.frames().find((x) => x !== page.mainFrame());
    const outcome = await f.evaluate(async (u) => {
      try { await fetch(u); return 'fetched'; } catch (e) { return 'blocked: ' + e.message; }
    }, `http://127.0.0.1:${lport}/csp-probe`);
    assert.match(outcome, /^blocked/);
    assert.deepEqual(hits, []);
  });
});
