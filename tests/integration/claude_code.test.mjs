// SPDX-License-Identifier: MIT
// Claude Code, as people set it up from the README, against the real
// daemon, with a scratch HOME and no model or login: `claude mcp add` over
// Streamable HTTP (/mcp) and the legacy transport (/sse) with the bearer
// header, `claude mcp list` and `claude mcp get`, and the stream-json
// control request `mcp_status`, which lists the server's tools. With a
// wrong token and with none, Claude Code must show the person the token
// problem and what to do wherever it shows a server's reason (its status
// output, and its MCP log files under HOME), never a parser error. The
// Claude Code commands of README.md and deploy/run.sh run as written. When
// the daemon has OAuth, the wrong- and no-token cases with OAuth on.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, startDaemon } from './lib/daemon.mjs';
import { PARSER_ERROR, claude, claudeBin, claudeUser, claudeVersion, mcpStatus, parseMcpList } from './lib/claude_code.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOOLS = ['check_code', 'delete_file', 'list_files', 'list_runners', 'replay_notebook', 'run_code', 'upload_file', 'usage'];
// The server's words about a missing or wrong token (lib/http/http_route.c).
const MISSING = /missing bearer token/;
const INVALID = /invalid bearer token/;
const SAYS_WHAT_TO_DO = /Authorization: Bearer <token>.*MCP_API_TOKEN.*Connecting a client/;
const OAUTH_OFF = /OAuth is not enabled on this server/;
// Claude Code's own words when the server refuses the header it was given.
const HEADER_REFUSED = /Server rejected the configured Authorization header \(HTTP 401\)\. Check that the token is valid/;

// Each test's bound: a `claude` run is killed after 120 s, a test after 5 min.
const T = { timeout: 300000 };

const WRONG = `Bearer wrong-${randomBytes(8).toString('hex')}`;

/**
 * The servers a person might add: name -> [transport, path, Authorization
 * value or null, what is wrong]. `empty` is what the README's command
 * saves when MCP_API_TOKEN is not set in the shell ("Bearer ").
 */
const SERVERS = {
  'good-http': ['http', '/mcp', 'TOKEN', null],
  'good-sse': ['sse', '/sse', 'TOKEN', null],
  'wrong-http': ['http', '/mcp', WRONG, 'wrong'],
  'wrong-sse': ['sse', '/sse', WRONG, 'wrong'],
  'none-http': ['http', '/mcp', null, 'none'],
  'none-sse': ['sse', '/sse', null, 'none'],
  'empty-http': ['http', '/mcp', 'Bearer ', 'empty'],
};

/** Adds every server of SERVERS for user; asserts what `mcp add` says. */
async function addAll(user, d) {
  for (const [name, [transport, p, auth]] of Object.entries(SERVERS)) {
    const args = ['mcp', 'add', '--transport', transport, name, `${d.base}${p}`];
    if (auth) args.push('--header', `Authorization: ${auth === 'TOKEN' ? `Bearer ${d.token}` : auth}`);
    const r = await claude(user, args);
    assert.equal(r.code, 0, `mcp add ${name}: ${r.out}`);
    assert.match(r.out, new RegExp(`Added ${transport === 'http' ? 'HTTP' : 'SSE'} MCP server ${name} with URL: ${d.base}${p} to local config`), r.out);
    assert.ok(!r.out.includes(d.token), `mcp add ${name} does not echo the token`);
  }
}

/** Asserts text is free of parser errors and of the real token. */
function assertClean(text, d, what) {
  assert.doesNotMatch(text, PARSER_ERROR, `${what}: no parser error`);
  assert.ok(!text.includes(d.token), `${what}: the real token is not printed`);
}

