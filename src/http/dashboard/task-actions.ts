// An operator's actions on one task: cancel, resume (a paused task), fork (a finished one). GET shows the
// confirmation page; only its POST (signed in, CSRF-checked, same origin) acts, as the sign-in's actor,
// which the store records in the task's audit trail.
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { html } from 'hono/html';
import type { Logger } from '../../log.ts';
import { TaskNotFoundError } from '../../tasks/errors.ts';
import { adminCancelTask } from '../../tasks/store/admin.ts';
import { adminGetTask } from '../../tasks/store/admin-task.ts';
import { forkTask, ForkRefusedError } from '../../tasks/store/fork.ts';
import { resumeTasks } from '../../tasks/store/pause.ts';
import { CONFIRM_PAGES, forkedPage, notNowPage } from './confirm.ts';
import { layout, type Viewer } from './layout.ts';
import { formChecked, type Env } from './sign-in.ts';
import { isActive, refusal, TASK_ACTIONS, taskHref } from './task-state.ts';

export interface TaskActionOptions {
  db: Parameters<typeof adminGetTask>[0];
  /** The run queue: a resume and a fork queue the task's next run. */
  queue: Parameters<typeof resumeTasks>[1];
  log: Logger;
  /** A signal's delivery URL for its token, on the public origin (as the worker and `tasks fork` name it). */
  signalUrl: (token: string) => string;
}

/** The longest step name a fork form may send (a step's name is the tool's own string). */
const MAX_STEP_NAME_CHARS = 1_000;

export const viewerOf = (c: Context<Env>): Viewer => ({ csrf: c.get('csrf'), actor: c.get('actor') });

const notFound = (c: Context<Env>) =>
  c.html(layout('Not found', html`<p>No task ${c.req.param('id')?.slice(0, 64)}.</p>`, viewerOf(c)), 404);

/** Adds the three actions' confirmation pages (GET) and their forms' targets (POST) to `app`. */
export function addTaskActions(app: Hono<Env>, auth: MiddlewareHandler<Env>, opts: TaskActionOptions): void {
  for (const action of TASK_ACTIONS) {
    app.get(`/tasks/:id/${action}`, auth, async (c) => {
      const history = await adminGetTask(opts.db, c.req.param('id'));
      if (history === undefined) return notFound(c);
      const why = refusal(action, history.task);
      if (why !== undefined) return c.html(notNowPage(viewerOf(c), history.task, why), 409);
      return c.html(CONFIRM_PAGES[action](viewerOf(c), history));
    });
  }

  app.post('/tasks/:id/cancel', auth, formChecked, async (c) => {
    const taskId = c.req.param('id');
    const actor = c.get('actor');
    // A form from a page older than the task's end cancels nothing (and records nothing).
    const history = await adminGetTask(opts.db, taskId);
    if (history !== undefined && !isActive(history.task))
      return c.html(notNowPage(viewerOf(c), history.task, refusal('cancel', history.task)!), 409);
    try {
      const outcome = await adminCancelTask(opts.db, taskId, actor);
      opts.log.info('dashboard cancel', {
        taskId,
        actor,
        status: outcome.status,
        cancelledNow: outcome.cancelledNow,
      });
    } catch (err) {
      if (err instanceof TaskNotFoundError) return c.text('Not found', 404);
      throw err;
    }
    return c.redirect(taskHref(taskId), 303);
  });

  app.post('/tasks/:id/resume', auth, formChecked, async (c) => {
    const taskId = c.req.param('id');
    const actor = c.get('actor');
    const history = await adminGetTask(opts.db, taskId);
    if (history === undefined) return notFound(c);
    const resumed = await resumeTasks(opts.db, opts.queue, { taskIds: [taskId] }, actor);
    opts.log.info('dashboard resume', { taskId, actor, resumed: resumed.length === 1 });
    // Resumed or cancelled meanwhile by someone else, or never paused: the page says what it is now.
    if (resumed.length === 0)
      return c.html(notNowPage(viewerOf(c), history.task, 'It is not paused (now).'), 409);
    return c.redirect(taskHref(taskId), 303);
  });

  app.post('/tasks/:id/fork', auth, formChecked, async (c) => {
    const taskId = c.req.param('id');
    const actor = c.get('actor');
    const form = await c.req.parseBody();
    const fromStep = typeof form.fromStep === 'string' && form.fromStep !== '' ? form.fromStep : undefined;
    if (fromStep !== undefined && fromStep.length > MAX_STEP_NAME_CHARS)
      return c.text('Bad request: step name', 400);
    try {
      const fork = await forkTask(opts.db, opts.queue, taskId, { fromStep }, actor);
      opts.log.info('dashboard fork', { taskId, actor, newTaskId: fork.taskId, fromStep });
      if (fork.signals.length === 0) return c.redirect(taskHref(fork.taskId), 303);
      // Its pending signals' new URLs are shown once, here: nowhere else has them.
      return c.html(forkedPage(viewerOf(c), taskId, fork, opts.signalUrl));
    } catch (err) {
      if (err instanceof TaskNotFoundError) return notFound(c);
      if (!(err instanceof ForkRefusedError)) throw err;
      const history = await adminGetTask(opts.db, taskId);
      if (history === undefined) return notFound(c);
      return c.html(notNowPage(viewerOf(c), history.task, err.message), 409);
    }
  });
}
