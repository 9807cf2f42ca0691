// SPDX-License-Identifier: MIT
// R through the real MCP endpoint with the official SDK client, against the
// real engine and the R runner image (runners/r, built by runners/build.sh):
// hello world, a file from /data, a syntax error, a runtime error with R's
// message and a traceback, a data frame kept across calls of the warm
// session (kernel.R, named by the image's sandbox.kernel label), the last
// value shown as the console prints it, a ggplot figure returned as a PNG
// image, warnings, and check_code (parse() without running). Durable R
// sessions (SANDBOX_STATE): a data frame, a function and the attached
// packages come back after the box is removed, connections are named as
// not saved, rewind_to, fork_from, session "new" and quit() dropping the
// save, and the size cap.
//
// The R image must be installed: tests/run.sh builds every runner image, so
// a missing image is a failure here, not a skip.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { describeRun } from './lib/sandbox.mjs';
import { callTool, dockerApi } from './lib/sandbox.mjs';
import { sleep } from './lib/daemon.mjs';
import { SLOW, boxesOf, conv, expectSession, expectStatus, run, startWarm, stopWarm, until } from './lib/warm.mjs';

const T = 240_000 * SLOW; // per test: generous, the machine is shared
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const r = (client, c, code, extra) => run(client, c, 'r', code, extra);

