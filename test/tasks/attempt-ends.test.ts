/**
 * Every attempt of a finished task ends, against a real Postgres through the store's functions: a map's
 * items' attempts end with the statement that completes them; a worker that died (its lease lapsed) has
 * its attempt ended `lease_lost`, at the time the lease lapsed, by the claim that takes its task over or by
 * the sweeper's reclaim; and a task that ends with no worker to say so (expired, its cancel settled
 * after its worker died) has its open attempts ended by the trigger of the migration
 * end_attempts_of_finished_tasks, which leaves an outcome written by its own statement alone.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAttemptEnd } from '../../src/tasks/store/attempt-ends.ts';
import { requestCancel } from '../../src/tasks/store/cancel.ts';
import { claimTask, claimTasks } from '../../src/tasks/store/claim.ts';
import { finishAttempts, settleCancelRequest } from '../../src/tasks/store/finish.ts';
import { reclaimExpiredLeases, releaseTask, renewLeases } from '../../src/tasks/store/lease.ts';
import { completeMapItems, dispatchMapItems, insertMapItems } from '../../src/tasks/store/maps.ts';
import { expireTasks } from '../../src/tasks/store/sweep.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb?.drop();
});

async function newTask(ttlMs = 60_000): Promise<string> {
  return insertTestTask(tdb.db, { ttlMs });
}

interface AttemptRow {
  attempt: number;
  worker_id: string;
  ended_at: Date | null;
  outcome: string | null;
  error_message: string | null;
}

const attemptsOf = async (taskId: string) =>
  (
    await sql<AttemptRow>`select attempt, worker_id, ended_at, outcome, error_message from task_attempts
      where task_id = ${taskId} order by attempt`.execute(tdb.db)
  ).rows;

/** The task's lease as it stands (the time it lapses, for a worker that stops renewing it). */
const leaseOf = async (taskId: string) =>
  (
    await tdb.db
      .selectFrom('tasks')
      .select('lease_expires_at')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow()
  ).lease_expires_at!;

/** Waits until the database's clock has passed the task's lease (or TTL). */
const untilPast = (taskId: string, column: 'lease_expires_at' | 'expires_at' = 'lease_expires_at') =>
  waitFor(
    async () => {
      const { rows } = await sql<{ past: boolean }>`
        select ${sql.ref(column)} < now() as past from tasks where task_id = ${taskId}`.execute(tdb.db);
      return rows[0]?.past === true;
    },
    { what: `the ${column} of ${taskId} passing` },
  );

/** A task claimed by a worker that then died: its lease (renewed once, as a live worker does) lapses. */
async function claimedByDeadWorker(ttlMs?: number): Promise<{ taskId: string; lapsedAt: Date }> {
  const taskId = await newTask(ttlMs);
  const claim = (await claimTask(tdb.db, taskId, 'w-dead', 100))!;
  await renewLeases(tdb.db, 'w-dead', new Map([[taskId, claim.attempt]]), 150);
  const lapsedAt = await leaseOf(taskId);
  await untilPast(taskId);
  return { taskId, lapsedAt };
}

describe("a map's items", () => {
  it('end their attempts in the statement that completes them (outcome: the item status)', async () => {
    // The statement alone, without the trigger's safety net.
    await sql`alter table tasks disable trigger tasks_end_attempts`.execute(tdb.db);
    try {
      const parentId = await newTask();
      const parent = (await claimTask(tdb.db, parentId, 'w1', 60_000))!;
      await insertMapItems(tdb.db, { taskId: parentId, attempt: parent.attempt }, 'm', 20);
      const map = { parentTaskId: parentId, mapName: 'm' };
      const ids = await dispatchMapItems(tdb.db, map, 20);
      expect(ids).toHaveLength(20);
      const items = [...(await claimTasks(tdb.db, ids, 'w1', 60_000)).values()];
      expect(items).toHaveLength(20);
      await requestCancel(tdb.db, items[0]!.taskId, 'alice'); // (cancelled instead: its outcome says so)
      const passed = await completeMapItems(
        tdb.db,
        map,
        items.map((i) => ({ taskId: i.taskId, attempt: i.attempt, index: i.mapItem!.index, value: 1 })),
        undefined,
      );
      expect(passed.every((p) => p.landed)).toBe(true);
      // Ended by that statement: at the items' own update time, with their status.
      const { rows } = await sql<{ outcome: string | null; same_statement: boolean | null; n: number }>`
        select a.outcome, a.ended_at = t.last_updated_at as same_statement, count(*)::int as n
        from task_attempts a join tasks t on t.task_id = a.task_id
        where t.parent_task_id = ${parentId} group by 1, 2 order by 1`.execute(tdb.db);
      expect(rows).toEqual([
        { outcome: 'cancelled', same_statement: true, n: 1 },
        { outcome: 'completed', same_statement: true, n: 19 },
      ]);
    } finally {
      await sql`alter table tasks enable trigger tasks_end_attempts`.execute(tdb.db);
    }
  });
});

