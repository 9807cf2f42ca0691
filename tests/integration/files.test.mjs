// SPDX-License-Identifier: MIT
// Workspaces and files against the real daemon, the real Docker engine and
// the real runner images, with the official SDK client: upload, analyse
// and chart with pandas/matplotlib, the Bun runner writing JSON, the
// headers and conditional/range requests of /files/, name and URL
// traversal attempts, links/FIFOs/sockets made by code, quotas, tenants,
// long output, and the workspace resources.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { authHeaders, connectHttp, initSession, sleep, startDaemon } from './lib/daemon.mjs';
import { SLOW, call, filesEnv, isPng, pngSize, rawHttp, sha256, textOf } from './lib/files-http.mjs';

const RUN_MS = 180000 * SLOW;
const tokAlice = randomBytes(24).toString('hex');
const tokBob = randomBytes(24).toString('hex');

let d; // the main daemon: default tenant plus alice and bob
let port;
let c; // SDK client of the default tenant

before(async () => {
  d = await startDaemon({
    name: 'files',
    env: filesEnv('files', { MCP_API_TOKENS: `alice:${tokAlice},bob:${tokBob}` }),
  });
  port = Number(new URL(d.base).port);
  c = await connectHttp(d);
});
after(async () => {
  await c?.close();
  await d?.stopClean();
});

/** The workspace name in a file URL. */
const wsOf = (url) => new URL(url).pathname.split('/')[2];

/** GET through fetch (whole body as a Buffer). */
async function get(url, headers = {}) {
  const r = await fetch(url, { headers, signal: AbortSignal.timeout(15000) });
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
}

// ---------------------------------------------------------------------------

