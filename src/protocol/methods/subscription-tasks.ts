import { coerceError, type Logger } from '../../log.ts';
import type { TaskChanges } from '../../tasks/changes.ts';
import type { TaskService } from '../../tasks/service.ts';
import { isTerminal } from '../../tasks/status.ts';
import { toDetailedTask, type TaskView } from '../../tasks/store/view.ts';

export interface SubscriptionTaskDeps {
  tasks: TaskService;
  taskChanges: TaskChanges;
  principal: string;
  log: Logger;
  /** Runs `step` on the stream's one ordered queue (after what is queued already). */
  enqueue: (step: () => Promise<void>) => Promise<void>;
  /** Sends one `notifications/tasks` (its DetailedTask). */
  notify: (detailed: Record<string, unknown>) => Promise<void>;
}

/**
 * The tasks one `subscriptions/listen` stream follows: each change arrives as the process's one read
 * of it found it (TaskChanges: no read of this stream's own), a state equal to or older than the one
 * sent is dropped, and a task is let go once its terminal state is out. `refreshAll` re-reads them all
 * in one query: at the start, after a reconnect of the feed, and as the periodic backstop.
 */
export class SubscriptionTasks {
  readonly #deps: SubscriptionTaskDeps;
  /** Each followed task with its unwatch. */
  readonly #watched = new Map<string, () => void>();
  readonly #lastSent = new Map<string, { fingerprint: string; at: number }>();
  /** Only the latest state of a task waits for its turn: a slow client does not pile states up. */
  readonly #latest = new Map<string, TaskView>();
  #sweeping = false;

  constructor(taskIds: readonly string[], deps: SubscriptionTaskDeps) {
    this.#deps = deps;
    for (const taskId of taskIds) {
      this.#watched.set(
        taskId,
        deps.taskChanges.watchTask(taskId, deps.principal, (view) => this.#changed(view)),
      );
    }
  }

  get size(): number {
    return this.#watched.size;
  }

  refreshAll(): void {
    if (this.#sweeping || this.#watched.size === 0) return;
    this.#sweeping = true;
    void this.#deps
      .enqueue(async () => {
        const views = await this.#deps.tasks.getMany([...this.#watched.keys()], this.#deps.principal);
        for (const view of views) await this.#publish(view);
      })
      .catch((err: unknown) =>
        this.#deps.log.debug('task notifications skipped', { error: coerceError(err).message }),
      )
      .finally(() => (this.#sweeping = false));
  }

  /** Stops following every task (the stream ended). */
  close(): void {
    for (const taskId of [...this.#watched.keys()]) this.#unwatch(taskId);
  }

  #changed(view: TaskView): void {
    const queued = this.#latest.has(view.taskId);
    this.#latest.set(view.taskId, view);
    if (queued) return;
    void this.#deps
      .enqueue(async () => {
        const current = this.#latest.get(view.taskId);
        this.#latest.delete(view.taskId);
        if (current !== undefined && this.#watched.has(view.taskId)) await this.#publish(current);
      })
      .catch((err: unknown) =>
        this.#deps.log.debug('task notification skipped', {
          taskId: view.taskId,
          error: coerceError(err).message,
        }),
      );
  }

  async #publish(view: TaskView): Promise<void> {
    const detailed = toDetailedTask(view);
    const fingerprint = JSON.stringify(detailed);
    const at = view.lastUpdatedAt.getTime();
    const last = this.#lastSent.get(view.taskId);
    // A state read before the one already sent (a re-read overtook a change's read) is not news.
    if (last !== undefined && (last.fingerprint === fingerprint || at < last.at)) return;
    this.#lastSent.set(view.taskId, { fingerprint, at });
    // A finished task never changes again: stop watching it once its last state is out.
    if (isTerminal(view.status)) this.#unwatch(view.taskId);
    await this.#deps.notify(detailed);
  }

  #unwatch(taskId: string): void {
    this.#watched.get(taskId)?.();
    this.#watched.delete(taskId);
  }
}
