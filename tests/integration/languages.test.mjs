// SPDX-License-Identifier: MIT
// The C, C++, Ruby, PHP, Go and Rust runner images (runners/<lang>/) through
// the real daemon, the real Docker engine and the official SDK client, under
// the daemon's default limits (256 MB, 0.5 CPU): each is listed with its
// version and libraries in list_runners and by name in run_code's description;
// hello world runs; a file uploaded to /data is read, with stdin, stdout,
// stderr and the exit code passed through untouched; a compile error (or a
// syntax error) is a `failed` result with the compiler's readable message on
// stderr, not an error of the tool; a runtime error is `failed` with the
// runtime's exit code; and the compilers take extra flags from the run's
// environment. A language whose image is not built is skipped, saying so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { callTool, describeRun, dockerApi, removeContainersOf, runCode, startSandboxDaemon, waitNoContainers } from './lib/sandbox.mjs';

const SLOW = process.env.MCPSD_SANITIZED ? 3 : 1;
// Compiling takes seconds at 0.5 CPU and more on a loaded machine: generous
// deadlines for liveness, never an assertion on time.
const RUN_TIMEOUT_S = 120;
const TEST_MS = 240_000 * SLOW;
const INPUT = 'alpha\nbeta\ngamma\n';

// Per language: the programs and what they must produce. `data` reads
// /data/input.txt (INPUT) and a line of stdin, prints `lines=3 bytes=17
// stdin=ping` to stdout and `to stderr` to stderr, and exits 3. `broken`
// does not compile (or parse): its stderr must match `compileError`.
// `crash` fails at run time with `crashExit` and stderr matching
// `crashError`. `flags` runs `flagsProgram` with the environment `flagsEnv`
// and must print `flagsOut`.
const LANGS = {
  c: {
    alias: null,
    hello: '#include <stdio.h>\nint main(void) { puts("hello from c"); return 0; }\n',
    data: `#include <stdio.h>
#include <string.h>
int main(void)
{
	char line[256], in[64];
	int n = 0;
	size_t bytes = 0;
	FILE *f = fopen("/data/input.txt", "r");
	if (!f) { perror("/data/input.txt"); return 1; }
	while (fgets(line, sizeof(line), f)) { n++; bytes += strlen(line); }
	fclose(f);
	if (!fgets(in, sizeof(in), stdin)) return 1;
	in[strcspn(in, "\\n")] = '\\0';
	printf("lines=%d bytes=%zu stdin=%s\\n", n, bytes, in);
	fprintf(stderr, "to stderr\\n");
	return 3;
}
`,
    broken: '#include <stdio.h>\nint main(void)\n{\n\tprintf("%d\\n", undeclared_name);\n}\n',
    compileError: /main\.c:4:\d+: error: .undeclared_name. undeclared/,
    // Division by zero: SIGFPE, reported as 128 + 8
    // (volatile: GCC may not fold the division away, as it does 1 / x).
    crash: '#include <stdio.h>\nint main(void)\n{\n\tvolatile int zero = 0;\n\tprintf("%d\\n", 100 / zero);\n\treturn 0;\n}\n',
    crashExit: 136,
    crashError: null,
    flagsEnv: { CFLAGS: '-DGREETING="flagged"' },
    flagsProgram: '#include <stdio.h>\nint main(void) { puts(GREETING); return 0; }\n',
    flagsOut: 'flagged\n',
  },
  cpp: {
    alias: 'c++',
    hello: '#include <iostream>\nint main() { std::cout << "hello from cpp" << std::endl; }\n',
    data: `#include <fstream>
#include <iostream>
#include <string>
int main()
{
	std::ifstream f("/data/input.txt");
	if (!f) { std::cerr << "cannot open /data/input.txt\\n"; return 1; }
	std::string line, in;
	int n = 0;
	std::size_t bytes = 0;
	while (std::getline(f, line)) { n++; bytes += line.size() + 1; }
	std::getline(std::cin, in);
	std::cout << "lines=" << n << " bytes=" << bytes << " stdin=" << in << "\\n";
	std::cerr << "to stderr\\n";
	return 3;
}
`,
    broken: '#include <iostream>\nint main()\n{\n\tstd::cout << undeclared_name;\n}\n',
    compileError: /main\.cpp:4:\d+: error: .undeclared_name. was not declared in this scope/,
    // An uncaught exception: std::terminate prints it, then abort (128 + 6).
    crash: '#include <stdexcept>\nint main()\n{\n\tthrow std::runtime_error("boom");\n}\n',
    crashExit: 134,
    crashError: /terminate called after throwing an instance of 'std::runtime_error'\s+what\(\):\s+boom/,
    flagsEnv: { CXXFLAGS: '-std=gnu++20' },
    flagsProgram: '#include <cstdio>\nint main() { std::printf("%ld\\n", __cplusplus); }\n',
    flagsOut: '202002\n',
  },
  ruby: {
    alias: 'rb',
    hello: 'puts "hello from ruby"\n',
    data: `lines = File.readlines("/data/input.txt")
input = $stdin.gets.chomp
puts "lines=#{lines.size} bytes=#{lines.sum(&:bytesize)} stdin=#{input}"
warn "to stderr"
exit 3
`,
    broken: 'puts "a"\ndef broken(\n',
    compileError: /main\.rb:\d+: syntax error/,
    crash: 'x = 0\nputs 1 / x\n',
    crashExit: 1,
    crashError: /main\.rb:2:in .\/.: divided by 0 \(ZeroDivisionError\)/,
  },
  php: {
    alias: null,
    hello: '<?php\necho "hello from php\\n";\n',
    data: `<?php
$lines = file("/data/input.txt");
$input = trim(fgets(STDIN));
$bytes = array_sum(array_map("strlen", $lines));
echo "lines=" . count($lines) . " bytes=$bytes stdin=$input\\n";
fwrite(STDERR, "to stderr\\n");
exit(3);
`,
    broken: '<?php\necho "a"\n$x = ;\n',
    // Without an opening tag PHP would echo the code: the runner adds one,
    // keeping line numbers.
    noTag: 'echo "no tag: ", 6 * 7, "\\n";\nundefined_function();\n',
    noTagOut: 'no tag: 42\n',
    noTagError: /Call to undefined function undefined_function\(\) in \S*main\.php:2/,
    compileError: /PHP Parse error: +syntax error, .* in \/sandbox\/main\.php on line 3/,
    crash: '<?php\n$x = 0;\necho 1 % $x;\n',
    crashExit: 255,
    crashError: /PHP Fatal error: +Uncaught DivisionByZeroError: Modulo by zero in \/sandbox\/main\.php:3/,
  },
  go: {
    alias: 'golang',
    hello: 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n',
    data: `package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	b, err := os.ReadFile("/data/input.txt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	in, _ := bufio.NewReader(os.Stdin).ReadString('\\n')
	fmt.Printf("lines=%d bytes=%d stdin=%s\\n", strings.Count(string(b), "\\n"), len(b), strings.TrimSpace(in))
	fmt.Fprintln(os.Stderr, "to stderr")
	os.Exit(3)
}
`,
    broken: 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println(undeclaredName)\n}\n',
    compileError: /main\.go:6:\d+: undefined: undeclaredName/,
    crash: 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tfmt.Println(1 / (len(os.Args) - 1))\n}\n',
    crashExit: 2,
    crashError: /panic: runtime error: integer divide by zero[\s\S]*\/sandbox\/main\.go:9/,
    flagsEnv: { GOFLAGS: '-ldflags=-X=main.greeting=flagged' },
    flagsProgram: 'package main\n\nimport "fmt"\n\nvar greeting = "default"\n\nfunc main() { fmt.Println(greeting) }\n',
    flagsOut: 'flagged\n',
  },
  rust: {
    alias: 'rs',
    hello: 'fn main() {\n    println!("hello from rust");\n}\n',
    data: `use std::io::BufRead;

fn main() {
    let text = std::fs::read_to_string("/data/input.txt").expect("/data/input.txt");
    let mut input = String::new();
    std::io::stdin().lock().read_line(&mut input).unwrap();
    println!("lines={} bytes={} stdin={}", text.lines().count(), text.len(), input.trim());
    eprintln!("to stderr");
    std::process::exit(3);
}
`,
    broken: 'fn main() {\n    let n: i32 = "text";\n    println!("{}", n);\n}\n',
    compileError: /error\[E0308\]: mismatched types\s+--> \/sandbox\/main\.rs:2:\d+/,
    crash: 'fn main() {\n    let d = std::env::args().count() - 1;\n    println!("{}", 1 / d);\n}\n',
    crashExit: 101,
    crashError: /panicked at 'attempt to divide by zero', \/sandbox\/main\.rs:3:\d+/,
    // Unoptimised by default (debug assertions on); RUSTFLAGS=-O turns them off.
    flagsEnv: { RUSTFLAGS: '-O' },
    flagsProgram: 'fn main() {\n    println!("{}", if cfg!(debug_assertions) { "debug" } else { "release" });\n}\n',
    flagsOut: 'release\n',
  },
};

