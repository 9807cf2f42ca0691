// SPDX-License-Identifier: MIT
// The default pool (SANDBOX_POOL_LANGUAGES=*): every installed language gets
// a pre-started box, so the first call of a conversation in any language,
// compiled ones included, claims a running box instead of starting one.
// The other tests' daemons pool three languages (lib/daemon.mjs); this one
// takes the daemon's own default. What the pool costs in memory and time
// is measured by tests/bench (poolmem, first), not asserted here.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SLOW, conv, expectStatus, run, startWarm, stopWarm, waitWarm } from './lib/warm.mjs';

const T = 300_000 * SLOW; // nine box starts, Python's with its preloads

const HELLO = {
  bash: ['echo hello', 'hello\n'],
  c: ['#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n', 'hello\n'],
  go: ['package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n', 'hello\n'],
  php: ['<?php echo "hello\\n";', 'hello\n'],
  ruby: ['puts "hello"', 'hello\n'],
  rust: ['fn main() { println!("hello"); }\n', 'hello\n'],
};

describe('the default pool: every installed language', () => {
  let d;
  before(async () => {
    // undefined: spawn leaves the variable out, so the default applies.
    d = await startWarm({ name: 'pool-all', pool: true, env: { SANDBOX_POOL_LANGUAGES: undefined } });
  });
  after(async () => {
    await stopWarm(d);
  });

  test('a pool box per runner, and a first call in each language claims one', { timeout: T }, async () => {
    const runners = (await d.health()).runs.runners;
    assert.ok(runners >= 2, `runners installed: ${runners}`);
    await waitWarm(d, (w) => w.pool >= runners, 240_000 * SLOW, `${runners} pool boxes, one per runner`);
    const { structuredContent: sc } = await d.client.callTool({ name: 'list_runners', arguments: {} });
    const langs = sc.runners.map((r) => r.language).filter((l) => HELLO[l]);
    assert.ok(langs.length > 0, `a language with a hello world among ${JSON.stringify(sc.runners.map((r) => r.language))}`);
    for (const lang of langs) {
      const r = await run(d.client, conv(`pool-${lang}`), lang, HELLO[lang][0]);
      expectStatus(r, 'completed');
      assert.equal(r.sc.stdout, HELLO[lang][1], `${lang}'s output`);
      assert.equal(r.sc.session?.from_pool, true, `${lang}'s first call came from the pool: ${JSON.stringify(r.sc.session)}`);
    }
  });
});
