import { setTimeout as sleep } from 'node:timers/promises';
import { isJsonObject, type JsonObject } from '../core/wire.ts';
import { taskEvents, TERMINAL_STATUSES as TERMINAL, type EventsOptions, type TaskEvent } from './events.ts';
import { McpConnectionError, McpHttp, McpRpcError, type HttpOptions } from './http.ts';
import { MemoryTaskStore, type TaskIdStore, type TaskRecord } from './store.ts';

/** A task as the server last described it (a `DetailedTask`). */
export interface TaskSnapshot {
  taskId: string;
  status: string;
  statusMessage?: string;
  pollIntervalMs?: number;
  ttlMs?: number | null;
  /** Outstanding input requests, by key (status `input_required`). */
  inputRequests?: Record<string, InputRequest>;
  result?: JsonObject;
  error?: JsonObject;
}

export interface InputRequest {
  method: string;
  params?: JsonObject;
}

/** Answers input requests (elicitation, sampling, roots): a response per key it answers. */
export type InputHandler = (
  requests: Record<string, InputRequest>,
  task: TaskSnapshot | undefined,
) => Promise<Record<string, JsonObject>>;

export interface WatchOptions {
  /** Each status the client sees (progress messages included). */
  onStatus?: (task: TaskSnapshot) => void;
  /** Asked each outstanding input request once; without it, the client waits for someone else to answer. */
  onInput?: InputHandler;
  /** Stops watching (the call rejects with the signal's reason); the task runs on, and `resume` finds it. */
  signal?: AbortSignal;
  /** How long an unreachable server is retried before the call gives up (the task is safe meanwhile). */
  reconnectMs?: number;
  /** Listen for `notifications/tasks` (`subscriptions/listen`) when the server offers it. Default true. */
  listen?: boolean;
}

export interface CallToolOptions extends WatchOptions {
  /** Told once a task exists and its record is saved, before anything waits on it. */
  onTask?: (record: TaskRecord) => void;
}

/** How a call ended: its result, or its error; `taskId` when the server ran it as a task. */
export interface ToolOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  taskId?: string;
  result?: JsonObject;
  error?: JsonObject;
}

export interface TasksClientOptions extends HttpOptions {
  /** Where task ids are kept; in memory by default (use a FileTaskStore to survive a restart). */
  store?: TaskIdStore;
}

/** Records of tasks whose server states no TTL go this long after their outcome was shown. */
const KEEP_WITHOUT_TTL_MS = 7 * 24 * 3_600_000;

/** A DetailedTask (from tasks/get, a CreateTaskResult, or a notification) as a snapshot. */
export function snapshotOf(task: JsonObject): TaskSnapshot {
  return {
    taskId: String(task.taskId),
    status: String(task.status),
    ...(typeof task.statusMessage === 'string' ? { statusMessage: task.statusMessage } : {}),
    ...(typeof task.pollIntervalMs === 'number' ? { pollIntervalMs: task.pollIntervalMs } : {}),
    ...(typeof task.ttlMs === 'number' || task.ttlMs === null ? { ttlMs: task.ttlMs } : {}),
    ...(isJsonObject(task.inputRequests)
      ? { inputRequests: task.inputRequests as Record<string, InputRequest> }
      : {}),
    ...(isJsonObject(task.result) ? { result: task.result } : {}),
    ...(isJsonObject(task.error) ? { error: task.error } : {}),
  };
}

