// The task list: counts by status, the activity charts, the filter form and the newest tasks.
import type { Context } from 'hono';
import { html } from 'hono/html';
import { TASK_STATUSES } from '../../core/wire.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../../tasks/status.ts';
import type { ActivityMinute } from '../../tasks/store/admin-activity.ts';
import type { AdminTaskFilter } from '../../tasks/store/admin-list.ts';
import type { AdminTask } from '../../tasks/store/admin-row.ts';
import type { readStoreStats } from '../../tasks/store/stats.ts';
import { backlogChart, bucketLabel, RANGES, throughputChart, type RangeName } from './charts.ts';
import { ago, BASE, iso, LIST_TEXT_CHARS, truncate, type Html } from './format.ts';
import { layout, type Viewer } from './layout.ts';
import { statusBadges, taskHref } from './task-state.ts';

const AGES: Record<string, number> = {
  '15m': 15 * 60_000,
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 604_800_000,
};

/** The statuses to filter by: the wire's, and `paused` (working, its attempts run out, held for an operator). */
const STATUS_FILTERS: readonly string[] = [...TASK_STATUSES, 'paused'];

interface ListQuery {
  status: string[];
  tool: string;
  principal: string;
  age: string;
}

/** The list's URL with this filter and chart span (the range links keep the filter, the form the span). */
function listHref(q: ListQuery, range: RangeName): string {
  const params = new URLSearchParams();
  for (const s of q.status) params.append('status', s);
  if (q.tool !== '') params.set('tool', q.tool);
  if (q.principal !== '') params.set('principal', q.principal);
  if (q.age !== '') params.set('age', q.age);
  params.set('range', range);
  return `${BASE}?${params.toString()}`;
}

export function filterOf(c: Context): AdminTaskFilter & { query: ListQuery } {
  const status = (c.req.queries('status') ?? []).filter((s) => STATUS_FILTERS.includes(s));
  const tool = c.req.query('tool')?.trim() ?? '';
  const principal = c.req.query('principal')?.trim() ?? '';
  const age = c.req.query('age') ?? '';
  return {
    status,
    tool: tool === '' ? undefined : tool,
    principal: principal === '' ? undefined : principal,
    newerThanMs: AGES[age],
    limit: 200,
    query: { status, tool, principal, age: AGES[age] === undefined ? '' : age },
  };
}

export interface ListPage {
  tasks: AdminTask[];
  stats: Awaited<ReturnType<typeof readStoreStats>>;
  activity: ActivityMinute[];
  range: RangeName;
  filter: { query: ListQuery };
  tools: readonly string[];
  viewer: Viewer;
}

/** The two charts over the chosen span, with links to the other spans. */
function chartsSection(activity: ActivityMinute[], range: RangeName, q: ListQuery): Html {
  const per = bucketLabel(range);
  return html`<nav class="ranges" aria-label="Chart span">
      Charts over the last
      ${(Object.keys(RANGES) as RangeName[]).map((r) =>
        r === range
          ? html`<a class="range" href="${listHref(q, r)}" aria-current="page">${r}</a>`
          : html`<a class="range" href="${listHref(q, r)}">${r}</a>`,
      )}
    </nav>
    <section class="charts">
      <figure>
        <figcaption>
          Throughput, last ${range}: <span class="k created">created</span> and
          <span class="k finished">finished</span> per ${per}
        </figcaption>
        ${throughputChart({ series: activity, range })}
      </figure>
      <figure>
        <figcaption>
          Backlog, last ${range}: tasks working or waiting for input, end of each ${per}
        </figcaption>
        ${backlogChart({ series: activity, range })}
      </figure>
    </section>`;
}

