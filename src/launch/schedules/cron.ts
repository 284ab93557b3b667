import { CronExpressionParser } from 'cron-parser';

/** A cron expression read in a time zone: the instants it names, DST included. */
export interface CronClock {
  /** The first tick strictly after `after`. */
  next(after: Date): Date;
  /** The last tick strictly before `before`. */
  previous(before: Date): Date;
}

/** Whether the runtime knows `timezone` (an IANA name such as "Europe/Berlin", or "UTC"). */
export function isKnownTimezone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

/**
 * `cron` (5 fields, or 6 with seconds first) in `timezone`. On the day clocks go forward, a time that
 * does not exist (02:30 in New York) fires once, an hour later by the wall clock; on the day they go
 * back, a time that happens twice fires at its first, and an hourly schedule fires once per real hour.
 * Throws an Error saying what is wrong with the expression or the zone.
 */
export function cronClock(cron: string, timezone: string): CronClock {
  if (!isKnownTimezone(timezone)) throw new Error(`unknown time zone "${timezone}"`);
  const fields = cron.trim().split(/\s+/).length;
  if (fields !== 5 && fields !== 6) {
    throw new Error(`cron "${cron}" has ${fields} fields (5, or 6 with seconds first)`);
  }
  const at = (currentDate: Date) => {
    try {
      return CronExpressionParser.parse(cron, { tz: timezone, currentDate });
    } catch (err) {
      throw new Error(`cron "${cron}": ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  at(new Date()).next();
  const offset = offsetOf(timezone);
  return {
    next(after) {
      const next = at(after).next().toDate();
      // Asked from just after clocks went forward, cron-parser misses a time moved out of the gap (02:30
      // on that day runs at 03:30): near a change, step from before it instead. A schedule with more
      // ticks than MAX_STEPS in the lookback has every wall time after the gap as a tick anyway.
      const before = new Date(after.getTime() - CHANGE_LOOKBACK_MS);
      if (offset(before) === offset(after)) return next;
      const it = at(before);
      for (let t = it.next().toDate(), n = 0; t < next && n < MAX_STEPS; t = it.next().toDate(), n++) {
        if (t > after) return t;
      }
      return next;
    },
    previous: (before) => at(before).prev().toDate(),
  };
}

/** Longer than any clock change's gap. */
const CHANGE_LOOKBACK_MS = 3 * 3_600_000;
const MAX_STEPS = 200;

/** The UTC offset of `timezone` at an instant, as text ("GMT-04:00"). */
function offsetOf(timezone: string): (at: Date) => string {
  const format = new Intl.DateTimeFormat('en', { timeZone: timezone, timeZoneName: 'longOffset' });
  return (at) => format.formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? '';
}
