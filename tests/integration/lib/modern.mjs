// SPDX-License-Identifier: MIT
// A small MCP 2026-07-28 requester over fetch, for the tests of tasks and
// of the revision's wire rules: every request carries the per-request _meta
// envelope and the headers the revision mirrors from the body
// (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-Conversation-Id),
// and each has its own timeout, as a client's request timeout would be.
// The v2 SDK client speaks the same wire but has no tasks of its own: the
// official tasks extension client (@modelcontextprotocol/ext-tasks) drives
// them over it, with this requester as its raw dispatch (taskSession).
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { DispatchError, createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
import { authHeaders } from './daemon.mjs';

export const MODERN = '2026-07-28';
export const TASKS = 'io.modelcontextprotocol/tasks';
export const TASK_CAPS = { extensions: { [TASKS]: {} } };

let nextId = 1;

/** The Mcp-Name a method mirrors from its params, if any. */
function nameOf(method, params) {
  if (method === 'tools/call' || method === 'prompts/get') return params?.name;
  if (method === 'resources/read') return params?.uri;
  if (method.startsWith('tasks/')) return params?.taskId;
  return undefined;
}

/** The JSON-RPC response in an answer (JSON, or the last SSE data line). */
function parseAnswer(text, type) {
  if (!type?.includes('text/event-stream')) return text ? JSON.parse(text) : undefined;
  const lines = text.split('\n').filter((l) => l.startsWith('data:'));
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = JSON.parse(lines[i].slice(5));
    if ('result' in m || 'error' in m) return m;
  }
  return undefined;
}

/**
 * POSTs one JSON-RPC request body as a 2026-07-28 client does, with the
 * headers the revision mirrors from it; resolves { status, message, text }
 * (message: the JSON-RPC response). opts: timeoutMs (default 30 s),
 * headers (extra or replacing), token, signal.
 */
export async function modernPost(d, body, opts = {}) {
  const { method, params } = body;
  const name = nameOf(method, params);
  const conv = method === 'tools/call' ? params?.arguments?.conversationId : undefined;
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': MODERN,
    'Mcp-Method': method,
    ...authHeaders(opts.token ?? d.token),
    ...(name !== undefined ? { 'Mcp-Name': name } : {}),
    ...(typeof conv === 'string' ? { 'Mcp-Param-Conversation-Id': conv } : {}),
    ...opts.headers,
  };
  // A header given as undefined is left out.
  for (const k of Object.keys(headers)) if (headers[k] === undefined) delete headers[k];
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? 30_000);
  const r = await fetch(d.url, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout,
  });
  const text = await r.text();
  return { status: r.status, message: parseAnswer(text, r.headers.get('content-type')), text };
}

/**
 * Sends one request with the per-request _meta envelope; resolves
 * { status, message, text } as modernPost. opts: caps
 * (clientCapabilities), and modernPost's.
 */
export async function modernRequest(d, method, params = {}, opts = {}) {
  const body = {
    jsonrpc: '2.0',
    id: nextId++,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientInfo': { name: 'mcpsd-modern-test', version: '1' },
        'io.modelcontextprotocol/clientCapabilities': opts.caps ?? {},
        ...params._meta,
      },
    },
  };
  return modernPost(d, body, opts);
}

/** The result of a request, or a thrown error carrying the JSON-RPC one. */
export async function modernCall(d, method, params, opts) {
  const { status, message } = await modernRequest(d, method, params, opts);
  if (!message || message.error) {
    const e = new Error(`${method}: HTTP ${status} ${JSON.stringify(message?.error)}`);
    e.rpc = message?.error;
    e.status = status;
    throw e;
  }
  return message.result;
}

/** A v2 SDK client pinned to 2026-07-28 (no session), connected to d. */
export async function connectModern(d, name = 'mcpsd-modern-test') {
  const c = new ClientV2({ name, version: '1.0.0' }, { capabilities: {}, versionNegotiation: { mode: { pin: MODERN } } });
  await c.connect(new HttpV2(new URL(d.url), { requestInit: { headers: authHeaders(d.token) } }));
  return c;
}

/**
 * Polls tasks/get until the task is completed, failed or cancelled (or
 * deadlineMs passes); calls onPoll with each state. Resolves the last.
 */
export async function waitTask(d, taskId, { deadlineMs = 60_000, intervalMs = 1000, onPoll } = {}) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const t = await modernCall(d, 'tasks/get', { taskId }, { caps: TASK_CAPS });
    onPoll?.(t);
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return t;
    if (Date.now() > end) throw new Error(`task ${taskId} still ${t.status} after ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A v2 SDK client pinned to 2026-07-28, connected to d, and a tasks session
 * of the official tasks extension client over it. The SDK client cannot
 * carry the tasks wire itself, so the extension sends tools/call and tasks/*
 * through rawDispatch (modernPost), as its documentation asks of a host.
 * endpointId scopes the serialized task references: the same id after a
 * restart resumes them. Resolves { client, session, close() }.
 */
export async function taskSession(d, endpointId) {
  const clientInfo = { name: 'mcpsd-ext-tasks-test', version: '1.0.0' };
  const client = new ClientV2(clientInfo, { capabilities: {}, versionNegotiation: { mode: { pin: MODERN } } });
  await client.connect(new HttpV2(new URL(d.url), { requestInit: { headers: authHeaders(d.token) } }));
  const rawDispatch = async (request, options = {}) => {
    let r;
    try {
      r = await modernPost(d, { jsonrpc: '2.0', id: nextId++, ...request }, {
        headers: options.context?.headers,
        timeoutMs: options.context?.requestTimeoutMs,
        signal: options.signal,
      });
    } catch (e) {
      throw new DispatchError(`POST ${d.url} failed: ${e.message}`, true, { cause: e });
    }
    if (!r.message) throw new DispatchError(`HTTP ${r.status} without a JSON-RPC answer: ${r.text.slice(0, 200)}`);
    if (r.message.error) return { kind: 'error', error: r.message.error };
    return { kind: 'result', result: r.message.result };
  };
  const session = createTaskSessionFromClient(client, {
    endpointId,
    rawDispatch,
    v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities: {} },
  });
  return {
    client,
    session,
    async close() {
      await session.close();
      await client.close();
    },
  };
}