/** Counts by status (each a link to its filtered list), and the queue's health. */
function cardsSection(stats: ListPage['stats']): Html {
  const cards = [...ACTIVE_STATUSES, ...TERMINAL_STATUSES].map(
    (s) =>
      html`<a class="card ${s}" href="${BASE}?status=${s}"
        ><span class="n">${stats.tasksByStatus[s] ?? 0}</span><span>${s.replace('_', ' ')}</span></a
      >`,
  );
  return html`<section class="cards">
    ${cards}
    <div class="card queue"><span class="n">${stats.runsWaiting}</span><span>runs waiting</span></div>
    <div class="card queue">
      <span class="n">${stats.oldestWaitingRunSeconds.toFixed(1)} s</span><span>oldest waiting run</span>
    </div>
    <div class="card queue">
      <span class="n">${stats.expiredNotSwept}</span><span>expired, not swept</span>
    </div>
    <div
      class="card queue ${stats.stuckLegs > 0 ? 'stuck' : ''}"
      title="handlers still running past their cancel grace, each holding a worker slot until it returns"
    >
      <span class="n">${stats.stuckLegs}</span><span>stuck legs</span>
    </div>
  </section>`;
}

/** The filter form; it keeps the chart span in a hidden field. */
function filtersForm(q: ListQuery, tools: readonly string[], range: RangeName): Html {
  return html`<form class="filters" method="get" action="${BASE}">
    <fieldset>
      <legend>Status</legend>
      ${STATUS_FILTERS.map(
        (s) =>
          html`<label
            ><input type="checkbox" name="status" value="${s}" ${q.status.includes(s) ? 'checked' : ''} />
            ${s.replace('_', ' ')}</label
          >`,
      )}
    </fieldset>
    <label
      >Tool
      <select name="tool">
        <option value="">any</option>
        ${tools.map((t) => html`<option value="${t}" ${q.tool === t ? 'selected' : ''}>${t}</option>`)}
      </select></label
    >
    <label>Principal <input name="principal" value="${q.principal}" placeholder="any" /></label>
    <label
      >Created
      <select name="age">
        <option value="">any time</option>
        ${Object.keys(AGES).map((a) => html`<option value="${a}" ${q.age === a ? 'selected' : ''}>last ${a}</option>`)}
      </select></label
    >
    <input type="hidden" name="range" value="${range}" />
    <button>Filter</button> <a href="${BASE}">Clear</a>
  </form>`;
}

function taskRow(t: AdminTask): Html {
  return html`<tr data-task-id="${t.taskId}" data-status="${t.status}">
    <td>
      <a class="id" href="${taskHref(t.taskId)}">${t.taskId}</a>
    </td>
    <td>${t.toolName}</td>
    <td>${t.principal}</td>
    <td>${statusBadges(t)}</td>
    <td class="msg">${truncate(t.statusMessage ?? '', LIST_TEXT_CHARS)}</td>
    <td title="${iso(t.createdAt)}">${ago(t.createdAt)}</td>
    <td title="${iso(t.lastUpdatedAt)}">${ago(t.lastUpdatedAt)}</td>
    <td>${t.attempt}${t.failures > 0 ? html` <span class="muted">(${t.failures} crashed)</span>` : ''}</td>
  </tr>`;
}

/** The newest tasks the filter selects, and how many are shown. */
function tasksTable(tasks: AdminTask[]): Html {
  return html`<table class="tasks">
      <thead>
        <tr>
          <th>Task</th>
          <th>Tool</th>
          <th>Principal</th>
          <th>Status</th>
          <th>Message</th>
          <th>Created</th>
          <th>Updated</th>
          <th>Attempt</th>
        </tr>
      </thead>
      <tbody>
        ${
          tasks.length === 0
            ? html`<tr>
                <td colspan="8" class="empty">No tasks match.</td>
              </tr>`
            : tasks.map(taskRow)
        }
      </tbody>
    </table>
    <p class="muted">${tasks.length} shown, newest first (at most 200).</p>`;
}

export function listPage({ tasks, stats, activity, range, filter, tools, viewer }: ListPage): Html {
  const q = filter.query;
  const body = html` ${cardsSection(stats)} ${chartsSection(activity, range, q)}
  ${filtersForm(q, tools, range)} ${tasksTable(tasks)}`;
  return layout('Tasks', body, viewer);
}
