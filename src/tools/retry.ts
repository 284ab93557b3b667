/**
 * Retry policies, for a whole tool (`defineTool({ retry })`: a handler that throws is run again) and for
 * one step (`ctx.step(name, fn, { retry })`: the step's function is called again, the rest of the
 * handler not). The server's TASK_RETRY_LIMIT and TASK_RETRY_DELAY_SECONDS are a tool's defaults.
 */
import { markClass } from '../core/marks.ts';
export interface RetryPolicy {
  /** Attempts in all, the first included (1: no retry). */
  maxAttempts?: number;
  /** The delay before retry n is `initialMs * factor^(n-1)`, at most `maxMs`. */
  backoff?: { initialMs?: number; factor?: number; maxMs?: number };
  /** Whether this error is retried (default: every error but a NonRetryableError). */
  retryIf?: (error: Error, attempt: number) => boolean;
  /**
   * A tool's policy only: what becomes of the task when its attempts run out (or a step's own retries
   * do). `fail` (default) ends it `failed`. `pause` keeps it `working`, holding no slot, with a status
   * message that says so, until an operator resumes it (`durable-mcp-tasks tasks resume`, the
   * dashboard): it then runs again from its last completed step, with its attempts counted afresh. For a
   * downstream outage an operator can wait out. An error the tool says is not retried (a
   * NonRetryableError, a ProtocolError, `retryIf` false) still fails it.
   */
  onExhausted?: 'fail' | 'pause';
}

/**
 * Thrown by a handler or a step: fails the task at once, whatever the retry policy, with this message.
 * Recognised by a mark rather than by its class alone, so that one thrown by a tools module that
 * resolved another copy of this package (src beside dist, two installs) is not retried either:
 * `instanceof NonRetryableError` holds for it.
 */
export class NonRetryableError extends Error {
  override readonly name: string = 'NonRetryableError';
}
markClass(NonRetryableError, 'NonRetryableError');

/** A step ran past its `timeoutMs`: its abort signal fired, and the step failed with this (retried by its policy). */
export class StepTimeoutError extends Error {
  override readonly name = 'StepTimeoutError';
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`step "${step}" timed out after ${timeoutMs} ms`);
  }
}

/** A step used up its own retries: the task fails (the tool's policy does not retry it again). */
export class StepFailedError extends NonRetryableError {
  override readonly name = 'StepFailedError';
  constructor(
    readonly step: string,
    readonly attempts: number,
    cause: Error,
  ) {
    super(`step "${step}" failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${cause.message}`, {
      cause,
    });
  }
}

export interface ResolvedRetry {
  maxAttempts: number;
  initialMs: number;
  factor: number;
  maxMs: number;
  retryIf: (error: Error, attempt: number) => boolean;
  onExhausted: 'fail' | 'pause';
}

/** A policy with every field set: `policy` over `defaults`. */
export function resolveRetry(
  policy: RetryPolicy | undefined,
  defaults: Omit<ResolvedRetry, 'retryIf' | 'onExhausted'>,
): ResolvedRetry {
  return {
    maxAttempts: Math.max(1, policy?.maxAttempts ?? defaults.maxAttempts),
    initialMs: Math.max(0, policy?.backoff?.initialMs ?? defaults.initialMs),
    factor: Math.max(1, policy?.backoff?.factor ?? defaults.factor),
    maxMs: Math.max(0, policy?.backoff?.maxMs ?? defaults.maxMs),
    retryIf: policy?.retryIf ?? (() => true),
    onExhausted: policy?.onExhausted ?? 'fail',
  };
}

/**
 * After `attempts` failed attempts: the delay before the next one (ms), or undefined when the error is
 * not retried (a NonRetryableError, `retryIf` says no, or no attempt is left).
 */
export function nextRetryDelay(policy: ResolvedRetry, error: Error, attempts: number): number | undefined {
  if (error instanceof NonRetryableError) return undefined;
  if (attempts >= policy.maxAttempts) return undefined;
  if (!policy.retryIf(error, attempts)) return undefined;
  return Math.min(policy.maxMs, policy.initialMs * policy.factor ** (attempts - 1));
}

/** What a step's function learns of its run, beside its abort signal. */
export interface StepInfo {
  readonly name: string;
  /**
   * This run of the step's body, from 1. With a retry policy it is counted in Postgres before the body
   * starts, so a run cut short by a crash counts (and `maxAttempts` bounds the runs); without one, 1 +
   * the step's failures so far (its task's own retries run it again).
   */
  readonly attempt: number;
}

/** A step's function: its abort signal (the task's, or one that also fires at the step's timeout) and its run. */
export type StepFn<T> = (signal: AbortSignal, step: StepInfo) => Promise<T> | T;

/** What a map item's function learns of its run, beside its item, index and signal. */
export interface MapItemInfo {
  /** The map's name. */
  readonly map: string;
  /** The item's position in the map's items (its function's second argument too). */
  readonly index: number;
  /** This run of the item, from 1: 1 + its failures so far (retried by the map's or the tool's policy). */
  readonly attempt: number;
}

/** A map item's function. */
export type MapItemFn<T, R> = (
  item: T,
  index: number,
  signal: AbortSignal,
  info: MapItemInfo,
) => Promise<R> | R;

/** What `ctx.step` takes besides its name and function. */
export interface StepOptions {
  /** Retries of this step's function alone (default: none; a throw goes to the handler). */
  retry?: RetryPolicy;
  /** The step's abort signal fires after this long and the step fails with StepTimeoutError (retried by `retry`). */
  timeoutMs?: number;
}

/** What `ctx.map` takes besides its name, items and function. */
export interface MapOptions {
  /** Items running at once, over every worker of the pool (default 8, at most 1,000). */
  concurrency?: number;
  /** How an item whose function throws is run again (default: the tool's policy). */
  retry?: RetryPolicy;
  /** An item's abort signal fires after this long and the item fails with StepTimeoutError (retried by `retry`). */
  timeoutMs?: number;
}

/** A map's default and largest concurrency, and its largest number of items. */
export const MAP_CONCURRENCY = { default: 8, max: 1_000 } as const;
export const MAX_MAP_ITEMS = 100_000;

/**
 * Calls a step's function with its own signal: the task's, or, with `timeoutMs`, one that also fires at
 * the timeout. The step fails at the timeout even if the function ignores its abort signal (it may then run
 * on in the background: make it listen).
 */
export async function callStep<T>(
  name: string,
  fn: (signal: AbortSignal) => Promise<T> | T,
  timeoutMs: number | undefined,
  taskSignal: AbortSignal,
): Promise<T> {
  if (timeoutMs === undefined) return fn(taskSignal);
  const step = new AbortController();
  const follow = () => step.abort(taskSignal.reason);
  taskSignal.addEventListener('abort', follow, { once: true });
  const timer = setTimeout(() => step.abort(new StepTimeoutError(name, timeoutMs)), timeoutMs);
  try {
    const stopped = new Promise<never>((_, reject) =>
      step.signal.addEventListener('abort', () => reject(step.signal.reason as Error), { once: true }),
    );
    return await Promise.race([Promise.resolve().then(() => fn(step.signal)), stopped]);
  } finally {
    clearTimeout(timer);
    taskSignal.removeEventListener('abort', follow);
  }
}
