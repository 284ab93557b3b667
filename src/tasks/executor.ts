import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import { ProtocolError, ProtocolErrorCode } from '../protocol/errors.ts';
import { isStorable, jsonBytes } from '../protocol/limits.ts';
import { createToolContext } from '../tools/context.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TaskQueue } from './service.ts';
import { finishAttempt, settleCancelRequest } from './store/finish.ts';
import { loadInputs } from './store/input.ts';
import { claimTask, LeaseLostError, releaseTask } from './store/lease.ts';
import { loadSteps } from './store/steps.ts';
import { createTaskRuntime, HandoffSignal, TaskSuspendedSignal } from './task-runtime.ts';

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
  log: Logger;
}

export interface LegOptions {
  taskId: string;
  /** Acknowledges the delivery (the pg-boss job) once the task is claimed, or found not runnable. */
  ack: () => Promise<void>;
}

/**
 * Runs one leg of a task: claim (a new attempt, fenced by its number), acknowledge the delivery, replay
 * the handler with its checkpoints, and settle the outcome with one fenced write. A leg ends at
 * completion, at a request for input, at a cancel, at a crash (re-enqueued while retries remain), or at
 * a hand-off when the worker shuts down (re-enqueued at once).
 */
export async function runTaskLeg(deps: ExecutorDeps, { taskId, ack }: LegOptions): Promise<void> {
  const { db, tools, queue, log: baseLog } = deps;
  const claimed = await claimTask(db, taskId, deps.workerId, deps.leaseMs);
  await ack();
  if (claimed === undefined) {
    // Not runnable: finished, waiting for input, held by a live attempt, or cancelled while queued.
    await settleCancelRequest(db, taskId);
    return;
  }
  const { attempt } = claimed;
  const log = baseLog.scope({ taskId });
  const fail = (error: ProtocolError, statusMessage: string) =>
    finishAttempt(db, taskId, attempt, { status: 'failed', error: error.toJSON(), statusMessage });
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
  deps.running.set(taskId, { attempt, abort });
  try {
    const [steps, inputs] = await Promise.all([loadSteps(db, taskId), loadInputs(db, taskId)]);
    const runtime = createTaskRuntime({
      db,
      task: claimed,
      steps,
      inputs,
      signal: abort.signal,
      draining: deps.draining,
      events: deps.events,
      statusThrottleMs: deps.statusThrottleMs,
      log,
    });
    try {
      const result = await tool.handler(args.data, createToolContext(runtime));
      await runtime.flush();
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
      const done = await finishAttempt(db, taskId, attempt, {
        status: 'completed',
        result: { ...result, resultType: 'complete' },
      });
      if (!done) log.info('attempt lost its lease before completing; result dropped', { attempt });
    } catch (thrown) {
      await runtime.flush();
      if (thrown instanceof TaskSuspendedSignal) return;
      const reason: unknown = abort.signal.aborted ? abort.signal.reason : undefined;
      if (thrown instanceof LeaseLostError || reason instanceof LeaseLostError) {
        // Another attempt (or the sweeper, or a cancel) owns the task now; ours must not write.
        if (!(await settleCancelRequest(db, taskId))) log.info('attempt stopped: lease lost', { attempt });
        return;
      }
      if (reason instanceof CancelRequestedError) {
        await finishAttempt(db, taskId, attempt, {
          status: 'cancelled',
          statusMessage: 'Cancelled by request',
        });
        return;
      }
      if (thrown instanceof HandoffSignal || reason instanceof HandoffSignal) {
        log.info('handing the task back: the worker shuts down', { attempt });
        await handBack({ failed: false, delaySeconds: 0 });
        return;
      }
      if (thrown instanceof ProtocolError) {
        await fail(thrown, `Tool execution failed: ${thrown.message}`);
        return;
      }
      const err = coerceError(thrown);
      if (claimed.failures < deps.retryLimit) {
        log.warn('handler crashed; the task will be retried', {
          attempt,
          failures: claimed.failures + 1,
          error: err.message,
        });
        await handBack({ failed: true, delaySeconds: deps.retryDelaySeconds });
        return;
      }
      log.error('handler crashed; no retries left', { attempt, error: err.message, stack: err.stack });
      await fail(
        new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error'),
        `Tool execution failed: internal error after ${claimed.failures + 1} attempts`,
      );
    }
  } finally {
    deps.running.delete(taskId);
  }
}
