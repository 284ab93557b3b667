import type { CallToolResult, JsonObject } from '../core/wire.ts';
import type { RequestBackendOptions } from './request-backend.ts';

/** One run of a synchronous call's handler: the tool, its arguments as sent, and its context's parts. */
export interface SyncRun {
  toolName: string;
  /** The arguments as the client sent them (validated; the runner parses them with the tool's schema). */
  arguments: JsonObject;
  backend: RequestBackendOptions;
}

/**
 * Runs synchronous calls' handlers somewhere other than the HTTP process's event loop (src/threads:
 * worker threads), for the tools it can load. It settles as the handler does: with its result, or with
 * what the handler threw (a ProtocolError, an InputRequiredSignal, or an Error bearing its message).
 */
export interface SyncCallRunner {
  runs(toolName: string): boolean;
  run(call: SyncRun): Promise<CallToolResult>;
}
