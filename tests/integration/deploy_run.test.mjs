// SPDX-License-Identifier: MIT
// deploy/run.sh as a person re-runs it, against the real engine and runner
// images: in a scratch checkout (its deploy/ scripts are this tree's, its
// build/release is the build under test, its .env written here with a free
// port and a unique instance name), --detach starts the daemon; --status
// prints the pid, the URL and what /healthz says (engine, runner images,
// warm sessions); running it again with nothing changed leaves the daemon
// alone, so a warm Python session keeps its variables; a changed .env or
// --restart restarts it and says that warm sessions are dropped; --stop
// stops it. With the runner images still building (a stand-in for
// runners/build.sh that keeps its --progress file as build.sh does, so that no
// image is built here), it serves without waiting for them, names the
// languages still building, and --status follows the build to its end or its
// failure. And mcp-sandboxd --help names every language a runner image of
// this tree runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, connectHttp, freePort, umountBelow } from './lib/daemon.mjs';
import { DOCKER_SOCK, instanceName, removeContainersOf, runCode } from './lib/sandbox.mjs';
import { SLOW } from './lib/warm.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const T = { timeout: 600_000 * SLOW };

/** Runs the scratch checkout's deploy/run.sh; resolves { code, out }. */
function runSh(dir, args) {
  return new Promise((resolve) => {
    const p = spawn('bash', [path.join(dir, 'deploy/run.sh'), ...args], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME ?? '/root',
        // The engine the tests use (a second one when DOCKER_HOST names it).
        DOCKER_SOCK,
        ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (b) => (out += b));
    p.stderr.on('data', (b) => (out += b));
    const timer = setTimeout(() => p.kill('SIGKILL'), 480_000 * SLOW);
    p.on('close', (code, sig) => {
      clearTimeout(timer);
      resolve({ code: code ?? sig, out });
    });
  });
}

