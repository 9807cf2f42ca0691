// SPDX-License-Identifier: MIT
// The conversation as a notebook, against the real daemon, the real Docker
// engine and runner images, and the official SDK client: a mixed
// conversation (Python with a last value, an error, a figure, TypeScript)
// becomes /data/.mcp/notebook.ipynb, which Debian's python3-nbformat
// validates and python3-nbclient runs through on the host (with
// python3-ipykernel, pandas and matplotlib); replay_notebook reports no
// difference for a deterministic conversation and names the cells whose
// outputs change after a file in /data changed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { call, textOf } from './lib/files-http.mjs';
import { SLOW, py, run, startWarm, stopWarm } from './lib/warm.mjs';

// Debian's interpreter: the one python3-nbformat and nbclient belong to
// (a python3 earlier on PATH, pyenv's say, would not have them).
const PYTHON = '/usr/bin/python3';
const RUN = { timeoutMs: 180_000 * SLOW };

let d;
let work;

before(async () => {
  d = await startWarm({ name: 'notebook' });
  work = mkdtempSync(path.join(tmpdir(), 'mcpsd-notebook-'));
});

after(async () => {
  if (work) rmSync(work, { recursive: true, force: true });
  if (d) await stopWarm(d);
});

async function listNames(conv, dir) {
  const r = await call(d.client, 'list_files', { conversationId: conv, ...(dir ? { path: dir } : {}) });
  assert.equal(r.isError, undefined, textOf(r));
  return r.structuredContent.files.map((f) => f.name);
}

async function fetchText(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  assert.equal(r.status, 200, `GET ${url}`);
  return r.text();
}

/*
 * Validates the notebook with nbformat and executes it with nbclient (a
 * python3 kernel from ipykernel, in an empty directory); returns what
 * each executed cell printed and raised.
 */
async function validateAndExecute(file) {
  const script = `
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=nbformat.NO_CONVERT)
nbformat.validate(nb)
NotebookClient(nb, kernel_name="python3", timeout=120,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.validate(nb)
out = []
for c in nb.cells:
    o = {"tags": c.metadata.get("tags", []), "stdout": "", "ename": None,
         "png": 0, "plain": None}
    for x in c.outputs:
        if x.output_type == "stream" and x.name == "stdout":
            o["stdout"] += x.text
        elif x.output_type == "error":
            o["ename"] = x.ename
        elif x.output_type == "display_data" and "image/png" in x.data:
            o["png"] += 1
        elif x.output_type == "execute_result":
            o["plain"] = x.data.get("text/plain")
    out.append(o)
print(json.dumps({"nbformat": [nb.nbformat, nb.nbformat_minor], "cells": out}))
`;
  const dir = mkdtempSync(path.join(work, 'exec-'));
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', script, file, dir], {
    timeout: 240_000 * SLOW,
    maxBuffer: 16 << 20,
  });
  return JSON.parse(stdout);
}

