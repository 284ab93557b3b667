// A task's timeline: created, each attempt's start and end, its steps (collapsed by pattern), step
// failures, input requests with their questions, what operators did and who did it, the end.
import { html } from 'hono/html';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import { badge, iso, type Html } from './format.ts';
import { stepEvents, type TimelineEvent } from './steps.ts';
import { isActive, taskHref } from './task-state.ts';

/** How much of an error or a question a timeline row shows (the attempts table and the page show more). */
const ROW_TEXT_CHARS = 300;

const cut = (s: string) => (s.length <= ROW_TEXT_CHARS ? s : `${s.slice(0, ROW_TEXT_CHARS)}…`);

const taskLink = (id: unknown) =>
  typeof id === 'string'
    ? html`<a class="id" href="${taskHref(id)}"><code>${id}</code></a>`
    : html`<code>?</code>`;

const fromStep = (detail: Record<string, unknown>) =>
  typeof detail.fromStep === 'string'
    ? html`from step <code>${detail.fromStep}</code>`
    : html`from the start`;

/** One audit-trail action, in words, with who took it. */
function actionText({ action, actor, detail }: TaskHistory['actions'][number], status: string): Html {
  const who = html`<b class="actor">${actor}</b>`;
  switch (action) {
    case 'cancel':
      return status === 'cancelled' ? html`Cancelled by ${who}` : html`Cancel requested by ${who}`;
    case 'resume':
      return html`Resumed by ${who}`;
    case 'fork':
      return html`Forked by ${who} into ${taskLink(detail.newTaskId)} (${fromStep(detail)})`;
    case 'forked':
      return html`Forked by ${who} from ${taskLink(detail.sourceTaskId)} (${fromStep(detail)})`;
    default:
      return html`<code>${action}</code> by ${who}`;
  }
}

function attemptEvents(attempts: TaskHistory['attempts']): TimelineEvent[] {
  return attempts.flatMap((a) => [
    {
      at: a.claimedAt,
      what: html`Attempt ${a.attempt} started on worker <code>${a.workerId}</code>, lease until
        ${iso(a.leaseExpiresAt)}`,
    },
    ...(a.endedAt === null
      ? []
      : [
          {
            at: a.endedAt,
            what: html`Attempt ${a.attempt} ended
              <span class="outcome ${a.outcome ?? ''}">${a.outcome ?? '?'}</span
              >${a.errorMessage === null ? '' : html`: <span class="error-message">${cut(a.errorMessage)}</span>`}`,
          },
        ]),
  ]);
}

function inputEvents(inputRequests: TaskHistory['inputRequests']): TimelineEvent[] {
  return inputRequests.flatMap((r) => [
    {
      at: r.askedAt,
      what: html`Asked for input <code>${r.key}</code> (${r.method})${
          r.question === null ? '' : html`: <q class="question">${cut(r.question)}</q>`
        }`,
    },
    ...(r.answeredAt === null
      ? []
      : [{ at: r.answeredAt, what: html`Input <code>${r.key}</code> answered` }]),
  ]);
}

/** The timeline's rows, oldest first. */
export function timelineEvents(history: TaskHistory): TimelineEvent[] {
  const { task, steps, stepFailures, inputRequests, attempts, actions } = history;
  // A cancel the audit trail does not hold came from the task's client (tasks/cancel).
  const clientCancel =
    task.cancelRequestedAt !== null && !actions.some((a) => a.action === 'cancel')
      ? [
          {
            at: task.cancelRequestedAt,
            what: html`Cancel requested by the client (<b>${task.principal}</b>)`,
          },
        ]
      : [];
  return [
    { at: task.createdAt, what: html`Created by <b>${task.principal}</b> (tool ${task.toolName})` },
    ...attemptEvents(attempts),
    ...stepEvents(steps),
    ...stepFailures.map((f) => ({
      at: f.at,
      what: html`Step <code>${f.name}</code> failed (${f.failures} time${f.failures === 1 ? '' : 's'}, last:
        <span class="status-message">${cut(f.lastError)}</span>)`,
    })),
    ...inputEvents(inputRequests),
    ...actions.map((a) => ({ at: a.at, what: actionText(a, task.status) })),
    ...clientCancel,
    ...(task.pausedAt === null ? [] : [{ at: task.pausedAt, what: html`Paused ${badge('paused')}` }]),
    ...(isActive(task) ? [] : [{ at: task.lastUpdatedAt, what: html`Ended ${badge(task.status)}` }]),
  ].sort((a, b) => a.at.getTime() - b.at.getTime());
}
