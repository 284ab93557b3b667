import type { MethodHandler } from '../context.ts';
import { TASKS_EXTENSION } from '../../core/errors.ts';
import type { ServerDeps } from '../server-deps.ts';
import { TASK_INTERACTION_CAPABILITY } from './task-steering.ts';

/** The capabilities this server's registries support; also decides which methods exist. */
export function serverCapabilities(deps: ServerDeps): Record<string, unknown> {
  const withPrompts = !deps.prompts.empty;
  const withResources = !deps.resources.empty;
  return {
    tools: { listChanged: true },
    ...(withPrompts ? { prompts: { listChanged: true } } : {}),
    ...(withResources ? { resources: { subscribe: true, listChanged: true } } : {}),
    ...(withPrompts || withResources ? { completions: {} } : {}),
    extensions: { [TASKS_EXTENSION]: {} },
    // Drafts this server implements ahead of the specification, each marked experimental.
    experimental: {
      [TASKS_EXTENSION]: {
        eventStreams: { draft: 'SEP-2694', method: 'tasks/stream' },
        steering: TASK_INTERACTION_CAPABILITY,
      },
    },
  };
}

export function discover(deps: ServerDeps): MethodHandler {
  const capabilities = serverCapabilities(deps);
  return async () => ({
    resultType: 'complete',
    supportedVersions: [...deps.supportedVersions],
    capabilities,
    ttlMs: deps.listTtlMs,
    cacheScope: 'public',
  });
}
