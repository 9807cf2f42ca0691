// SPDX-License-Identifier: MIT
// Claude Code (@anthropic-ai/claude-code from npm) as a test peer, with no
// model and no login: a scratch HOME, `claude mcp add/list/get`, the MCP
// log files it writes under that HOME, and the `mcp_status` control request
// of its stream-json protocol (`claude -p --input-format stream-json
// --output-format stream-json`: one JSON object a line each way; a
// {"type":"control_request","request_id":ID,"request":{"subtype":
// "mcp_status"}} line is answered by a {"type":"control_response",
// "response":{"subtype":"success","request_id":ID,"response":{"mcpServers":
// [{name,status,error?,tools?,...}]}}} line; status is pending until the
// server's connection has settled). With stdin closed and no user message
// sent, it exits without asking a model anything.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const MODULES = path.join(here, '..', 'node_modules');

/**
 * The native binary. The platform package holds it whether or not npm ran
 * the wrapper's postinstall (which copies it over bin/claude.exe); the
 * wrapper's bin is the fallback on other platforms.
 */
export function claudeBin() {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  for (const p of [
    path.join(MODULES, `@anthropic-ai/claude-code-linux-${arch}/claude`),
    path.join(MODULES, `@anthropic-ai/claude-code-linux-${arch}-musl/claude`),
    path.join(MODULES, '@anthropic-ai/claude-code/bin/claude.exe'),
  ]) {
    if (existsSync(p)) return p;
  }
  throw new Error(`Claude Code is not installed in ${MODULES}: run npm ci in tests/integration (tests/run.sh does)`);
}

/** The installed version, from its package.json. */
export function claudeVersion() {
  return JSON.parse(readFileSync(path.join(MODULES, '@anthropic-ai/claude-code/package.json'), 'utf8')).version;
}

/** What OAuth clients print when a server's answer fails their schemas. */
export const PARSER_ERROR = /ZodError|Invalid OAuth error response|Unexpected token|is not valid JSON/;

/**
 * A scratch user for Claude Code: HOME and a project directory in it (its
 * default "local" scope keys servers by the current directory).
 */
export function claudeUser(prefix = 'mcpsd-claude-') {
  const home = mkdtempSync(path.join(os.tmpdir(), prefix));
  const project = path.join(home, 'project');
  mkdirSync(project);
  return {
    home,
    project,
    /** The directory of its MCP log files for the server `name`. */
    logDir(name) {
      return path.join(home, '.cache/claude-cli-nodejs', project.replace(/[^A-Za-z0-9]/g, '-'), `mcp-logs-${name}`);
    },
    /** Everything in the MCP log files of server `name` ('' if none). */
    logs(name) {
      const dir = this.logDir(name);
      if (!existsSync(dir)) return '';
      return readdirSync(dir)
        .sort()
        .map((f) => readFileSync(path.join(dir, f), 'utf8'))
        .join('');
    },
    remove() {
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** The environment of a run: nothing from ours but PATH. */
function claudeEnv(user, extra) {
  return {
    PATH: process.env.PATH,
    HOME: user.home,
    TMPDIR: os.tmpdir(),
    // A loaded machine may take a while to answer; its default is 30 s.
    MCP_TIMEOUT: '60000',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // An OAuth flow must never wait for a person at a browser.
    BROWSER: '/bin/false',
    ...extra,
  };
}

/**
 * Runs `claude ARGS` in the user's project directory. Resolves { code, out }
 * (stdout and stderr together); a run past ms is killed (code 'SIGKILL').
 */
export function claude(user, args, { env = {}, ms = 120000 } = {}) {
  return new Promise((resolve) => {
    const p = spawn(claudeBin(), args, { cwd: user.project, env: claudeEnv(user, env), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b) => (out += b));
    p.stderr.on('data', (b) => (out += b));
    const t = setTimeout(() => p.kill('SIGKILL'), ms);
    p.on('close', (code, sig) => {
      clearTimeout(t);
      resolve({ code: code ?? sig, out });
    });
  });
}

/**
 * `claude mcp list`, parsed: Map name -> { line, connected, reason }.
 * Its lines read "NAME: URL (HTTP) - ✔ Connected" or "... - ✘ Failed to
 * connect — REASON" (or "! Needs authentication", ...).
 */
export function parseMcpList(out) {
  const servers = new Map();
  for (const line of out.split('\n')) {
    const m = /^([A-Za-z0-9_-]+): (\S+) \((HTTP|SSE|stdio)\) - (.*)$/.exec(line);
    if (!m) continue;
    const state = m[4];
    const dash = state.indexOf(' — ');
    servers.set(m[1], {
      line,
      url: m[2],
      transport: m[3],
      state: dash < 0 ? state : state.slice(0, dash),
      connected: /✔ Connected/.test(state),
      reason: dash < 0 ? '' : state.slice(dash + 3),
    });
  }
  return servers;
}

/**
 * Asks a stream-json session for `mcp_status` once a second until no
 * server is pending (or ms pass), then closes its stdin. Resolves { servers
 * (Map name -> row of the last answer), answers, out (stdout), err, code }.
 */
export function mcpStatus(user, { env = {}, ms = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(claudeBin(), ['-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose'], {
      cwd: user.project,
      env: claudeEnv(user, env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let pending = '';
    let last = null;
    let answers = 0;
    let n = 0;
    let closed = false;
    const ask = () => {
      if (closed) return;
      p.stdin.write(`${JSON.stringify({ type: 'control_request', request_id: `status-${++n}`, request: { subtype: 'mcp_status' } })}\n`);
    };
    const done = () => {
      if (closed) return;
      closed = true;
      clearInterval(tick);
      p.stdin.end();
    };
    const tick = setInterval(ask, 1000);
    const killer = setTimeout(() => {
      done();
      p.kill('SIGKILL');
    }, ms);
    p.stdin.on('error', () => {});
    p.stdout.on('data', (b) => {
      out += b;
      pending += b;
      let i;
      while ((i = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        let j;
        try {
          j = JSON.parse(line);
        } catch {
          continue;
        }
        const rows = j?.type === 'control_response' && j.response?.subtype === 'success' ? j.response.response?.mcpServers : null;
        if (!Array.isArray(rows)) continue;
        answers++;
        last = rows;
        if (!rows.some((s) => s.status === 'pending')) done();
      }
    });
    p.stderr.on('data', (b) => (err += b));
    p.on('error', reject);
    p.on('close', (code, sig) => {
      clearTimeout(killer);
      clearInterval(tick);
      resolve({ servers: new Map((last ?? []).map((s) => [s.name, s])), answers, out, err, code: code ?? sig });
    });
    ask();
  });
}
