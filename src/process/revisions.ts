// The protocol revisions this server speaks, each from its own folder: everything the composition root
// knows of them is here. Deleting a revision's folder means deleting its lines in this file.
import type { Config } from '../config.ts';
import { PerPrincipalCap } from '../core/per-principal-cap.ts';
import type { Db } from '../db/database.ts';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import type { RevisionBinding, RevisionTransport } from '../protocol/revision.ts';
import type { ServerDeps } from '../protocol/server-deps.ts';
import {
  createSessionTransport,
  SESSION_CHANNELS,
  sessionMaintenance,
  SessionService,
} from '../rev2025-11-25/index.ts';
import { createTransport, SUPPORTED_VERSIONS } from '../rev2026-07-28/index.ts';
import type { WorkerPoolOptions } from '../worker/pool.ts';

/** What server/discover lists (a 2026-07-28 method: that revision's versions). */
export const DISCOVERED_VERSIONS: readonly string[] = SUPPORTED_VERSIONS;

/** The change feed's channels the revisions listen on (2025-11-25's sessions). */
export const REVISION_CHANNELS: readonly string[] = Object.values(SESSION_CHANNELS);

/** The revisions' upkeep, run beside the workers' sweep (2025-11-25's idle sessions and old events). */
export function revisionMaintenance(db: Db, config: Config): WorkerPoolOptions['maintenance'] {
  return sessionMaintenance(db, {
    idleTtlMs: config.SESSION_IDLE_TTL_MS,
    eventRetentionMs: config.SESSION_EVENT_RETENTION_MS,
  });
}

/** What the revisions' transports are built from, once per process. */
export interface RevisionParts {
  config: Config;
  db: Db;
  feed: ChangeFeed;
  deps: ServerDeps;
  dispatcher: Dispatcher;
  /** The LISTEN connections' application_names of the processes that serve HTTP. */
  servingListeners: string[];
}

/**
 * The endpoint's transports, newest first (it answers what no other revision claims): a factory the
 * router calls with its binding. Built once per process: the sessions' state outlives an app rebuilt
 * for the port actually bound.
 */
export function revisionTransports(
  parts: RevisionParts,
): (binding: RevisionBinding) => readonly [RevisionTransport, ...RevisionTransport[]] {
  const rev2025 = rev2025Parts(parts);
  return (binding) => [
    createTransport({ ...binding, dispatcher: parts.dispatcher }),
    createSessionTransport({ ...binding, ...rev2025, otherVersions: SUPPORTED_VERSIONS }),
  ];
}

/** The 2025-11-25 revision's own parts: its sessions, and what one principal may hold open of them. */
function rev2025Parts({ config, db, feed, deps, dispatcher, servingListeners }: RevisionParts) {
  const sessions = new SessionService(db, {
    idleTtlMs: config.SESSION_IDLE_TTL_MS,
    feed,
    servingListeners,
    maxSessionsPerPrincipal: config.MAX_SESSIONS_PER_PRINCIPAL,
  });
  return {
    db,
    dispatcher,
    sessions,
    tasks: deps.tasks,
    taskChanges: deps.taskChanges,
    taskEvents: deps.taskEvents,
    tools: deps.tools,
    serverInfo: deps.serverInfo,
    serves: { resources: !deps.resources.empty, prompts: !deps.prompts.empty },
    feed,
    shutdown: deps.shutdown,
    requestorsIdentified: config.AUTH_MODE !== 'none',
    maxInputResponsesBytes: config.MAX_INPUT_RESPONSES_BYTES,
    maxSessionMetadataBytes: config.MAX_SESSION_METADATA_BYTES,
    caps: {
      getStreams: new PerPrincipalCap(
        'MAX_GET_STREAMS_PER_PRINCIPAL',
        config.MAX_GET_STREAMS_PER_PRINCIPAL,
        'open GET streams',
      ),
      resultWaits: new PerPrincipalCap(
        'MAX_RESULT_WAITS_PER_PRINCIPAL',
        config.MAX_RESULT_WAITS_PER_PRINCIPAL,
        'tasks/result waits',
      ),
    },
    backstopMs: config.SUBSCRIPTION_POLL_MS,
    metrics: deps.metrics,
  };
}
