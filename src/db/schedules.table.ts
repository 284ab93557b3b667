import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** A tool called on a clock (src/launch/schedules): its definition and its cursor. */
export interface SchedulesTable {
  name: string;
  /** 'module': synced from the tools module at startup; 'cli': added with `schedules add`. */
  source: 'module' | 'cli';
  cron: string;
  timezone: string;
  tool_name: string;
  arguments: ColumnType<Record<string, unknown>, string, string>;
  principal: string;
  overlap: 'skip' | 'queue' | 'allow';
  /** "none" | "latest" | {"max": n} */
  catch_up: ColumnType<unknown, string, string>;
  paused: Generated<boolean>;
  /** The earliest tick not yet handled. */
  next_fire_at: Timestamp;
  /** Overlap 'queue': the tick waiting for the last run to end. */
  pending_tick_at: NullableTimestamp;
  run_requested_at: NullableTimestamp;
  last_tick_at: NullableTimestamp;
  last_task_id: string | null;
  last_fired_at: NullableTimestamp;
  last_error: string | null;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}
