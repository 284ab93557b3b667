/**
 * The ticks a schedule fires, pass by pass, as the firing loop plans them: time zones across both DST
 * changes, and what catchUp and overlap do with ticks that are due together.
 */
import { describe, expect, it } from 'vitest';
import { cronClock } from '../../../src/launch/schedules/cron.ts';
import type { CatchUp, Overlap } from '../../../src/launch/schedules/define.ts';
import { planTicks } from '../../../src/launch/schedules/plan.ts';

const MINUTE = 60_000;

/** Every tick fired by passes `stepMs` apart from `from` to `to` (overlap 'allow', nothing missed). */
function firedBetween(cron: string, timezone: string, from: string, to: string, stepMs = MINUTE): string[] {
  const clock = cronClock(cron, timezone);
  let cursor = clock.next(new Date(from));
  const fired: string[] = [];
  for (let t = new Date(from).getTime(); t <= new Date(to).getTime(); t += stepMs) {
    const now = new Date(t);
    if (cursor > now) continue;
    const plan = planTicks({
      clock,
      cursor,
      now,
      misfireMs: MINUTE,
      overlap: 'allow',
      catchUp: 'none',
      lastActive: false,
      pending: null,
    });
    fired.push(...plan.fire.map((d) => d.toISOString()));
    cursor = plan.next;
  }
  return fired;
}

/** The wall-clock time of `iso` in `timezone`, with its offset: "2026-03-08 03:30 GMT-4". */
function wall(iso: string, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'shortOffset',
  }).formatToParts(new Date(iso));
  const p = (type: string) => parts.find((x) => x.type === type)?.value;
  return `${p('year')}-${p('month')}-${p('day')} ${p('hour')}:${p('minute')} ${p('timeZoneName')}`;
}

describe('schedules across DST (America/New_York)', () => {
  const NY = 'America/New_York';

  it('a 02:30 daily schedule fires once on the spring-forward day, at 03:30 (02:30 does not exist)', () => {
    const fired = firedBetween('30 2 * * *', NY, '2026-03-07T12:00:00Z', '2026-03-09T12:00:00Z');
    expect(fired.map((t) => wall(t, NY))).toEqual(['2026-03-08 03:30 GMT-4', '2026-03-09 02:30 GMT-4']);
  });

  it('a 02:30 daily schedule fires once on the fall-back day', () => {
    const fired = firedBetween('30 2 * * *', NY, '2026-10-31T12:00:00Z', '2026-11-02T12:00:00Z');
    expect(fired.map((t) => wall(t, NY))).toEqual(['2026-11-01 02:30 GMT-5', '2026-11-02 02:30 GMT-5']);
  });

  it('a 01:30 daily schedule fires once on the fall-back day, though 01:30 happens twice', () => {
    const fired = firedBetween('30 1 * * *', NY, '2026-10-31T12:00:00Z', '2026-11-01T23:00:00Z');
    expect(fired.map((t) => wall(t, NY))).toEqual(['2026-11-01 01:30 GMT-4']);
  });

  it('an hourly schedule fires once per real hour across fall-back (01:00 twice, an hour apart)', () => {
    const fired = firedBetween('0 * * * *', NY, '2026-11-01T03:30:00Z', '2026-11-01T08:30:00Z');
    expect(fired).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
    ]);
    expect(fired.map((t) => wall(t, NY))).toEqual([
      '2026-11-01 00:00 GMT-4',
      '2026-11-01 01:00 GMT-4',
      '2026-11-01 01:00 GMT-5',
      '2026-11-01 02:00 GMT-5',
      '2026-11-01 03:00 GMT-5',
    ]);
  });

  it('an hourly schedule fires once per real hour across spring-forward (no 02:00)', () => {
    const fired = firedBetween('0 * * * *', NY, '2026-03-08T05:30:00Z', '2026-03-08T08:30:00Z');
    expect(fired.map((t) => wall(t, NY))).toEqual([
      '2026-03-08 01:00 GMT-5',
      '2026-03-08 03:00 GMT-4',
      '2026-03-08 04:00 GMT-4',
    ]);
  });
});

