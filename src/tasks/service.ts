import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import type { TaskQueue } from '../queue/task-queue.ts';
import { InvalidTaskStateError, TaskNotFoundError } from './errors.ts';
import type { InputResponses } from '../core/wire.ts';
import { newTaskId } from './ids.ts';
import { priorityOfRank } from '../queue/priority.ts';
import {
  ADMITTED_ACTIVE,
  admissionStatement,
  admitCreation,
  type CreationQuotas,
} from './store/admission.ts';
import { isStatementRefused, type Statement } from '../db/statements.ts';
import { PrincipalRanks } from './principal-ranks.ts';
import { isIdempotencyRace, taskOfIdempotencyKey } from './store/idempotency.ts';
import { requestCancel } from './store/cancel.ts';
import { joinDebouncedTask, lockDebounceKey } from './store/debounce.ts';
import { wakeSpawner } from './store/children.ts';
import { insertClaimedTask, insertTask, insertTaskWith, type NewTask } from './store/create.ts';
import type { ClaimedTask } from './store/lease.ts';
import type { SignalDelivery } from '../core/signal-delivery.ts';
import { deliverSignalAndClaim, recordSignalDelivery } from './store/signals.ts';
import { answerInputRequests, type AnswerOutcome } from './store/input.ts';
import { listTasks, type TaskListFilter } from './store/list.ts';
import { requestOwnerPause, whyNotPaused, withdrawPauseRequest } from './store/owner-pause.ts';
import { resumeTasks } from './store/pause.ts';
import { sendSteering, steeringRefusal, type SteeringLimits } from './store/steering.ts';
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
  /**
   * A slot of a worker in this process, if one is free and idle (see LocalStart), for a task whose
   * principal holds `rank` active tasks (a busy principal does not get the slots kept for light ones).
   */
  startHere?: ((rank: number) => LocalStart | undefined) | undefined;
  /** What each principal may create (default: no limits). */
  quotas?: CreationQuotas | undefined;
}

const NO_QUOTAS: CreationQuotas = { maxActiveTasks: 2_147_483_647, ratePerSecond: 0, burst: 1 };

/** What the protocol methods do to tasks; every write that must be durable commits before it returns. */
export class TaskService {
  readonly #db: Kysely<Database>;
  readonly #queue: TaskQueue;
  readonly #onChange: TaskChangeNotifier;
  readonly #startHere: (rank: number) => LocalStart | undefined;
  readonly #quotas: CreationQuotas;
  readonly #ranks = new PrincipalRanks();

  constructor({ db, queue, onChange, startHere, quotas }: TaskServiceDeps) {
    this.#db = db;
    this.#queue = queue;
    this.#onChange = onChange ?? (async () => {});
    this.#startHere = startHere ?? (() => undefined);
    this.#quotas = quotas ?? NO_QUOTAS;
  }

  /**
   * With an idempotency key, the task an earlier create with the same key made, if it is still stored
   * (the same key for another request: IdempotencyConflictError). Otherwise, a new task, admitted
   * against the principal's quotas (QuotaExceededError) and inserted with its first run atomically;
   * returns only after the commit. Claimed by a worker of this process when one is free (the leg starts
   * here); otherwise with its job and wake-up in one statement where the queue can give its part as SQL,
   * in a transaction where not. The admission is part of that one statement when the principal's rank
   * was read lately (PrincipalRanks), a statement of its own before it when not. The run's place in the
   * queue follows the rank (queue/priority.ts).
   */
  async create(task: Omit<NewTask, 'taskId'>): Promise<TaskView> {
    const { idempotency } = task;
    if (idempotency === undefined) return this.#createNew(task);
    // A retry finds the task its first call created (before any quota: it creates nothing).
    const earlier = await taskOfIdempotencyKey(this.#db, task.principal, idempotency);
    if (earlier !== undefined) return earlier;
    try {
      return await this.#createNew(task);
    } catch (err) {
      // The same key's create committed meanwhile (a retry racing its first call): that one is the task.
      const raced = isIdempotencyRace(err)
        ? await taskOfIdempotencyKey(this.#db, task.principal, idempotency)
        : undefined;
      if (raced === undefined) throw err;
      return raced;
    }
  }

  async #createNew(task: Omit<NewTask, 'taskId'>): Promise<TaskView> {
    if (task.debounce !== undefined) return this.#createDebounced({ ...task, debounce: task.debounce });
    const withId = { ...task, taskId: newTaskId() };
    // With the principal's rank read lately, the admission is a part of the create's one statement.
    const known = this.#ranks.recent(task.principal);
    if (known !== undefined) {
      try {
        const view = await this.#insertWithRun(
          withId,
          known,
          admissionStatement(this.#db, task.principal, this.#quotas),
        );
        if (view !== undefined) return view;
      } catch (err) {
        // Refused, and nothing written: admitCreation says why (or admits it, the counts having moved).
        if (!isStatementRefused(err)) throw err;
      }
    }
    const { rank } = await admitCreation(this.#db, task.principal, this.#quotas);
    this.#ranks.read(task.principal, rank);
    const view = await this.#insertWithRun(withId, rank);
    if (view !== undefined) return view;
    return this.#db.transaction().execute(async (trx) => {
      const inserted = await insertTask(trx, withId);
      await this.#queue.enqueueRun(trx, inserted.taskId, { priority: priorityOfRank(rank) });
      return inserted;
    });
  }

