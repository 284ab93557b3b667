// `tasks/steer`, `tasks/pause` and `tasks/resume` (SEP-2669 draft, experimental; 2026-07-28 only): the
// task's own principal steers it, pauses it and resumes it. Another principal's task, or an unknown one,
// gets what `tasks/get` gives (the service's `get`); a state that does not allow the method gets -32602
// saying why (the draft's error summary).
import { z } from 'zod';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { isStorable } from '../../core/limits.ts';
import { toDetailedTask } from '../../tasks/store/view.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import type { MethodHandler } from '../context.ts';
import type { ServerDeps } from '../server-deps.ts';
import { taskIdOf } from './tasks.ts';

/**
 * What server/discover declares of these methods: the draft's sub-capabilities (`steer`, `pause`, which
 * implies resume), among the experimental drafts rather than inside the standard extension's object.
 */
export const TASK_INTERACTION_CAPABILITY = { draft: 'SEP-2669', steer: true, pause: true } as const;

const SteerParamsSchema = z.object({ taskId: z.string(), message: z.string() }).loose();

/** The tools whose handlers read steering (`defineTool({ steering: true })`). */
function steeringReaders(tools: ToolRegistry): string[] {
  return tools
    .list()
    .map((t) => t.name)
    .filter((name) => tools.get(name).steering === true);
}

/** -32602 for a message over MAX_STEERING_MESSAGE_BYTES, or one Postgres cannot store: nothing stored. */
function checkMessage(message: string, maxBytes: number): void {
  const size = Buffer.byteLength(message, 'utf8');
  if (size > maxBytes) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: message is ${size} bytes, over MAX_STEERING_MESSAGE_BYTES (${maxBytes})`,
    );
  }
  if (!isStorable(message)) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      'Invalid params: message holds characters that cannot be stored (NUL, unpaired surrogates)',
    );
  }
}

/** `tasks/steer`: stores the message for the task's handler (ctx.steering); an empty acknowledgment. */
export function tasksSteer(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const taskId = taskIdOf(ctx);
    const { message } = SteerParamsSchema.parse(ctx.params);
    checkMessage(message, deps.limits.maxSteeringMessageBytes);
    await deps.tasks.steer(taskId, ctx.principal, message, {
      readers: steeringReaders(deps.tools),
      maxMessages: deps.limits.maxSteeringMessagesPerTask,
    });
    return { resultType: 'complete' };
  };
}

/** `tasks/pause`: the task as it is once paused, or asked to pause at its next checkpoint. */
export function tasksPause(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const view = await deps.tasks.pause(taskIdOf(ctx), ctx.principal);
    return { resultType: 'complete', ...toDetailedTask(view) };
  };
}

/** `tasks/resume`: the task as it is once resumed (its run queued). */
export function tasksResume(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const view = await deps.tasks.resume(taskIdOf(ctx), ctx.principal);
    return { resultType: 'complete', ...toDetailedTask(view) };
  };
}

/** The methods, by name, for the dispatcher's table. */
export function taskInteractionMethods(deps: ServerDeps): Record<string, MethodHandler> {
  return {
    'tasks/steer': tasksSteer(deps),
    'tasks/pause': tasksPause(deps),
    'tasks/resume': tasksResume(deps),
  };
}
