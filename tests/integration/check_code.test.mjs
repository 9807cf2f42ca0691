// SPDX-License-Identifier: MIT
// check_code through the real daemon, the real Docker engine, the nine
// runner images and the official SDK client (which validates
// structuredContent against the published output schema): for each
// language, a program with a syntax error at a known line is reported with
// that line and a message, in structuredContent and at the start of the
// text; a good program is ok; and the code is never run: a program that
// would write a file to /data and then sleep for a minute checks in far
// less than its sleep (the check's 30 s limit would otherwise end it as an
// error) and leaves /data empty. A language whose image is not built, or
// built without a sandbox.check label, is skipped, saying so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { callTool, dockerApi, removeContainersOf, startSandboxDaemon, waitNoContainers } from './lib/sandbox.mjs';
import { boxesOf, startWarm, stopWarm, until, waitPool } from './lib/warm.mjs';

const SLOW = process.env.MCPSD_SANITIZED ? 3 : 1;
const TEST_MS = 180_000 * SLOW;
const CONV = 'check-code';

// bad: a syntax error on line `line` (as the checkers of the runner images
// place it); good: writes /data/ran-<lang>.txt,
// then sleeps 60 s (it must never run).
const LANGS = {
  python: {
    bad: 'a = 1\nb = 2\nif a == b\n    print(a)\n',
    line: 3,
    good: "import time\nopen('/data/ran-python.txt', 'w').write('x')\ntime.sleep(60)\n",
  },
  typescript: {
    bad: 'const a: number = 1;\nconst b = 2;\nlet c = ;\nconsole.log(a, b, c);\n',
    line: 3,
    good: 'import { writeFileSync } from "node:fs";\nwriteFileSync("/data/ran-typescript.txt", "x");\nawait Bun.sleep(60_000);\n',
  },
  javascript: {
    image: 'typescript',
    bad: 'const a = 1;\nconst b = (a + 2;\nconsole.log(b);\n',
    line: 2,
    good: 'const fs = require("node:fs");\nfs.writeFileSync("/data/ran-javascript.txt", "x");\nAtomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);\n',
  },
  bash: {
    bad: 'echo a\necho b\n)\necho c\n',
    line: 3,
    good: 'echo x > /data/ran-bash.txt\nsleep 60\n',
  },
  c: {
    bad: '#include <stdio.h>\nint main(void)\n{\n\tint x = 1 +;\n\treturn x;\n}\n',
    line: 4,
    good: '#include <stdio.h>\n#include <unistd.h>\nint main(void)\n{\n\tFILE *f = fopen("/data/ran-c.txt", "w");\n\tif (f) fclose(f);\n\tsleep(60);\n\treturn 0;\n}\n',
  },
  cpp: {
    bad: '#include <iostream>\nint main()\n{\n\tint x = 1 +;\n\tstd::cout << x;\n}\n',
    line: 4,
    good: '#include <fstream>\n#include <thread>\n#include <chrono>\nint main()\n{\n\tstd::ofstream("/data/ran-cpp.txt") << "x";\n\tstd::this_thread::sleep_for(std::chrono::seconds(60));\n}\n',
  },
  go: {
    bad: 'package main\n\nfunc main() {\n\tx := 1 + )\n\t_ = x\n}\n',
    line: 4,
    good: 'package main\n\nimport (\n\t"os"\n\t"time"\n)\n\nfunc main() {\n\t_ = os.WriteFile("/data/ran-go.txt", []byte("x"), 0o644)\n\ttime.Sleep(60 * time.Second)\n}\n',
  },
  rust: {
    bad: 'fn main() {\n    let a = 1;\n    let b = a +;\n    println!("{}", b);\n}\n',
    line: 3,
    good: 'use std::{fs, thread, time};\nfn main() {\n    let _ = fs::write("/data/ran-rust.txt", "x");\n    thread::sleep(time::Duration::from_secs(60));\n}\n',
  },
  ruby: {
    bad: 'a = 1\nb = 2\ndef f(\nputs a\n',
    line: 4, // Ruby 3.1 names where the unclosed parameter list ends
    good: "File.write('/data/ran-ruby.txt', 'x')\nsleep 60\n",
  },
  php: {
    bad: '<?php\n$a = 1;\n$b = ;\necho $a;\n',
    line: 3,
    good: "<?php\nfile_put_contents('/data/ran-php.txt', 'x');\nsleep(60);\n",
  },
  'php without its opening tag': {
    lang: 'php',
    image: 'php',
    bad: '$a = 1;\n$b = ;\necho $a;\n',
    line: 2,
    good: "file_put_contents('/data/ran-php2.txt', 'x');\nsleep(60);\n",
  },
};

