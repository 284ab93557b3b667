import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import type { Database } from '../db/database.ts';
import { CHANNELS, type ChangeFeed } from '../events/change-feed.ts';
import { coerceError, type Logger } from '../log.ts';
import { readEventsOfTasks, type TaskEvent } from './store/events.ts';

/** Called with a followed task's newly read events, in order (they may start past the follower's cursor). */
export type EventsWatcher = (events: readonly TaskEvent[]) => void;

/** After a failed read, its tasks are read again this much later (the database may be restarting). */
const RETRY_MS = 1_000;
/** One shared read takes at most this many events of a task; a task with more is read again at once. */
const READ_LIMIT = 1_000;

interface Followed {
  watchers: Set<EventsWatcher>;
  /** The last event read for this task's watchers (they read what is older themselves). */
  seq: number;
}

/**
 * The events this process's streams follow, read once per process: a NOTIFY names a task whose events
 * were appended, the tasks heard while a read is under way (or in the same tick) are read together in
 * one query, and each task's new events go to every stream following it. So the database reads per
 * event do not grow with the number of readers (the TaskChanges pattern). A watcher reads what is older
 * than the shared position itself (its catch-up), and its own backstop covers lost notifications.
 */
export class TaskEventFeed {
  readonly #db: Kysely<Database>;
  readonly #log: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #followed = new Map<string, Followed>();
  readonly #off: () => void;
  #changed = new Set<string>();
  #reading = false;
  #scheduled = false;
  #stopped = false;
  #reads = 0;

  constructor(
    db: Kysely<Database>,
    feed: ChangeFeed | undefined,
    { log, metrics }: { log: Logger; metrics?: Metrics | undefined },
  ) {
    this.#db = db;
    this.#log = log;
    this.#metrics = metrics;
    this.#off = feed?.on(CHANNELS.taskEvents, (taskId) => this.#heard(taskId)) ?? (() => {});
  }

  /**
   * Calls `watcher` with the task's events appended after `seq` from now on (the caller has checked
   * whose the task is). Returns the unwatch.
   */
  follow(taskId: string, seq: number, watcher: EventsWatcher): () => void {
    let followed = this.#followed.get(taskId);
    if (followed === undefined) this.#followed.set(taskId, (followed = { watchers: new Set(), seq }));
    followed.watchers.add(watcher);
    const entry = followed;
    return () => {
      entry.watchers.delete(watcher);
      if (entry.watchers.size === 0 && this.#followed.get(taskId) === entry) this.#followed.delete(taskId);
    };
  }

  /** A watcher read up to `seq` itself: the shared read need not read those again. */
  readUpTo(taskId: string, seq: number): void {
    const followed = this.#followed.get(taskId);
    if (followed !== undefined && seq > followed.seq) followed.seq = seq;
  }

  /** The shared reads made so far: one per batch of appends heard, however many streams it served. */
  get reads(): number {
    return this.#reads;
  }

  stop(): void {
    this.#stopped = true;
    this.#off();
  }

  #heard(taskId: string): void {
    if (!this.#followed.has(taskId)) return;
    this.#changed.add(taskId);
    this.#schedule();
  }

  /** One read at a time, after the current tick: what is heard meanwhile goes in the next one. */
  #schedule(): void {
    if (this.#scheduled || this.#reading || this.#stopped) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#read();
    });
  }

  async #read(): Promise<void> {
    const after = new Map<string, number>();
    for (const taskId of this.#changed) {
      const followed = this.#followed.get(taskId);
      if (followed !== undefined) after.set(taskId, followed.seq);
    }
    this.#changed = new Set();
    this.#reading = true;
    try {
      const found = await readEventsOfTasks(this.#db, after, READ_LIMIT);
      this.#reads++;
      this.#metrics?.taskEventReads.inc();
      for (const [taskId, events] of found) this.#dispatch(taskId, events);
    } catch (err) {
      this.#log.warn('reading task events failed', { tasks: after.size, error: coerceError(err).message });
      for (const id of after.keys()) this.#changed.add(id);
      setTimeout(() => this.#schedule(), RETRY_MS).unref();
      return;
    } finally {
      this.#reading = false;
    }
    if (this.#changed.size > 0) this.#schedule();
  }

  #dispatch(taskId: string, events: TaskEvent[]): void {
    const followed = this.#followed.get(taskId);
    if (followed === undefined || events.length === 0) return;
    followed.seq = Math.max(followed.seq, events.at(-1)!.seq);
    // (A full read may have left more behind.)
    if (events.length === READ_LIMIT) this.#heard(taskId);
    for (const watcher of [...followed.watchers]) {
      try {
        watcher(events);
      } catch (err) {
        this.#log.warn('task events watcher failed', { taskId, error: coerceError(err).message });
      }
    }
  }
}
