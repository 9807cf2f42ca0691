// SPDX-License-Identifier: MIT
// Egress (docs/security.md, Egress) measured the way a client sees it:
// run_code through the official MCP SDK client on a real daemon (MCPSD_BIN)
// against the real engine, the Python runner and the egress proxy image.
// Interleaved in one run, p50 of each (prints a Markdown table; never fails
// on timing):
// - the first run with network (the proxy is started),
// - a warm print(1) without network, and with network: true (the box joins
//   and leaves its egress network; the proxy's log is read back),
// - the same with one HTTP request through the proxy to a local server,
// - one-off runs (memory_mb other than the default) without and with network.
//
//   MCPSD_BIN=build/dev/cmd/mcp-sandboxd node tests/bench/egress_bench.mjs [--runs N]
import { createServer } from 'node:http';
import { bridgeGateway } from '../integration/lib/pyindex.mjs';
import { startWarm, stopWarm } from '../integration/lib/warm.mjs';

const argv = process.argv.slice(2);
const RUNS = Number(argv[argv.indexOf('--runs') + 1] || 9) || 9;
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];

async function call(client, conv, code, extra = {}) {
  const t0 = performance.now();
  const r = await client.callTool({ name: 'run_code', arguments: { conversationId: conv, language: 'python', code, ...extra } }, undefined, { timeout: 300_000 });
  const ms = performance.now() - t0;
  const sc = r.structuredContent ?? {};
  if (sc.status !== 'completed') throw new Error(`run failed: ${JSON.stringify(sc).slice(0, 800)}`);
  return ms;
}

const gw = bridgeGateway();
const web = createServer((req, res) => res.end('ok'));
await new Promise((r) => web.listen(0, gw, r));
const port = web.address().port;
const d = await startWarm({
  name: 'egress-bench',
  env: {
    SANDBOX_ALLOW_NETWORK: 'true',
    SANDBOX_EGRESS_HOSTS: `web.test=${gw}`,
    SANDBOX_EGRESS_PRIVATE: `${gw}/32`,
    SANDBOX_EGRESS_ALLOW: `web.test:${port}`,
    SANDBOX_EGRESS_SUBNET: `10.${100 + (process.pid % 50)}.0.0/16`,
  },
});
const FETCH = `import urllib.request, ssl\nurllib.request.urlopen('http://web.test:${port}/', timeout=10, context=ssl.create_default_context()).read()`;
const rows = {};
const add = (k, v) => (rows[k] ??= []).push(v);
try {
  await call(d.client, 'b-warm', 'print(1)');
  add('first run with network (starts the proxy), warm', await call(d.client, 'b-first', 'print(1)', { network: true }));
  for (let i = 0; i < RUNS; i++) {
    add('warm print(1), no network', await call(d.client, 'b-warm', 'print(1)'));
    add('warm print(1), network: true', await call(d.client, 'b-warm', 'print(1)', { network: true }));
    add('warm, one HTTP request through the proxy', await call(d.client, 'b-warm', FETCH, { network: true }));
    add('one-off print(1), no network', await call(d.client, 'b-one', 'print(1)', { memory_mb: 300 }));
    add('one-off print(1), network: true', await call(d.client, 'b-one', 'print(1)', { memory_mb: 300, network: true }));
  }
} finally {
  await stopWarm(d);
  web.close();
}
console.log(`\n| egress, ${RUNS} runs each | p50 ms |\n| --- | ---: |`);
for (const [k, v] of Object.entries(rows)) console.log(`| ${k} | ${Math.round(median(v))} |`);
