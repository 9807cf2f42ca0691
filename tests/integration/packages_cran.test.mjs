// SPDX-License-Identifier: MIT
// R packages on demand through the real MCP endpoint with the official SDK
// client, against the real engine and the R runner image: the installer
// (lib/run/packages_cran.R) reads a CRAN-like repository this test builds
// and serves (lib/cranrepo.mjs: real source packages from R CMD build),
// installs a package with the dependency the image lacks (not the one it
// has), which the warm session and a one-off run then load; a package's own
// code, which R evaluates while installing it, runs without network (the
// second of the installer's two boxes); a second run
// asks the repository nothing; an older version comes from the archive;
// packages with code to compile are refused before anything is installed
// (the image has no compilers); unknown names, bad specs, a repository
// nothing answers on and the size cap all give a clear result.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { describeRun } from './lib/sandbox.mjs';
import { SLOW, expectStatus, run, startWarm, stopWarm } from './lib/warm.mjs';
import { bridgeGateway } from './lib/pyindex.mjs';
import { buildRepository, serveRepository, tarballs } from './lib/cranrepo.mjs';

const T = 300_000 * SLOW;
const r = (client, c, code, extra) => run(client, c, 'r', code, extra);

const PACKAGES = [
  { name: 'mcpsdHello', version: '1.0.0', files: { 'R/hello.R': 'hello <- function() "hello from the repository"\n' } },
  { name: 'mcpsdHello', version: '0.9', archive: true, files: { 'R/hello.R': 'hello <- function() "an older hello"\n' } },
  {
    name: 'mcpsdUses',
    version: '0.2',
    // jsonlite is in the image: it must not be downloaded.
    imports: ['mcpsdHello', 'jsonlite'],
    files: { 'R/twice.R': 'twice <- function() paste(mcpsdHello::hello(), jsonlite::toJSON(2L))\n' },
  },
  {
    name: 'mcpsdFast',
    version: '1.0',
    namespace: 'useDynLib(mcpsdFast)\nexport(f)\n',
    files: { 'R/f.R': 'f <- function() 1\n', 'src/f.c': 'int mcpsd_fast = 1;\n' },
  },
  { name: 'mcpsdNeedsFast', version: '1.0', imports: ['mcpsdFast'], files: { 'R/g.R': 'g <- function() mcpsdFast::f()\n' } },
  { name: 'mcpsdBig', version: '1.0', files: { 'R/b.R': 'b <- function() 1\n', 'inst/blob.bin': randomBytes(3 << 20) } },
];

/** A refusal: no structured result, isError, the text matching re. */
function expectRefused(res, re) {
  assert.equal(res.sc, undefined, `refused before running: ${describeRun(res)}`);
  assert.equal(res.result.isError, true);
  assert.match(res.text, re);
}

/** A failed installation: the code did not run, the message matching re. */
function expectInstallFailed(res, re) {
  expectStatus(res, 'failed');
  assert.equal(res.sc.exit_code, null);
  assert.equal(res.sc.packages?.failed, true, JSON.stringify(res.sc.packages));
  assert.doesNotMatch(res.sc.stdout, /RAN/);
  assert.match(res.sc.message, /The packages could not be installed, so the code did not run/);
  assert.match(res.sc.message, re);
}

