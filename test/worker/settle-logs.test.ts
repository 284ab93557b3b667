/**
 * A worker's log tells only what was written: a crash's outcome (paused, failed, retried) is logged once
 * its write landed. An attempt that lost its task before writing says so instead, and nothing else:
 * an operator never reads "paused" of a task that a crash between the log line and the write left
 * running elsewhere. Real Postgres, real pg-boss; settle() driven directly with an attempt taken over.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { BossTaskQueue } from '../../src/queue/boss.ts';
import { claimTask } from '../../src/tasks/store/claim.ts';
import { finishAttempts } from '../../src/tasks/store/finish.ts';
import type { ClaimedTask } from '../../src/tasks/store/lease.ts';
import { ProtocolError, ProtocolErrorCode } from '../../src/core/errors.ts';
import type { LegDeps, LegScope } from '../../src/worker/leg-deps.ts';
import type { LegOutcome } from '../../src/worker/outcome.ts';
import { settle } from '../../src/worker/settle.ts';
import { useDatabaseWithBoss } from '../helpers/database-with-boss.ts';
import { insertTestTask } from '../helpers/db.ts';

const setup = useDatabaseWithBoss();

/** The log lines settle() wrote, as [level, message]. */
function capturedLog() {
  const lines: Array<[string, string]> = [];
  const log = createLogger(
    'debug',
    {},
    {
      destination: {
        write(line: string) {
          const { level, msg } = JSON.parse(line) as { level: string; msg: string };
          lines.push([level, msg]);
        },
      },
    },
  );
  return { log, lines };
}

/** A new task, claimed by worker-a (attempt 1). */
async function claimedTask(): Promise<ClaimedTask> {
  const taskId = await insertTestTask(setup.tdb.db);
  return (await claimTask(setup.tdb.db, taskId, 'worker-a', 60_000))!;
}

/** A task claimed by worker-a (attempt 1), its lease lapsed, and taken over by worker-b (attempt 2). */
async function attemptTakenOver(): Promise<ClaimedTask> {
  const first = await claimedTask();
  const { taskId } = first;
  await setup.tdb.db
    .updateTable('tasks')
    .set({ lease_expires_at: new Date(Date.now() - 1_000) })
    .where('task_id', '=', taskId)
    .execute();
  expect((await claimTask(setup.tdb.db, taskId, 'worker-b', 60_000))?.attempt).toBe(2);
  return first;
}

async function settleLogs(task: ClaimedTask, outcome: LegOutcome): Promise<Array<[string, string]>> {
  const { log, lines } = capturedLog();
  const deps = {
    db: setup.tdb.db,
    queue: new BossTaskQueue(setup.boss),
    writes: {
      finish: async (f) => (await finishAttempts(setup.tdb.db, [f]))[0] === true,
      saveStep: () => Promise.resolve(),
    },
    log,
  } as Partial<LegDeps> as LegDeps;
  const leg = { task, log, tool: { tool: 't' } } as Partial<LegScope> as LegScope;
  await settle(deps, leg, outcome);
  return lines;
}

const crash = new Error('downstream unavailable');

describe('settling a crashed attempt that lost its task', () => {
  it('logs no pause, failure or retry it did not write', async () => {
    const outcomes: LegOutcome[] = [
      { kind: 'paused', statusMessage: 'Paused: failed after 3 attempts', crash },
      {
        kind: 'failed',
        error: new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error'),
        statusMessage: 'Tool execution failed: internal error after 3 attempts',
        crash,
      },
      { kind: 'crash_retry', error: crash, delayMs: 0 },
    ];
    for (const outcome of outcomes) {
      const lines = await settleLogs(await attemptTakenOver(), outcome);
      expect(
        lines.filter(([, msg]) => /crashed|paused/.test(msg)),
        outcome.kind,
      ).toEqual([]);
      expect(
        lines.some(([, msg]) => msg.startsWith('attempt lost its lease')),
        outcome.kind,
      ).toBe(true);
    }
  });

  it('logs the pause of an attempt that still held its task, once written', async () => {
    const held = await claimedTask();
    const { taskId } = held;
    const lines = await settleLogs(held, { kind: 'paused', statusMessage: 'Paused: failed', crash });
    expect(lines).toContainEqual([
      'warn',
      'handler crashed; no attempts left: the task is paused until an operator resumes it',
    ]);
    const row = await setup.tdb.db
      .selectFrom('tasks')
      .select('paused_at')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(row.paused_at).not.toBeNull();
  });

  it("names a map item's failure as the item's, not a handler crash", async () => {
    const held = await claimedTask();
    const item = { ...held, mapItem: { parentTaskId: 'parent', mapName: 'rows', index: 3 } };
    const lines = await settleLogs(item, { kind: 'crash_retry', error: crash, delayMs: 0 });
    expect(lines).toContainEqual(['warn', 'map item 3 of "rows" failed; the item will be retried']);
    expect(lines.filter(([, msg]) => msg.includes('handler crashed'))).toEqual([]);
  });
});
