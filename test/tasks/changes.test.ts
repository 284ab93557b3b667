import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, ChangeFeed } from '../../src/events/change-feed.ts';
import { createLogger } from '../../src/log.ts';
import { TaskChanges } from '../../src/tasks/changes.ts';
import type { TaskView } from '../../src/tasks/store/view.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
let feed: ChangeFeed;
let changes: TaskChanges;
const log = createLogger('silent');

beforeAll(async () => {
  tdb = await createTestDatabase();
  feed = new ChangeFeed(tdb.url, log);
  await feed.start();
  changes = new TaskChanges(tdb.db, feed, { log });
});
afterAll(async () => {
  changes?.stop();
  await feed?.stop();
  await tdb?.drop();
});

const insert = async (principal: string, origin?: string) => ({
  taskId: await insertTestTask(tdb.db, {
    principal,
    toolName: 'echo',
    ...(origin === undefined ? {} : { origin }),
  }),
});

/** A visible change of these tasks, in one statement. */
const note = (taskIds: string[], statusMessage: string) =>
  tdb.db
    .updateTable('tasks')
    .set({ status_message: statusMessage, last_updated_at: new Date() })
    .where('task_id', 'in', taskIds)
    .execute();

describe('TaskChanges', () => {
  it("hands a change only to watchers of the task's principal, by task and by origin", async () => {
    const seen: Record<string, TaskView[]> = { byId: [], byOrigin: [], otherById: [], otherByOrigin: [] };
    const task = await insert('alice', 'session-a');
    const offs = [
      changes.watchTask(task.taskId, 'alice', (v) => seen.byId!.push(v)),
      changes.watchOrigin('session-a', 'alice', (v) => seen.byOrigin!.push(v)),
      // Another principal naming the same task or the same origin hears nothing of it.
      changes.watchTask(task.taskId, 'mallory', (v) => seen.otherById!.push(v)),
      changes.watchOrigin('session-a', 'mallory', (v) => seen.otherByOrigin!.push(v)),
    ];
    try {
      await note([task.taskId], 'halfway');
      // (The insert's own change may be heard first: wait for this one.)
      const heard = (views: TaskView[]) => views.some((v) => v.statusMessage === 'halfway');
      await waitFor(() => heard(seen.byId!) && heard(seen.byOrigin!), { what: 'the change heard' });
      expect(seen.byId!.at(-1)).toMatchObject({ taskId: task.taskId, statusMessage: 'halfway' });
      expect(seen.byOrigin!.at(-1)).toMatchObject({ taskId: task.taskId, statusMessage: 'halfway' });
      // A later change of a watched task of mallory's comes through: alice's were never going to.
      const own = await insert('mallory', 'session-a');
      await waitFor(() => seen.otherByOrigin!.some((v) => v.taskId === own.taskId), {
        what: "mallory's task",
      });
      expect(seen.otherById).toEqual([]);
      expect(seen.otherByOrigin!.map((v) => v.taskId)).toEqual([own.taskId]);
    } finally {
      for (const off of offs) off();
    }
  });

  it('reads changes heard together once, and reads nothing when no one watches', async () => {
    const unwatched = await insert('alice');
    const tasks = await Promise.all([insert('alice'), insert('alice'), insert('alice')]);
    const before = changes.reads;
    // Heard in commit order: once the feed has passed this change, it has passed the inserts too.
    let passed = false;
    const offFeed = feed.on(CHANNELS.task, (id) => void (id === unwatched.taskId && (passed = true)));
    await note([unwatched.taskId], 'nobody listens');
    await waitFor(() => passed, { what: 'the unwatched change heard' });
    offFeed();
    const seen = new Set<string>();
    const offs = tasks.map((t) => changes.watchTask(t.taskId, 'alice', (v) => seen.add(v.taskId)));
    try {
      // Three changes in one statement: one read.
      await note(
        tasks.map((t) => t.taskId),
        'together',
      );
      await waitFor(() => seen.size === 3, { what: 'all three changes handed out' });
      expect(changes.reads).toBe(before + 1);
    } finally {
      for (const off of offs) off();
    }
  });
});
