/**
 * Which synchronous calls' handlers are cheap enough to run on the event loop, from how long their runs
 * took: the hop to a thread and back costs more than a handler such as `echo` does (10 sessions of
 * 2025-11-25 echo: 3,574 req/s through threads, 7,739 on the loop), while a CPU-bound one must never hold
 * the loop. A tool starts on the threads; after `promoteAfter` runs in a row each within `budgetUs` (as
 * the thread timed its handler) its calls run on the loop, where the time the handler holds it is
 * measured (its call up to its first await: what follows an await is not seen); a run there far past
 * the budget sends it back to the threads for good. A handler whose cost depends on its arguments can so
 * hold the loop once, for that one run; SYNC_CALL_LOOP_BUDGET_US=0 keeps every call on the threads.
 */
export class LoopBudget {
  readonly #budgetMs: number;
  readonly #promoteAfter: number;
  /** Runs in a row within the budget, of tools on the threads. */
  readonly #cheapRuns = new Map<string, number>();
  readonly #onLoop = new Set<string>();
  /** Runs in a row past the budget, of tools on the loop. */
  readonly #overRuns = new Map<string, number>();
  readonly #pinned = new Set<string>();

  constructor({ budgetUs, promoteAfter = 50 }: { budgetUs: number; promoteAfter?: number }) {
    this.#budgetMs = budgetUs / 1000;
    this.#promoteAfter = promoteAfter;
  }

  /** Whether the tool's calls run on the event loop now. */
  onLoop(toolName: string): boolean {
    return this.#onLoop.has(toolName);
  }

  /** A run of the tool's handler on a thread took `ms`. */
  ranOnThread(toolName: string, ms: number): void {
    if (this.#pinned.has(toolName) || this.#budgetMs <= 0) return;
    if (ms > this.#budgetMs) {
      this.#cheapRuns.delete(toolName);
      return;
    }
    const cheap = (this.#cheapRuns.get(toolName) ?? 0) + 1;
    this.#cheapRuns.set(toolName, cheap);
    if (cheap >= this.#promoteAfter) {
      this.#cheapRuns.delete(toolName);
      this.#onLoop.add(toolName);
    }
  }

  /**
   * A run on the event loop held it `ms`. Far past the budget (10×), or past it three runs in a row (a
   * garbage collection can stretch one cheap run), the tool goes back to the threads for good. Whether it did.
   */
  ranOnLoop(toolName: string, ms: number): boolean {
    if (ms <= this.#budgetMs) {
      this.#overRuns.delete(toolName);
      return false;
    }
    const over = (this.#overRuns.get(toolName) ?? 0) + 1;
    this.#overRuns.set(toolName, over);
    if (ms <= 10 * this.#budgetMs && over < 3) return false;
    this.#pinToThreads(toolName);
    return true;
  }

  /** The tool's calls run on the threads from now on, whatever their runs take. */
  #pinToThreads(toolName: string): void {
    this.#onLoop.delete(toolName);
    this.#cheapRuns.delete(toolName);
    this.#overRuns.delete(toolName);
    this.#pinned.add(toolName);
  }
}
