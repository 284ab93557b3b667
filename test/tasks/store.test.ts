import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskNotFoundError } from '../../src/tasks/errors.ts';
import { isTerminal, TASK_STATUSES } from '../../src/tasks/status.ts';
import { requestCancel } from '../../src/tasks/store/cancel.ts';
import { finishAttempt, settleCancelRequest, setStatusMessage } from '../../src/tasks/store/finish.ts';
import { answerInputRequests, suspendForInput } from '../../src/tasks/store/input.ts';
import { claimTask, claimTasks } from '../../src/tasks/store/claim.ts';
import {
  checkLeases,
  LeaseLostError,
  reclaimExpiredLeases,
  redeliverStuckRuns,
  renewLeases,
} from '../../src/tasks/store/lease.ts';
import { getTaskView } from '../../src/tasks/store/read.ts';
import { loadSteps, saveStep } from '../../src/tasks/store/steps.ts';
import { expireTasks, purgeTasks } from '../../src/tasks/store/sweep.ts';
import { newTaskId } from '../../src/tasks/ids.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb?.drop();
});

/** Waits until the database's clock has passed `column` of every one of these tasks (a lease, a TTL). */
const untilPast = (column: 'lease_expires_at' | 'expires_at', taskIds: string[]) =>
  waitFor(
    async () => {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from tasks
        where task_id = any(${taskIds}) and ${sql.ref(column)} < now()`.execute(tdb.db);
      return rows[0]!.n === taskIds.length;
    },
    { what: `${column} of ${taskIds.length} task(s) passing` },
  );

async function newTask(opts: { ttlMs?: number | null; principal?: string } = {}) {
  return insertTestTask(tdb.db, {
    principal: opts.principal ?? 'alice',
    clientCapabilities: { elicitation: {} },
    ttlMs: opts.ttlMs === undefined ? 60_000 : opts.ttlMs,
  });
}

const status = async (taskId: string) =>
  (await tdb.db.selectFrom('tasks').select('status').where('task_id', '=', taskId).executeTakeFirstOrThrow())
    .status;

const elicit = { method: 'elicitation/create' as const, params: { message: 'q?' } };

async function parked(keys: string[]) {
  const taskId = await newTask();
  const claim = (await claimTask(tdb.db, taskId, 'w1', 10_000))!;
  await suspendForInput(tdb.db, taskId, claim.attempt, Object.fromEntries(keys.map((k) => [k, elicit])));
  return taskId;
}

describe('the task state machine', () => {
  it('has exactly three terminal statuses', () => {
    expect(TASK_STATUSES.filter(isTerminal)).toEqual(['completed', 'failed', 'cancelled']);
  });
});

describe('guarded transitions in Postgres', () => {
  it('creates tasks with ≥128-bit random ids, a principal and an expiry from created_at', async () => {
    const ids = new Set(Array.from({ length: 1000 }, newTaskId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(Buffer.from(id, 'base64url').length).toBeGreaterThanOrEqual(16);
    // 1 in 64 base64url strings start with '-', which a command line reads as an option.
    expect([...ids].filter((id) => id.startsWith('-'))).toEqual([]);
    const taskId = await newTask({ ttlMs: 5000 });
    const row = await tdb.db
      .selectFrom('tasks')
      .selectAll()
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(row.expires_at!.getTime() - row.created_at.getTime()).toBe(5000);
    expect(row.principal).toBe('alice');
    const unlimited = await newTask({ ttlMs: null });
    expect((await getTaskView(tdb.db, unlimited, 'alice'))!.ttlMs).toBeNull();
  });

  it('reads a task only for its own principal', async () => {
    const taskId = await newTask({ principal: 'alice' });
    expect(await getTaskView(tdb.db, taskId, 'alice')).toBeDefined();
    expect(await getTaskView(tdb.db, taskId, 'bob')).toBeUndefined();
    await expect(requestCancel(tdb.db, taskId, 'bob')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(
      tdb.db.transaction().execute((trx) => answerInputRequests(trx, taskId, 'bob', {})),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    expect(await status(taskId)).toBe('working');
  });

  it('claims a batch of deliveries in one statement: the runnable ones, each once, with its attempt recorded', async () => {
    const [free, held, cancelled, done] = [
      await newTask(),
      await newTask(),
      await newTask(),
      await newTask(),
    ];
    await claimTask(tdb.db, held, 'w1', 10_000);
    await requestCancel(tdb.db, cancelled, 'alice');
    const doneClaim = (await claimTask(tdb.db, done, 'w1', 10_000))!;
    await finishAttempt(tdb.db, done, doneClaim.attempt, { status: 'completed', result: {} });
    const claimed = await claimTasks(tdb.db, [free, held, cancelled, done, 'no-such-task'], 'w2', 10_000);
    expect([...claimed.keys()]).toEqual([free]);
    expect(claimed.get(free)).toMatchObject({ taskId: free, attempt: 1, toolName: 't', principal: 'alice' });
    // Two batches racing for the same tasks (duplicate deliveries): each task is claimed once.
    const a = await newTask();
    const b = await newTask();
    const [x, y] = await Promise.all([
      claimTasks(tdb.db, [a, b], 'w3', 10_000),
      claimTasks(tdb.db, [b, a], 'w4', 10_000),
    ]);
    expect([...x.keys(), ...y.keys()].sort()).toEqual([a, b].sort());
    const attempts = await tdb.db
      .selectFrom('task_attempts')
      .select(['task_id', 'worker_id'])
      .where('task_id', 'in', [free, a, b])
      .execute();
    expect(attempts).toHaveLength(3);
  });

  it('fences every write of an attempt: a replaced attempt cannot complete, checkpoint or report', async () => {
    const taskId = await newTask();
    const first = (await claimTask(tdb.db, taskId, 'w1', 300))!;
    // A live lease is not stolen by a duplicate delivery…
    expect(await claimTask(tdb.db, taskId, 'w2', 10_000)).toBeUndefined();
    await untilPast('lease_expires_at', [taskId]);
    // …but a lapsed one is.
    const second = (await claimTask(tdb.db, taskId, 'w2', 10_000))!;
    expect(second.attempt).toBe(first.attempt + 1);
    await expect(saveStep(tdb.db, taskId, first.attempt, 's', 1)).rejects.toBeInstanceOf(LeaseLostError);
    await setStatusMessage(tdb.db, taskId, first.attempt, 'stale');
    expect(
      await finishAttempt(tdb.db, taskId, first.attempt, { status: 'completed', result: { stale: true } }),
    ).toBe(false);
    expect(await saveStep(tdb.db, taskId, second.attempt, 's', 2)).toBe(2);
    // A step recorded once keeps its value; the replaced attempt cannot even read it back as its own.
    expect(await saveStep(tdb.db, taskId, second.attempt, 's', 3)).toBe(2);
    await expect(saveStep(tdb.db, taskId, first.attempt, 's', 9)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await loadSteps(tdb.db, taskId)).toEqual(new Map([['s', 2]]));
    expect(
      await finishAttempt(tdb.db, taskId, second.attempt, { status: 'completed', result: { ok: true } }),
    ).toBe(true);
    const view = (await getTaskView(tdb.db, taskId, 'alice'))!;
    expect(view).toMatchObject({ status: 'completed', statusMessage: null, result: { ok: true } });
  });

  it('renews only this worker’s lease for this attempt', async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w1', 1000))!;
    expect(await renewLeases(tdb.db, 'w1', new Map([[taskId, claim.attempt]]), 60_000)).toEqual(
      new Set([taskId]),
    );
    expect(await renewLeases(tdb.db, 'w2', new Map([[taskId, claim.attempt]]), 60_000)).toEqual(new Set());
    expect(await renewLeases(tdb.db, 'w1', new Map([[taskId, claim.attempt - 1]]), 60_000)).toEqual(
      new Set(),
    );
  });

  it('a step that returned undefined replays as undefined', async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w1', 10_000))!;
    expect(await saveStep(tdb.db, taskId, claim.attempt, 'nothing', undefined)).toBeUndefined();
    expect((await loadSteps(tdb.db, taskId)).get('nothing')).toBeUndefined();
    expect((await loadSteps(tdb.db, taskId)).has('nothing')).toBe(true);
  });

  it('never changes a terminal task', async () => {
    const taskId = await newTask();
    const claim = (await claimTask(tdb.db, taskId, 'w1', 10_000))!;
    await finishAttempt(tdb.db, taskId, claim.attempt, {
      status: 'failed',
      error: { code: 1, message: 'x' },
      statusMessage: 'x',
    });
    const before = await tdb.db
      .selectFrom('tasks')
      .selectAll()
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(await claimTask(tdb.db, taskId, 'w2', 10_000)).toBeUndefined();
    expect(await finishAttempt(tdb.db, taskId, claim.attempt, { status: 'completed', result: {} })).toBe(
      false,
    );
    await expect(suspendForInput(tdb.db, taskId, claim.attempt, { k: elicit })).rejects.toBeInstanceOf(
      LeaseLostError,
    );
    expect(await requestCancel(tdb.db, taskId, 'alice')).toEqual({ requested: false, cancelledNow: false });
    expect(await settleCancelRequest(tdb.db, taskId)).toBe(false);
    expect(await expireTasks(tdb.db, 100)).not.toContain(taskId);
    const after = await tdb.db
      .selectFrom('tasks')
      .selectAll()
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(after).toEqual(before);
  });

  it('cancels a queued task and a task waiting for input at once, a running one only by flag', async () => {
    const queued = await newTask();
    expect(await requestCancel(tdb.db, queued, 'alice')).toEqual({ requested: true, cancelledNow: true });
    expect(await status(queued)).toBe('cancelled');

    const waiting = await parked(['k']);
    expect(await requestCancel(tdb.db, waiting, 'alice')).toEqual({ requested: true, cancelledNow: true });
    expect(await status(waiting)).toBe('cancelled');

    const running = await newTask();
    const claim = (await claimTask(tdb.db, running, 'w1', 10_000))!;
    expect(await requestCancel(tdb.db, running, 'alice')).toEqual({ requested: true, cancelledNow: false });
    expect(await status(running)).toBe('working');
    const [state] = await checkLeases(tdb.db, 'w1', new Map([[running, claim.attempt]]));
    expect(state).toEqual({ taskId: running, held: true, cancelRequested: true, pauseRequested: false });
    // Held means this worker's lease: another worker id does not hold it.
    expect((await checkLeases(tdb.db, 'w2', new Map([[running, claim.attempt]])))[0]?.held).toBe(false);
    // A duplicate delivery does not cancel it under the live attempt.
    expect(await settleCancelRequest(tdb.db, running)).toBe(false);
    // The attempt stops and settles the cancel; nothing after that changes it.
    expect(
      await finishAttempt(tdb.db, running, claim.attempt, {
        status: 'cancelled',
        statusMessage: 'Cancelled by request',
      }),
    ).toBe(true);
    expect(await status(running)).toBe('cancelled');
  });

  it('an acknowledged cancel wins over a result that arrives after it', async () => {
    for (const outcome of [
      { status: 'completed' as const, result: { content: [] } },
      { status: 'failed' as const, error: { code: -32603, message: 'x' }, statusMessage: 'x' },
    ]) {
      const taskId = await newTask();
      const claim = (await claimTask(tdb.db, taskId, 'w1', 10_000))!;
      await requestCancel(tdb.db, taskId, 'alice');
      expect(await finishAttempt(tdb.db, taskId, claim.attempt, outcome)).toBe(true);
      const row = await tdb.db
        .selectFrom('tasks')
        .select(['status', 'result', 'error', 'status_message'])
        .where('task_id', '=', taskId)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({
        status: 'cancelled',
        result: null,
        error: null,
        status_message: 'Cancelled by request',
      });
    }
    // Without a cancel request the outcome stands.
    const plain = await newTask();
    const claim = (await claimTask(tdb.db, plain, 'w1', 10_000))!;
    await finishAttempt(tdb.db, plain, claim.attempt, { status: 'completed', result: { content: [] } });
    expect(await status(plain)).toBe('completed');
  });

  it('stores answers for outstanding keys only and resumes exactly once', async () => {
    const taskId = await parked(['a', 'b']);
    const answer = (responses: Record<string, Record<string, unknown>>) =>
      tdb.db.transaction().execute((trx) => answerInputRequests(trx, taskId, 'alice', responses));
    expect(await answer({ zzz: { action: 'accept' } })).toEqual({ answered: 0, resumed: false });
    expect(await answer({ a: { action: 'accept', content: { v: 1 } } })).toEqual({
      answered: 1,
      resumed: false,
    });
    expect(await answer({ a: { action: 'accept', content: { v: 2 } } })).toEqual({
      answered: 0,
      resumed: false,
    });
    expect(Object.keys((await getTaskView(tdb.db, taskId, 'alice'))!.inputRequests!)).toEqual(['b']);
    expect(await answer({ b: { action: 'decline' } })).toEqual({
      answered: 1,
      resumed: true,
      // How long the request answered last had waited (metrics), and the task's tool.
      waited: { seconds: expect.any(Number) as number, toolName: expect.any(String) as string },
    });
    expect(await status(taskId)).toBe('working');
    const rows = await tdb.db
      .selectFrom('task_input_requests')
      .select(['key', 'response'])
      .where('task_id', '=', taskId)
      .orderBy('key')
      .execute();
    expect(rows).toEqual([
      { key: 'a', response: { action: 'accept', content: { v: 1 } } },
      { key: 'b', response: { action: 'decline' } },
    ]);
  });

  it('serializes concurrent partial answers so that one of them resumes the task', async () => {
    for (let round = 0; round < 10; round++) {
      const taskId = await parked(['x', 'y']);
      const outcomes = await Promise.all(
        ['x', 'y'].map((key) =>
          tdb.db
            .transaction()
            .execute((trx) => answerInputRequests(trx, taskId, 'alice', { [key]: { action: 'accept' } })),
        ),
      );
      expect(outcomes.filter((o) => o.resumed)).toHaveLength(1);
      expect(await status(taskId)).toBe('working');
    }
  });

  it('reclaims tasks whose lease lapsed, and only those', async () => {
    const lapsed = await newTask();
    await claimTask(tdb.db, lapsed, 'dead-worker', 1);
    const live = await newTask();
    await claimTask(tdb.db, live, 'live-worker', 60_000);
    await untilPast('lease_expires_at', [lapsed]);
    const reclaimed = await reclaimExpiredLeases(tdb.db, 100);
    expect(reclaimed).toContain(lapsed);
    expect(reclaimed).not.toContain(live);
    expect((await claimTask(tdb.db, lapsed, 'w3', 10_000))?.attempt).toBe(2);
  });

  it('redelivers queued runs past their claim deadline, never a task some attempt holds', async () => {
    const stuck = await newTask();
    const held = await newTask();
    await claimTask(tdb.db, held, 'w', 60_000);
    const fresh = await newTask();
    // As if the delivery of `stuck` had been fetched by a worker that died before claiming it.
    await tdb.db
      .updateTable('tasks')
      .set({ lease_expires_at: new Date(Date.now() - 1000) })
      .where('task_id', 'in', [stuck, held])
      .execute();
    const redelivered = await redeliverStuckRuns(tdb.db, 100);
    expect(redelivered).toContain(stuck);
    expect(redelivered).not.toContain(held);
    expect(redelivered).not.toContain(fresh);
    // Its claim deadline moved on: the next sweep does not redeliver it again at once.
    expect(await redeliverStuckRuns(tdb.db, 100)).not.toContain(stuck);
  });

  it('expires non-terminal tasks past their TTL, then purges them in bounded batches', async () => {
    const ids = await Promise.all(Array.from({ length: 7 }, () => newTask({ ttlMs: 1 })));
    const done = await newTask({ ttlMs: 1 });
    const claim = (await claimTask(tdb.db, done, 'w', 10_000))!;
    await finishAttempt(tdb.db, done, claim.attempt, {
      status: 'completed',
      result: { kept: 'until purge' },
    });
    const forever = await newTask({ ttlMs: null });
    await untilPast('expires_at', [...ids, done]);

    const first = await expireTasks(tdb.db, 5);
    expect(first).toHaveLength(5);
    const rest = await expireTasks(tdb.db, 5);
    expect([...first, ...rest].sort()).toEqual([...ids].sort());
    const expired = (await getTaskView(tdb.db, ids[0]!, 'alice'))!;
    expect(expired).toMatchObject({
      status: 'failed',
      statusMessage: 'Task has expired',
      error: { code: -32603, message: 'Task has expired' },
    });
    expect((await getTaskView(tdb.db, done, 'alice'))!.status).toBe('completed');

    expect(await purgeTasks(tdb.db, 100, 60_000)).toBe(0); // still within the grace period
    expect(await purgeTasks(tdb.db, 3, 0)).toBe(3);
    expect(await purgeTasks(tdb.db, 100, 0)).toBe(5);
    expect(await getTaskView(tdb.db, done, 'alice')).toBeUndefined();
    expect(await getTaskView(tdb.db, forever, 'alice')).toBeDefined();
    const orphans = await sql<{
      n: string;
    }>`select count(*) as n from task_input_requests r left join tasks t using (task_id) where t.task_id is null`.execute(
      tdb.db,
    );
    expect(Number(orphans.rows[0]!.n)).toBe(0);
  });
});
