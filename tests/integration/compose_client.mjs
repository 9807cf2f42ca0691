// SPDX-License-Identifier: MIT
// The MCP client half of deploy/compose-test.sh: talks to a daemon that runs
// in the compose stack, through its published port, with the official SDK.
// Connects with the bearer token, pings, lists the tools, and when run_code
// is registered runs Python that writes /data/hello.txt, then downloads that
// file through the public URL the result links to (no token: the URL is the
// capability).
//
// Environment: MCP_URL (http://127.0.0.1:PORT/mcp), MCP_TOKEN, and
// FILES_BASE (the origin file links must start with; default: MCP_URL's).
// Prints one line per check, "PASS name", "FAIL name: why" or
// "SKIP name: why", and exits 1 when a check failed.
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.env.MCP_URL;
const token = process.env.MCP_TOKEN;
if (!url || !token) {
  console.error('compose_client.mjs: set MCP_URL and MCP_TOKEN');
  process.exit(2);
}
const filesBase = (process.env.FILES_BASE ?? new URL(url).origin).replace(/\/+$/, '');

let failed = 0;
const pass = (name) => console.log(`PASS ${name}`);
const fail = (name, why) => {
  failed++;
  console.log(`FAIL ${name}: ${why}`);
};
const skip = (name, why) => console.log(`SKIP ${name}: ${why}`);

// Runs one check; a thrown error fails it. Returns the check's value or
// undefined.
async function check(name, fn) {
  try {
    const v = await fn();
    pass(name);
    return v;
  } catch (e) {
    fail(name, e?.message ?? String(e));
    return undefined;
  }
}

const textOf = (result) =>
  (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');

// The link to a file named `name` in a run_code result: structuredContent
// first, then the resource_link content items.
function linkOf(result, name) {
  const files = result.structuredContent?.files;
  if (Array.isArray(files)) {
    const f = files.find((x) => x.name === name || x.path === `/data/${name}`);
    if (f?.url) return f.url;
  }
  const link = (result.content ?? []).find((c) => c.type === 'resource_link' && c.name === name);
  return link?.uri;
}

const client = new Client({ name: 'mcpsd-compose-test', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});

const connected = await check('initialize with the bearer token', async () => {
  await client.connect(transport);
  const info = client.getServerVersion();
  if (info?.name !== 'mcp-sandboxd') throw new Error(`server is ${JSON.stringify(info)}`);
  return true;
});

if (connected) {
  await check('ping', () => client.ping());
  const tools = await check('tools/list', async () => {
    const { tools } = await client.listTools();
    console.log(`  tools: ${tools.map((t) => t.name).join(', ') || '(none)'}`);
    return tools;
  });

  if (tools && !tools.some((t) => t.name === 'run_code')) {
    skip('run_code', 'not registered by this build (tools/list fallback only)');
  } else if (tools) {
    const nonce = randomBytes(8).toString('hex');
    const code = [
      'import pathlib',
      `pathlib.Path("/data/hello.txt").write_text("hello from compose ${nonce}\\n")`,
      `print("compose-ok ${nonce}")`,
    ].join('\n');
    const result = await check('run_code (python) writes /data/hello.txt', async () => {
      const r = await client.callTool(
        {
          name: 'run_code',
          arguments: { conversationId: `compose-${nonce}`, language: 'python', code },
        },
        undefined,
        { timeout: 180_000 },
      );
      const out = r.structuredContent?.stdout ?? textOf(r);
      if (r.isError) throw new Error(`isError: ${textOf(r).slice(0, 500)}`);
      if (!out.includes(`compose-ok ${nonce}`)) throw new Error(`stdout lacks the marker: ${out.slice(0, 500)}`);
      return r;
    });
    if (result) {
      const link = await check('the result links hello.txt under FILES_BASE', () => {
        const l = linkOf(result, 'hello.txt');
        if (!l) throw new Error(`no link in ${JSON.stringify(result).slice(0, 800)}`);
        if (!l.startsWith(`${filesBase}/files/`)) throw new Error(`link ${l} is not under ${filesBase}/files/`);
        return l;
      });
      if (link) {
        await check('download hello.txt through its public URL', async () => {
          const r = await fetch(link, { signal: AbortSignal.timeout(30_000) });
          const body = await r.text();
          if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${body.slice(0, 200)}`);
          if (body !== `hello from compose ${nonce}\n`) throw new Error(`unexpected content ${JSON.stringify(body.slice(0, 200))}`);
          if (r.headers.get('x-content-type-options') !== 'nosniff') throw new Error('no nosniff header');
        });
      }
    }
  }
  await client.close().catch(() => {});
}

process.exit(failed ? 1 : 0);