  /**
   * Inserts the task, its first run and `admission` (when given) in one statement: claimed by a worker of
   * this process when one has a free slot (the leg starts here once it commits), else with its job and
   * wake-up where the queue can give its part as SQL; undefined where it cannot (nothing written).
   */
  async #insertWithRun(task: NewTask, rank: number, admission?: Statement): Promise<TaskView | undefined> {
    const also = admission === undefined ? [] : [admission];
    // A task with a concurrency key or a rate limit is claimed only where its key's legs or starts are
    // counted: through the queue.
    const counted = task.concurrency !== undefined || task.rateLimit !== undefined;
    const slot = counted ? undefined : this.#startHere(rank);
    if (slot !== undefined) {
      const { view, claimed, kept } = await insertClaimedTask(this.#db, task, slot, also).catch(
        (err: unknown) => {
          slot.release();
          throw err;
        },
      );
      this.#keepRank(task.principal, kept);
      slot.run(claimed);
      return view;
    }
    const firstRun = await this.#queue.firstRun?.(task.taskId, priorityOfRank(rank));
    if (firstRun === undefined) return undefined;
    const { view, kept } = await insertTaskWith(this.#db, task, [...also, ...firstRun]);
    this.#keepRank(task.principal, kept);
    return view;
  }

  /** The principal's active count the create's admission read, for its next create's rank. */
  #keepRank(principal: string, kept: Record<string, unknown>): void {
    const active = kept[ADMITTED_ACTIVE];
    if (typeof active === 'number') this.#ranks.read(principal, active);
  }

  /**
   * A debounced call: joins the principal's task with the same debounce key that has not started yet
   * (its arguments replaced, its start pushed `debounce.ms` on), or creates one that starts `debounce.ms`
   * from now. Under the key's lock, so that the calls of a burst, on any instance, find one task. A new
   * task is admitted against the quotas; a joined one creates nothing. Each call queues a run at its
   * task's new start; the runs queued before it find the task not due yet and end.
   */
  async #createDebounced(
    task: Omit<NewTask, 'taskId'> & { debounce: { key: string; ms: number } },
  ): Promise<TaskView> {
    const delayMs = task.debounce.ms;
    return this.#db.transaction().execute(async (trx) => {
      await lockDebounceKey(trx, task.principal, task.debounce.key);
      const joined = await joinDebouncedTask(trx, task);
      if (joined !== undefined) {
        await this.#queue.enqueueRun(trx, joined.taskId, { delayMs });
        await this.#onChange(trx, joined.taskId);
        return joined;
      }
      const { rank } = await admitCreation(trx, task.principal, this.#quotas);
      const view = await insertTask(trx, { ...task, taskId: newTaskId() });
      await this.#queue.enqueueRun(trx, view.taskId, { delayMs, priority: priorityOfRank(rank) });
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

  /**
   * Delivers a task's signal by its token (the token is the credential). The task runs again at once:
   * in this process when one of its workers has a free slot (claimed in the delivery's transaction, the
   * leg started once it commits, as `create` does), else through the queue. A task still running before
   * its wait is not claimed: it finds the signal at its wait, or as it parks; and a run is queued all the
   * same, for a delivery that committed while that attempt was parking, after it looked (the run's claim
   * then waits for the parking to commit, and finds the task released).
   */
  async deliverSignal(token: string, payload: unknown): Promise<SignalDelivery> {
    // The principal is not known before the delivery: only a slot any principal may take.
    const slot = this.#startHere(Number.MAX_SAFE_INTEGER);
    if (slot === undefined) {
      return this.#db.transaction().execute(async (trx) => {
        const { outcome, taskId } = await recordSignalDelivery(trx, token, payload);
        if (taskId === undefined) return outcome;
        await this.#queue.enqueueRun(trx, taskId);
        await this.#onChange(trx, taskId);
        return outcome;
      });
    }
    try {
      // One statement: the delivery and the claim; a task it did not claim gets a queued run (see above).
      const { outcome, taskId, claimed, keyed } = await deliverSignalAndClaim(this.#db, token, payload, slot);
      if (taskId !== undefined && (keyed === true || claimed === undefined)) {
        await this.#db.transaction().execute((trx) => this.#queue.enqueueRun(trx, taskId));
      }
      if (taskId !== undefined) await this.#onChange(this.#db, taskId);
      if (claimed !== undefined) slot.run(claimed);
      else slot.release();
      return outcome;
    } catch (err) {
      slot.release();
      throw err;
    }
  }

  /** One page of the principal's tasks, newest first, narrowed by `filter` (2025-11-25 `tasks/list`). */
  list(principal: string, filter: TaskListFilter = {}): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
    return listTasks(this.#db, principal, filter);
  }

  async cancel(taskId: string, principal: string): Promise<void> {
    const { cancelledNow, spawnedBy } = await this.#db.transaction().execute(async (trx) => {
      const outcome = await requestCancel(trx, taskId, principal);
      await this.#onChange(trx, taskId);
      return outcome;
    });
    // A child cancelled at once ended here, not on a worker: its parent's join must hear of it (a crash
    // before this leaves it to the parent's backstop look).
    if (cancelledNow && spawnedBy !== undefined) {
      await this.#db.transaction().execute((trx) => wakeSpawner(trx, this.#queue, spawnedBy));
    }
  }

  /**
   * Stores a steering message for the principal's task (`tasks/steer`); a task waiting for one runs
   * again (its run queued in the same transaction). Nothing stored: TaskNotFoundError as `get` gives
   * it, or InvalidTaskStateError saying why (the tool does not read steering, the task ended, it got
   * `maxMessages` already).
   */
  async steer(taskId: string, principal: string, message: string, limits: SteeringLimits): Promise<void> {
    const sent = await this.#db.transaction().execute(async (trx) => {
      const stored = await sendSteering(trx, { taskId, principal, message, ...limits });
      if (stored?.wake === true) await this.#queue.enqueueRun(trx, taskId);
      return stored;
    });
    if (sent !== undefined) return;
    await this.get(taskId, principal);
    throw new InvalidTaskStateError((await steeringRefusal(this.#db, taskId, limits)).message);
  }

  /**
   * The owner's pause (`tasks/pause`): an idle task pauses now, a running one at its attempt's next
   * checkpoint; the task as it is then. Waiting for input, or already asked to pause: the task as it is.
   * Otherwise TaskNotFoundError as `get` gives it, or InvalidTaskStateError saying why.
   */
  async pause(taskId: string, principal: string): Promise<TaskView> {
    const changed = await this.#db.transaction().execute(async (trx) => {
      const outcome = await requestOwnerPause(trx, taskId, principal, `client:${principal}`);
      if (outcome !== undefined) await this.#onChange(trx, taskId);
      return outcome;
    });
    const view = await this.get(taskId, principal);
    const refused = changed === undefined ? await whyNotPaused(this.#db, taskId) : undefined;
    if (refused !== undefined) throw new InvalidTaskStateError(refused);
    return view;
  }

  /**
   * The owner's resume (`tasks/resume`): a paused task runs again, as the operator's resume runs it
   * (resumeTasks); a pause asked for and not yet taken is withdrawn. The task as it is then; otherwise
   * TaskNotFoundError as `get` gives it, or InvalidTaskStateError (not paused).
   */
  async resume(taskId: string, principal: string): Promise<TaskView> {
    const actor = `client:${principal}`;
    const resumed = await resumeTasks(this.#db, this.#queue, { taskIds: [taskId], principal }, actor);
    const changed = resumed.length > 0 || (await withdrawPauseRequest(this.#db, taskId, principal, actor));
    if (changed) await this.#onChange(this.#db, taskId);
    const view = await this.get(taskId, principal);
    if (!changed) throw new InvalidTaskStateError('the task is not paused');
    return view;
  }
}
