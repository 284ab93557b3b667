import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createDb, type Db } from '../../src/db/database.ts';
import { newTaskId } from '../../src/tasks/ids.ts';
import { insertTask, type NewTask } from '../../src/tasks/store/create.ts';
import { withDatabase } from './urls.ts';

export interface TestDatabase {
  url: string;
  name: string;
  db: Db;
  /** Drops the database (kept instead when KEEP_TEST_DB is set, for inspection). */
  drop(): Promise<void>;
}

/**
 * Runs one statement on the test server's maintenance database (CREATE or DROP of a database or role), on
 * a client of its own.
 */
export async function admin(query: string): Promise<void> {
  const c = new pg.Client({ connectionString: inject('adminUrl') });
  await c.connect();
  try {
    await c.query(query);
  } finally {
    await c.end();
  }
}

/** A fresh database cloned from the migrated template: real Postgres, real schema, no mocks. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl');
  const name = `mcp_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${inject('templateDb')}`);
    if (inject('pooler') !== undefined) {
      // Through PgBouncer the timeouts cannot be startup parameters: they are the role's, as documented.
      await admin.query(
        `alter role current_user in database ${name} set statement_timeout = '30s'; ` +
          `alter role current_user in database ${name} set lock_timeout = '10s'; ` +
          `alter role current_user in database ${name} set idle_in_transaction_session_timeout = '60s'`,
      );
    }
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const { db } = createDb({ connectionString: url, max: 4, applicationName: 'test' });
  return {
    url,
    name,
    db,
    async drop() {
      await db.destroy();
      if (process.env.KEEP_TEST_DB) return;
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** How many task rows there are: tests use it to prove that a rejected request created none. */
export async function countTasks(db: Db): Promise<number> {
  const row = await db
    .selectFrom('tasks')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** What a test task is unless a test says otherwise: alice's, of tool `t`, a minute's TTL. */
export const TEST_TASK = {
  principal: 'alice',
  toolName: 't',
  arguments: {},
  prepared: undefined,
  clientCapabilities: {},
  ttlMs: 60_000,
  pollIntervalMs: 100,
} satisfies Omit<NewTask, 'taskId'>;

/**
 * A task inserted straight into the store, `working` and unclaimed, as tools/call would leave it: alice's,
 * of tool `t`, a minute's TTL, unless `fields` says otherwise. Its id.
 */
export async function insertTestTask(db: Db, fields: Partial<NewTask> = {}): Promise<string> {
  const view = await insertTask(db, { taskId: newTaskId(), ...TEST_TASK, ...fields });
  return view.taskId;
}
