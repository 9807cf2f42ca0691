// SPDX-License-Identifier: MIT
// An npm registry served by the test itself, on the Docker bridge's gateway
// (where installer boxes reach the host), with real package tarballs built
// here (gzip of a ustar archive with package/package.json), and a decoy
// server beside it that stands for any host a conversation's code would
// like the installer to fetch from (an exfiltration URL, the host, a
// metadata address). Both log every request, so a test can assert that the
// installer asked the registry for the packages named in the call and
// nothing else, and the decoy for nothing at all.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { bridgeGateway } from './pyindex.mjs';

/** One ustar header block for a regular file. */
function tarHeader(name, size) {
  const h = Buffer.alloc(512);
  const put = (off, len, s) => h.write(s, off, len, 'ascii');
  put(0, 100, name);
  put(100, 8, '0000644\0');
  put(108, 8, '0000000\0');
  put(116, 8, '0000000\0');
  put(124, 12, size.toString(8).padStart(11, '0') + '\0');
  put(136, 12, '00000000000\0');
  put(148, 8, '        ');
  put(156, 1, '0');
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  let sum = 0;
  for (const b of h) sum += b;
  put(148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  return h;
}

/** A .tgz of files ({ 'package/index.js': '...' }). */
export function tgz(files) {
  const parts = [];
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.from(content);
    parts.push(tarHeader(name, data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}

/** A CommonJS package name@version whose module exports { value }. */
export function npmPackage(name, version, value) {
  return {
    name,
    version,
    data: tgz({
      'package/package.json': JSON.stringify({ name, version, main: 'index.js' }),
      'package/index.js': `module.exports = { value: ${JSON.stringify(value)} };\n`,
    }),
  };
}

/** An HTTP server on host:0 that logs "METHOD url" of each request. */
async function listen(host, handler) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return {
    server,
    requests,
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}

/**
 * Serves packages ([npmPackage(...)]) as a registry, and a decoy that
 * answers every request with a tarball. Returns { url, host, requests,
 * decoy: { url, requests }, close }.
 */
export async function serveRegistry(packages, { host = bridgeGateway() } = {}) {
  const byName = new Map();
  for (const p of packages) {
    if (!byName.has(p.name)) byName.set(p.name, []);
    byName.get(p.name).push(p);
  }
  let base = '';
  const reg = await listen(host, (req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    const tb = url.match(/^\/-\/tarballs\/(.+)-(\d+\.\d+\.\d+)\.tgz$/);
    if (tb) {
      const p = (byName.get(tb[1]) ?? []).find((x) => x.version === tb[2]);
      if (p) {
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': p.data.length }).end(p.data);
        return;
      }
    }
    const list = byName.get(url.replace(/^\//, '').replace(/\/$/, ''));
    if (!tb && list) {
      const versions = {};
      for (const p of list)
        versions[p.version] = {
          name: p.name,
          version: p.version,
          dist: {
            tarball: `${base}-/tarballs/${p.name}-${p.version}.tgz`,
            shasum: createHash('sha1').update(p.data).digest('hex'),
            integrity: `sha512-${createHash('sha512').update(p.data).digest('base64')}`,
          },
        };
      const latest = list[list.length - 1].version;
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ name: list[0].name, 'dist-tags': { latest }, versions }));
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"Not found"}');
  });
  base = `http://${host}:${reg.port}/`;
  const bait = npmPackage('bait', '1.0.0', 'from the decoy').data;
  const decoy = await listen(host, (req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': bait.length }).end(bait);
  });
  return {
    url: base,
    host,
    requests: reg.requests,
    decoy: { url: `http://${host}:${decoy.port}`, requests: decoy.requests },
    close: async () => {
      await reg.close();
      await decoy.close();
    },
  };
}
