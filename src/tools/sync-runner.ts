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
 * worker threads), for the tools it can load and whose runs are not cheaper than the hop. It settles as the handler does: with its result, or with
 * what the handler threw (a ProtocolError, an InputRequiredSignal, or an Error bearing its message).
 */
export interface SyncCallRunner {
  /** Whether this call of the tool goes to the runner (false: its handler runs on the event loop). */
  runs(toolName: string): boolean;
  run(call: SyncRun): Promise<CallToolResult>;
  /** A run of the tool's handler on the event loop took `ms` (the runner may take its calls back). */
  ranOnLoop?(toolName: string, ms: number): void;
}
