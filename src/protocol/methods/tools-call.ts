import { toWireTask } from '../../tasks/store/view.ts';
import type { MethodHandler, MethodResult } from '../context.ts';
import { InputRequiredSignal } from '../../tools/request-backend.ts';
import { missingTasksExtension, ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { runWithMrtr } from '../mrtr.ts';
import { assertSize, assertStorable } from '../../core/limits.ts';
import type { ServerDeps } from '../server-deps.ts';
import {
  CallToolParamsSchema,
  META_CLIENT_CAPABILITIES,
  META_IDEMPOTENCY_KEY,
  type CallToolResult,
  type JsonObject,
} from '../../core/wire.ts';
import { clientIdempotency, toolIdempotency, type Idempotency } from '../../tasks/store/idempotency.ts';
import type { ToolDefinition } from '../../tools/define.ts';
import type { SyncCallRunner } from '../../tools/sync-runner.ts';
import { declaresTasks } from './tasks.ts';
import { injectCarrier } from '../../core/tracing.ts';
import {
  assertStorableArguments,
  InvalidToolArgumentsError,
  parseToolArguments,
  toolTaskOf,
} from '../../launch/tool-task.ts';
import { syncCallTimedOut, withTimeBudget } from '../sync-budget.ts';

function toolError(text: string): MethodResult {
  return { resultType: 'complete', content: [{ type: 'text', text }], isError: true };
}

/** The create's idempotency key: the tool's own from the arguments, else the client's in `_meta`. */
function idempotencyOfCall(
  tool: ToolDefinition,
  args: unknown,
  rawArgs: JsonObject,
  ctx: { principal: string; params: Record<string, unknown> },
): Idempotency | undefined {
  const toolKey = tool.idempotencyKey?.(args, { principal: ctx.principal });
  // A tool's keys are its own; a client's are one space per principal.
  if (toolKey !== undefined) return toolIdempotency(toolKey, tool.name, rawArgs);
  const key = (ctx.params._meta as Record<string, unknown> | undefined)?.[META_IDEMPOTENCY_KEY];
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `_meta["${META_IDEMPOTENCY_KEY}"] must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`,
    );
  }
  return clientIdempotency(key, tool.name, rawArgs);
}

const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/**
 * tools/call: validates the arguments, then either runs the handler synchronously (with MRTR for input,
 * within SYNC_CALL_TIMEOUT_MS, on a sync-call thread when there is one for the tool, else here) or
 * creates a task, whose row and first job commit together before the CreateTaskResult is sent.
 */
export function toolsCall(deps: ServerDeps): MethodHandler {
  return async (ctx) => {
    const params = CallToolParamsSchema.parse(ctx.params);
    const tool = deps.tools.get(params.name);
    const rawArgs = params.arguments ?? {};
    assertSize('arguments', rawArgs, deps.limits.maxArgumentsBytes);
    if (params.inputResponses !== undefined) {
      assertSize('inputResponses', params.inputResponses, deps.limits.maxInputResponsesBytes);
    }
    ctx.checkArgumentHeaders?.(deps.tools.describe(tool.name).inputSchema, rawArgs);
    const policy = tool.taskSupport ?? 'never';
    const tasksDeclared = declaresTasks(ctx);
    if (policy === 'required' && !tasksDeclared) throw missingTasksExtension();

    // Invalid arguments are a tool execution error, not a protocol error, so that a model can read it
    // and correct itself; one the tool does not take first (zod would drop it without a word).
    let args: unknown;
    try {
      args = parseToolArguments(tool, rawArgs);
    } catch (err) {
      if (err instanceof InvalidToolArgumentsError) return toolError(err.message);
      throw err;
    }

    const asTask = policy === 'required' || (policy === 'optional' && tasksDeclared);
    // A task's arguments are stored; a synchronous call's are not.
    if (asTask) {
      assertStorableArguments(rawArgs, ctx.meta[META_CLIENT_CAPABILITIES], deps.limits.maxArgumentsBytes);
    }
    const idempotency = asTask ? idempotencyOfCall(tool, args, rawArgs, ctx) : undefined;
    const binding = { request: `tools/call:${tool.name}`, arguments: rawArgs };
    if (!asTask) {
      const timeoutMs = deps.limits.syncCallTimeoutMs ?? Infinity;
      const timedOut = () => syncCallTimedOut(tool.name, timeoutMs, policy === 'optional');
      const outcome = await withTimeBudget(timeoutMs, ctx.signal, timedOut, (signal) =>
        runWithMrtr(deps, { ...ctx, signal }, binding, async (toolCtx, backend): Promise<MethodResult> => {
          try {
            const result: CallToolResult =
              deps.syncCalls?.runs(tool.name) === true
                ? await deps.syncCalls.run({ toolName: tool.name, arguments: rawArgs, backend })
                : await runOnLoop(deps.syncCalls, tool.name, () => tool.handler(args, toolCtx));
            return { ...result, resultType: 'complete' };
          } catch (err) {
            if (err instanceof ProtocolError || err instanceof InputRequiredSignal || signal.aborted)
              throw err;
            // An exception inside a synchronous handler is a tool execution error, reported to the model.
            ctx.log.warn('tool handler threw', { tool: tool.name, error: String(err) });
            return toolError(`Tool ${tool.name} failed: ${err instanceof Error ? err.message : String(err)}`);
          }
        }),
      );
      return outcome.done ? outcome.value : outcome.result;
    }
    const outcome = await runWithMrtr(deps, ctx, binding, async (toolCtx): Promise<MethodResult> => {
      const prepared = tool.prepare === undefined ? undefined : await tool.prepare(args, toolCtx);
      assertStorable('the input gathered before the task', prepared);
      const view = await deps.tasks.create(
        toolTaskOf(tool, rawArgs, {
          principal: ctx.principal,
          defaults: deps.taskDefaults,
          parsedArgs: args,
          prepared,
          clientCapabilities: ctx.meta[META_CLIENT_CAPABILITIES],
          ...ctx.taskTraits,
          traceContext: ctx.trace === undefined ? undefined : injectCarrier(ctx.trace),
          idempotency,
        }),
      );
      return { resultType: 'task', ...toWireTask(view) };
    });
    return outcome.done ? outcome.value : outcome.result;
  };
}

/**
 * A synchronous call's handler on the event loop, and how long it held the loop (its call up to its
 * first await: what runs after, and other requests' work meanwhile, are not its) told to the runner that
 * could take the tool back.
 */
function runOnLoop(
  runner: SyncCallRunner | undefined,
  toolName: string,
  handler: () => CallToolResult | Promise<CallToolResult>,
): CallToolResult | Promise<CallToolResult> {
  if (runner?.ranOnLoop === undefined) return handler();
  const started = performance.now();
  try {
    return handler();
  } finally {
    runner.ranOnLoop(toolName, performance.now() - started);
  }
}
