import type { MethodHandler, MethodResult, RequestContext } from './context.ts';
import { ProtocolError, ProtocolErrorCode, toProtocolError } from '../core/errors.ts';
import { completionComplete } from './methods/completion.ts';
import { discover } from './methods/discover.ts';
import { promptsGet, promptsList } from './methods/prompts.ts';
import { resourcesList, resourcesRead, resourceTemplatesList } from './methods/resources.ts';
import { subscriptionsListen } from './methods/subscriptions.ts';
import { tasksCancel, tasksGet, tasksUpdate } from './methods/tasks.ts';
import { toolsCall } from './methods/tools-call.ts';
import { toolsList } from './methods/tools-list.ts';
import type { ServerDeps } from './server-deps.ts';
import { META_SERVER_INFO } from '../core/wire.ts';

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
      const listening = ctx.method === 'subscriptions/listen';
      if (listening) metrics?.openStreams.inc();
      let outcome = 'ok';
      try {
        const result = await handler(ctx);
        if (
          ctx.method === 'tools/call' &&
          result.resultType === 'task' &&
          typeof ctx.params.name === 'string'
        ) {
          metrics?.tasksCreated.inc({ tool: ctx.params.name });
        }
        const meta = (result._meta ?? {}) as Record<string, unknown>;
        return { ...result, _meta: { ...meta, [META_SERVER_INFO]: deps.serverInfo } };
      } catch (err) {
        outcome = String(toProtocolError(err, () => {}).code);
        throw err;
      } finally {
        if (listening) metrics?.openStreams.dec();
        metrics?.requests.inc({ method: ctx.method, outcome });
        metrics?.requestDuration.observe({ method: ctx.method }, (performance.now() - started) / 1000);
      }
    },
  };
}
