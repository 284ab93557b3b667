// The store of child tasks (migration add_task_children, store/children.ts), driven by hand: a spawn is
// idempotent by parent and name (sequential and concurrent, as a replay and a lost-lease attempt would
// make it), fenced by the parent's attempt, bounded by the limits; a parent that ends cancels its
// children not started detached (idle ones at once, a running one by its cancel flag).
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { BossTaskQueue } from '../../src/queue/boss.ts';
import { spawnChild } from '../../src/tasks/store/children.ts';
import { LeaseLostError } from '../../src/tasks/store/lease.ts';
import { useDatabaseWithBoss } from '../helpers/database-with-boss.ts';
import { insertTestTask, TEST_TASK } from '../helpers/db.ts';

const store = useDatabaseWithBoss();
const LIMITS = { maxDepth: 5, maxPerTask: 10 };

const child = (name: string, detached = false) => ({ name, detached, ...TEST_TASK });

const rowsOf = async (parent: string) =>
  (
    await sql<{ task_id: string; status: string; spawn_name: string; spawn_depth: number; cancel: boolean }>`
      select task_id, status, spawn_name, spawn_depth, cancel_requested_at is not null as cancel
      from tasks where spawned_by = ${parent} order by spawn_name`.execute(store.tdb.db)
  ).rows;

describe('spawnChild', () => {
  it('creates one child per parent and name, however often and however concurrently it is asked', async () => {
    const queue = new BossTaskQueue(store.boss);
    const parent = await insertTestTask(store.tdb.db);
    const at = { taskId: parent, attempt: 0 };
    const first = await spawnChild(store.tdb.db, queue, at, child('a'), LIMITS);
    const again = await spawnChild(store.tdb.db, queue, at, child('a'), LIMITS);
    const racing = await Promise.all(
      Array.from({ length: 6 }, () => spawnChild(store.tdb.db, queue, at, child('b'), LIMITS)),
    );
    expect(again).toEqual(first);
    expect(new Set(racing.map((r) => ('taskId' in r ? r.taskId : 'refused'))).size).toBe(1);
    const rows = await rowsOf(parent);
    expect(rows.map((r) => [r.spawn_name, r.spawn_depth])).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
  });

  it('is fenced by the parent’s attempt, and refused past the limits with the setting named', async () => {
    const queue = new BossTaskQueue(store.boss);
    const parent = await insertTestTask(store.tdb.db);
    await expect(
      spawnChild(store.tdb.db, queue, { taskId: parent, attempt: 7 }, child('x'), LIMITS),
    ).rejects.toBeInstanceOf(LeaseLostError);
    const at = { taskId: parent, attempt: 0 };
    const limits = { maxDepth: 1, maxPerTask: 2 };
    const one = await spawnChild(store.tdb.db, queue, at, child('1'), limits);
    await spawnChild(store.tdb.db, queue, at, child('2'), limits);
    expect(await spawnChild(store.tdb.db, queue, at, child('3'), limits)).toEqual({
      refused: { setting: 'MAX_CHILDREN_PER_TASK', limit: 2 },
    });
    if (!('taskId' in one)) throw new Error('refused');
    const grandchild = await spawnChild(
      store.tdb.db,
      queue,
      { taskId: one.taskId, attempt: 0 },
      child('g'),
      limits,
    );
    expect(grandchild).toEqual({ refused: { setting: 'MAX_CHILD_DEPTH', limit: 1 } });
  });

  it('a parent that ends cancels its attached children: idle ones at once, a running one by its flag', async () => {
    const queue = new BossTaskQueue(store.boss);
    const parent = await insertTestTask(store.tdb.db);
    const at = { taskId: parent, attempt: 0 };
    const created = [];
    for (const [name, detached] of [
      ['idle', false],
      ['running', false],
      ['waiting', false],
      ['z-detached', true],
    ] as const) {
      created.push(await spawnChild(store.tdb.db, queue, at, child(name, detached), LIMITS));
    }
    const [, running, waiting] = created.map((c) => ('taskId' in c ? c.taskId : ''));
    await sql`update tasks set leased_by = 'w', lease_expires_at = now() + interval '1 minute'
      where task_id = ${running}`.execute(store.tdb.db);
    await sql`update tasks set status = 'input_required' where task_id = ${waiting}`.execute(store.tdb.db);
    await sql`update tasks set status = 'failed' where task_id = ${parent}`.execute(store.tdb.db);
    expect((await rowsOf(parent)).map((r) => [r.spawn_name, r.status, r.cancel])).toEqual([
      ['idle', 'cancelled', true],
      ['running', 'working', true],
      ['waiting', 'cancelled', true],
      ['z-detached', 'working', false],
    ]);
  });
});
