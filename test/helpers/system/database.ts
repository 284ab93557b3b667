import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type RunningPostgres } from '../../../src/db/embedded.ts';
import { createLogger } from '../../../src/log.ts';
import { startPgBouncer } from '../pgbouncer.ts';
import { freePort } from '../ports.ts';
import { withDatabase } from '../urls.ts';

export type Pooler = 'none' | 'pgbouncer';

/** The database of a system test, and how its processes reach it. */
export interface SystemDatabase {
  /** The database itself (LISTEN, migrations, the test's own checks), never through the pooler. */
  readonly url: string;
  /** The processes' database settings: DATABASE_URL, and DATABASE_DIRECT_URL behind a pooler. */
  readonly env: Record<string, string>;
  readonly describe: string;
  /** A new client on `url`, connected; its caller ends it. */
  connect(): Promise<pg.Client>;
  /** Restarts Postgres under the processes (a private Postgres only): `fast` or `immediate`. */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  stop(): Promise<void>;
}

export interface DatabaseOptions {
  /** Names the temporary directory or database. */
  name: string;
  /**
   * `'private'` (the default): an embedded Postgres of the test's own, which it may restart; or a fresh
   * database created on the server at `server` (a maintenance database URL), dropped at stop: empty, or a
   * copy of `template` (a vitest file's: the suite's migrated template database).
   */
  postgres?: 'private' | { server: string; template?: string };
  /** Settings of the private Postgres (`-c name=value`), e.g. max_connections. */
  settings?: Record<string, string>;
  /** `pgbouncer`: a real PgBouncer in transaction mode between the processes and the database. */
  pooler?: Pooler;
}

/** Opens the test's database: a private Postgres or a fresh database on a server, with or without a pooler. */
export async function openDatabase(opts: DatabaseOptions): Promise<SystemDatabase> {
  const onServer = opts.postgres === undefined || opts.postgres === 'private' ? undefined : opts.postgres;
  const server = onServer?.server;
  const db =
    onServer === undefined
      ? await privatePostgres(opts.name, opts.settings)
      : await databaseOn(onServer.server, opts.name, onServer.template);
  const pooled = await poolerFor(db.url, opts.pooler ?? 'none').catch(async (err: unknown) => {
    await db.stop();
    throw err;
  });
  return {
    url: db.url,
    env: pooled.env,
    describe: `${server === undefined ? 'a private Postgres' : `database ${new URL(db.url).pathname.slice(1)}`}, ${pooled.describe}`,
    connect: async () => {
      const client = new pg.Client({ connectionString: db.url });
      client.on('error', () => {});
      await client.connect();
      return client;
    },
    restart: (mode) => db.restart(mode),
    stop: async () => {
      await pooled.stop();
      await db.stop();
    },
  };
}

interface Database {
  url: string;
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  stop(): Promise<void>;
}

/** An embedded Postgres of the test's own in a temporary directory, removed at stop. */
async function privatePostgres(name: string, settings?: Record<string, string>): Promise<Database> {
  const dir = mkdtempSync(path.join(tmpdir(), `mcp-${name}-pg-`));
  chmodSync(dir, 0o755); // as root, the embedded Postgres runs as the postgres user, who must reach its data
  const options = {
    dataDir: path.join(dir, 'data'),
    port: await freePort(),
    database: name.replaceAll('-', '_'),
    log: createLogger('warn'),
    ...(settings === undefined ? {} : { settings }),
  };
  let postgres: RunningPostgres = await startEmbeddedPostgres(options);
  return {
    url: postgres.connectionString,
    async restart(mode = 'fast') {
      await postgres.stop({ mode });
      postgres = await startEmbeddedPostgres(options);
    },
    async stop() {
      await postgres.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A fresh database on a running server (empty, or a copy of `template`), dropped (with its connections) at
 * stop; kept instead when KEEP_TEST_DB is set, for inspection, as the suite's own databases are.
 */
export async function databaseOn(adminUrl: string, name: string, template?: string): Promise<Database> {
  const database = `${name.replaceAll('-', '_')}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${database}${template === undefined ? '' : ` template ${template}`}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(adminUrl, database),
    restart: () => Promise.reject(new Error('only a private Postgres can be restarted')),
    async stop() {
      if (process.env.KEEP_TEST_DB) return;
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${database} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * With `pgbouncer`, PgBouncer (transaction mode) goes between the processes and `dbUrl`, set up as
 * docs/postgres.md says: DATABASE_URL is the pooler, DATABASE_DIRECT_URL the database (LISTEN,
 * migrations), and the session timeouts are the role's. PgBouncer stays up while Postgres restarts.
 */
async function poolerFor(
  dbUrl: string,
  pooler: Pooler,
): Promise<{ env: Record<string, string>; describe: string; stop(): Promise<void> }> {
  if (pooler === 'none') return { env: { DATABASE_URL: dbUrl }, describe: 'direct', stop: async () => {} };
  const database = new URL(dbUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  try {
    for (const [name, value] of [
      ['statement_timeout', '30s'],
      ['lock_timeout', '10s'],
      ['idle_in_transaction_session_timeout', '60s'],
    ]) {
      await admin.query(`alter role current_user in database "${database}" set ${name} = '${value}'`);
    }
  } finally {
    await admin.end();
  }
  const bouncer = await startPgBouncer({ upstream: dbUrl });
  return {
    env: {
      DATABASE_URL: bouncer.url(dbUrl),
      DATABASE_DIRECT_URL: dbUrl,
      DB_STATEMENT_TIMEOUT_MS: '0',
      DB_LOCK_TIMEOUT_MS: '0',
      DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '0',
    },
    describe: `through PgBouncer :${bouncer.port} (transaction mode)`,
    stop: () => bouncer.stop(),
  };
}

/** CLUSTER_POOLER from the environment: `pgbouncer`, or `none` when unset. */
export function poolerFromEnv(value = process.env.CLUSTER_POOLER): Pooler {
  if (value === undefined || value === '' || value === 'none') return 'none';
  if (value !== 'pgbouncer') throw new Error(`CLUSTER_POOLER must be pgbouncer or none, not ${value}`);
  return value;
}