describe('R runner', () => {
  let d;
  const c1 = conv('r');

  before(async () => {
    const filters = encodeURIComponent(JSON.stringify({ label: ['sandbox.language=r'] }));
    const images = await dockerApi('GET', `/images/json?filters=${filters}`);
    assert.ok(
      Array.isArray(images.json) && images.json.length > 0,
      'the R runner image is installed (runners/build.sh --only r builds it)',
    );
    d = await startWarm({ name: 'r-runner' });
  });
  after(() => stopWarm(d));

  test('list_runners shows R with its version, libraries and kernel', { timeout: T }, async () => {
    const l = await callTool(d.client, 'list_runners', {});
    const text = JSON.stringify(l.sc ?? l.text);
    assert.match(text, /"r"/, text.slice(0, 2000));
    assert.match(text, /ggplot2/, 'the libraries are listed');
  });

  test('hello world, and the alias R', { timeout: T }, async () => {
    const h = await r(d.client, conv('r-hello'), 'cat("hello from R\\n")');
    expectStatus(h, 'completed');
    assert.equal(h.sc.stdout, 'hello from R\n');
    assert.equal(h.sc.session.stateful, true, JSON.stringify(h.sc.session));
    const a = await run(d.client, conv('r-alias'), 'R', 'cat(R.version$major, "\\n")');
    expectStatus(a, 'completed');
    assert.equal(a.sc.stdout, '4 \n');
  });

  test('a data frame is kept across calls; the last value is printed like the console', { timeout: T }, async () => {
    const up = await callTool(d.client, 'upload_file', {
      conversationId: c1,
      filename: 'sales.csv',
      text: 'region,amount\nnorth,10\nsouth,32\nnorth,5\n',
      overwrite: true,
    });
    assert.ok(!up.result.isError, up.text);
    const r1 = await r(
      d.client,
      c1,
      'library(dplyr)\nsales <- read.csv("/data/sales.csv")\ntotals <- sales |> group_by(region) |> summarise(total = sum(amount))\ncat("rows", nrow(sales), "\\n")',
    );
    expectStatus(r1, 'completed');
    expectSession(r1, 'new');
    assert.equal(r1.sc.stdout, 'rows 3 \n');
    assert.equal(r1.sc.value, undefined, 'cat() returns NULL invisibly: no value');

    const r2 = await r(d.client, c1, 'as.data.frame(totals)');
    expectStatus(r2, 'completed');
    expectSession(r2, 'continued');
    assert.match(r2.sc.value['text/plain'], /region total\n1\s+north\s+15\n2\s+south\s+32/, describeRun(r2));

    // Visible values before the last one are printed to stdout, as Rscript does.
    const r3 = await r(d.client, c1, 'nrow(sales)\nx <- 2\nsum(sales$amount) * x');
    expectStatus(r3, 'completed');
    assert.equal(r3.sc.stdout, '[1] 3\n');
    assert.deepEqual(r3.sc.value, { 'text/plain': '[1] 94' });
  });

  test('a syntax error runs nothing and says where', { timeout: T }, async () => {
    const c = conv('r-syntax');
    const s = await r(d.client, c, 'cat("before\\n")\nf <- function( {\n');
    expectStatus(s, 'failed');
    assert.equal(s.sc.stdout, '', 'nothing ran');
    assert.match(s.sc.stderr, /main\.R:2:\d+: unexpected/, describeRun(s));
  });

  test("a runtime error gives R's message and the user's calls; the state survives", { timeout: T }, async () => {
    const c = conv('r-error');
    const s = await r(d.client, c, 'keep <- 7\ninner <- function(v) stop("bad value: ", v)\nouter <- function() inner(3)\nouter()\ncat("never\\n")');
    expectStatus(s, 'failed');
    assert.doesNotMatch(s.sc.stdout, /never/);
    assert.match(s.sc.stderr, /Error in inner\(3\) : bad value: 3/, describeRun(s));
    assert.match(s.sc.stderr, /2: inner\(3\) at main\.R#3\n1: outer\(\)/, describeRun(s));
    assert.doesNotMatch(s.sc.stderr, /kernel\.R|\.mcpsd_top|withCallingHandlers/, 'no kernel frames');

    const w = await r(d.client, c, 'as.integer("x")\nkeep + 1');
    expectStatus(w, 'completed');
    expectSession(w, 'continued');
    assert.deepEqual(w.sc.value, { 'text/plain': '[1] 8' });
    // At the top level R names no call, as the console does.
    assert.match(w.sc.stderr, /^Warning message:\nNAs introduced by coercion\n/, describeRun(w));
  });

  test('a ggplot comes back as a PNG image; base graphics too', { timeout: T }, async () => {
    const c = conv('r-plot');
    const g = await r(d.client, c, 'library(ggplot2)\ndf <- data.frame(x = 1:10, y = (1:10)^2)\nggplot(df, aes(x, y)) + geom_line()');
    expectStatus(g, 'completed');
    const figs = (g.sc.files ?? []).filter((f) => /^figure-\d+-1\.png$/.test(f.name));
    assert.equal(figs.length, 1, `one figure file: ${JSON.stringify(g.sc.files)}`);
    const img = g.result.content.find((x) => x.type === 'image');
    assert.ok(img, `an image content item: ${JSON.stringify(g.result.content.map((x) => x.type))}`);
    assert.equal(img.mimeType, 'image/png');
    assert.ok(Buffer.from(img.data, 'base64').subarray(0, 8).equals(PNG_MAGIC), 'the image is a PNG');
    assert.equal(g.sc.value, undefined, 'a drawn plot has no text value');

    // Two pages of base graphics: two figures; none when nothing is drawn.
    const b = await r(d.client, c, 'plot(1:3)\nhist(df$y)\ninvisible(NULL)');
    expectStatus(b, 'completed');
    const names = (b.sc.files ?? []).map((f) => f.name).filter((n) => n.startsWith('figure-')).sort();
    assert.equal(names.length, 2, JSON.stringify(b.sc.files));
    const n = await r(d.client, c, 'mean(df$y)');
    expectStatus(n, 'completed');
    assert.equal((n.sc.files ?? []).filter((f) => f.name.startsWith('figure-')).length, 0);
    assert.deepEqual(n.sc.value, { 'text/plain': '[1] 38.5' });
  });

  test('quit() ends the session; the next call starts a fresh one', { timeout: T }, async () => {
    const c = conv('r-quit');
    const a = await r(d.client, c, 'z <- 1\ncat("bye\\n")\nquit(status = 3)');
    assert.match(a.sc.stdout, /bye/, describeRun(a));
    const b = await r(d.client, c, 'exists("z")');
    expectStatus(b, 'completed');
    assert.deepEqual(b.sc.value, { 'text/plain': '[1] FALSE' });
  });

  test('check_code parses R without running it', { timeout: T }, async () => {
    const good = await callTool(d.client, 'check_code', { conversationId: c1, language: 'r', code: 'x <- 1\nstop("not run")\n' });
    assert.equal(good.sc.ok, true, JSON.stringify(good.sc));
    const bad = await callTool(d.client, 'check_code', { conversationId: c1, language: 'r', code: 'x <- function( {\n' });
    assert.equal(bad.sc.ok, false, JSON.stringify(bad.sc));
    assert.match(JSON.stringify(bad.sc), /unexpected/);
  });
});

// Durable R sessions (docs/sessions.md, issues 21 and 23): kernel.R saves
// the global environment after each run, when idle, and a new box loads
// it back with its packages attached again.
describe('durable R sessions', () => {
  let d;
  const STATE = { SANDBOX_STATE: 'true', SANDBOX_STATE_KEEP: '4', SANDBOX_STATE_MAX_MB: '1' };

  before(async () => {
    d = await startWarm({ name: 'r-durable', env: STATE });
  });
  after(() => stopWarm(d));

  /** Asserts r restored the state saved after run `run`, for why. */
  function expectRestored(res, why, runNo) {
    expectStatus(res, 'completed');
    expectSession(res, 'restored', why);
    const rs = res.sc.session.restored;
    assert.equal(rs.kind, 'restore', JSON.stringify(rs));
    if (runNo !== undefined) assert.equal(rs.run, runNo, JSON.stringify(rs));
    assert.ok(Date.parse(rs.saved_at) <= Date.now() + 1000, rs.saved_at);
    assert.match(res.text, /^(conversationId: .*\n)?NOTE: the R state of this conversation was restored/, res.text.slice(0, 400));
    return rs;
  }

  /** Removes the daemon's R boxes (the conversation's among them: the
   * tests run one at a time) the way a crash or an operator would. */
  async function removeBox() {
    const boxes = (await boxesOf(d)).filter((b) => b.Labels?.['sandbox.language'] === 'r');
    assert.ok(boxes.length >= 1, 'the conversation has a box');
    for (const b of boxes) {
      const rm = await dockerApi('DELETE', `/containers/${b.Id}?force=true`);
      assert.ok(rm.status < 300, `removed: ${rm.status}`);
    }
  }

  test('a data frame, a function and the attached packages survive the box being removed; a connection is named', { timeout: T }, async () => {
    const c = conv('r-dur');
    const r1 = await r(
      d.client,
      c,
      'library(dplyr)\nsales <- data.frame(region = c("north", "south", "north"), amount = c(10, 32, 5))\n' +
        'twice <- function(v) 2 * v\ncon <- file("/tmp/log.txt", "w")\nholder <- new.env()\nholder$con <- con\ncat("set\\n")',
    );
    expectStatus(r1, 'completed');
    expectSession(r1, 'new');
    assert.equal(r1.sc.session.run_number, 1, JSON.stringify(r1.sc.session));
    await sleep(1000); // a model's next step: the state is saved meanwhile
    const r2 = await r(d.client, c, 'nrow(sales)');
    const sv = r2.sc.session.autosave;
    assert.ok(sv?.ok, `the first run's state was saved: ${JSON.stringify(sv)}`);
    assert.equal(sv.run, 1);
    const skipped = Object.fromEntries(sv.not_saved.map((n) => [n.name, n.why]));
    assert.deepEqual(Object.keys(skipped).sort(), ['con', 'holder'], JSON.stringify(sv));
    assert.match(skipped.con, /^a connection/);
    assert.match(skipped.holder, /environment holding a connection/);
    assert.match(r2.text, /state: saved after run 1 without con \(a connection/);
    await sleep(1000);

    await removeBox();
    const r3 = await until(async () => {
      const x = await r(d.client, c, 'totals <- sales |> group_by(region) |> summarise(total = twice(sum(amount)))\nas.data.frame(totals)');
      return x.sc?.status === 'completed' && x;
    }, 60_000 * SLOW);
    assert.ok(r3, 'a run after the box was removed completes');
    const rs = expectRestored(r3, undefined, 2);
    assert.match(r3.sc.value['text/plain'], /region total\n1\s+north\s+30\n2\s+south\s+64/, describeRun(r3));
    assert.deepEqual(rs.imports, ['dplyr'], JSON.stringify(rs));
    assert.deepEqual(rs.not_restored.map((n) => n.name).sort(), ['con', 'holder'], JSON.stringify(rs));
    assert.match(r3.text, /Not restored: .*con \(not saved: a connection/);
    assert.match(r3.text, /Packages attached again: dplyr\./);
    expectSession(await r(d.client, c, 'exists("con")'), 'continued');
  });

  test('rewind_to returns an R conversation to the state after an earlier run', { timeout: T }, async () => {
    const c = conv('r-rewind');
    for (const code of ['rows <- c(1, 2, 3)', 'rows <- c(rows, 4)', 'rows <- integer(0) # a destructive step', 'note <- "after"']) {
      expectStatus(await r(d.client, c, code), 'completed');
      await sleep(500);
    }
    const last = await r(d.client, c, 'rows');
    assert.deepEqual(last.sc.session.saved_runs, [1, 2, 3, 4], JSON.stringify(last.sc.session));
    const rw = await r(d.client, c, 'c(length(rows), exists("note"))', { rewind_to: 2 });
    expectStatus(rw, 'completed');
    expectSession(rw, 'rewound');
    assert.deepEqual(rw.sc.value, { 'text/plain': '[1] 4 0' }, describeRun(rw));
    assert.equal(rw.sc.session.restored.kind, 'rewind');
    assert.equal(rw.sc.session.restored.run, 2);
    assert.match(rw.text, /^NOTE: the R state was rewound to what it was right after run 2/);
    await sleep(500);
    const bad = await r(d.client, c, 'cat("ran\\n")', { rewind_to: 1 });
    expectStatus(bad, 'failed');
    assert.equal(bad.sc.stdout, '', 'the code does not run');
    assert.match(bad.sc.stderr, /StateError: there is no saved state of run 1; the saved runs are 2, 3, 4, 5/);
  });

  test('fork_from copies an R conversation: files and state', { timeout: T }, async () => {
    const src = conv('r-fork-src');
    expectStatus(await r(d.client, src, 'library(tibble)\ndf <- tibble(a = 1:3)\nwriteLines("n", "/data/notes.txt")'), 'completed');
    await sleep(1000);
    const f = await r(d.client, undefined, 'df$b <- df$a * 10\nc(sum(df$b), readLines("/data/notes.txt") == "n", is_tibble(df))', { fork_from: src });
    expectRestored(f, 'forked', 1);
    assert.deepEqual(f.sc.value, { 'text/plain': '[1] 60  1  1' }, describeRun(f));
    const back = await r(d.client, src, 'names(df)');
    assert.deepEqual(back.sc.value, { 'text/plain': '[1] "a"' }, 'the source goes its own way');
  });

  test('quit() and session "new" drop the saved R state: nothing comes back', { timeout: T }, async () => {
    const c = conv('r-drop');
    expectStatus(await r(d.client, c, 'old_v <- 1'), 'completed');
    await sleep(1000);
    const fresh = await r(d.client, c, 'c(exists("old_v"), { new_v <- 1; 1 })', { session: 'new' });
    expectSession(fresh, 'restarted', 'requested');
    assert.deepEqual(fresh.sc.value, { 'text/plain': '[1] 0 1' });
    await sleep(1000);
    await removeBox();
    const back = await until(async () => {
      const x = await r(d.client, c, 'c(exists("old_v"), exists("new_v"))');
      return x.sc?.status === 'completed' && x;
    }, 60_000 * SLOW);
    expectRestored(back, undefined, 1);
    assert.deepEqual(back.sc.value, { 'text/plain': '[1] FALSE  TRUE' }, 'only what came after session "new"');
    await sleep(1000);
    const q = await r(d.client, c, 'quit(status = 0)');
    assert.equal(q.sc.session.lost_reason, 'exit', JSON.stringify(q.sc.session));
    const after = await r(d.client, c, 'exists("new_v")');
    assert.notEqual(after.sc.session.state, 'restored', JSON.stringify(after.sc.session));
    assert.deepEqual(after.sc.value, { 'text/plain': '[1] FALSE' });
  });

  test('a state over SANDBOX_STATE_MAX_MB is not saved and says so; the earlier save stays', { timeout: T }, async () => {
    const c = conv('r-cap');
    expectStatus(await r(d.client, c, 'small <- 1'), 'completed');
    await sleep(1000);
    expectStatus(await r(d.client, c, 'big <- runif(400000) # 3.2 MB'), 'completed');
    await sleep(1000);
    const told = await r(d.client, c, 'rm(big)\nsmall <- 2');
    const sv = told.sc.session.autosave;
    assert.equal(sv.ok, false, JSON.stringify(sv));
    assert.match(sv.error, /larger than its cap of 1 MB \(SANDBOX_STATE_MAX_MB, at most half the workspace quota\)/);
    assert.match(told.text, /state: NOT saved after run 2: the state is larger than its cap/);
    assert.deepEqual(told.sc.session.saved_runs, [1], JSON.stringify(told.sc.session));
    await sleep(1000);
    await removeBox();
    const back = await until(async () => {
      const x = await r(d.client, c, 'c(exists("big"), small)');
      return x.sc?.status === 'completed' && x;
    }, 60_000 * SLOW);
    // The number a failed save had goes to the next save that lands.
    expectRestored(back, undefined, 2);
    assert.deepEqual(back.sc.value, { 'text/plain': '[1] 0 2' });
  });
});
