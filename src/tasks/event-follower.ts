// One reader of one task's events, whatever carries them (tasks/stream, the events endpoint, a
// 2025-11-25 stream): the events after its cursor in order, each once, live until the task ends, then
// the task's final status as the last event. Protocol-neutral: the caller turns events into frames.
import type { Kysely } from 'kysely';
import { EventsGoneError, SERVER_EVENTS, type WireTaskEvent } from '../core/task-events.ts';
import { PerPrincipalCap } from '../core/per-principal-cap.ts';
import type { Database } from '../db/database.ts';
import type { TaskChanges } from './changes.ts';
import type { FollowedRow, TaskEventFeed } from './event-feed.ts';
import { isTerminal } from './status.ts';
import { eventRange, readTaskEvents, type EventRange } from './store/events.ts';

/** A catch-up reads this many events at a time. */
const CATCH_UP_BATCH = 500;

export interface EventFollowDeps {
  db: Kysely<Database>;
  /** The process's shared reads of appended events (and their backstop, which reads the tasks' rows too). */
  eventFeed: TaskEventFeed;
  /** Tells the follower at once when its task ends. */
  taskChanges: TaskChanges;
}

export interface EventFollowRequest {
  /** A task of `principal` (the caller checked, as tasks/get does). */
  taskId: string;
  principal: string;
  /** The last event the reader has (0: none); it gets the ones after. */
  after: number;
  /** Ends the follow (the reader left, or the process stops): resolves 'stopped'. */
  signal: AbortSignal;
  /** Sends one event; awaited, in order. */
  send: (event: WireTaskEvent) => Promise<void>;
}

/**
 * Checks where a reader may start: EventsGoneError when events after `after` were dropped by retention
 * (the reader would miss them), else the task's event range (no check without a cursor).
 */
export async function checkEventCursor(
  db: Kysely<Database>,
  taskId: string,
  after: number | undefined,
): Promise<EventRange | undefined> {
  const range = await eventRange(db, taskId);
  if (after !== undefined && range !== undefined && after + 1 < range.earliest && after < range.last) {
    throw new EventsGoneError(taskId, range.earliest);
  }
  return range;
}

/** A finished task's last event: its status, numbered after its stored events. */
export function finalStatusEvent(range: Omit<EventRange, 'earliest'>): WireTaskEvent {
  return {
    seq: range.last + 1,
    type: SERVER_EVENTS.status,
    payload: {
      status: range.status,
      ...(range.statusMessage === null ? {} : { statusMessage: range.statusMessage }),
    },
    createdAt: range.lastUpdatedAt,
  };
}

/**
 * Follows the task's events from `after`: 'finished' once the final status went out, 'stopped' when the
 * signal ended it first. EventsGoneError when retention dropped events before this reader got them (it
 * never skips one silently).
 */
export async function followTaskEvents(
  deps: EventFollowDeps,
  req: EventFollowRequest,
): Promise<'finished' | 'stopped'> {
  const follower = new Follower(deps, req);
  try {
    return await follower.run();
  } finally {
    follower.close();
  }
}

/**
 * What the readers of task events in one process share: the database, the one feed of appended events
 * and the one reader of changed tasks. Every reader (tasks/stream, the events endpoint, 2025-11-25
 * streams) starts here.
 */
export class TaskEventReader {
  readonly #deps: EventFollowDeps;
  readonly #open: PerPrincipalCap;

