/**
 * `durable-mcp-tasks/testing`: hooks for tests of an application built on the server. Not a stable
 * API: what it exposes is the running process's internals.
 */
import type { ServerProcess } from './process/start.ts';
import { processOf, type DurableMcpServer } from './server.ts';

export type { ServerProcess };

/** The started process behind `server` (database handle, queue, worker pool), or undefined before `start()`. */
export function internals(server: DurableMcpServer): ServerProcess | undefined {
  return processOf(server) as ServerProcess | undefined;
}
