/** The most messages one append logs (one statement, one commit). */
const MAX_APPEND_BATCH = 500;

interface Message {
  message: object;
  group: object | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}
type Item = Message | { run: () => Promise<void> };

/** How a stream logs messages and writes them: `append` returns their ids, in order. */
export interface StreamSink {
  append(messages: readonly object[]): Promise<string[]>;
  write(eventId: string, message: object): void;
}

/**
 * What a session stream sends, one thing at a time in the order it was asked for, so that its events
 * reach the wire in the order of their ids (a client that resumes from an id has every event before
 * it). Messages queued while an append is under way are logged together by the next one: a burst of
 * task events costs one statement per batch, not one per event.
 *
 * A message of a `group` (one task's events) that could not be logged fails the messages of that group
 * queued after it, without logging them: the group's stream never skips one of its events and goes on.
 */
export class StreamOrder {
  readonly #sink: StreamSink;
  readonly #queue: Item[] = [];
  readonly #failedGroups = new WeakMap<object, unknown>();
  #flushing = false;

  constructor(sink: StreamSink) {
    this.#sink = sink;
  }

  /** What is queued and not yet written (a sender that runs ahead waits when it is much). */
  get pending(): number {
    return this.#queue.length;
  }

  /** Logs, then writes, `message` after everything queued before it; rejects when it was not logged. */
  send(message: object, group?: object): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ message, group, resolve, reject });
      this.#flush();
    });
  }

  /** Runs `fn` once everything queued before it is done (a replay before live events). */
  run<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ run: () => fn().then(resolve, reject) });
      this.#flush();
    });
  }

  #flush(): void {
    if (this.#flushing) return;
    this.#flushing = true;
    void this.#drain().finally(() => {
      this.#flushing = false;
      // (Queued after the drain's last look and before this.)
      if (this.#queue.length > 0) this.#flush();
    });
  }

  async #drain(): Promise<void> {
    for (let head = this.#queue[0]; head !== undefined; head = this.#queue[0]) {
      if ('run' in head) {
        this.#queue.shift();
        await head.run();
        continue;
      }
      const batch = this.#takeMessages();
      if (batch.length === 0) continue;
      try {
        const ids = await this.#sink.append(batch.map((m) => m.message));
        batch.forEach((m, i) => {
          this.#sink.write(ids[i]!, m.message);
          m.resolve();
        });
      } catch (err) {
        for (const m of batch) {
          if (m.group !== undefined && !this.#failedGroups.has(m.group)) this.#failedGroups.set(m.group, err);
          m.reject(err);
        }
      }
    }
  }

  /** The messages at the head of the queue, up to a batch; those of a failed group fail now. */
  #takeMessages(): Message[] {
    const batch: Message[] = [];
    while (batch.length < MAX_APPEND_BATCH) {
      const head = this.#queue[0];
      if (head === undefined || 'run' in head) break;
      this.#queue.shift();
      if (head.group !== undefined && this.#failedGroups.has(head.group)) {
        head.reject(this.#failedGroups.get(head.group));
      } else {
        batch.push(head);
      }
    }
    return batch;
  }
}
