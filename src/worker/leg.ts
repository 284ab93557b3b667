import { isConnectionError } from '../db/errors.ts';
import { coerceError } from '../log.ts';
import { ProtocolErrorCode } from '../core/errors.ts';
import { createToolContext } from '../tools/context.ts';
import { resolveRetry } from '../tools/retry.ts';
import { loadInputs } from '../tasks/store/input.ts';
import { LeaseLostError, type ClaimedTask } from '../tasks/store/lease.ts';
import { attemptError } from '../tasks/store/attempt-ends.ts';
import { emptyStepHistory, loadStepHistory } from '../tasks/store/steps.ts';
import { loadWrittenEvents, noWrittenEvents } from '../tasks/store/events.ts';
import { endSpan, extractContext, SpanKind, startSpan, traceIdOf, withContext } from '../core/tracing.ts';
import { createAttemptBackend, type AttemptBackend } from './attempt-backend.ts';
import type { MapItemLeg } from './attempt-map.ts';
import { ReplayMissError } from './step-guard.ts';
import type { LegDeps, LegScope } from './leg-deps.ts';
import { spillOversizedResult } from './result-spill.ts';
import { itemFailure, type ReplaySource } from './map-item.ts';
import { classify, completion, toolFailure, type LegOutcome } from './outcome.ts';
import { handBack, settle } from './settle.ts';
import type { ToolDefinition } from '../tools/define.ts';

/**
 * Runs one leg of a claimed task: replays the handler with its checkpoints, then settles what the leg
 * came to (see LegOutcome) with one fenced write. The delivery is acknowledged while the leg runs, not
 * before it: the claim (fenced by attempt), not the job, is what turns a second delivery away. Returns
 * the leg this slot runs next, already claimed (a map item's turn passed on, or its woken parent).
 */
export async function runTaskLeg(deps: LegDeps, claimed: ClaimedTask): Promise<ClaimedTask | undefined> {
  const { taskId } = claimed;
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
    draining: mapItem === undefined ? () => deps.draining() || pauseAsked(deps, leg.task) : deps.draining,
    events: deps.events,
    statusThrottleMs: deps.statusThrottleMs,
    saveStep: deps.writes.saveStep,
    maxSteps: deps.maxStepsPerTask,
    signalUrl: deps.signalUrl,
    artifactUrl: deps.artifactUrl,
    maxStepBytes: deps.maxStepBytes,
    eventLimits: deps.eventLimits,
    written: replay.written,
    maxArtifactBytes: deps.maxArtifactBytes,
    metrics: deps.metrics,
    queue: deps.queue,
    mapItem,
    children: { tools: deps.tools, ...deps.children },
    log: leg.log,
  });
}

/**
 * The task's owner asked for a pause (`tasks/pause`): like a shutdown, no new step starts and the task is
 * handed back, and the hand-back pauses it (settle.ts: handBack).
 */
function pauseAsked(deps: LegDeps, task: ClaimedTask): boolean {
  const entry = deps.running.get(task.taskId);
  return entry?.attempt === task.attempt && entry.pauseRequested === true;
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
  const [steps, inputs, written] =
    task.attempt === 1
      ? [emptyStepHistory(), new Map<string, { request: unknown; response: unknown }>(), noWrittenEvents()]
      : await Promise.all([
          loadStepHistory(deps.db, task.taskId),
          loadInputs(deps.db, task.taskId),
          loadWrittenEvents(deps.db, task.taskId),
        ]);
  const backend = backendFor(deps, leg, signal, { task, steps, inputs, written });
  try {
    const result = await withContext(leg.trace, () => tool.handler(args, createToolContext(backend)));
    // The task's events are written before its completion: a reader never sees an end before them.
    await backend.flushEvents();
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
  const item: MapItemLeg = { mapName: ref.mapName, index: ref.index, attempt: leg.task.failures + 1 };
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
