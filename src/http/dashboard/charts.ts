// Charts: inline SVG, rendered on the server, no script. A time axis (UTC ticks at round times) and the
// largest value on the y axis; the span is chosen with ?range= (links, no script), and longer spans add
// up the store's minutes into wider buckets so that a chart keeps about 60–100 bars.
import { html, raw } from 'hono/html';
import type { ActivityMinute } from '../../tasks/store/admin-activity.ts';
import { iso, type Html } from './format.ts';

/** The spans a chart can show: minutes covered, minutes per bucket, minutes between time-axis ticks. */
export const RANGES = {
  '15m': { minutes: 15, bucket: 1, tick: 5 },
  '1h': { minutes: 60, bucket: 1, tick: 10 },
  '6h': { minutes: 360, bucket: 5, tick: 60 },
  '24h': { minutes: 1440, bucket: 15, tick: 180 },
} as const;
export type RangeName = keyof typeof RANGES;
export const DEFAULT_RANGE: RangeName = '1h';

export const rangeOf = (value: string | undefined): RangeName =>
  value !== undefined && Object.hasOwn(RANGES, value) ? (value as RangeName) : DEFAULT_RANGE;

/** Some minutes added up: created and finished in them, in flight at the end of the last. */
export interface Bucket {
  start: number;
  end: number;
  created: number;
  finished: number;
  inFlight: number;
}

const MINUTE = 60_000;

/** Per-minute activity grouped into buckets of `minutes`, aligned to UTC (the first and last may be partial). */
export function bucketed(series: readonly ActivityMinute[], minutes: number): Bucket[] {
  const size = minutes * MINUTE;
  const buckets: Bucket[] = [];
  for (const m of series) {
    const t = m.minute.getTime();
    const start = Math.floor(t / size) * size;
    let last = buckets.at(-1);
    if (last === undefined || last.start !== start) {
      last = { start, end: start + size, created: 0, finished: 0, inFlight: 0 };
      buckets.push(last);
    }
    last.created += m.created;
    last.finished += m.finished;
    last.inFlight = m.inFlight; // minutes come oldest first: this is the bucket's end
  }
  return buckets;
}

const W = 600;
const H = 140;
const LEFT = 34;
const RIGHT = 8;
const TOP = 8;
const BOTTOM = 18;
const PLOT_H = H - TOP - BOTTOM;

const hhmm = (t: number) => new Date(t).toISOString().slice(11, 16);

/** The x scale of a chart over [from, to) (epoch ms). */
function xScale(from: number, to: number) {
  return (t: number) => LEFT + ((Math.min(Math.max(t, from), to) - from) / (to - from)) * (W - LEFT - RIGHT);
}

const yOf = (value: number, max: number) => TOP + PLOT_H - (value / max) * PLOT_H;

/** The axes: ticks every `tick` minutes at round UTC times with HH:MM labels, 0 and the largest value. */
function axes(from: number, to: number, tickMinutes: number, max: number, unit: string): string {
  const x = xScale(from, to);
  const step = tickMinutes * MINUTE;
  const parts = [
    `<line class="axis" x1="${LEFT}" y1="${TOP + PLOT_H}" x2="${W - RIGHT}" y2="${TOP + PLOT_H}"/>`,
    `<line class="axis" x1="${LEFT}" y1="${TOP}" x2="${LEFT}" y2="${TOP + PLOT_H}"/>`,
    `<line class="grid" x1="${LEFT}" y1="${TOP}" x2="${W - RIGHT}" y2="${TOP}"/>`,
    `<text class="y-max" x="${LEFT - 3}" y="${TOP + 4}" text-anchor="end">${max}</text>`,
    `<text class="y-zero" x="${LEFT - 3}" y="${TOP + PLOT_H + 3}" text-anchor="end">0</text>`,
    `<text class="y-unit" x="${LEFT + 3}" y="${TOP + 9}">${unit}</text>`,
  ];
  for (let t = Math.ceil(from / step) * step; t < to; t += step) {
    const tx = x(t).toFixed(1);
    parts.push(
      `<line class="tick" x1="${tx}" y1="${TOP + PLOT_H}" x2="${tx}" y2="${TOP + PLOT_H + 3}"/>`,
      `<text class="x-tick" x="${tx}" y="${H - 4}" text-anchor="middle" data-t="${new Date(t).toISOString()}">${hhmm(t)}</text>`,
    );
  }
  parts.push(`<text class="x-unit" x="${W - RIGHT}" y="${H - 4}" text-anchor="end">UTC</text>`);
  return parts.join('');
}

/** What both charts take: the minutes, and the span's bucket and tick sizes. */
export interface ChartInput {
  series: readonly ActivityMinute[];
  range: RangeName;
}

const bounds = (series: readonly ActivityMinute[]) => {
  const from = series[0]?.minute.getTime() ?? Math.floor(Date.now() / MINUTE) * MINUTE;
  return { from, to: (series.at(-1)?.minute.getTime() ?? from) + MINUTE };
};

export const bucketLabel = (range: RangeName) =>
  RANGES[range].bucket === 1 ? 'minute' : `${RANGES[range].bucket} min`;

export function throughputChart({ series, range }: ChartInput): Html {
  const { bucket, tick } = RANGES[range];
  const { from, to } = bounds(series);
  const buckets = bucketed(series, bucket);
  const max = Math.max(1, ...buckets.map((b) => Math.max(b.created, b.finished)));
  const x = xScale(from, to);
  const bars = buckets.map((b) => {
    const x0 = x(b.start);
    const half = (x(b.end) - x0) / 2;
    const when = `${iso(new Date(Math.max(b.start, from)))} +${bucketLabel(range)}`;
    const rect = (cls: string, at: number, n: number) =>
      `<rect class="${cls}" x="${at.toFixed(1)}" y="${yOf(n, max).toFixed(1)}" width="${half.toFixed(1)}" height="${((n / max) * PLOT_H).toFixed(1)}"><title>${when}: ${n} ${cls}</title></rect>`;
    return rect('created', x0, b.created) + rect('finished', x0 + half, b.finished);
  });
  return html`<svg
    class="chart throughput"
    viewBox="0 0 ${W} ${H}"
    role="img"
    aria-label="tasks created and finished per ${bucketLabel(range)}"
    data-minutes="${RANGES[range].minutes}"
  >
    ${raw(bars.join(''))} ${raw(axes(from, to, tick, max, `per ${bucketLabel(range)}`))}
  </svg>`;
}

export function backlogChart({ series, range }: ChartInput): Html {
  const { bucket, tick } = RANGES[range];
  const { from, to } = bounds(series);
  const buckets = bucketed(series, bucket);
  const max = Math.max(1, ...buckets.map((b) => b.inFlight));
  const x = xScale(from, to);
  const points = buckets.map((b) => `${x(b.end).toFixed(1)},${yOf(b.inFlight, max).toFixed(1)}`);
  const last = buckets.at(-1)?.inFlight ?? 0;
  return html`<svg
    class="chart backlog"
    viewBox="0 0 ${W} ${H}"
    role="img"
    aria-label="tasks in flight, now ${last}"
    data-minutes="${RANGES[range].minutes}"
  >
    ${raw(`<polyline class="backlog" points="${points.join(' ')}"/>`)}
    ${raw(axes(from, to, tick, max, `tasks, now ${last}`))}
  </svg>`;
}
