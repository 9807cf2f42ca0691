// SPDX-License-Identifier: MIT
// What tools/list costs every conversation (issue 22): the names,
// descriptions and input schemas a client hands to a model must stay within
// 6,000 characters with all nine runner languages discovered, in the
// largest configuration (warm sessions, network allowed, packages on), and
// must still carry what a model needs to choose and call right: every
// language by name (and its aliases in the enum), the state semantics of a
// warm session, the limits, where files go; list_runners gives each
// language's version, libraries and code file. The output schemas are
// counted apart and are not trimmed. Real daemon, real engine, real SDK
// client; a machine without all nine runner images skips, saying which.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { callTool, dockerApi, startSandboxDaemon } from './lib/sandbox.mjs';

const LIMIT = 6000;
const NINE = ['bash', 'c', 'cpp', 'go', 'php', 'python', 'ruby', 'rust', 'typescript'];

/** What reaches a model: name + description + input schema (compact JSON). */
function modelChars(tools) {
  let n = 0;
  for (const t of tools) n += t.name.length + (t.description ?? '').length + JSON.stringify(t.inputSchema).length;
  return n;
}

async function builtLanguages() {
  try {
    const q = encodeURIComponent(JSON.stringify({ label: ['sandbox.runner=true'] }));
    const r = await dockerApi('GET', `/images/json?filters=${q}`);
    return { langs: new Set(r.json.map((i) => i.Labels?.['sandbox.language']).filter(Boolean)) };
  } catch (e) {
    return { reason: `the Docker engine is not reachable (${e.message})` };
  }
}

const built = await builtLanguages();
const missing = built.reason ? [] : NINE.filter((l) => !built.langs.has(l));
const skip = built.reason ?? (missing.length ? `runner images not built: ${missing.join(', ')} (runners/build.sh)` : false);

const CONFIGS = [
  ['warm sessions, network allowed', { SANDBOX_WARM: 'true', SANDBOX_POOL_SIZE: '0', SANDBOX_ALLOW_NETWORK: 'true' }],
  ['one-off runs, network allowed', { SANDBOX_WARM: 'false', SANDBOX_ALLOW_NETWORK: 'true' }],
];

for (const [name, env] of CONFIGS) {
  describe(`tools/list, ${name}`, { skip }, () => {
    let d;
    before(async () => {
      d = await startSandboxDaemon({ name: 'toollist', env });
    });
    after(async () => {
      await d?.client?.close().catch(() => {});
      const ex = await d?.stop('SIGTERM');
      if (ex) assert.deepEqual(ex, { code: 0, sig: null }, `a clean exit; log ${d.logPath}`);
    });

    test(`names, descriptions and input schemas stay within ${LIMIT} characters with all nine languages`, { timeout: 60_000 }, async () => {
      const { tools } = await d.client.listTools();
      const rc = tools.find((t) => t.name === 'run_code');
      for (const l of NINE) assert.ok(rc.inputSchema.properties.language.enum.includes(l), `${l} in the language enum`);
      const n = modelChars(tools);
      const out = tools.reduce((a, t) => a + (t.outputSchema ? JSON.stringify(t.outputSchema).length : 0), 0);
      const per = tools.map((t) => `${t.name} ${t.name.length + (t.description ?? '').length + JSON.stringify(t.inputSchema).length}`).join(', ');
      console.log(`# tools/list (${name}): ${n} characters to a model (${per}); output schemas ${out} apart`);
      assert.ok(n <= LIMIT, `tools/list carries ${n} characters of names, descriptions and input schemas (limit ${LIMIT}): ${per}`);
    });

    test('it still says what a model needs to choose and call right', { timeout: 60_000 }, async () => {
      const { tools } = await d.client.listTools();
      const by = Object.fromEntries(tools.map((t) => [t.name, t]));
      const rc = by.run_code;
      const desc = rc.description;
      // Every language by its name, each on a line of its own with what it
      // offers; the aliases are in the enum the client validates against.
      for (const l of NINE) assert.match(desc, new RegExp(`\\n- ${l.replace('+', '\\+')}: \\S`), `${l} listed with a summary`);
      for (const a of ['py', 'javascript', 'js', 'sh', 'c++', 'golang', 'rs', 'rb']) assert.ok(rc.inputSchema.properties.language.enum.includes(a), `alias ${a} in the enum`);
      assert.match(desc, /numpy, pandas, matplotlib/, 'the Python line names its libraries');
      assert.match(desc, /list_runners/, 'the description points to list_runners for the details');
      // Where files go, limits, network.
      assert.match(desc, /\/data, the working directory,( which)? belongs to the (conversation|chat)/);
      assert.match(desc, /Limits per run: \d+ MB memory[^.]*, [\d.]+ CPU, \d+ s, \d+ processes, \d+ MB \/tmp, output up to \d+ MB/);
      assert.match(desc, /No network unless network: true/);
      assert.match(desc, /unique to one chat|Each chat \(conversationId\)/);
      const p = rc.inputSchema.properties;
      assert.equal(p.timeout_seconds.maximum > p.timeout_seconds.default, true, 'timeout_seconds carries its default and maximum');
      assert.ok(p.memory_mb.maximum && p.cpus.maximum, 'memory_mb and cpus carry their maximum');
      assert.match(p.conversationId.description, /omit/i);
      if (env.SANDBOX_WARM === 'true') {
        // The state semantics of a warm session.
        assert.match(desc, /warm session per language/);
        assert.match(desc, /Python(, R and TypeScript\/JavaScript| and R)? keeps? variables, imports and loaded data between calls/);
        assert.match(desc, /session\.state says new, continued,? (restored \(saved state back\) )?or restarted/);
        assert.match(desc, /one-off, without the session's state/);
        assert.deepEqual(p.session.enum, ['continue', 'new']);
      }
      // list_runners has the details run_code's description leaves out.
      const { sc, text } = await callTool(d.client, 'list_runners', {});
      for (const l of NINE) {
        const r = sc.runners.find((x) => x.language === l);
        assert.ok(r, `${l} in list_runners`);
        assert.ok(text.includes(`\n- ${l} ${r.version}`), `list_runners' text gives ${l} ${r.version}`);
        assert.ok(text.includes(`Libraries: ${r.libraries.join(', ')}`), `list_runners' text gives ${l}'s libraries`);
        assert.ok(text.includes(`/sandbox/${r.filename}`), `list_runners' text gives /sandbox/${r.filename}`);
      }
      // The output schema is exact, not trimmed: run_code's still describes
      // every field a result carries.
      for (const f of ['status', 'exit_code', 'stdout', 'stderr', 'files', 'session', 'value', 'conversationId'])
        assert.ok(rc.outputSchema.properties[f], `run_code's output schema has ${f}`);
    });
  });
}