/** A one-line summary of a call's arguments for a task list. */
export function summarize(args: JsonObject, max = 80): string {
  const text = JSON.stringify(args);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A client of any 2026-07-28 server with the Tasks extension that never loses a task: every task it
 * creates is recorded in its store before the call goes on, `resume(taskId)` follows a task again after
 * a restart (progress, outstanding input, result), and `pending()` lists what is still to be seen. It
 * follows a task with `notifications/tasks` when the server offers `subscriptions/listen`, and by
 * polling `tasks/get` at the task's `pollIntervalMs` otherwise.
 */
export class TasksClient {
  readonly url: string;
  readonly http: McpHttp;
  readonly store: TaskIdStore;

  constructor(opts: TasksClientOptions) {
    this.http = new McpHttp(opts);
    this.url = opts.url;
    this.store = opts.store ?? new MemoryTaskStore();
  }

  /**
   * Calls a tool. A synchronous answer is returned as it is (input rounds answered through `onInput`);
   * a task is recorded, then followed to its end.
   */
  async callTool(name: string, args: JsonObject = {}, opts: CallToolOptions = {}): Promise<ToolOutcome> {
    let extra: JsonObject = {};
    for (;;) {
      opts.signal?.throwIfAborted();
      const answer = await this.http.request('tools/call', { name, arguments: args, ...extra }, opts.signal);
      if (answer.resultType === 'task') {
        const task = snapshotOf(answer);
        const record = await this.#recordNew(task, name, args);
        opts.onTask?.(record);
        return this.#follow(record, task, opts);
      }
      if (answer.resultType !== 'input_required') {
        return { status: answer.isError === true ? 'failed' : 'completed', result: answer };
      }
      if (opts.onInput === undefined) {
        throw new Error(`${name} asks for input before it starts: pass onInput to answer it`);
      }
      const requests = isJsonObject(answer.inputRequests) ? answer.inputRequests : {};
      const inputResponses = await opts.onInput(requests as Record<string, InputRequest>, undefined);
      extra = {
        inputResponses,
        ...(answer.requestState === undefined ? {} : { requestState: answer.requestState }),
      };
    }
  }

  /**
   * Follows a task from where it is now: one this client (or another with the same store) created, or
   * any task of this server the caller knows the id of (it is recorded then, its tool unknown).
   */
  async resume(taskId: string, opts: WatchOptions = {}): Promise<ToolOutcome> {
    const known = await this.store.load(this.url, taskId);
    if (known !== undefined) return this.#follow(known, undefined, opts);
    const task = snapshotOf(await this.http.request('tasks/get', { taskId }, opts.signal));
    return this.#follow(await this.#recordNew(task, '', {}), task, opts);
  }

  /**
   * The task's events (`tasks/stream`, SEP-2694 draft), in order and each once, until its last one:
   *
   * ```ts
   * for await (const event of client.events(taskId)) show(event); // { taskId, seq, type, payload, time? }
   * ```
   *
   * An event counts as processed when the loop asks for the next one: its seq is then saved in the
   * store (`saveEventCursor`), so that a host that restarts goes on after the last event it processed
   * (a loop left with `break` or a throw leaves its event unsaved: it comes again). A dropped
   * connection, or a stream cut by a server shutting down, is opened again after the cursor, with
   * backoff. Events the server no longer keeps throw a TaskEventsGoneError (`ifGone: 'skip'` goes on).
   */
  events(taskId: string, opts: EventsOptions = {}): AsyncGenerator<TaskEvent, void, undefined> {
    return taskEvents(this.http, this.store, taskId, opts);
  }

  /** This server's tasks whose outcome the client has not shown yet, newest first. */
  async pending(): Promise<TaskRecord[]> {
    return (await this.store.list(this.url)).filter((r) => r.shownAt === undefined);
  }

  /** Every record of this server, newest first (refreshed with `tasks/get` when `refresh` is set). */
  async records({ refresh = false }: { refresh?: boolean } = {}): Promise<TaskRecord[]> {
    const records = await this.store.list(this.url);
    if (!refresh) return records;
    return Promise.all(records.map(async (r) => (TERMINAL.has(r.status) ? r : this.refresh(r.taskId))));
  }

  /** Reads the task's status now and saves it; a task the server no longer knows becomes `unknown`. */
  async refresh(taskId: string): Promise<TaskRecord> {
    const record = await this.store.load(this.url, taskId);
    if (record === undefined) throw new Error(`no task ${taskId} for ${this.url} in this client's records`);
    try {
      return await this.#note(record, snapshotOf(await this.http.request('tasks/get', { taskId })));
    } catch (err) {
      if (!(err instanceof McpRpcError)) throw err;
      return this.#save({ ...record, status: 'unknown', statusMessage: err.rpcMessage });
    }
  }

  /** Asks the server to cancel the task (cooperative: follow it, or `resume`, to see it end). */
  async cancel(taskId: string): Promise<void> {
    await this.http.request('tasks/cancel', { taskId });
  }

  /**
   * Drops the records whose outcome was shown and whose task's TTL has passed (a week after it was
   * shown when the server gave no TTL). Returns how many went.
   */
  async prune(now = Date.now()): Promise<number> {
    let dropped = 0;
    for (const r of await this.store.list(this.url)) {
      if (r.shownAt === undefined) continue;
      const until =
        typeof r.ttlMs === 'number'
          ? Date.parse(r.createdAt) + r.ttlMs
          : Date.parse(r.shownAt) + KEEP_WITHOUT_TTL_MS;
      if (now < until && r.status !== 'unknown') continue;
      await this.store.remove(this.url, r.taskId);
      dropped++;
    }
    return dropped;
  }

  async #recordNew(task: TaskSnapshot, tool: string, args: JsonObject): Promise<TaskRecord> {
    const now = new Date().toISOString();
    return this.#save({
      taskId: task.taskId,
      serverUrl: this.url,
      tool,
      argumentsSummary: summarize(args),
      createdAt: now,
      status: task.status,
      statusMessage: task.statusMessage,
      checkedAt: now,
      ttlMs: task.ttlMs,
      answeredKeys: [],
    });
  }

  async #save(record: TaskRecord): Promise<TaskRecord> {
    await this.store.save(record);
    return record;
  }

  /** Saves what changed of the task in its record. */
  async #note(record: TaskRecord, task: TaskSnapshot): Promise<TaskRecord> {
    if (record.status === task.status && record.statusMessage === task.statusMessage) return record;
    return this.#save({
      ...record,
      status: task.status,
      statusMessage: task.statusMessage,
      checkedAt: new Date().toISOString(),
      ...(task.ttlMs === undefined ? {} : { ttlMs: task.ttlMs }),
    });
  }

  /** Follows the task to a terminal status: answers its input once per key, and returns its outcome. */
  async #follow(
    start: TaskRecord,
    first: TaskSnapshot | undefined,
    opts: WatchOptions,
  ): Promise<ToolOutcome> {
    let record = start;
    const watch = new TaskWatch(this.http, record.taskId, opts);
    try {
      let task = first ?? (await watch.read());
      for (;;) {
        record = await this.#note(record, task);
        opts.onStatus?.(task);
        if (TERMINAL.has(task.status)) {
          await this.#save({ ...record, shownAt: new Date().toISOString() });
          return outcomeOf(task);
        }
        const unanswered = Object.entries(task.inputRequests ?? {}).filter(
          ([key]) => !record.answeredKeys.includes(key),
        );
        if (task.status === 'input_required' && unanswered.length > 0 && opts.onInput !== undefined) {
          const responses = await opts.onInput(Object.fromEntries(unanswered), task);
          opts.signal?.throwIfAborted();
          const taskId = record.taskId;
          await this.http.request('tasks/update', { taskId, inputResponses: responses }, opts.signal);
          record = await this.#save({
            ...record,
            answeredKeys: [...record.answeredKeys, ...Object.keys(responses)],
          });
          task = await watch.read();
          continue;
        }
        task = await watch.next(task);
      }
    } finally {
      watch.close();
    }
  }
}

