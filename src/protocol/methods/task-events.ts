// tasks/stream (SEP-2694 draft, experimental): a task's events as `notifications/tasks/event` on the
// request's SSE stream, from after the client's cursor, live until the task ends; then the result.
import { z } from 'zod';
import { missingTasksExtension, ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { EventStreamInterruptedError, taskEventNotification } from '../../core/task-events.ts';
import { wellFormedTaskId } from '../../tasks/ids.ts';
import { latestEventSeq } from '../../tasks/store/events.ts';
import type { MethodHandler, RequestContext } from '../context.ts';
import type { ServerDeps } from '../server-deps.ts';
import { declaresTasks } from './tasks.ts';

const StreamParamsSchema = z
  .object({ taskId: z.string(), after: z.number().int().min(0).max(2_147_483_647).optional() })
  .loose();

/** The request's task id and cursor, checked as tasks/get checks its id. */
function streamParams(ctx: RequestContext): { taskId: string; after: number | undefined } {
  if (!declaresTasks(ctx)) throw missingTasksExtension();
  const parsed = StreamParamsSchema.safeParse(ctx.params);
  if (!parsed.success) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      'Invalid params: tasks/stream takes a taskId and, optionally, after: a non-negative integer (the last event seq the client has)',
    );
  }
  return { taskId: wellFormedTaskId(parsed.data.taskId), after: parsed.data.after };
}

export function tasksStream(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const { taskId, after } = streamParams(ctx);
    // An unknown task, or another principal's, gets exactly what tasks/get gives it.
    const view = await deps.tasks.get(taskId, ctx.principal);
    const latest = latestEventSeq(view);
    if (after !== undefined && after > latest) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Invalid params: after (${after}) is past the task's last event (${latest})`,
      );
    }
    const notify = ctx.notify;
    if (notify === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InternalError, 'tasks/stream needs a streamed response');
    }
    const range = await deps.taskEvents.checkCursor(taskId, after);
    // Without a cursor: from the earliest event still kept.
    const from = after ?? Math.max(0, (range?.earliest ?? 1) - 1);
    const signal = AbortSignal.any([ctx.signal, deps.shutdown]);
    const release = deps.taskEvents.admit(ctx.principal);
    const end = await deps.taskEvents
      .follow({
        taskId,
        principal: ctx.principal,
        after: from,
        signal,
        send: async (event) => {
          await notify(taskEventNotification(taskId, event));
          deps.metrics?.taskEventsSent.inc();
        },
      })
      .finally(release);
    if (end === 'finished') return { resultType: 'complete' };
    if (ctx.signal.aborted) throw new Error('tasks/stream closed by the client');
    throw new EventStreamInterruptedError();
  };
}