/** Runner images by language, with their labels (read-only engine view). */
async function builtRunners() {
  try {
    const filters = encodeURIComponent(JSON.stringify({ label: ['sandbox.runner=true'] }));
    const r = await dockerApi('GET', `/images/json?filters=${filters}`);
    if (r.status !== 200) return { reason: `the Docker engine answered ${r.status}` };
    const by = {};
    for (const img of r.json) {
      const lang = img.Labels?.['sandbox.language'];
      if (!lang || !(img.RepoTags ?? []).some((t) => t !== '<none>:<none>')) continue;
      // The newest image of a language wins (equal priorities).
      if (!by[lang] || img.Created > by[lang].Created) by[lang] = img;
    }
    return { by };
  } catch (e) {
    return { reason: `the Docker engine is not reachable (${e.message})` };
  }
}

const engine = await builtRunners();
const skipOf = (name) => {
  const image = LANGS[name].image ?? name;
  if (engine.reason) return engine.reason;
  const img = engine.by[image];
  if (!img) return `no runner image for ${image} is built (runners/build.sh --only ${image})`;
  if (!img.Labels?.['sandbox.check']) return `the ${image} image has no sandbox.check label (rebuild: runners/build.sh --only ${image})`;
  return false;
};
const anyBuilt = Object.keys(LANGS).some((l) => !skipOf(l));

let d;

before(async () => {
  if (!anyBuilt) return;
  d = await startSandboxDaemon({ name: 'check' });
});

after(async () => {
  if (!d) return;
  await d.client?.close().catch(() => {});
  const died = d.exited;
  let stopped;
  let left = [];
  try {
    if (!died) stopped = await d.stop('SIGTERM');
    left = await waitNoContainers(d.instance, { timeoutMs: 5000 });
  } finally {
    await removeContainersOf(d.instance).catch(() => {});
  }
  assert.equal(died, null, `the daemon died during the tests; log ${d.logPath}`);
  assert.deepEqual(stopped, { code: 0, sig: null }, 'a clean SIGTERM exit');
  assert.deepEqual(left.map((c) => c.Id.slice(0, 12)), [], 'no container of this daemon is left');
});

const check = (language, code) =>
  callTool(d.client, 'check_code', { conversationId: CONV, language, code }, { timeoutMs: TEST_MS });
const show = (r) => JSON.stringify({ sc: r.sc, text: r.text.slice(0, 800) });

describe('check_code is listed', { skip: anyBuilt ? false : 'no runner image with sandbox.check is built' }, () => {
  test('tools/list has check_code, read-only, naming the checkable languages', { timeout: 60_000 }, async () => {
    const { tools } = await d.client.listTools();
    const t = tools.find((x) => x.name === 'check_code');
    assert.ok(t, `check_code in ${tools.map((x) => x.name)}`);
    assert.equal(t.annotations?.readOnlyHint, true);
    assert.deepEqual(t.inputSchema.required, ['language', 'code']);
    for (const name of Object.keys(LANGS)) {
      if (skipOf(name) || LANGS[name].image) continue;
      assert.match(t.description, new RegExp(`\\b${name}\\b`), `${name} in the description`);
    }
  });

  test('an unknown language and missing code are refused with what to do', { timeout: 60_000 }, async () => {
    let r = await check('cobol', 'DISPLAY "x".');
    assert.equal(r.result.isError, true);
    assert.match(r.text, /no runner for language 'cobol'; available: /);
    r = await callTool(d.client, 'check_code', { language: 'python' });
    assert.equal(r.result.isError, true);
    assert.match(r.text, /code is required/);
  });
});

