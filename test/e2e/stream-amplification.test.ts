import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS } from '../../src/events/change-feed.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { settledDbActivity, type DbActivity } from '../helpers/db-activity.ts';
import { openRev2025Session, openSessionGet } from '../helpers/rev2025-session.ts';
import { rev2025Headers, listen, RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import type { SseStream } from '../helpers/sse.ts';
import { waiter } from '../helpers/test-tools.ts';
import { waitFor } from '../helpers/wait.ts';

// Idle streams must cost sockets, not reads: a task change is read once per process, however many
// 2025-11-25 GET streams, subscriptions/listen streams and tasks/result waits are open. Counted by
// Postgres (commits, scans of the tasks table), for the same work with few streams and with many.

const TASKS = 20;
/** What opening one more stream may cost, once (a session, its GET, a listen's first read, a priming event). */
const PER_STREAM_OPENED = { commits: 8, taskScans: 4 };

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb?.drop();
});

interface Streams {
  gets: number;
  listens: number;
  resultWaits: number;
}

/** Counts the task changes Postgres announces while `work` runs. */
async function countingChanges<T>(work: () => Promise<T>): Promise<{ value: T; changes: number }> {
  const client = new pg.Client({ connectionString: tdb.url });
  await client.connect();
  let changes = 0;
  client.on('notification', () => changes++);
  await client.query(`listen ${CHANNELS.task}`);
  try {
    return { value: await work(), changes };
  } finally {
    await client.end();
  }
}

/**
 * One process from start to stop: `streams` open and idle while TASKS tasks are created, followed by
 * every listen stream, and cancelled. Returns what Postgres counted meanwhile, and the changes.
 */
async function run(streams: Streams): Promise<{ activity: DbActivity; changes: number }> {
  const before = await settledDbActivity(tdb.url);
  const { changes } = await countingChanges(async () => {
    const rt = await startTestProcess({
      databaseUrl: tdb.url,
      tools: [...SHIPPED_TOOLS, waiter],
      // No periodic re-reads in the counts: only what each change costs.
      env: { SUBSCRIPTION_POLL_MS: '3600000', TASK_POLL_INTERVAL_MS: '3600000' },
    });
    const open: SseStream[] = [];
    try {
      const mcp = new RawMcp(rt.url);
      for (let i = 0; i < streams.gets; i++) {
        open.push(await openSessionGet(rt.url, await openRev2025Session(rt.url)));
      }
      const taskIds: string[] = [];
      for (let i = 0; i < TASKS; i++) {
        const task = await mcp.callTool('waiter', { tag: `amp-${i}`, ms: 600_000 });
        taskIds.push(task.taskId as string);
      }
      const listens: SseStream[] = [];
      for (let i = 0; i < streams.listens; i++) listens.push(await listen(rt.url, { taskIds }));
      open.push(...listens);
      const resultSession = await openRev2025Session(rt.url);
      const waits = Array.from({ length: streams.resultWaits }, (_, i) =>
        fetch(rt.url, {
          method: 'POST',
          headers: rev2025Headers({ sessionId: resultSession }),
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: i,
            method: 'tasks/result',
            params: { taskId: taskIds[0] },
          }),
        }).then((res) => res.text()),
      );
      // Every listen stream has the tasks' first state before the changes start.
      for (const l of listens) await waitFor(() => l.messages.length > TASKS, { what: 'the first states' });
      for (const taskId of taskIds) await mcp.result('tasks/cancel', { taskId });
      for (const l of listens) {
        const cancelled = () => l.messages.filter((m) => m.params?.status === 'cancelled').length;
        await waitFor(() => cancelled() === TASKS, {
          what: () => `${cancelled()} of ${TASKS} cancels heard`,
        });
      }
      for (const text of await Promise.all(waits)) expect(text).toContain('Task was cancelled');
    } finally {
      for (const s of open) s.close();
      await rt.stop();
    }
  });
  const after = await settledDbActivity(tdb.url);
  return {
    activity: { commits: after.commits - before.commits, taskScans: after.taskScans - before.taskScans },
    changes,
  };
}

describe('idle streams and task changes', () => {
  it('read a change once per process: 50 GET streams, 10 listens and 10 result waits cost what one of each does', async () => {
    const few = await run({ gets: 1, listens: 1, resultWaits: 1 });
    const many = await run({ gets: 50, listens: 10, resultWaits: 10 });
    const extraStreams = 49 + 9 + 9;
    console.log(
      `changes ${few.changes} / ${many.changes}; commits ${few.activity.commits} → ${many.activity.commits}; ` +
        `task scans ${few.activity.taskScans} → ${many.activity.taskScans}`,
    );
    // The same work either way: every task created, heard and cancelled.
    expect(many.changes).toBeGreaterThanOrEqual(TASKS * 2);
    // One read per stream per change would be ≥ 49 × changes more of each.
    expect(many.activity.taskScans).toBeLessThanOrEqual(
      few.activity.taskScans + extraStreams * PER_STREAM_OPENED.taskScans,
    );
    expect(many.activity.commits).toBeLessThanOrEqual(
      few.activity.commits + extraStreams * PER_STREAM_OPENED.commits,
    );
  }, 120_000);
});