describe('upload a CSV, analyse it with pandas, chart it with matplotlib', () => {
  const conv = `chart-${randomBytes(4).toString('hex')}`;
  const csv = Buffer.from(
    'region,month,sales\n' +
      'North,1,100\nNorth,2,118\n' +
      'South,1,200\nSouth,2,204\n' +
      'East,1,50\nEast,2,54\n' +
      'West,1,80\nWest,2,79\n',
  );
  let upload;
  let run;
  let png;
  let pngFile;

  test('upload_file stores the bytes and reports their size, SHA-256 and URL', { timeout: RUN_MS }, async () => {
    upload = await call(c, 'upload_file', { conversationId: conv, filename: 'in/sales.csv', content: csv.toString('base64') });
    assert.equal(upload.isError ?? false, false, textOf(upload));
    const sc = upload.structuredContent;
    assert.equal(sc.name, 'in/sales.csv');
    assert.equal(sc.path, '/data/in/sales.csv');
    assert.equal(sc.size, csv.length);
    assert.equal(sc.sha256, sha256(csv));
    assert.equal(sc.mimeType, 'text/csv');
    assert.equal(sc.uri, `sandbox://${conv}/in/sales.csv`);
    assert.match(sc.url, new RegExp(`^${d.base}/files/[0-9a-f]{64}/in/sales\\.csv$`));
    const link = upload.content.find((x) => x.type === 'resource_link');
    assert.equal(link.uri, sc.url);
    const r = await get(sc.url);
    assert.equal(r.status, 200);
    assert.equal(sha256(r.body), sc.sha256, 'the URL serves exactly the uploaded bytes');
    assert.equal(r.headers.get('content-type'), 'text/csv; charset=utf-8');
  });

  test('run_code reads it with pandas and returns the chart inline and by URL', { timeout: RUN_MS }, async () => {
    run = await call(
      c,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        timeout_seconds: 120,
        code: [
          'import pandas as pd',
          'import matplotlib',
          "matplotlib.use('Agg')",
          'import matplotlib.pyplot as plt',
          "df = pd.read_csv('/data/in/sales.csv')",
          "g = df.pivot(index='month', columns='region', values='sales')",
          'growth = (g.iloc[-1] / g.iloc[0] - 1) * 100',
          "print('fastest', growth.idxmax(), round(growth.max(), 1))",
          "ax = growth.sort_values().plot.barh(title='growth %')",
          'import os',
          "os.makedirs('/data/out', exist_ok=True)",
          "plt.tight_layout(); plt.savefig('/data/out/growth.png', dpi=80)",
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    const sc = run.structuredContent;
    assert.equal(sc.status, 'completed', textOf(run));
    assert.equal(sc.exit_code, 0);
    assert.match(sc.stdout, /^fastest North 18\.0$/m, 'pandas computed the growth from the uploaded CSV');
    assert.equal(run.isError, false);

    pngFile = sc.files.find((f) => f.name === 'out/growth.png');
    assert.ok(pngFile, `files manifest: ${JSON.stringify(sc.files)}`);
    assert.equal(pngFile.path, '/data/out/growth.png');
    assert.equal(pngFile.mimeType, 'image/png');
    assert.equal(pngFile.status, 'created');
    assert.equal(pngFile.uri, `sandbox://${conv}/out/growth.png`);
    assert.equal(wsOf(pngFile.url), wsOf(upload.structuredContent.url), 'same conversation, same workspace');
    assert.ok(!sc.files.some((f) => f.name === 'in/sales.csv'), 'the unchanged upload is not in the run manifest');

    const link = run.content.find((x) => x.type === 'resource_link' && x.name === 'out/growth.png');
    assert.ok(link, 'a resource_link item for the chart');
    assert.equal(link.uri, pngFile.url);
    assert.equal(link.mimeType, 'image/png');
    assert.equal(link.size, pngFile.size);

    const images = run.content.filter((x) => x.type === 'image');
    assert.equal(images.length, 1, 'the chart is inline once');
    assert.equal(images[0].mimeType, 'image/png');
    assert.match(images[0].data, /^[A-Za-z0-9+/]+={0,2}$/, 'strict base64');
    png = Buffer.from(images[0].data, 'base64');
    assert.equal(png.toString('base64'), images[0].data, 'canonical base64');
    assert.ok(isPng(png), 'the inline image is a complete PNG');
    assert.equal(png.length, pngFile.size);
    assert.ok(pngSize(png).width > 100 && pngSize(png).height > 100);
    assert.match(textOf(run), /out\/growth\.png \(\d+ bytes, image\/png\): http/);
    assert.equal(sc.workspace.enforced, true);
    assert.ok(sc.workspace.bytesUsed <= sc.workspace.bytesQuota);
  });

  test('the chart URL serves the same bytes with safe headers', { timeout: 30000 }, async () => {
    const r = await get(pngFile.url);
    assert.equal(r.status, 200);
    assert.ok(r.body.equals(png), 'URL bytes equal the inline image');
    assert.equal(sha256(r.body), sha256(png));
    const h = r.headers;
    assert.equal(h.get('content-type'), 'image/png');
    assert.equal(h.get('content-length'), String(png.length));
    assert.match(h.get('content-disposition'), /^inline; filename="growth\.png"; filename\*=UTF-8''growth\.png$/);
    assert.equal(h.get('x-content-type-options'), 'nosniff');
    assert.match(h.get('content-security-policy'), /(^|;)\s*sandbox\s*(;|$)/);
    assert.match(h.get('content-security-policy'), /default-src 'none'/);
    assert.equal(h.get('referrer-policy'), 'no-referrer');
    assert.match(h.get('etag'), /^"[0-9a-f]{32}"$/, 'a strong ETag');
    assert.ok(!Number.isNaN(Date.parse(h.get('last-modified'))));
    assert.equal(h.get('accept-ranges'), 'bytes');
    assert.equal(h.get('set-cookie'), null);

    // list_files agrees on size and type.
    const l = await call(c, 'list_files', { conversationId: conv });
    const lf = l.structuredContent.files.find((f) => f.name === 'out/growth.png');
    assert.equal(lf.size, png.length);
    assert.equal(lf.url, pngFile.url);
    assert.equal(lf.mimeType, 'image/png');
    assert.match(lf.modified, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  test('Range, If-None-Match, If-Modified-Since, If-Range and HEAD', { timeout: 30000 }, async () => {
    const target = new URL(pngFile.url).pathname;
    const full = await rawHttp(port, { target });
    const etag = full.headers.get('etag');
    const lm = full.headers.get('last-modified');
    const n = png.length;

    let r = await rawHttp(port, { target, headers: [['Range', 'bytes=0-7']] });
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes 0-7/${n}`);
    assert.ok(r.body.equals(png.subarray(0, 8)), 'the PNG signature');
    assert.equal(r.headers.get('content-type'), 'image/png');

    r = await rawHttp(port, { target, headers: [['Range', 'bytes=-12']] });
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes ${n - 12}-${n - 1}/${n}`);
    assert.ok(r.body.equals(png.subarray(n - 12)), 'the IEND chunk');

    r = await rawHttp(port, { target, headers: [['Range', `bytes=100-${n + 5000}`]] });
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes 100-${n - 1}/${n}`);
    assert.ok(r.body.equals(png.subarray(100)));

    r = await rawHttp(port, { target, headers: [['Range', `bytes=${n}-`]] });
    assert.equal(r.status, 416);
    assert.equal(r.headers.get('content-range'), `bytes */${n}`);

    r = await rawHttp(port, { target, headers: [['If-None-Match', etag]] });
    assert.equal(r.status, 304);
    assert.equal(r.body.length, 0, 'a 304 has no body');
    assert.equal(r.headers.get('etag'), etag);

    r = await rawHttp(port, { target, headers: [['If-None-Match', '"0000", ' + etag]] });
    assert.equal(r.status, 304, 'a list that holds the tag');

    r = await rawHttp(port, { target, headers: [['If-None-Match', '"0123456789abcdef0123456789abcdef"']] });
    assert.equal(r.status, 200);
    assert.ok(r.body.equals(png));

    r = await rawHttp(port, { target, headers: [['If-Modified-Since', lm]] });
    assert.equal(r.status, 304);

    r = await rawHttp(port, { target, headers: [['Range', 'bytes=0-7'], ['If-Range', '"stale"']] });
    assert.equal(r.status, 200, 'If-Range with another tag sends the whole file');
    assert.ok(r.body.equals(png));
    r = await rawHttp(port, { target, headers: [['Range', 'bytes=0-7'], ['If-Range', etag]] });
    assert.equal(r.status, 206);

    r = await rawHttp(port, { method: 'HEAD', target });
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 0, 'HEAD sends no body');
    assert.equal(r.headers.get('content-length'), String(n));
    assert.equal(r.headers.get('etag'), etag);
    assert.equal(r.headers.get('content-type'), 'image/png');
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');

    for (const method of ['POST', 'PUT', 'DELETE']) {
      r = await rawHttp(port, { method, target, body: Buffer.from('x') });
      assert.equal(r.status, 405, `${method} on a file`);
    }
    r = await rawHttp(port, { target });
    assert.ok(r.body.equals(png), 'the file is unchanged after the refused writes');
  });
});

// ---------------------------------------------------------------------------

describe('the TypeScript (Bun) runner writes JSON to /data', () => {
  test('served as JSON per the allow-list; the content parses to what was written', { timeout: RUN_MS }, async () => {
    const conv = `bun-${randomBytes(4).toString('hex')}`;
    const value = {
      ok: true,
      n: [1, 2.5, -3, 1e21],
      nested: { s: 'héllo wörld ✓ 𝄞', html: '<script>alert(1)</script>', empty: {} },
      nul: null,
    };
    const r = await call(
      c,
      'run_code',
      {
        conversationId: conv,
        language: 'typescript',
        code: [
          'type V = Record<string, unknown>;',
          `const value: V = JSON.parse(${JSON.stringify(JSON.stringify(value))});`,
          "await Bun.write('/data/report/result.json', JSON.stringify(value, null, 2));",
          'console.log(process.env.FILE_BASE_URL);',
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    const sc = r.structuredContent;
    assert.equal(sc.status, 'completed', textOf(r));
    assert.equal(sc.language, 'typescript');
    const f = sc.files.find((x) => x.name === 'report/result.json');
    assert.ok(f, JSON.stringify(sc.files));
    assert.equal(f.mimeType, 'application/json');
    assert.equal(sc.stdout.trim(), f.url.slice(0, f.url.length - 'report/result.json'.length), 'FILE_BASE_URL is the workspace URL prefix');
    assert.ok(!r.content.some((x) => x.type === 'image'), 'JSON is not an image');

    const g = await get(f.url);
    assert.equal(g.status, 200);
    assert.equal(g.body.length, f.size);
    const ct = g.headers.get('content-type');
    const cd = g.headers.get('content-disposition');
    // The allow-list: JSON may be inline as application/json; anything
    // else must be an attachment.
    assert.ok(
      (ct === 'application/json' && /^inline;/.test(cd)) || /^attachment;/.test(cd),
      `content-type ${ct}, disposition ${cd}`,
    );
    assert.match(cd, /filename="result\.json"/);
    assert.equal(g.headers.get('x-content-type-options'), 'nosniff');
    assert.match(g.headers.get('content-security-policy'), /sandbox/);
    assert.deepEqual(JSON.parse(g.body.toString('utf8')), value);
    assert.equal(g.body.toString('utf8'), JSON.stringify(value, null, 2));
  });
});

describe('the type allow-list', () => {
  test('only raster images and plain text are inline; active content is an attachment', { timeout: 60000 }, async () => {
    const conv = `types-${randomBytes(4).toString('hex')}`;
    const html = '<html><script>document.title="pwned"</script></html>';
    const cases = [
      ['a.html', 'text/html; charset=utf-8', 'attachment'],
      ['b.HTM', 'text/html; charset=utf-8', 'attachment'],
      ['c.xhtml', 'application/xhtml+xml', 'attachment'],
      ['d.svg', 'image/svg+xml', 'attachment'],
      ['e.js', 'text/javascript', 'attachment'],
      ['f.xml', 'application/xml', 'attachment'],
      ['g.pdf', 'application/pdf', 'attachment'],
      ['h.css', 'text/css', 'attachment'],
      ['noext', 'application/octet-stream', 'attachment'],
      ['i.exe', 'application/octet-stream', 'attachment'],
      ['j.html.png', 'image/png', 'inline'], // HTML in disguise: nosniff keeps it an (invalid) image
      ['k.txt', 'text/plain; charset=utf-8', 'inline'],
      ['l.md', 'text/markdown; charset=utf-8', 'inline'],
      ['m.csv', 'text/csv; charset=utf-8', 'inline'],
    ];
    for (const [name, type, disposition] of cases) {
      const u = await call(c, 'upload_file', { conversationId: conv, filename: name, text: html });
      assert.equal(u.isError ?? false, false, textOf(u));
      const r = await rawHttp(port, { target: new URL(u.structuredContent.url).pathname });
      assert.equal(r.status, 200, name);
      assert.equal(r.headers.get('content-type'), type, name);
      assert.ok(r.headers.get('content-disposition').startsWith(`${disposition}; filename="${name}"`), `${name}: ${r.headers.get('content-disposition')}`);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', name);
      assert.match(r.headers.get('content-security-policy'), /sandbox/, name);
      assert.equal(r.headers.get('referrer-policy'), 'no-referrer', name);
      assert.equal(r.body.toString(), html, name);
    }
    // A name with quotes and semicolons cannot forge disposition parameters.
    const tricky = 'q"; filename=evil.html; x=".png';
    const u = await call(c, 'upload_file', { conversationId: conv, filename: tricky, text: 'x' });
    assert.equal(u.isError ?? false, false, textOf(u));
    const r = await rawHttp(port, { target: new URL(u.structuredContent.url).pathname });
    assert.equal(r.status, 200);
    const cd = r.headers.get('content-disposition');
    assert.equal(cd, `inline; filename="q_; filename=evil.html; x=_.png"; filename*=UTF-8''q%22%3B%20filename%3Devil.html%3B%20x%3D%22.png`);
    assert.equal(r.headers.get('content-type'), 'image/png');
  });
});

// ---------------------------------------------------------------------------

describe('names: upload and URL traversal attempts are refused', () => {
  const conv = `names-${randomBytes(4).toString('hex')}`;
  const other = `names-other-${randomBytes(4).toString('hex')}`;
  const marker = `in-workspace-${randomBytes(6).toString('hex')}`;
  const otherMarker = `other-workspace-${randomBytes(6).toString('hex')}`;
  let ws;
  let otherWs;

  before(async () => {
    let r = await call(c, 'upload_file', { conversationId: conv, filename: 'sub/ok.txt', text: marker });
    assert.equal(r.isError ?? false, false, textOf(r));
    ws = wsOf(r.structuredContent.url);
    await call(c, 'upload_file', { conversationId: conv, filename: 'sp ace.txt', text: 'a space' });
    await call(c, 'upload_file', { conversationId: conv, filename: '%20.txt', text: 'a literal percent' });
    r = await call(c, 'upload_file', { conversationId: other, filename: 'secret.txt', text: otherMarker });
    otherWs = wsOf(r.structuredContent.url);
    assert.notEqual(ws, otherWs);
  });

  /** The names in the workspace, to show a refused upload wrote nothing. */
  async function names() {
    const l = await call(c, 'list_files', { conversationId: conv });
    return l.structuredContent.files.map((f) => f.name).sort();
  }

  test('upload_file refuses each with a message that names the rule', { timeout: 60000 }, async () => {
    const initial = await names();
    const cases = [
      ['../x', /segment '\.\.' is not allowed/],
      ['a/../../x', /segment '\.\.' is not allowed/],
      ['/etc/passwd', /starts with '\/'.*relative to \/data/],
      ['/data/out.txt', /relative to \/data, i\.e\. 'out\.txt'/],
      ['a\\b', /contains '\\'/],
      ['..\\..\\x', /contains '\\'/],
      ['.', /segment '\.' is not allowed/],
      ['..', /segment '\.\.' is not allowed/],
      ['a//b', /empty segment/],
      ['a/', /empty segment/],
      ['', /file name is empty/],
      ['a\r\nb', /control character U\+000D/],
      ['a\nb', /control character U\+000A/],
      ['a\tb', /control character U\+0009/],
      ['a\u2215b', /U\+2215 DIVISION SLASH.*looks like '\/'/],
      ['a\uff0fb', /U\+FF0F FULLWIDTH SOLIDUS.*looks like '\/'/],
      ['\uff0e\uff0e/x', /U\+FF0E FULLWIDTH FULL STOP.*looks like '\.'/],
      ['a\uff3cb', /U\+FF3C.*looks like '\\'/],
      ['a\u202eb.txt', /invisible formatting character U\+202E/],
      ['a\u200bb', /invisible formatting character U\+200B/],
      [' lead.txt', /starts with white space/],
      ['x'.repeat(2000), /2000 bytes long; at most 1024 bytes/],
      [`${'d/'.repeat(40)}x`, /more than 32 levels/],
      ['y'.repeat(256), /256 bytes long; a name may have at most 255/],
    ];
    for (const [name, rule] of cases) {
      const r = await call(c, 'upload_file', { conversationId: conv, filename: name, text: 'x' });
      const msg = textOf(r);
      assert.equal(r.isError, true, `${JSON.stringify(name.slice(0, 40))} was accepted: ${msg}`);
      assert.match(msg, /^filename: /, `the message names the argument: ${msg}`);
      assert.match(msg, rule, `rule for ${JSON.stringify(name.slice(0, 40))}: ${msg}`);
      assert.ok(msg.length < 400, 'the message does not echo a long name');
      assert.ok(!/[\r\n]/.test(msg), 'no raw CR/LF in the message');
    }
    // JSON-level escapes reach the same rules.
    for (const [escaped, rule] of [
      ['\\u002e\\u002e/x', /segment '\.\.'/],
      ['\\u002fetc/passwd', /starts with '\/'/],
      ['a\\u005cb', /contains '\\'/],
      ['a\\u2215b', /U\+2215/],
    ]) {
      const r = await rawCall(`{"conversationId":"${conv}","text":"x","filename":"${escaped}"}`);
      assert.equal(r.status, 200);
      assert.equal(r.json.result.isError, true, escaped);
      assert.match(r.json.result.content[0].text, rule, escaped);
    }
    assert.deepEqual(await names(), initial, 'no refused upload wrote anything');
  });

  // A session for raw JSON-RPC bodies the SDK could not produce.
  let sid;
  async function rawCall(argsJson) {
    if (!sid) {
      sid = await initSession(d);
      await fetch(d.url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...authHeaders(d.token), 'Mcp-Session-Id': sid },
        body: '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      });
    }
    const body = Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"upload_file","arguments":'),
      Buffer.isBuffer(argsJson) ? argsJson : Buffer.from(argsJson, 'utf8'),
      Buffer.from('}}'),
    ]);
    const r = await fetch(d.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...authHeaders(d.token), 'Mcp-Session-Id': sid },
      body,
      signal: AbortSignal.timeout(30000),
    });
    const text = await r.text();
    if (/text\/event-stream/.test(r.headers.get('content-type') ?? '')) {
      // The answer as an event stream: the data line with our id.
      for (const line of text.split('\n')) {
        if (!line.startsWith('data: ') || line.length < 8) continue;
        const m = JSON.parse(line.slice(6));
        if (m.id === 7) return { status: r.status, json: m };
      }
      throw new Error(`no answer in the stream: ${text.slice(0, 300)}`);
    }
    return { status: r.status, json: JSON.parse(text) };
  }

  test('NUL, lone surrogates and overlong UTF-8 in a name never reach the file system', { timeout: 60000 }, async () => {
    const initial = await names();
    // Through the SDK: the JSON scanner refuses \u0000 and names the rule.
    await assert.rejects(
      call(c, 'upload_file', { conversationId: conv, filename: 'a\u0000b.txt', text: 'x' }),
      /NUL/,
    );
    const argsWith = (bytes) =>
      Buffer.concat([Buffer.from(`{"conversationId":"${conv}","text":"x","filename":"`), bytes, Buffer.from('"}')]);
    for (const [label, bytes, rule] of [
      ['escaped NUL', Buffer.from('a\\u0000b'), /NUL/],
      ['raw NUL', Buffer.from([0x61, 0x00, 0x62]), /control character/],
      ['lone surrogate', Buffer.from('a\\ud800b'), /surrogate/],
      ['overlong "/" (C0 AF)', Buffer.from([0x61, 0xc0, 0xaf, 0x62]), /invalid UTF-8/],
      ['overlong ".." (C0 AE C0 AE)', Buffer.from([0xc0, 0xae, 0xc0, 0xae, 0x2f, 0x78]), /invalid UTF-8/],
      ['3-byte overlong "/" (E0 80 AF)', Buffer.from([0xe0, 0x80, 0xaf]), /invalid UTF-8/],
      ['4-byte overlong "/" (F0 80 80 AF)', Buffer.from([0xf0, 0x80, 0x80, 0xaf]), /invalid UTF-8/],
      ['UTF-8 surrogate (ED A0 80)', Buffer.from([0xed, 0xa0, 0x80]), /invalid UTF-8/],
    ]) {
      const r = await rawCall(argsWith(bytes));
      assert.equal(r.status, 400, label);
      assert.equal(r.json.error.code, -32700, label);
      assert.match(r.json.error.message, rule, `${label}: ${r.json.error.message}`);
    }
    assert.deepEqual(await names(), initial);
  });

  test('/files/ URL traversal attempts are 4xx and never return a file', { timeout: 120000 }, async () => {
    const base = `/files/${ws}`;
    // The harness serves what it should: the control request works.
    const ok = await rawHttp(port, { target: `${base}/sub/ok.txt` });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.toString(), marker);
    assert.equal((await rawHttp(port, { target: `${base}/%2520.txt` })).body.toString(), 'a literal percent', '%25 decodes once');
    assert.equal((await rawHttp(port, { target: `${base}/sp%20ace.txt` })).body.toString(), 'a space');

    const passwd = readFileSync('/etc/passwd', 'utf8').split('\n')[0];
    const targets = [
      // dot segments, plain and encoded, single and double
      `${base}/../${otherWs}/secret.txt`,
      `${base}/sub/../../${otherWs}/secret.txt`,
      `${base}/../../../../../../etc/passwd`,
      `${base}/./sub/ok.txt`,
      `${base}/%2e%2e/${otherWs}/secret.txt`,
      `${base}/%2E%2E/%2E%2E/etc/passwd`,
      `${base}/.%2e/.%2e/etc/passwd`,
      `${base}/%2e/sub/ok.txt`,
      `${base}/%252e%252e/${otherWs}/secret.txt`,
      `${base}/%25252e%25252e/x`,
      // encoded separators
      `${base}/..%2f${otherWs}%2fsecret.txt`,
      `${base}/..%2f..%2f..%2fetc%2fpasswd`,
      `${base}/..%252f..%252fetc%252fpasswd`,
      `${base}/..%5c..%5cetc%5cpasswd`,
      `${base}/sub%5cok.txt`,
      `${base}/..\\..\\etc\\passwd`,
      `${base}/sub\\ok.txt`,
      // NUL
      `${base}/sub/ok.txt%00.png`,
      `${base}/%00`,
      `${base}/sub%00/ok.txt`,
      // overlong UTF-8 for '/' and '.'
      `${base}/%c0%af`,
      `${base}/..%c0%af..%c0%afetc%c0%afpasswd`,
      `${base}/%c0%ae%c0%ae/${otherWs}/secret.txt`,
      `${base}/%e0%80%af`,
      `${base}/%f0%80%80%af`,
      `${base}/%c1%9c`,
      // look-alike slashes, backslashes and dots
      `${base}/..%e2%88%95..%e2%88%95etc%e2%88%95passwd`,
      `${base}/sub%ef%bc%8fok.txt`,
      `${base}/..%e2%81%84x`,
      `${base}/..%ef%bc%bcx`,
      `${base}/%ef%bc%8e%ef%bc%8e/x`,
      // CR/LF (response splitting), TAB, DEL
      `${base}/sub/ok.txt%0d%0aX-Injected:%20yes`,
      `${base}/%0d%0a%0d%0a<html>`,
      `${base}/sub/ok%09.txt`,
      `${base}/sub/ok%7f.txt`,
      // malformed escapes
      `${base}/%`,
      `${base}/%zz`,
      `${base}/%2`,
      // very long and very deep
      `${base}/${'a'.repeat(5000)}`,
      `${base}/${'%61'.repeat(1100)}`,
      `${base}/${'a/'.repeat(40)}x`,
      `${base}/${'../'.repeat(200)}etc/passwd`,
      // empty segments, trailing slash, directory
      `${base}//sub/ok.txt`,
      `${base}/sub//ok.txt`,
      `${base}/sub/ok.txt/`,
      `${base}/`,
      `${base}/sub`,
      // wrong, truncated, altered workspace names
      `/files/${ws.slice(0, 63)}/sub/ok.txt`,
      `/files/${ws.slice(0, 32)}/sub/ok.txt`,
      `/files/${ws}0/sub/ok.txt`,
      `/files/${ws.toUpperCase()}/sub/ok.txt`,
      `/files/${ws.slice(0, 63)}g/sub/ok.txt`,
      `/files/${randomBytes(32).toString('hex')}/sub/ok.txt`,
      `/files/${'0'.repeat(64)}/sub/ok.txt`,
      `/files//${ws}/sub/ok.txt`,
      `/files/${ws}`,
      `/files/`,
      `/files/../../etc/passwd`,
      `/files/..%2f..%2fetc%2fpasswd`,
      `/files/%2e%2e/%2e%2e/etc/passwd`,
      `/files/${ws}%2f..%2f${otherWs}/secret.txt`,
      `/files/${ws}/..%2f${otherWs}/secret.txt`,
      // absolute-form and scheme tricks
      `http://127.0.0.1:${port}/files/${ws}/../${otherWs}/secret.txt`,
      `${base}/file:%2f%2f%2fetc%2fpasswd`,
    ];
    for (const target of targets) {
      const r = await rawHttp(port, { target, timeoutMs: 10000 });
      const label = `${target.replace(ws, '<ws>').replace(otherWs, '<other>').slice(0, 120)} -> ${r.status}`;
      assert.ok(r.status >= 400 && r.status < 500, label);
      const body = r.body.toString('latin1');
      assert.ok(!body.includes(otherMarker), `${label}: another workspace's file`);
      assert.ok(!body.includes(passwd), `${label}: /etc/passwd`);
      assert.ok(!body.includes(marker), `${label}: served sub/ok.txt`);
      assert.equal(r.headers.get('x-injected'), undefined, `${label}: header injection`);
      assert.equal(r.headers.get('content-disposition'), undefined, `${label}: looks like a file`);
      assert.ok(r.ms < 5000 * SLOW, `${label}: took ${r.ms} ms`);
    }
    // Raw bytes on the wire: CR/LF inside the target is a malformed
    // request; look-alike slashes unencoded are refused by the rules.
    for (const target of [
      Buffer.from(`${base}/sub/ok.txt\r\nX-Injected: yes`),
      Buffer.concat([Buffer.from(`${base}/..`), Buffer.from([0xe2, 0x88, 0x95]), Buffer.from('..')]),
      Buffer.concat([Buffer.from(`${base}/`), Buffer.from([0xc0, 0xaf])]),
    ]) {
      const r = await rawHttp(port, { target, timeoutMs: 10000 });
      assert.ok(r.status >= 400 && r.status < 500, `${JSON.stringify(target.toString('latin1'))} -> ${r.status}`);
      assert.ok(!r.body.toString('latin1').includes(marker));
      assert.equal(r.headers.get('x-injected'), undefined);
    }
    // The rule is named (after decoding once), before any lookup.
    const m = await rawHttp(port, { target: `${base}/%2e%2e/${otherWs}/secret.txt` });
    assert.equal(m.status, 400);
    assert.match(JSON.parse(m.body).error.message, /segment '\.\.' is not allowed/);
    const nul = await rawHttp(port, { target: `${base}/sub/ok.txt%00.png` });
    assert.match(JSON.parse(nul.body).error.message, /NUL/);
    const ov = await rawHttp(port, { target: `${base}/%c0%af` });
    assert.match(JSON.parse(ov.body).error.message, /not valid UTF-8/);
    // Names the workspace does not hold and other workspaces look alike: 404.
    assert.equal((await rawHttp(port, { target: `/files/${randomBytes(32).toString('hex')}/x` })).status, 404);
    assert.equal((await rawHttp(port, { target: `${base}/nope.txt` })).status, 404);
    // The daemon is fine afterwards.
    assert.equal((await d.health()).status, 'ok');
  });

  // A request whose "/files/" prefix is itself escaped (/%66iles/...,
  // /files%2f...) would be decoded by libmicrohttpd and then again by the
  // files hook ("%2520" -> ' ', "%00" -> a NUL cutting the name): http.c
  // refuses it.
  test('an escaped /files/ prefix does not get the path decoded twice', { timeout: 30000 }, async () => {
    for (const prefix of [`/%66iles/${ws}`, `/files%2f${ws}`, `/file%73/${ws}`]) {
      let r = await rawHttp(port, { target: `${prefix}/sub/ok.txt%00.png` });
      assert.ok(r.status >= 400 && r.status < 500, `${prefix.replace(ws, '<ws>')}/sub/ok.txt%00.png -> ${r.status}: %00 must be refused, not cut the name`);
      r = await rawHttp(port, { target: `${prefix}/sub%252fok.txt` });
      assert.ok(!r.body.toString().includes(marker), `${prefix.replace(ws, '<ws>')}/sub%252fok.txt served sub/ok.txt: %252f was decoded twice`);
      r = await rawHttp(port, { target: `${prefix}/sp%2520ace.txt` });
      assert.notEqual(r.body.toString(), 'a space', `${prefix.replace(ws, '<ws>')}/sp%2520ace.txt served 'sp ace.txt': decoded twice`);
    }
  });

  test('a raw NUL byte in the request target never reaches past the workspace', { timeout: 30000 }, async () => {
    // libmicrohttpd 0.9.75 hands the target over as a C string, so it is
    // cut at a raw NUL before the daemon sees it (docs/security.md). What
    // must hold: the result is the part before the NUL, inside the
    // workspace, or a refusal; never the part after it.
    const okBody = await (await fetch(`${d.base}/files/${ws}/sub/ok.txt`)).text();
    for (const tail of ['.png', '/../../../../etc/passwd', '%2f..%2f..%2fetc%2fpasswd']) {
      const target = Buffer.concat([Buffer.from(`/files/${ws}/sub/ok.txt`), Buffer.from([0]), Buffer.from(tail)]);
      const r = await rawHttp(port, { target });
      const body = r.body.toString();
      assert.ok((r.status >= 400 && r.status < 500) || (r.status === 200 && body === okBody),
        `raw NUL target + ${tail} -> ${r.status} ${JSON.stringify(body.slice(0, 40))}`);
      assert.ok(!/root:/.test(body), 'never /etc/passwd');
    }
  });
});

// ---------------------------------------------------------------------------

describe('links, FIFOs, sockets and loops made by code', () => {
  const conv = `special-${randomBytes(4).toString('hex')}`;
  let run;
  let ws;
  const specials = {
    'passwd.txt': 'symlink',
    'environ.txt': 'symlink',
    'rel-link.txt': 'symlink',
    'etc-dir': 'symlink',
    'fifo.txt': 'fifo',
    'sock.txt': 'socket',
    'loop/a/up': 'symlink',
    'loop/root': 'symlink',
    loop1: 'symlink',
    loop2: 'symlink',
  };

  before(async () => {
    run = await call(
      c,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        code: [
          'import os, socket',
          "os.chdir('/data')",
          "open('real.txt', 'w').write('regular file\\n')",
          "os.symlink('/etc/passwd', 'passwd.txt')",
          "os.symlink('/proc/self/environ', 'environ.txt')",
          "os.symlink('real.txt', 'rel-link.txt')",
          "os.symlink('/etc', 'etc-dir')",
          "os.mkfifo('fifo.txt')",
          's = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
          "s.bind('/data/sock.txt'); s.listen(1)",
          "os.makedirs('loop/a')",
          "os.symlink('..', 'loop/a/up')",
          "os.symlink('/data', 'loop/root')",
          "os.symlink('loop2', 'loop1'); os.symlink('loop1', 'loop2')",
          "open('loop/a/inner.txt', 'w').write('inner\\n')",
          // names the rules refuse: never listed, linked or served
          "open('cr\\r\\nlf.txt', 'w').write('x')",
          "open(b'/data/\\xc0\\xaf.txt', 'w').write('x')",
          "open('a\\u2215b.txt', 'w').write('x')",
          "print(sorted(os.listdir('/data')))",
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    assert.equal(run.structuredContent.status, 'completed', textOf(run));
    ws = wsOf(run.structuredContent.files[0].url);
  });

  test('the run result links only the regular files', () => {
    const names = run.structuredContent.files.map((f) => f.name).sort();
    assert.deepEqual(names, ['loop/a/inner.txt', 'real.txt']);
    const links = run.content.filter((x) => x.type === 'resource_link').map((x) => x.name).sort();
    assert.deepEqual(links, ['loop/a/inner.txt', 'real.txt']);
    assert.match(textOf(run), /links, FIFOs or sockets created in \/data are never served/);
  });

  test('list_files omits them and reports them as skipped', { timeout: 30000 }, async () => {
    const l = await call(c, 'list_files', { conversationId: conv });
    const sc = l.structuredContent;
    assert.deepEqual(sc.files.map((f) => f.name).sort(), ['loop/a/inner.txt', 'real.txt']);
    const skipped = Object.fromEntries(sc.skipped.map((s) => [s.name, s.type]));
    for (const [name, type] of Object.entries(specials)) assert.equal(skipped[name], type, `${name} in ${JSON.stringify(sc.skipped)}`);
    assert.equal(sc.unlistedNames, 3, 'CR/LF, invalid UTF-8 and look-alike names are counted, not listed');
    assert.match(textOf(l), /never listed or served/);
    assert.ok(!/[\r]/.test(textOf(l)));
  });

  test('none is served, by GET or HEAD, and nothing blocks', { timeout: 60000 * SLOW }, async () => {
    // What a followed link would give away: the host's passwd, the
    // daemon's own environment (its secrets).
    const passwd = readFileSync('/etc/passwd', 'utf8').split('\n')[0];
    const secrets = [d.env.FILE_SECRET, d.token, tokAlice];
    const paths = [
      ...Object.keys(specials),
      'etc-dir/passwd',
      'loop/a/up/real.txt',
      'loop/root/real.txt',
      'loop/a/up/a/up/a/up/real.txt',
      'loop1/x',
      'loop',
      'loop/a',
      'cr%0d%0alf.txt',
      '%c0%af.txt',
      'a%e2%88%95b.txt',
    ];
    for (const p of paths) {
      for (const method of ['GET', 'HEAD']) {
        const r = await rawHttp(port, { method, target: `/files/${ws}/${p}`, timeoutMs: 10000 });
        const label = `${method} ${p} -> ${r.status} in ${r.ms} ms`;
        assert.ok(r.status === 404 || r.status === 400, label);
        assert.ok(r.ms < 5000, label);
        const body = r.body.toString('latin1');
        assert.ok(!body.includes(passwd) && !body.includes('regular file'), label);
        for (const s of secrets) assert.ok(!body.includes(s), `${label}: a secret of the daemon`);
      }
    }
    // A FIFO with no writer, many times at once, next to normal requests.
    const t0 = Date.now();
    const results = await Promise.all([
      ...Array.from({ length: 8 }, () => rawHttp(port, { target: `/files/${ws}/fifo.txt`, timeoutMs: 10000 })),
      ...Array.from({ length: 4 }, () => rawHttp(port, { target: `/files/${ws}/sock.txt`, timeoutMs: 10000 })),
      rawHttp(port, { target: `/files/${ws}/real.txt`, timeoutMs: 10000 }),
      fetch(`${d.base}/healthz`, { signal: AbortSignal.timeout(10000) }).then((r) => ({ status: r.status })),
    ]);
    const took = Date.now() - t0;
    assert.ok(took < 5000, `12 FIFO/socket requests and 2 normal ones took ${took} ms`);
    assert.deepEqual(
      results.map((r) => r.status),
      [...Array(12).fill(404), 200, 200],
    );
  });

  test('resources/read and delete_file do not follow them', { timeout: 60000 }, async () => {
    for (const name of ['passwd.txt', 'environ.txt', 'fifo.txt', 'sock.txt', 'etc-dir/passwd', 'loop/root/real.txt']) {
      await assert.rejects(c.readResource({ uri: `sandbox://${conv}/${name}` }), /not found|no file/, name);
    }
    for (const [name, kind] of [['passwd.txt', 'symlink'], ['fifo.txt', 'fifo'], ['sock.txt', 'socket']]) {
      const r = await call(c, 'delete_file', { conversationId: conv, filename: name });
      assert.equal(r.isError, true, name);
      assert.match(textOf(r), new RegExp(`is a ${kind} made by code`), name);
    }
    const del = await call(c, 'delete_file', { conversationId: conv, filename: 'etc-dir/passwd' });
    assert.equal(del.isError, true);
    assert.ok(existsSync('/etc/passwd') && statSync('/etc/passwd').size > 0, 'the host file is intact');
    // A recursive delete of a tree with links to /data and to '..' removes
    // the links themselves and nothing they point to.
    const rm = await call(c, 'delete_file', { conversationId: conv, filename: 'loop', recursive: true });
    assert.equal(rm.isError ?? false, false, textOf(rm));
    const l = await call(c, 'list_files', { conversationId: conv });
    assert.deepEqual(l.structuredContent.files.map((f) => f.name), ['real.txt'], 'real.txt survives');
    assert.ok(!l.structuredContent.skipped.some((s) => s.name.startsWith('loop/')));
    const g = await rawHttp(port, { target: `/files/${ws}/real.txt` });
    assert.equal(g.body.toString(), 'regular file\n');
  });

  test('the daemon stays responsive: a new run in the same workspace works', { timeout: RUN_MS }, async () => {
    const r = await call(c, 'run_code', { conversationId: conv, language: 'bash', code: 'cat /data/real.txt; ls /data | wc -l' }, { timeout: RUN_MS });
    assert.equal(r.structuredContent.status, 'completed', textOf(r));
    assert.match(r.structuredContent.stdout, /^regular file$/m);
    assert.equal((await d.health()).status, 'ok');
  });
});

// ---------------------------------------------------------------------------

describe('quotas hold against runaway code', () => {
  let q;
  let qc;
  let qport;

  before(async () => {
    q = await startDaemon({
      name: 'files-quota',
      env: filesEnv('quota', { WORKSPACE_QUOTA_MB: '16', WORKSPACE_MAX_FILES: '500' }),
    });
    qport = Number(new URL(q.base).port);
    qc = await connectHttp(q);
  });
  after(async () => {
    await qc?.close();
    await q?.stopClean();
  });

  async function usage(conv) {
    const l = await call(qc, 'list_files', { conversationId: conv });
    return l.structuredContent.usage;
  }

  test('loop quotas are in effect', async (t) => {
    const h = await q.health();
    if (h.workspaces.quotaMode !== 'loop') {
      // Documented: without loop mounts quotas are only checked.
      t.skip(`quotaMode is ${h.workspaces.quotaMode}: loop mounts are not possible on this machine`);
      return;
    }
    assert.equal(h.workspaces.quotaMode, 'loop');
  });

  test('a run that creates files without end fails, the count holds, delete_file frees', { timeout: RUN_MS * 2 }, async (t) => {
    if ((await q.health()).workspaces.quotaMode !== 'loop') return t.skip('no loop quotas here');
    const conv = `many-${randomBytes(4).toString('hex')}`;
    const t0 = Date.now();
    const r = await call(
      qc,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        timeout_seconds: 120,
        code: [
          'import os',
          "os.makedirs('/data/many', exist_ok=True)",
          'i = 0',
          'while True:',
          "    with open(f'/data/many/f{i}.txt', 'w') as f:",
          "        f.write('x')",
          '    i += 1',
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    const sc = r.structuredContent;
    assert.equal(sc.status, 'failed', textOf(r));
    assert.equal(sc.exit_code, 1);
    assert.equal(sc.timed_out, false);
    assert.match(sc.stderr, /No space left on device/);
    assert.ok(Date.now() - t0 < 60000 * SLOW, 'it ended by itself, long before its time limit');
    const w = sc.workspace;
    assert.equal(w.enforced, true);
    assert.ok(w.files <= w.filesQuota, JSON.stringify(w));
    assert.ok(w.filesQuota <= 520, `about WORKSPACE_MAX_FILES: ${w.filesQuota}`);
    assert.ok(w.bytesUsed <= w.bytesQuota && w.bytesQuota <= 16 << 20, JSON.stringify(w));
    assert.equal(w.over, true);
    assert.ok(sc.files.length <= 100 && sc.files_truncated === true, 'the manifest is bounded');
    assert.match(textOf(r), /\/data is at its quota: delete files/);

    // The next upload and the next run get a clear answer.
    const up = await call(qc, 'upload_file', { conversationId: conv, filename: 'next.txt', text: 'hello' });
    assert.equal(up.isError, true);
    assert.match(textOf(up), /as many files as it may; delete files with delete_file/);
    const again = await call(qc, 'run_code', { conversationId: conv, language: 'bash', code: 'touch /data/one-more || exit 9' }, { timeout: RUN_MS });
    assert.equal(again.structuredContent.status, 'failed');
    assert.equal(again.structuredContent.exit_code, 9);
    assert.match(again.structuredContent.stderr, /No space left on device/);
    assert.match(textOf(again), /at its quota/);

    // delete_file frees the space; then uploads work again.
    const del = await call(qc, 'delete_file', { conversationId: conv, filename: 'many', recursive: true });
    assert.equal(del.isError ?? false, false, textOf(del));
    const u = await usage(conv);
    assert.ok(u.files < 50 && u.over === false, JSON.stringify(u));
    const up2 = await call(qc, 'upload_file', { conversationId: conv, filename: 'next.txt', text: 'hello' });
    assert.equal(up2.isError ?? false, false, textOf(up2));
  });

  test('a run that writes a huge file fails, the bytes hold, delete_file frees', { timeout: RUN_MS * 2 }, async (t) => {
    if ((await q.health()).workspaces.quotaMode !== 'loop') return t.skip('no loop quotas here');
    const conv = `huge-${randomBytes(4).toString('hex')}`;
    const t0 = Date.now();
    const r = await call(
      qc,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        timeout_seconds: 120,
        code: [
          "with open('/data/huge.bin', 'wb') as f:",
          '    while True:',
          "        f.write(b'\\0' * (1 << 20))",
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    const sc = r.structuredContent;
    assert.equal(sc.status, 'failed', textOf(r));
    assert.equal(sc.timed_out, false);
    assert.match(sc.stderr, /No space left on device/);
    assert.ok(Date.now() - t0 < 60000 * SLOW);
    const w = sc.workspace;
    assert.ok(w.bytesUsed <= w.bytesQuota, JSON.stringify(w));
    assert.ok(w.bytesQuota <= 16 << 20);
    const f = sc.files.find((x) => x.name === 'huge.bin');
    assert.ok(f && f.size <= 16 << 20 && f.size > 8 << 20, JSON.stringify(sc.files));
    // The host holds at most the image for this workspace.
    const images = path.join(q.root, 'images');
    if (existsSync(images)) {
      for (const img of readdirSync(images)) {
        const st = statSync(path.join(images, img));
        assert.ok(st.size <= 16 << 20, `${img}: ${st.size}`);
        assert.ok(st.blocks * 512 <= (16 << 20) + (1 << 20), `${img}: ${st.blocks * 512} bytes on disk`);
      }
    }

    const up = await call(qc, 'upload_file', { conversationId: conv, filename: 'more.bin', content: randomBytes(2 << 20).toString('base64') });
    assert.equal(up.isError, true);
    assert.match(textOf(up), /do not fit: the workspace of this conversation has \d+ bytes free; delete files/);

    const del = await call(qc, 'delete_file', { conversationId: conv, filename: 'huge.bin' });
    assert.equal(del.isError ?? false, false, textOf(del));
    assert.ok((await usage(conv)).bytesUsed < 1 << 20);
    const data = randomBytes(2 << 20);
    const up2 = await call(qc, 'upload_file', { conversationId: conv, filename: 'more.bin', content: data.toString('base64') });
    assert.equal(up2.isError ?? false, false, textOf(up2));
    assert.equal(up2.structuredContent.sha256, sha256(data));
    const g = await rawHttp(qport, { target: new URL(up2.structuredContent.url).pathname });
    assert.equal(sha256(g.body), sha256(data));
  });
});

// ---------------------------------------------------------------------------

describe('two tenants with the same conversationId', () => {
  test('see different workspaces, files and URLs', { timeout: RUN_MS }, async () => {
    const conv = 'shared-conversation';
    const alice = await connectHttp(d, { token: tokAlice });
    const bob = await connectHttp(d, { token: tokBob });
    try {
      const secret = `alice-only-${randomBytes(8).toString('hex')}`;
      const ua = await call(alice, 'upload_file', { conversationId: conv, filename: 'secret.txt', text: secret });
      assert.equal(ua.isError ?? false, false, textOf(ua));
      const ra = await call(alice, 'run_code', { conversationId: conv, language: 'bash', code: 'echo from-alice > /data/run.txt; cat /data/secret.txt' }, { timeout: RUN_MS });
      assert.equal(ra.structuredContent.stdout.trim(), secret);

      let lb = await call(bob, 'list_files', { conversationId: conv });
      assert.deepEqual(lb.structuredContent.files, [], 'bob sees none of alice\'s files');
      const rb = await call(bob, 'run_code', { conversationId: conv, language: 'bash', code: 'ls -A /data; cat /data/secret.txt' }, { timeout: RUN_MS });
      assert.equal(rb.structuredContent.status, 'failed');
      assert.match(rb.structuredContent.stderr, /No such file/);
      assert.ok(!rb.structuredContent.stdout.includes('secret.txt'));
      await assert.rejects(bob.readResource({ uri: `sandbox://${conv}/secret.txt` }), /not found|no file/);
      const db = await call(bob, 'delete_file', { conversationId: conv, filename: 'secret.txt' });
      assert.equal(db.isError, true);

      const ub = await call(bob, 'upload_file', { conversationId: conv, filename: 'secret.txt', text: 'bob' });
      assert.equal(ub.isError ?? false, false, 'bob has a secret.txt of his own');
      assert.notEqual(wsOf(ub.structuredContent.url), wsOf(ua.structuredContent.url));
      assert.notEqual(ub.structuredContent.url, ua.structuredContent.url);
      assert.equal((await get(ua.structuredContent.url)).body.toString(), secret);
      assert.equal((await get(ub.structuredContent.url)).body.toString(), 'bob');

      // The default tenant's same conversationId is a third workspace.
      const ud = await call(c, 'upload_file', { conversationId: conv, filename: 'secret.txt', text: 'default' });
      assert.equal(new Set([ua, ub, ud].map((x) => wsOf(x.structuredContent.url))).size, 3);

      lb = await call(bob, 'list_files', { conversationId: conv });
      assert.deepEqual(lb.structuredContent.files.map((f) => f.name), ['secret.txt']);
      const la = await call(alice, 'list_files', { conversationId: conv });
      assert.deepEqual(la.structuredContent.files.map((f) => f.name), ['run.txt', 'secret.txt']);
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});

// ---------------------------------------------------------------------------

describe('long output', () => {
  test('200 KB of stdout is cut inline and served whole by stdout_url', { timeout: RUN_MS }, async () => {
    const conv = `out-${randomBytes(4).toString('hex')}`;
    const lines = 3200; // 3200 lines of 64 bytes: 204,800 bytes
    let expected = '';
    for (let i = 0; i < lines; i++) expected += `${String(i).padStart(8, '0')} ${'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQR'.slice(0, 54)}\n`;
    assert.equal(expected.length, 204800);
    const r = await call(
      c,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        code: [
          'import sys',
          `for i in range(${lines}):`,
          "    sys.stdout.write(f'{i:08d} ' + 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQR' + '\\n')",
          "sys.stderr.write('done\\n')",
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    const sc = r.structuredContent;
    assert.equal(sc.status, 'completed', textOf(r));
    assert.equal(sc.stdout_truncated, true);
    assert.equal(sc.stdout_bytes, expected.length);
    assert.ok(sc.stdout.length < 64 * 1024, `inline stdout is ${sc.stdout.length} bytes`);
    assert.ok(sc.stdout.startsWith(expected.slice(0, 1000)), 'the head is kept');
    assert.ok(sc.stdout.endsWith(expected.slice(-1000)), 'the tail is kept');
    assert.equal(sc.stderr, 'done\n');
    assert.equal(sc.stderr_truncated, false);
    assert.equal(sc.stderr_url, undefined);
    assert.match(sc.stdout_url, new RegExp(`^${d.base}/files/[0-9a-f]{64}/\\.mcp/stdout-[0-9TZ]+-[0-9a-f]{6}\\.txt$`));
    assert.ok(textOf(r).includes(sc.stdout_url));
    assert.ok(!(sc.files ?? []).some((f) => f.url === sc.stdout_url), 'the saved output is not a file the run wrote');

    const g = await get(sc.stdout_url);
    assert.equal(g.status, 200);
    assert.equal(g.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(g.body.length, expected.length);
    assert.equal(sha256(g.body), sha256(Buffer.from(expected)), 'exactly the full output');
    const part = await rawHttp(port, { target: new URL(sc.stdout_url).pathname, headers: [['Range', 'bytes=102400-102463']] });
    assert.equal(part.status, 206);
    assert.equal(part.body.toString(), expected.slice(102400, 102464));
  });
});

// ---------------------------------------------------------------------------

describe('workspace resources', () => {
  const conv = `res-${randomBytes(4).toString('hex')}`;
  const text = 'line one\nline two: ünïcödé ✓\n';
  let png;

  before(async () => {
    const r = await call(
      c,
      'run_code',
      {
        conversationId: conv,
        language: 'python',
        code: [
          'import os',
          'import matplotlib.pyplot as plt',
          "os.makedirs('/data/img')",
          'plt.figure(figsize=(2, 2)); plt.plot([0, 1], [1, 0])',
          "plt.savefig('/data/img/tiny.png', dpi=50)",
        ].join('\n'),
      },
      { timeout: RUN_MS },
    );
    assert.equal(r.structuredContent.status, 'completed', textOf(r));
    png = Buffer.from(r.content.find((x) => x.type === 'image').data, 'base64');
    const u = await call(c, 'upload_file', { conversationId: conv, filename: 'notes.txt', text });
    assert.equal(u.isError ?? false, false);
  });

  test('resources/templates/list shows the workspace template', { timeout: 30000 }, async () => {
    const { resourceTemplates } = await c.listResourceTemplates();
    const t = resourceTemplates.find((x) => x.uriTemplate === 'sandbox://{conversationId}/{path}');
    assert.ok(t, JSON.stringify(resourceTemplates));
    assert.ok(t.name && t.description);
  });

  test('resources/read returns text for a text file and a blob for a PNG', { timeout: 30000 }, async () => {
    let r = await c.readResource({ uri: `sandbox://${conv}/notes.txt` });
    assert.equal(r.contents.length, 1);
    assert.equal(r.contents[0].uri, `sandbox://${conv}/notes.txt`);
    assert.equal(r.contents[0].mimeType, 'text/plain');
    assert.equal(r.contents[0].text, text);
    assert.equal(r.contents[0].blob, undefined);

    r = await c.readResource({ uri: `sandbox://${conv}/img/tiny.png` });
    assert.equal(r.contents[0].mimeType, 'image/png');
    assert.equal(r.contents[0].text, undefined);
    const blob = Buffer.from(r.contents[0].blob, 'base64');
    assert.ok(isPng(blob));
    assert.ok(blob.equals(png), 'the blob is the PNG the run wrote');

    // The file URL is accepted as a resource URI too.
    const l = await call(c, 'list_files', { conversationId: conv });
    const url = l.structuredContent.files.find((f) => f.name === 'img/tiny.png').url;
    r = await c.readResource({ uri: url });
    assert.ok(Buffer.from(r.contents[0].blob, 'base64').equals(png));
  });

  test('resources/read refuses traversal and missing files', { timeout: 30000 }, async () => {
    for (const uri of [
      `sandbox://${conv}/../${conv}/notes.txt`,
      `sandbox://${conv}/%2e%2e/notes.txt`,
      `sandbox://${conv}//notes.txt`,
      `sandbox://${conv}/img`,
      `sandbox://${conv}/nope.txt`,
      `sandbox://other-${conv}/notes.txt`,
      `sandbox://${conv}/notes.txt%00.png`,
    ]) {
      await assert.rejects(c.readResource({ uri }), /MCP error/, uri);
    }
  });
});

// ---------------------------------------------------------------------------

describe('found while testing', () => {
  // BUG: lib/run/runner.c runner_reap_wanted() reaps every container whose
  // sandbox.owner equals this daemon's instance name and whose sandbox.boot
  // differs from its own, and runner_start() reaps at start-up. The default
  // MCP_INSTANCE_NAME is the host name, so starting a second daemon on the
  // same host (a test daemon, a second instance with another SANDBOX_ROOT)
  // SIGKILLs the runs in progress of the first one: they end as "failed,
  // exit 137" with no output and the message "The program exited with
  // code 137", as if the code had crashed.
  test('starting a second daemon on the same host does not kill the first one\'s runs', { timeout: RUN_MS }, async () => {
    const env = filesEnv('reap');
    delete env.MCP_INSTANCE_NAME; // both on the default: the host name
    const a = await startDaemon({ name: 'files-reap-a', env });
    let b;
    try {
      const ac = await connectHttp(a);
      const running = call(ac, 'run_code', { conversationId: 'reap', language: 'bash', code: 'sleep 6; echo finished' }, { timeout: RUN_MS });
      // Wait until the container runs, then start another daemon.
      for (let i = 0; i < 100 && (await a.health()).runs.running === 0; i++) await sleep(100);
      await sleep(1000);
      b = await startDaemon({ name: 'files-reap-b', env });
      const r = await running;
      await ac.close();
      assert.equal(r.structuredContent.status, 'completed', `the first daemon's run: ${textOf(r)}`);
      assert.equal(r.structuredContent.stdout, 'finished\n');
    } finally {
      await b?.stop();
      await a.stop();
    }
  });
});
