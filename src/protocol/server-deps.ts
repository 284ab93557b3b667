import type { Metrics } from '../core/metrics.ts';
import type { ChangeFeed } from '../events/change-feed.ts';
import type { ServerEvents } from '../events/server-events.ts';
import type { PromptRegistry } from '../prompts/registry.ts';
import type { ResourceRegistry } from '../resources/registry.ts';
import type { TaskChanges } from '../tasks/changes.ts';
import type { TaskEventReader } from '../tasks/event-follower.ts';
import type { TaskService } from '../tasks/service.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { RequestStateSealer } from '../tools/request-state.ts';
import type { SyncCallRunner } from '../tools/sync-runner.ts';
import type { PollLimiter } from './poll-limiter.ts';
import type { Implementation } from '../core/wire.ts';

/** What the protocol methods need, built once by the composition root. */
export interface ServerDeps {
  serverInfo: Implementation;
  /** What server/discover lists: the versions of the revision that has the method (2026-07-28's). */
  supportedVersions: readonly string[];
  tools: ToolRegistry;
  resources: ResourceRegistry;
  prompts: PromptRegistry;
  tasks: TaskService;
  /** The process's one reader of changed tasks, which streams watch instead of reading each change. */
  taskChanges: TaskChanges;
  /** Where every reader of task events starts (tasks/stream, the events endpoint, 2025-11-25 streams). */
  taskEvents: TaskEventReader;
  requestState: RequestStateSealer;
  events: ServerEvents;
  /** The process's LISTEN connection; `subscriptions/listen` needs it. */
  feed: ChangeFeed | undefined;
  /** Aborted when the process shuts down: open subscriptions end gracefully. */
  shutdown: AbortSignal;
  taskDefaults: { ttlMs: number | null; pollIntervalMs: number };
  /** Caching hint for server/discover, the lists and resources/read. */
  listTtlMs: number;
  /** How often a subscription re-reads its tasks in case a notification was lost. */
  subscriptionPollMs: number;
  /** Size limits on what a request may carry (UTF-8 bytes of the JSON), and a synchronous handler's time. */
  limits: {
    maxArgumentsBytes: number;
    maxInputResponsesBytes: number;
    maxSubscriptionsPerPrincipal: number;
    /** MAX_STEERING_MESSAGE_BYTES, MAX_STEERING_MESSAGES_PER_TASK: what `tasks/steer` takes. */
    maxSteeringMessageBytes: number;
    maxSteeringMessagesPerTask: number;
    /** SYNC_CALL_TIMEOUT_MS: one run of a synchronous handler. Default: none. */
    syncCallTimeoutMs?: number | undefined;
  };
  /** Runs synchronous handlers off the event loop (worker threads), for the tools it can load. */
  syncCalls?: SyncCallRunner | undefined;
  /** When set, tasks/get faster than the task's pollIntervalMs gets 429. */
  pollLimiter?: PollLimiter | undefined;
  /** Request and task counters of this process; none when undefined. */
  metrics?: Metrics | undefined;
}
