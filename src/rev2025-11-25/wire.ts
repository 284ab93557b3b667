import type { Context } from 'hono';
import { QuotaExceededError } from '../core/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import { jsonDepth } from '../core/json-depth.ts';
import { META_PROTOCOL_VERSION, type RequestId } from '../core/wire.ts';
import { REV2025_VERSIONS } from './shapes.ts';

export const SESSION_HEADER = 'mcp-session-id';

/** Whether `version` is one of this revision's (2025-11-25, 2025-06-18, 2025-03-26). */
export const isSessionVersion = (version: string) =>
  (REV2025_VERSIONS as readonly string[]).includes(version);

/** Whether a request names no protocol version, or one of this revision's. */
export function namesNoOtherVersion(header: (name: string) => string | undefined): boolean {
  const version = header('mcp-protocol-version');
  return version === undefined || isSessionVersion(version);
}

/**
 * Whether a POST speaks the 2025-11-25 revision: it names none of the other revisions' versions, its body
 * nests no deeper than `maxDepth` (a deeper one is left to the router's newest revision, which refuses
 * it), and it names a session or carries no `_meta` protocolVersion envelope (an `initialize` from a
 * client of the 2025-11-25 revision).
 */
export function isSessionPost(
  header: (name: string) => string | undefined,
  body: string,
  maxDepth: number,
): boolean {
  if (!namesNoOtherVersion(header) || jsonDepth(body) > maxDepth) return false;
  const version = header('mcp-protocol-version');
  if (header(SESSION_HEADER) !== undefined) return true;
  try {
    const json = JSON.parse(body) as { params?: { _meta?: Record<string, unknown> } } | null;
    return (
      json !== null &&
      typeof json === 'object' &&
      !Array.isArray(json) &&
      json.params?._meta?.[META_PROTOCOL_VERSION] === undefined
    );
  } catch {
    // Unparseable: a 2025-11-25 client would have named a version; the current path answers.
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

/** The 429 for a principal over a quota (counted by its limit); anything else thrown is rethrown. */
export function quotaRefusal(
  c: Context,
  id: RequestId | null,
  err: unknown,
  metrics: Metrics | undefined,
): Response {
  if (!(err instanceof QuotaExceededError)) throw err;
  countQuotaRefusal(err, metrics);
  const { code, message, data } = err.toProtocolError();
  return c.json(rpcError(id, code, message, data), 429);
}

/** Counts a refusal for a quota by its limit (anything else thrown is not counted). */
export function countQuotaRefusal(err: unknown, metrics: Metrics | undefined): void {
  if (err instanceof QuotaExceededError) metrics?.quotaRefusals.inc({ limit: err.limit });
}
