// The readers' side of task events in one process: the shared feed (one read per batch of appends,
// whatever the number of followers) and a follower's order, resume and end; and the backstop, which
// finds events and ends when no notification comes at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChangeFeed } from '../../src/events/change-feed.ts';
import { createLogger } from '../../src/log.ts';
import { TaskChanges } from '../../src/tasks/changes.ts';
import { TaskEventFeed } from '../../src/tasks/event-feed.ts';
import { TaskEventReader } from '../../src/tasks/event-follower.ts';
import { appendTaskEvents } from '../../src/tasks/store/events.ts';
import type { WireTaskEvent } from '../../src/core/task-events.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
let feed: ChangeFeed;
const log = createLogger('silent');

beforeAll(async () => {
  tdb = await createTestDatabase();
  feed = new ChangeFeed(tdb.url, log);
  await feed.start();
});
afterAll(async () => {
  await feed?.stop();
  await tdb?.drop();
});

/** A task held by attempt 1, as a worker's would be. */
async function runningTask(): Promise<string> {
  const taskId = await insertTestTask(tdb.db, { principal: 'alice', toolName: 'scan_rows' });
  await tdb.db
    .updateTable('tasks')
    .set({ status: 'working', attempt: 1 })
    .where('task_id', '=', taskId)
    .execute();
  return taskId;
}

const append = (taskId: string, from: number, n: number) =>
  appendTaskEvents(
    tdb.db,
    { taskId, attempt: 1 },
    Array.from({ length: n }, (_, i) => {
      const json = `{"n":${from + i}}`;
      return { key: `p0:${from + i}`, type: 'com.example/n', json, bytes: json.length };
    }),
  );

const finish = (taskId: string) =>
  tdb.db
    .updateTable('tasks')
    .set({ status: 'completed', last_updated_at: new Date() })
    .where('task_id', '=', taskId)
    .execute();

/** A reader over its own feed: `listening` false leaves it the backstop alone. */
function reader(listening: boolean, pollMs: number) {
  const changes = new TaskChanges(tdb.db, listening ? feed : undefined, { log });
  const eventFeed = new TaskEventFeed(tdb.db, listening ? feed : undefined, { log, pollMs });
  const events = new TaskEventReader({ db: tdb.db, eventFeed, taskChanges: changes });
  const stop = () => {
    changes.stop();
    eventFeed.stop();
  };
  return { events, eventFeed, stop };
}

function follow(events: TaskEventReader, taskId: string, after: number) {
  const got: WireTaskEvent[] = [];
  const abort = new AbortController();
  const end = events.follow({
    taskId,
    principal: 'alice',
    after,
    signal: abort.signal,
    send: async (event) => void got.push(event),
  });
  return { got, end, abort };
}

describe('following task events', () => {
  it('serves many followers with one read per batch of appends, each event once, in order, then the status', async () => {
    const r = reader(true, 60_000);
    try {
      const taskId = await runningTask();
      await append(taskId, 1, 3);
      const followers = Array.from({ length: 50 }, (_, i) => follow(r.events, taskId, i % 4));
      await waitFor(() => followers.every((f) => f.got.length === 3 - Math.min(3, followers.indexOf(f) % 4)));
      const before = r.eventFeed.reads;
      for (let batch = 0; batch < 5; batch++) {
        await append(taskId, 4 + batch * 10, 10);
        await waitFor(() => followers.every((f) => f.got.at(-1)?.seq === 13 + batch * 10));
      }
      // One shared read per append heard (at most), not one per follower (50 followers: 250 reads). One more
      // is the first append's notification heard late, after `before` (seen once in CI through PgBouncer).
      expect(r.eventFeed.reads - before).toBeLessThanOrEqual(6);
      await finish(taskId);
      const ends = await Promise.all(followers.map((f) => f.end));
      expect(ends.every((e) => e === 'finished')).toBe(true);
      for (const [i, f] of followers.entries()) {
        const from = (i % 4) + 1;
        expect(f.got.map((e) => e.seq)).toEqual(Array.from({ length: 54 - from + 1 }, (_, k) => from + k));
        expect(f.got.at(-1)).toMatchObject({
          seq: 54,
          type: 'dev.durable-mcp-tasks/status',
          payload: { status: 'completed' },
        });
      }
    } finally {
      r.stop();
    }
  });

  it('without any notification, the backstop finds the events and the end', async () => {
    const r = reader(false, 100);
    try {
      const taskId = await runningTask();
      const f = follow(r.events, taskId, 0);
      await append(taskId, 1, 5);
      await waitFor(() => f.got.length === 5);
      await finish(taskId);
      expect(await f.end).toBe('finished');
      expect(f.got.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    } finally {
      r.stop();
    }
  });

  it('stops when its signal fires, and refuses a cursor whose events retention dropped', async () => {
    const r = reader(true, 60_000);
    try {
      const taskId = await runningTask();
      const f = follow(r.events, taskId, 0);
      f.abort.abort();
      expect(await f.end).toBe('stopped');
      await append(taskId, 1, 4);
      await tdb.db.deleteFrom('task_events').where('task_id', '=', taskId).where('seq', '<=', 2).execute();
      await expect(r.events.checkCursor(taskId, 1)).rejects.toMatchObject({
        code: -32010,
        data: { reason: 'events_gone', taskId, earliestSeq: 3 },
      });
      await expect(r.events.checkCursor(taskId, 2)).resolves.toMatchObject({ earliest: 3, last: 4 });
    } finally {
      r.stop();
    }
  });
});
