// ctx.emit in a task's attempt: events are checked, queued and appended in batches (one statement and
// one commit for all the events emitted meanwhile), fenced by attempt. Each event has a key, where the
// handler emitted it, so a leg that runs again after a crash skips what the dead attempt wrote.
import { AsyncLocalStorage } from 'node:async_hooks';
import { setImmediate as nextTick } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { isStorable } from '../core/limits.ts';
import { SERVER_EVENT_PREFIX, SERVER_EVENTS } from '../core/task-events.ts';
import { isJsonObject, type JsonObject } from '../core/wire.ts';
import type { Database } from '../db/database.ts';
import { appendTaskEvents, type NewTaskEvent, type WrittenEvents } from '../tasks/store/events.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import { NonDeterminismError } from './step-guard.ts';

/** The bounds on a task's events (settings of the same names). */
export interface EventLimits {
  /** MAX_EVENT_BYTES: one event's payload, as JSON. */
  maxEventBytes: number;
  /** MAX_EVENTS_PER_TASK. */
  maxEventsPerTask: number;
  /** MAX_EVENT_BYTES_PER_TASK: all of a task's payloads together. */
  maxEventBytesPerTask: number;
}

/** The settings' defaults (src/config.ts). */
export const DEFAULT_EVENT_LIMITS: EventLimits = {
  maxEventBytes: 65_536,
  maxEventsPerTask: 100_000,
  maxEventBytesPerTask: 67_108_864,
};

/** Events up to this many wait in memory; an emit beyond it waits for the batch being written. */
const QUEUED_EVENTS_HIGH_WATER = 1_000;
/** At most this many events go in one statement. */
const MAX_EVENTS_PER_APPEND = 1_000;

/** A step body's run, for the keys of the events it emits. */
interface StepBodyRun {
  position: number;
  emitted: number;
}

const stepBodies = new AsyncLocalStorage<StepBodyRun>();

/**
 * Runs a step's body so that the events it emits are keyed by the step's position and their order in
 * the run: a run of the step after a crash or a failure skips as many events as earlier runs wrote.
 */
export function inStepBody<T>(position: number, body: () => T): T {
  return stepBodies.run({ position, emitted: 0 }, body);
}

/**
 * A tool's event type: a name of visible ASCII (SEP-2694 asks for a vendor prefix, `com.example/row`: the
 * documented advice; an unprefixed name passes too).
 */
const EVENT_TYPE = /^[A-Za-z0-9][A-Za-z0-9._~:/@+-]{0,199}$/;

/** A tool's mistake in an emit (its type, its payload, a bound): thrown at the emit, it fails the task unless caught. */
export class EventError extends ProtocolError {
  constructor(message: string) {
    super(ProtocolErrorCode.InvalidParams, message);
  }
}

export interface EventWriterOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  /** What earlier legs wrote (their keys are skipped, their totals count against the bounds). */
  written: WrittenEvents;
  limits: EventLimits;
  /** The position the next step will take (the determinism guard's): events between steps are keyed by it. */
  position: () => number;
  /** A map item's leg: it replays its parent, whose events are written: nothing is emitted. */
  replayOnly: boolean;
}

export interface EventWriter {
  /** ctx.emit: queues the event; resolves at once unless many are queued, then when a batch is written. */
  emit: (type: string, payload?: unknown) => Promise<void>;
  /** ctx.partial: content blocks appended to the task's output, as a `partial` event. */
  partial: (content: JsonObject[]) => Promise<void>;
  /** The server's own event, under a key of its own (the same on every replay). */
  emitServerEvent: (key: string, type: string, payload: JsonObject) => void;
  /** Writes everything queued; throws what a write failed with (the attempt lost its task, the database). */
  flush: () => Promise<void>;
}

