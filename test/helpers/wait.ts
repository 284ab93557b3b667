import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** How long the condition may take to hold. */
  timeoutMs?: number;
  /** Named in the timeout error: what did not happen (a function: read when the wait fails). */
  what?: string | (() => string);
  /** The pause between two probes. */
  intervalMs?: number;
}

/**
 * Polls `probe` until it returns something other than `undefined`, `null` or `false` (that value is
 * returned), and fails after `timeoutMs`: the way tests and system tests wait for a condition instead of
 * sleeping. A probe that throws fails the wait at once.
 */
export async function waitFor<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  { timeoutMs = 10_000, what = 'the condition', intervalMs = 20 }: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline)
      throw new Error(`${typeof what === 'string' ? what : what()} did not hold within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}
