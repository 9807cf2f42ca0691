// SPDX-License-Identifier: MIT
// MCP 2026-07-28 beside 2025-11-25 on one daemon, with real clients and
// real runs: the v2 SDK client (@modelcontextprotocol/client, speaking
// 2026-07-28) and the 1.32 SDK client (2025-11-25, a session) list tools
// and run code at the same time; the v2 client's automatic negotiation
// settles on 2026-07-28; conversationId travels as the
// Mcp-Param-Conversation-Id header and a header that disagrees with the body
// is refused; the revision's errors come with their HTTP statuses; and a
// 2026-07-28 client that closes a run's stream cancels the run (its
// container goes).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { connectHttp, sleep } from './lib/daemon.mjs';
import { MODERN, modernRequest } from './lib/modern.mjs';
import { containersOf, removeContainersOf, startSandboxDaemon, waitNoContainers } from './lib/sandbox.mjs';

let d;

before(async () => {
  // One-off runs: a run's container is the one the assertions watch (a
  // warm session's box outlives its runs by design).
  d = await startSandboxDaemon({ name: 'protocol', env: { SANDBOX_WARM: 'false' }, connect: false });
});
after(async () => {
  await removeContainersOf(d?.instance);
  await d?.stopClean();
});

/** A v2 SDK client connected with negotiation mode (pinned by default). */
async function connectV2(mode = { pin: MODERN }) {
  const client = new ClientV2(
    { name: 'mcpsd-v2-test', version: '1.0.0' },
    { capabilities: {}, versionNegotiation: { mode } },
  );
  await client.connect(new HttpV2(new URL(d.url), { requestInit: { headers: { Authorization: `Bearer ${d.token}` } } }));
  return client;
}

/** run_code through an SDK client; the structured result. */
async function run(client, conversationId, code) {
  const r = await client.callTool(
    { name: 'run_code', arguments: { conversationId, language: 'python', code } },
    undefined,
    { timeout: 120_000 },
  );
  assert.ok(!r.isError, JSON.stringify(r.content));
  return r.structuredContent;
}

describe('two revisions on one daemon', () => {
  test('the v2 client (2026-07-28) and the 1.32 client (2025-11-25) list tools and run code at once', async () => {
    const [v2, v1] = await Promise.all([connectV2(), connectHttp(d)]);
    try {
      assert.equal(v2.getNegotiatedProtocolVersion(), MODERN, 'v2 client speaks 2026-07-28');
      assert.equal(v1.transport.protocolVersion ?? '2025-11-25', '2025-11-25', '1.32 client speaks 2025-11-25');
      assert.ok(v1.transport.sessionId, 'the 1.32 client has a session');
      const both = await Promise.all(
        [
          [v2, 'proto-v2', 'print("modern", 6 * 7)'],
          [v1, 'proto-v1', 'print("legacy", 6 * 7)'],
        ].map(async ([c, conv, code]) => {
          const { tools } = await c.listTools();
          const names = tools.map((t) => t.name);
          for (const n of ['run_code', 'list_runners', 'upload_file', 'list_files', 'delete_file'])
            assert.ok(names.includes(n), `${n} listed`);
          return run(c, conv, code);
        }),
      );
      assert.equal(both[0].stdout, 'modern 42\n');
      assert.equal(both[1].stdout, 'legacy 42\n');
      // Each sees its own revision's list: the annotation only in 2026-07-28.
      const [t2, t1] = await Promise.all([v2.listTools(), v1.listTools()]);
      const conv = (ts) => ts.tools.find((t) => t.name === 'run_code').inputSchema.properties.conversationId;
      assert.equal(conv(t2)['x-mcp-header'], 'Conversation-Id');
      assert.equal(conv(t1)['x-mcp-header'], undefined);
    } finally {
      await Promise.all([v2.close(), v1.close()]);
    }
  });

  test("the v2 client's automatic negotiation settles on 2026-07-28", async () => {
    const c = await connectV2('auto');
    try {
      assert.equal(c.getNegotiatedProtocolVersion(), MODERN);
      assert.equal(c.getServerVersion()?.name, 'mcp-sandboxd');
      const out = await run(c, 'proto-auto', 'print("auto")');
      assert.equal(out.stdout, 'auto\n');
    } finally {
      await c.close();
    }
  });
});

describe('the 2026-07-28 wire', () => {
  const callArgs = { name: 'run_code', arguments: { conversationId: 'proto-hdr', language: 'python', code: 'print(1)' } };

  test('conversationId travels as a header; one that disagrees with the body is refused', async () => {
    const ok = await modernRequest(d, 'tools/call', callArgs);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.message.result.structuredContent.stdout, '1\n');
    const bad = await modernRequest(d, 'tools/call', callArgs, { headers: { 'Mcp-Param-Conversation-Id': 'other' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.message.error.code, -32020);
    assert.equal(bad.message.id !== undefined && bad.message.id !== null, true, 'the error carries the id');
    const missing = await modernRequest(d, 'tools/call', callArgs, { headers: { 'Mcp-Param-Conversation-Id': undefined } });
    assert.equal(missing.status, 400, 'the header is required when the body has the argument');
  });

  test('errors of the revision come with their HTTP statuses', async () => {
    const init = await modernRequest(d, 'initialize', { protocolVersion: '2025-11-25', capabilities: {} });
    assert.equal(init.status, 404, 'initialize does not exist in 2026-07-28');
    assert.equal(init.message.error.code, -32601);
    const v = await modernRequest(
      d,
      'server/discover',
      { _meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
      { headers: { 'MCP-Protocol-Version': '2099-01-01' } },
    );
    assert.equal(v.status, 400);
    assert.equal(v.message.error.code, -32022);
    assert.deepEqual(v.message.error.data.supported, [MODERN]);
    const disc = await modernRequest(d, 'server/discover');
    assert.equal(disc.status, 200);
    assert.deepEqual(disc.message.result.supportedVersions, [MODERN]);
    assert.ok(disc.message.result.capabilities.extensions['io.modelcontextprotocol/tasks']);
  });

  test("closing a run's stream cancels the run: its container goes", async () => {
    const ac = new AbortController();
    const req = fetch(d.url, {
      method: 'POST',
      signal: ac.signal,
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${d.token}`,
        'MCP-Protocol-Version': MODERN,
        'Mcp-Method': 'tools/call',
        'Mcp-Name': 'run_code',
        'Mcp-Param-Conversation-Id': 'proto-cancel',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'run_code',
          arguments: { conversationId: 'proto-cancel', language: 'python', code: 'import time\ntime.sleep(120)' },
          _meta: {
            progressToken: 'p1',
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    const res = await req;
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    // Wait for the container to run, then hang up.
    const end = Date.now() + 60_000;
    while ((await containersOf(d.instance, { all: false })).length === 0) {
      assert.ok(Date.now() < end, 'the run started');
      await sleep(200);
    }
    ac.abort();
    await res.body?.cancel().catch(() => {});
    const left = await waitNoContainers(d.instance, { timeoutMs: 15_000, all: false });
    assert.deepEqual(left, [], 'the run stopped when its stream closed');
  });
});
