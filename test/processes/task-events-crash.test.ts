/**
 * Task events across real processes: two HTTP instances and a worker process of this repository's
 * server, started as a deployment runs them. scan_rows emits thousands of events (each matching row
 * inside a step's body, a line of partial output between steps, with sleeps) while a reader
 * (test/helpers/event-reader.ts) follows tasks/stream on one instance. A worker SIGKILLed mid-stream:
 * what it wrote stays, the next attempt writes nothing twice and leaves no gap, the reader sees every seq
 * once and the final status last. The instance a reader holds SIGKILLed: the reader resumes on the other
 * with `after` and gets the rest once.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/database.ts';
import { suiteClusterDatabase } from '../helpers/database-env.ts';
import {
  expectedScanEvents,
  followTaskEvents,
  streamProblems,
  type ScanArgs,
} from '../helpers/event-reader.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { FAST_ENV } from '../helpers/server-process.ts';
import { startCluster, type Cluster } from '../helpers/system/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

let cluster: Cluster;
/** The cluster's database, for the test's own checks. */
let db: Db;
/** Each instance's endpoint, directly (no balancer: the test says which instance a reader holds). */
let urls: string[];
let mcp: RawMcp;

beforeAll(async () => {
  cluster = await startCluster({
    name: 'task-events-crash',
    instances: 2,
    workers: 1,
    nginx: false,
    ...suiteClusterDatabase(),
    env: {
      ...FAST_ENV,
      LOG_LEVEL: 'warn',
      // A SIGKILLed worker's task is taken over once its lease lapses, found by the sweep.
      LEASE_MS: '1500',
      SWEEP_INTERVAL_MS: '200',
      DB_POOL_MAX: '4',
      QUEUE_POOL_MAX: '2',
    },
  });
  ({ db } = createDb({ connectionString: cluster.database.url, max: 4, applicationName: 'test' }));
  urls = cluster.ports.map((p) => `http://127.0.0.1:${p}/mcp`);
  mcp = new RawMcp(urls[1]!);
}, 120_000);
afterAll(async () => {
  await db?.destroy();
  await cluster?.stop();
});

interface StoredEvent {
  seq: number;
  key: string;
  type: string;
  payload: Record<string, any>;
}

const storedEvents = (taskId: string) =>
  db
    .selectFrom('task_events')
    .select(['seq', 'key', 'type', 'payload'])
    .where('task_id', '=', taskId)
    .orderBy('seq')
    .execute() as Promise<StoredEvent[]>;

const eventSeq = async (taskId: string) =>
  (await db.selectFrom('tasks').select('event_seq').where('task_id', '=', taskId).executeTakeFirstOrThrow())
    .event_seq;

const stepsOf = async (taskId: string) =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from task_steps where task_id = ${taskId}`.execute(db))
      .rows[0]!.n,
  );

const attemptsOf = async (taskId: string) =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from task_attempts where task_id = ${taskId}`.execute(db))
      .rows[0]!.n,
  );

/** The task's stored events: 1..N with no gap, one per key, exactly the expected ones. */
async function expectStoredExactly(taskId: string, expected: ReturnType<typeof expectedScanEvents>) {
  const stored = await storedEvents(taskId);
  expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
  expect(new Set(stored.map((e) => e.key)).size).toBe(stored.length);
  expect(stored.map(({ type, payload }) => ({ type, payload }))).toEqual(expected);
  expect(await eventSeq(taskId)).toBe(expected.length);
  const task = await mcp.getTask(taskId);
  expect(task._meta['dev.durable-mcp-tasks/latestEventSeq']).toBe(expected.length + 1);
  return stored;
}

