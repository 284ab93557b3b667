import { META_PROTOCOL_VERSION, PROTOCOL_VERSION, type RequestId } from '../core/wire.ts';
import { LEGACY_VERSIONS } from './shapes.ts';

export const SESSION_HEADER = 'mcp-session-id';

/**
 * Whether a POST speaks a session-era revision: it has no 2026-07-28 version header, and it names a
 * session or carries no 2026-07-28 `_meta` envelope (an `initialize` from a client of the session era).
 */
export function isSessionPost(header: (name: string) => string | undefined, body: string): boolean {
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