describe('schedules across DST (Europe/Berlin)', () => {
  const BERLIN = 'Europe/Berlin';
  it('a 02:30 daily schedule fires once on each change day', () => {
    const spring = firedBetween('30 2 * * *', BERLIN, '2026-03-28T12:00:00Z', '2026-03-29T22:00:00Z');
    const fall = firedBetween('30 2 * * *', BERLIN, '2026-10-24T12:00:00Z', '2026-10-25T22:00:00Z');
    expect(spring.map((t) => wall(t, BERLIN))).toEqual(['2026-03-29 03:30 GMT+2']);
    expect(fall.map((t) => wall(t, BERLIN))).toEqual(['2026-10-25 02:30 GMT+2']);
  });

  it('a schedule started inside the spring-forward gap still fires the moved 02:30 that day', () => {
    const clock = cronClock('30 2 * * *', BERLIN);
    expect(wall(clock.next(new Date('2026-03-29T01:10:00Z')).toISOString(), BERLIN)).toBe(
      '2026-03-29 03:30 GMT+2',
    );
  });

  it('per-second schedules fire every second', () => {
    const fired = firedBetween('*/1 * * * * *', BERLIN, '2026-03-29T00:59:58Z', '2026-03-29T01:00:02Z', 1000);
    expect(fired).toHaveLength(4);
  });
});

describe('catchUp and overlap', () => {
  const clock = cronClock('*/10 * * * *', 'UTC');
  // Down from 00:05 to 01:02: ticks 00:10 … 00:50 are missed, 01:00 is on time.
  const base = {
    clock,
    cursor: new Date('2026-01-01T00:10:00Z'),
    now: new Date('2026-01-01T01:02:00Z'),
    misfireMs: 5 * MINUTE,
    lastActive: false,
    pending: null,
  };
  const plan = (catchUp: CatchUp, overlap: Overlap = 'allow', more = {}) =>
    planTicks({ ...base, catchUp, overlap, ...more });
  const times = (ds: Date[]) => ds.map((d) => d.toISOString().slice(11, 16));

  it("'none' fires the tick on time only; the cursor moves past now", () => {
    const p = plan('none');
    expect(times(p.fire)).toEqual(['01:00']);
    expect(p.dropped).toBe(5);
    expect(p.next.toISOString()).toBe('2026-01-01T01:10:00.000Z');
  });

  it("'latest' fires one run for the missed ticks (none extra when one is on time)", () => {
    expect(times(plan('latest').fire)).toEqual(['01:00']);
    const down = plan('latest', 'allow', { now: new Date('2026-01-01T00:58:00Z') });
    expect(times(down.fire)).toEqual(['00:50']);
    expect(down.dropped).toBe(4);
  });

  it('{ max: n } fires the last n missed ticks and the one on time', () => {
    expect(times(plan({ max: 2 }).fire)).toEqual(['00:40', '00:50', '01:00']);
    expect(times(plan({ max: 100 }).fire)).toEqual(['00:10', '00:20', '00:30', '00:40', '00:50', '01:00']);
  });

  it("overlap 'skip' fires the earliest chosen tick, or none while the last run is active", () => {
    expect(times(plan({ max: 2 }, 'skip').fire)).toEqual(['00:40']);
    const busy = plan({ max: 2 }, 'skip', { lastActive: true });
    expect(busy.fire).toEqual([]);
    expect(busy.dropped).toBe(6);
  });

  it("overlap 'queue' fires one and keeps one waiting; while active, one waits and no more", () => {
    const p = plan({ max: 2 }, 'queue');
    expect(times(p.fire)).toEqual(['00:40']);
    expect(p.pend?.toISOString()).toBe('2026-01-01T01:00:00.000Z');
    const busy = plan('none', 'queue', { lastActive: true });
    expect(busy.fire).toEqual([]);
    expect(busy.pend?.toISOString()).toBe('2026-01-01T01:00:00.000Z');
    const full = plan('none', 'queue', { lastActive: true, pending: new Date('2026-01-01T00:00:00Z') });
    expect(full.pend).toBeNull();
    expect(full.dropped).toBe(6);
  });
});

describe('cronClock', () => {
  it('refuses a bad expression and an unknown zone, saying which', () => {
    expect(() => cronClock('61 * * * *', 'UTC')).toThrow(/cron "61 \* \* \* \*"/);
    expect(() => cronClock('* * *', 'UTC')).toThrow(/3 fields/);
    expect(() => cronClock('* * * * *', 'Mars/Olympus')).toThrow(/unknown time zone "Mars\/Olympus"/);
  });
});
