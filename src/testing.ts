/**
 * `durable-mcp-tasks/testing`: hooks for tests of an application built on the server. Not a stable
 * API: what it exposes is the running process's internals.
 */
import type { Runtime } from './runtime.ts';
import { runtimeOf, type DurableMcpServer } from './server.ts';

export type { Runtime };

/** The started process behind `server` (database handle, queue, worker pool), or undefined before `start()`. */
export function internals(server: DurableMcpServer): Runtime | undefined {
  return runtimeOf(server) as Runtime | undefined;
}
