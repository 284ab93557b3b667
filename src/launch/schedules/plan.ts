import type { CronClock } from './cron.ts';
import type { CatchUp, Overlap } from './define.ts';

/** What one pass knows of a schedule whose cursor is due. */
export interface TickState {
  clock: CronClock;
  /** The earliest tick not yet handled (`next_fire_at`). */
  cursor: Date;
  now: Date;
  /** A tick later than this is missed rather than late (SCHEDULE_MISFIRE_MS). */
  misfireMs: number;
  overlap: Overlap;
  catchUp: CatchUp;
  /** Whether the schedule's last run is still active. */
  lastActive: boolean;
  /** Overlap 'queue': a tick already waiting. */
  pending: Date | null;
}

/** What a pass does with the due ticks, and where the cursor goes after. */
export interface TickPlan {
  /** Ticks whose task to create now, earliest first. */
  fire: Date[];
  /** Overlap 'queue': the tick to keep waiting (null: none, or the one already waiting stays). */
  pend: Date | null;
  /** Ticks handled without a task (skipped by overlap, or missed and not caught up). */
  dropped: number;
  /** The new cursor: the first tick after `now`. */
  next: Date;
}

/** Due ticks a pass enumerates one by one; a schedule further behind is caught up by jumping. */
const MAX_DUE = 10_000;

export function planTicks(state: TickState): TickPlan {
  const { clock, cursor, now, misfireMs } = state;
  const { missed, onTime, missedTotal } = dueTicks(clock, cursor, now, now.getTime() - misfireMs);
  const keep =
    state.catchUp === 'none'
      ? 0
      : state.catchUp === 'latest'
        ? onTime.length > 0
          ? 0
          : 1
        : state.catchUp.max;
  const chosen = [...missed.slice(Math.max(0, missed.length - keep)), ...onTime];
  const next = clock.next(now);
  const due = missedTotal + onTime.length;
  if (state.overlap === 'allow') return { fire: chosen, pend: null, dropped: due - chosen.length, next };
  const [first] = chosen;
  const last = chosen.at(-1);
  if (first === undefined || last === undefined) return { fire: [], pend: null, dropped: due, next };
  if (state.overlap === 'skip') {
    return state.lastActive
      ? { fire: [], pend: null, dropped: due, next }
      : { fire: [first], pend: null, dropped: due - 1, next };
  }
  // 'queue': one runs at a time, one more waits.
  if (state.lastActive) {
    const pend = state.pending === null ? first : null;
    return { fire: [], pend, dropped: due - (pend === null ? 0 : 1), next };
  }
  const pend = chosen.length > 1 && state.pending === null ? last : null;
  return { fire: [first], pend, dropped: due - 1 - (pend === null ? 0 : 1), next };
}

/**
 * The ticks in [cursor, now], stepping from the cursor (a tick computed by the clock before, so that a
 * wall-clock time moved by DST is not lost by recomputing it): missed (before `lateFrom`) and on time.
 * Past MAX_DUE, the last MAX_CATCH_UP missed ticks are reached backwards from the first on-time one.
 */
function dueTicks(
  clock: CronClock,
  cursor: Date,
  now: Date,
  lateFrom: number,
): { missed: Date[]; onTime: Date[]; missedTotal: number } {
  const missed: Date[] = [];
  const onTime: Date[] = [];
  let t = cursor;
  for (let n = 0; t <= now && n < MAX_DUE; n++, t = clock.next(t)) {
    (t.getTime() < lateFrom ? missed : onTime).push(t);
  }
  if (t > now) return { missed, onTime, missedTotal: missed.length };
  // Far behind (after a long outage): jump to now, and take the missed ticks backwards.
  const far: Date[] = [];
  for (
    let b = clock.previous(new Date(lateFrom));
    b > t && far.length < MAX_CATCH_UP;
    b = clock.previous(b)
  ) {
    far.unshift(b);
  }
  const late: Date[] = [];
  for (let o = clock.next(new Date(lateFrom - 1)); o <= now && late.length < MAX_DUE; o = clock.next(o)) {
    late.push(o);
  }
  return { missed: [...missed, ...far], onTime: late, missedTotal: MAX_DUE + far.length };
}

/** The most missed ticks `catchUp: { max }` may ask for. */
export const MAX_CATCH_UP = 1000;
