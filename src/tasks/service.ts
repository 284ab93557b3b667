import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import { TaskNotFoundError } from './errors.ts';
import type { InputResponses } from '../core/wire.ts';
import { newTaskId } from './ids.ts';
import { cancelNow, requestCancel } from './store/cancel.ts';
import { insertTask, type NewTask } from './store/create.ts';
import { answerInputRequests, type AnswerOutcome } from './store/input.ts';
import { listTasks } from './store/list.ts';
import { getTaskView, getTaskViews, ownedTaskIds } from './store/read.ts';
import type { TaskView } from './store/view.ts';

/** Tells other processes that a task changed (a wake-up hint; polling stays the backstop). */
export type TaskChangeNotifier = (executor: Kysely<Database>, taskId: string) => Promise<void>;

export type { TaskQueue };

export interface TaskServiceDeps {
  db: Kysely<Database>;
  queue: TaskQueue;
  onChange?: TaskChangeNotifier;
}

/** What the protocol methods do to tasks; every write that must be durable commits before it returns. */
export class TaskService {
  readonly #db: Kysely<Database>;
  readonly #queue: TaskQueue;
  readonly #onChange: TaskChangeNotifier;

  constructor({ db, queue, onChange }: TaskServiceDeps) {
    this.#db = db;
    this.#queue = queue;
    this.#onChange = onChange ?? (async () => {});
  }

  /** Inserts the task and its first job in one transaction; returns only after the commit. */
  async create(task: Omit<NewTask, 'taskId'>): Promise<TaskView> {
    return this.#db.transaction().execute(async (trx) => {
      const view = await insertTask(trx, { ...task, taskId: newTaskId() });
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

  /** One page of the principal's tasks, newest first (2025-11-25 `tasks/list`). */
  list(principal: string, cursor?: string): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
    return listTasks(this.#db, principal, { cursor });
  }

  /** Cancels at once (2025-11-25); undefined when the task had already ended. */
  async cancelNow(taskId: string, principal: string): Promise<TaskView | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const view = await cancelNow(trx, taskId, principal);
      if (view !== undefined) await this.#onChange(trx, taskId);
      return view;
    });
  }

  async cancel(taskId: string, principal: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      await requestCancel(trx, taskId, principal);
      await this.#onChange(trx, taskId);
    });
  }
}
