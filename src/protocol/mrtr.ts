import { createToolContext } from '../tools/context.ts';
import type { ToolContext } from '../tools/define.ts';
import {
  createRequestBackend,
  InputRequiredSignal,
  type RequestBackendOptions,
} from '../tools/request-backend.ts';
import type { MethodResult, RequestContext } from './context.ts';
import type { ServerDeps } from './server-deps.ts';
import { InputResponsesSchema, META_CLIENT_CAPABILITIES, META_LOG_LEVEL } from '../core/wire.ts';

export type MrtrOutcome<T> = { done: true; value: T } | { done: false; result: MethodResult };

/**
 * Runs `fn` synchronously with MRTR: earlier answers come back through the integrity-protected
 * `requestState`, this round's through `inputResponses`; missing ones yield an InputRequiredResult.
 * `fn` gets the context, and what it is built from (to build it elsewhere: a sync-call thread).
 */
export async function runWithMrtr<T>(
  deps: Pick<ServerDeps, 'requestState' | 'events'>,
  ctx: RequestContext,
  binding: { request: string; arguments: unknown },
  fn: (toolCtx: ToolContext, backend: RequestBackendOptions) => Promise<T>,
): Promise<MrtrOutcome<T>> {
  const { requestState, inputResponses } = ctx.params;
  const bound = { principal: ctx.principal, ...binding };
  const responses = {
    ...(typeof requestState === 'string' ? deps.requestState.open(requestState, bound) : {}),
    ...(inputResponses === undefined || inputResponses === null
      ? {}
      : InputResponsesSchema.parse(inputResponses)),
  };
  const options: RequestBackendOptions = {
    principal: ctx.principal,
    clientCapabilities: ctx.meta[META_CLIENT_CAPABILITIES],
    signal: ctx.signal,
    events: deps.events,
    responses,
    progressToken: ctx.meta.progressToken,
    logLevel: ctx.meta[META_LOG_LEVEL],
    notify: ctx.notify,
    closeStream: ctx.closeStream,
  };
  try {
    return { done: true, value: await fn(createToolContext(createRequestBackend(options)), options) };
  } catch (err) {
    if (!(err instanceof InputRequiredSignal)) throw err;
    return {
      done: false,
      result: {
        resultType: 'input_required',
        inputRequests: err.inputRequests,
        requestState: deps.requestState.seal(bound, responses),
      },
    };
  }
}
