import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { ServerEvents } from '../events/server-events.ts';
import { coerceError, type Logger } from '../log.ts';
import { ProtocolError, ProtocolErrorCode } from '../protocol/errors.ts';
import { createToolContext } from '../tools/context.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import { finishAttempt, settleCancelRequest } from './store/finish.ts';
import { loadInputs } from './store/input.ts';
import { claimTask, LeaseLostError, releaseTask } from './store/lease.ts';
import { loadSteps } from './store/steps.ts';
import { createTaskRuntime, TaskSuspendedSignal } from './task-runtime.ts';

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
  workerId: string;
  leaseMs: number;
  statusThrottleMs: number;
  running: RunningAttempts;
  events?: ServerEvents | undefined;
  log: Logger;
}

export interface LegOptions {
  taskId: string;
  /** Retries pg-boss has made of this job so far, and how many it may make. */
  retryCount: number;
  retryLimit: number;
}

/** Thrown out of a leg so that pg-boss retries the job (after an unexpected crash of the handler). */
export class RetryableTaskError extends Error {
  override readonly name = 'RetryableTaskError';
}

/**
 * Runs one leg of a task: claim (new attempt), replay the handler with its checkpoints, and settle the
 * outcome with a fenced write. A leg ends at completion, at a request for input, or at a cancel.
 */
export async function runTaskLeg(
  deps: ExecutorDeps,
  { taskId, retryCount, retryLimit }: LegOptions,
): Promise<void> {
  const { db, tools, log: baseLog } = deps;
  const claimed = await claimTask(db, taskId, deps.workerId, deps.leaseMs);
  if (claimed === undefined) {
    // Not runnable: finished, waiting for input, or cancelled while queued.
    await settleCancelRequest(db, taskId);
    return;
  }
  const { attempt } = claimed;
  const log = baseLog.scope({ taskId });
  const fail = (error: ProtocolError, statusMessage: string) =>
    finishAttempt(db, taskId, attempt, { status: 'failed', error: error.toJSON(), statusMessage });

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
  const [steps, inputs] = await Promise.all([loadSteps(db, taskId), loadInputs(db, taskId)]);
  const runtime = createTaskRuntime({
    db,
    task: claimed,
    steps,
    inputs,
    signal: abort.signal,
    events: deps.events,
    statusThrottleMs: deps.statusThrottleMs,
    log,
  });
  try {
    const result = await tool.handler(args.data, createToolContext(runtime));
    await runtime.flush();
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
    if (thrown instanceof ProtocolError) {
      await fail(thrown, `Tool execution failed: ${thrown.message}`);
      return;
    }
    const err = coerceError(thrown);
    if (retryCount < retryLimit) {
      log.warn('handler crashed; the job will be retried', { attempt, retryCount, error: err.message });
      await releaseTask(db, taskId, attempt);
      throw new RetryableTaskError(err.message, { cause: err });
    }
    log.error('handler crashed; no retries left', {
      attempt,
      retryCount,
      error: err.message,
      stack: err.stack,
    });
    await fail(
      new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error'),
      `Tool execution failed: internal error after ${retryCount + 1} attempts`,
    );
  } finally {
    deps.running.delete(taskId);
  }
}
