import type { MethodHandler } from '../context.ts';
import { TASKS_EXTENSION } from '../errors.ts';
import type { ServerDeps } from '../server-deps.ts';
import { SUPPORTED_VERSIONS } from '../wire.ts';

export function discover(deps: ServerDeps): MethodHandler {
  return async () => ({
    resultType: 'complete',
    supportedVersions: [...SUPPORTED_VERSIONS],
    capabilities: {
      tools: {},
      extensions: { [TASKS_EXTENSION]: {} },
    },
    ttlMs: deps.listTtlMs,
    cacheScope: 'public',
  });
}
