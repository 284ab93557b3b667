import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { connectionOptions } from '../../src/db/database.ts';
import { throughPooler } from '../helpers/database-env.ts';
import { useTestServer } from '../helpers/server-process.ts';

// Small limits, so that the test sees each one act.
const server = useTestServer({
  env: {
    DB_STATEMENT_TIMEOUT_MS: '300',
    DB_LOCK_TIMEOUT_MS: '200',
    DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '400',
  },
});

// Through PgBouncer the startup parameter is refused; the role's settings take its place (roles.test.ts).
describe.skipIf(throughPooler())('server-side session timeouts as startup parameters', () => {
  it('are set on the Kysely pool and on pg-boss', async () => {
    const show = async (name: string) =>
      (await sql<Record<string, string>>`select current_setting(${name}) as v`.execute(server.rt.db)).rows[0]!
        .v;
    expect(await show('statement_timeout')).toBe('300ms');
    expect(await show('lock_timeout')).toBe('200ms');
    expect(await show('idle_in_transaction_session_timeout')).toBe('400ms');
    const boss = await server.rt.boss
      .getDb()
      .executeSql(`select current_setting('statement_timeout') as s, current_setting('lock_timeout') as l`);
    expect(boss.rows[0]).toEqual({ s: '300ms', l: '200ms' });
  });

  it('send nothing when all are off (poolers refuse the startup parameter)', () => {
    expect(
      connectionOptions({ statementTimeoutMs: 0, lockTimeoutMs: 0, idleInTransactionTimeoutMs: 0 }),
    ).toBe(undefined);
    expect(connectionOptions({ statementTimeoutMs: 0 })).toBe(
      '-c lock_timeout=10000 -c idle_in_transaction_session_timeout=60000',
    );
  });

  it('cancel a stuck statement (57014)', async () => {
    await expect(sql`select pg_sleep(5)`.execute(server.rt.db)).rejects.toMatchObject({ code: '57014' });
  });

  it('end a session left idle inside a transaction, releasing its locks', async () => {
    const { db } = server.rt;
    let pid = 0;
    const held = db
      .transaction()
      .execute(async (trx) => {
        pid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
        await sql`select * from tasks for update`.execute(trx);
        // A client that stopped talking mid-transaction: wait until the server has ended the session.
        const deadline = Date.now() + 10_000;
        for (;;) {
          const alive = await sql<{
            n: number;
          }>`select count(*)::int as n from pg_stat_activity where pid = ${pid}`
            .execute(db)
            .then((r) => r.rows[0]!.n);
          if (alive === 0 || Date.now() > deadline) break;
          await sleep(50);
        }
        await sql`select 1`.execute(trx);
      })
      .then(
        () => 'committed',
        (err: { code?: string; message?: string }) => err.code ?? err.message ?? 'failed',
      );
    expect(await held).not.toBe('committed');
    // The pool recovers: new statements run.
    expect((await sql<{ one: number }>`select 1 as one`.execute(db)).rows[0]!.one).toBe(1);
  });
});
