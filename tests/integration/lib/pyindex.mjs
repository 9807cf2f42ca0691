// SPDX-License-Identifier: MIT
// A Python package index served by the test itself (PyPI is not reachable
// here): a PEP 503 "simple" index over HTTP on the Docker bridge's gateway,
// so that installer boxes on the default bridge network reach it, with
// real wheels built here (a wheel is a zip: STORED entries, CRC-32, RECORD
// with sha256 hashes), an sdist-only project (pip must refuse it: wheels
// only, no setup.py ever runs), a project whose file never arrives (the
// installer's time limit), and a log of every request (to prove that a
// second run reused the cache and asked the index nothing).
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip of files ({ name: Buffer|string }), every entry STORED. */
export function zip(files) {
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content);
    const fname = Buffer.from(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0, 6); // flags
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt32LE(0, 10); // time, date
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(fname.length, 26);
    local.writeUInt16LE(0, 28);
    locals.push(local, fname, data);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0, 8);
    central.writeUInt16LE(0, 10);
    central.writeUInt32LE(0, 12);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(fname.length, 28);
    central.writeUInt32LE(0, 30); // extra, comment lengths
    central.writeUInt32LE(0, 34); // disk, internal attributes
    central.writeUInt32LE((0o100644 << 16) >>> 0, 38); // external: a file
    central.writeUInt32LE(offset, 42);
    centrals.push(central, fname);
    offset += 30 + fname.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Object.keys(files).length, 8);
  end.writeUInt16LE(Object.keys(files).length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

const b64hash = (data) => createHash('sha256').update(data).digest('base64url');

/**
 * A pure-Python wheel of project name (e.g. 'mcpsd-demo') at version with
 * module files ({ 'mcpsd_demo/__init__.py': '...' }) and dependencies.
 */
export function wheel(name, version, modules, requires = []) {
  const dist = name.replace(/[-_.]+/g, '_');
  const info = `${dist}-${version}.dist-info`;
  const files = { ...modules };
  files[`${info}/METADATA`] =
    `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n` + requires.map((r) => `Requires-Dist: ${r}\n`).join('');
  files[`${info}/WHEEL`] = 'Wheel-Version: 1.0\nGenerator: mcp-sandboxd-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n';
  const record = Object.entries(files).map(([p, c]) => {
    const data = Buffer.isBuffer(c) ? c : Buffer.from(c);
    return `${p},sha256=${b64hash(data)},${data.length}`;
  });
  record.push(`${info}/RECORD,,`);
  files[`${info}/RECORD`] = record.join('\n') + '\n';
  return { file: `${dist}-${version}-py3-none-any.whl`, data: zip(files) };
}

/**
 * The gateway address of Docker's default bridge (where boxes reach the
 * host): IPAM's Gateway when the engine lists it, else the IPv4 address of
 * the bridge's interface (a new engine 20.10 lists only the Subnet).
 */
export function bridgeGateway() {
  const net = JSON.parse(execFileSync('docker', ['network', 'inspect', 'bridge'], { encoding: 'utf8' }))[0];
  const isV4 = (a) => /^\d+\.\d+\.\d+\.\d+$/.test(a ?? '');
  const listed = (net?.IPAM?.Config ?? []).map((c) => c.Gateway).find(isV4);
  if (listed) return listed;
  // The interface's address (os.networkInterfaces() leaves out a bridge
  // without a container on it: it is down).
  const ifname = net?.Options?.['com.docker.network.bridge.name'] ?? 'docker0';
  const ip = spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', ifname], { encoding: 'utf8' });
  const m = (ip.stdout ?? '').match(/inet (\d+\.\d+\.\d+\.\d+)\//);
  if (m) return m[1];
  throw new Error(`no IPv4 gateway on the bridge network: IPAM ${JSON.stringify(net?.IPAM?.Config)}, no IPv4 address on ${ifname} (${ip.stderr ?? ''})`);
}

/**
 * Serves projects ({ 'mcpsd-demo': [ { file, data } ] }) as a simple
 * index on host:0. Project names in hang never get their file (the
 * connection stays open until close). Returns { url, requests, close }.
 */
export async function serveIndex(projects, { host = bridgeGateway(), hang = [] } = {}) {
  const norm = (n) => n.toLowerCase().replace(/[-_.]+/g, '-');
  const byName = new Map(Object.entries(projects).map(([k, v]) => [norm(k), v]));
  const files = new Map();
  for (const list of byName.values()) for (const f of list) files.set(f.file, f);
  const requests = [];
  const stuck = new Set();
  const server = createServer((req, res) => {
    requests.push(req.url);
    const m = req.url.match(/^\/simple\/([^/]+)\/?$/);
    if (m) {
      const list = byName.get(norm(decodeURIComponent(m[1])));
      if (!list) {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
        return;
      }
      const links = list
        .map((f) => `<a href="/files/${f.file}#sha256=${createHash('sha256').update(f.data).digest('hex')}">${f.file}</a><br>`)
        .join('\n');
      res.writeHead(200, { 'Content-Type': 'text/html' }).end(`<!DOCTYPE html><html><body>\n${links}\n</body></html>\n`);
      return;
    }
    const f = req.url.startsWith('/files/') && files.get(decodeURIComponent(req.url.slice(7)));
    if (f) {
      if (hang.some((h) => f.file.startsWith(h.replace(/-/g, '_')))) {
        stuck.add(res);
        return; // never answers: the installer's time limit ends it
      }
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': f.data.length }).end(f.data);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address();
  return {
    url: `http://${host}:${port}/simple`,
    host,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        for (const r of stuck) r.destroy();
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}