describe(`Claude Code ${claudeVersion()} with a static bearer token (OAuth off)`, () => {
  let d;
  let user;
  let list;

  before(async () => {
    d = await startDaemon({ name: 'claude-code', env: { MCP_INSTANCE_NAME: `claude-code-${process.pid}` } });
    user = claudeUser();
    await addAll(user, d);
  }, { timeout: 600000 });
  after(async () => {
    await d?.stopClean();
    user?.remove();
  });

  test('claude mcp list: Connected over /mcp and /sse', T, async () => {
    const r = await claude(user, ['mcp', 'list']);
    assert.equal(r.code, 0, r.out);
    list = parseMcpList(r.out);
    for (const name of Object.keys(SERVERS)) assert.ok(list.has(name), `${name} listed: ${r.out}`);
    assert.ok(list.get('good-http').connected, list.get('good-http').line);
    assert.equal(list.get('good-http').transport, 'HTTP');
    assert.ok(list.get('good-sse').connected, list.get('good-sse').line);
    assert.equal(list.get('good-sse').transport, 'SSE');
    assertClean(r.out, d, 'mcp list');
  });

  test('claude mcp list: a wrong, missing or empty token is named, with what to do', T, () => {
    assert.ok(list, 'mcp list ran');
    for (const [name, [, , , wrong]] of Object.entries(SERVERS)) {
      if (!wrong) continue;
      const s = list.get(name);
      assert.ok(!s.connected, `${name} is not connected`);
      assert.match(s.state, /✘ Failed to connect/, s.line);
      switch (name) {
        case 'wrong-http':
          // Claude Code's words, then the server's (cut at 300 characters).
          assert.match(s.reason, HEADER_REFUSED, s.line);
          assert.match(s.reason, INVALID, s.line);
          assert.match(s.reason, /Authorization: Bearer <token>.*MCP_API_TOKEN/, s.line);
          break;
        case 'wrong-sse':
          // Its SSE client sees the status, not the body: its own words.
          assert.match(s.reason, HEADER_REFUSED, s.line);
          break;
        case 'empty-http':
          assert.match(s.reason, HEADER_REFUSED, s.line);
          assert.match(s.reason, MISSING, s.line);
          assert.match(s.reason, SAYS_WHAT_TO_DO, s.line);
          break;
        default:
          // No header: it tries OAuth, and the server's OAuth error says
          // what to do instead.
          assert.match(s.reason, /Dynamic Client Registration rejected \(HTTP 404\)/, s.line);
          assert.match(s.reason, OAUTH_OFF, s.line);
          assert.match(s.reason, SAYS_WHAT_TO_DO, s.line);
      }
    }
  });

  test('claude mcp get: the reason for a failure, and the saved header in clear', T, async () => {
    let r = await claude(user, ['mcp', 'get', 'none-http']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /Status: ✘ Failed to connect/, r.out);
    assert.match(r.out, /Issue: .*OAuth is not enabled on this server/, r.out);
    assert.match(r.out, SAYS_WHAT_TO_DO, r.out);
    assertClean(r.out, d, 'mcp get none-http');
    r = await claude(user, ['mcp', 'get', 'wrong-http']);
    assert.match(r.out, /Issue: .*invalid bearer token/, r.out);
    assertClean(r.out, d, 'mcp get wrong-http');
    // What the README warns about: the token itself is printed.
    r = await claude(user, ['mcp', 'get', 'good-http']);
    assert.match(r.out, /Status: ✔ Connected/, r.out);
    assert.ok(r.out.includes(`Authorization: Bearer ${d.token}`), `mcp get prints the token: ${r.out}`);
    r = await claude(user, ['mcp', 'get', 'empty-http']);
    assert.match(r.out, /^ {4}Authorization: Bearer$/m, `an unset variable saved an empty Bearer: ${r.out}`);
  });

  test("its MCP log files under HOME hold the server's reason", T, () => {
    const wrong = user.logs('wrong-http');
    assert.match(wrong, INVALID, `log of wrong-http in ${user.logDir('wrong-http')}`);
    assert.match(wrong, HEADER_REFUSED);
    assert.match(user.logs('wrong-sse'), HEADER_REFUSED, 'log of wrong-sse');
    for (const name of ['none-http', 'none-sse']) assert.match(user.logs(name), OAUTH_OFF, `log of ${name}`);
    assert.match(user.logs('empty-http'), MISSING, 'log of empty-http');
    for (const name of Object.keys(SERVERS)) assertClean(user.logs(name), d, `log of ${name}`);
  });

  test('stream-json mcp_status: the tools over both transports, and why the others failed', T, async () => {
    const r = await mcpStatus(user);
    assert.ok(r.answers > 0, `an mcp_status answer (exit ${r.code}; stderr ${r.err.slice(-1000)}; stdout ${r.out.slice(-1000)})`);
    for (const name of ['good-http', 'good-sse']) {
      const s = r.servers.get(name);
      assert.equal(s?.status, 'connected', `${name}: ${JSON.stringify(s)}`);
      assert.deepEqual(s.tools.map((t) => t.name).sort(), TOOLS);
      assert.equal(s.serverInfo?.name, 'mcp-sandboxd');
    }
    for (const [name, [, , , wrong]] of Object.entries(SERVERS)) {
      if (!wrong) continue;
      const s = r.servers.get(name);
      assert.equal(s?.status, 'failed', `${name}: ${JSON.stringify(s)}`);
      if (wrong === 'none') {
        assert.match(s.error, OAUTH_OFF, name);
        assert.match(s.error, SAYS_WHAT_TO_DO, name);
      } else {
        assert.match(s.error, HEADER_REFUSED, name);
      }
    }
    assertClean(r.out.replaceAll(d.token, ''), d, 'mcp_status');
    assertClean(r.err, d, 'stream-json stderr');
  });
});