/** Runner images on the engine by language: { lang: summary } or a reason. */
async function builtRunners() {
  try {
    const filters = encodeURIComponent(JSON.stringify({ label: ['sandbox.runner=true'] }));
    const r = await dockerApi('GET', `/images/json?filters=${filters}`);
    if (r.status !== 200) return { reason: `the Docker engine answered ${r.status} to GET /images/json` };
    const by = {};
    for (const img of r.json) {
      const lang = img.Labels?.['sandbox.language'];
      if (lang && (img.RepoTags ?? []).some((t) => t !== '<none>:<none>')) by[lang] ??= img;
    }
    return { by };
  } catch (e) {
    return { reason: `the Docker engine is not reachable (${e.message})` };
  }
}

const engine = await builtRunners();
const skipOf = (lang) =>
  engine.reason ??
  (engine.by[lang] ? false : `no runner image for ${lang} is built (runners/build.sh --only ${lang})`);
const anyBuilt = Object.keys(LANGS).some((l) => !skipOf(l));

let d;

before(async () => {
  if (!anyBuilt) return;
  d = await startSandboxDaemon({ name: 'languages' });
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

const run = (args) => runCode(d.client, { timeout_seconds: RUN_TIMEOUT_S, ...args }, { timeoutMs: TEST_MS });
const hasAnsi = (s) => /\x1b\[/.test(s);

describe('the new runners are listed with version and libraries', { skip: anyBuilt ? false : 'no new runner image is built' }, () => {
  test('list_runners and the run_code description name each built language', { timeout: 60_000 }, async () => {
    const { sc, text } = await callTool(d.client, 'list_runners', {});
    const { tools } = await d.client.listTools();
    const desc = tools.find((t) => t.name === 'run_code').description;
    for (const lang of Object.keys(LANGS)) {
      if (skipOf(lang)) continue;
      const r = sc.runners.find((x) => x.language === lang);
      assert.ok(r, `${lang} in list_runners: ${JSON.stringify(sc.runners.map((x) => x.language))}`);
      const labels = engine.by[lang].Labels;
      assert.match(r.version, /^\d+\.\d+(\.\d+)?$/, `${lang} version`);
      assert.equal(r.version, labels['sandbox.version']);
      assert.ok(r.libraries.length > 0, `${lang} has libraries: ${JSON.stringify(r)}`);
      for (const lib of r.libraries) assert.match(lib, /^\S+ \S+$/, `${lang} library "${lib}" is "name version"`);
      if (LANGS[lang].alias) assert.ok(r.aliases.includes(LANGS[lang].alias), `${lang} aliases ${r.aliases}`);
      // run_code's description (in every conversation's tools/list) names
      // the language with its summary; the version, libraries and code file
      // are list_runners' (issue 22: tools/list within 6,000 characters).
      assert.ok(desc.includes(`\n- ${lang}: `), `run_code description lists ${lang}`);
      assert.ok(text.includes(`\n- ${lang} ${r.version}`), `list_runners lists ${lang} ${r.version}`);
      assert.ok(text.includes(`Libraries: ${r.libraries.join(', ')}`), `list_runners lists ${lang}'s libraries`);
      assert.ok(text.includes(`/sandbox/${r.filename}`), `list_runners names /sandbox/${r.filename}`);
    }
  });
});

for (const [lang, t] of Object.entries(LANGS)) {
  describe(lang, { skip: skipOf(lang) }, () => {
    const conv = `lang-${lang}-${process.pid}`;

    test('hello world', { timeout: TEST_MS }, async () => {
      const r = await run({ conversationId: conv, language: lang, code: t.hello });
      assert.equal(r.sc.status, 'completed', describeRun(r));
      assert.equal(r.result.isError, false);
      assert.equal(r.sc.exit_code, 0);
      assert.equal(r.sc.stdout, `hello from ${lang}\n`);
      // A clean program compiles without a word on stderr.
      assert.equal(r.sc.stderr, '', describeRun(r));
      assert.equal(r.sc.language, lang);
      // Nothing of the build lands in /data.
      assert.deepEqual(r.sc.files ?? [], [], describeRun(r));
    });

    test('reads an uploaded file from /data; stdin, stdout, stderr and the exit code pass through', { timeout: TEST_MS }, async () => {
      const up = await callTool(d.client, 'upload_file', { conversationId: conv, filename: 'input.txt', text: INPUT, overwrite: true });
      assert.ok(!up.result.isError, up.text);
      const r = await run({ conversationId: conv, language: t.alias ?? lang, code: t.data, stdin: 'ping\n' });
      assert.equal(r.sc.language, lang, 'the alias resolves to the language');
      assert.equal(r.sc.status, 'failed', describeRun(r));
      assert.equal(r.sc.exit_code, 3, describeRun(r));
      assert.equal(r.sc.stdout, `lines=3 bytes=${INPUT.length} stdin=ping\n`, describeRun(r));
      assert.equal(r.sc.stderr, 'to stderr\n', describeRun(r));
    });

    test(t.flagsEnv ? 'a compile error is a failed run with the message on stderr' : 'a syntax error is a failed run with the message on stderr', { timeout: TEST_MS }, async () => {
      const r = await run({ conversationId: conv, language: lang, code: t.broken });
      assert.equal(r.sc.status, 'failed', describeRun(r));
      assert.equal(r.result.isError, true);
      assert.ok(Number.isInteger(r.sc.exit_code) && r.sc.exit_code !== 0, describeRun(r));
      assert.equal(r.sc.stdout, '', describeRun(r));
      assert.match(r.sc.stderr, t.compileError, describeRun(r));
      assert.ok(!hasAnsi(r.sc.stderr), `no colour codes: ${JSON.stringify(r.sc.stderr)}`);
      assert.match(r.text, /status: failed/);
    });

    test('a runtime error is a failed run with a non-zero exit code', { timeout: TEST_MS }, async () => {
      const r = await run({ conversationId: conv, language: lang, code: t.crash });
      assert.equal(r.sc.status, 'failed', describeRun(r));
      assert.equal(r.result.isError, true);
      assert.equal(r.sc.exit_code, t.crashExit, describeRun(r));
      if (t.crashError) assert.match(r.sc.stderr, t.crashError, describeRun(r));
      assert.ok(!hasAnsi(r.sc.stderr));
    });

    if (t.noTag) {
      test('code without the opening <?php tag runs, with its own line numbers', { timeout: TEST_MS }, async () => {
        const r = await run({ conversationId: conv, language: lang, code: t.noTag });
        assert.equal(r.sc.status, 'failed', describeRun(r));
        assert.equal(r.sc.stdout, t.noTagOut, describeRun(r));
        assert.match(r.sc.stderr, t.noTagError, describeRun(r));
      });
    }

    if (t.flagsEnv) {
      test(`takes extra compiler flags from ${Object.keys(t.flagsEnv)[0]} in environment`, { timeout: TEST_MS }, async () => {
        const r = await run({ conversationId: conv, language: lang, code: t.flagsProgram, environment: t.flagsEnv });
        assert.equal(r.sc.status, 'completed', describeRun(r));
        assert.equal(r.sc.stdout, t.flagsOut, describeRun(r));
      });
    }
  });
}
