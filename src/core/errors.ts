import { ZodError, z } from 'zod';
import { markClass } from './marks.ts';

/** JSON-RPC and MCP 2026-07-28 error codes. */
export enum ProtocolErrorCode {
  ParseError = -32700,
  InvalidRequest = -32600,
  MethodNotFound = -32601,
  InvalidParams = -32602,
  InternalError = -32603,
  HeaderMismatch = -32020,
  MissingRequiredClientCapability = -32021,
  UnsupportedProtocolVersion = -32022,
}

/**
 * The only error shape ever serialized onto the wire. A tool's handler throws one to fail its call or
 * task with this code and message; one from another copy of this package counts as well (marks.ts).
 */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';

  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
    /** Overrides the HTTP status the code implies (e.g. 400 for a malformed envelope's -32602). */
    readonly httpStatus?: 400 | 404 | 413 | 403 | 429,
  ) {
    super(message);
  }

  toJSON(): { code: number; message: string; data?: unknown } {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}
markClass(ProtocolError, 'ProtocolError');

/**
 * A domain error (e.g. `TaskNotFoundError` in `tasks/errors.ts`) that knows the protocol error it
 * becomes, so that this leaf maps it without depending on the domain.
 */
export abstract class DomainError extends Error {
  abstract toProtocolError(): ProtocolError;
}

/**
 * What a request's handler threw after the request was aborted (the client went away or cancelled it,
 * or the server is shutting down): not a server error, so neither logged as one nor counted as one.
 */
export class RequestAbortedError extends DomainError {
  override readonly name = 'RequestAbortedError';
  constructor(readonly reason: string) {
    super(`Request aborted: ${reason}`);
  }
  toProtocolError(): ProtocolError {
    return new ProtocolError(ProtocolErrorCode.InternalError, 'Request cancelled');
  }
}

/**
 * Application-defined (outside JSON-RPC's reserved range): a client polling faster than pollIntervalMs,
 * or a principal over one of its quotas.
 */
export const RATE_LIMITED_CODE = -31429;

/**
 * A principal is over one of its quotas (docs/security.md lists them): `limit` names the setting, so the
 * client (and the operator reading `durable_mcp_quota_refusals_total`) knows which. HTTP 429, with
 * Retry-After when waiting helps.
 */
export class QuotaExceededError extends DomainError {
  override readonly name = 'QuotaExceededError';
  constructor(
    readonly limit: string,
    readonly quota: number,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(`${message} (${limit}=${quota})`);
  }

  toProtocolError(): ProtocolError {
    const retry = this.retryAfterMs === undefined ? {} : { retryAfterMs: Math.ceil(this.retryAfterMs) };
    return new ProtocolError(RATE_LIMITED_CODE, this.message, { limit: this.limit, ...retry }, 429);
  }
}

const MAX_ISSUES = 10;

/** A readable account of a zod error, its first issues only: an error never outgrows the request. */
export function describeIssues(err: ZodError): string {
  const shown = z.prettifyError(new ZodError(err.issues.slice(0, MAX_ISSUES)));
  const more = err.issues.length - MAX_ISSUES;
  return more > 0 ? `${shown}\n(and ${more} more issues)` : shown;
}

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

export function missingCapability(requiredCapabilities: Record<string, unknown>): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.MissingRequiredClientCapability,
    'Missing required client capability',
    {
      requiredCapabilities,
    },
  );
}

export function missingTasksExtension(): ProtocolError {
  return missingCapability({ extensions: { [TASKS_EXTENSION]: {} } });
}

/**
 * Maps anything thrown while serving a request to the error the client sees. Unknown errors become a
 * generic -32603; `onInternal` receives the cause so that it is logged, never sent.
 */
export function toProtocolError(err: unknown, onInternal?: (err: unknown) => void): ProtocolError {
  if (err instanceof ProtocolError) return err;
  if (err instanceof ZodError) {
    return new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid params: ${describeIssues(err)}`);
  }
  if (err instanceof DomainError) return err.toProtocolError();
  onInternal?.(err);
  return new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error');
}
