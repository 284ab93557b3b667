// Confirmation pages: an operator's action is a link to one of these (a GET changes nothing), and only
// its form's POST, with the sign-in's CSRF token, acts. Each says what will happen to which task.
import { html } from 'hono/html';
import type { TaskHistory } from '../../tasks/store/admin-task.ts';
import type { Fork } from '../../tasks/store/fork.ts';
import { PAGE_TEXT_CHARS, truncate, type Html } from './format.ts';
import { layout, type Viewer } from './layout.ts';
import { statusBadges, taskHref, type TaskAction } from './task-state.ts';

type Task = TaskHistory['task'];

/** The names a fork may start from, in the order the task recorded them (a select stays usable). */
const MAX_FORK_STEPS = 1_000;

const which = (task: Task) =>
  html`<code>${task.taskId}</code> (<span class="tool">${task.toolName}</span>,
    <span class="principal">${task.principal}</span>)`;

function confirmPage(viewer: Viewer, title: string, task: Task, question: Html, form: Html): Html {
  return layout(
    title,
    html`<section class="confirm">
      <h1>${question}</h1>
      <p>
        Now: ${statusBadges(task)}
        <span class="status-message">${truncate(task.statusMessage ?? '', PAGE_TEXT_CHARS)}</span>
      </p>
      ${form}
    </section>`,
    viewer,
  );
}

const confirmForm = (viewer: Viewer, task: Task, action: TaskAction, button: Html, fields: Html = html``) =>
  html`<form method="post" action="${taskHref(task.taskId, action)}" class="confirm ${action}">
    <input type="hidden" name="csrf" value="${viewer.csrf}" />
    ${fields}
    <button class="${action === 'cancel' ? 'danger' : 'primary'}">${button}</button>
    <a href="${taskHref(task.taskId)}">Back to the task</a>
  </form>`;

/** Why an action is not offered: the task's state, and the way back. */
export function notNowPage(viewer: Viewer, task: Task, why: string): Html {
  return layout(
    'Not now',
    html`<section class="confirm">
      <h1>Task ${which(task)}</h1>
      <p class="error" role="alert">${why}</p>
      <p><a href="${taskHref(task.taskId)}">Back to the task</a></p>
    </section>`,
    viewer,
  );
}

function confirmCancelPage(viewer: Viewer, { task }: TaskHistory): Html {
  return confirmPage(
    viewer,
    `Cancel ${task.taskId}`,
    task,
    html`Cancel task ${which(task)}?`,
    confirmForm(
      viewer,
      task,
      'cancel',
      html`Confirm: cancel the task`,
      html`<p>
        A task no worker holds ends <code>cancelled</code> at once; a running handler is told, and the task
        ends when it stops. The audit trail records you as <b>${viewer.actor}</b>.
      </p>`,
    ),
  );
}

function confirmResumePage(viewer: Viewer, { task }: TaskHistory): Html {
  return confirmPage(
    viewer,
    `Resume ${task.taskId}`,
    task,
    html`Resume task ${which(task)}?`,
    confirmForm(
      viewer,
      task,
      'resume',
      html`Confirm: resume the task`,
      html`<p>
        It runs again from its last completed step, its attempts counted afresh. The audit trail records you
        as <b>${viewer.actor}</b>.
      </p>`,
    ),
  );
}

function confirmForkPage(viewer: Viewer, history: TaskHistory): Html {
  const { task } = history;
  const names = [...new Set(history.steps.map((s) => s.name))].slice(0, MAX_FORK_STEPS);
  return confirmPage(
    viewer,
    `Fork ${task.taskId}`,
    task,
    html`Fork task ${which(task)}?`,
    confirmForm(
      viewer,
      task,
      'fork',
      html`Confirm: fork the task`,
      html`<p>
          A new task of the same principal, tool and arguments; this one does not change. From a step, the
          steps before it are copied (they do not run again).
        </p>
        <label
          >Run again
          <select name="fromStep">
            <option value="" selected>from the start</option>
            ${names.map((n) => html`<option value="${n}">from step ${n}</option>`)}
          </select></label
        >`,
    ),
  );
}

/**
 * A fork that waits for signals under new URLs (its source's never reach it): shown once, after the
 * fork, since only the new task's deliverer can use them and no page shows them again.
 */
export function forkedPage(
  viewer: Viewer,
  sourceId: string,
  fork: Fork,
  signalUrl: (token: string) => string,
): Html {
  return layout(
    `Forked ${sourceId}`,
    html`<section class="confirm forked">
      <h1>
        Forked <code>${sourceId}</code> as <a href="${taskHref(fork.taskId)}"><code>${fork.taskId}</code></a>
      </h1>
      <p>
        The new task waits for these signals at new URLs (the old ones do not reach it). Hand them to whoever
        delivers them: they are shown only here.
      </p>
      <ul class="signals">
        ${fork.signals.map(
          (s) =>
            html`<li>
              <b>${s.name}</b>: <code class="signal-url">${signalUrl(s.token)}</code>
              ${s.timeoutAt === null ? '' : html`(until ${s.timeoutAt.toISOString()})`}
            </li>`,
        )}
      </ul>
      <p><a href="${taskHref(fork.taskId)}">To the new task</a></p>
    </section>`,
    viewer,
  );
}

/** Each action's confirmation page. */
export const CONFIRM_PAGES: Record<TaskAction, (viewer: Viewer, history: TaskHistory) => Html> = {
  cancel: confirmCancelPage,
  resume: confirmResumePage,
  fork: confirmForkPage,
};