  /** `maxStreamsPerPrincipal`: MAX_EVENT_STREAMS_PER_PRINCIPAL, the streams one principal holds open here. */
  constructor(deps: EventFollowDeps, { maxStreamsPerPrincipal = 1_000 } = {}) {
    this.#deps = deps;
    this.#open = new PerPrincipalCap(
      'MAX_EVENT_STREAMS_PER_PRINCIPAL',
      maxStreamsPerPrincipal,
      'open task event streams',
    );
  }

  /**
   * Takes one of `principal`'s event streams on this instance before a stream starts (QuotaExceededError
   * when all are open: 429); the release gives it back when the stream ends.
   */
  admit(principal: string): () => void {
    return this.#open.take(principal);
  }

  /** See checkEventCursor. */
  checkCursor(taskId: string, after: number | undefined): Promise<EventRange | undefined> {
    return checkEventCursor(this.#deps.db, taskId, after);
  }

  /** See followTaskEvents. */
  follow(req: EventFollowRequest): Promise<'finished' | 'stopped'> {
    return followTaskEvents(this.#deps, req);
  }
}

/** The part of a task's row its last event is made of. */
type Finished = Omit<EventRange, 'earliest'>;

class Follower {
  readonly #deps: EventFollowDeps;
  readonly #req: EventFollowRequest;
  readonly #offs: (() => void)[] = [];
  #cursor: number;
  #live: WireTaskEvent[] = [];
  /** Set when something happened: live events, a change of the task, the backstop's read. */
  #woken = true;
  /** Set when the task's row must be read, and what follows the cursor (at the start, after the backstop's read). */
  #readRow = true;
  #finished: Finished | undefined;
  #wake: () => void = () => {};

  constructor(deps: EventFollowDeps, req: EventFollowRequest) {
    this.#deps = deps;
    this.#req = req;
    this.#cursor = req.after;
    const stop = () => this.#poke();
    req.signal.addEventListener('abort', stop, { once: true });
    this.#offs.push(
      deps.eventFeed.follow(req.taskId, req.after, {
        events: (events) => {
          this.#live.push(...events);
          this.#poke();
        },
        row: (row) => this.#backstopRead(row),
      }),
      deps.taskChanges.watchTask(req.taskId, req.principal, (view) => {
        if (isTerminal(view.status)) this.#finished = { ...view, last: view.eventSeq };
        this.#poke();
      }),
      () => req.signal.removeEventListener('abort', stop),
    );
  }

  close(): void {
    for (const off of this.#offs) off();
  }

  async run(): Promise<'finished' | 'stopped'> {
    while (!this.#req.signal.aborted) {
      if (this.#woken) {
        this.#woken = false;
        if (!(await this.#step())) return 'stopped';
        if (this.#finished !== undefined) {
          if (this.#cursor < this.#finished.last) await this.#catchUp();
          if (this.#cursor <= this.#finished.last) await this.#send(finalStatusEvent(this.#finished));
          return 'finished';
        }
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        if (this.#woken || this.#req.signal.aborted) resolve();
      });
      this.#wake = () => {};
    }
    return 'stopped';
  }

  /** The backstop read the task's row: a follower behind it (a lost notification) reads again. */
  #backstopRead(row: FollowedRow | undefined): void {
    if (row !== undefined && isTerminal(row.status)) {
      this.#finished = row;
      this.#poke();
      return;
    }
    // (The same shared read handed this follower the row's events just before: those are not missed.)
    const known = Math.max(this.#cursor, this.#live.at(-1)?.seq ?? 0);
    if (row === undefined || row.last > known) {
      this.#readRow = true;
      this.#poke();
    }
  }

  #poke(): void {
    this.#woken = true;
    this.#wake();
  }

  /**
   * Sends what arrived live; reads the rest (after a gap in the live events, or when the row is due:
   * a lost notification) and the task's row. False when the task is gone.
   */
  async #step(): Promise<boolean> {
    const gap = !(await this.#sendLive());
    if (!gap && !this.#readRow) return true;
    this.#readRow = false;
    await this.#catchUp();
    const range = await checkEventCursor(this.#deps.db, this.#req.taskId, this.#cursor);
    if (range === undefined) return false;
    if (isTerminal(range.status)) this.#finished = range;
    // (Events appended after the catch-up and before the row's read: the next round reads them.)
    else if (this.#cursor < range.last) this.#poke();
    return true;
  }

  /** Sends the live events that follow the cursor; false when they left a gap (a read must fill it). */
  async #sendLive(): Promise<boolean> {
    const live = this.#live.sort((a, b) => a.seq - b.seq);
    this.#live = [];
    for (const event of live) {
      if (event.seq <= this.#cursor) continue;
      if (event.seq !== this.#cursor + 1) return false;
      await this.#send(event);
    }
    return true;
  }

  /** Reads and sends what follows the cursor, until nothing does. */
  async #catchUp(): Promise<void> {
    for (;;) {
      const events = await readTaskEvents(this.#deps.db, this.#req.taskId, this.#cursor, CATCH_UP_BATCH);
      for (const event of events) {
        if (event.seq !== this.#cursor + 1) throw new EventsGoneError(this.#req.taskId, event.seq);
        await this.#send(event);
      }
      this.#deps.eventFeed.readUpTo(this.#req.taskId, this.#cursor);
      if (events.length < CATCH_UP_BATCH || this.#req.signal.aborted) return;
    }
  }

  async #send(event: WireTaskEvent): Promise<void> {
    if (this.#req.signal.aborted) return;
    await this.#req.send(event);
    this.#cursor = event.seq;
  }
}
