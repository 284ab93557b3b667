import type { MethodHandler } from '../context.ts';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import type { ServerDeps } from '../server-deps.ts';
import { ListParamsSchema } from '../../core/wire.ts';

export function toolsList(deps: ServerDeps): MethodHandler {
  return async ({ params }) => {
    const { cursor } = ListParamsSchema.parse(params);
    // One page holds every tool, so no cursor was ever issued.
    if (cursor !== undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor');
    return {
      resultType: 'complete',
      tools: [...deps.tools.list()],
      ttlMs: deps.listTtlMs,
      cacheScope: 'public',
    };
  };
}
