/**
 * The firing pass on a real database: any number of passes at once (as many instances would run)
 * make exactly one task per tick; overlap and catchUp against real tasks; a module's schedules synced;
 * the one-line errors of defineSchedule and of a schedule its tools refuse. Real Postgres, real pg-boss.
 */
import { sql } from 'kysely';
import { z } from 'zod';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.ts';
import { BossTaskQueue } from '../../../src/queue/boss.ts';
import { TaskService } from '../../../src/tasks/service.ts';
import { defineTool } from '../../../src/tools/define.ts';
import { ToolRegistry } from '../../../src/tools/registry.ts';
import { checkSchedules } from '../../../src/launch/schedules/check.ts';
import { defineSchedule, type ScheduleOptions } from '../../../src/launch/schedules/define.ts';
import { firePass, type FiringDeps } from '../../../src/launch/schedules/fire.ts';
import {
  listScheduleRows,
  requestScheduleRun,
  syncDeclaredSchedules,
} from '../../../src/launch/schedules/store.ts';
import { useDatabaseWithBoss } from '../../helpers/database-with-boss.ts';

const setup = useDatabaseWithBoss();

const report = defineTool({
  name: 'report',
  description: 'a report (test tool)',
  inputSchema: z.object({ days: z.number().int() }),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: 'done' }] }),
});
const tools = new ToolRegistry([report]);

const schedule = (over: Partial<ScheduleOptions> = {}) =>
  defineSchedule({
    name: 'every-minute',
    cron: '* * * * *',
    tool: report,
    arguments: { days: 1 },
    principal: 'ops',
    overlap: 'allow',
    catchUp: 'none',
    ...over,
  });

/** Firing deps whose clock is `at()` (moved by the test). */
function firing(at: () => Date): FiringDeps {
  return {
    db: setup.tdb.db,
    tasks: new TaskService({ db: setup.tdb.db, queue: new BossTaskQueue(setup.boss) }),
    tools,
    taskDefaults: { ttlMs: null, pollIntervalMs: 1000 },
    maxArgumentsBytes: 65_536,
    misfireMs: 60_000,
    log: createLogger('silent'),
    now: at,
  };
}

/** The tasks each schedule made, by their origin, oldest first. */
async function tasksOf(name: string) {
  return setup.tdb.db
    .selectFrom('tasks')
    .select(['task_id', 'status', 'principal', 'tool_name', 'arguments'])
    .where('origin', '=', `schedule:${name}`)
    .orderBy('created_at')
    .execute();
}

const at = (iso: string) => new Date(iso);

beforeEach(async () => {
  await sql`truncate schedules, tasks cascade`.execute(setup.tdb.db);
});

