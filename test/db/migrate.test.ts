import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { FileMigrationProvider, Migrator, NO_MIGRATIONS } from 'kysely/migration';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import * as endAttempts from '../../migrations/20261209000000_end_attempts_of_finished_tasks.ts';
import * as countActive from '../../migrations/20261212000000_count_active_tasks_per_principal.ts';
import { activeTaskCount } from '../../src/db/active-tasks.ts';
import { createDb } from '../../src/db/database.ts';
import { migrateToLatest, MIGRATIONS_DIR } from '../../src/db/migrations.ts';
import { createBoss, ensureRunQueue, RUN_QUEUE } from '../../src/queue/boss.ts';
import { admin } from '../helpers/db.ts';
import { withDatabase } from '../helpers/urls.ts';

const name = `mcp_test_empty_${randomBytes(4).toString('hex')}`;
let url: string;

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

  it('end_attempts_of_finished_tasks ends the attempts finished tasks left open, and goes down', async () => {
    const { db } = createDb({ connectionString: url, max: 1 });
    const trigger = async () =>
      (await sql`select 1 from pg_trigger where tgname = 'tasks_end_attempts'`.execute(db)).rows.length;
    try {
      await migrateToLatest(db);
      await endAttempts.down(db);
      expect(await trigger()).toBe(0);
      // A task that completed on its 2nd attempt, its 1st taken over from a dead worker, neither ended;
      // and a running one's attempt, which must stay open.
      await sql`
        insert into tasks (task_id, principal, tool_name, arguments, client_capabilities, status, ttl_ms,
          poll_interval_ms, attempt, last_updated_at)
        values ('done', 'p', 't', '{}', '{}', 'completed', null, 100, 2, '2026-01-01T00:00:09Z'),
               ('running', 'p', 't', '{}', '{}', 'working', null, 100, 1, '2026-01-01T00:00:09Z')`.execute(
        db,
      );
      await sql`
        insert into task_attempts (task_id, attempt, worker_id, claimed_at, lease_expires_at)
        values ('done', 1, 'w1', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z'),
               ('done', 2, 'w2', '2026-01-01T00:00:05Z', '2026-01-01T00:00:06Z'),
               ('running', 1, 'w1', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z')`.execute(db);
      await endAttempts.up(db);
      expect(await trigger()).toBe(1);
      const { rows } = await sql<{
        task_id: string;
        attempt: number;
        outcome: string | null;
        ended_at: Date | null;
      }>`
        select task_id, attempt, outcome, ended_at from task_attempts order by task_id, attempt`.execute(db);
      expect(rows).toEqual([
        { task_id: 'done', attempt: 1, outcome: 'lease_lost', ended_at: new Date('2026-01-01T00:00:05Z') },
        { task_id: 'done', attempt: 2, outcome: 'completed', ended_at: new Date('2026-01-01T00:00:09Z') },
        { task_id: 'running', attempt: 1, outcome: null, ended_at: null },
      ]);
    } finally {
      await sql`delete from tasks where task_id in ('done', 'running')`.execute(db);
      await db.destroy();
    }
  });

  it('count_active_tasks_per_principal counts the active tasks already stored, and goes down', async () => {
    const { db } = createDb({ connectionString: url, max: 1 });
    const count = async (principal: string) =>
      (await sql<{ n: number }>`${activeTaskCount(principal)}`.execute(db)).rows[0]!.n;
    try {
      await migrateToLatest(db);
      await countActive.down(db);
      // Tasks of every status, of two principals, stored before the counts existed.
      const statuses = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
      for (const [i, status] of [...statuses, 'working', 'working'].entries()) {
        await sql`insert into tasks (task_id, principal, tool_name, arguments, client_capabilities, status, ttl_ms,
            poll_interval_ms)
          values (${`before-${i}`}, ${i < 5 ? 'p' : 'q'}, 't', '{}', '{}', ${status}, null, 100)`.execute(db);
      }
      // As the migrator runs it: in a transaction (its lock holds task writes until the counts are filled).
      const up = () => db.transaction().execute((trx) => countActive.up(trx));
      await up();
      expect([await count('p'), await count('q')]).toEqual([2, 2]);
      await sql`update tasks set status = 'completed' where task_id = 'before-0'`.execute(db);
      expect(await count('p')).toBe(1);
      await countActive.down(db);
      await up();
      expect([await count('p'), await count('q')]).toEqual([1, 2]);
    } finally {
      await sql`delete from tasks where task_id like 'before-%'`.execute(db);
      await db.destroy();
    }
  });
});
