import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { isConnectionError } from '../db/errors.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import { isStorable, jsonBytes } from '../core/limits.ts';
import type { CallToolResult } from '../core/wire.ts';
import { createToolContext } from '../tools/context.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TaskQueue } from '../tasks/service.ts';
import { settleCancelRequest, type Finish, type Outcome } from '../tasks/store/finish.ts';
import { loadInputs } from '../tasks/store/input.ts';
import { claimTasks, LeaseLostError, releaseTask, type ClaimedTask } from '../tasks/store/lease.ts';
import { loadSteps, type StepRecord } from '../tasks/store/steps.ts';
import { endSpan, extractContext, SpanKind, startSpan, traceIdOf, withContext } from '../core/tracing.ts';
import {
  createTaskRuntime,
  HandoffSignal,
  InfrastructureError,
  TaskSuspendedSignal,
} from './task-runtime.ts';

/** Why a running attempt's signal fired. */
export class CancelRequestedError extends Error {
  override readonly name = 'CancelRequestedError';
  constructor() {
    super('Cancelled by request');
  }
}

/** The attempts this process runs, so the lease watcher can reach their abort controllers. */
export type RunningAttempts = Map<string, { attempt: number; abort: AbortController }>;

export interface ExecutorDeps {
  db: Kysely<Database>;
  tools: ToolRegistry;
  queue: TaskQueue;
  workerId: string;
  leaseMs: number;
  statusThrottleMs: number;
  /** Crash retries before a task fails, and the delay before each. */
  retryLimit: number;
  retryDelaySeconds: number;
  /** A result larger than this (as JSON) is not stored; the task fails instead. */
  maxResultBytes?: number;
  running: RunningAttempts;
  /** True while the process shuts down: a handler is handed back at its next step. */
  draining: () => boolean;
  /** Asks the pool to fetch again after `ms` (a delayed retry it scheduled itself). */
  scheduleWake?: (ms: number) => void;
  events?: ServerEvents | undefined;
  metrics?: Metrics | undefined;
  /** The pool's batched writes (see coalesce.ts). */
  writes: {
    finish: (finish: Finish) => Promise<boolean>;
    saveStep: (step: StepRecord) => Promise<unknown>;
  };
  log: Logger;
}

/**
 * Claims the tasks of a batch of deliveries in one statement (each a new attempt, fenced by its number).
 * A task delivered twice in one batch is claimed for its first delivery only; undefined where a task is
 * not runnable (finished, waiting for input, held by a live attempt, cancelled while queued).
 */
export async function claimDeliveries(
  deps: ExecutorDeps,
  taskIds: readonly string[],
): Promise<(ClaimedTask | undefined)[]> {
  const claimed = await claimTasks(deps.db, [...new Set(taskIds)], deps.workerId, deps.leaseMs);
  return taskIds.map((taskId) => {
    const task = claimed.get(taskId);
    claimed.delete(taskId);
    return task;
  });
}

/**
 * Runs one leg of a claimed task: replay the handler with its checkpoints, and settle the outcome with
 * one fenced write. A leg ends at completion, at a request for input, at a cancel, at a crash
 * (re-enqueued while retries remain), or at a hand-off when the worker shuts down (re-enqueued at once).
 * The delivery is acknowledged while the leg runs, not before it: the claim (fenced by attempt), not the
 * job, is what turns a second delivery away, so the handler need not wait for that round trip.
 */
