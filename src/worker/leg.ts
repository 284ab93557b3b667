import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { isConnectionError } from '../db/errors.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import { ProtocolErrorCode } from '../core/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import { isStorable } from '../core/limits.ts';
import { createToolContext } from '../tools/context.ts';
import { resolveRetry, type ResolvedRetry } from '../tools/retry.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TaskQueue } from '../tasks/service.ts';
import { settleCancelRequest, type Finish } from '../tasks/store/finish.ts';
import { readSignal } from '../tasks/store/signals.ts';
import { mapSettled } from '../tasks/store/maps.ts';
import { loadInputs } from '../tasks/store/input.ts';
import { LeaseLostError, releaseTask, type ClaimedTask } from '../tasks/store/lease.ts';
import { attemptError, recordAttemptEnd, type AttemptEnd } from '../tasks/store/attempt-ends.ts';
import { pauseAttempt } from '../tasks/store/pause.ts';
import { emptyStepHistory, loadStepHistory, type StepRecord } from '../tasks/store/steps.ts';
import {
  endSpan,
  extractContext,
  SpanKind,
  startSpan,
  traceIdOf,
  withContext,
  type StartedSpan,
  type TraceContext,
} from '../core/tracing.ts';
import { createAttemptBackend, type AttemptBackend } from './attempt-backend.ts';
import type { MapItemLeg } from './attempt-map.ts';
import { ReplayMissError } from './attempt-steps.ts';
import type { ParkedOn } from './leg-signals.ts';
import { spillOversizedResult } from './result-spill.ts';
import { completeItem, itemFailure, wakeParent, type MapItemCache, type ReplaySource } from './map-item.ts';
import { classify, completion, toolFailure, type LegOutcome, type RunningAttempts } from './outcome.ts';
import type { ToolDefinition } from '../tools/define.ts';

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
interface LegScope {
  task: ClaimedTask;
  log: Logger;
  trace: TraceContext;
  span: StartedSpan['span'];
  tool: { tool: string };
}

/**
 * Runs one leg of a claimed task: replays the handler with its checkpoints, then settles what the leg
 * came to (see LegOutcome) with one fenced write. The delivery is acknowledged while the leg runs, not
 * before it: the claim (fenced by attempt), not the job, is what turns a second delivery away. Returns
 * the leg this slot runs next, already claimed (a map item's turn passed on, or its woken parent).
 */
export async function runTaskLeg(
  deps: LegDeps,
  taskId: string,
  claimed: ClaimedTask | undefined,
): Promise<ClaimedTask | undefined> {
  if (claimed === undefined) {
    // Not runnable: finished, waiting for input, held by a live attempt, or cancelled while queued.
    await settleCancelRequest(deps.db, taskId);
    return undefined;
  }
  const leg = openLeg(deps, claimed);
  const started = performance.now();
  let label = 'settled';
  const abort = new AbortController();
  // An older attempt of this task still in this process lost its lease (we just claimed a new one): stop it.
  deps.running.get(taskId)?.abort.abort(new LeaseLostError(taskId, claimed.attempt - 1));
  deps.running.set(taskId, { attempt: claimed.attempt, abort });
  try {
    const outcome =
      claimed.mapItem === undefined
        ? await runHandler(deps, leg, abort.signal)
        : await runMapItem(deps, leg, abort.signal);
    label = outcome.kind;
    return await settle(deps, leg, outcome);
  } catch (err) {
    // Anything that escaped the settling (e.g. the database went away): count it as a failure and hand
    // the task back, so that a repeating fault ends in `failed` instead of looping; if even that fails,
    // the lease lapses and the sweeper takes the task back.
    label = 'error';
    leg.log.warn('leg failed before it settled', { error: coerceError(err).message });
    await handBack(deps, claimed, {
      failed: !isConnectionError(err),
      delayMs: deps.retryDefaults.initialMs,
      ended: { outcome: 'error', error: attemptError(coerceError(err)) },
    }).catch(() => {});
    return undefined;
  } finally {
    if (deps.running.get(taskId)?.attempt === claimed.attempt) deps.running.delete(taskId);
    deps.metrics?.runDuration.observe({ ...leg.tool, outcome: label }, (performance.now() - started) / 1000);
    leg.span.setAttribute('durable_mcp.leg.outcome', label);
    endSpan(leg.span, LEG_ERRORS.has(label) ? { type: label } : undefined);
  }
}

