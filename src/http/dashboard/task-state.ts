// What an operator may do to a task in the state it is in: one answer for the page's buttons, the
// confirmation pages and the forms' targets.
import { html } from 'hono/html';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../../tasks/status.ts';
import type { AdminTask } from '../../tasks/store/admin-row.ts';
import { badge, BASE } from './format.ts';

/** An operator's actions on one task, each behind a confirmation page. */
export const TASK_ACTIONS = ['cancel', 'resume', 'fork'] as const;
export type TaskAction = (typeof TASK_ACTIONS)[number];

export const isActive = (task: AdminTask) => (ACTIVE_STATUSES as readonly string[]).includes(task.status);
export const isTerminal = (task: AdminTask) => (TERMINAL_STATUSES as readonly string[]).includes(task.status);
export const isPaused = (task: AdminTask) => task.pausedAt !== null && task.status === 'working';

/** Why `action` does not fit the task now (undefined: it does). */
export function refusal(action: TaskAction, task: AdminTask): string | undefined {
  switch (action) {
    case 'cancel':
      if (!isActive(task)) return `It has ended (${task.status}): there is nothing to cancel.`;
      return task.cancelRequestedAt === null ? undefined : 'Its cancel has been requested already.';
    case 'resume':
      return isPaused(task) ? undefined : 'It is not paused.';
    case 'fork':
      return isTerminal(task) ? undefined : `It is ${task.status}: only a finished task can be forked.`;
  }
}

/** A task's page, or one of its actions' (the confirmation page, and its form's target). */
export const taskHref = (taskId: string, action?: TaskAction) =>
  `${BASE}/tasks/${encodeURIComponent(taskId)}${action === undefined ? '' : `/${action}`}`;

/** A task's status badge, and `paused` beside `working` while it is paused. */
export const statusBadges = (task: AdminTask) =>
  html`${badge(task.status)}${task.pausedAt === null ? '' : html` ${badge('paused')}`}`;