/**
 * Runs a shell snippet as a person would paste it, with `claude` on PATH
 * and the user's HOME and project directory. Resolves { code, out }.
 */
function shell(user, script, env = {}) {
  const bin = path.join(user.home, 'bin');
  mkdirSync(bin, { recursive: true });
  try {
    symlinkSync(claudeBin(), path.join(bin, 'claude'));
  } catch {
    /* there already */
  }
  const r = spawnSync('bash', ['--norc', '--noprofile', '-e', '-c', script], {
    cwd: user.project,
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: user.home, MCP_TIMEOUT: '60000', DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', ...env },
    encoding: 'utf8',
    timeout: 240000,
  });
  return { code: r.status ?? r.signal, out: `${r.stdout}${r.stderr}` };
}

describe('the Claude Code commands in README.md and deploy/run.sh', () => {
  let d;
  const users = [];

  before(async () => {
    d = await startDaemon({ name: 'claude-code-docs', env: { MCP_INSTANCE_NAME: `claude-code-docs-${process.pid}` } });
  });
  after(async () => {
    await d?.stopClean();
    for (const u of users) u.remove();
  });

  test("README.md's block connects; without the variable it saves an empty Bearer", T, async () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const m = /### Claude Code\n\n```sh\n([\s\S]*?)```/.exec(readme);
    assert.ok(m, 'README.md has a Claude Code block');
    const block = m[1].replaceAll('http://127.0.0.1:8080', d.base);
    assert.match(block, /^export MCP_API_TOKEN=<the token>/m);
    let user = claudeUser('mcpsd-claude-readme-');
    users.push(user);
    let r = shell(user, block.replace('<the token>', d.token));
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`sandbox: ${d.base}/mcp \\(HTTP\\) - ✔ Connected`), r.out);
    // Another directory: -s user made it available there too.
    const elsewhere = path.join(user.home, 'elsewhere');
    mkdirSync(elsewhere);
    r = shell(user, `cd ${elsewhere} && claude mcp list`);
    assert.match(r.out, /sandbox: .* - ✔ Connected/, `-s user: everywhere (${r.out})`);
    // The same block, the variable forgotten: no error, an empty Bearer.
    user = claudeUser('mcpsd-claude-readme-unset-');
    users.push(user);
    r = shell(user, block.replace(/^export MCP_API_TOKEN=.*\n/m, '').replace('claude mcp list', 'claude mcp list; claude mcp get sandbox'), {});
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /missing bearer token/, r.out);
    assert.match(r.out, /^ {4}Authorization: Bearer$/m, r.out);
  });

  test("deploy/run.sh's printed command connects", T, () => {
    const fn = /^print_clients\(\) \{\n[\s\S]*?^\}\n/m.exec(readFileSync(path.join(ROOT, 'deploy/run.sh'), 'utf8'));
    assert.ok(fn, 'deploy/run.sh has print_clients');
    const user = claudeUser('mcpsd-claude-runsh-');
    users.push(user);
    let r = shell(user, `${fn[0]}\nprint_clients`, { URL: d.url, BASE: d.base, TOKEN: d.token });
    assert.equal(r.code, 0, r.out);
    const cmd = /^Claude Code[^\n]*\n(?:[^\n]*\n)*?((?: {2}claude [^\n]*\n(?: {4}[^\n]*\n)?)+)/m.exec(r.out);
    assert.ok(cmd, `the Claude Code lines in: ${r.out}`);
    assert.ok(cmd[1].includes(d.token) && cmd[1].includes(d.url), cmd[1]);
    r = shell(user, cmd[1]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`sandbox: ${d.url} \\(HTTP\\) - ✔ Connected`), r.out);
  });
});

