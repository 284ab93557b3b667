/**
 * The 2025-11-25 era (and 2025-06-18, 2025-03-26): sessions, their transport and their methods, served
 * beside 2026-07-28 on the same endpoint. Only the composition root (src/runtime.ts) imports this
 * folder (a lint rule keeps it so): it hands the router the transport, the change feed the channels
 * and the worker's sweeper the maintenance. Without this folder the 2026-07-28 server is whole.
 */
import type { Context } from 'hono';
import { sessionDelete, sessionGet } from './get.ts';
import type { SessionEraOptions } from './options.ts';
import { sessionPost } from './post.ts';
import { isSessionPost, SESSION_HEADER } from './wire.ts';

export { SESSION_CHANNELS } from './channels.ts';
export type { SessionEraOptions } from './options.ts';
export { SessionService } from './sessions/service.ts';
export { sessionMaintenance } from './sessions/sweep.ts';

/** The era's HTTP side, as the router takes it. */
export function createSessionTransport(era: SessionEraOptions) {
  return {
    /** Whether a POST speaks this era (its headers, and its body when it names no session). */
    claims: isSessionPost,
    /** A GET or DELETE names a session with this header (without one, they are not this era's). */
    sessionHeader: SESSION_HEADER,
    post: sessionPost(era),
    get: sessionGet(era),
    delete: sessionDelete(era),
  } satisfies {
    claims: (header: (name: string) => string | undefined, body: string) => boolean;
    sessionHeader: string;
    post: (c: Context, body: string) => Promise<Response>;
    get: (c: Context) => Promise<Response>;
    delete: (c: Context) => Promise<Response>;
  };
}
