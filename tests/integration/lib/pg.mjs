// SPDX-License-Identifier: MIT
// A scratch PostgreSQL server for integration tests, through tests/lib/pg.sh:
// a cluster in a temporary directory listening on a Unix socket there only,
// removed by destroy(). startPg() resolves null with the reason in
// skipReason when PostgreSQL cannot start on this machine.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const PG_SH = path.resolve(here, '../../lib/pg.sh');
// The password of the role mcpsd that pg.sh creates (scram-sha-256).
export const PG_PASSWORD = `it-pw-${process.pid}-7d1e`;

export let skipReason = '';

function pgsh(verb, dir) {
  return execFileSync(PG_SH, [verb, dir], {
    encoding: 'utf8',
    timeout: 180_000,
    env: { ...process.env, MCPSD_TEST_PG_PASSWORD: PG_PASSWORD },
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

export function startPg() {
  const parent = mkdtempSync(path.join(os.tmpdir(), 'mcpsd-pg-it-'));
  const dir = path.join(parent, 'cluster');
  // The server runs as postgres: it must reach its directory.
  chmodSync(parent, 0o755);
  try {
    pgsh('start', dir);
  } catch (e) {
    skipReason = `PostgreSQL cannot be started here: ${String(e.stderr ?? e.message).trim().split('\n').pop()}`;
    rmSync(parent, { recursive: true, force: true });
    return null;
  }
  const sock = path.join(dir, 'sock');
  const pg = {
    dir,
    sock,
    /** A URL for database db as the role mcpsd, with its password. */
    url: (db) => `postgresql://mcpsd:${PG_PASSWORD}@/${db}?host=${sock}&port=5432`,
    /** Runs SQL as the superuser on database db (default postgres). */
    psql: (sql, db = 'postgres') =>
      execFileSync('psql', ['-qAt', '-h', sock, '-p', '5432', '-U', 'postgres', '-d', db, '-c', sql], {
        encoding: 'utf8',
        timeout: 60_000,
      }).trim(),
    stop: () => pgsh('stop', dir),
    start: () => pgsh('start', dir),
    destroy: () => {
      try {
        pgsh('destroy', dir);
      } finally {
        rmSync(parent, { recursive: true, force: true });
      }
    },
  };
  return pg;
}
