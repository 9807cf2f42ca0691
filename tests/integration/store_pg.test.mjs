// SPDX-License-Identifier: MIT
// Two daemons ("replicas", as behind one load balancer: the same public URL,
// tokens and FILE_SECRET, their own roots) sharing one PostgreSQL store
// (STORE_URL, a scratch server from tests/lib/pg.sh, the password in the
// URL): an OAuth client registered through one is known to the other, a
// code issued by one is redeemed at the other, a token refreshed at one is
// spent for both, an access token from one works at the other, and a code
// replayed at one revokes the grant at both; a
// run_code task (2026-07-28 tasks extension) created through one has its
// result readable through the other, and still after that daemon restarts;
// with the server stopped both stay up and report the store degraded, and
// recover when it returns. The password never reaches a log.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, sleep } from './lib/daemon.mjs';
import { TASK_CAPS, modernCall, modernRequest, waitTask } from './lib/modern.mjs';
import { PG_PASSWORD, skipReason, startPg } from './lib/pg.mjs';
import { authorizeUrl, consent, pkce, register, tokenRequest } from './lib/oauth.mjs';
import { instanceName, removeContainersOf, startSandboxDaemon } from './lib/sandbox.mjs';

const pg = startPg();
const skip = pg ? false : skipReason;

describe('two daemons sharing a PostgreSQL store', { skip }, () => {
  const ALICE = `alice-${randomBytes(16).toString('hex')}`;
  const roots = [0, 1].map(() => mkdtempSync(path.join(os.tmpdir(), 'mcpsd-pg-root-')));
  const instances = [0, 1].map((i) => instanceName(`store-pg-${i}`));
  const d = [];
  let ports;
  let env;

  const start = (i) =>
    startSandboxDaemon({
      name: `store-pg-${i}`,
      port: ports[i],
      root: roots[i],
      keepRoot: true,
      instance: instances[i],
      env: { ...env, MCP_INSTANCE_NAME: instances[i] },
      connect: false,
    });

  before(async () => {
    pg.psql('CREATE DATABASE mcpsd_it OWNER mcpsd');
    ports = [await freePort(), await freePort()];
    env = {
      SANDBOX_WARM: 'false',
      STORE_URL: pg.url('mcpsd_it'),
      OAUTH_ENABLED: 'true',
      // One service behind a balancer: one public URL for both.
      PUBLIC_BASE_URL: `http://127.0.0.1:${ports[0]}`,
      MCP_API_TOKENS: `alice:${ALICE}`,
      FILE_SECRET: randomBytes(32).toString('hex'),
    };
    d[0] = await start(0);
    d[1] = await start(1);
  });

  after(async () => {
    for (const i of [0, 1]) {
      await removeContainersOf(instances[i]);
      await d[i]?.stop();
      rmSync(roots[i], { recursive: true, force: true });
    }
    pg.destroy();
  });

  test('both use the PostgreSQL store and migrated it once', async () => {
    for (const x of d) {
      const h = await x.health();
      assert.equal(h.store.backend, 'postgresql');
      assert.equal(h.store.ok, true);
    }
    assert.equal(pg.psql('SELECT application, version FROM store_meta', 'mcpsd_it'), `mcp-sandboxd|${(await d[0].health()).store.schema}`);
  });

  test('OAuth: a client registered at one replica is known to the other, tokens work across', async () => {
    const redirect = 'http://127.0.0.1:9/callback';
    const reg = await register(d[1].base, {
      client_name: 'two replicas',
      redirect_uris: [redirect],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
    });
    assert.equal(reg.status, 201, reg.text);
    const client = reg.json;
    // The consent page at the other replica knows the client.
    const { verifier, challenge } = pkce();
    const url = authorizeUrl(d[0].base, {
      clientId: client.client_id,
      redirectUri: redirect,
      challenge,
      resource: `${env.PUBLIC_BASE_URL}/mcp`,
    });
    const c = await consent(url, { token: ALICE, deliver: false });
    assert.equal(c.status, 303, c.body ?? c.page);
    const code = c.params.get('code');
    assert.ok(code);
    // The code issued by replica 0 is redeemed at replica 1.
    const t = await tokenRequest(d[1].base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirect,
      code_verifier: verifier,
      client_id: client.client_id,
      resource: `${env.PUBLIC_BASE_URL}/mcp`,
    });
    assert.equal(t.status, 200, t.text);
    // The access token works at both.
    for (const [i, x] of d.entries()) {
      const r = await modernCall({ ...x, token: t.json.access_token }, 'tools/list', {}).catch((e) => {
        throw new Error(`replica ${i}: ${e.message}`);
      });
      assert.ok(r.tools.some((tool) => tool.name === 'run_code'));
    }
    // Refreshed at replica 1; the old refresh token is then spent at 0 too.
    const r1 = await tokenRequest(d[1].base, {
      grant_type: 'refresh_token',
      refresh_token: t.json.refresh_token,
      client_id: client.client_id,
    });
    assert.equal(r1.status, 200, r1.text);
    const r0 = await tokenRequest(d[0].base, {
      grant_type: 'refresh_token',
      refresh_token: t.json.refresh_token,
      client_id: client.client_id,
    });
    assert.equal(r0.status, 400, r0.text);
    assert.equal(r0.json.error, 'invalid_grant');
    // Replaying the code at replica 0 revokes the grant for both.
    const again = await tokenRequest(d[0].base, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirect,
      code_verifier: verifier,
      client_id: client.client_id,
    });
    assert.equal(again.status, 400);
    for (const [i, x] of d.entries()) {
      const r = await modernRequest({ ...x, token: r1.json.access_token }, 'tools/list', {});
      assert.equal(r.status, 401, `replica ${i} refuses the revoked grant's token`);
    }
  });

  test("a task created at one replica has its result at the other, also after that one restarts", async () => {
    const alice = (x) => ({ ...x, token: ALICE });
    const created = await modernCall(
      alice(d[0]),
      'tools/call',
      { name: 'run_code', arguments: { conversationId: 'pg-task', language: 'python', code: 'print("shared", 6 * 7)' } },
      { caps: TASK_CAPS, timeoutMs: 30_000 },
    );
    assert.equal(created.resultType, 'task');
    const done = await waitTask(alice(d[1]), created.taskId, { deadlineMs: 120_000, intervalMs: 300 });
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.stdout, 'shared 42\n');

    await d[1].stopClean();
    d[1] = await start(1);
    const t = await modernCall(alice(d[1]), 'tasks/get', { taskId: created.taskId }, { caps: TASK_CAPS });
    assert.equal(t.status, 'completed');
    assert.equal(t.result.structuredContent.stdout, 'shared 42\n');
  });

  test('with the server down both report the store degraded and recover when it returns', async () => {
    pg.stop();
    try {
      for (const x of d) {
        const h = await x.health();
        assert.equal(h.store.ok, false);
        assert.equal(h.status, 'degraded');
      }
      // A request that needs the store fails cleanly; the daemon stays up.
      const reg = await register(d[0].base, { client_name: 'down', redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' });
      assert.ok(reg.status >= 500, `${reg.status} ${reg.text}`);
      assert.equal(d[0].exited, null);
    } finally {
      pg.start();
    }
    for (const x of d) {
      let h;
      for (let i = 0; i < 50; i++) {
        h = await x.health();
        if (h.store.ok) break;
        await sleep(200);
      }
      assert.equal(h.store.ok, true);
    }
  });

  test('the password is in no log', async () => {
    for (const x of d) {
      const log = readFileSync(x.logPath, 'utf8');
      assert.ok(log.includes('PostgreSQL'), 'the log names the store');
      assert.ok(!log.includes(PG_PASSWORD), `the password is in ${x.logPath}`);
    }
  });
});
