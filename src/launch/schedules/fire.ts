import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Metrics } from '../../core/metrics.ts';
import type { Logger } from '../../log.ts';
import { coerceError } from '../../log.ts';
import { QuotaExceededError } from '../../core/errors.ts';
import { IdempotencyConflictError } from '../../tasks/errors.ts';
import type { TaskService } from '../../tasks/service.ts';
import { ACTIVE_STATUSES } from '../../tasks/status.ts';
import { scheduleIdempotency } from '../../tasks/store/idempotency.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { parseToolArguments, toolTaskOf, type TaskDefaults } from '../tool-task.ts';
import { checkSchedule } from './check.ts';
import { cronClock } from './cron.ts';
import { InvalidScheduleError } from './define.ts';
import { planTicks } from './plan.ts';
import { definitionOf, type ScheduleRow } from './store.ts';

export interface FiringDeps {
  db: Db;
  tasks: TaskService;
  tools: ToolRegistry;
  taskDefaults: TaskDefaults;
  maxArgumentsBytes: number;
  /** A tick later than this is missed rather than late (SCHEDULE_MISFIRE_MS). */
  misfireMs: number;
  log: Logger;
  metrics?: Metrics | undefined;
  /** The clock (tests move it); default the database's. */
  now?: () => Date;
}

/** The outcome of a tick, as durable_mcp_schedule_ticks_total counts it. */
type TickOutcome = 'fired' | 'queued' | 'dropped' | 'failed';

/**
 * One firing pass: each schedule with something due (its cursor, a queued tick, a run-now request) gets
 * its tasks; returns how long until the next tick comes due (msUntilNextTick). Safe with any number of passes at once, on any number of instances: a tick's task is
 * created under the tick's idempotency key, and the cursor moves with a guarded UPDATE afterwards, so a
 * pass that loses a race, or dies halfway, at worst creates nothing twice.
 */
export async function firePass(deps: FiringDeps): Promise<number | undefined> {
  // The database's clock, not this host's: every instance reads the same time (a host whose clock runs
  // ahead would fire ticks early).
  const now = deps.now?.() ?? (await databaseNow(deps.db));
  const rows = await deps.db
    .selectFrom('schedules')
    .selectAll()
    .where((eb) => eb.or([eb('paused', '=', false), eb('run_requested_at', 'is not', null)]))
    .execute();
  // Only the schedules that still exist have a lag (one removed meanwhile would keep its last value).
  deps.metrics?.scheduleLag.reset();
  for (const row of rows) {
    try {
      await fireSchedule(deps, row, now);
    } catch (err) {
      deps.log.warn('schedule pass failed', { schedule: row.name, error: coerceError(err).message });
    }
  }
  return msUntilNextTick(deps.db);
}

/**
 * How long until the earliest tick of a running schedule comes due (ms, by the database's clock; 0 when
 * one is due already), undefined when none runs: the scheduler wakes then instead of a poll later.
 */
async function msUntilNextTick(db: Db): Promise<number | undefined> {
  const { rows } = await sql<{ ms: number | null }>`
    select (extract(epoch from min(next_fire_at) - clock_timestamp()) * 1000)::float8 as ms
    from schedules where not paused`.execute(db);
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Math.max(0, ms);
}

async function databaseNow(db: Db): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`select clock_timestamp() as now`.execute(db);
  return rows[0]?.now ?? new Date();
}

