import { z } from 'zod';
import { toWireTask } from '../../tasks/store/view.ts';
import { createToolContext } from '../../tools/context.ts';
import { createSyncRuntime, InputRequiredSignal } from '../../tools/sync-runtime.ts';
import type { MethodHandler, MethodResult } from '../context.ts';
import { missingTasksExtension, ProtocolError } from '../errors.ts';
import type { ServerDeps } from '../server-deps.ts';
import {
  CallToolParamsSchema,
  META_CLIENT_CAPABILITIES,
  META_LOG_LEVEL,
  type CallToolResult,
} from '../wire.ts';
import { declaresTasks } from './tasks.ts';

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
    const policy = tool.taskSupport ?? 'never';
    const tasksDeclared = declaresTasks(ctx);
    if (policy === 'required' && !tasksDeclared) throw missingTasksExtension();

    const rawArgs = params.arguments ?? {};
    const parsed = tool.inputSchema.safeParse(rawArgs);
    if (!parsed.success) {
      // A tool execution error, not a protocol error, so that a model can read it and correct itself.
      return toolError(`Invalid arguments for tool ${tool.name}:\n${z.prettifyError(parsed.error)}`);
    }

    const binding = { principal: ctx.principal, request: `tools/call:${tool.name}`, arguments: rawArgs };
    const responses = {
      ...(params.requestState === undefined ? {} : deps.requestState.open(params.requestState, binding)),
      ...params.inputResponses,
    };
    const clientCapabilities = ctx.meta[META_CLIENT_CAPABILITIES];
    const runtime = createSyncRuntime({
      principal: ctx.principal,
      clientCapabilities,
      signal: ctx.signal,
      responses,
      progressToken: ctx.meta.progressToken,
      logLevel: ctx.meta[META_LOG_LEVEL],
      notify: ctx.notify,
    });

    try {
      if (policy === 'required' || (policy === 'optional' && tasksDeclared)) {
        const prepared =
          tool.prepare === undefined
            ? undefined
            : await tool.prepare(parsed.data, createToolContext(runtime));
        const view = await deps.tasks.create({
          principal: ctx.principal,
          toolName: tool.name,
          arguments: rawArgs,
          prepared,
          clientCapabilities,
          ttlMs: tool.ttlMs === undefined ? deps.taskDefaults.ttlMs : tool.ttlMs,
          pollIntervalMs: tool.pollIntervalMs ?? deps.taskDefaults.pollIntervalMs,
        });
        return { resultType: 'task', ...toWireTask(view) };
      }
      const result: CallToolResult = await tool.handler(parsed.data, createToolContext(runtime));
      return { ...result, resultType: 'complete' };
    } catch (err) {
      if (err instanceof InputRequiredSignal) {
        return {
          resultType: 'input_required',
          inputRequests: err.inputRequests,
          requestState: deps.requestState.seal(binding, responses),
        };
      }
      if (err instanceof ProtocolError) throw err;
      if (ctx.signal.aborted) throw err;
      // An exception inside a synchronous handler is a tool execution error, reported to the model.
      ctx.log.warn('tool handler threw', { tool: tool.name, error: String(err) });
      return toolError(`Tool ${tool.name} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
}
