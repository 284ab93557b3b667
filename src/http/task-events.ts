// GET `/mcp/tasks/{taskId}/events`: a task's events as text/event-stream for curl and browsers, on any
// instance, with the MCP endpoint's authorization: the task's principal only (anyone else gets the 404 of
// an unknown task, as for an artifact). What the stream holds: task-event-stream.ts.
import { Hono, type Context } from 'hono';
import { TaskNotFoundError } from '../tasks/errors.ts';
import { isWellFormedTaskId } from '../tasks/ids.ts';
import type { TaskService } from '../tasks/service.ts';
import type { AuthEnv } from './auth/middleware.ts';
import { taskEventStream, type TaskEventStreamOptions } from './task-event-stream.ts';

export interface TaskEventRoutesOptions extends TaskEventStreamOptions {
  /** Finds the task as tasks/get does (not-found for another principal's). */
  tasks: Pick<TaskService, 'get'>;
  principalOf: (c: Context) => string;
}

export function taskEventRoutes(opts: TaskEventRoutesOptions): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get('/:taskId/events', async (c) => {
    const taskId = c.req.param('taskId');
    const principal = opts.principalOf(c);
    // (A NUL or a 10 kB id names no task: answered before any query.)
    if (!isWellFormedTaskId(taskId)) return c.text('Not found', 404);
    let view;
    try {
      view = await opts.tasks.get(taskId, principal);
    } catch (err) {
      if (err instanceof TaskNotFoundError) return c.text('Not found', 404);
      throw err;
    }
    return taskEventStream(c, { ...view, principal }, opts);
  });
  return app;
}
