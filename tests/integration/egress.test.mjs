// SPDX-License-Identifier: MIT
// Egress by policy, against the real engine, the real egress proxy (Squid
// from the mcp-sandboxd/egress image) and the official SDK client. Test
// HTTP and TLS servers listen on the bridge's gateway (where the proxy
// reaches the host) and get test names through SANDBOX_EGRESS_HOSTS; the
// operator allows that one private address (SANDBOX_EGRESS_PRIVATE) and
// nothing else. Checked: an allowed name over HTTP and HTTPS (the server's
// own certificate reaches the box: TLS is not broken open); a name not on
// the list, an IP literal, the bridge gateway, the metadata address (by
// literal and by an allowed name that resolves to it) and a DNS lookup
// are refused and reported in the result; per-tenant lists and per-call
// lists narrow; /metrics counts; a run without network still has none.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectHttp } from './lib/daemon.mjs';
import { bridgeGateway, wheel } from './lib/pyindex.mjs';
import { describeRun } from './lib/sandbox.mjs';
import { SLOW, expectStatus, py, startWarm, stopWarm, waitPool } from './lib/warm.mjs';

const T = 180_000 * SLOW;
const BOB = 'b'.repeat(40);
const OPERATOR = 'o'.repeat(40);

/** A self-signed certificate for tls.test, made with openssl. */
function selfSigned() {
  const dir = mkdtempSync(join(tmpdir(), 'mcpsd-egress-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=tls.test',
      '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem')], { stdio: 'pipe' });
    return { key: readFileSync(join(dir, 'k.pem')), cert: readFileSync(join(dir, 'c.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function listen(server, host) {
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return server.address().port;
}

/** Python that fetches each URL through the proxy and prints one line each. */
const FETCH = String.raw`import json, ssl, sys, urllib.request
ctx = ssl._create_unverified_context()
for u in URLS:
    try:
        r = urllib.request.urlopen(u, timeout=10, context=ctx)
        print(u, r.status, r.read().decode()[:40])
    except Exception as e:
        print(u, 'ERR', str(e)[:120])
`;
const fetchCode = (urls) => `URLS = ${JSON.stringify(urls)}\n${FETCH}`;

/** The line of out for url. */
const lineOf = (out, url) => out.split('\n').find((l) => l.startsWith(url + ' ')) ?? '';

/** The destinations of a result's egress report, as "host:port verdict". */
const dests = (r) => (r.sc.egress?.destinations ?? []).map((d) => `${d.host}:${d.port} ${d.allowed ? 'allowed' : d.reason}`).sort();

async function metric(d, name) {
  const text = await (await fetch(`${d.base}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]);
}

describe('egress through the proxy, by policy', () => {
  let d, bob, web, tls, webPort, tlsPort, gw, cert;
  const hits = [];
  before(async () => {
    gw = bridgeGateway();
    web = createServer((req, res) => {
      hits.push(`web ${req.headers.host} ${req.url}`);
      res.end(`hello from web ${req.url}`);
    });
    cert = selfSigned();
    tls = createHttpsServer(cert, (req, res) => {
      hits.push(`tls ${req.headers.host} ${req.url}`);
      res.end('hello over tls');
    });
    webPort = await listen(web, gw);
    tlsPort = await listen(tls, gw);
    d = await startWarm({
      name: 'egress',
      // Pool boxes too: a one-off run with network takes one and joins
      // its own egress network like a session's box.
      pool: true,
      env: {
        SANDBOX_ALLOW_NETWORK: 'true',
        MCP_API_TOKENS: `bob:${BOB}`,
        OPERATOR_TOKEN: OPERATOR,
        SANDBOX_EGRESS_HOSTS: `web.test=${gw} tls.test=${gw} other.test=${gw} a.wild.test=${gw} meta.test=169.254.169.254`,
        SANDBOX_EGRESS_PRIVATE: `${gw}/32`,
        SANDBOX_EGRESS_ALLOW: `web.test:${webPort} tls.test:${tlsPort} *.wild.test:${webPort} meta.test:80`,
        SANDBOX_EGRESS_TENANTS: `bob=tls.test:${tlsPort}`,
        // Apart from any other daemon's egress networks on this engine.
        SANDBOX_EGRESS_SUBNET: `10.${200 + (process.pid % 50)}.0.0/16`,
      },
    });
    bob = await connectHttp(d, { token: BOB });
  });
  after(async () => {
    await bob?.close().catch(() => {});
    await stopWarm(d);
    web?.close();
    tls?.close();
  });

  test('an allowed name works over HTTP and HTTPS, with the server\'s own certificate', { timeout: T }, async () => {
    // The certificate the box sees through a CONNECT tunnel is the test
    // server's own: the proxy passes TLS through, it does not open it.
    const peek = String.raw`
import hashlib, os, socket
proxy = os.environ['HTTPS_PROXY'].split('//')[1].split(':')[0]
sock = socket.create_connection((proxy, 3128), timeout=10)
sock.sendall(b'CONNECT tls.test:PORT HTTP/1.1\r\nHost: tls.test:PORT\r\n\r\n')
hdr = b''
while not hdr.endswith(b'\r\n\r\n'):
    hdr += sock.recv(1)
t = ssl._create_unverified_context().wrap_socket(sock, server_hostname='tls.test')
print('CERT', hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest())
t.close()
`.replaceAll('PORT', String(tlsPort));
    const r = await py(d.client, 'eg-ok', fetchCode([`http://web.test:${webPort}/a`, `https://tls.test:${tlsPort}/b`]) + peek, {
      network: true,
    });
    expectStatus(r, 'completed');
    assert.match(lineOf(r.sc.stdout, `http://web.test:${webPort}/a`), / 200 hello from web \/a/, describeRun(r));
    assert.match(lineOf(r.sc.stdout, `https://tls.test:${tlsPort}/b`), / 200 hello over tls/, describeRun(r));
    const der = Buffer.from(cert.cert.toString().replace(/-----[^-]+-----|\s/g, ''), 'base64');
    const fp = createHash('sha256').update(der).digest('hex');
    assert.match(r.sc.stdout, new RegExp(`CERT ${fp}`), 'the box saw the test server\'s own certificate');
    assert.equal(r.sc.egress.blocked, 0, JSON.stringify(r.sc.egress));
    assert.ok(r.sc.egress.allowed >= 3, JSON.stringify(r.sc.egress));
    assert.deepEqual(dests(r), [`tls.test:${tlsPort} allowed`, `web.test:${webPort} allowed`]);
    assert.ok(r.sc.egress.bytes_in > 0 && r.sc.egress.bytes_out > 0, JSON.stringify(r.sc.egress));
    assert.match(r.text, /\nnetwork: \d+ requests allowed, 0 blocked/);
  });

  test('other names, IP literals, the gateway, metadata and DNS are refused and reported', { timeout: T }, async () => {
    const before = hits.length;
    const urls = [
      `http://other.test:${webPort}/x`,
      `http://web.test:${tlsPort}/wrong-port`,
      `http://${gw}:${webPort}/literal`,
      'http://169.254.169.254/latest/meta-data/',
      'http://meta.test/latest/meta-data/',
      `https://other.test:${tlsPort}/`,
    ];
    const r = await py(d.client, 'eg-no', fetchCode(urls) + String.raw`
import socket, urllib.request
try:
    print('DNS', socket.gethostbyname('web.test'))
except Exception as e:
    print('DNS ERR', e)
# Straight to the gateway and the metadata address, around the proxy.
op = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for u in ['http://${gw}:${webPort}/direct', 'http://169.254.169.254/direct']:
    try:
        print('DIRECT', u, op.open(u, timeout=3).status)
    except Exception as e:
        print('DIRECT', u, 'ERR', str(e)[:80])
`, { network: true });
    expectStatus(r, 'completed');
    for (const u of urls) assert.match(lineOf(r.sc.stdout, u), /ERR .*(403|Forbidden|Tunnel)/i, `${u}: ${describeRun(r)}`);
    assert.match(r.sc.stdout, /^DNS ERR/m, 'a name does not resolve in the box');
    assert.match(r.sc.stdout, new RegExp(`^DIRECT http://${gw.replace(/\./g, '\\.')}:${webPort}/direct ERR`, 'm'));
    assert.match(r.sc.stdout, /^DIRECT http:\/\/169\.254\.169\.254\/direct ERR/m);
    assert.equal(hits.length, before, `no request reached the test servers: ${hits.slice(before)}`);
    assert.deepEqual(dests(r), [
      `${gw}:${webPort} not in the allow-list`,
      '169.254.169.254:80 not in the allow-list',
      'meta.test:80 resolves to a private, local or metadata address the operator did not allow',
      `other.test:${tlsPort} not in the allow-list`,
      `other.test:${webPort} not in the allow-list`,
      `web.test:${tlsPort} not in the allow-list`,
    ].sort());
    assert.equal(r.sc.egress.allowed, 0);
    assert.equal(r.sc.egress.blocked, 6);
    assert.match(r.text, /network: 0 requests allowed, 6 blocked: .*other\.test:\d+ \(not in the allow-list\)/);
    assert.match(r.text, /Ask the person whether to allow them/);
    // The audit trail records the run's destinations as the proxy logged them.
    const a = await fetch(`${d.base}/admin/audit?conversation=eg-no`, { headers: { Authorization: `Bearer ${OPERATOR}` } });
    assert.equal(a.status, 200, await a.clone().text());
    const entries = (await a.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l).entry);
    const net = entries.at(-1)?.network;
    assert.deepEqual(net?.allowed, [], JSON.stringify(entries.at(-1)));
    assert.deepEqual([...net.blocked].sort(), [
      `${gw}:${webPort}`, '169.254.169.254:80', 'meta.test:80', `other.test:${tlsPort}`, `other.test:${webPort}`, `web.test:${tlsPort}`,
    ].sort());
    assert.ok(net.egress_bytes > 0, 'the refusals\' bytes are counted');
  });

  test('a call narrows the list; asking beyond it is refused before running', { timeout: T }, async () => {
    const urls = [`http://a.wild.test:${webPort}/w`, `http://web.test:${webPort}/n`];
    const r = await py(d.client, 'eg-narrow', fetchCode(urls), { network: [`*.wild.test:${webPort}`] });
    expectStatus(r, 'completed');
    assert.match(lineOf(r.sc.stdout, urls[0]), / 200 hello from web \/w/, describeRun(r));
    assert.match(lineOf(r.sc.stdout, urls[1]), /ERR/, 'web.test is allowed to the tenant, not to this call');
    assert.deepEqual(dests(r), [`a.wild.test:${webPort} allowed`, `web.test:${webPort} not in the allow-list`]);

    const wide = await py(d.client, 'eg-narrow', 'print(1)', { network: ['*.test'] });
    assert.equal(wide.sc, undefined, 'refused before running');
    assert.match(wide.text, /'\*\.test' is too wide|not in this tenant's egress allow-list/);
    const other = await py(d.client, 'eg-narrow', 'print(1)', { network: ['pypi.org'] });
    assert.equal(other.sc, undefined);
    assert.match(other.text, /network: 'pypi\.org' is not in this tenant's egress allow-list; ask only for names it allows \(web\.test:\d+, tls\.test:\d+/);
    const bad = await py(d.client, 'eg-narrow', 'print(1)', { network: ['http://x/'] });
    assert.equal(bad.sc, undefined);
    assert.match(bad.text, /network: .*not a domain pattern|bad port/);
  });

  test('runs with network at once each get their own network and list', { timeout: T }, async () => {
    const a = `http://a.wild.test:${webPort}/par`, w = `http://web.test:${webPort}/par`;
    const [ra, rw] = await Promise.all([
      py(d.client, 'eg-par-a', fetchCode([a, w]), { network: [`*.wild.test:${webPort}`], memory_mb: 300 }),
      py(d.client, 'eg-par-w', fetchCode([a, w]), { network: [`web.test:${webPort}`] }),
    ]);
    expectStatus(ra, 'completed');
    expectStatus(rw, 'completed');
    assert.match(lineOf(ra.sc.stdout, a), / 200 /, describeRun(ra));
    assert.match(lineOf(ra.sc.stdout, w), /ERR/, describeRun(ra));
    assert.match(lineOf(rw.sc.stdout, w), / 200 /, describeRun(rw));
    assert.match(lineOf(rw.sc.stdout, a), /ERR/, describeRun(rw));
    assert.deepEqual(dests(ra), [`a.wild.test:${webPort} allowed`, `web.test:${webPort} not in the allow-list`]);
    assert.deepEqual(dests(rw), [`a.wild.test:${webPort} not in the allow-list`, `web.test:${webPort} allowed`]);
  });

  test('a one-off run with network takes a pool box, which joins the run\'s own network for it', { timeout: T }, async () => {
    await waitPool(d);
    const url = `http://web.test:${webPort}/once`;
    const r = await py(d.client, 'eg-once', fetchCode([url, `http://a.wild.test:${webPort}/once`]), {
      network: [`web.test:${webPort}`],
      memory_mb: 300,
    });
    expectStatus(r, 'completed');
    assert.equal(r.sc.session.state, 'none', 'a one-off run (its own memory limit)');
    assert.equal(r.sc.session.from_pool, true, `a pool box: ${JSON.stringify(r.sc.session)}`);
    assert.equal(r.sc.memory_mb, 300);
    assert.match(lineOf(r.sc.stdout, url), / 200 hello from web \/once/, describeRun(r));
    assert.deepEqual(dests(r), [`a.wild.test:${webPort} not in the allow-list`, `web.test:${webPort} allowed`]);
    // The conversation's next run has no network.
    const after = await py(d.client, 'eg-once', fetchCode([url]));
    expectStatus(after, 'completed');
    assert.match(lineOf(after.sc.stdout, url), /ERR/, describeRun(after));
  });

  test('a tenant with a list of its own gets that list only', { timeout: T }, async () => {
    const urls = [`https://tls.test:${tlsPort}/bob`, `http://web.test:${webPort}/bob`];
    const r = await py(bob, 'eg-bob', fetchCode(urls), { network: true });
    expectStatus(r, 'completed');
    assert.match(lineOf(r.sc.stdout, urls[0]), / 200 hello over tls/, describeRun(r));
    assert.match(lineOf(r.sc.stdout, urls[1]), /ERR/);
    assert.deepEqual(dests(r), [`tls.test:${tlsPort} allowed`, `web.test:${webPort} not in the allow-list`]);
    const refused = await py(bob, 'eg-bob', 'print(1)', { network: [`web.test:${webPort}`] });
    assert.equal(refused.sc, undefined);
    assert.match(refused.text, /not in this tenant's egress allow-list; ask only for names it allows \(tls\.test:\d+\)/);
  });

  test('a warm session keeps its state across a networked run; the next run has no network again', { timeout: T }, async () => {
    const first = await py(d.client, 'eg-warm', 'x = 41\nprint("set")');
    expectStatus(first, 'completed');
    const IFACES = "print('IFACES', sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n";
    const url = `http://web.test:${webPort}/warm`;
    const net = await py(d.client, 'eg-warm', `x += 1\n${fetchCode([url])}${IFACES}`, { network: true });
    expectStatus(net, 'completed');
    assert.equal(net.sc.session.state, 'continued', JSON.stringify(net.sc.session));
    assert.match(lineOf(net.sc.stdout, url), / 200 hello from web \/warm/, describeRun(net));
    assert.match(net.sc.stdout, /IFACES \['eth0', 'lo'\]/);
    assert.deepEqual(dests(net), [`web.test:${webPort} allowed`]);

    const after = await py(d.client, 'eg-warm', `print('x', x)\n${fetchCode([url])}${IFACES}` +
      "import os\nprint('PROXY', os.environ.get('HTTP_PROXY'))\n");
    expectStatus(after, 'completed');
    assert.equal(after.sc.session.state, 'continued', JSON.stringify(after.sc.session));
    assert.match(after.sc.stdout, /^x 42$/m, 'the state survived the networked run');
    assert.match(after.sc.stdout, /IFACES \['lo'\]/, 'no network interface but loopback');
    assert.match(lineOf(after.sc.stdout, url), /ERR/);
    assert.match(after.sc.stdout, /PROXY None/);
    assert.equal(after.sc.egress, undefined);
  });

  test('a run without network has none, and /metrics counts the proxy\'s requests', { timeout: T }, async () => {
    const r = await py(d.client, 'eg-none', fetchCode([`http://web.test:${webPort}/none`]) +
      "import os\nprint('PROXY', os.environ.get('HTTP_PROXY'))\n");
    expectStatus(r, 'completed');
    assert.match(lineOf(r.sc.stdout, `http://web.test:${webPort}/none`), /ERR/);
    assert.match(r.sc.stdout, /PROXY None/);
    assert.equal(r.sc.egress, undefined);
    const req = Object.fromEntries(await metric(d, 'mcpsd_egress_requests_total'));
    assert.ok(req['mcpsd_egress_requests_total{verdict="allowed"}'] >= 7, JSON.stringify(req));
    assert.ok(req['mcpsd_egress_requests_total{verdict="blocked"}'] >= 10, JSON.stringify(req));
    const bytes = Object.fromEntries(await metric(d, 'mcpsd_egress_bytes_total'));
    assert.ok(bytes['mcpsd_egress_bytes_total{direction="in"}'] > 0, JSON.stringify(bytes));
  });
});

describe('package installers through the egress proxy (SANDBOX_PACKAGES_NETWORK=egress)', () => {
  let d, index, elsewhere, indexPort, elsewherePort, gw;
  const indexHits = [], elsewhereHits = [];
  const ok = wheel('mcpsd-eg', '1.0', { 'mcpsd_eg/__init__.py': 'V = "from-the-index"\n' });
  const far = wheel('mcpsd-far', '1.0', { 'mcpsd_far/__init__.py': 'V = 1\n' });
  const sha = (w) => createHash('sha256').update(w.data).digest('hex');
  before(async () => {
    gw = bridgeGateway();
    // The file of mcpsd-far is on another port of the same host: another
    // destination, which the installer must not reach.
    elsewhere = createServer((req, res) => {
      elsewhereHits.push(req.url);
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' }).end(far.data);
    });
    elsewherePort = await listen(elsewhere, gw);
    index = createServer((req, res) => {
      indexHits.push(req.url);
      res.setHeader('Content-Type', req.url.startsWith('/simple/') ? 'text/html' : 'application/octet-stream');
      if (req.url === '/simple/mcpsd-eg/')
        return res.end(`<a href="/files/${ok.file}#sha256=${sha(ok)}">${ok.file}</a>`);
      if (req.url === '/simple/mcpsd-far/')
        return res.end(`<a href="http://${gw}:${elsewherePort}/files/${far.file}#sha256=${sha(far)}">${far.file}</a>`);
      if (req.url === `/files/${ok.file}`) return res.end(ok.data);
      res.writeHead(404).end('not found');
    });
    indexPort = await listen(index, gw);
    d = await startWarm({
      name: 'egress-pkg',
      env: {
        SANDBOX_PACKAGES_NETWORK: 'egress',
        SANDBOX_PACKAGES_PIP_INDEX: `http://${gw}:${indexPort}/simple`,
        SANDBOX_EGRESS_PRIVATE: `${gw}/32`,
        SANDBOX_EGRESS_SUBNET: `10.${150 + (process.pid % 50)}.0.0/16`,
      },
    });
  });
  after(async () => {
    await stopWarm(d);
    index?.close();
    elsewhere?.close();
  });

  test('pip reaches its index and nothing else; the code itself has no network', { timeout: T }, async () => {
    const r = await py(d.client, 'eg-pip', 'import mcpsd_eg\nprint(mcpsd_eg.V)', { packages: ['mcpsd-eg'] });
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'from-the-index\n', describeRun(r));
    assert.ok(indexHits.includes(`/files/${ok.file}`), `the wheel came from the index: ${indexHits}`);

    const f = await py(d.client, 'eg-pip', 'import mcpsd_far', { packages: ['mcpsd-far'] });
    expectStatus(f, 'failed');
    assert.equal(f.sc.packages.failed, true, JSON.stringify(f.sc.packages));
    assert.deepEqual(elsewhereHits, [], 'the installer did not reach another destination');
    const blocked = (await metric(d, 'mcpsd_egress_requests_total{verdict="blocked"}'))[0]?.[1] ?? 0;
    assert.ok(blocked >= 1, `the proxy refused it (${blocked})`);

    const net = await py(d.client, 'eg-pip', 'print(1)', { network: true });
    assert.equal(net.sc, undefined, 'runs have no network on this server');
    assert.match(net.text, /network access is disabled by the operator/);
  });
});