describe('firing passes', () => {
  it('twenty passes at once, tick after tick, make exactly one task per tick', async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule()], at('2026-01-01T00:00:30Z'));
    for (const now of ['2026-01-01T00:01:05Z', '2026-01-01T00:02:01Z', '2026-01-01T00:03:59Z']) {
      const passes = Array.from({ length: 20 }, () => firePass(firing(() => at(now))));
      await Promise.all(passes);
    }
    const made = await tasksOf('every-minute');
    expect(made).toHaveLength(3);
    expect(made.every((t) => t.principal === 'ops' && t.tool_name === 'report')).toBe(true);
    const [row] = await listScheduleRows(setup.tdb.db);
    expect(row?.next_fire_at.toISOString()).toBe('2026-01-01T00:04:00.000Z');
    expect(row?.last_task_id).toBe(made[2]?.task_id);
  });

  it('a pass that created the tick and died before moving the cursor is finished by the next, without a second task', async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule()], at('2026-01-01T00:00:30Z'));
    await firePass(firing(() => at('2026-01-01T00:01:02Z')));
    // As if that pass had died after the task's commit: the cursor back where it read it.
    await setup.tdb.db
      .updateTable('schedules')
      .set({ next_fire_at: at('2026-01-01T00:01:00Z') })
      .execute();
    await firePass(firing(() => at('2026-01-01T00:01:04Z')));
    expect(await tasksOf('every-minute')).toHaveLength(1);
  });

  it("overlap 'skip' fires no tick while the last run is active, and the next after it ends", async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule({ overlap: 'skip' })], at('2026-01-01T00:00:30Z'));
    const f = firing(() => now);
    let now = at('2026-01-01T00:01:01Z');
    await firePass(f);
    now = at('2026-01-01T00:02:01Z');
    await firePass(f);
    const [first] = await tasksOf('every-minute');
    expect(await tasksOf('every-minute')).toHaveLength(1);
    await f.tasks.cancel(first!.task_id, 'ops');
    now = at('2026-01-01T00:03:01Z');
    await firePass(f);
    expect(await tasksOf('every-minute')).toHaveLength(2);
  });

  it("overlap 'queue' keeps one tick waiting and fires it when the last run ends", async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule({ overlap: 'queue' })], at('2026-01-01T00:00:30Z'));
    let now = at('2026-01-01T00:01:01Z');
    const f = firing(() => now);
    await firePass(f);
    for (const t of ['2026-01-01T00:02:01Z', '2026-01-01T00:03:01Z']) {
      now = at(t);
      await firePass(f);
    }
    const [first] = await tasksOf('every-minute');
    expect(await tasksOf('every-minute')).toHaveLength(1);
    const [waiting] = await listScheduleRows(setup.tdb.db);
    expect(waiting?.pending_tick_at?.toISOString()).toBe('2026-01-01T00:02:00.000Z');
    await f.tasks.cancel(first!.task_id, 'ops');
    await firePass(f);
    expect(await tasksOf('every-minute')).toHaveLength(2);
    const [after] = await listScheduleRows(setup.tdb.db);
    expect(after?.pending_tick_at).toBeNull();
    expect(after?.last_tick_at?.toISOString()).toBe('2026-01-01T00:02:00.000Z');
    // The run it started is active: the next due tick waits in its place.
    now = at('2026-01-01T00:04:01Z');
    await firePass(f);
    const [next] = await listScheduleRows(setup.tdb.db);
    expect(next?.pending_tick_at?.toISOString()).toBe('2026-01-01T00:04:00.000Z');
    expect(await tasksOf('every-minute')).toHaveLength(2);
    // In one pass: the waiting tick runs once the last run ends, and the tick due meanwhile waits next.
    await f.tasks.cancel((await tasksOf('every-minute'))[1]!.task_id, 'ops');
    now = at('2026-01-01T00:05:01Z');
    await firePass(f);
    const [third] = await listScheduleRows(setup.tdb.db);
    expect(await tasksOf('every-minute')).toHaveLength(3);
    expect(third?.last_tick_at?.toISOString()).toBe('2026-01-01T00:04:00.000Z');
    expect(third?.pending_tick_at?.toISOString()).toBe('2026-01-01T00:05:00.000Z');
  });

  it('catchUp after every instance was down: none, latest, { max }', async () => {
    const names = { none: 'c-none', latest: 'c-latest', max: 'c-max' };
    await syncDeclaredSchedules(
      setup.tdb.db,
      [
        schedule({ name: names.none, cron: '*/10 * * * *', catchUp: 'none' }),
        schedule({ name: names.latest, cron: '*/10 * * * *', catchUp: 'latest' }),
        schedule({ name: names.max, cron: '*/10 * * * *', catchUp: { max: 3 } }),
      ],
      at('2026-01-01T00:05:00Z'),
    );
    // Down from 00:05 until 00:58: six ticks missed (00:10 … 00:50), none on time.
    await firePass(firing(() => at('2026-01-01T00:58:00Z')));
    expect(await tasksOf(names.none)).toHaveLength(0);
    expect(await tasksOf(names.latest)).toHaveLength(1);
    expect(await tasksOf(names.max)).toHaveLength(3);
    const rows = await listScheduleRows(setup.tdb.db);
    expect(rows.map((r) => r.next_fire_at.toISOString())).toEqual(Array(3).fill('2026-01-01T01:00:00.000Z'));
    expect(rows.find((r) => r.name === names.max)?.last_tick_at?.toISOString()).toBe(
      '2026-01-01T00:50:00.000Z',
    );
  });

  it('run-now fires once at the next pass, whatever the clock', async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule({ cron: '0 0 1 1 *' })], at('2026-01-01T00:00:30Z'));
    expect(await requestScheduleRun(setup.tdb.db, 'every-minute')).toBe(true);
    await Promise.all([1, 2, 3].map(() => firePass(firing(() => at('2026-01-01T00:01:00Z')))));
    expect(await tasksOf('every-minute')).toHaveLength(1);
    const [row] = await listScheduleRows(setup.tdb.db);
    expect(row?.run_requested_at).toBeNull();
  });

  it('a stored schedule whose tool is gone records the error instead of firing, and moves on', async () => {
    await syncDeclaredSchedules(setup.tdb.db, [schedule({ tool: 'vanished' })], at('2026-01-01T00:00:30Z'));
    await firePass(firing(() => at('2026-01-01T00:01:01Z')));
    const [row] = await listScheduleRows(setup.tdb.db);
    expect(row?.last_error).toMatch(/schedule every-minute: unknown tool "vanished"/);
    expect(row?.next_fire_at.toISOString()).toBe('2026-01-01T00:02:00.000Z');
  });
});

describe('declared schedules', () => {
  it('sync keeps the cursor of an unchanged schedule, resets a changed cron, drops undeclared ones', async () => {
    const db = setup.tdb.db;
    await syncDeclaredSchedules(db, [schedule(), schedule({ name: 'gone' })], at('2026-01-01T00:00:30Z'));
    await syncDeclaredSchedules(db, [schedule()], at('2026-01-01T00:05:30Z'));
    let rows = await listScheduleRows(db);
    expect(rows.map((r) => [r.name, r.next_fire_at.toISOString()])).toEqual([
      ['every-minute', '2026-01-01T00:01:00.000Z'],
    ]);
    await syncDeclaredSchedules(db, [schedule({ cron: '*/15 * * * *' })], at('2026-01-01T00:05:30Z'));
    rows = await listScheduleRows(db);
    expect(rows[0]?.next_fire_at.toISOString()).toBe('2026-01-01T00:15:00.000Z');
  });

  it('defineSchedule and the tools check refuse, in one line naming the schedule', () => {
    expect(() => schedule({ cron: '61 * * * *' })).toThrow(
      /^schedule every-minute: cron: cron "61 \* \* \* \*"/,
    );
    expect(() => schedule({ timezone: 'Mars/Olympus' })).toThrow(
      /^schedule every-minute: cron: unknown time zone "Mars\/Olympus"$/,
    );
    expect(() => checkSchedules([schedule({ tool: 'nope' })], tools, 65_536)).toThrow(
      /^schedule every-minute: unknown tool "nope"$/,
    );
    expect(() => checkSchedules([schedule({ arguments: { days: 'one' } })], tools, 65_536)).toThrow(
      /^schedule every-minute: Invalid arguments for tool report: .*days/,
    );
    expect(() => checkSchedules([schedule(), schedule()], tools, 65_536)).toThrow(/defined twice/);
  });
});
