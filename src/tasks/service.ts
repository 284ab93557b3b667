import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import { TaskNotFoundError } from './errors.ts';
import type { InputResponses } from '../core/wire.ts';
import { newTaskId } from './ids.ts';
import { requestCancel } from './store/cancel.ts';
import { insertClaimedTask, insertTask, insertTaskWith, type NewTask } from './store/create.ts';
import type { ClaimedTask } from './store/lease.ts';
import { answerInputRequests, type AnswerOutcome } from './store/input.ts';
import { listTasks, type TaskListFilter } from './store/list.ts';
import { getTaskView, getTaskViews, ownedTaskIds } from './store/read.ts';
import type { TaskView } from './store/view.ts';

/** Tells other processes that a task changed (a wake-up hint; polling stays the backstop). */
export type TaskChangeNotifier = (executor: Kysely<Database>, taskId: string) => Promise<void>;

export type { TaskQueue };

/**
 * A free slot of this process's worker pool, held while a task is created in it: the task is inserted
 * claimed by that worker and its first leg starts here once the insert commits, with no queue in between
 * (the way Temporal's eager workflow start hands a co-located worker its first task).
 */
export interface LocalStart {
  readonly workerId: string;
  readonly leaseMs: number;
  /** Starts the leg of the committed, claimed task (after the caller's current turn). */
  run(task: ClaimedTask): void;
  /** The create failed: the slot is free again. */
  release(): void;
}

export interface TaskServiceDeps {
  db: Kysely<Database>;
  queue: TaskQueue;
  onChange?: TaskChangeNotifier;
  /** A slot of a worker in this process, if one is free and idle (see LocalStart). */
  startHere?: (() => LocalStart | undefined) | undefined;
}

/** What the protocol methods do to tasks; every write that must be durable commits before it returns. */
export class TaskService {
  readonly #db: Kysely<Database>;
  readonly #queue: TaskQueue;
  readonly #onChange: TaskChangeNotifier;
  readonly #startHere: () => LocalStart | undefined;

  constructor({ db, queue, onChange, startHere }: TaskServiceDeps) {
    this.#db = db;
    this.#queue = queue;
    this.#onChange = onChange ?? (async () => {});
    this.#startHere = startHere ?? (() => undefined);
  }

  /**
   * Inserts the task and its first run atomically; returns only after the commit. Claimed by a worker of
   * this process when one is free (one statement, and the leg starts here); otherwise with its job and
   * wake-up in one statement where the queue can give its part as SQL, in a transaction where not.
   */
  async create(task: Omit<NewTask, 'taskId'>): Promise<TaskView> {
    const taskId = newTaskId();
    const slot = this.#startHere();
    if (slot !== undefined) {
      const { view, claimed } = await insertClaimedTask(
        this.#db,
        { ...task, taskId },
        slot.workerId,
        slot.leaseMs,
      ).catch((err: unknown) => {
        slot.release();
        throw err;
      });
      slot.run(claimed);
      return view;
    }
    const firstRun = await this.#queue.firstRun?.(taskId);
    if (firstRun !== undefined) return insertTaskWith(this.#db, { ...task, taskId }, firstRun);
    return this.#db.transaction().execute(async (trx) => {
      const view = await insertTask(trx, { ...task, taskId });
      await this.#queue.enqueueRun(trx, view.taskId);
      return view;
    });
  }

  async get(taskId: string, principal: string): Promise<TaskView> {
    const view = await getTaskView(this.#db, taskId, principal);
    if (view === undefined) throw new TaskNotFoundError(taskId);
    return view;
  }

  getMany(taskIds: readonly string[], principal: string): Promise<TaskView[]> {
    return getTaskViews(this.#db, taskIds, principal);
  }

  /** The ids among `ids` that name tasks of `principal`. */
  owned(ids: readonly string[], principal: string): Promise<string[]> {
    return ownedTaskIds(this.#db, ids, principal);
  }

  /** Stores answers; when the last outstanding one arrives, the task resumes (same transaction). */
  async answer(taskId: string, principal: string, responses: InputResponses): Promise<AnswerOutcome> {
    return this.#db.transaction().execute(async (trx) => {
      const outcome = await answerInputRequests(trx, taskId, principal, responses);
      if (outcome.resumed) await this.#queue.enqueueRun(trx, taskId);
      if (outcome.answered > 0) await this.#onChange(trx, taskId);
      return outcome;
    });
  }

  /** One page of the principal's tasks, newest first, narrowed by `filter` (2025-11-25 `tasks/list`). */
  list(principal: string, filter: TaskListFilter = {}): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
    return listTasks(this.#db, principal, filter);
  }

  async cancel(taskId: string, principal: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      await requestCancel(trx, taskId, principal);
      await this.#onChange(trx, taskId);
    });
  }
}
