import type { Db } from '../../db/database.ts';
import type { TaskStatus } from '../../tasks/status.ts';
import type { CatchUp, Overlap } from './define.ts';
import { definitionOf } from './store.ts';

/** A schedule as `schedules list` and the dashboard show it. */
export interface ScheduleStatus {
  name: string;
  source: 'module' | 'cli';
  cron: string;
  timezone: string;
  tool: string;
  principal: string;
  overlap: Overlap;
  catchUp: CatchUp;
  paused: boolean;
  /** The next tick to fire (a due one, while a pass has not fired it yet). */
  nextFireAt: Date;
  /** How far the next tick is behind the clock (0 when it is in the future, or paused). */
  lagSeconds: number;
  /** Overlap 'queue': the tick waiting for the last run to end. */
  pendingTickAt: Date | null;
  runRequested: boolean;
  lastTickAt: Date | null;
  lastTaskId: string | null;
  /** The last task's status (null: none yet, or purged). */
  lastTaskStatus: TaskStatus | null;
  lastError: string | null;
}

/** Every schedule with its last task's status, by name. */
export async function listSchedules(db: Db, now = new Date()): Promise<ScheduleStatus[]> {
  const rows = await db
    .selectFrom('schedules as s')
    .leftJoin('tasks as t', 't.task_id', 's.last_task_id')
    .selectAll('s')
    .select('t.status as last_task_status')
    .orderBy('s.name')
    .execute();
  return rows.map((row) => {
    const d = definitionOf(row);
    const behindMs = now.getTime() - row.next_fire_at.getTime();
    return {
      name: d.name,
      source: row.source,
      cron: d.cron,
      timezone: d.timezone,
      tool: d.tool,
      principal: d.principal,
      overlap: d.overlap,
      catchUp: d.catchUp,
      paused: row.paused,
      nextFireAt: row.next_fire_at,
      lagSeconds: row.paused || behindMs <= 0 ? 0 : behindMs / 1000,
      pendingTickAt: row.pending_tick_at,
      runRequested: row.run_requested_at !== null,
      lastTickAt: row.last_tick_at,
      lastTaskId: row.last_task_id,
      lastTaskStatus: row.last_task_status as TaskStatus | null,
      lastError: row.last_error,
    };
  });
}
