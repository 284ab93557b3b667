import type { Context } from 'hono';
import type { Metrics } from '../core/metrics.ts';
import type { Logger } from '../log.ts';
import type { IsDatabaseUnavailable } from '../core/unavailable.ts';

/** A request header by name (any case). */
export type HeaderOf = (name: string) => string | undefined;

/**
 * One protocol revision's side of the MCP endpoint: the contract between the HTTP router (src/http) and
 * a revision. Each revision lives in its own folder (src/rev2026-07-28, src/rev2025-11-25); the
 * composition root builds their transports and hands them to the router, so that neither imports the
 * other.
 */
export interface RevisionTransport {
  /** Whether a POST speaks this revision, from its headers and body. */
  claimsPost(header: HeaderOf, body: string): boolean;
  post(c: Context, body: string): Promise<Response>;
  /** GET and DELETE on the endpoint, for a revision that has them (2025-11-25's session streams). */
  streams?: {
    /** Whether a GET or DELETE is this revision's (without a claim, both are 405). */
    claims(header: HeaderOf): boolean;
    get(c: Context): Promise<Response>;
    delete(c: Context): Promise<Response>;
  };
}

/** What the router gives each revision's transport when it builds it. */
export interface RevisionBinding {
  /** The principal the auth middleware resolved for the request. */
  principalOf: (c: Context) => string;
  log: Logger;
  /** SSE comment interval on open streams, so that idle intermediaries keep them. */
  keepAliveMs: number | undefined;
  maxJsonDepth: number;
  metrics: Metrics | undefined;
  /** Whether a failure is the database being out of reach (a warning and a retry hint, not a fault). */
  isDatabaseUnavailable: IsDatabaseUnavailable;
}
