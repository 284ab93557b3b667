/**
 * The owner's pause and steering against the park that races them (SEP-2669 draft): a pause asked for,
 * or a message sent, while an attempt still holds the task, which then parks. The hand-back must pause
 * the task (no run queued), or run it at once for the message, not leave it parked a day. Real
 * Postgres, real pg-boss; the two sides are driven step by step to hold the race's order.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { BossTaskQueue, RUN_QUEUE } from '../../src/queue/boss.ts';
import { TaskService } from '../../src/tasks/service.ts';
import { claimTask } from '../../src/tasks/store/claim.ts';
import { PAUSED_BY_OWNER, requestOwnerPause } from '../../src/tasks/store/owner-pause.ts';
import { resumeTasks } from '../../src/tasks/store/pause.ts';
import { steeringWaitStepName } from '../../src/tasks/store/steering.ts';
import { handBack } from '../../src/worker/settle.ts';
import { useDatabaseWithBoss } from '../helpers/database-with-boss.ts';
import { insertTestTask } from '../helpers/db.ts';

const setup = useDatabaseWithBoss();
const DAY_MS = 24 * 3_600_000;

/** The task's run jobs still to be fetched, with how long until each is due (ms). */
async function runsOf(taskId: string): Promise<number[]> {
  const { rows } = await sql<{ due_in_ms: number }>`
    select extract(epoch from start_after - now()) * 1000 as due_in_ms from pgboss.job
     where name = ${RUN_QUEUE} and data->>'taskId' = ${taskId} and state = 'created'`.execute(setup.tdb.db);
  return rows.map((r) => Number(r.due_in_ms));
}

async function taskRow(taskId: string) {
  return setup.tdb.db
    .selectFrom('tasks')
    .select(['paused_at', 'pause_requested_at', 'status_message'])
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();
}

/** Takes (and drops) the runs queued so far, so that only what comes next is counted. */
async function drainRuns(): Promise<void> {
  const fetched = await setup.boss.fetch(RUN_QUEUE, { batchSize: 100 });
  if (fetched.length > 0)
    await setup.boss.complete(
      RUN_QUEUE,
      fetched.map((j) => j.id),
    );
}

describe('the owner’s pause and steering, racing a park', () => {
  it('a pause asked for while the attempt held the task takes effect as it parks: no run queued', async () => {
    const queue = new BossTaskQueue(setup.boss);
    const taskId = await insertTestTask(setup.tdb.db, { ttlMs: 3_600_000 });
    await drainRuns();
    const attempt = (await claimTask(setup.tdb.db, taskId, 'worker-a', 60_000))!;
    expect(await requestOwnerPause(setup.tdb.db, taskId, 'alice', 'client:alice')).toBe('requested');
    expect((await taskRow(taskId)).pause_requested_at).not.toBeNull();
    const handed = await handBack({ db: setup.tdb.db, queue }, attempt, {
      failed: false,
      delayMs: DAY_MS,
      statusMessage: 'Sleeping until tomorrow',
    });
    expect(handed).toBe('paused');
    const row = await taskRow(taskId);
    expect(row).toMatchObject({ pause_requested_at: null, status_message: PAUSED_BY_OWNER });
    expect(row.paused_at).not.toBeNull();
    expect(await runsOf(taskId)).toEqual([]);
    // The resume queues its run, as the operator's does.
    expect(
      await resumeTasks(setup.tdb.db, queue, { taskIds: [taskId], principal: 'alice' }, 'client:alice'),
    ).toEqual([taskId]);
    expect(await runsOf(taskId)).toHaveLength(1);
  });

  it('a message sent while the attempt held the task, parking for one, runs it at once', async () => {
    const queue = new BossTaskQueue(setup.boss);
    const taskId = await insertTestTask(setup.tdb.db, { toolName: 'reader', ttlMs: 3_600_000 });
    await drainRuns();
    const attempt = (await claimTask(setup.tdb.db, taskId, 'worker-a', 60_000))!;
    // The read records its wait and looks: nothing yet.
    await setup.tdb.db
      .insertInto('task_steps')
      .values({
        task_id: taskId,
        name: steeringWaitStepName(1),
        output: '{"value":null}',
        attempt: 1,
        position: 0,
      })
      .execute();
    // The message lands now; its run is not queued, as the attempt holds the task.
    const tasks = new TaskService({ db: setup.tdb.db, queue });
    await tasks.steer(taskId, 'alice', 'left at the fork', { readers: ['reader'], maxMessages: 10 });
    expect(await runsOf(taskId)).toEqual([]);
    // The leg parks, as the read asked: until its recheck, a day away; its last look finds the message.
    await handBack({ db: setup.tdb.db, queue }, attempt, {
      failed: false,
      delayMs: DAY_MS,
      statusMessage: 'Waiting for a steering message',
      parkedOn: { steering: 0 },
    });
    const due = await runsOf(taskId);
    expect(due).toHaveLength(1);
    expect(due[0]).toBeLessThanOrEqual(0);
    // Parked and released now: the next message queues a run of its own.
    await drainRuns();
    await tasks.steer(taskId, 'alice', 'and then right', { readers: ['reader'], maxMessages: 10 });
    expect(await runsOf(taskId)).toHaveLength(1);
  });
});
