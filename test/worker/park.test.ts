/**
 * Parking a task that waits for a signal, against the delivery that races it: the delivery came after
 * the wait read the signal, while the attempt still held the task, so its run was turned away by the
 * lease. The park must then run the task at once, not at its recheck a day later. Real Postgres, real
 * pg-boss; the two sides are driven step by step to hold the race's order.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { BossTaskQueue, RUN_QUEUE } from '../../src/queue/boss.ts';
import { TaskService } from '../../src/tasks/service.ts';
import { claimTask } from '../../src/tasks/store/claim.ts';
import { createSignal, readSignal } from '../../src/tasks/store/signals.ts';
import { handBack } from '../../src/worker/settle.ts';
import { useDatabaseWithBoss } from '../helpers/database-with-boss.ts';
import { insertTestTask } from '../helpers/db.ts';

const setup = useDatabaseWithBoss();

/** The task's run jobs still to be fetched, with how long until each is due (ms). */
async function runsOf(taskId: string): Promise<number[]> {
  const { rows } = await sql<{ due_in_ms: number }>`
    select extract(epoch from start_after - now()) * 1000 as due_in_ms from pgboss.job
     where name = ${RUN_QUEUE} and data->>'taskId' = ${taskId} and state = 'created'`.execute(setup.tdb.db);
  return rows.map((r) => Number(r.due_in_ms));
}

describe('parking a task that waits for a signal', () => {
  it('runs it at once when the signal was delivered while its attempt still held it', async () => {
    const queue = new BossTaskQueue(setup.boss);
    const taskId = await insertTestTask(setup.tdb.db, { ttlMs: 3_600_000 });
    const attempt = (await claimTask(setup.tdb.db, taskId, 'worker-a', 60_000))!;
    const token = 'T'.repeat(32);
    await createSignal(setup.tdb.db, { taskId, attempt: attempt.attempt, name: 'go', token });
    // The wait looks: not delivered yet.
    expect((await readSignal(setup.tdb.db, taskId, 'go'))?.deliveredAt).toBeNull();
    // The delivery lands now; its run is fetched, and its claim turned away: worker-a holds the lease.
    expect(await new TaskService({ db: setup.tdb.db, queue }).deliverSignal(token, { ok: true })).toBe(
      'delivered',
    );
    const fetched = await setup.boss.fetch(RUN_QUEUE, { batchSize: 10 });
    expect(fetched.map((j) => (j.data as { taskId: string }).taskId)).toEqual([taskId]);
    expect(await claimTask(setup.tdb.db, taskId, 'worker-b', 60_000)).toBeUndefined();
    await setup.boss.complete(
      RUN_QUEUE,
      fetched.map((j) => j.id),
    );
    // The leg parks, as waitForSignal asked: until its recheck, a day away.
    await handBack({ db: setup.tdb.db, queue }, attempt, {
      failed: false,
      delayMs: 24 * 3_600_000,
      statusMessage: 'Waiting for signal go',
      parkedOn: { signal: 'go' },
    });
    const due = await runsOf(taskId);
    expect(due).toHaveLength(1);
    expect(due[0]).toBeLessThanOrEqual(0);
  });
});