export async function runTaskLeg(
  deps: ExecutorDeps,
  taskId: string,
  claimed: ClaimedTask | undefined,
): Promise<void> {
  const { db, tools, queue, log: baseLog } = deps;
  const finishWith = (attempt: number, outcome: Outcome) => deps.writes.finish({ taskId, attempt, outcome });
  if (claimed === undefined) {
    // Not runnable: finished, waiting for input, held by a live attempt, or cancelled while queued.
    await settleCancelRequest(db, taskId);
    return;
  }
  const { attempt, failures } = claimed;
  // This leg's span continues the trace of the request that created the task, whichever process runs it.
  const leg = startSpan(
    `execute_tool ${claimed.toolName}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': claimed.toolName,
        'durable_mcp.task.id': taskId,
        'durable_mcp.task.attempt': attempt,
        'durable_mcp.worker.id': deps.workerId,
      },
    },
    extractContext(claimed.traceContext),
  );
  const traceId = traceIdOf(leg.context);
  const log = baseLog.scope({
    taskId,
    tool: claimed.toolName,
    attempt,
    ...(traceId !== undefined && { traceId }),
  });
  const tool_ = { tool: claimed.toolName };
  const legStarted = performance.now();
  let legOutcome = 'settled';
  const metrics = deps.metrics;
  if (metrics !== undefined) {
    if (attempt === 1)
      metrics.timeToStart.observe(tool_, Math.max(0, (Date.now() - claimed.createdAt.getTime()) / 1000));
    else metrics.resumedLegs.inc(tool_);
  }
  /** A terminal write that landed: counted once, by the worker whose fenced write it was. */
  const finished = (status: 'completed' | 'failed' | 'cancelled') => (landed: boolean) => {
    legOutcome = status;
    if (landed) metrics?.tasksFinished.inc({ ...tool_, status });
    return landed;
  };
  const fail = (error: ProtocolError, statusMessage: string) => {
    // A tool's own error may hold what Postgres cannot store (NUL, lone surrogates) or cannot serialize:
    // then the generic error is stored, rather than a write that fails forever.
    const wire = error.toJSON();
    const storable = isStorable(wire) && isStorable(statusMessage) && serializable(wire);
    return finishWith(attempt, {
      status: 'failed',
      error: storable ? wire : { code: ProtocolErrorCode.InternalError, message: 'Internal error' },
      statusMessage: storable ? statusMessage : 'Tool execution failed',
    }).then(finished('failed'));
  };
  const handBack = (opts: { failed: boolean; delaySeconds: number }) =>
    db
      .transaction()
      .execute(async (trx) => {
        if (
          await releaseTask(trx, taskId, attempt, { failed: opts.failed, delayMs: opts.delaySeconds * 1000 })
        ) {
          await queue.enqueueRun(trx, taskId, { delaySeconds: opts.delaySeconds });
        }
      })
      .then(() => {
        if (opts.delaySeconds > 0) deps.scheduleWake?.(opts.delaySeconds * 1000 + 50);
      });

  if (!tools.has(claimed.toolName)) {
    await fail(
      new ProtocolError(ProtocolErrorCode.InternalError, `Tool ${claimed.toolName} is not available`),
      'Tool execution failed: tool not available',
    );
    return;
  }
  const tool = tools.get(claimed.toolName);
  const args = tool.inputSchema.safeParse(claimed.arguments);
  if (!args.success) {
    await fail(
      new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid arguments'),
      'Tool execution failed: invalid arguments',
    );
    return;
  }

  const abort = new AbortController();
  // An older attempt of this task still in this process lost its lease (we just claimed a new one): stop it.
  deps.running.get(taskId)?.abort.abort(new LeaseLostError(taskId, attempt - 1));
  deps.running.set(taskId, { attempt, abort });
  try {
    // A first attempt has nothing to replay: no handler ran before it, so no step or input exists yet.
    const [steps, inputs] =
      attempt === 1
        ? [new Map<string, unknown>(), new Map<string, { request: unknown; response: unknown }>()]
        : await Promise.all([loadSteps(db, taskId), loadInputs(db, taskId)]);
    const runtime = createTaskRuntime({
      db,
      task: claimed,
      steps,
      inputs,
      signal: abort.signal,
      trace: leg.context,
      draining: deps.draining,
      events: deps.events,
      statusThrottleMs: deps.statusThrottleMs,
      saveStep: deps.writes.saveStep,
      log,
    });
    let result: CallToolResult;
    let lastStatus: string | undefined;
    try {
      result = await withContext(leg.context, () => tool.handler(args.data, createToolContext(runtime)));
      // A status message still waiting for its turn is written with the completion, in the same update.
      lastStatus = await runtime.takePending();
    } catch (thrown) {
      await runtime.flush();
      await settleThrown(thrown);
      return;
    }
    {
      if (!isStorable(result)) {
        await fail(
          new ProtocolError(
            ProtocolErrorCode.InternalError,
            "The tool's result contains characters that cannot be stored",
          ),
          'Tool execution failed: result not storable',
        );
        return;
      }
      const size = jsonBytes(result);
      if (deps.maxResultBytes !== undefined && size > deps.maxResultBytes) {
        log.warn('result over the size limit; not stored', { attempt, size });
        await fail(
          new ProtocolError(
            ProtocolErrorCode.InternalError,
            `The tool's result (${size} bytes) exceeds the limit of ${deps.maxResultBytes} bytes`,
          ),
          'Tool execution failed: result too large',
        );
        return;
      }
      const done = await finishWith(attempt, {
        status: 'completed',
        result: { ...result, resultType: 'complete' },
        // (One Postgres cannot store is dropped, as a failed status write would have been.)
        ...(lastStatus !== undefined && isStorable(lastStatus) && { statusMessage: lastStatus }),
      }).then(finished('completed'));
      if (!done) log.info('attempt lost its lease before completing; result dropped', { attempt });
    }
    async function settleThrown(thrown: unknown): Promise<void> {
      if (thrown instanceof TaskSuspendedSignal) {
        legOutcome = 'input_required';
        leg.span.addEvent('input_required');
        return;
      }
      const reason: unknown = abort.signal.aborted ? abort.signal.reason : undefined;
      if (thrown instanceof LeaseLostError || reason instanceof LeaseLostError) {
        legOutcome = 'lease_lost';
        metrics?.leasesLost.inc(tool_);
        // Another attempt (or the sweeper, or a cancel) owns the task now; ours must not write.
        if (!(await settleCancelRequest(db, taskId))) log.info('attempt stopped: lease lost', { attempt });
        return;
      }
      if (reason instanceof CancelRequestedError) {
        metrics?.cancelsDelivered.inc(tool_);
        await finishWith(attempt, {
          status: 'cancelled',
          statusMessage: 'Cancelled by request',
        }).then(finished('cancelled'));
        return;
      }
      if (thrown instanceof HandoffSignal || reason instanceof HandoffSignal) {
        legOutcome = 'handed_back';
        log.info('handing the task back: the worker shuts down', { attempt });
        await handBack({ failed: false, delaySeconds: 0 });
        return;
      }
      if (thrown instanceof ProtocolError) {
        await fail(thrown, `Tool execution failed: ${thrown.message}`);
        return;
      }
      if (thrown instanceof InfrastructureError) {
        // The database failed the step, not the handler: retry without counting a failure.
        log.warn('a store operation failed mid-run; the task will be retried', {
          attempt,
          error: thrown.message,
        });
        legOutcome = 'infrastructure_retry';
        await handBack({ failed: false, delaySeconds: deps.retryDelaySeconds });
        return;
      }
      const err = coerceError(thrown);
      if (failures < deps.retryLimit) {
        legOutcome = 'crash_retry';
        metrics?.crashRetries.inc(tool_);
        log.warn('handler crashed; the task will be retried', {
          attempt,
          failures: failures + 1,
          error: err.message,
        });
        await handBack({ failed: true, delaySeconds: deps.retryDelaySeconds });
        return;
      }
      log.error('handler crashed; no retries left', { attempt, error: err.message, stack: err.stack });
      await fail(
        new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error'),
        `Tool execution failed: internal error after ${failures + 1} attempts`,
      );
    }
  } catch (err) {
    // Anything that escaped the settling above (e.g. the database went away): count it as a failure and
    // hand the task back, so that a repeating fault ends in `failed` instead of looping; if even that
    // fails, the lease lapses and the sweeper takes the task back.
    legOutcome = 'error';
    log.warn('leg failed before it settled', { attempt, error: coerceError(err).message });
    await handBack({ failed: !isConnectionError(err), delaySeconds: deps.retryDelaySeconds }).catch(() => {});
  } finally {
    if (deps.running.get(taskId)?.attempt === attempt) deps.running.delete(taskId);
    metrics?.runDuration.observe({ ...tool_, outcome: legOutcome }, (performance.now() - legStarted) / 1000);
    leg.span.setAttribute('durable_mcp.leg.outcome', legOutcome);
    endSpan(leg.span, LEG_ERRORS.has(legOutcome) ? { type: legOutcome } : undefined);
  }
}

/** Leg outcomes that end its span as an error (the rest are a task's normal course). */
const LEG_ERRORS = new Set(['failed', 'crash_retry', 'infrastructure_retry', 'lease_lost', 'error']);

function serializable(value: unknown): boolean {
  try {
    JSON.stringify(value);
    return true;
  } catch {
    return false;
  }
}
