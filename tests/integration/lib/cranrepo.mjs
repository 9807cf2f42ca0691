// SPDX-License-Identifier: MIT
// A CRAN-like repository served by the test itself (CRAN is not reachable
// here): real R source packages, built from sources written here with
// `R CMD build` in a container of the installed R runner image (no
// network, the sandbox's uid), indexed with tools::write_PACKAGES as CRAN
// does (src/contrib/PACKAGES, .gz and .rds), older versions under
// src/contrib/Archive/<name>/, served over HTTP on the Docker bridge's
// gateway so that installer boxes on the default bridge reach it, with a
// log of every request (to prove a second run asked the repository nothing).
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bridgeGateway } from './pyindex.mjs';

/** The installed R runner image (labelled sandbox.language=r). */
export function rImage() {
  const ids = execFileSync('docker', ['images', '-q', '--filter', 'label=sandbox.language=r'], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  if (!ids.length) throw new Error('the R runner image is not installed (runners/build.sh --only r builds it)');
  return ids[0];
}

/**
 * An R source package: { name, version, files: { 'R/x.R': text, ... },
 * imports: ['pkg'], archive: true (goes to Archive/<name>/) }.
 * DESCRIPTION and NAMESPACE (exportPattern) are written for it.
 */
function writeSource(dir, p) {
  const root = join(dir, p.name);
  mkdirSync(join(root, 'R'), { recursive: true });
  const desc = [
    `Package: ${p.name}`,
    `Version: ${p.version}`,
    'Title: A Test Package of mcp-sandboxd',
    'Description: Built by tests/integration/lib/cranrepo.mjs.',
    'License: MIT + file LICENSE',
    'Author: mcp-sandboxd tests',
    'Maintainer: mcp-sandboxd tests <tests@example.invalid>',
    ...(p.imports?.length ? [`Imports: ${p.imports.join(', ')}`] : []),
  ];
  writeFileSync(join(root, 'DESCRIPTION'), desc.join('\n') + '\n');
  writeFileSync(join(root, 'LICENSE'), 'YEAR: 2026\nCOPYRIGHT HOLDER: mcp-sandboxd tests\n');
  writeFileSync(join(root, 'NAMESPACE'), p.namespace ?? 'exportPattern("^[a-z]")\n');
  for (const [f, text] of Object.entries(p.files)) {
    mkdirSync(join(root, f, '..'), { recursive: true });
    writeFileSync(join(root, f), text);
  }
}

function chmodAll(dir) {
  chmodSync(dir, 0o777);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) chmodAll(p);
    else chmodSync(p, 0o666);
  }
}

/**
 * Builds packages (see writeSource) into a repository directory:
 * <root>/src/contrib/*.tar.gz with PACKAGES*, archived ones in
 * src/contrib/Archive/<name>/. Returns the root (caller removes it).
 */
export function buildRepository(packages) {
  const root = mkdtempSync(join(tmpdir(), 'mcpsd-cran-'));
  const cur = packages.filter((p) => !p.archive);
  const old = packages.filter((p) => p.archive);
  mkdirSync(join(root, 'src-cur'));
  mkdirSync(join(root, 'src-old'));
  mkdirSync(join(root, 'src', 'contrib', 'Archive'), { recursive: true });
  for (const p of cur) writeSource(join(root, 'src-cur'), p);
  for (const p of old) writeSource(join(root, 'src-old'), p);
  chmodAll(root);
  const script = [
    'set -e',
    'cd /w/src/contrib',
    ...cur.map((p) => `R CMD build --no-build-vignettes --no-manual /w/src-cur/${p.name} >/dev/null`),
    ...old.map(
      (p) =>
        `mkdir -p Archive/${p.name} && (cd Archive/${p.name} && R CMD build --no-build-vignettes --no-manual /w/src-old/${p.name} >/dev/null)`,
    ),
    'Rscript --vanilla -e \'tools::write_PACKAGES(".", type = "source")\'',
  ].join('\n');
  execFileSync(
    'docker',
    ['run', '--rm', '--network', 'none', '--user', '64321:64321', '-e', 'HOME=/tmp', '-v', `${root}:/w`, rImage(), 'sh', '-c', script],
    { stdio: ['ignore', 'pipe', 'pipe'], timeout: 180_000 },
  );
  rmSync(join(root, 'src-cur'), { recursive: true, force: true });
  rmSync(join(root, 'src-old'), { recursive: true, force: true });
  return root;
}

/**
 * Serves the repository at root (a path, or a function giving it: the
 * server can start before the repository is built, for packages that
 * need its URL) on host:0. Returns { url, host, port, requests, close };
 * requests lists every path asked for.
 */
export async function serveRepository(rootOrFn, { host = bridgeGateway() } = {}) {
  const rootOf = typeof rootOrFn === 'function' ? rootOrFn : () => rootOrFn;
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const path = decodeURIComponent(req.url.split('?')[0]);
    if (!/^\/src\/contrib\/(Archive\/[A-Za-z0-9.]+\/)?[A-Za-z0-9._-]+$/.test(path)) {
      res.writeHead(404).end();
      return;
    }
    const file = join(rootOf(), path);
    let data;
    try {
      if (!statSync(file).isFile()) throw new Error('not a file');
      data = readFileSync(file);
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': data.length }).end(data);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address();
  return {
    url: `http://${host}:${port}`,
    host,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(resolve);
      }),
  };
}

/** The package files (tarballs) asked for since mark, by file name. */
export const tarballs = (repo, mark = 0) =>
  repo.requests
    .slice(mark)
    .filter((u) => u.endsWith('.tar.gz'))
    .map((u) => u.slice(u.lastIndexOf('/') + 1))
    .sort();
