import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { FileMigrationProvider, Migrator, NO_MIGRATIONS } from 'kysely/migration';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createDb } from '../../src/db/database.ts';
import { migrateToLatest, MIGRATIONS_DIR } from '../../src/db/migrate.ts';
import { createBoss, ensureRunQueue, RUN_QUEUE } from '../../src/queue/boss.ts';
import { withDatabase } from '../helpers/urls.ts';

const name = `mcp_test_empty_${randomBytes(4).toString('hex')}`;
let url: string;

async function admin(query: string) {
  const c = new pg.Client({ connectionString: inject('adminUrl') });
  await c.connect();
  try {
    await c.query(query);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await admin(`create database ${name}`);
  url = withDatabase(inject('adminUrl'), name);
});
afterAll(async () => {
  await admin(`drop database if exists ${name} with (force)`);
});

const tables = async (db: ReturnType<typeof createDb>['db']) =>
  (
    await sql<{
      t: string;
    }>`select tablename as t from pg_tables where schemaname = 'public' order by 1`.execute(db)
  ).rows.map((r) => r.t);

describe('migrations', () => {
  it('are safe when several instances start at once on an empty database', async () => {
    const instances = Array.from({ length: 4 }, () => createDb({ connectionString: url, max: 2 }));
    await Promise.all(instances.map(({ db }) => migrateToLatest(db)));
    const bosses = instances.map(() => createBoss({ connectionString: url, max: 2, migrate: true }));
    for (const boss of bosses) boss.on('error', () => {});
    await Promise.all(bosses.map((boss) => boss.start()));
    await Promise.all(bosses.map((boss) => ensureRunQueue(boss)));
    expect((await bosses[0]!.getQueue(RUN_QUEUE))?.expireInSeconds).toBe(10);
    expect(await tables(instances[0]!.db)).toEqual(
      expect.arrayContaining(['tasks', 'task_input_requests', 'task_steps', 'server_secrets']),
    );
    await Promise.all(bosses.map((boss) => boss.stop({ graceful: false })));
    await Promise.all(instances.map(({ db }) => db.destroy()));
  });

  it('go down to nothing and up again', async () => {
    const { db } = createDb({ connectionString: url, max: 1 });
    const migrator = new Migrator({
      db,
      provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS_DIR }),
    });
    const down = await migrator.migrateTo(NO_MIGRATIONS);
    expect(down.error).toBeUndefined();
    expect(await tables(db)).not.toContain('tasks');
    await migrateToLatest(db);
    expect(await tables(db)).toContain('tasks');
    await db.destroy();
  });
});
