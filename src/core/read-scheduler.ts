/**
 * Runs a process's shared read of what was heard, one at a time, after the current tick: what is heard
 * while a read is under way (or in the same tick) goes in the next one, so a burst of notifications
 * costs one read. A read that throws is run again `retryMs` later (the database may be restarting).
 * For TaskChanges and TaskEventFeed: the read takes what its owner collected since the last one.
 */
export class ReadScheduler {
  readonly #read: () => Promise<void>;
  readonly #retryMs: number;
  #scheduled = false;
  #reading = false;
  #again = false;
  #stopped = false;

  constructor(read: () => Promise<void>, { retryMs = 1_000 }: { retryMs?: number } = {}) {
    this.#read = read;
    this.#retryMs = retryMs;
  }

  /** Something new was heard: a read will take it. */
  request(): void {
    if (this.#stopped) return;
    if (this.#reading) {
      this.#again = true;
      return;
    }
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#run();
    });
  }

  stop(): void {
    this.#stopped = true;
  }

  async #run(): Promise<void> {
    this.#reading = true;
    this.#again = false;
    let failed = false;
    try {
      await this.#read();
    } catch {
      failed = true;
    } finally {
      this.#reading = false;
    }
    if (failed) setTimeout(() => this.request(), this.#retryMs).unref();
    else if (this.#again) this.request();
  }
}
