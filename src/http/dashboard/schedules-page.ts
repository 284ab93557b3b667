// The schedules at /dashboard/schedules: each one's clock, next tick, lag and last task (read-only; the
// CLI's `schedules pause|resume|run-now` act on them).
import { html } from 'hono/html';
import type { ScheduleStatus } from '../../launch/schedules/list.ts';
import { ago, badge, iso, LIST_TEXT_CHARS, truncate, type Html } from './format.ts';
import { layout, type Viewer } from './layout.ts';
import { taskHref } from './task-state.ts';

const catchUpText = (c: ScheduleStatus['catchUp']) => (typeof c === 'string' ? c : `max ${c.max}`);

function scheduleRow(s: ScheduleStatus): Html {
  return html`<tr data-schedule="${s.name}">
    <td>${s.name}${s.source === 'cli' ? html` <span class="muted">(added)</span>` : ''}</td>
    <td><code>${s.cron}</code> <span class="muted">${s.timezone}</span></td>
    <td>${s.tool} <span class="muted">as ${s.principal}</span></td>
    <td>${s.overlap} / ${catchUpText(s.catchUp)}</td>
    <td>
      ${s.paused ? badge('paused') : html`<span title="${iso(s.nextFireAt)}">${iso(s.nextFireAt)}</span>`}
    </td>
    <td data-lag="${Math.round(s.lagSeconds)}">${Math.round(s.lagSeconds)} s</td>
    <td>
      ${
        s.lastTaskId === null
          ? '-'
          : html`<a class="id" href="${taskHref(s.lastTaskId)}">${s.lastTaskId}</a>
              ${s.lastTaskStatus === null ? '' : badge(s.lastTaskStatus)}
              ${s.lastTickAt === null ? '' : html`<span class="muted">${ago(s.lastTickAt)}</span>`}`
      }
    </td>
    <td class="msg">${truncate(s.lastError ?? '', LIST_TEXT_CHARS)}</td>
  </tr>`;
}

export function schedulesPage(schedules: ScheduleStatus[], viewer: Viewer): Html {
  const body = html`<h1>Schedules</h1>
    <table class="tasks schedules">
      <thead>
        <tr>
          <th>Schedule</th>
          <th>Cron</th>
          <th>Tool</th>
          <th>Overlap / catch-up</th>
          <th>Next tick</th>
          <th>Lag</th>
          <th>Last task</th>
          <th>Last error</th>
        </tr>
      </thead>
      <tbody>
        ${
          schedules.length === 0
            ? html`<tr>
                <td colspan="8" class="empty">
                  No schedules (defineSchedule, or durable-mcp-tasks schedules add).
                </td>
              </tr>`
            : schedules.map(scheduleRow)
        }
      </tbody>
    </table>`;
  return layout('Schedules', body, viewer, { refreshSeconds: 10 });
}