describe('an attempt whose worker died', () => {
  it("ends lease_lost, at its lease's lapse, when another claim takes its task over", async () => {
    const { taskId, lapsedAt } = await claimedByDeadWorker();
    const next = (await claimTask(tdb.db, taskId, 'w2', 60_000))!;
    expect(next.attempt).toBe(2);
    expect(await attemptsOf(taskId)).toEqual([
      { attempt: 1, worker_id: 'w-dead', ended_at: lapsedAt, outcome: 'lease_lost', error_message: null },
      { attempt: 2, worker_id: 'w2', ended_at: null, outcome: null, error_message: null },
    ]);
  });

  it("ends lease_lost, at its lease's lapse, when the sweeper takes its lease back", async () => {
    const { taskId, lapsedAt } = await claimedByDeadWorker();
    expect(await reclaimExpiredLeases(tdb.db, 1_000)).toContain(taskId);
    expect(await attemptsOf(taskId)).toEqual([
      { attempt: 1, worker_id: 'w-dead', ended_at: lapsedAt, outcome: 'lease_lost', error_message: null },
    ]);
    // The next claim finds it ended (and changes nothing of it).
    await claimTask(tdb.db, taskId, 'w2', 60_000);
    expect((await attemptsOf(taskId))[0]).toMatchObject({ ended_at: lapsedAt, outcome: 'lease_lost' });
  });

  it('keeps the outcome of an attempt its worker released, whatever the claim deadline', async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w1', 60_000))!;
    await releaseTask(tdb.db, taskId, claim.attempt);
    await recordAttemptEnd(tdb.db, taskId, claim.attempt, { outcome: 'parked' });
    const [ended] = await attemptsOf(taskId);
    await sql`update tasks set lease_expires_at = now() - interval '1 second' where task_id = ${taskId}`.execute(
      tdb.db,
    );
    await claimTask(tdb.db, taskId, 'w2', 60_000);
    expect((await attemptsOf(taskId))[0]).toEqual(ended);
    expect(ended).toMatchObject({ outcome: 'parked' });
  });
});

describe('a task that ends with its attempt still open (the trigger)', () => {
  it("expired after its worker died: lease_lost at the lease's lapse", async () => {
    const { taskId, lapsedAt } = await claimedByDeadWorker(300);
    await untilPast(taskId, 'expires_at');
    expect(await expireTasks(tdb.db, 1_000)).toContain(taskId);
    expect(await attemptsOf(taskId)).toEqual([
      { attempt: 1, worker_id: 'w-dead', ended_at: lapsedAt, outcome: 'lease_lost', error_message: null },
    ]);
  });

  it('expired under a live worker: it ends with the task (failed), now', async () => {
    const taskId = await newTask(300);
    await claimTask(tdb.db, taskId, 'w1', 60_000);
    await untilPast(taskId, 'expires_at');
    expect(await expireTasks(tdb.db, 1_000)).toContain(taskId);
    const [row] = await attemptsOf(taskId);
    expect(row).toMatchObject({ outcome: 'failed' });
    expect(row!.ended_at).not.toBeNull();
  });

  it('cancelled after its worker died: lease_lost at the lapse', async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w-dead', 100))!;
    const lapsedAt = await leaseOf(taskId);
    expect(await requestCancel(tdb.db, taskId, 'alice')).toEqual({ requested: true, cancelledNow: false });
    await untilPast(taskId);
    expect(await settleCancelRequest(tdb.db, taskId)).toBe(true);
    expect(await attemptsOf(taskId)).toEqual([
      {
        attempt: claim.attempt,
        worker_id: 'w-dead',
        ended_at: lapsedAt,
        outcome: 'lease_lost',
        error_message: null,
      },
    ]);
  });

  it("leaves alone an end its own statement wrote (a worker's finish, with its crash)", async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w1', 60_000))!;
    const crash = { message: 'Error: boom', stack: 'at handler' };
    const error = { code: -32603, message: 'Internal error' };
    const [landed] = await finishAttempts(tdb.db, [
      { taskId, attempt: claim.attempt, outcome: { status: 'failed', error, statusMessage: 'x' }, crash },
    ]);
    expect(landed).toBe(true);
    expect(await attemptsOf(taskId)).toEqual([
      expect.objectContaining({ outcome: 'failed', error_message: 'Error: boom' }),
    ]);
  });
});
