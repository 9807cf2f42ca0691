// SPDX-License-Identifier: MIT
// The choice of execution backend by name (SANDBOX_BACKEND) as the real
// daemon makes it at start-up: the registry's names, each backend's own
// settings, and the settings that need a capability the chosen backend
// lacks, each refused with exit status 2 and a message that says what to
// do. --check-config runs every check the daemon runs before it serves.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { BIN } from './lib/daemon.mjs';

const check = (env) =>
  spawnSync(BIN, ['--env-file', '/dev/null', '--check-config'], {
    env: {
      PATH: process.env.PATH,
      MCP_API_TOKEN: `t-${randomBytes(16).toString('hex')}`,
      FILE_SECRET: randomBytes(32).toString('hex'),
      ...env,
    },
    encoding: 'utf8',
  });

/** Asserts the check of env was refused as a configuration error matching re. */
function refused(env, re) {
  const r = check(env);
  assert.equal(r.status, 2, `exit status 2 for ${JSON.stringify(env)}: ${r.stderr}`);
  assert.match(r.stderr, /^mcp-sandboxd: configuration error: /);
  assert.match(r.stderr, re);
}

describe('SANDBOX_BACKEND', () => {
  test('each registered backend is accepted by name; docker is the default', () => {
    for (const [env, name] of [
      [{}, 'docker'],
      [{ SANDBOX_BACKEND: 'docker' }, 'docker'],
      [{ SANDBOX_BACKEND: 'swarm' }, 'swarm'],
    ]) {
      const r = check(env);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^SANDBOX_BACKEND=${name}$`, 'm'));
    }
  });

  test("an unknown name is refused with the registry's names", () => {
    refused({ SANDBOX_BACKEND: 'kubernetes' }, /SANDBOX_BACKEND='kubernetes' is not a backend; use docker or swarm, e\.g\. SANDBOX_BACKEND=docker/);
    refused({ SANDBOX_BACKEND: 'Docker' }, /SANDBOX_BACKEND='Docker' is not a backend/);
  });

  test("the Swarm backend's own settings are its own check", () => {
    refused({ SANDBOX_BACKEND: 'swarm', SWARM_CONSTRAINTS: ' ; ' }, /SWARM_CONSTRAINTS needs at least one placement constraint/);
    refused({ SANDBOX_BACKEND: 'swarm', SANDBOX_RUNTIME: 'runsc' }, /SANDBOX_RUNTIME cannot be chosen per service on a Swarm/);
    // The form of a Swarm setting is checked whichever backend is chosen.
    refused({ SWARM_CONSTRAINTS: 'node.id==$(id)' }, /SWARM_CONSTRAINTS='node\.id==\$\(id\)' must be Swarm placement constraints/);
    assert.equal(check({ SANDBOX_RUNTIME: 'runsc' }).status, 0, 'docker takes a runtime');
  });

  test('settings that need a capability the chosen backend lacks', () => {
    refused(
      { SANDBOX_BACKEND: 'swarm', SANDBOX_ALLOW_NETWORK: 'true' },
      /SANDBOX_ALLOW_NETWORK=true cannot be honoured with SANDBOX_BACKEND=swarm: sandbox nodes run their engine with --bridge=none, so tasks have no network; set SANDBOX_ALLOW_NETWORK=false/,
    );
    assert.equal(check({ SANDBOX_ALLOW_NETWORK: 'true' }).status, 0, 'docker gives boxes a network');
    const replica = { MCP_REPLICA_NAME: 'r1', STORE_URL: 'postgresql://mcpsd@db.internal/mcpsd', SANDBOX_ROOT: '/srv/shared/mcpsd' };
    // A replica per node on its own engine (conversation leases keep
    // them apart), or replicas in front of one Swarm.
    const d = check(replica);
    assert.equal(d.status, 0, d.stderr);
    const r = check({ ...replica, SANDBOX_BACKEND: 'swarm' });
    assert.equal(r.status, 0, r.stderr);
  });
});
