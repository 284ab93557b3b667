import { coerceError, type Logger } from '../log.ts';

/**
 * What a starting process must undo, newest first: each part it starts pushes its own stop, so a start
 * that fails half way stops exactly what had started, and a shutdown stops everything in reverse.
 */
export class CleanupStack {
  readonly #steps: Array<() => Promise<void>> = [];
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
  }

  push(step: () => Promise<void>): void {
    this.#steps.push(step);
  }

  /** Runs every step, newest first; a step that fails is logged and the rest still run. */
  async run(): Promise<void> {
    while (this.#steps.length > 0) {
      const step = this.#steps.pop()!;
      await step().catch((err: unknown) =>
        this.#log.warn('shutdown step failed', { error: coerceError(err).message }),
      );
    }
  }
}