describe('deploy/run.sh run again', () => {
  let dir, port, token, instance, client;
  const pidOf = () => Number(readFileSync(path.join(dir, 'var/mcp-sandboxd.pid'), 'utf8'));
  const base = () => `http://127.0.0.1:${port}`;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-deploy-'));
    mkdirSync(path.join(dir, 'deploy'));
    mkdirSync(path.join(dir, 'build'));
    for (const f of ['run.sh', 'common.sh']) symlinkSync(path.join(ROOT, 'deploy', f), path.join(dir, 'deploy', f));
    // The build under test: meson_build finds it configured and built.
    symlinkSync(path.resolve(ROOT, BIN, '../..'), path.join(dir, 'build/release'));
    port = await freePort();
    token = randomBytes(24).toString('hex');
    instance = instanceName('deploy');
    writeFileSync(
      path.join(dir, '.env'),
      [
        `MCP_HTTP_ADDR=127.0.0.1:${port}`,
        `PUBLIC_BASE_URL=http://127.0.0.1:${port}`,
        `MCP_API_TOKEN=${token}`,
        `FILE_SECRET=${randomBytes(32).toString('hex')}`,
        `SANDBOX_ROOT=${dir}/var/sandbox`,
        `MCP_INSTANCE_NAME=${instance}`,
        'SANDBOX_WARM=true',
        'SANDBOX_POOL_SIZE=0',
        'SANDBOX_MAX_TIMEOUT_SECONDS=60',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
  });

  after(async () => {
    await client?.close().catch(() => {});
    if (dir) {
      await runSh(dir, ['--stop']);
      umountBelow(path.join(dir, 'var/sandbox'));
      await removeContainersOf(instance).catch(() => {});
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    }
  });

  test('--status before a start says it is not running', T, async () => {
    const r = await runSh(dir, ['--status']);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /not running/);
  });

  test('--detach starts it; --status gives the pid, the URL and its health', T, async () => {
    const r = await runSh(dir, ['--detach', '--no-images']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /mcp-sandboxd is serving/);
    const s = await runSh(dir, ['--status']);
    assert.equal(s.code, 0, s.out);
    assert.match(s.out, new RegExp(`running \\(pid ${pidOf()}[,)]`), s.out);
    assert.match(s.out, new RegExp(`URL: +${base()}/mcp\\n`), s.out);
    assert.match(s.out, /health: +ok /, s.out);
    assert.match(s.out, /engine: +reachable \(Docker \d/, s.out);
    assert.match(s.out, /runners: +[1-9]\d* images/, s.out);
    assert.match(s.out, /warm: +0 sessions/, s.out);
  });

  test('run again with nothing changed: the daemon and its warm sessions are left alone', T, async () => {
    client = await connectHttp({ url: `${base()}/mcp`, token });
    const set = await runCode(client, { conversationId: 'keep', language: 'python', code: 'x = 41' });
    assert.equal(set.sc?.status, 'completed', set.text);
    const pid = pidOf();

    const r = await runSh(dir, ['--detach', '--no-images']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /already running this build with these settings: nothing restarted, warm sessions kept/, r.out);
    assert.match(r.out, /warm: +1 sessions/, `the status follows: ${r.out}`);
    assert.equal(pidOf(), pid, 'the same process');

    const again = await runCode(client, { conversationId: 'keep', language: 'python', code: 'print(x + 1)' });
    assert.equal(again.sc?.stdout, '42\n', again.text);
    assert.equal(again.sc.session?.state, 'continued');
  });

  test('a changed .env restarts it, says that warm sessions end, and Python\'s state comes back from its save', T, async () => {
    const pid = pidOf();
    appendFileSync(path.join(dir, '.env'), 'MCP_LOG_LEVEL=debug\n');
    const r = await runSh(dir, ['--detach', '--no-images']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`restarting the running instance \\(pid ${pid}\\): .*\\.env changed`), r.out);
    assert.match(r.out, /a restart ends every warm session: Python's variables, imports and data come back from each conversation's last save/, r.out);
    assert.notEqual(pidOf(), pid, 'a new process');

    await client.close().catch(() => {});
    client = await connectHttp({ url: `${base()}/mcp`, token });
    const after = await runCode(client, { conversationId: 'keep', language: 'python', code: "print('x' in globals())" });
    assert.equal(after.sc?.stdout, 'True\n', after.text);
    assert.equal(after.sc.session?.state, 'restored', after.text);
  });

  test('--restart restarts it though nothing changed; --stop stops it', T, async () => {
    const pid = pidOf();
    const r = await runSh(dir, ['--detach', '--no-images', '--restart']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /restarting the running instance .*--restart was given/, r.out);
    assert.notEqual(pidOf(), pid);
    const stop = await runSh(dir, ['--stop']);
    assert.equal(stop.code, 0, stop.out);
    const s = await runSh(dir, ['--status']);
    assert.equal(s.code, 1, s.out);
  });
});

