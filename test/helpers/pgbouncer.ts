import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './ports.ts';

/** A real PgBouncer in transaction mode, the pooler managed Postgres offerings put in front. */
export interface RunningPgBouncer {
  readonly port: number;
  readonly pid: number;
  /** Its auth_file. */
  readonly userlist: string;
  /** `upstream` with its host and port replaced by the pooler's (same user, password and database). */
  url(upstream: string): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** A connection string of the Postgres behind it; its user (and password) is allowed through. */
  upstream: string;
  /** Further roles the pooler lets through (trust on the client side, their password upstream). */
  users?: ReadonlyArray<{ name: string; password?: string }>;
  /** Server connections per database and user. */
  poolSize?: number;
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

/**
 * Starts Debian's `pgbouncer` (pool_mode = transaction) in front of `upstream`, every database
 * reachable through a wildcard entry, and waits until it passes a query through. PgBouncer refuses to
 * run as root: as root it runs as the `postgres` user.
 */
export async function startPgBouncer({
  upstream,
  users = [],
  poolSize = 20,
}: PgBouncerOptions): Promise<RunningPgBouncer> {
  const u = new URL(upstream);
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-pgbouncer-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const everyone = [
    { name: decodeURIComponent(u.username), password: decodeURIComponent(u.password) },
    ...users,
  ];
  writeFileSync(
    path.join(dir, 'userlist.txt'),
    everyone.map((x) => `${quote(x.name)} ${quote(x.password ?? '')}\n`).join(''),
  );
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${u.hostname} port=${u.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 1000',
      // A restarted Postgres: retry server logins quickly.
      'server_login_retry = 1',
      `admin_users = ${decodeURIComponent(u.username)}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const child = spawn('pgbouncer', [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const url = (target: string) => {
    const t = new URL(target);
    t.hostname = '127.0.0.1';
    t.port = String(port);
    return t.toString();
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(kill);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`pgbouncer exited at start (is Debian's pgbouncer installed?): ${stderr}`);
    }
    const client = new pg.Client({ connectionString: url(upstream) });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`pgbouncer never passed a query through: ${String(err)}\n${stderr}`);
      }
      await sleep(100);
    }
  }
  return { port, pid: child.pid ?? 0, userlist: path.join(dir, 'userlist.txt'), url, stop };
}

/** What vitest's global setup provides when the suite runs through PgBouncer (TEST_PGBOUNCER=1). */
export interface PoolerInfo {
  port: number;
  /** PgBouncer's auth_file: a role must be listed there to pass (see allowPoolerUser). */
  userlist: string;
  pid: number;
}
