import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import { ReadScheduler } from '../core/read-scheduler.ts';
import type { Database } from '../db/database.ts';
import { CHANNELS, type ChangeFeed } from '../events/change-feed.ts';
import { coerceError, type Logger } from '../log.ts';
import { eventRangesOf, readEventsOfTasks, type EventRange, type TaskEvent } from './store/events.ts';

/** A followed task's row as the backstop read it: its status and its last event's number. */
export type FollowedRow = Omit<EventRange, 'earliest'>;

/** What a follower of a task is told. */
export interface EventsWatcher {
  /** The task's newly read events, in order (they may start past the follower's cursor). */
  events: (events: readonly TaskEvent[]) => void;
  /** The task's row, read by the backstop (undefined: the task is gone). */
  row: (row: FollowedRow | undefined) => void;
}

/** Followers handed a read's events in one turn of the event loop (see #tell). */
const FOLLOWERS_PER_TURN = 32;
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
  readonly #backstop: NodeJS.Timeout;
  readonly #reader = new ReadScheduler(() => this.#read());
  #changed = new Set<string>();
  /** Set by the backstop: the next read takes every followed task, and their rows too. */
  #sweep = false;
  #reads = 0;

  /**
   * `pollMs`: the backstop. This often (and after the LISTEN connection came back) one read takes every
   * followed task's new events and its row, in case a notification was lost.
   */
  constructor(
    db: Kysely<Database>,
    feed: ChangeFeed | undefined,
    { log, metrics, pollMs }: { log: Logger; metrics?: Metrics | undefined; pollMs: number },
  ) {
    this.#db = db;
    this.#log = log;
    this.#metrics = metrics;
    const offEvents = feed?.on(CHANNELS.taskEvents, (taskId) => this.#heard(taskId)) ?? (() => {});
    const offResync = feed?.onResync(() => this.#sweepAll()) ?? (() => {});
    this.#off = () => {
      offEvents();
      offResync();
    };
    this.#backstop = setInterval(() => this.#sweepAll(), pollMs).unref();
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
    this.#reader.stop();
    clearInterval(this.#backstop);
    this.#off();
  }

  #sweepAll(): void {
    if (this.#followed.size === 0) return;
    this.#sweep = true;
    this.#reader.request();
  }

  #heard(taskId: string): void {
    if (!this.#followed.has(taskId)) return;
    this.#changed.add(taskId);
    this.#reader.request();
  }

  /** The shared read (see ReadScheduler): the tasks heard since the last one, or all at the backstop's. */
  async #read(): Promise<void> {
    const sweep = this.#sweep;
    const ids = sweep ? [...this.#followed.keys()] : [...this.#changed];
    const after = new Map<string, number>();
    for (const taskId of ids) {
      const followed = this.#followed.get(taskId);
      if (followed !== undefined) after.set(taskId, followed.seq);
    }
    this.#changed = new Set();
    this.#sweep = false;
    try {
      const [found, rows] = await Promise.all([
        readEventsOfTasks(this.#db, after, READ_LIMIT),
        sweep ? eventRangesOf(this.#db, [...after.keys()]) : undefined,
      ]);
      this.#reads++;
      this.#metrics?.taskEventReads.inc();
      for (const taskId of after.keys()) {
        const events = found.get(taskId) ?? [];
        if (rows === undefined) this.#dispatch(taskId, events);
        else this.#dispatch(taskId, events, { row: rows.get(taskId) });
      }
    } catch (err) {
      this.#log.warn('reading task events failed', { tasks: after.size, error: coerceError(err).message });
      for (const id of after.keys()) this.#changed.add(id);
      this.#sweep ||= sweep;
      throw err;
    }
  }

  /** Hands a task's new events (and the backstop's read of its row, then) to its followers. */
  #dispatch(taskId: string, events: TaskEvent[], backstop?: { row: FollowedRow | undefined }): void {
    const followed = this.#followed.get(taskId);
    if (followed === undefined || (events.length === 0 && backstop === undefined)) return;
    if (events.length > 0) followed.seq = Math.max(followed.seq, events.at(-1)!.seq);
    // (A full read may have left more behind.)
    if (events.length === READ_LIMIT) this.#heard(taskId);
    this.#tell(taskId, [...followed.watchers], (watcher) => {
      if (events.length > 0) watcher.events(events);
      if (backstop !== undefined) watcher.row(backstop.row);
    });
  }

  /**
   * Calls each watcher, FOLLOWERS_PER_TURN at a time, with a turn of the event loop between: a task
   * followed by a thousand streams sends its event to them in slices, and requests on the instance are
   * answered between the slices instead of after them all.
   */
  #tell(taskId: string, watchers: EventsWatcher[], call: (watcher: EventsWatcher) => void): void {
    for (const watcher of watchers.splice(0, FOLLOWERS_PER_TURN)) {
      try {
        call(watcher);
      } catch (err) {
        this.#log.warn('task events watcher failed', { taskId, error: coerceError(err).message });
      }
    }
    if (watchers.length > 0) setImmediate(() => this.#tell(taskId, watchers, call));
  }
}