async function fireSchedule(deps: FiringDeps, row: ScheduleRow, now: Date): Promise<void> {
  const due = row.next_fire_at <= now && !row.paused;
  // Behind until this pass has moved the cursor: a schedule whose passes keep failing shows it.
  setLag(deps, row.name, due ? (now.getTime() - row.next_fire_at.getTime()) / 1000 : 0);
  const something = due || row.run_requested_at !== null || row.pending_tick_at !== null;
  if (!something) return;
  let lastActive = await isActive(deps.db, row.last_task_id);
  if (row.run_requested_at !== null) {
    const taskId = await createTick(deps, row, `run-now ${row.run_requested_at.toISOString()}`);
    await settle(deps.db, row.name, taskId, row.run_requested_at, sql`run_requested_at = null`, {
      column: 'run_requested_at',
      was: row.run_requested_at,
    });
    count(deps, row.name, taskId === null ? 'failed' : 'fired');
    lastActive ||= taskId !== null;
  }
  // A paused schedule fires only what run-now asks for.
  if (row.paused) return;
  let pending = row.pending_tick_at;
  if (row.pending_tick_at !== null && !lastActive) {
    const taskId = await createTick(deps, row, row.pending_tick_at.toISOString());
    await settle(deps.db, row.name, taskId, row.pending_tick_at, sql`pending_tick_at = null`, {
      column: 'pending_tick_at',
      was: row.pending_tick_at,
    });
    count(deps, row.name, taskId === null ? 'failed' : 'fired');
    lastActive ||= taskId !== null;
    pending = null;
  }
  if (!due) return;
  const plan = planTicks({
    clock: cronClock(row.cron, row.timezone),
    cursor: row.next_fire_at,
    now,
    misfireMs: deps.misfireMs,
    overlap: row.overlap,
    catchUp: definitionOf(row).catchUp,
    lastActive,
    pending,
  });
  let last: { taskId: string; tick: Date } | undefined;
  for (const tick of plan.fire) {
    const taskId = await createTick(deps, row, tick.toISOString());
    count(deps, row.name, taskId === null ? 'failed' : 'fired');
    if (taskId !== null) last = { taskId, tick };
  }
  if (plan.pend !== null) count(deps, row.name, 'queued');
  for (let i = 0; i < plan.dropped; i++) count(deps, row.name, 'dropped');
  // Guarded: of the passes that read this cursor, one moves it.
  await deps.db
    .updateTable('schedules')
    .set({
      next_fire_at: plan.next,
      pending_tick_at: sql<Date | null>`coalesce(pending_tick_at, ${plan.pend}::timestamptz)`,
      ...(last !== undefined && {
        last_task_id: last.taskId,
        last_tick_at: last.tick,
        last_fired_at: sql<Date>`now()`,
      }),
      updated_at: sql<Date>`now()`,
    })
    .where('name', '=', row.name)
    .where('next_fire_at', '=', row.next_fire_at)
    .execute();
  setLag(deps, row.name, 0);
}

/**
 * Creates the task of one tick of `row` (keyed `tick`) and returns its id; the tick's task if an
 * earlier pass made it. Null when the tick cannot have one (the tool is gone, its arguments no longer
 * pass, the principal is over a quota): recorded as the schedule's last error, and the tick is over.
 */
async function createTick(deps: FiringDeps, row: ScheduleRow, tick: string): Promise<string | null> {
  const s = definitionOf(row);
  try {
    checkSchedule(s, deps.tools, deps.maxArgumentsBytes);
    const tool = deps.tools.get(s.tool);
    const view = await deps.tasks.create(
      toolTaskOf(tool, s.arguments, {
        principal: s.principal,
        defaults: deps.taskDefaults,
        parsedArgs: parseToolArguments(tool, s.arguments),
        origin: `schedule:${s.name}`,
        idempotency: scheduleIdempotency(s.name, tick, s.tool, s.arguments),
      }),
    );
    return view.taskId;
  } catch (err) {
    // The tick's task exists, made while the schedule had other arguments.
    if (err instanceof IdempotencyConflictError) return null;
    if (!(err instanceof InvalidScheduleError || err instanceof QuotaExceededError)) throw err;
    const error = coerceError(err).message;
    deps.log.warn('schedule tick not fired', { schedule: s.name, tick, error });
    await deps.db.updateTable('schedules').set({ last_error: error }).where('name', '=', s.name).execute();
    return null;
  }
}

/** Records a queued or requested run as the schedule's last, and clears its request (guarded). */
async function settle(
  db: Db,
  name: string,
  taskId: string | null,
  tick: Date,
  clear: ReturnType<typeof sql>,
  guard: { column: 'run_requested_at' | 'pending_tick_at'; was: Date },
): Promise<void> {
  await sql`update schedules set ${clear}, updated_at = now()
    ${taskId === null ? sql`` : sql`, last_task_id = ${taskId}, last_tick_at = ${tick}, last_fired_at = now()`}
    where name = ${name} and ${sql.ref(guard.column)} = ${guard.was}`.execute(db);
}

async function isActive(db: Db, taskId: string | null): Promise<boolean> {
  if (taskId === null) return false;
  const row = await db
    .selectFrom('tasks')
    .select('status')
    .where('task_id', '=', taskId)
    .where('status', 'in', ACTIVE_STATUSES)
    .executeTakeFirst();
  return row !== undefined;
}

function count(deps: FiringDeps, schedule: string, outcome: TickOutcome): void {
  deps.metrics?.scheduleTicks.inc({ schedule, outcome });
}

function setLag(deps: FiringDeps, schedule: string, seconds: number): void {
  deps.metrics?.scheduleLag.set({ schedule }, seconds);
}
