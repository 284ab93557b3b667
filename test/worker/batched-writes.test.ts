// The worker's batched writes: several legs' completions and checkpoints in one statement, each still
// fenced on its own, on a real Postgres; and the natural batching that groups them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coalesce } from '../../src/core/coalesce.ts';
import { requestCancel } from '../../src/tasks/store/cancel.ts';
import { finishAttempts } from '../../src/tasks/store/finish.ts';
import { claimTask } from '../../src/tasks/store/claim.ts';
import { LeaseLostError } from '../../src/tasks/store/lease.ts';
import { loadSteps, saveSteps } from '../../src/tasks/store/steps.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb?.drop();
});

async function claimed(): Promise<{ taskId: string; attempt: number }> {
  const taskId = await insertTestTask(tdb.db);
  const claim = (await claimTask(tdb.db, taskId, 'w1', 10_000))!;
  return { taskId, attempt: claim.attempt };
}

const row = (taskId: string) =>
  tdb.db
    .selectFrom('tasks')
    .select(['status', 'result', 'error', 'status_message', 'leased_by'])
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();

describe('batched completions', () => {
  it('fences each attempt on its own and lets an acknowledged cancel win', async () => {
    const [done, failed, stale, cancelled] = [
      await claimed(),
      await claimed(),
      await claimed(),
      await claimed(),
    ];
    await requestCancel(tdb.db, cancelled.taskId, 'alice');
    const landed = await finishAttempts(tdb.db, [
      { ...done, outcome: { status: 'completed', result: { content: [], n: 1 }, statusMessage: 'last' } },
      {
        ...failed,
        outcome: { status: 'failed', error: { code: -32603, message: 'x' }, statusMessage: 'boom' },
      },
      { ...stale, attempt: stale.attempt - 1, outcome: { status: 'completed', result: { stale: true } } },
      { ...cancelled, outcome: { status: 'completed', result: { late: true } } },
    ]);
    expect(landed).toEqual([true, true, false, true]);
    expect(await row(done.taskId)).toMatchObject({
      status: 'completed',
      result: { content: [], n: 1 },
      error: null,
      status_message: 'last',
      leased_by: null,
    });
    expect(await row(failed.taskId)).toMatchObject({
      status: 'failed',
      result: null,
      error: { code: -32603, message: 'x' },
      status_message: 'boom',
    });
    expect(await row(stale.taskId)).toMatchObject({ status: 'working', result: null, leased_by: 'w1' });
    expect(await row(cancelled.taskId)).toMatchObject({
      status: 'cancelled',
      result: null,
      status_message: 'Cancelled by request',
    });
  });
});

describe('batched checkpoints', () => {
  it('inserts each step once, answers the recorded value for a repeat, and fails only a stale attempt', async () => {
    const a = await claimed();
    const b = await claimed();
    const saved = await saveSteps(tdb.db, [
      { ...a, name: 's1', value: { rows: 3 } },
      { ...a, name: 's1', value: 'second caller' },
      { ...a, name: 's2', value: undefined },
      { ...b, attempt: b.attempt + 1, name: 's1', value: 'not mine' },
      { ...b, name: 's1', value: [1, 2] },
    ]);
    const settled = await Promise.allSettled(saved);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : s.reason))).toEqual([
      { rows: 3 },
      { rows: 3 },
      undefined,
      expect.any(LeaseLostError),
      [1, 2],
    ]);
    expect(await loadSteps(tdb.db, a.taskId)).toEqual(
      new Map<string, unknown>([
        ['s1', { rows: 3 }],
        ['s2', undefined],
      ]),
    );
    expect(await loadSteps(tdb.db, b.taskId)).toEqual(new Map([['s1', [1, 2]]]));
  });
});

describe('natural batching', () => {
  it('runs a lone call at once and groups the calls that wait behind a running batch', async () => {
    const batches: number[][] = [];
    let release: () => void = () => {};
    const run = coalesce(
      async (xs: number[]) => {
        batches.push(xs);
        if (batches.length === 1) await new Promise<void>((r) => (release = r));
        return xs.map((x) => x * 2);
      },
      async (x) => x * 2,
      { maxInFlight: 1 },
    );
    const first = run(1);
    await new Promise((r) => setImmediate(r));
    const rest = [run(2), run(3), run(4)];
    expect(batches).toEqual([[1]]);
    release();
    expect(await Promise.all([first, ...rest])).toEqual([2, 4, 6, 8]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it('retries each call of a failed batch on its own, so one bad input fails only its caller', async () => {
    const run = coalesce(
      async (xs: number[]) => {
        if (xs.includes(13)) throw new Error('batch refused');
        return xs;
      },
      async (x) => {
        if (x === 13) throw new Error('unlucky');
        return x;
      },
    );
    const results = await Promise.allSettled([run(1), run(13), run(2)]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      1,
      'unlucky',
      2,
    ]);
  });
});