/** A scratch checkout as the first describe makes, with runners/build.sh given. */
async function scratchCheckout(buildSh) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-deploy-'));
  mkdirSync(path.join(dir, 'deploy'));
  mkdirSync(path.join(dir, 'build'));
  mkdirSync(path.join(dir, 'runners'));
  for (const f of ['run.sh', 'common.sh']) symlinkSync(path.join(ROOT, 'deploy', f), path.join(dir, 'deploy', f));
  symlinkSync(path.resolve(ROOT, BIN, '../..'), path.join(dir, 'build/release'));
  writeFileSync(path.join(dir, 'runners/build.sh'), buildSh, { mode: 0o755 });
  const port = await freePort();
  const instance = instanceName('deploy-bg');
  writeFileSync(
    path.join(dir, '.env'),
    [
      `MCP_HTTP_ADDR=127.0.0.1:${port}`,
      `PUBLIC_BASE_URL=http://127.0.0.1:${port}`,
      `MCP_API_TOKEN=${randomBytes(24).toString('hex')}`,
      `FILE_SECRET=${randomBytes(32).toString('hex')}`,
      `SANDBOX_ROOT=${dir}/var/sandbox`,
      `MCP_INSTANCE_NAME=${instance}`,
      'SANDBOX_POOL_SIZE=0',
      'SANDBOX_MAX_TIMEOUT_SECONDS=60',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return { dir, instance };
}

// Stands in for runners/build.sh: takes --progress FILE as build.sh does and
// rewrites it whole at each step: python done at once, bash building until
// the test creates runners/finish (then bash done, exit 0) or runners/fail
// (bash failed, exit 1). It builds nothing.
const FAKE_BUILD = `#!/usr/bin/env bash
set -eu
[ "$1" = --progress ] || { echo "expected --progress FILE, got: $*" >&2; exit 2; }
p=$2 here=$(dirname "$0")
step() { printf '%s\\n' "$@" >"$p.tmp" && mv -f "$p.tmp" "$p"; }
echo "==> python: docker build (stand-in)"
step 'python done' 'bash building'
for _ in $(seq 1 600); do
  if [ -e "$here/finish" ]; then step 'python done' 'bash done'; echo "==> built"; exit 0; fi
  if [ -e "$here/fail" ]; then step 'python done' 'bash failed'; echo "build.sh: error: failed: bash" >&2; exit 1; fi
  sleep 0.2
done
exit 3
`;

describe('deploy/run.sh while the runner images build', () => {
  let dir, instance;
  const runSt = () => runSh(dir, ['--status']);
  const waitFor = async (re) => {
    let s;
    for (let i = 0; i < 100; i++) {
      s = await runSt();
      if (re.test(s.out)) return s;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.match(s.out, re);
    return s;
  };

  before(async () => {
    ({ dir, instance } = await scratchCheckout(FAKE_BUILD));
  });

  after(async () => {
    if (!dir) return;
    writeFileSync(path.join(dir, 'runners/finish'), '');
    await runSh(dir, ['--stop']);
    umountBelow(path.join(dir, 'var/sandbox'));
    await removeContainersOf(instance).catch(() => {});
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  });

  test('serves without waiting for every image, names those still building; --status follows the build', T, async () => {
    const r = await runSh(dir, ['--detach']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /building the runner images in the background, Python first \(log: .*var\/runner-build\.log\)/, r.out);
    assert.match(r.out, /mcp-sandboxd is serving/, r.out);
    assert.match(r.out, /Runner images still building: bash\. The daemon serves each language as/, r.out);
    const s = await runSt();
    assert.equal(s.code, 0, s.out);
    assert.match(s.out, /images: +building in the background \(pid \d+\), still building: bash; each language is served once built/, s.out);
    assert.match(readFileSync(path.join(dir, 'var/runner-build.log'), 'utf8'), /python: docker build/);

    // Run again while the build goes on: no second build is started.
    const again = await runSh(dir, ['--detach']);
    assert.equal(again.code, 0, again.out);
    assert.match(again.out, /still being built in the background \(pid \d+/, again.out);

    writeFileSync(path.join(dir, 'runners/finish'), '');
    await waitFor(/images: +all built \(python, bash\)/);
  });

  test('a failed build is named in --status, with its log', T, async () => {
    rmSync(path.join(dir, 'runners/finish'), { force: true });
    const r = await runSh(dir, ['--detach', '--restart']);
    assert.equal(r.code, 0, r.out);
    writeFileSync(path.join(dir, 'runners/fail'), '');
    const s = await waitFor(/images: +the last build failed for: bash \(log: .*runner-build\.log; runners\/build\.sh --only LANGS retries\)/);
    assert.equal(s.code, 0, s.out);
  });
});

describe('mcp-sandboxd --help', () => {
  // How the help names each runner image's language (runners/<dir>).
  const NAMES = { bash: 'Bash', c: 'C', cpp: 'C++', go: 'Go', php: 'PHP', python: 'Python', r: 'R', ruby: 'Ruby', rust: 'Rust', typescript: 'TypeScript' };

  test('names the language of every runner image this tree builds', () => {
    const help = execFileSync(path.resolve(ROOT, BIN), ['--help'], { encoding: 'utf8' });
    const intro = help.split('\nOptions:')[0].replace(/\s+/g, ' ');
    // Runner images only: runners/egress (the egress proxy) is built there too
    // but carries no sandbox.runner label.
    const dirs = readdirSync(path.join(ROOT, 'runners')).filter((f) => {
      const df = path.join(ROOT, 'runners', f, 'Dockerfile');
      return existsSync(df) && /sandbox\.runner="true"/.test(readFileSync(df, 'utf8'));
    });
    assert.ok(dirs.length >= 9, `runner directories: ${dirs}`);
    for (const dir of dirs) {
      assert.ok(NAMES[dir], `runners/${dir} is new: add how --help names it to this test`);
      const word = NAMES[dir].replace(/[+]/g, '\\+');
      assert.match(intro, new RegExp(`(^|[ ,/(])${word}([ ,/)]|$)`), `--help names ${NAMES[dir]}: ${intro}`);
    }
  });
});
