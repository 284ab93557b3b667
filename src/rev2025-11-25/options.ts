import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import type { IsDatabaseUnavailable } from '../core/unavailable.ts';
import type { PerPrincipalCap } from '../core/per-principal-cap.ts';
import type { Implementation } from '../core/wire.ts';
import type { Database } from '../db/database.ts';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import type { TaskChanges } from '../tasks/changes.ts';
import type { TaskEventReader } from '../tasks/event-follower.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { SessionService } from './sessions/service.ts';

/** What the 2025-11-25 revision needs: the shared method table, the task service, its sessions, the feed. */
export interface Rev2025Options {
  db: Kysely<Database>;
  dispatcher: Dispatcher;
  sessions: SessionService;
  tasks: TaskService;
  /** The process's one reader of changed tasks (GET streams and tasks/result waits watch it). */
  taskChanges: TaskChanges;
  /** The process's reader of task events (one shared read per batch of appends): GET and tasks/result streams carry them. */
  taskEvents: TaskEventReader;
  tools: ToolRegistry;
  serverInfo: Implementation;
  serves: { resources: boolean; prompts: boolean };
  feed: ChangeFeed | undefined;
  shutdown: AbortSignal;
  principalOf: (c: Context) => string;
  log: Logger;
  /** Whether a failure is the database being out of reach (a warning and a retry hint, not a fault). */
  isDatabaseUnavailable: IsDatabaseUnavailable;
  /** The deepest JSON nesting a request may have (a deeper body is not read to see whether it is this revision's). */
  maxJsonDepth: number;
  /** The versions the server's other revisions speak: listed to a client that names one this revision does not. */
  otherVersions: readonly string[];
  /**
   * Whether a principal names one requestor (bearer or OAuth). When not (AUTH_MODE=none: every client is
   * the one local principal), `tasks/list` lists the session's own tasks, not every client's.
   */
  requestorsIdentified: boolean;
  /** The largest answer (as JSON) to a request the server sent (MAX_INPUT_RESPONSES_BYTES). */
  maxInputResponsesBytes: number;
  /** The largest `capabilities` and `clientInfo` of an initialize, together, as JSON (MAX_SESSION_METADATA_BYTES). */
  maxSessionMetadataBytes: number;
  /** What one principal may hold open on this instance: GET streams and tasks/result waits. */
  caps: { getStreams: PerPrincipalCap; resultWaits: PerPrincipalCap };
  /**
   * How often a tasks/result wait reads its task in case this process missed a change (SUBSCRIPTION_POLL_MS;
   * its task's pollIntervalMs when there is no change feed). A feed that reconnects wakes every wait.
   */
  backstopMs: number;
  /** Where refusals for a quota are counted. */
  metrics?: Metrics | undefined;
  keepAliveMs?: number | undefined;
  /** The SSE `retry` a client waits before resuming a stream it lost. */
  retryMs?: number | undefined;
  /** How long a call waits for the client to answer an elicitation, sampling or roots request. */
  inputTimeoutMs?: number | undefined;
  /**
   * A request still unanswered after this long gets its response as a resumable SSE stream (a priming
   * event first), so that a long call survives a dropped connection; a quicker one is plain JSON.
   */
  streamAfterMs?: number | undefined;
}