// A build with the OAuth module knows OAUTH_ENABLED; without it the case is
// skipped (OAuth is off everywhere then, covered above).
const hasOAuth = (() => {
  try {
    return execFileSync(BIN, ['--help'], { encoding: 'utf8' }).includes('OAUTH_ENABLED');
  } catch {
    return false;
  }
})();

describe('Claude Code with OAuth on', { skip: !hasOAuth && 'this build has no OAuth (OAUTH_ENABLED)' }, () => {
  let d;
  let user;

  before(async () => {
    d = await startDaemon({
      name: 'claude-code-oauth',
      env: { OAUTH_ENABLED: 'true', MCP_INSTANCE_NAME: `claude-code-oauth-${process.pid}` },
    });
    user = claudeUser('mcpsd-claude-oauth-');
    await addAll(user, d);
  }, { timeout: 600000 });
  after(async () => {
    await d?.stopClean();
    user?.remove();
  });

  test('a static token still connects; a wrong one is named; none asks to sign in', T, async () => {
    const r = await claude(user, ['mcp', 'list']);
    assert.equal(r.code, 0, r.out);
    const list = parseMcpList(r.out);
    assert.ok(list.get('good-http')?.connected, r.out);
    assert.ok(list.get('good-sse')?.connected, r.out);
    assert.match(list.get('wrong-http').reason, HEADER_REFUSED, r.out);
    assert.match(list.get('wrong-http').reason, INVALID, r.out);
    assert.match(list.get('wrong-sse').reason, HEADER_REFUSED, r.out);
    assert.match(list.get('empty-http').reason, MISSING, r.out);
    for (const name of ['none-http', 'none-sse']) assert.match(list.get(name).state, /Needs authentication/, list.get(name).line);
    assertClean(r.out, d, 'mcp list');
  });

  test('stream-json mcp_status: connected with tools, failed, or needs-auth', T, async () => {
    const r = await mcpStatus(user);
    assert.equal(r.servers.get('good-http')?.status, 'connected', JSON.stringify(r.servers.get('good-http')));
    assert.deepEqual(r.servers.get('good-http').tools.map((t) => t.name).sort(), TOOLS);
    assert.equal(r.servers.get('wrong-http')?.status, 'failed');
    assert.match(r.servers.get('wrong-http').error, HEADER_REFUSED);
    for (const name of ['none-http', 'none-sse']) assert.equal(r.servers.get(name)?.status, 'needs-auth', name);
    assertClean(r.out.replaceAll(d.token, ''), d, 'mcp_status');
  });
});
