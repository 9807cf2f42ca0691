// SPDX-License-Identifier: MIT
// The node:test reporter that tests/run.sh prints. On success it stays
// short: one line per top-level suite or test, and the runner's closing
// counts ("# pass N", "# fail N", ...) as the TAP reporter prints them.
// Every failure, at whatever depth, gets a block of its own: the path of
// names from the file to the failing test, the assertion's message, its
// expected and actual values and operator, where the assertion is and
// where the test is declared, and the test's own diagnostics. A known
// failure (a todo test that fails) gets one line. What a test file wrote
// to stderr is shown only when that file had a failure.
// Use: node --test --test-reporter=./tests/integration/lib/reporter.mjs
//        --test-reporter-destination=stdout ...
import path from 'node:path';
import { inspect } from 'node:util';

const MAX_LINES = 40; // of a message or a value
const MAX_STDERR = 40; // lines kept per file, shown on failure

function rel(file) {
  if (!file) return '?';
  const r = path.relative(process.cwd(), file.replace(/^file:\/\//, ''));
  return r.startsWith('..') ? file : r;
}

function clip(text, max = MAX_LINES) {
  const lines = String(text).replace(/\s+$/, '').split('\n');
  if (lines.length <= max) return lines;
  return [...lines.slice(0, max), `... (${lines.length - max} more lines)`];
}

function show(v) {
  return typeof v === 'string' ? JSON.stringify(v) : inspect(v, { depth: 6, breakLength: 100, maxArrayLength: 50, maxStringLength: 2000 });
}

/** The first stack frame in a test file: where the assertion is. */
function assertionSite(err) {
  const stack = String(err?.stack ?? '');
  for (const line of stack.split('\n')) {
    const m = /\(?((?:file:\/\/)?\/[^\s()]+\.m?[jt]s):(\d+):(\d+)\)?\s*$/.exec(line);
    if (m && !m[1].includes('/node_modules/') && !m[1].startsWith('node:')) return `${rel(m[1])}:${m[2]}:${m[3]}`;
  }
  return null;
}

/** The lines that say why a test failed. */
function describeFailure(d) {
  const err = d.details?.error;
  const out = [];
  const where = `${rel(d.file)}:${d.line}:${d.column}`;
  if (!err) return [`  failed (no error reported); test at ${where}`];
  const cause = err.cause ?? err;
  if (err.failureType === 'cancelledByParent') return [`  cancelled: ${err.message ?? 'its parent failed'}; test at ${where}`];
  if (err.failureType === 'hookFailed') out.push('  a hook (before/after/beforeEach/afterEach) failed');
  if (err.failureType === 'testTimeoutFailure') out.push('  timed out');
  const name = cause?.name ?? 'Error';
  const code = cause?.code && cause.code !== 'ERR_ASSERTION' ? ` [${cause.code}]` : '';
  const msg = clip(String(cause?.message ?? cause).replace(/\n\s*\n/g, '\n'));
  out.push(`  ${name}${code}: ${msg[0]}`);
  for (const l of msg.slice(1)) out.push(`    ${l}`);
  if (cause && typeof cause === 'object' && 'operator' in cause && cause.operator !== undefined) {
    const exp = clip(show(cause.expected));
    const act = clip(show(cause.actual));
    out.push(`  expected: ${exp[0]}`, ...exp.slice(1).map((l) => `            ${l}`));
    out.push(`  actual:   ${act[0]}`, ...act.slice(1).map((l) => `            ${l}`));
    out.push(`  operator: ${cause.operator}`);
  }
  const site = assertionSite(cause);
  if (site) out.push(`  at ${site}`);
  out.push(`  test at ${where}`);
  return out;
}

export default async function* reporter(source) {
  const names = []; // names of the tests started, by nesting
  const stderr = new Map(); // file -> last lines it wrote to stderr
  const failedFiles = new Set();
  // A failure's block waits for the diagnostics of its test, which follow
  // its test:fail event.
  let pending = null;
  for await (const { type, data: d } of source) {
    if (pending) {
      const own = type === 'test:diagnostic' && d.nesting === pending.nesting && d.file === pending.file && d.line === pending.line;
      if (own) {
        pending.lines.push(`  # ${d.message}`);
        continue;
      }
      yield `${pending.lines.join('\n')}\n`;
      pending = null;
    }
    switch (type) {
      case 'test:start':
        names.length = d.nesting;
        names.push(d.name);
        break;
      case 'test:diagnostic':
        // The runner's closing counts; a passing test's notes are dropped.
        if (d.nesting === 0 && !d.file) yield `# ${d.message}\n`;
        break;
      case 'test:stderr': {
        const lines = stderr.get(d.file) ?? [];
        lines.push(...String(d.message).replace(/\n$/, '').split('\n'));
        stderr.set(d.file, lines.slice(-MAX_STDERR));
        break;
      }
      case 'test:pass':
        if (d.nesting === 0) {
          const skip = d.skip ? ` # SKIP ${d.skip === true ? '' : d.skip}` : d.todo ? ' # TODO' : '';
          yield `ok - ${path.basename(rel(d.file))} > ${d.name}${skip} (${((d.details?.duration_ms ?? 0) / 1000).toFixed(1)} s)\n`;
        }
        break;
      case 'test:fail': {
        const err = d.details?.error;
        const trail = [...names.slice(0, d.nesting), d.name].join(' > ');
        const file = path.basename(rel(d.file));
        if (d.file) failedFiles.add(d.file);
        // A known failure (todo) does not fail the run: one line says
        // that it still fails, and why.
        if (d.todo) {
          const cause = err?.cause ?? err;
          const first = String(cause?.message ?? cause ?? '').split('\n')[0];
          yield `todo - ${file} > ${trail} # TODO ${d.todo === true ? '' : d.todo}: still fails (${first})\n`;
          break;
        }
        // A suite or test whose subtests failed adds nothing to what those
        // subtests' blocks say.
        if (err?.failureType !== 'subtestsFailed') {
          pending = { nesting: d.nesting, file: d.file, line: d.line, lines: [`not ok - ${file} > ${trail}`, ...describeFailure(d)] };
        } else if (d.nesting === 0) {
          yield `not ok - ${file} > ${trail} (${err.message})\n`;
        }
        break;
      }
      default:
        break;
    }
  }
  if (pending) yield `${pending.lines.join('\n')}\n`;
  for (const f of failedFiles) {
    const lines = stderr.get(f);
    if (lines?.length) yield `# stderr of ${rel(f)} (last ${lines.length} lines):\n${lines.map((l) => `#   ${l}`).join('\n')}\n`;
  }
}
