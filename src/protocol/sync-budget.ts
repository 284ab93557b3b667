import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';

/** The longest delay a Node timer takes (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The error of a synchronous call that ran past SYNC_CALL_TIMEOUT_MS, naming the limit and what to do. */
export function syncCallTimedOut(tool: string, timeoutMs: number, canBeTask: boolean): ProtocolError {
  const instead = canBeTask
    ? 'call it as a task (declare the io.modelcontextprotocol/tasks extension)'
    : 'the server operator can raise the limit';
  return new ProtocolError(
    ProtocolErrorCode.InternalError,
    `Tool ${tool} ran past SYNC_CALL_TIMEOUT_MS (${timeoutMs} ms) as a synchronous call: ${instead}`,
    { limit: 'SYNC_CALL_TIMEOUT_MS', timeoutMs },
  );
}

/**
 * Runs `run` with a signal that also fires after `timeoutMs`. Past it the call is answered at once with
 * `onTimeout()`'s error; the handler is told through its abort signal and may still be finishing (a handler
 * on the event loop that never yields holds it until it ends: see SYNC_CALL_THREADS).
 */
export async function withTimeBudget<T>(
  timeoutMs: number,
  parent: AbortSignal,
  onTimeout: () => Error,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  if (!Number.isFinite(timeoutMs)) return run(parent);
  const budget = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => {
        const err = onTimeout();
        budget.abort(err);
        reject(err);
      },
      Math.min(timeoutMs, MAX_TIMER_MS),
    );
  });
  const running = run(AbortSignal.any([parent, budget.signal]));
  // What the handler does after the answer went out is no one's to hear.
  running.catch(() => {});
  try {
    return await Promise.race([running, expired]);
  } finally {
    clearTimeout(timer);
  }
}
