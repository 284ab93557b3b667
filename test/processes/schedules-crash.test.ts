/**
 * A schedule's tick makes exactly one task whatever crashes and however many processes fire it: the
 * worker process that fires a tick is SIGKILLed at the worst moment (its task committed, the cursor not
 * yet moved: the test holds the schedule's row so that its UPDATE waits, and ends its backend with it),
 * then two other processes take over, racing each other on every pass. Every tick from the first to the last has one task.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scheduleIdempotency } from '../../src/tasks/store/idempotency.ts';
import { databaseEnv } from '../helpers/database-env.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { EACH_SECOND } from '../helpers/schedule-tools.ts';
import { FAST_ENV } from '../helpers/server-process.ts';
import { Processes, type ClusterProcess } from '../helpers/system/processes.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
let procs: Processes;

beforeAll(async () => {
  tdb = await createTestDatabase();
  procs = new Processes({
    ...FAST_ENV,
    ...databaseEnv(tdb.url),
    LOG_LEVEL: 'warn',
    SCHEDULE_POLL_INTERVAL_MS: '100',
  });
}, 60_000);
afterAll(async () => {
  await procs?.stopAll();
  await tdb?.drop();
});

const startWorker = (name: string): ClusterProcess =>
  procs.start(name, { args: ['workers/main.ts', '--tools', 'test/helpers/schedule-tools.ts'] });

const keyOf = (tick: Date) =>
  scheduleIdempotency(EACH_SECOND.name, tick.toISOString(), EACH_SECOND.tool, EACH_SECOND.arguments).key;

const scheduleRow = () =>
  tdb.db.selectFrom('schedules').selectAll().where('name', '=', EACH_SECOND.name).executeTakeFirst();

const taskKeys = async () =>
  (
    await tdb.db
      .selectFrom('tasks')
      .select('idempotency_key')
      .where('origin', '=', `schedule:${EACH_SECOND.name}`)
      .execute()
  ).map((t) => t.idempotency_key);

describe('a schedule under SIGKILL', () => {
  it(
    'fires every tick exactly once though the firing process dies between task and cursor',
    { timeout: 180_000 },
    async () => {
      const first = startWorker('worker-a');
      first.expectExit();
      const firstRow = await waitFor(
        async () => (await scheduleRow())?.last_tick_at != null && scheduleRow(),
        {
          timeoutMs: 60_000,
          what: 'the first process firing the schedule',
        },
      );
      const firstTick = firstRow ? firstRow.last_tick_at! : new Date(0);

      // Hold the schedule's row: the process's next pass creates the tick's task, then waits to move the cursor.
      const holder = new pg.Client({ connectionString: tdb.url });
      await holder.connect();
      await holder.query('begin');
      const { rows } = await holder.query<{ next_fire_at: Date }>(
        'select next_fire_at from schedules where name = $1 for update',
        [EACH_SECOND.name],
      );
      const held = rows[0]!.next_fire_at;
      await waitFor(async () => (await taskKeys()).includes(keyOf(held)), {
        timeoutMs: 20_000,
        what: `the task of the held tick ${held.toISOString()}`,
      });
      await first.kill('SIGKILL');
      // Its UPDATE still waits in its backend, which would run it once the row is free (a dead client is
      // noticed only when the answer is sent): end that backend too, as a lost machine would.
      const ended = await holder.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid))',
      );
      expect(ended.rowCount).toBeGreaterThan(0);
      await holder.query('commit');
      await holder.end();
      // The kill hit the window: the tick's task exists, the cursor still names it.
      expect((await scheduleRow())?.next_fire_at.toISOString()).toBe(held.toISOString());

      // Two processes take over, racing on every pass.
      startWorker('worker-b');
      startWorker('worker-c');
      const caughtUp = await waitFor(
        async () => {
          const row = await scheduleRow();
          return row?.last_tick_at != null && row.last_tick_at.getTime() >= held.getTime() + 5_000 && row;
        },
        { timeoutMs: 60_000, what: 'the other processes firing five ticks past the held one' },
      );
      await procs.stopAll();

      const keys = await taskKeys();
      const lastTick = caughtUp ? (await scheduleRow())!.last_tick_at! : new Date(0);
      const ticks: Date[] = [];
      for (let t = firstTick.getTime(); t <= lastTick.getTime(); t += 1000) ticks.push(new Date(t));
      const missing = ticks.filter((t) => !keys.includes(keyOf(t))).map((t) => t.toISOString());
      expect(missing).toEqual([]);
      // One task per key (the index allows no more), and none for a tick that is not one.
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys.length).toBe(ticks.length);
      expect(procs.unexpectedExits).toEqual([]);
    },
  );
});