describe('task events with processes killed', () => {
  it('a worker SIGKILLed mid-stream: its events stay, the next attempt writes none twice and leaves no gap; the reader sees each once', async () => {
    const args: ScanArgs = { rows: 6_000, batchSize: 100, batchMs: 20, threshold: 500 };
    const expected = expectedScanEvents(args);
    const { taskId } = await mcp.callTool('scan_rows', { ...args });
    const reading = followTaskEvents({ url: urls, taskId, expected });

    await waitFor(async () => (await eventSeq(taskId)) >= 800, { timeoutMs: 30_000, what: '800 events' });
    const worker = cluster.workers[0]!;
    await worker.kill('SIGKILL');
    const beforeKill = await storedEvents(taskId);
    expect(beforeKill.length).toBeLessThan(expected.length);
    await worker.restart();

    const read = await reading;
    expect(streamProblems(read, { expected })).toBeUndefined();
    // The reader never noticed: one connection, which the task's end closed.
    expect(read.connections.map((c) => c.end)).toEqual(['complete']);
    const stored = await expectStoredExactly(taskId, expected);
    // What the killed attempt wrote stayed as it was; the second attempt went on after it.
    expect(stored.slice(0, beforeKill.length)).toEqual(beforeKill);
    expect(await attemptsOf(taskId)).toBe(2);
  }, 120_000);

  it('the instance a reader holds SIGKILLed: the reader resumes on the other with after and gets the rest once', async () => {
    const args: ScanArgs = { rows: 10_000, batchSize: 100, batchMs: 50, threshold: 500 };
    const expected = expectedScanEvents(args);
    const { taskId } = await mcp.callTool('scan_rows', { ...args });
    let got = 0;
    const reading = followTaskEvents({
      url: urls,
      taskId,
      expected,
      leaveAfter: (event) => ((got = event.seq), false),
    });
    await waitFor(() => got >= 300, { timeoutMs: 30_000, what: 'the reader getting 300 events' });
    await cluster.http[0]!.kill('SIGKILL');

    const read = await reading;
    expect(streamProblems(read, { expected })).toBeUndefined();
    const [first, ...rest] = read.connections;
    expect(first).toMatchObject({ url: urls[0], after: undefined, end: 'cut' });
    expect(first!.events).toBeGreaterThanOrEqual(300);
    // The rest came from the other instance, from the seq after the last one the first delivered.
    expect(rest.map((c) => [c.url, c.end])).toEqual([[urls[1], 'complete']]);
    expect(rest[0]!.after).toBe(first!.events);
    expect(first!.events + rest[0]!.events).toBe(expected.length + 1);
    await expectStoredExactly(taskId, expected);
    await cluster.http[0]!.restart();
  }, 120_000);

  // A step's checkpoint is written only after the events its body emitted (attempt-steps.ts): a worker that
  // died between the two would leave the step recorded and its events never written (the next attempt
  // replays the step from its checkpoint and does not run its body), and the stream would miss those rows.
  it('a step’s events outlive its checkpoint: a worker SIGKILLed while their append waits loses none', async () => {
    // Batches of 200 ms: the task still writes events seconds after its 200th, when the table is locked.
    const args: ScanArgs = { rows: 3_000, batchSize: 100, batchMs: 200, threshold: 500 };
    const expected = expectedScanEvents(args);
    const { taskId } = await mcp.callTool('scan_rows', { ...args });
    await waitFor(async () => (await eventSeq(taskId)) >= 200, { timeoutMs: 30_000, what: '200 events' });
    // A slow append (here: the table locked against writes) while the handler goes on.
    const locker = await cluster.database.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table task_events in share mode');
      await waitFor(
        async () =>
          (
            await locker.query(`select 1 from pg_stat_activity where datname = current_database()
                                 and wait_event_type = 'Lock' and query like '%insert into task_events%'`)
          ).rowCount! > 0,
        { timeoutMs: 10_000, what: 'an append of events waiting' },
        // The worker's append may also be held before its INSERT shows (its small pool's connections
        // waiting behind the lock too): the kill comes all the same, with the step's events unwritten.
      ).catch(() => {});
      // With the bug the handler goes on meanwhile and checkpoints the next steps; without it, it waits
      // for its step's events (then this wait ends at its deadline, and the test goes on all the same).
      const before = await stepsOf(taskId);
      await waitFor(async () => (await stepsOf(taskId)) >= before + 2, { timeoutMs: 3_000 }).catch(() => {});
      await cluster.workers[0]!.kill('SIGKILL');
      await locker.query('rollback');
    } finally {
      await locker.end();
    }
    await cluster.workers[0]!.restart();
    const done = await mcp.waitForTask(taskId, undefined, 60_000);
    expect(done.status).toBe('completed');
    const read = await followTaskEvents({ url: urls, taskId, expected });
    expect(streamProblems(read, { expected })).toBeUndefined();
    await expectStoredExactly(taskId, expected);
  }, 120_000);
});
