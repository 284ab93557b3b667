import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { isStorable, jsonBytes } from '../core/limits.ts';
import type { CallToolResult } from '../core/wire.ts';
import { coerceError } from '../log.ts';
import { nextRetryDelay, NonRetryableError, StepFailedError, type ResolvedRetry } from '../tools/retry.ts';
import { LeaseLostError } from '../tasks/store/lease.ts';
import {
  HandBack,
  InfrastructureError,
  MapItemDone,
  Park,
  SuspendForInput,
  type ParkedOn,
} from './leg-stops.ts';

/** Why a running attempt's abort signal fired: the task's cancel was requested. */
export class CancelRequestedError extends Error {
  override readonly name = 'CancelRequestedError';
  constructor() {
    super('Cancelled by request');
  }
}

/**
 * The attempts this process runs, so the lease keeper can reach their abort controllers, and tell them
 * their task's owner asked for a pause (the attempt pauses at its next checkpoint: see leg.ts).
 */
export type RunningAttempts = Map<
  string,
  { attempt: number; abort: AbortController; pauseRequested?: boolean }
>;

/**
 * How a leg ended, and so what becomes of its task. `kind` is also the leg's outcome label in metrics
 * and traces.
 */
export type LegOutcome =
  | { kind: 'completed'; result: CallToolResult; statusMessage?: string | undefined }
  | { kind: 'failed'; error: ProtocolError; statusMessage: string; crash?: Error }
  /** Attempts ran out under `onExhausted: 'pause'`: the task stays `working`, unqueued, until resumed. */
  | { kind: 'paused'; statusMessage: string; crash: Error }
  | { kind: 'cancelled' }
  /** Parked in `input_required`; an answer enqueues the next leg. */
  | { kind: 'input_required' }
  /** A durable sleep or a wait for a signal: the task stays `working`, holds no slot, and runs again at `until`. */
  | { kind: 'parked'; until: Date; statusMessage: string; parkedOn?: ParkedOn | undefined }
  /** A map item's function returned `value`: the item completes, and its slot takes the map's next item. */
  | { kind: 'item_done'; value: unknown }
  /** Another attempt, the sweeper or a cancel owns the task now: this one must not write. */
  | { kind: 'lease_lost' }
  /** The worker shuts down: the task goes back to the queue at once. */
  | { kind: 'handed_back' }
  /** The database failed a step, not the handler: retried without counting a failure. */
  | { kind: 'infrastructure_retry'; error: Error }
  /** The handler threw and its policy retries it: run again after `delayMs`, the failure counted. */
  | { kind: 'crash_retry'; error: Error; delayMs: number };

/**
 * What a thrown error (or the attempt's abort reason) means, given the task's crashes so far and the
 * tool's retry policy.
 */
export function classify(
  thrown: unknown,
  abortReason: unknown,
  { failures, retry }: { failures: number; retry: ResolvedRetry },
): LegOutcome {
  if (thrown instanceof SuspendForInput) return { kind: 'input_required' };
  if (thrown instanceof Park) {
    return {
      kind: 'parked',
      until: thrown.until,
      statusMessage: thrown.statusMessage,
      parkedOn: thrown.parkedOn,
    };
  }
  if (thrown instanceof MapItemDone) return { kind: 'item_done', value: thrown.value };
  if (thrown instanceof LeaseLostError || abortReason instanceof LeaseLostError)
    return { kind: 'lease_lost' };
  if (abortReason instanceof CancelRequestedError) return { kind: 'cancelled' };
  if (thrown instanceof HandBack || abortReason instanceof HandBack) return { kind: 'handed_back' };
  if (thrown instanceof ProtocolError) {
    return { kind: 'failed', error: thrown, statusMessage: `Tool execution failed: ${thrown.message}` };
  }
  if (thrown instanceof InfrastructureError) return { kind: 'infrastructure_retry', error: thrown };
  if (thrown instanceof StepFailedError && retry.onExhausted === 'pause') {
    return paused(thrown, `step "${thrown.step}" failed after ${attempts(thrown.attempts)}`);
  }
  if (thrown instanceof NonRetryableError) {
    return {
      kind: 'failed',
      error: new ProtocolError(ProtocolErrorCode.InternalError, thrown.message),
      statusMessage: `Tool execution failed: ${thrown.message}`,
      crash: thrown,
    };
  }
  const error = coerceError(thrown);
  const delayMs = nextRetryDelay(retry, error, failures + 1);
  if (delayMs !== undefined) return { kind: 'crash_retry', error, delayMs };
  const tried = failures + 1;
  const exhausted = tried >= retry.maxAttempts;
  // (An error `retryIf` turns away fails, even on the last attempt: no resume would make it succeed.)
  if (exhausted && retry.onExhausted === 'pause' && retry.retryIf(error, tried)) {
    return paused(error, `failed after ${attempts(tried)}`);
  }
  return {
    kind: 'failed',
    error: new ProtocolError(ProtocolErrorCode.InternalError, 'Internal error'),
    statusMessage: exhausted
      ? `Tool execution failed: internal error after ${attempts(tried)}`
      : 'Tool execution failed: internal error (not retried)',
    crash: error,
  };
}

const attempts = (n: number) => `${n} attempt${n === 1 ? '' : 's'}`;

/** The status message a client polling a paused task sees: paused, why, and what ends it (no exception text). */
function paused(crash: Error, why: string): LegOutcome {
  return {
    kind: 'paused',
    statusMessage: `Paused: ${why}; waiting for an operator to resume it`,
    crash,
  };
}

/**
 * What a handler's result means: completed, or failed when it cannot be stored or is still over the limit
 * (a result is spilled to an artifact first, see result-spill.ts: only a limit too small for the link's
 * own text leaves it over).
 */
export function completion(
  result: CallToolResult,
  statusMessage: string | undefined,
  maxResultBytes: number | undefined,
): LegOutcome {
  if (!isStorable(result)) {
    return toolFailure("The tool's result contains characters that cannot be stored", 'result not storable');
  }
  const size = jsonBytes(result);
  if (maxResultBytes !== undefined && size > maxResultBytes) {
    return toolFailure(
      `The tool's result (${size} bytes) exceeds the limit of ${maxResultBytes} bytes`,
      'result too large',
    );
  }
  // (A status message Postgres cannot store is dropped, as a failed status write would have been.)
  return {
    kind: 'completed',
    result,
    statusMessage: statusMessage !== undefined && isStorable(statusMessage) ? statusMessage : undefined,
  };
}

/** A failure the server decides (not the tool's own error): `message` for the client, `why` in the status. */
export function toolFailure(
  message: string,
  why: string,
  code = ProtocolErrorCode.InternalError,
): LegOutcome {
  return {
    kind: 'failed',
    error: new ProtocolError(code, message),
    statusMessage: `Tool execution failed: ${why}`,
  };
}