function outcomeOf(task: TaskSnapshot): ToolOutcome {
  return {
    status: task.status as ToolOutcome['status'],
    taskId: task.taskId,
    ...(task.result === undefined ? {} : { result: task.result }),
    ...(task.error === undefined ? {} : { error: task.error }),
  };
}

/**
 * How one task's next state is learnt: from `notifications/tasks` on a `subscriptions/listen` stream
 * while the server keeps one open (a slow poll stays as the backstop), else by polling `tasks/get` at
 * the task's `pollIntervalMs`. An unreachable server is retried for `reconnectMs`.
 */
class TaskWatch {
  readonly #http: McpHttp;
  readonly #taskId: string;
  readonly #opts: WatchOptions;
  readonly #stop = new AbortController();
  #listening = false;
  #notified: TaskSnapshot | undefined;
  #wake: (() => void) | undefined;

  constructor(http: McpHttp, taskId: string, opts: WatchOptions) {
    this.#http = http;
    this.#taskId = taskId;
    this.#opts = opts;
    if (opts.listen !== false) this.#listen();
  }

  close(): void {
    this.#stop.abort();
  }

  /** The task now, by `tasks/get`, retrying an unreachable server for a while. */
  async read(): Promise<TaskSnapshot> {
    const signal = this.#opts.signal;
    let lostSince: number | undefined;
    for (;;) {
      try {
        return snapshotOf(await this.#http.request('tasks/get', { taskId: this.#taskId }, signal));
      } catch (err) {
        if (!(err instanceof McpConnectionError)) throw err;
        lostSince ??= Date.now();
        if (Date.now() - lostSince > (this.#opts.reconnectMs ?? 60_000)) throw err;
        this.#opts.onStatus?.({ taskId: this.#taskId, status: 'reconnecting', statusMessage: err.message });
        await sleep(1_000, undefined, signal ? { signal } : {});
      }
    }
  }

  /** The task's next state after `task`: a notification if one comes first, else a poll. */
  async next(task: TaskSnapshot): Promise<TaskSnapshot> {
    const early = this.#notified;
    this.#notified = undefined;
    if (early !== undefined) return early;
    const interval = Math.max(20, task.pollIntervalMs ?? 1_000);
    // With notifications flowing, a poll is only the backstop for a lost one.
    const wait = this.#listening ? Math.max(interval * 10, 5_000) : interval;
    const timer = new AbortController();
    const signals = [timer.signal, ...(this.#opts.signal ? [this.#opts.signal] : [])];
    await Promise.race([
      sleep(wait, undefined, { signal: AbortSignal.any(signals) }).catch(() => {}),
      new Promise<void>((resolve) => (this.#wake = resolve)),
    ]);
    timer.abort();
    this.#wake = undefined;
    this.#opts.signal?.throwIfAborted();
    const notified = this.#notified;
    this.#notified = undefined;
    return notified ?? this.read();
  }

  #listen(): void {
    const signal = AbortSignal.any([this.#stop.signal, ...(this.#opts.signal ? [this.#opts.signal] : [])]);
    const params = { notifications: { taskIds: [this.#taskId] } };
    void this.#http
      .stream(
        'subscriptions/listen',
        params,
        (message) => {
          const p = isJsonObject(message.params) ? message.params : {};
          if (message.method === 'notifications/subscriptions/acknowledged') {
            const honoured = isJsonObject(p.notifications) ? p.notifications.taskIds : undefined;
            this.#listening = Array.isArray(honoured) && honoured.includes(this.#taskId);
          } else if (message.method === 'notifications/tasks' && p.taskId === this.#taskId) {
            this.#notified = snapshotOf(p);
            this.#wake?.();
          }
        },
        signal,
      )
      .catch(() => {})
      .finally(() => {
        // A server without subscriptions, or a stream that ended: polling goes on at the task's pace.
        this.#listening = false;
        this.#wake?.();
      });
  }
}
