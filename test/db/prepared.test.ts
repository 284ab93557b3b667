// Named prepared statements (src/db/prepared.ts) on a real Postgres: what gets named, a migration that
// changes a statement's result columns, and a server connection that lost its statements (what a
// transaction-mode pooler does).
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb, type Db } from '../../src/db/database.ts';
import { statementNames } from '../../src/db/prepared.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let tdb: TestDatabase;
let db: Db;
let pool: ReturnType<typeof createDb>['pool'];

beforeAll(async () => {
  tdb = await createTestDatabase();
  // One connection: what the test prepares is what the next query finds.
  ({ db, pool } = createDb({ connectionString: tdb.url, max: 1, prepare: true }));
  await sql`create table prepared_probe (id int primary key, a text)`.execute(db);
  await sql`insert into prepared_probe values (1, 'one'), (2, 'two')`.execute(db);
});
afterAll(async () => {
  await db?.destroy();
  await tdb?.drop();
});

const prepared = async () =>
  (await pool.query<{ statement: string }>('select statement from pg_prepared_statements')).rows.map(
    (r) => r.statement,
  );

// Through PgBouncer the connection a statement was prepared on is not the next query's.
describe.skipIf(inject('pooler') !== undefined)('named prepared statements', () => {
  it('names a statement with parameters from its second run, through Kysely and through pool.query', async () => {
    const byId = (id: number) =>
      sql<{ a: string }>`select a from prepared_probe where id = ${id}`.execute(db);
    expect((await byId(1)).rows).toEqual([{ a: 'one' }]);
    expect(await prepared()).toEqual([]);
    expect((await byId(2)).rows).toEqual([{ a: 'two' }]);
    expect((await byId(1)).rows).toEqual([{ a: 'one' }]);
    expect(await prepared()).toEqual(['select a from prepared_probe where id = $1']);

    // pg-pool's query (pg-boss's path) passes a callback.
    const text = 'select count(*)::int as n from prepared_probe where id >= $1';
    for (let i = 0; i < 3; i++) expect((await pool.query(text, [i])).rows).toEqual([{ n: i === 2 ? 1 : 2 }]);
    expect(await prepared()).toContain(text);

    // Without parameters nothing is named (a migration's DDL, several commands in one text).
    for (let i = 0; i < 3; i++) await pool.query('select 1; select 2');
    expect(await prepared()).toHaveLength(2);
  });

  it('re-prepares a statement whose result columns a migration changed', async () => {
    const all = () => sql<Record<string, unknown>>`select * from prepared_probe where id = ${1}`.execute(db);
    await all();
    expect((await all()).rows).toEqual([{ id: 1, a: 'one' }]);
    await sql`alter table prepared_probe add column b text default 'bee'`.execute(db);
    // Postgres refuses the cached plan once; the next run prepares the statement under a new name.
    await expect(all()).rejects.toMatchObject({ code: '0A000' });
    expect((await all()).rows).toEqual([{ id: 1, a: 'one', b: 'bee' }]);
  });

  it('stops naming when a connection does not have its statements, as behind a transaction-mode pooler', async () => {
    const text = 'select a from prepared_probe where id = $1 and a is not null';
    await pool.query(text, [1]);
    await pool.query(text, [1]);
    expect(await prepared()).toContain(text);
    // What a pooler does by handing the next transaction another server connection.
    await pool.query('deallocate all');
    await expect(pool.query(text, [2])).rejects.toMatchObject({ code: '26000' });
    expect(statementNames.enabled).toBe(false);
    expect((await pool.query(text, [2])).rows).toEqual([{ a: 'two' }]);
    expect((await sql<{ a: string }>`select a from prepared_probe where id = ${2}`.execute(db)).rows).toEqual(
      [{ a: 'two' }],
    );
    expect(await prepared()).toEqual([]);
  });
});