/** Leg outcomes that end its span as an error (the rest are a task's normal course). */
const LEG_ERRORS = new Set([
  'failed',
  'paused',
  'crash_retry',
  'infrastructure_retry',
  'lease_lost',
  'error',
]);

/** The leg's span continues the trace of the request that created the task, whichever process runs it. */
function openLeg(deps: LegDeps, task: ClaimedTask): LegScope {
  const { span, context } = startSpan(
    `execute_tool ${task.toolName}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': task.toolName,
        'durable_mcp.task.id': task.taskId,
        'durable_mcp.task.attempt': task.attempt,
        'durable_mcp.worker.id': deps.workerId,
      },
    },
    extractContext(task.traceContext),
  );
  const traceId = traceIdOf(context);
  const log = deps.log.scope({
    taskId: task.taskId,
    tool: task.toolName,
    attempt: task.attempt,
    ...(traceId !== undefined && { traceId }),
  });
  const tool = { tool: task.toolName };
  // (A map item waits for its turn in the map, not for a worker: not a task's time to start.)
  if (task.mapItem === undefined && task.attempt === 1) {
    deps.metrics?.timeToStart.observe(tool, Math.max(0, (Date.now() - task.createdAt.getTime()) / 1000));
  } else if (task.mapItem === undefined) deps.metrics?.resumedLegs.inc(tool);
  return { task, log, trace: context, span, tool };
}

/** The task's tool and its validated arguments, or the failure when there is neither. */
function toolFor(
  deps: LegDeps,
  toolName: string,
  rawArgs: unknown,
): { tool: ToolDefinition; args: unknown } | LegOutcome {
  if (!deps.tools.has(toolName))
    return toolFailure(`Tool ${toolName} is not available`, 'tool not available');
  const tool = deps.tools.get(toolName);
  const args = tool.inputSchema.safeParse(rawArgs);
  if (!args.success) {
    return toolFailure('Invalid arguments', 'invalid arguments', ProtocolErrorCode.InvalidParams);
  }
  return { tool, args: args.data };
}

/** The backend of a leg's context, over what it replays (its own task's checkpoints, or a map item's parent's). */
function backendFor(
  deps: LegDeps,
  leg: LegScope,
  signal: AbortSignal,
  replay: ReplaySource,
  mapItem?: MapItemLeg,
): AttemptBackend {
  return createAttemptBackend({
    db: deps.db,
    task: replay.task,
    steps: replay.steps,
    inputs: replay.inputs,
    signal,
    trace: leg.trace,
    draining: deps.draining,
    events: deps.events,
    statusThrottleMs: deps.statusThrottleMs,
    saveStep: deps.writes.saveStep,
    maxSteps: deps.maxStepsPerTask,
    signalUrl: deps.signalUrl,
    artifactUrl: deps.artifactUrl,
    maxStepBytes: deps.maxStepBytes,
    maxArtifactBytes: deps.maxArtifactBytes,
    metrics: deps.metrics,
    queue: deps.queue,
    mapItem,
    log: leg.log,
  });
}

/** What an artifact of this leg's task is written with. */
const artifactDeps = (deps: LegDeps, task: ClaimedTask, signal: AbortSignal) => ({
  db: deps.db,
  task,
  signal,
  artifactUrl: deps.artifactUrl,
  maxBytes: deps.maxArtifactBytes,
  metrics: deps.metrics,
});

/** Runs the tool's handler with the task's checkpoints; what it came to, thrown or returned. */
async function runHandler(deps: LegDeps, leg: LegScope, signal: AbortSignal): Promise<LegOutcome> {
  const { task } = leg;
  const found = toolFor(deps, task.toolName, task.arguments);
  if ('kind' in found) return found;
  const { tool, args } = found;
  // A first attempt has nothing to replay: no handler ran before it, so no step or input exists yet.
  const [steps, inputs] =
    task.attempt === 1
      ? [emptyStepHistory(), new Map<string, { request: unknown; response: unknown }>()]
      : await Promise.all([loadStepHistory(deps.db, task.taskId), loadInputs(deps.db, task.taskId)]);
  const backend = backendFor(deps, leg, signal, { task, steps, inputs });
  try {
    const result = await withContext(leg.trace, () => tool.handler(args, createToolContext(backend)));
    const stored = await spillOversizedResult(
      { ...artifactDeps(deps, task, signal), history: steps, maxResultBytes: deps.maxResultBytes },
      result,
    );
    // A status message still waiting for its turn is written with the completion, in the same update.
    return completion(stored, await backend.takePending(), deps.maxResultBytes);
  } catch (thrown) {
    await backend.flush();
    return classify(thrown, signal.aborted ? signal.reason : undefined, {
      failures: task.failures,
      retry: resolveRetry(tool.retry, deps.retryDefaults),
    });
  }
}

/**
 * A map item's leg: the parent's handler replays from the parent's checkpoints to its map, which runs
 * this item's function (MapItemDone). A cached copy of the parent that misses a step is read again once.
 */
async function runMapItem(deps: LegDeps, leg: LegScope, signal: AbortSignal): Promise<LegOutcome> {
  const ref = leg.task.mapItem!;
  const { replay, cached } = await deps.maps.parent(ref, false);
  const fromFreshCopy = async () =>
    replayToItem(deps, leg, signal, (await deps.maps.parent(ref, true)).replay);
  return replayToItem(deps, leg, signal, replay, cached ? fromFreshCopy : undefined);
}

/** One replay of the parent to this item; a missed step goes to `onMiss` when given (a copy may be stale). */
async function replayToItem(
  deps: LegDeps,
  leg: LegScope,
  signal: AbortSignal,
  replay: ReplaySource | undefined,
  onMiss?: () => Promise<LegOutcome>,
): Promise<LegOutcome> {
  if (replay === undefined) return { kind: 'cancelled' };
  const ref = leg.task.mapItem!;
  const found = toolFor(deps, replay.task.toolName, replay.task.arguments);
  if ('kind' in found) return found;
  const { tool, args } = found;
  const item: MapItemLeg = { mapName: ref.mapName, index: ref.index };
  const backend = backendFor(deps, leg, signal, replay, item);
  try {
    await withContext(leg.trace, () => tool.handler(args, createToolContext(backend)));
    return toolFailure(`the handler returned before it reached ctx.map "${ref.mapName}"`, 'map not reached');
  } catch (thrown) {
    if (thrown instanceof ReplayMissError && onMiss !== undefined) return onMiss();
    return itemFailure(
      classify(thrown, signal.aborted ? signal.reason : undefined, {
        failures: leg.task.failures,
        // (A map item fails its map when its attempts run out; only its parent's task may pause.)
        retry: {
          ...resolveRetry(item.options?.retry ?? tool.retry, deps.retryDefaults),
          onExhausted: 'fail',
        },
      }),
    );
  }
}

/**
 * Applies a leg's outcome to its task: one fenced write, or a hand-back to the queue. Returns the leg
 * this slot runs next: a map item's successor, or its parent woken.
 */
async function settle(deps: LegDeps, leg: LegScope, outcome: LegOutcome): Promise<ClaimedTask | undefined> {
  const { task, log, tool } = leg;
  const { metrics } = deps;
  const taskAttempt = { taskId: task.taskId, attempt: task.attempt };
  const ended = (end: AttemptEnd) => recordAttemptEnd(deps.db, task.taskId, task.attempt, end);
  const finish = (f: Finish['outcome'], crash?: Error) =>
    deps.writes.finish({ ...taskAttempt, outcome: f, crash: crash && attemptError(crash) }).then((landed) => {
      // A terminal write that landed: counted once, by the worker whose fenced write it was.
      if (landed) metrics?.tasksFinished.inc({ ...tool, status: f.status });
      return landed;
    });
  switch (outcome.kind) {
    case 'completed': {
      const landed = await finish({
        status: 'completed',
        result: { ...outcome.result, resultType: 'complete' },
        ...(outcome.statusMessage !== undefined && { statusMessage: outcome.statusMessage }),
      });
      if (!landed) log.info('attempt lost its lease before completing; result dropped');
      return undefined;
    }
    case 'item_done':
      return completeItem(deps, task, outcome.value);
    case 'failed': {
      if (outcome.crash !== undefined) {
        log.error('handler crashed; no retries left', {
          error: outcome.crash.message,
          stack: outcome.crash.stack,
        });
      }
      // A tool's own error may hold what Postgres cannot store (NUL, lone surrogates) or cannot serialize:
      // then the generic error is stored, rather than a write that fails forever.
      const wire = outcome.error.toJSON();
      const storable = isStorable(wire) && isStorable(outcome.statusMessage) && serializable(wire);
      await finish(
        {
          status: 'failed',
          error: storable ? wire : { code: ProtocolErrorCode.InternalError, message: 'Internal error' },
          statusMessage: storable ? outcome.statusMessage : 'Tool execution failed',
        },
        outcome.crash,
      );
      // A map item that failed for good: its parent wakes now and fails its map.
      const item = task.mapItem;
      return item === undefined
        ? undefined
        : wakeParent(deps, { parentTaskId: item.parentTaskId, mapName: item.mapName });
    }
    case 'cancelled':
      metrics?.cancelsDelivered.inc(tool);
      await finish({ status: 'cancelled', statusMessage: 'Cancelled by request' });
      return undefined;
    case 'paused':
      log.warn('handler crashed; no attempts left: the task is paused until an operator resumes it', {
        error: outcome.crash.message,
        stack: outcome.crash.stack,
      });
      if (
        !(await pauseAttempt(deps.db, task.taskId, task.attempt, {
          statusMessage: outcome.statusMessage,
          error: attemptError(outcome.crash),
        }))
      )
        log.info('attempt lost its lease before pausing');
      return undefined;
    case 'input_required':
      leg.span.addEvent('input_required');
      await ended({ outcome: 'input_required' });
      return undefined;
    case 'lease_lost':
      metrics?.leasesLost.inc(tool);
      await ended({ outcome: 'lease_lost' });
      if (!(await settleCancelRequest(deps.db, task.taskId))) log.info('attempt stopped: lease lost');
      return undefined;
    case 'parked': {
      const delayMs = Math.max(0, outcome.until.getTime() - Date.now());
      await handBack(deps, task, {
        failed: false,
        delayMs,
        statusMessage: outcome.statusMessage,
        parkedOn: outcome.parkedOn,
        ended: { outcome: 'parked' },
      });
      leg.span.addEvent('parked', { until: outcome.until.toISOString() });
      return undefined;
    }
    case 'handed_back':
      log.info('handing the task back: the worker shuts down');
      await handBack(deps, task, { failed: false, delayMs: 0, ended: { outcome: 'handed_back' } });
      return undefined;
    case 'infrastructure_retry':
      log.warn('a store operation failed mid-run; the task will be retried', {
        error: outcome.error.message,
      });
      await handBack(deps, task, {
        failed: false,
        delayMs: deps.retryDefaults.initialMs,
        ended: { outcome: 'infrastructure_retry', error: attemptError(outcome.error) },
      });
      return undefined;
    case 'crash_retry':
      metrics?.crashRetries.inc(tool);
      log.warn('handler crashed; the task will be retried', {
        failures: task.failures + 1,
        error: outcome.error.message,
      });
      await handBack(deps, task, {
        failed: true,
        delayMs: outcome.delayMs,
        ended: { outcome: 'crash_retry', error: attemptError(outcome.error) },
      });
      return undefined;
  }
}

/**
 * Releases the task (still `working`) and enqueues its next run after `delayMs`, in one transaction; the
 * pool is asked to fetch again when it comes due.
 */
export async function handBack(
  deps: Pick<LegDeps, 'db' | 'queue' | 'scheduleWake'>,
  task: ClaimedTask,
  opts: {
    failed: boolean;
    delayMs: number;
    statusMessage?: string;
    parkedOn?: ParkedOn | undefined;
    /** How this attempt ended, for its row (the operator's view). */
    ended?: AttemptEnd;
  },
): Promise<void> {
  let delayMs = opts.delayMs;
  await deps.db.transaction().execute(async (trx) => {
    if (!(await releaseTask(trx, task.taskId, task.attempt, opts))) return;
    if (opts.ended !== undefined) await recordAttemptEnd(trx, task.taskId, task.attempt, opts.ended);
    // A cancel asked for while this attempt held the task ends it now, not when the run comes due.
    if (await settleCancelRequest(trx, task.taskId)) return;
    // A delivery (or a map's last item) that came after the wait looked, while this attempt still held
    // the task, had its wake-up turned away by the lease: the task runs again now. (One that commits
    // later brings its own run, whose claim waits for this transaction's row lock and then finds the
    // task released.)
    if (opts.parkedOn !== undefined && (await parkedOnIsDone(trx, task.taskId, opts.parkedOn))) delayMs = 0;
    await deps.queue.enqueueRun(trx, task.taskId, { delayMs });
  });
  if (delayMs > 0) deps.scheduleWake?.(delayMs);
}

async function parkedOnIsDone(db: Kysely<Database>, taskId: string, on: ParkedOn): Promise<boolean> {
  if ('signal' in on) return (await readSignal(db, taskId, on.signal))?.deliveredAt != null;
  return mapSettled(db, { parentTaskId: taskId, mapName: on.map });
}

function serializable(value: unknown): boolean {
  try {
    JSON.stringify(value);
    return true;
  } catch {
    return false;
  }
}
