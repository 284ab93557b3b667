import type { Context } from 'hono';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import { LEGACY_VERSIONS } from './shapes.ts';
import {
  META_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  type Implementation,
  type RequestId,
} from '../core/wire.ts';
import type { SessionService } from './sessions/service.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';

export const SESSION_HEADER = 'mcp-session-id';

/** What the 2025-11-25 endpoint needs: the shared method table, the session store, the feed. */
export interface LegacyOptions {
  dispatcher: Dispatcher;
  sessions: SessionService;
  tasks: TaskService;
  tools: ToolRegistry;
  serverInfo: Implementation;
  serves: { resources: boolean; prompts: boolean };
  feed: ChangeFeed | undefined;
  shutdown: AbortSignal;
  principalOf: (c: Context) => string;
  log: Logger;
  keepAliveMs?: number;
  /** The SSE `retry` a client waits before resuming a stream it lost. */
  retryMs?: number;
  /** How long a call waits for the client to answer an elicitation, sampling or roots request. */
  inputTimeoutMs?: number;
}

/**
 * Whether a POST speaks a 2025 revision: it has no 2026-07-28 version header, and it names a session
 * or carries no 2026-07-28 `_meta` envelope (an `initialize` from a client of the session era).
 */
export function isLegacyPost(header: (name: string) => string | undefined, body: string): boolean {
  const version = header('mcp-protocol-version');
  if (version === PROTOCOL_VERSION) return false;
  if (header(SESSION_HEADER) !== undefined) return true;
  if (version !== undefined && !(LEGACY_VERSIONS as readonly string[]).includes(version)) return false;
  try {
    const json = JSON.parse(body) as { params?: { _meta?: Record<string, unknown> } } | null;
    return (
      json !== null &&
      typeof json === 'object' &&
      !Array.isArray(json) &&
      json.params?._meta?.[META_PROTOCOL_VERSION] === undefined
    );
  } catch {
    // Unparseable: the session era's client would have named a version; the current path answers.
    return version !== undefined;
  }
}

/** A JSON-RPC error response (no id when the request's could not be read). */
export function rpcError(id: RequestId | null | undefined, code: number, message: string, data?: unknown) {
  return {
    jsonrpc: '2.0' as const,
    ...(id === null || id === undefined ? {} : { id }),
    error: { code, message, ...(data === undefined ? {} : { data }) },
  };
}

export const isRequestId = (id: unknown): id is RequestId =>
  typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id));