for (const [name, t] of Object.entries(LANGS)) {
  const lang = t.lang ?? name;
  describe(`check_code ${name}`, { skip: skipOf(name) }, () => {
    test('a syntax error is found at its line', { timeout: TEST_MS }, async () => {
      const r = await check(lang, t.bad);
      assert.notEqual(r.result.isError, true, show(r));
      assert.equal(r.sc.ok, false, show(r));
      assert.equal(r.sc.language, t.image ?? lang);
      assert.ok(r.sc.errors.length >= 1, show(r));
      const e = r.sc.errors[0];
      assert.equal(e.line, t.line, show(r));
      assert.ok(e.message.length > 0, show(r));
      if (e.column !== undefined) assert.ok(Number.isInteger(e.column) && e.column >= 1, show(r));
      assert.ok(r.text.startsWith(`Line ${e.line}`), show(r));
      assert.ok(r.text.includes(e.message), show(r));
      assert.match(r.sc.checker, /\S+ \(\S+ [0-9]/, show(r));
    });

    test('a good program is ok and is never run', { timeout: TEST_MS }, async () => {
      const r = await check(lang, t.good);
      assert.notEqual(r.result.isError, true, show(r));
      assert.equal(r.sc.ok, true, show(r));
      assert.deepEqual(r.sc.errors, []);
      assert.match(r.text, /^No syntax errors/);
      const files = await callTool(d.client, 'list_files', { conversationId: CONV });
      const names = JSON.stringify(files.sc ?? files.text);
      assert.ok(!/ran-/.test(names), `nothing written to /data: ${names}`);
    });
  });
}

describe('check_code never runs code', { skip: skipOf('typescript') }, () => {
  test('a Bun macro, which runs at bundle time, is not run', { timeout: TEST_MS }, async () => {
    const code =
      'import { execSync } from "node:child_process" with { type: "macro" };\n' +
      'execSync("echo MACRO-RAN >&2; sleep 60");\nconst y = 1;\n';
    const r = await check('typescript', code);
    assert.notEqual(r.result.isError, true, show(r));
    assert.ok(!/MACRO-RAN/.test(JSON.stringify(r.sc)) && !/MACRO-RAN/.test(r.text), show(r));
    assert.equal(r.sc.ok, false, 'macros are refused, not run');
    assert.match(r.sc.errors[0].message, /[Mm]acro/, show(r));
  });
});

describe('check_code from the pool', { skip: skipOf('python') || skipOf('bash') }, () => {
  let p;
  before(async () => {
    p = await startWarm({ name: 'check-pool', pool: true, env: { MCP_LOG_LEVEL: 'debug' } });
  });
  after(() => stopWarm(p));

  test('a ready pool box checks the code (its kernel ended, no workspace) and is replaced; the results are the same', { timeout: TEST_MS }, async () => {
    for (const name of ['python', 'bash']) {
      const t = LANGS[name];
      await waitPool(p);
      const ids = new Set((await boxesOf(p)).map((b) => b.Id));
      const bad = await callTool(p.client, 'check_code', { conversationId: CONV, language: name, code: t.bad }, { timeoutMs: TEST_MS });
      assert.equal(bad.sc.ok, false, show(bad));
      assert.equal(bad.sc.errors[0].line, t.line, show(bad));
      await waitPool(p);
      for (const b of await boxesOf(p)) ids.add(b.Id);
      const good = await callTool(p.client, 'check_code', { conversationId: CONV, language: name, code: t.good }, { timeoutMs: TEST_MS });
      assert.equal(good.sc.ok, true, show(good));
      // Both took pool boxes (the daemon says so at debug level), which
      // are gone once the check is over; no workspace was made for them.
      const said = () => (readFileSync(p.logPath, 'utf8').match(new RegExp(`one-off ${name} check in pool box`, 'g')) ?? []).length;
      await until(async () => said() >= 2, 5000 * SLOW);
      assert.equal(said(), 2, `two ${name} checks from the pool (${p.logPath})`);
      const gone = await until(async () => {
        const now = new Set((await boxesOf(p)).map((b) => b.Id));
        return [...ids].filter((id) => !now.has(id)).length >= 2;
      }, 15_000 * SLOW);
      assert.ok(gone, 'the checks\' pool boxes were removed');
    }
    const files = await callTool(p.client, 'list_files', { conversationId: CONV });
    assert.ok(!/ran-/.test(JSON.stringify(files.sc ?? files.text)), 'nothing ran');
  });
});
