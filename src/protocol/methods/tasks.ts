import { META_LATEST_EVENT_SEQ } from '../../core/task-events.ts';
import { latestEventSeq } from '../../tasks/store/events.ts';
import { toDetailedTask } from '../../tasks/store/view.ts';
import type { MethodHandler, RequestContext } from '../context.ts';
import { missingTasksExtension, TASKS_EXTENSION } from '../../core/errors.ts';
import { wellFormedTaskId } from '../../tasks/ids.ts';
import { assertSize, assertStorable } from '../../core/limits.ts';
import type { ServerDeps } from '../server-deps.ts';
import { META_CLIENT_CAPABILITIES, TaskIdParamsSchema, UpdateTaskParamsSchema } from '../../core/wire.ts';

export function declaresTasks(ctx: Pick<RequestContext, 'meta'>): boolean {
  return ctx.meta[META_CLIENT_CAPABILITIES].extensions?.[TASKS_EXTENSION] !== undefined;
}

/** The tasks methods need the extension on the request (-32021) and a well-formed task id. */
export function taskIdOf(ctx: RequestContext): string {
  if (!declaresTasks(ctx)) throw missingTasksExtension();
  return wellFormedTaskId(TaskIdParamsSchema.parse(ctx.params).taskId);
}

export function tasksGet(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const taskId = taskIdOf(ctx);
    deps.pollLimiter?.check(ctx.principal, taskId);
    const view = await deps.tasks.get(taskId, ctx.principal);
    deps.pollLimiter?.record(ctx.principal, taskId, view.pollIntervalMs);
    return {
      resultType: 'complete',
      ...toDetailedTask(view),
      // (Experimental, SEP-2694: where a reader of the task's events would stand once it caught up.)
      _meta: { [META_LATEST_EVENT_SEQ]: latestEventSeq(view) },
    };
  };
}

export function tasksUpdate(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const taskId = taskIdOf(ctx);
    const { inputResponses } = UpdateTaskParamsSchema.parse(ctx.params);
    assertSize('inputResponses', inputResponses, deps.limits.maxInputResponsesBytes);
    assertStorable('inputResponses', inputResponses);
    const outcome = await deps.tasks.answer(taskId, ctx.principal, inputResponses);
    // Committed: the wait that just ended counts once, on the instance that ended it.
    if (outcome.waited !== undefined) {
      deps.metrics?.inputWait.observe({ tool: outcome.waited.toolName }, outcome.waited.seconds);
    }
    return { resultType: 'complete' };
  };
}

export function tasksCancel(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    await deps.tasks.cancel(taskIdOf(ctx), ctx.principal);
    return { resultType: 'complete' };
  };
}
