// How tools/call creates a task, on a real Postgres and pg-boss: in one statement with pg-boss's own job
// INSERT and the wake-up (the job identical to what send() writes), or, when this process's worker is
// idle, already claimed by it and started here without the queue; a worker that dies after such a
// create loses nothing (the lease lapses, the sweeper hands the task on).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompiledQuery, sql } from 'kysely';
import { withStatements } from '../../src/db/statements.ts';
import { BossTaskQueue, RUN_QUEUE } from '../../src/queue/boss.ts';
import { TaskService, type LocalStart } from '../../src/tasks/service.ts';
import type { ClaimedTask } from '../../src/tasks/store/lease.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

type Started = Awaited<ReturnType<typeof startTestProcess>>;

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb?.drop();
});

const NEW_TASK = {
  principal: 'alice',
  toolName: 'analyze_numbers',
  arguments: { count: 10 },
  prepared: undefined,
  clientCapabilities: {},
  ttlMs: 60_000,
  pollIntervalMs: 100,
};

/** The run jobs of a task (pg-boss's table, read directly). */
async function jobsOf(taskId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await sql<Record<string, unknown>>`select * from pgboss.job where name = ${RUN_QUEUE}
    and data->>'taskId' = ${taskId}`.execute(tdb.db);
  return rows;
}

const taskRow = (taskId: string) =>
  tdb.db
    .selectFrom('tasks')
    .select(['status', 'attempt', 'leased_by'])
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();

const attemptsOf = (taskId: string) =>
  tdb.db.selectFrom('task_attempts').select(['attempt', 'worker_id']).where('task_id', '=', taskId).execute();

/**
 * Records the statements pg clients send while `recording` is set. Installed before a runtime starts:
 * the clients it makes bind `query` when they are created.
 */
const recorder = {
  recording: false,
  texts: [] as string[],
  original: undefined as ((...args: unknown[]) => unknown) | undefined,
  install() {
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    this.original = original;
    proto.query = function (this: unknown, ...args: unknown[]) {
      const [q] = args;
      if (recorder.recording) recorder.texts.push(typeof q === 'string' ? q : (q as { text: string }).text);
      return original.apply(this, args);
    };
  },
  uninstall() {
    if (this.original !== undefined)
      (pg.Client.prototype as unknown as { query: unknown }).query = this.original;
  },
  async during(fn: () => Promise<unknown>): Promise<string[]> {
    this.texts = [];
    this.recording = true;
    try {
      await fn();
    } finally {
      this.recording = false;
    }
    return this.texts;
  },
};

/** Waits until this process's worker would take a task it creates (its first fetch found the queue empty). */
async function untilIdle(rt: Started): Promise<void> {
  const slot = await waitFor(() => rt.workers!.startHere(0), { intervalMs: 10, what: 'the worker idle' });
  slot.release();
}

describe('one statement', () => {
  it('runs every part or none: a part that produces no row undoes the rest', async () => {
    await sql`create table if not exists stmt_probe (id int)`.execute(tdb.db);
    const main = CompiledQuery.raw('insert into stmt_probe (id) values ($1) returning id', [1]);
    const ok = await tdb.db.executeQuery(
      withStatements(main, [{ text: 'select $1::int + $2::int as n', values: [2, 3] }]),
    );
    expect(ok.rows).toEqual([{ id: 1, also_0: 1 }]);
    await expect(
      tdb.db.executeQuery(
        withStatements(CompiledQuery.raw('insert into stmt_probe (id) values ($1) returning id', [2]), [
          { text: 'select 1 where $1::bool', values: [false] },
        ]),
      ),
    ).rejects.toThrow(/division by zero/);
    const { rows } = await sql<{ id: number }>`select id from stmt_probe order by id`.execute(tdb.db);
    expect(rows).toEqual([{ id: 1 }]);
  });
});

