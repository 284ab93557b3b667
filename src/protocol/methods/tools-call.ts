import { toWireTask } from '../../tasks/store/view.ts';
import type { MethodHandler, MethodResult } from '../context.ts';
import { InputRequiredSignal } from '../../tools/sync-runtime.ts';
import { describeIssues, missingTasksExtension, ProtocolError } from '../../core/errors.ts';
import { runWithMrtr } from '../mrtr.ts';
import { assertSize, assertStorable } from '../../core/limits.ts';
import type { ServerDeps } from '../server-deps.ts';
import { CallToolParamsSchema, META_CLIENT_CAPABILITIES, type CallToolResult } from '../../core/wire.ts';
import { validateParamHeaders } from './param-headers.ts';
import { declaresTasks } from './tasks.ts';
import { injectCarrier } from '../../core/tracing.ts';

function toolError(text: string): MethodResult {
  return { resultType: 'complete', content: [{ type: 'text', text }], isError: true };
}

/**
 * tools/call: validates the arguments, then either runs the handler here (synchronous, with MRTR for
 * input) or creates a task, whose row and first job commit together before the CreateTaskResult is sent.
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
    validateParamHeaders(deps.tools.describe(tool.name).inputSchema, rawArgs, ctx.header);
    const policy = tool.taskSupport ?? 'never';
    const tasksDeclared = declaresTasks(ctx);
    if (policy === 'required' && !tasksDeclared) throw missingTasksExtension();

    const parsed = tool.inputSchema.safeParse(rawArgs);
    if (!parsed.success) {
      // A tool execution error, not a protocol error, so that a model can read it and correct itself.
      return toolError(`Invalid arguments for tool ${tool.name}:\n${describeIssues(parsed.error)}`);
    }

    const asTask = policy === 'required' || (policy === 'optional' && tasksDeclared);
    // A task's arguments are stored; a synchronous call's are not.
    if (asTask) {
      assertStorable('arguments', rawArgs);
      assertStorable('clientCapabilities', ctx.meta[META_CLIENT_CAPABILITIES]);
    }
    const outcome = await runWithMrtr(
      deps,
      ctx,
      { request: `tools/call:${tool.name}`, arguments: rawArgs },
      async (toolCtx): Promise<MethodResult> => {
        if (!asTask) {
          try {
            const result: CallToolResult = await tool.handler(parsed.data, toolCtx);
            return { ...result, resultType: 'complete' };
          } catch (err) {
            if (err instanceof ProtocolError || err instanceof InputRequiredSignal || ctx.signal.aborted)
              throw err;
            // An exception inside a synchronous handler is a tool execution error, reported to the model.
            ctx.log.warn('tool handler threw', { tool: tool.name, error: String(err) });
            return toolError(`Tool ${tool.name} failed: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
        const prepared = tool.prepare === undefined ? undefined : await tool.prepare(parsed.data, toolCtx);
        assertStorable('the input gathered before the task', prepared);
        const view = await deps.tasks.create({
          principal: ctx.principal,
          toolName: tool.name,
          arguments: rawArgs,
          prepared,
          clientCapabilities: ctx.meta[META_CLIENT_CAPABILITIES],
          ttlMs: tool.ttlMs === undefined ? deps.taskDefaults.ttlMs : tool.ttlMs,
          pollIntervalMs: tool.pollIntervalMs ?? deps.taskDefaults.pollIntervalMs,
          ...ctx.taskTraits,
          traceContext: ctx.trace === undefined ? undefined : injectCarrier(ctx.trace),
        });
        return { resultType: 'task', ...toWireTask(view) };
      },
    );
    return outcome.done ? outcome.value : outcome.result;
  };
}
