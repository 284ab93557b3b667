import { ProtocolError, RATE_LIMITED_CODE } from '../core/errors.ts';

/**
 * Optional rate limit of tasks/get: a principal polling one task much faster than its pollIntervalMs
 * (less than half of it since the last poll) gets HTTP 429 with Retry-After. Per instance, in memory,
 * bounded: a best-effort guard against hot loops, not an accounting system.
 */
export class PollLimiter {
  readonly #last = new Map<string, { at: number; intervalMs: number }>();
  readonly #maxEntries: number;

  constructor(maxEntries = 100_000) {
    this.#maxEntries = maxEntries;
  }

  check(principal: string, taskId: string, now = Date.now()): void {
    const entry = this.#last.get(`${principal}\n${taskId}`);
    if (entry === undefined) return;
    const elapsed = now - entry.at;
    if (elapsed < entry.intervalMs / 2) {
      throw new ProtocolError(
        RATE_LIMITED_CODE,
        `Polling faster than the task's pollIntervalMs (${entry.intervalMs} ms)`,
        { retryAfterMs: entry.intervalMs - elapsed },
        429,
      );
    }
  }

  record(principal: string, taskId: string, intervalMs: number, now = Date.now()): void {
    const key = `${principal}\n${taskId}`;
    this.#last.delete(key);
    this.#last.set(key, { at: now, intervalMs });
    // Maps iterate in insertion order: the oldest entries go first.
    while (this.#last.size > this.#maxEntries) this.#last.delete(this.#last.keys().next().value!);
  }
}
