// A task's events at 2025-11-25 (SEP-2694 draft, experimental): the same `notifications/tasks/event`
// as 2026-07-28's tasks/stream, on the session's streams, each logged before it is written like every
// event of them, so a stream resumed with Last-Event-ID (on any instance) continues where it stopped.
// Why this shape and not notifications/progress: docs/protocol.md, "Task events at 2025-11-25".
import { SERVER_EVENTS, TASK_EVENT_NOTIFICATION, taskEventParams } from '../core/task-events.ts';
import { ACTIVE_STATUSES } from '../tasks/status.ts';
import type { TaskView } from '../tasks/store/view.ts';
import type { Rev2025Options } from './options.ts';
import type { LoggedTaskEvents } from './sessions/events.ts';
import type { Session } from './sessions/store.ts';
import type { SessionStream } from './sse.ts';

/** A stream of a session that carries task events. */
export interface EventChannel {
  rev: Rev2025Options;
  session: Session;
  stream: SessionStream;
}

/** The task and seq of a logged `notifications/tasks/event`; undefined for any other message. */
export function taskEventOf(message: unknown): { taskId: string; seq: number } | undefined {
  const m = message as { method?: unknown; params?: { taskId?: unknown; seq?: unknown } } | null;
  if (m?.method !== TASK_EVENT_NOTIFICATION) return undefined;
  const { taskId, seq } = m.params ?? {};
  return typeof taskId === 'string' && typeof seq === 'number' ? { taskId, seq } : undefined;
}

/** Where a stream starts a task: after what it logged itself, else after what the session's streams did. */
export const startOf = (logged: LoggedTaskEvents | undefined): number =>
  logged?.onStream ?? logged?.inSession ?? 0;

/** A forwarder queues this many events on its stream before it waits for them to be written. */
const MAX_QUEUED = 1_000;

/**
 * Sends the task's events after `after` on the stream as `notifications/tasks/event`, in order, each
 * once, live until the task ends (its final status event last, when it emitted any): 'finished' once
 * all are written; 'stopped' when `signal` ended it first; 'gone' for a task no longer stored. Events
 * retention dropped are skipped (nobody can have them). Rejects when one could not be logged (none
 * after it is). One shared read per batch of appends per process (TaskEventFeed), whatever the number
 * of streams; the stream logs what queued up meanwhile in one append. The caller checked the task is
 * the principal's.
 */
export async function forwardTaskEvents(
  { rev, session, stream }: EventChannel,
  taskId: string,
  after: number,
  signal: AbortSignal,
): Promise<'finished' | 'stopped' | 'gone'> {
  const range = await rev.taskEvents.checkCursor(taskId, undefined);
  if (range === undefined) return 'gone';
  // This task's events on this stream: one that fails fails those queued after it (StreamOrder).
  const group = {};
  let last: Promise<void> = Promise.resolve();
  let failed: { err: unknown } | undefined;
  const end = await rev.taskEvents.follow({
    taskId,
    principal: session.principal,
    after: Math.max(after, range.earliest - 1),
    signal,
    send: async (event) => {
      if (failed !== undefined) throw failed.err;
      // A task that emitted nothing has nothing to end: no lone status event (most tools emit none).
      if (event.seq === 1 && event.type === SERVER_EVENTS.status) return;
      const params = taskEventParams(taskId, event);
      const written = stream.send({ jsonrpc: '2.0', method: TASK_EVENT_NOTIFICATION, params }, group);
      // (Awaited below, or at the end.)
      written.catch((err: unknown) => (failed ??= { err }));
      last = written;
      rev.metrics?.taskEventsSent.inc();
      if (stream.pending >= MAX_QUEUED) await written;
    },
  });
  await last;
  return end;
}

/**
 * The task events of a session's GET stream: those of every task the session created, while the
 * stream is open, from what the stream had not been sent (a resumed stream: after its own last event of
 * the task; a new one: after the session's). The tasks are the session's unfinished ones when the
 * stream opens, those a resumed stream left unfinished, and each one the session creates meanwhile (the
 * process's one reader of task changes names them). A failed write ends the stream: the client resumes
 * it, and the resumed stream starts again from its log.
 */
export class GetStreamTaskEvents {
  readonly #to: EventChannel;
  readonly #ready: Promise<void>;
  readonly #fail: (err: unknown) => void;
  readonly #stop = new AbortController();
  /** The tasks this stream follows or followed to their end (it never starts one twice). */
  readonly #seen = new Set<string>();

  /** `ready`: what must happen first (a resumed stream's replay and takeover). */
  constructor(to: EventChannel, ready: Promise<void>, fail: (err: unknown) => void) {
    this.#to = to;
    this.#ready = ready;
    this.#fail = fail;
  }

  /** Starts with the tasks the stream must follow as it opens. */
  open(): void {
    void this.#open().catch(this.#fail);
  }

  /** A task of the session changed: the stream follows it if it does not already. */
  see(view: TaskView): void {
    if (this.#seen.has(view.taskId)) return;
    this.#seen.add(view.taskId);
    void this.#follow(view.taskId, undefined).catch(this.#fail);
  }

  close(): void {
    this.#stop.abort();
  }

  async #open(): Promise<void> {
    await this.#ready;
    const { rev, session, stream } = this.#to;
    const [logged, unfinished] = await Promise.all([
      rev.sessions.loggedTaskEvents(session.sessionId, stream.streamId),
      unfinishedTasks(this.#to),
    ]);
    const ids = new Set(unfinished);
    for (const [taskId, l] of logged) {
      if (l.endedOnStream) this.#seen.add(taskId);
      else if (l.onStream !== undefined) ids.add(taskId);
    }
    for (const taskId of ids) {
      if (this.#seen.has(taskId)) continue;
      this.#seen.add(taskId);
      void this.#follow(taskId, logged.get(taskId) ?? null).catch(this.#fail);
    }
  }

  /** `logged`: the task's place in the log when known (null: none), else it is read. */
  async #follow(taskId: string, logged: LoggedTaskEvents | null | undefined): Promise<void> {
    await this.#ready;
    const { rev, session, stream } = this.#to;
    const place =
      logged === undefined
        ? (await rev.sessions.loggedTaskEvents(session.sessionId, stream.streamId, taskId)).get(taskId)
        : (logged ?? undefined);
    if (this.#stop.signal.aborted) return;
    await forwardTaskEvents(this.#to, taskId, startOf(place), this.#stop.signal);
  }
}

/** The session's tasks that have not ended (their principal's, created in this session). */
async function unfinishedTasks({ rev, session }: EventChannel): Promise<string[]> {
  const rows = await rev.db
    .selectFrom('tasks')
    .select('task_id')
    .where('origin', '=', session.sessionId)
    .where('principal', '=', session.principal)
    .where('status', 'in', ACTIVE_STATUSES)
    .where('parent_task_id', 'is', null)
    .execute();
  return rows.map((r) => r.task_id);
}
