import type { MethodHandler, MethodResult, RequestContext } from './context.ts';
import {
  ProtocolError,
  ProtocolErrorCode,
  QuotaExceededError,
  RequestAbortedError,
  toProtocolError,
} from '../core/errors.ts';
import { completionComplete } from './methods/completion.ts';
import { discover } from './methods/discover.ts';
import { promptsGet, promptsList } from './methods/prompts.ts';
import { resourcesList, resourcesRead, resourceTemplatesList } from './methods/resources.ts';
import { subscriptionsListen } from './methods/subscriptions.ts';
import { tasksStream } from './methods/task-events.ts';
import { tasksCancel, tasksGet, tasksUpdate } from './methods/tasks.ts';
import { taskInteractionMethods } from './methods/task-steering.ts';
import { toolsCall } from './methods/tools-call.ts';
import { toolsList } from './methods/tools-list.ts';
import type { ServerDeps } from './server-deps.ts';
import { META_PROTOCOL_VERSION, META_SERVER_INFO } from '../core/wire.ts';
import {
  carrierOf,
  endSpan,
  extractContext,
  SpanKind,
  startSpan,
  traceIdOf,
  withContext,
} from '../core/tracing.ts';

export type Dispatcher = {
  has(method: string): boolean;
  dispatch(ctx: RequestContext): Promise<MethodResult>;
};

/** The method table. Anything else (initialize, ping, tasks/result, tasks/list…) is -32601. */
export function createDispatcher(deps: ServerDeps, extra: Record<string, MethodHandler> = {}): Dispatcher {
  const methods = new Map<string, MethodHandler>(
    Object.entries({
      'server/discover': discover(deps),
      'tools/list': toolsList(deps),
      'tools/call': toolsCall(deps),
      'tasks/get': tasksGet(deps),
      'tasks/update': tasksUpdate(deps),
      'tasks/cancel': tasksCancel(deps),
      'tasks/stream': tasksStream(deps),
      ...taskInteractionMethods(deps),
      'subscriptions/listen': subscriptionsListen(deps),
      ...(deps.prompts.empty ? {} : { 'prompts/list': promptsList(deps), 'prompts/get': promptsGet(deps) }),
      ...(deps.resources.empty
        ? {}
        : {
            'resources/list': resourcesList(deps),
            'resources/templates/list': resourceTemplatesList(deps),
            'resources/read': resourcesRead(deps),
          }),
      ...(deps.prompts.empty && deps.resources.empty
        ? {}
        : { 'completion/complete': completionComplete(deps) }),
      ...extra,
    }),
  );
  const { metrics } = deps;
  return {
    has: (method) => methods.has(method),
    async dispatch(ctx) {
      const handler = methods.get(ctx.method);
      if (handler === undefined) {
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${ctx.method}`);
      }
      const started = performance.now();
      const listening = ctx.method === 'subscriptions/listen' || ctx.method === 'tasks/stream';
      if (listening) metrics?.openStreams.inc();
      const span = requestSpan(ctx, (name) => deps.tools.has(name));
      const traceId = traceIdOf(span.context);
      const traced: RequestContext = {
        ...ctx,
        trace: span.context,
        ...(traceId !== undefined && { log: ctx.log.scope({ traceId }) }),
      };
      let outcome = 'ok';
      try {
        const result = await withContext(span.context, () => handler(traced));
        if (
          ctx.method === 'tools/call' &&
          result.resultType === 'task' &&
          typeof ctx.params.name === 'string'
        ) {
          metrics?.tasksCreated.inc({ tool: ctx.params.name });
          if (typeof result.taskId === 'string') span.span.setAttribute('durable_mcp.task.id', result.taskId);
        }
        endSpan(span.span, result.isError === true ? { type: 'tool_error' } : undefined);
        const meta = (result._meta ?? {}) as Record<string, unknown>;
        return { ...result, _meta: { ...meta, [META_SERVER_INFO]: deps.serverInfo } };
      } catch (err) {
        if (ctx.signal.aborted && !(err instanceof ProtocolError)) {
          // The client left or cancelled (or the server stops): whatever the handler threw then is no fault.
          const reason = ctx.signal.reason instanceof Error ? ctx.signal.reason.message : 'aborted';
          outcome = 'aborted';
          endSpan(span.span, { type: outcome, message: reason });
          throw new RequestAbortedError(reason);
        }
        const error = toProtocolError(err, () => {});
        outcome = String(error.code);
        if (err instanceof QuotaExceededError) metrics?.quotaRefusals.inc({ limit: err.limit });
        span.span.setAttribute('rpc.response.status_code', outcome);
        endSpan(span.span, { type: outcome, message: error.message });
        throw err;
      } finally {
        if (listening) metrics?.openStreams.dec();
        metrics?.requests.inc({ method: ctx.method, outcome });
        metrics?.requestDuration.observe({ method: ctx.method }, (performance.now() - started) / 1000);
      }
    },
  };
}

/**
 * The server span of one request (OpenTelemetry's MCP conventions: `{mcp.method.name} {target}`), continued
 * from the trace context in `_meta` or the HTTP headers. A no-op span unless a tracer provider is registered.
 */
function requestSpan(ctx: RequestContext, isTool: (name: string) => boolean) {
  const meta = ctx.params._meta as Record<string, unknown> | undefined;
  const parent = extractContext(carrierOf(meta, ctx.header));
  // Only a registered tool's name: a client could mint any number of names, and span names must stay few.
  const name = ctx.method === 'tools/call' ? ctx.params.name : undefined;
  const tool = typeof name === 'string' && isTool(name) ? name : undefined;
  const version = ctx.meta[META_PROTOCOL_VERSION];
  return startSpan(
    tool === undefined ? ctx.method : `${ctx.method} ${tool}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'mcp.method.name': ctx.method,
        'jsonrpc.request.id': String(ctx.id),
        ...(typeof version === 'string' && { 'mcp.protocol.version': version }),
        ...(tool !== undefined && { 'gen_ai.tool.name': tool, 'gen_ai.operation.name': 'execute_tool' }),
        ...(typeof ctx.params.taskId === 'string' && { 'durable_mcp.task.id': ctx.params.taskId }),
        ...ctx.spanAttributes,
      },
    },
    parent,
  );
}
