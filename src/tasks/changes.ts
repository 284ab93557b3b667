import type { Kysely } from 'kysely';
import type { Metrics } from '../core/metrics.ts';
import { ReadScheduler } from '../core/read-scheduler.ts';
import type { Database } from '../db/database.ts';
import { CHANNELS, type ChangeFeed } from '../events/change-feed.ts';
import { coerceError, type Logger } from '../log.ts';
import { readChangedTasks, type ChangedTask } from './store/changed.ts';
import type { TaskView } from './store/view.ts';

/** Called with a watched task as it is after a change (never another principal's task). */
export type TaskWatcher = (view: TaskView) => void;

interface Watch {
  principal: string;
  watcher: TaskWatcher;
}

/**
 * The task changes this process's streams wait for, read once per process: a NOTIFY names a task, the
 * changes heard while a read is under way (or in the same tick) are read together in one query, and
 * each row goes to the watchers of that task or of the session that created it, when they are of the
 * row's principal. So an idle stream costs its socket, not a read per change anywhere in the cluster
 * (the way Supabase Realtime's Broadcast replaced a per-subscriber read of each change).
 *
 * NOTIFY is a hint: watchers keep their own backstop for changes this process did not hear.
 */
export class TaskChanges {
  readonly #db: Kysely<Database>;
  readonly #log: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #byTask = new Map<string, Set<Watch>>();
  readonly #byOrigin = new Map<string, Set<Watch>>();
  readonly #off: () => void;
  readonly #reader = new ReadScheduler(() => this.#read());
  #changed = new Set<string>();
  #reads = 0;

  constructor(
    db: Kysely<Database>,
    feed: ChangeFeed | undefined,
    { log, metrics }: { log: Logger; metrics?: Metrics | undefined },
  ) {
    this.#db = db;
    this.#log = log;
    this.#metrics = metrics;
    this.#off = feed?.on(CHANNELS.task, (taskId) => this.#heard(taskId)) ?? (() => {});
  }

  /** Calls `watcher` after each change of the task, if it is `principal`'s. Returns the unwatch. */
  watchTask(taskId: string, principal: string, watcher: TaskWatcher): () => void {
    return this.#add(this.#byTask, taskId, { principal, watcher });
  }

  /** Calls `watcher` after each change of a task of `principal` created in `origin` (a 2025 session). */
  watchOrigin(origin: string, principal: string, watcher: TaskWatcher): () => void {
    return this.#add(this.#byOrigin, origin, { principal, watcher });
  }

  /** The reads made so far: one per batch of changes, however many watchers it served. */
  get reads(): number {
    return this.#reads;
  }

  stop(): void {
    this.#reader.stop();
    this.#off();
  }

  #add(index: Map<string, Set<Watch>>, key: string, watch: Watch): () => void {
    let watches = index.get(key);
    if (watches === undefined) index.set(key, (watches = new Set()));
    watches.add(watch);
    return () => {
      watches.delete(watch);
      if (watches.size === 0 && index.get(key) === watches) index.delete(key);
    };
  }

  #heard(taskId: string): void {
    // Whose the task is shows only in its row: without a watched session, only watched ids are read.
    if (this.#byOrigin.size === 0 && !this.#byTask.has(taskId)) return;
    this.#changed.add(taskId);
    this.#reader.request();
  }

  /** The shared read (see ReadScheduler): the changes heard since the last one, in one query. */
  async #read(): Promise<void> {
    const changed = [...this.#changed];
    this.#changed = new Set();
    try {
      const watched = {
        taskIds: changed.filter((id) => this.#byTask.has(id)),
        origins: [...this.#byOrigin.keys()],
      };
      const rows = await readChangedTasks(this.#db, changed, watched);
      this.#reads++;
      this.#metrics?.taskChangeReads.inc();
      for (const row of rows) this.#dispatch(row);
    } catch (err) {
      this.#log.warn('reading changed tasks failed', {
        tasks: changed.length,
        error: coerceError(err).message,
      });
      for (const id of changed) this.#changed.add(id);
      throw err;
    }
  }

  #dispatch({ principal, view }: ChangedTask): void {
    const byOrigin = view.origin === null ? undefined : this.#byOrigin.get(view.origin);
    for (const watches of [this.#byTask.get(view.taskId), byOrigin]) {
      for (const { principal: owner, watcher } of [...(watches ?? [])]) {
        if (owner !== principal) continue;
        try {
          watcher(view);
        } catch (err) {
          this.#log.warn('task watcher failed', { taskId: view.taskId, error: coerceError(err).message });
        }
      }
    }
  }
}