/** The event writer of one attempt. */
export function createEventWriter(opts: EventWriterOptions): EventWriter {
  const { written, limits } = opts;
  const queue = appendQueue(opts);
  let count = written.count;
  let bytes = written.bytes;
  let between = { position: -1, emitted: 0 };

  const keyOfNext = (): string => {
    const body = stepBodies.getStore();
    if (body !== undefined) return `s${body.position}:${body.emitted++}`;
    const position = opts.position();
    if (between.position !== position) between = { position, emitted: 0 };
    return `p${position}:${between.emitted++}`;
  };

  const enqueue = (key: string, type: string, payload: unknown): void => {
    const json = checkedPayload(type, payload, limits.maxEventBytes);
    const size = Buffer.byteLength(json, 'utf8');
    checkTaskBounds(limits, count + 1, bytes + size);
    count++;
    bytes += size;
    written.types.set(key, type);
    queue.push({ key, type, json, bytes: size });
  };

  /** Whether the event under `key` was written by an earlier leg (then it is not written again). */
  const writtenBefore = (key: string, type: string, guarded: boolean): boolean => {
    const recorded = written.types.get(key);
    if (recorded === undefined) return false;
    if (guarded && recorded !== type) {
      throw new NonDeterminismError(
        `the handler emitted "${type}" where this task recorded "${recorded}" (event ${key}): the tool's code changed under a running task (guard new code with ctx.patched)`,
      );
    }
    return true;
  };

  /** An event emitted by the handler, keyed by where it was emitted. */
  const emitPositioned = async (type: string, payload: unknown): Promise<void> => {
    if (opts.replayOnly) return;
    const key = keyOfNext();
    // (An event a step's body emitted may differ between runs of the body: only events between steps are guarded.)
    if (writtenBefore(key, type, key.startsWith('p'))) return;
    enqueue(key, type, payload);
    await queue.backpressure();
  };

  return {
    emit: (type, payload) => {
      checkType(type);
      return emitPositioned(type, payload);
    },
    partial: (content) => {
      if (!Array.isArray(content) || !content.every(isJsonObject)) {
        throw new EventError('ctx.partial: content must be an array of content blocks');
      }
      return emitPositioned(SERVER_EVENTS.partial, { content });
    },
    emitServerEvent: (key, type, payload) => {
      if (opts.replayOnly || writtenBefore(key, type, false)) return;
      enqueue(key, type, payload);
    },
    flush: () => queue.flush(),
  };
}

/** An attempt's queued events and its one append at a time (each takes everything queued meanwhile). */
function appendQueue({ db, task }: EventWriterOptions) {
  const queued: NewTaskEvent[] = [];
  let writing: Promise<void> | undefined;
  let failure: Error | undefined;
  const append = async (): Promise<void> => {
    await nextTick();
    while (queued.length > 0 && failure === undefined) {
      const batch = queued.splice(0, MAX_EVENTS_PER_APPEND);
      try {
        await appendTaskEvents(db, task, batch);
      } catch (err) {
        failure = err instanceof Error ? err : new Error(String(err));
      }
    }
    writing = undefined;
  };
  return {
    push(event: NewTaskEvent): void {
      queued.push(event);
      writing ??= append();
    },
    /** Waits for the append under way when too many events are queued. */
    async backpressure(): Promise<void> {
      if (queued.length >= QUEUED_EVENTS_HIGH_WATER) await writing;
    },
    async flush(): Promise<void> {
      while (writing !== undefined) await writing;
      if (failure !== undefined) throw failure;
    },
  };
}

function checkType(type: string): void {
  if (typeof type !== 'string' || !EVENT_TYPE.test(type)) {
    throw new EventError(
      `ctx.emit: event type ${JSON.stringify(type)} must be 1 to 200 letters, digits and ._~:/@+- starting with a letter or digit; vendor-prefixed is best, e.g. "com.example/row" (SEP-2694)`,
    );
  }
  if (type.startsWith(SERVER_EVENT_PREFIX) || type.startsWith('io.modelcontextprotocol/')) {
    throw new EventError(
      `ctx.emit: event type "${type}" uses a prefix reserved for the server and the protocol`,
    );
  }
}

/**
 * The payload as JSON, once it is storable and within MAX_EVENT_BYTES. The draft's payload is an object: a
 * value that is not one goes as `{ value }` (undefined as `{}`).
 */
function checkedPayload(type: string, payload: unknown, maxBytes: number): string {
  const object = payload === undefined ? {} : isJsonObject(payload) ? payload : { value: payload };
  let json: string | undefined;
  try {
    json = isStorable(object) ? JSON.stringify(object) : undefined;
  } catch {
    json = undefined;
  }
  if (json === undefined) {
    throw new EventError(
      `ctx.emit("${type}"): the payload must be JSON (no BigInt, no cycles) whose strings hold no NUL characters or unpaired surrogates`,
    );
  }
  // (A UTF-8 byte per UTF-16 unit at least, three at most: most payloads need no count.)
  if (json.length * 3 > maxBytes && Buffer.byteLength(json, 'utf8') > maxBytes) {
    throw new EventError(
      `ctx.emit("${type}"): the payload is ${Buffer.byteLength(json, 'utf8')} bytes, over MAX_EVENT_BYTES (${maxBytes}): write large outputs with ctx.artifact and emit its link`,
    );
  }
  return json;
}

function checkTaskBounds(limits: EventLimits, count: number, bytes: number): void {
  if (count > limits.maxEventsPerTask) {
    throw new EventError(
      `ctx.emit: the task has emitted MAX_EVENTS_PER_TASK (${limits.maxEventsPerTask}) events: emit fewer, larger ones`,
    );
  }
  if (bytes > limits.maxEventBytesPerTask) {
    throw new EventError(
      `ctx.emit: the task's events would pass MAX_EVENT_BYTES_PER_TASK (${limits.maxEventBytesPerTask} bytes): write large outputs with ctx.artifact`,
    );
  }
}
