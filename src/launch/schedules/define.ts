import { z } from 'zod';
import type { JsonObject } from '../../core/wire.ts';
import type { ToolDefinition } from '../../tools/define.ts';
import { cronClock } from './cron.ts';

export const OVERLAPS = ['skip', 'queue', 'allow'] as const;
/** What a tick does while the schedule's last run is still active. */
export type Overlap = (typeof OVERLAPS)[number];

/** What happens to ticks missed while no instance was running (more than SCHEDULE_MISFIRE_MS late). */
export type CatchUp = 'none' | 'latest' | { max: number };

/** A schedule as stored and fired: every default applied, the tool by name. */
export interface ScheduleDefinition {
  name: string;
  cron: string;
  timezone: string;
  tool: string;
  arguments: JsonObject;
  principal: string;
  overlap: Overlap;
  catchUp: CatchUp;
}

/** What `defineSchedule` takes. */
export interface ScheduleOptions {
  /** Unique among schedules; letters, digits, `.`, `_`, `-`, `:` (it names the schedule in the CLI and metrics). */
  name: string;
  /** 5 fields (minute hour day month weekday), or 6 with seconds first: `"0 30 2 * * *"`. */
  cron: string;
  /** IANA time zone the cron is read in (default "UTC"); DST is followed. */
  timezone?: string;
  /** The tool each tick calls (a tool of the same module, or its name). */
  tool: string | Pick<ToolDefinition, 'name'>;
  /** The tool's arguments, checked against its schema when the module loads. */
  arguments?: JsonObject;
  /** Who owns the tasks the schedule creates (tasks/get, tasks/list and quotas see them as theirs). */
  principal: string;
  /**
   * While the last run is still active: 'skip' the tick (default), 'queue' it (at most one waits, and
   * runs when the last one ends), or 'allow' runs side by side.
   */
  overlap?: Overlap;
  /**
   * Ticks missed while every instance was down: 'none' (dropped), 'latest' (one run for them, the
   * default), or `{ max: n }` (each of the last n missed ticks runs).
   */
  catchUp?: CatchUp;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export const CatchUpSchema = z.union([
  z.literal('none'),
  z.literal('latest'),
  z.strictObject({ max: z.number().int().min(1).max(1000) }),
]);

const ScheduleSchema = z
  .strictObject({
    name: z.string().regex(NAME, 'letters, digits, ".", "_", "-", ":" (at most 128)'),
    cron: z.string().min(1),
    timezone: z.string().min(1).default('UTC'),
    tool: z.union([z.string().min(1), z.looseObject({ name: z.string().min(1) })]),
    arguments: z.record(z.string(), z.unknown()).default({}),
    principal: z.string().min(1),
    overlap: z.enum(OVERLAPS).default('skip'),
    catchUp: CatchUpSchema.default('latest'),
  })
  .superRefine((s, ctx) => {
    try {
      cronClock(s.cron, s.timezone);
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['cron'], message: (err as Error).message });
    }
  });

/** Thrown by defineSchedule: what is wrong, in one line that names the schedule. */
export class InvalidScheduleError extends Error {
  constructor(
    readonly scheduleName: string,
    message: string,
  ) {
    super(`schedule ${scheduleName}: ${message}`);
    this.name = 'InvalidScheduleError';
  }
}

/** Every issue of a zod error as `path: message`, joined on one line. */
function oneLine(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length > 0 ? `${i.path.join('.')}: ` : ''}${i.message}`)
    .join('; ');
}

/**
 * A tool called on a clock. Export it from the tools module as `schedules` beside `tools`; each tick
 * creates exactly one task, however many instances run.
 *
 * ```ts
 * export const schedules = [
 *   defineSchedule({
 *     name: 'nightly-report',
 *     cron: '30 2 * * *',
 *     timezone: 'Europe/Berlin',
 *     tool: report,
 *     arguments: { days: 1 },
 *     principal: 'ops',
 *     overlap: 'skip',
 *     catchUp: 'latest',
 *   }),
 * ];
 * ```
 */
export function defineSchedule(options: ScheduleOptions): ScheduleDefinition {
  const parsed = ScheduleSchema.safeParse(options);
  if (!parsed.success) {
    const name = typeof options?.name === 'string' ? options.name : '(unnamed)';
    throw new InvalidScheduleError(name, oneLine(parsed.error));
  }
  const s = parsed.data;
  return Object.freeze({
    ...s,
    tool: typeof s.tool === 'string' ? s.tool : s.tool.name,
    arguments: s.arguments,
  });
}
