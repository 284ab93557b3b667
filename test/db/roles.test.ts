import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../src/db/database.ts';
import { createLogger } from '../../src/log.ts';
import { migrateDatabase } from '../../src/migrate.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { allowPoolerUser } from '../helpers/database-env.ts';
import { admin } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { TEST_TOOLS } from '../helpers/test-tools.ts';
import { withDatabase } from '../helpers/urls.ts';

// Two real roles: the owner runs the migrations; the runtime role owns nothing and may not run DDL.
const suffix = randomBytes(4).toString('hex');
const OWNER = `mcp_owner_${suffix}`;
const APP = `mcp_app_${suffix}`;
const DB = `mcp_test_roles_${suffix}`;
const PASSWORD = randomBytes(12).toString('hex');

const asRole = (role: string, database = DB) => {
  const u = new URL(withDatabase(inject('adminUrl'), database));
  u.username = role;
  u.password = PASSWORD;
  return u.toString();
};

/** Runs one statement as `role` and returns its SQLSTATE, or 'ok'. */
async function tryAs(role: string, statement: string): Promise<string> {
  const c = new pg.Client({ connectionString: asRole(role) });
  await c.connect();
  try {
    await c.query(statement);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  } finally {
    await c.end();
  }
}

const runtimes: ServerProcess[] = [];
const start = async (env: Record<string, string>) => {
  const rt = await startTestProcess({
    databaseUrl: asRole(APP),
    tools: [...SHIPPED_TOOLS, ...TEST_TOOLS],
    env: { TASK_PURGE_GRACE_MS: '0', ...env },
  });
  runtimes.push(rt);
  return rt;
};

beforeAll(async () => {
  await admin(`create role ${OWNER} login password '${PASSWORD}' nosuperuser nocreatedb nocreaterole`);
  await admin(`create role ${APP} login password '${PASSWORD}' nosuperuser nocreatedb nocreaterole`);
  await admin(`create database ${DB} owner ${OWNER}`);
  // The documented way to give the runtime role its timeouts when a pooler refuses startup parameters.
  await admin(`alter role ${APP} in database ${DB} set statement_timeout = '30s'`);
  await admin(`alter role ${APP} in database ${DB} set lock_timeout = '10s'`);
  await admin(`alter role ${APP} in database ${DB} set idle_in_transaction_session_timeout = '60s'`);
  await allowPoolerUser(APP, PASSWORD, DB);
});

afterAll(async () => {
  await Promise.all(runtimes.map((rt) => rt.stop()));
  await admin(`drop database if exists ${DB} with (force)`);
  await admin(`drop role if exists ${APP}`);
  await admin(`drop role if exists ${OWNER}`);
});

describe('an owner role that migrates and a runtime role that owns nothing', () => {
  it('a runtime role cannot start on a database nobody migrated (MIGRATE_ON_START=false)', async () => {
    await expect(start({ MIGRATE_ON_START: 'false' })).rejects.toThrow(
      /schema is not current .*run `durable-mcp-tasks migrate` .*as the owner role/,
    );
  });

  it('the owner migrates and grants the runtime role (twice: it is idempotent)', async () => {
    const log = createLogger('warn');
    await migrateDatabase({ connectionString: asRole(OWNER), log, appRole: APP });
    await migrateDatabase({ connectionString: asRole(OWNER), log, appRole: APP });

    // Every table the migrations made, ours and pg-boss's, is readable and writable by the runtime role.
    const { db } = createDb({ connectionString: asRole(OWNER), max: 1 });
    const { rows } = await sql<{ t: string; dml: boolean }>`
      select t, bool_and(has_table_privilege(${APP}, t, p)) as dml
      from (select format('%I.%I', schemaname, tablename) as t from pg_tables where tableowner = ${OWNER}) tables,
           unnest(array['select', 'insert', 'update', 'delete']) p
      group by t order by t`.execute(db);
    await db.destroy();
    const ours = rows.filter((r) => !r.t.startsWith('public.kysely_migration'));
    expect(ours.map((r) => r.t)).toEqual(expect.arrayContaining(['public.tasks', 'pgboss.job']));
    expect(ours.filter((r) => !r.dml)).toEqual([]);
  });

  it('the runtime role may not change the schema', async () => {
    expect(await tryAs(APP, 'create table intruder (id int)')).toBe('42501');
    expect(await tryAs(APP, 'alter table tasks add column intruder int')).toBe('42501');
    expect(await tryAs(APP, 'drop table pgboss.job')).toBe('42501');
    expect(await tryAs(APP, 'select count(*) from tasks')).toBe('ok');
  });

  it('a runtime role told to migrate at start gets a clear error', async () => {
    await expect(start({ MIGRATE_ON_START: 'true' })).rejects.toThrow(
      /may not change the schema.*durable-mcp-tasks migrate.*MIGRATE_ON_START=false/,
    );
  });

  it('serves tasks as the runtime role: run, input, cancel, expiry and purge', async () => {
    const rt = await start({ MIGRATE_ON_START: 'false' });
    const mcp = new RawMcp(rt.url);
    const setting = async (name: string) =>
      (await sql<{ v: string }>`select current_setting(${name}) as v`.execute(rt.db)).rows[0]?.v;
    expect(await setting('session_authorization')).toBe(APP);
    expect(await setting('statement_timeout')).toBe('30s');
    expect(await setting('idle_in_transaction_session_timeout')).toBe('1min');

    const analyzed = await mcp.callTool('analyze_numbers', { count: 1000, chunkSize: 500 });
    expect((await mcp.waitForTask(analyzed.taskId as string)).status).toBe('completed');

    const confirm = (await mcp.callTool('confirm_action', { action: 'deploy' })).taskId as string;
    await mcp.waitForTask(confirm, (t) => t.status === 'input_required');
    await mcp.result('tasks/update', {
      taskId: confirm,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    expect((await mcp.waitForTask(confirm)).status).toBe('completed');

    const waiting = (await mcp.callTool('confirm_action', { action: 'drop' })).taskId as string;
    await mcp.waitForTask(waiting, (t) => t.status === 'input_required');
    await mcp.result('tasks/cancel', { taskId: waiting });
    expect((await mcp.getTask(waiting)).status).toBe('cancelled');

    // The sweeper (expire, then purge) and the shared request-state secret work as the runtime role.
    const expiring = (await mcp.callTool('expiring')).taskId as string;
    await mcp.waitForTask(expiring, (t) => t.status === 'input_required');
    const deadline = Date.now() + 10_000;
    let purged = 0;
    while (purged === 0 && Date.now() < deadline) {
      purged += (await rt.workers!.sweep()).purged;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(purged).toBeGreaterThanOrEqual(1);
    expect(await mcp.error('tasks/get', { taskId: expiring })).toMatchObject({ code: -32602 });
  });
});
