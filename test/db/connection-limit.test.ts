import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/database.ts';
import { admin, createTestDatabase, type TestDatabase } from '../helpers/db.ts';

// A role whose connection limit is below the pool's max: the same refusal (53300) as max_connections.
const ROLE = `mcp_limited_${randomBytes(4).toString('hex')}`;
const PASSWORD = randomBytes(12).toString('hex');
let tdb: TestDatabase;

beforeAll(async () => {
  tdb = await createTestDatabase();
  await admin(`create role ${ROLE} login password '${PASSWORD}' connection limit 2`);
});
afterAll(async () => {
  await tdb?.drop();
  await admin(`drop role if exists ${ROLE}`);
});

const limitedUrl = () => {
  const u = new URL(tdb.url);
  u.username = ROLE;
  u.password = PASSWORD;
  return u.toString();
};

describe('a pool whose connections Postgres refuses (53300)', () => {
  it('queues on the connections it holds instead of failing the queries', async () => {
    const { db } = createDb({ connectionString: limitedUrl(), max: 8, connectTimeoutMs: 10_000 });
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 24 }, () => sql`select pg_sleep(0.02)`.execute(db)),
      );
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    } finally {
      await db.destroy();
    }
  });

  it('fails a query (for -32603) once its connection timeout passes with no connection to be had', async () => {
    const holders = await Promise.all(
      [1, 2].map(async () => {
        const c = new pg.Client({ connectionString: limitedUrl() });
        await c.connect();
        return c;
      }),
    );
    const { db } = createDb({ connectionString: limitedUrl(), max: 4, connectTimeoutMs: 300 });
    try {
      await expect(sql`select 1`.execute(db)).rejects.toMatchObject({ code: '53300' });
      // Once a slot frees up, the same pool serves again.
      await holders[0]!.end();
      await expect(sql`select 1 as one`.execute(db)).resolves.toMatchObject({ rows: [{ one: 1 }] });
    } finally {
      await db.destroy();
      await holders[1]!.end();
    }
  });
});
