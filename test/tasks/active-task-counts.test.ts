// A principal's active tasks are counted by triggers as tasks change (migration 20261212000000), not by a
// scan at every create: the count must equal the tasks it counts after any mix of changes, from any
// number of connections at once. Real Postgres.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeTaskCount } from '../../src/db/active-tasks.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb.drop();
});

/** What the triggers say `principal` holds. */
const counted = async (principal: string) =>
  (await sql<{ n: number }>`${activeTaskCount(principal)}`.execute(tdb.db)).rows[0]!.n;

/** What `principal` holds, counted from the tasks themselves. */
const held = async (principal: string) =>
  (
    await sql<{ n: number }>`select count(*)::int as n from tasks where principal = ${principal}
      and parent_task_id is null and status in ('working', 'input_required')`.execute(tdb.db)
  ).rows[0]!.n;

const setStatus = (taskId: string, status: string) =>
  sql`update tasks set status = ${status} where task_id = ${taskId}`.execute(tdb.db);

describe('active task counts', () => {
  it('follow every change of a task: create, input_required, the terminal statuses, delete, a new principal', async () => {
    const ids = await Promise.all(
      Array.from({ length: 6 }, () => insertTestTask(tdb.db, { principal: 'p1' })),
    );
    expect(await counted('p1')).toBe(6);
    await setStatus(ids[0]!, 'input_required'); // still active
    await setStatus(ids[1]!, 'completed');
    await setStatus(ids[2]!, 'failed');
    await setStatus(ids[3]!, 'cancelled');
    expect(await counted('p1')).toBe(3);
    await setStatus(ids[3]!, 'working'); // back (an operator's retry)
    await sql`update tasks set principal = 'p2' where task_id = ${ids[4]!}`.execute(tdb.db);
    await sql`delete from tasks where task_id in (${ids[0]!}, ${ids[1]!})`.execute(tdb.db);
    // Updates of anything else change nothing.
    await sql`update tasks set status_message = 'x', last_updated_at = now() where principal = 'p1'`.execute(
      tdb.db,
    );
    for (const p of ['p1', 'p2']) expect(await counted(p)).toBe(await held(p));
    expect([await counted('p1'), await counted('p2')]).toEqual([2, 1]);
  });

  it('do not count a map item (a task with a parent)', async () => {
    const parent = await insertTestTask(tdb.db, { principal: 'p3' });
    await sql`insert into tasks (task_id, principal, tool_name, arguments, client_capabilities, status, ttl_ms,
        poll_interval_ms, parent_task_id, map_name, map_index)
      values (${parent + '.0'}, 'p3', 't', '{}', '{}', 'working', null, 100, ${parent}, 'm', 0)`.execute(
      tdb.db,
    );
    expect(await counted('p3')).toBe(1);
    await sql`update tasks set status = 'completed' where parent_task_id = ${parent}`.execute(tdb.db);
    expect(await counted('p3')).toBe(1);
  });

  it('stay exact under concurrent creates, completions and deletes of one principal', async () => {
    const lanes = Array.from({ length: 8 }, async (_, lane) => {
      for (let i = 0; i < 25; i++) {
        const id = await insertTestTask(tdb.db, { principal: 'busy' });
        if (i % 3 === 0) await setStatus(id, 'completed');
        if (i % 5 === lane % 5) await sql`delete from tasks where task_id = ${id}`.execute(tdb.db);
      }
    });
    await Promise.all(lanes);
    expect(await counted('busy')).toBe(await held('busy'));
    expect(await counted('busy')).toBeGreaterThan(0);
  });

  it('are emptied with the tasks by a TRUNCATE', async () => {
    await insertTestTask(tdb.db, { principal: 'p4' });
    await sql`truncate tasks cascade`.execute(tdb.db);
    expect(await counted('p4')).toBe(0);
    await insertTestTask(tdb.db, { principal: 'p4' });
    expect(await counted('p4')).toBe(1);
  });
});
