import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ServerEvents } from '../events/server-events.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../core/metrics.ts';
import type { StartedSpan, TraceContext } from '../core/tracing.ts';
import type { ResolvedRetry } from '../tools/retry.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TaskQueue } from '../tasks/service.ts';
import type { Finish } from '../tasks/store/finish.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import type { StepRecord } from '../tasks/store/steps.ts';
import type { EventLimits } from './attempt-events.ts';
import type { ChildrenSettings } from './attempt-children.ts';
import type { MapItemCache } from './map-item.ts';
import type { RunningAttempts } from './outcome.ts';

// What a leg runs with (leg.ts runs it, settle.ts applies what it came to).

export interface LegDeps {
  db: Kysely<Database>;
  tools: ToolRegistry;
  queue: TaskQueue;
  workerId: string;
  /** How long a claim made by a leg lasts (the next map item, a woken parent) until renewed. */
  leaseMs: number;
  statusThrottleMs: number;
  /** A tool's retry policy where it sets none (TASK_RETRY_LIMIT, TASK_RETRY_DELAY_SECONDS). */
  retryDefaults: Omit<ResolvedRetry, 'retryIf' | 'onExhausted'>;
  /** A result larger than this (as JSON) is stored as the artifact tool-result.json, the result linking to it. */
  maxResultBytes?: number | undefined;
  /** A task that records more steps fails (MAX_STEPS_PER_TASK); unlimited when undefined. */
  maxStepsPerTask?: number | undefined;
  running: RunningAttempts;
  /** True while the process shuts down: a handler is handed back at its next step. */
  draining: () => boolean;
  /** Asks the pool to fetch again after `ms` (a delayed run it scheduled itself). */
  scheduleWake?: (ms: number) => void;
  events?: ServerEvents | undefined;
  metrics?: Metrics | undefined;
  /** A signal's delivery URL, from its token. */
  signalUrl: (token: string) => string;
  /** An artifact's HTTP download URL. */
  artifactUrl: (taskId: string, name: string) => string;
  /** A step whose value is larger (as JSON) fails the task (MAX_STEP_BYTES); unlimited when undefined. */
  maxStepBytes?: number | undefined;
  /** An artifact that grows larger fails its task (MAX_ARTIFACT_BYTES); unlimited when undefined. */
  maxArtifactBytes?: number | undefined;
  /** MAX_EVENT_BYTES, MAX_EVENTS_PER_TASK, MAX_EVENT_BYTES_PER_TASK. */
  eventLimits: EventLimits;
  /** What child tasks (ctx.callTool, ctx.spawn) are made with: tools, defaults, limits. */
  children: Omit<ChildrenSettings, 'tools'>;
  /** Map items' parents, read once per worker (see map-item.ts). */
  maps: MapItemCache;
  /** The pool's batched writes (see coalesce.ts). */
  writes: {
    finish: (finish: Finish) => Promise<boolean>;
    saveStep: (step: StepRecord) => Promise<unknown>;
  };
  log: Logger;
}

/** One leg's trace span, its scoped log, and its metric labels. */
export interface LegScope {
  task: ClaimedTask;
  log: Logger;
  trace: TraceContext;
  span: StartedSpan['span'];
  tool: { tool: string };
}
