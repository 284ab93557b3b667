import { sql, type Selectable } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { SchedulesTable } from '../../db/schedules.table.ts';
import { cronClock } from './cron.ts';
import { CatchUpSchema, type ScheduleDefinition } from './define.ts';

export type ScheduleRow = Selectable<SchedulesTable>;

/** A stored schedule's definition, as defineSchedule would have made it. */
export function definitionOf(row: ScheduleRow): ScheduleDefinition {
  return {
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    tool: row.tool_name,
    arguments: row.arguments,
    principal: row.principal,
    overlap: row.overlap,
    catchUp: CatchUpSchema.parse(row.catch_up),
  };
}

function columnsOf(s: ScheduleDefinition, source: 'module' | 'cli', now: Date) {
  return {
    name: s.name,
    source,
    cron: s.cron,
    timezone: s.timezone,
    tool_name: s.tool,
    arguments: JSON.stringify(s.arguments),
    principal: s.principal,
    overlap: s.overlap,
    catch_up: JSON.stringify(s.catchUp),
    next_fire_at: cronClock(s.cron, s.timezone).next(now),
  };
}

/**
 * Makes the stored 'module' schedules those of the tools module: new ones start at their next tick,
 * changed ones keep their cursor unless their cron or zone changed, and those the module no longer
 * declares go. A paused schedule stays paused. Safe when several instances start at once.
 */
export async function syncDeclaredSchedules(
  db: Db,
  schedules: readonly ScheduleDefinition[],
  now = new Date(),
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const names = schedules.map((s) => s.name);
    let removed = trx.deleteFrom('schedules').where('source', '=', 'module');
    if (names.length > 0) removed = removed.where('name', 'not in', names);
    await removed.execute();
    for (const s of schedules) {
      await trx
        .insertInto('schedules')
        .values(columnsOf(s, 'module', now))
        .onConflict((oc) =>
          oc.column('name').doUpdateSet((eb) => ({
            source: 'module',
            cron: eb.ref('excluded.cron'),
            timezone: eb.ref('excluded.timezone'),
            tool_name: eb.ref('excluded.tool_name'),
            arguments: eb.ref('excluded.arguments'),
            principal: eb.ref('excluded.principal'),
            overlap: eb.ref('excluded.overlap'),
            catch_up: eb.ref('excluded.catch_up'),
            next_fire_at: sql<Date>`case when schedules.cron = excluded.cron
              and schedules.timezone = excluded.timezone and schedules.source = 'module'
              then schedules.next_fire_at else excluded.next_fire_at end`,
            updated_at: sql<Date>`now()`,
          })),
        )
        .execute();
    }
  });
}

/** Stores a schedule that lives only in the database (`schedules add`); false if the name is taken. */
export async function addSchedule(db: Db, s: ScheduleDefinition, now = new Date()): Promise<boolean> {
  const row = await db
    .insertInto('schedules')
    .values(columnsOf(s, 'cli', now))
    .onConflict((oc) => oc.column('name').doNothing())
    .returning('name')
    .executeTakeFirst();
  return row !== undefined;
}

/** Every schedule, by name. */
export function listScheduleRows(db: Db): Promise<ScheduleRow[]> {
  return db.selectFrom('schedules').selectAll().orderBy('name').execute();
}

/** Pauses a schedule: no tick fires until it is resumed. False if there is no such schedule. */
export async function pauseSchedule(db: Db, name: string): Promise<boolean> {
  const r = await db
    .updateTable('schedules')
    .set({ paused: true, updated_at: sql<Date>`now()` })
    .where('name', '=', name)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/** Resumes a paused schedule at its next tick (ticks while paused are not missed: they never fire). */
export async function resumeSchedule(db: Db, name: string, now = new Date()): Promise<boolean> {
  const row = await db.selectFrom('schedules').selectAll().where('name', '=', name).executeTakeFirst();
  if (row === undefined) return false;
  if (!row.paused) return true;
  await db
    .updateTable('schedules')
    .set({
      paused: false,
      next_fire_at: cronClock(row.cron, row.timezone).next(now),
      pending_tick_at: null,
      updated_at: sql<Date>`now()`,
    })
    .where('name', '=', name)
    .where('paused', '=', true)
    .execute();
  return true;
}

/** Deletes a schedule (its tasks stay). A module's schedule comes back at the next start that declares it. */
export async function removeSchedule(db: Db, name: string): Promise<boolean> {
  const r = await db.deleteFrom('schedules').where('name', '=', name).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

/** Asks the next firing pass (of any instance) for one run now, whatever the clock and overlap say. */
export async function requestScheduleRun(db: Db, name: string): Promise<boolean> {
  const r = await db
    .updateTable('schedules')
    // Milliseconds: the pass that fires it clears it by its value as JavaScript read it.
    .set({ run_requested_at: sql<Date>`coalesce(run_requested_at, date_trunc('milliseconds', now()))` })
    .where('name', '=', name)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}