describe('the conversation as a notebook', () => {
  test('a mixed conversation validates with nbformat and runs with nbclient', async () => {
    const conv = `nb-mixed-${randomBytes(4).toString('hex')}`;
    const first = await py(d.client, conv,
      "import pandas as pd\nprint('hello from cell 1')\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", {}, RUN);
    assert.equal(first.sc.status, 'completed', first.text);
    const url = first.sc.notebook_url;
    assert.match(url ?? '', /\/\.mcp\/notebook\.ipynb$/, 'the first result names the notebook');
    assert.ok(first.text.includes(url), 'and its text hands the link over');

    const failed = await py(d.client, conv, "x = 41\nraise ValueError('no good: %d' % x)", {}, RUN);
    assert.equal(failed.sc.status, 'failed', failed.text);
    assert.equal(failed.sc.error_name, 'ValueError');
    assert.equal(failed.sc.notebook_url, undefined, 'the link is told once per conversation');
    assert.ok(!failed.text.includes('notebook.ipynb'), failed.text);

    const fig = await py(d.client, conv,
      "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3))\nplt.plot([1, 2, 3], [1, 4, 9])\nprint('plotted')", {}, RUN);
    assert.equal(fig.sc.status, 'completed', fig.text);
    assert.ok((fig.sc.files ?? []).some((f) => f.mimeType === 'image/png'), 'the run made a figure');

    const ts = await run(d.client, conv, 'typescript', 'const n: number = 6 * 7;\nconsole.log(`typescript says ${n}`);', {}, RUN);
    assert.equal(ts.sc.status, 'completed', ts.text);
    assert.equal(ts.sc.notebook_url, undefined);

    const text = await fetchText(url);
    const nb = JSON.parse(text);
    assert.deepEqual([nb.nbformat, nb.nbformat_minor], [4, 5]);
    assert.equal(nb.metadata.kernelspec.name, 'python3');
    assert.equal(nb.metadata['mcp-sandboxd'].conversationId, conv);
    assert.equal(nb.cells.length, 4, 'one cell per run');
    const [c1, c2, c3, c4] = nb.cells;
    assert.deepEqual(nb.cells.map((c) => c.metadata.language), ['python', 'python', 'python', 'typescript']);
    assert.match(c1.source, /hello from cell 1/);
    assert.deepEqual(c1.outputs.map((o) => o.output_type), ['stream', 'execute_result']);
    assert.equal(c1.outputs[0].text, 'hello from cell 1\n');
    assert.match(c1.outputs[1].data['text/plain'], /a\s+b\n0\s+1\s+x\n1\s+2\s+y/);
    assert.match(c1.outputs[1].data['text/html'] ?? '', /<table/);
    assert.equal(c1.outputs[1].execution_count, 1);
    const err = c2.outputs.find((o) => o.output_type === 'error');
    assert.deepEqual([err?.ename, err?.evalue], ['ValueError', 'no good: 41']);
    assert.ok(err.traceback.some((l) => /ValueError/.test(l)), 'the traceback is kept');
    assert.deepEqual(c2.metadata.tags, ['raises-exception']);
    assert.equal(c2.metadata['mcp-sandboxd'].status, 'failed');
    const png = c3.outputs.find((o) => o.output_type === 'display_data');
    assert.ok(Buffer.from(png.data['image/png'], 'base64').subarray(1, 4).toString() === 'PNG', 'the figure is embedded as image/png');
    assert.deepEqual(c4.metadata.tags, ['skip-execution']);
    assert.equal(c4.metadata.vscode.languageId, 'typescript');
    assert.equal(c4.outputs[0].text, 'typescript says 42\n');

    const file = path.join(work, 'mixed.ipynb');
    writeFileSync(file, text);
    const ran = await validateAndExecute(file);
    assert.deepEqual(ran.nbformat, [4, 5]);
    assert.equal(ran.cells[0].stdout, 'hello from cell 1\n');
    assert.match(ran.cells[0].plain ?? '', /a\s+b\n0\s+1\s+x/, 'the host kernel computed the same frame');
    assert.equal(ran.cells[1].ename, 'ValueError', 'the failing cell fails on the host too, and the run goes on');
    assert.equal(ran.cells[2].stdout, 'plotted\n');
    assert.equal(ran.cells[2].png, 1, 'the figure shows on the host (inline backend)');
    assert.equal(ran.cells[3].stdout, 'typescript says 42\n', 'the TypeScript cell is skipped and keeps its output');
  });

  test('quick runs: the copy in /data is rewritten at most once a second and catches up by itself', async () => {
    // Runs that follow one another within a second leave the rewrite of
    // .ipynb to the daemon's housekeeping (at most 1.25 s later) or to the
    // first download, whichever comes first; the records are written at
    // once. Bash runs take a few milliseconds each.
    const conv = `nb-quick-${randomBytes(4).toString('hex')}`;
    const cellsIn = async () => {
      // cJSON prints one "cell_type" line per cell.
      const r = await run(d.client, conv, 'bash', `grep -c '"cell_type"' /data/.mcp/notebook.ipynb`, {}, RUN);
      assert.equal(r.sc.status, 'completed', r.text);
      return Number(r.sc.stdout.trim());
    };
    let url;
    for (let i = 1; i <= 6; i++) {
      const r = await run(d.client, conv, 'bash', `echo quick ${i}`, {}, RUN);
      assert.equal(r.sc.status, 'completed', r.text);
      url ??= r.sc.notebook_url;
    }
    assert.ok(url, 'the first result links the notebook');
    // The seventh run reads the copy as it is while it runs: it holds the
    // six before it, or (rewritten less than a second ago) fewer.
    const early = await cellsIn();
    assert.ok(early >= 1 && early <= 6, `cells seen at once: ${early}`);
    // Due at most a second after the last rewrite, written by the next
    // pass of the housekeeping (every 250 ms): 3 s leave room for a loaded
    // machine.
    await new Promise((res) => setTimeout(res, 3000 * SLOW));
    assert.equal(await cellsIn(), 7, 'three seconds later the copy holds every run before the reading one');
    // And a download never waits for the housekeeping: the runs just
    // before it are in what it gets.
    for (let i = 0; i < 3; i++) await run(d.client, conv, 'bash', 'true', {}, RUN);
    assert.equal(JSON.parse(await fetchText(url)).cells.length, 11, 'a download right after the runs has them all');
  });

  test('the notebook is listed under .mcp; the frame kept for the viewer is not', async () => {
    const conv = `nb-list-${randomBytes(4).toString('hex')}`;
    const r = await py(d.client, conv, "import pandas as pd\npd.DataFrame({'a': [1, 2]})", {}, RUN);
    assert.equal(r.sc.status, 'completed', r.text);
    // The notebook is a file a person downloads: the first result links it,
    // and list_files shows it when asked for .mcp (a plain listing is the
    // conversation's own files: no daemon file grows every listing), unlike
    // the frame the kernel keeps in /data/.mcp for the viewer.
    const listed = await listNames(conv);
    assert.ok(!listed.includes('.mcp/notebook.ipynb'), listed.join(', '));
    assert.deepEqual(listed.filter((n) => n.startsWith('.mcp/')), [], listed.join(', '));
    assert.ok((await listNames(conv, '.mcp')).includes('.mcp/notebook.ipynb'), 'listed under .mcp');
    assert.deepEqual((await listNames(conv, '.mcp')).filter((n) => /value\.json/.test(n)), [], 'not even under /data/.mcp');
    const frame = await py(d.client, conv, "import os\nprint(os.path.getsize('/data/.mcp/value.json') > 0)", {}, RUN);
    assert.equal(frame.sc.stdout, 'True\n', 'yet the frame is there');
    assert.deepEqual((r.sc.files ?? []).map((f) => f.name), [], "none of it is the run's output");
  });

  test('replay reports no difference, then the cells a changed file changes', async () => {
    const conv = `nb-replay-${randomBytes(4).toString('hex')}`;
    const up = (text) => call(d.client, 'upload_file', { conversationId: conv, filename: 'input.csv', text, overwrite: true });
    assert.equal((await up('x\n1\n2\n3\n')).isError, undefined);
    const cells = [
      "import pandas as pd\ndf = pd.read_csv('/data/input.csv')\nprint('sum', df.x.sum())",
      "import math\nprint('pi', round(math.pi, 6))",
      "df['y'] = df.x * 2\ndf",
      "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.title('fixed')",
      "{}['missing']",
    ];
    for (const code of cells) {
      const r = await py(d.client, conv, code, {}, RUN);
      assert.ok(['completed', 'failed'].includes(r.sc.status), r.text);
    }
    const ts = await run(d.client, conv, 'typescript', "console.log('not replayed')", {}, RUN);
    assert.equal(ts.sc.status, 'completed', ts.text);

    const same = await call(d.client, 'replay_notebook', { conversationId: conv }, { timeout: 300_000 * SLOW });
    assert.equal(same.isError, undefined, textOf(same));
    assert.deepEqual(same.structuredContent.differ, [], textOf(same));
    assert.equal(same.structuredContent.cells, cells.length, 'the Python cells only');
    assert.equal(same.structuredContent.same, cells.length);
    assert.match(textOf(same), /every output is the same/);
    assert.match(same.structuredContent.notebook_url, /\/\.mcp\/notebook\.ipynb$/);

    assert.equal((await up('x\n10\n20\n')).isError, undefined);
    const changed = await call(d.client, 'replay_notebook', { conversationId: conv }, { timeout: 300_000 * SLOW });
    assert.equal(changed.isError, undefined, textOf(changed));
    assert.deepEqual(
      changed.structuredContent.differ.map((x) => [x.cell, x.outputs, x.status]),
      [[1, ['stdout'], 'completed'], [3, ['value'], 'completed']],
      textOf(changed),
    );
    assert.equal(changed.structuredContent.same, cells.length - 2);
    assert.match(textOf(changed), /cell 1 \(stdout\)\ncell 3 \(value\)/);

    // The notebook is the record of the conversation, not of its replays.
    const nb = JSON.parse(await fetchText(changed.structuredContent.notebook_url));
    assert.equal(nb.cells.length, cells.length + 1);
    assert.equal(nb.cells[0].outputs[0].text, 'sum 6\n');
  });

  test('replay says what is wrong with what it was given', async () => {
    const none = await call(d.client, 'replay_notebook', { conversationId: `nb-none-${randomBytes(4).toString('hex')}` });
    assert.equal(none.isError, true);
    assert.match(textOf(none), /no such conversation here: run code/);
    const conv = `nb-ts-${randomBytes(4).toString('hex')}`;
    assert.equal((await run(d.client, conv, 'typescript', "console.log('only ts')", {}, RUN)).sc.status, 'completed');
    const ts = await call(d.client, 'replay_notebook', { conversationId: conv });
    assert.equal(ts.isError, true);
    assert.match(textOf(ts), /no Python cells to replay/);
  });
});
