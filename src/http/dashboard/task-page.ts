// One task's page: what it is and why it is where it is. First what it waits for (a question, an operator's
// resume), then its facts and the actions an operator may take (each through a confirmation page), its
// arguments, its attempts and how each ended, its timeline, its artifacts, its outcome and its event log.
import { html } from 'hono/html';
import type { WireTaskEvent } from '../../core/task-events.ts';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import { eventLogSection, liveScript } from './event-log.ts';
import { ago, iso, PAGE_TEXT_CHARS, truncate, type Html } from './format.ts';
import { layout, type Viewer } from './layout.ts';
import { argumentsSection, artifactsTable, attemptsTable, waitingSection } from './task-sections.ts';
import { familySection } from './task-family.ts';
import { isActive, refusal, statusBadges, TASK_ACTIONS, taskHref } from './task-state.ts';
import { timelineEvents } from './timeline.ts';

type Task = TaskHistory['task'];

/** The actions this task allows now, as links to their confirmation pages (GET: nothing happens yet). */
function actionLinks(task: Task): Html {
  const label = { cancel: 'Cancel task…', resume: 'Resume…', fork: 'Fork…' };
  const style = { cancel: 'danger', resume: 'primary', fork: '' };
  const links = TASK_ACTIONS.filter((action) => refusal(action, task) === undefined).map(
    (action) =>
      html`<a class="button ${style[action]}" href="${taskHref(task.taskId, action)}">${label[action]}</a>`,
  );
  if (isActive(task) && task.cancelRequestedAt !== null)
    links.push(html`<span class="button disabled">Cancel requested</span>`);
  return links.length === 0 ? html`` : html`<p class="actions">${links}</p>`;
}

function pausedSection(task: Task): Html {
  if (task.pausedAt === null) return html``;
  return html`<section class="paused" role="status">
    <p>
      <b>Paused</b> since ${iso(task.pausedAt)} (${ago(task.pausedAt)}): its attempts ran out and it waits for
      an operator to resume it.
    </p>
    <p class="status-message">${truncate(task.statusMessage ?? '', PAGE_TEXT_CHARS)}</p>
  </section>`;
}

function facts(task: Task): Html {
  return html`<dl class="facts">
    <dt>Tool</dt>
    <dd>${task.toolName}</dd>
    <dt>Principal</dt>
    <dd>${task.principal}</dd>
    <dt>Status message</dt>
    <dd class="status-message">${truncate(task.statusMessage ?? '—', PAGE_TEXT_CHARS)}</dd>
    <dt>Created</dt>
    <dd>${iso(task.createdAt)} (${ago(task.createdAt)})</dd>
    <dt>Last updated</dt>
    <dd>${iso(task.lastUpdatedAt)}</dd>
    <dt>Expires</dt>
    <dd>${task.expiresAt === null ? 'never' : iso(task.expiresAt)}</dd>
    <dt>Attempt</dt>
    <dd>${task.attempt}${task.failures > 0 ? ` (${task.failures} crashed)` : ''}</dd>
    <dt>Lease</dt>
    <dd>
      ${task.leasedBy === null ? '—' : html`<code>${task.leasedBy}</code> until ${iso(task.leaseExpiresAt)}`}
    </dd>
    ${
      task.origin === null
        ? ''
        : html`<dt>Origin</dt>
            <dd><code>${task.origin}</code></dd>`
    }
  </dl>`;
}

function outcomeSection(task: Task): Html {
  const outcome = task.error ?? task.result;
  if (outcome === null) return html``;
  return html`<h2>${task.error === null ? 'Result' : 'Error'}</h2>
    <pre class="outcome">${truncate(JSON.stringify(outcome, null, 2), 20_000)}</pre>`;
}

/** Whether the page keeps itself current: while the task runs (a paused task changes only when someone acts). */
export const refreshesItself = (task: Task): boolean => isActive(task) && task.pausedAt === null;

/**
 * The task's page, with its latest `events` (none: no event log). While it refreshes itself and the
 * dashboard can stream them (`followable`), it is live: its script appends each new event, and reads the
 * rest of the page (`#task`) again in place of the refresh (which then stays for a browser that runs no script).
 */
export function taskPage(
  history: TaskHistory,
  viewer: Viewer,
  { events, followable }: { events: readonly WireTaskEvent[] | undefined; followable: boolean },
): Html {
  const { task } = history;
  // (A refresh also resets an open <details>.)
  const refresh = refreshesItself(task);
  const live = followable && refresh;
  const body = html`<div id="task" ${live ? 'data-live' : ''}>${taskSections(history, refresh)}</div>
    ${events === undefined ? '' : eventLogSection(task.taskId, events, live)}`;
  return layout(`Task ${task.taskId}`, body, viewer, {
    refreshSeconds: refresh ? 2 : undefined,
    script: live ? liveScript() : undefined,
  });
}

/** Everything but the event log (what a live page reads again). */
function taskSections(history: TaskHistory, refresh: boolean): Html {
  const { task } = history;
  return html`<h1>Task <code>${task.taskId}</code> ${statusBadges(task)}</h1>
    ${waitingSection(history.inputRequests)} ${pausedSection(task)} ${facts(task)} ${actionLinks(task)}
    ${familySection(history)} ${argumentsSection(history.arguments)} ${attemptsTable(history.attempts, task)}
    <h2>Timeline</h2>
    <ol class="timeline">
      ${timelineEvents(history).map((e) => html`<li><time>${iso(e.at)}</time> ${e.what}</li>`)}
    </ol>
    ${artifactsTable(task.taskId, history.artifacts)} ${outcomeSection(task)}
    <p class="muted">
      Input answers are never shown.${refresh ? ' This page refreshes every 2 s while the task runs.' : ''}
    </p>`;
}