describe('creating through the queue (no worker here)', () => {
  let rt: Started;
  beforeAll(async () => {
    recorder.install();
    rt = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
  });
  afterAll(async () => {
    await rt?.stop();
    recorder.uninstall();
  });

  it("writes the task, pg-boss's own job and the wake-up in one statement", async () => {
    const listener = new pg.Client({ connectionString: tdb.url });
    await listener.connect();
    const woken: string[] = [];
    listener.on('notification', (n) => woken.push(n.payload ?? ''));
    await listener.query('listen mcp_task_runs');
    try {
      let taskId = '';
      const sent = await recorder.during(async () => {
        taskId = (await new RawMcp(rt.url).callTool('analyze_numbers', { count: 10 })).taskId as string;
      });
      // The request's writes: its admission (the principal's quotas), then the create in one statement:
      // no BEGIN, no COMMIT, no separate job INSERT or NOTIFY.
      const writes = sent.filter((t) => /\b(insert|begin|commit|pg_notify)\b/i.test(t));
      expect(writes).toHaveLength(2);
      expect(writes[0]).toMatch(/insert into principal_creation_buckets/);
      expect(writes[1]).toMatch(/insert into "tasks".*INSERT INTO pgboss\..*pg_notify/s);

      const [job] = await jobsOf(taskId);
      expect(job).toBeDefined();
      const byBoss = await rt.boss.send(RUN_QUEUE, { taskId: 'compare' });
      const [sentJob] = await jobsOf('compare');
      expect(sentJob!.id).toBe(byBoss);
      // pg-boss's job, as its send() writes it: every setting the queue gives a job.
      const settled = (j: Record<string, unknown>) => {
        const { id: _id, data: _data, created_on: _created, start_after, keep_until, ...rest } = j;
        return { ...rest, afterStart: Number(keep_until) - Number(start_after) };
      };
      expect(settled(job!)).toEqual(settled(sentJob!));

      await waitFor(() => woken.includes(taskId), { timeoutMs: 5_000, intervalMs: 10, what: 'the wake-up' });
      expect(await taskRow(taskId)).toEqual({ status: 'working', attempt: 0, leased_by: null });
    } finally {
      await listener.end();
    }
  });
});

describe('creating on an idle worker of this process', () => {
  let rt: Started;
  beforeAll(async () => {
    rt = await startTestProcess({
      databaseUrl: tdb.url,
      env: { WORKER_CONCURRENCY: '1', LEASE_MS: '600' },
    });
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('inserts the task claimed by that worker and runs it there, with no job', async () => {
    await untilIdle(rt);
    const mcp = new RawMcp(rt.url);
    const { taskId } = await mcp.callTool('analyze_numbers', { count: 10 });
    expect((await mcp.waitForTask(taskId as string)).status).toBe('completed');
    expect(await jobsOf(taskId as string)).toEqual([]);
    expect(await attemptsOf(taskId as string)).toEqual([{ attempt: 1, worker_id: rt.workers!.workerId }]);
  });

  it('goes through the queue when the worker is busy', async () => {
    // (100 chunks of 100 ms: running until it is cancelled.)
    await untilIdle(rt);
    const mcp = new RawMcp(rt.url);
    const busy = (
      await mcp.callTool('analyze_numbers', { count: 100_000, chunkSize: 1000, delayMsPerChunk: 100 })
    ).taskId as string;
    expect(await jobsOf(busy)).toEqual([]);
    const queued = (await mcp.callTool('analyze_numbers', { count: 10 })).taskId as string;
    expect(await jobsOf(queued)).toHaveLength(1);
    await mcp.result('tasks/cancel', { taskId: busy });
    expect((await mcp.waitForTask(busy)).status).toBe('cancelled');
    expect((await mcp.waitForTask(queued)).status).toBe('completed');
  });

  it('loses nothing when the worker dies after the create: the sweeper hands the task on', async () => {
    const dead: LocalStart = {
      workerId: 'dead-worker',
      leaseMs: 300,
      run: (_task: ClaimedTask) => {}, // the process died between the commit and the leg
      release: () => {},
    };
    const tasks = new TaskService({ db: tdb.db, queue: new BossTaskQueue(rt.boss), startHere: () => dead });
    const { taskId } = await tasks.create(NEW_TASK);
    expect(await taskRow(taskId)).toEqual({ status: 'working', attempt: 1, leased_by: 'dead-worker' });
    // The sweeper (run here by hand) hands it on once the dead worker's 300 ms lease has lapsed.
    let reclaimed = 0;
    await waitFor(async () => (reclaimed += (await rt.workers!.sweep()).reclaimed) > 0, {
      what: 'a sweep reclaiming the task',
    });
    expect(reclaimed).toBe(1);
    await waitFor(async () => (await taskRow(taskId)).status === 'completed', {
      timeoutMs: 10_000,
      what: 'the task completed by the next attempt',
    });
    expect(await taskRow(taskId)).toMatchObject({ status: 'completed', attempt: 2 });
    expect((await attemptsOf(taskId)).map((a) => a.worker_id)).toEqual(['dead-worker', rt.workers!.workerId]);
  });

  it('frees the slot when the create fails', async () => {
    let released = 0;
    const slot: LocalStart = {
      workerId: 'w',
      leaseMs: 1000,
      run: () => {
        throw new Error('must not run');
      },
      release: () => released++,
    };
    const tasks = new TaskService({ db: tdb.db, queue: new BossTaskQueue(rt.boss), startHere: () => slot });
    // Not storable: a NUL in a JSON string.
    await expect(tasks.create({ ...NEW_TASK, arguments: { x: '\u0000' } })).rejects.toThrow();
    expect(released).toBe(1);
  });
});