let root, repo;
before(async () => {
  // The server first: mcpsdProbe's code tries to reach it while it is
  // installed (R evaluates a package's code then).
  repo = await serveRepository(() => root);
  const probe = {
    name: 'mcpsdProbe',
    version: '1.0',
    files: {
      'R/probe.R': [
        'reached <- tryCatch({',
        `  readLines(url("${repo.url}/probe-at-install"), warn = FALSE)`,
        '  TRUE',
        '}, error = function(e) FALSE, warning = function(w) FALSE)',
        '',
      ].join('\n'),
    },
  };
  root = buildRepository([...PACKAGES, probe]);
});
after(async () => {
  await repo?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('R packages from a CRAN-like repository', () => {
  let d;
  before(async () => {
    d = await startWarm({ name: 'packages-cran', env: { SANDBOX_PACKAGES_CRAN_REPOS: repo.url } });
  });
  after(() => stopWarm(d));

  test('a package\'s code, which R runs while installing it, has no network', { timeout: T }, async () => {
    const res = await r(d.client, 'cran-probe', 'cat(mcpsdProbe::reached, "\\n")', { packages: ['mcpsdProbe'] });
    expectStatus(res, 'completed');
    assert.deepEqual(res.sc.packages.installed, ['mcpsdProbe']);
    assert.equal(res.sc.stdout, 'FALSE \n', 'the value its code computed while being installed');
    assert.ok(!repo.requests.includes('/probe-at-install'), `no request from the package's code: ${repo.requests.join(' ')}`);
  });

  test('installed with the dependency the image lacks, loaded, then reused; a one-off run finds it too', { timeout: T }, async () => {
    const mark = repo.requests.length;
    const res = await r(d.client, 'cran', 'library(mcpsdUses)\ncat(twice(), "\\n")', { packages: ['mcpsdUses'] });
    expectStatus(res, 'completed');
    assert.equal(res.sc.stdout, 'hello from the repository [2] \n');
    assert.equal(res.sc.packages.manager, 'cran');
    assert.deepEqual(res.sc.packages.installed, ['mcpsdUses']);
    assert.equal(res.sc.packages.cache, '/data/.mcp/packages/r');
    assert.match(res.text, /\npackages: installed 1 \(cran, \d+\.\d s\)/);
    assert.deepEqual(tarballs(repo, mark), ['mcpsdHello_1.0.0.tar.gz', 'mcpsdUses_0.2.tar.gz'], 'jsonlite came from the image');
    assert.ok(!(res.sc.files ?? []).some((f) => f.name.startsWith('.mcp/')), 'the cache is not listed as the run\'s files');

    const mark2 = repo.requests.length;
    const again = await r(d.client, 'cran', 'cat(mcpsdUses::twice(), "\\n")', { packages: ['mcpsdUses', 'mcpsdHello@1.0.0'] });
    expectStatus(again, 'completed');
    assert.deepEqual(again.sc.packages.reused, ['mcpsdUses', 'mcpsdHello@1.0.0']);
    assert.deepEqual(again.sc.packages.installed, []);
    assert.deepEqual(repo.requests.slice(mark2), [], 'the second run asked the repository nothing');

    // One-off (another memory limit): R_LIBS puts the cache on the path.
    const oneoff = await r(d.client, 'cran', 'cat(mcpsdHello::hello(), find.package("mcpsdHello"), sep = "\\n")', { memory_mb: 200 });
    expectStatus(oneoff, 'completed');
    assert.equal(oneoff.sc.session.state, 'none');
    assert.equal(oneoff.sc.stdout, 'hello from the repository\n/data/.mcp/packages/r/mcpsdHello\n');

    // Another conversation has a library of its own.
    const other = await r(d.client, 'cran-other', 'library(mcpsdHello)');
    expectStatus(other, 'failed');
    assert.match(other.sc.stderr, /there is no package called .mcpsdHello./);
  });

  test('the warm session sees packages installed after it started and keeps its state', { timeout: T }, async () => {
    const first = await r(d.client, 'cran-warm', 'df <- data.frame(x = 1:3)\ncat("set\\n")');
    expectStatus(first, 'completed');
    const res = await r(d.client, 'cran-warm', 'cat(sum(df$x), mcpsdHello::hello(), "\\n")', { packages: ['mcpsdHello'] });
    expectStatus(res, 'completed');
    assert.equal(res.sc.session.state, 'continued', JSON.stringify(res.sc.session));
    assert.equal(res.sc.stdout, '6 hello from the repository \n');
  });

  test('an exact older version comes from the archive; one in neither place says which there are', { timeout: T }, async () => {
    const mark = repo.requests.length;
    const old = await r(d.client, 'cran-old', 'cat(mcpsdHello::hello(), as.character(packageVersion("mcpsdHello")), "\\n")', {
      packages: ['mcpsdHello@0.9'],
    });
    expectStatus(old, 'completed');
    assert.equal(old.sc.stdout, 'an older hello 0.9 \n');
    assert.deepEqual(tarballs(repo, mark), ['mcpsdHello_0.9.tar.gz']);
    assert.ok(repo.requests.slice(mark).includes('/src/contrib/Archive/mcpsdHello/mcpsdHello_0.9.tar.gz'));

    // The current version replaces it in the cache.
    const cur = await r(d.client, 'cran-old', 'cat(mcpsdHello::hello(), "\\n")', { packages: ['mcpsdHello@1.0.0'], session: 'new' });
    expectStatus(cur, 'completed');
    assert.deepEqual(cur.sc.packages.installed, ['mcpsdHello@1.0.0']);
    assert.equal(cur.sc.stdout, 'hello from the repository \n');

    const none = await r(d.client, 'cran-old', 'cat("RAN")', { packages: ['mcpsdHello@0.5'] });
    expectInstallFailed(none, /version 0\.5 of 'mcpsdHello' is not the current one \(1\.0\.0\) and is not in the archive of .*ask for "mcpsdHello" or "mcpsdHello@1\.0\.0"/);
  });

  test('code to compile is refused before anything is installed, a dependency naming who needs it', { timeout: T }, async () => {
    const mark = repo.requests.length;
    const res = await r(d.client, 'cran-c', 'cat("RAN")', { packages: ['mcpsdFast'] });
    expectInstallFailed(res, /cannot install mcpsdFast: C\/C\+\+\/Fortran code to compile \(NeedsCompilation: yes\), and the R runner has no compilers/);
    const dep = await r(d.client, 'cran-c', 'cat("RAN")', { packages: ['mcpsdHello', 'mcpsdNeedsFast'] });
    expectInstallFailed(dep, /cannot install mcpsdFast \(needed by mcpsdNeedsFast\)/);
    assert.doesNotMatch(repo.requests.slice(mark).join(' '), /00LOCK|INSTALL/);
    const left = await r(d.client, 'cran-c', 'cat(dir.exists("/data/.mcp/packages/r/mcpsdHello"), "\\n")');
    expectStatus(left, 'completed');
    assert.equal(left.sc.stdout, 'FALSE \n', 'nothing of a refused installation reached the cache');
  });

  test('an unknown name says so (with the right case when only that differs); what the image has is not installed', { timeout: T }, async () => {
    const res = await r(d.client, 'cran-bad', 'cat("RAN")', { packages: ['mcpsdNoSuchThing'] });
    expectInstallFailed(res, /package 'mcpsdNoSuchThing' is not in http:\/\/.*; check the name/);
    const cased = await r(d.client, 'cran-bad', 'cat("RAN")', { packages: ['mcpsdhello'] });
    expectInstallFailed(cased, /names are case-sensitive: did you mean 'mcpsdHello'\?/);

    const mark = repo.requests.length;
    const pre = await r(d.client, 'cran-bad', 'cat(as.character(packageVersion("jsonlite")) > "1", "\\n")', { packages: ['jsonlite'] });
    expectStatus(pre, 'completed');
    assert.deepEqual(pre.sc.packages.preinstalled, ['jsonlite']);
    assert.deepEqual(repo.requests.slice(mark), [], 'nothing was asked of the repository');
  });

  test('bad specs are refused before anything runs', { timeout: T }, async () => {
    const mark = repo.requests.length;
    for (const spec of ['https://x.example/p.tar.gz', 'user/repo', '../x', 'a', '.x', 'x.', '2x', 'glue;system("id")', '-e', 'glue@>=1.0', 'glue@1', 'glue@1.0@2', 'glue (>= 1.0)']) {
      const res = await r(d.client, 'cran-spec', 'cat(1)', { packages: [spec] });
      expectRefused(res, /R package '.*'( is not a CRAN package name|: the version after '@')/);
      assert.match(res.text, /e\.g\. "glue/);
    }
    assert.deepEqual(repo.requests.slice(mark), [], 'nothing reached the repository');
  });
});

describe('R packages: the operator\'s repositories and limits', () => {
  let d, repo2, closedPort;
  before(async () => {
    repo2 = await serveRepository(root);
    const host = bridgeGateway();
    const probe = createNetServer();
    await new Promise((resolve) => probe.listen(0, host, resolve));
    closedPort = probe.address().port;
    await new Promise((resolve) => probe.close(resolve));
    d = await startWarm({
      name: 'packages-cran-limits',
      env: { SANDBOX_PACKAGES_CRAN_REPOS: `http://${host}:${closedPort},${repo2.url}`, SANDBOX_PACKAGES_MAX_MB: '2' },
    });
  });
  after(async () => {
    await stopWarm(d);
    await repo2?.close();
  });

  test('the second repository serves when the first does not answer; past SANDBOX_PACKAGES_MAX_MB the cache is left as it was', { timeout: T }, async () => {
    const ok = await r(d.client, 'cran-lim', 'cat(mcpsdHello::hello(), "\\n")', { packages: ['mcpsdHello'] });
    expectStatus(ok, 'completed');
    const big = await r(d.client, 'cran-lim', 'cat("RAN")', { packages: ['mcpsdBig'] });
    expectInstallFailed(big, /the package cache would take 3 MB, more than the 2 MB allowed \(SANDBOX_PACKAGES_MAX_MB\); it was left as it was/);
    const after_ = await r(d.client, 'cran-lim', 'cat(mcpsdHello::hello(), dir.exists("/data/.mcp/packages/r/mcpsdBig"), "\\n")');
    expectStatus(after_, 'completed');
    assert.equal(after_.sc.stdout, 'hello from the repository FALSE \n');
  });
});

describe('R packages: a repository nothing answers on', () => {
  let d;
  before(async () => {
    const host = bridgeGateway();
    const probe = createNetServer();
    await new Promise((resolve) => probe.listen(0, host, resolve));
    const port = probe.address().port;
    await new Promise((resolve) => probe.close(resolve));
    d = await startWarm({ name: 'packages-cran-down', env: { SANDBOX_PACKAGES_CRAN_REPOS: `http://${host}:${port}` } });
  });
  after(() => stopWarm(d));

  test('names the setting and the installers\' network', { timeout: T }, async () => {
    const res = await r(d.client, 'cran-down', 'cat("RAN")', { packages: ['mcpsdHello'] });
    expectInstallFailed(
      res,
      /the R installer could not reach http:\/\/.* \(Could not connect to server.*\)\. This is the server's setup, not the packages: check SANDBOX_PACKAGES_CRAN_REPOS and that the installers' Docker network SANDBOX_PACKAGES_NETWORK \(bridge\) reaches it/,
    );
  });
});
