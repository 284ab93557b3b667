import '../../src/node-version.ts';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type RunningPostgres } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/log.ts';
import { migrateDatabase } from '../../src/migrate.ts';
import { startPgBouncer, type PoolerInfo, type RunningPgBouncer } from '../helpers/pgbouncer.ts';
import { withDatabase } from '../helpers/urls.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A connection string to a maintenance database of the test server (for CREATE DATABASE). */
    adminUrl: string;
    /** A database migrated once (ours and pg-boss's schema) that every test file clones. */
    templateDb: string;
    /** Set when the suite runs through PgBouncer in transaction mode (TEST_PGBOUNCER=1). */
    pooler: PoolerInfo | undefined;
  }
}

let embedded: RunningPostgres | undefined;
let pgbouncer: RunningPgBouncer | undefined;

/**
 * The test database server: TEST_DATABASE_URL (e.g. the machine's Postgres) when set, else an
 * embedded Postgres under .data/test-postgres. One template database is migrated here, once.
 */
export async function setup(project: TestProject): Promise<void> {
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (adminUrl === undefined || adminUrl === '') {
    embedded = await startEmbeddedPostgres({
      dataDir: process.env.TEST_EMBEDDED_PG_DIR ?? '.data/test-postgres',
      port: Number(process.env.TEST_EMBEDDED_PG_PORT ?? 54339),
      database: 'postgres',
      log: createLogger('warn'),
    });
    adminUrl = embedded.connectionString;
  }
  const templateDb = `mcp_test_template_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${templateDb}`);
  await admin.query(`create database ${templateDb}`);
  // Databases of earlier runs that were kept for inspection stay until the next run of the same pid.
  await admin.end();

  await migrateDatabase({ connectionString: withDatabase(adminUrl, templateDb), log: createLogger('warn') });

  if (process.env.TEST_PGBOUNCER === '1') pgbouncer = await startPgBouncer({ upstream: adminUrl });
  project.provide(
    'pooler',
    pgbouncer && { port: pgbouncer.port, userlist: pgbouncer.userlist, pid: pgbouncer.pid },
  );
  project.provide('adminUrl', adminUrl);
  project.provide('templateDb', templateDb);
}

export async function teardown(): Promise<void> {
  await pgbouncer?.stop();
  await embedded?.stop();
}
