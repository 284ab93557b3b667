/**
 * The 2025-11-25 revision (and 2025-06-18, 2025-03-26): sessions, their transport and their methods, served
 * beside 2026-07-28 on the same endpoint. Only the composition root (src/process/revisions.ts) imports
 * this folder (a lint rule keeps it so): it hands the router the transport, the change feed the channels
 * and the worker's sweeper the maintenance. Without this folder the 2026-07-28 server is whole.
 */
import type { RevisionTransport } from '../protocol/revision.ts';
import { sessionDelete, sessionGet } from './get.ts';
import type { Rev2025Options } from './options.ts';
import { sessionPost } from './post.ts';
import { isSessionPost, namesNoOtherVersion, SESSION_HEADER } from './wire.ts';

export { SESSION_CHANNELS } from './channels.ts';
export type { Rev2025Options } from './options.ts';
export { SessionService } from './sessions/service.ts';
export { sessionMaintenance } from './sessions/sweep.ts';

/** The revision's HTTP side, as the router takes it. */
export function createSessionTransport(rev: Rev2025Options): RevisionTransport {
  return {
    /** Whether a POST speaks this revision (its headers, and its body when it names no session). */
    claimsPost: (header, body) => isSessionPost(header, body, rev.maxJsonDepth),
    post: sessionPost(rev),
    streams: {
      /** A GET or DELETE of this revision names a session (and no other revision's version). */
      claims: (header) => header(SESSION_HEADER) !== undefined && namesNoOtherVersion(header),
      get: sessionGet(rev),
      delete: sessionDelete(rev),
    },
  };
}
