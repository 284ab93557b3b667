// Charts: inline SVG, rendered on the server, no script.
import { html, raw } from 'hono/html';
import type { ActivityMinute } from '../../tasks/store/admin.ts';
import { iso, type Html } from './format.ts';

const W = 600;
const H = 120;

export function throughputChart(series: ActivityMinute[]): Html {
  const max = Math.max(1, ...series.map((m) => Math.max(m.created, m.finished)));
  const bw = W / series.length;
  const bars = series.map((m, i) => {
    const hc = (m.created / max) * (H - 14);
    const hf = (m.finished / max) * (H - 14);
    return raw(
      `<rect class="created" x="${(i * bw).toFixed(1)}" y="${(H - hc).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${hc.toFixed(1)}"><title>${iso(m.minute)}: ${m.created} created</title></rect>` +
        `<rect class="finished" x="${(i * bw + bw / 2).toFixed(1)}" y="${(H - hf).toFixed(1)}" width="${(bw / 2).toFixed(1)}" height="${hf.toFixed(1)}"><title>${iso(m.minute)}: ${m.finished} finished</title></rect>`,
    );
  });
  return html`<svg
    class="chart"
    viewBox="0 0 ${W} ${H}"
    role="img"
    aria-label="tasks created and finished per minute"
  >
    ${bars}
    <text x="2" y="10">${max}/min</text>
  </svg>`;
}

export function backlogChart(series: ActivityMinute[]): Html {
  const max = Math.max(1, ...series.map((m) => m.inFlight));
  const step = W / Math.max(1, series.length - 1);
  const points = series.map(
    (m, i) => `${(i * step).toFixed(1)},${(H - (m.inFlight / max) * (H - 14)).toFixed(1)}`,
  );
  const last = series.at(-1)?.inFlight ?? 0;
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="tasks in flight per minute">
    ${raw(`<polyline class="backlog" points="${points.join(' ')}"/>`)}
    <text x="2" y="10">max ${max}, now ${last}</text>
  </svg>`;
}
