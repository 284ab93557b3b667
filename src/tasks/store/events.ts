// A task's events (ctx.emit): appended by the attempt that holds the task, numbered 1, 2, 3… with no
// gaps, read back in order by any instance. See migrations/20261210000000_create_task_events.ts.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { CHANNELS } from '../../events/change-feed.ts';
import type { WireTaskEvent } from '../../core/task-events.ts';
import type { TaskStatus } from '../../core/wire.ts';
import { isTerminal } from '../status.ts';
import { LeaseLostError } from './lease.ts';

/** One event as written: where it was emitted (its key), its type, its payload as JSON text. */
export interface NewTaskEvent {
  key: string;
  type: string;
  /** The payload, already serialized (its size was checked against the bounds on that text). */
  json: string;
  /** The payload's UTF-8 bytes (the writer counted them against the bounds). */
  bytes: number;
}

/** One event as stored. */
export type TaskEvent = WireTaskEvent;

/**
 * Appends events after the task's last ones, only while `attempt` holds the task (LeaseLostError
 * otherwise): one statement, whose update of the task's counters takes its row lock, so appends are
 * numbered one after another. Wakes the instances that stream the task's events. The first number given.
 */
export async function appendTaskEvents(
  db: Kysely<Database>,
  { taskId, attempt }: { taskId: string; attempt: number },
  events: readonly NewTaskEvent[],
): Promise<number> {
  const bytes = events.reduce((sum, e) => sum + e.bytes, 0);
  // (The payloads' JSON goes in as it is, not as strings to escape here and parse again there.)
  const rows = `[${events.map((e) => `{"key":${JSON.stringify(e.key)},"type":${JSON.stringify(e.type)},"payload":${e.json}}`).join(',')}]`;
  const { rows: held } = await sql<{ first: number }>`
    with held as (
      update tasks set event_seq = event_seq + ${events.length}, event_bytes = event_bytes + ${bytes}
      where task_id = ${taskId} and attempt = ${attempt} and status = 'working'
      returning event_seq - ${events.length} as base
    ), appended as (
      insert into task_events (task_id, seq, key, type, payload)
      select ${taskId}, held.base + e.ord, e.v->>'key', e.v->>'type', e.v->'payload'
      from held, jsonb_array_elements(${rows}::jsonb) with ordinality as e(v, ord)
    )
    select base + 1 as first, pg_notify(${CHANNELS.taskEvents}, ${taskId}) from held`.execute(db);
  if (held.length === 0) throw new LeaseLostError(taskId, attempt);
  return held[0]!.first;
}

/** What an attempt that runs again needs of the events written before it: their keys and the totals. */
export interface WrittenEvents {
  /** The type written under each key. */
  types: Map<string, string>;
  count: number;
  bytes: number;
}

export const noWrittenEvents = (): WrittenEvents => ({ types: new Map(), count: 0, bytes: 0 });

/** The task's events so far, by key (one read, at the start of a leg that replays). */
export async function loadWrittenEvents(db: Kysely<Database>, taskId: string): Promise<WrittenEvents> {
  const [keys, totals] = await Promise.all([
    db.selectFrom('task_events').select(['key', 'type']).where('task_id', '=', taskId).execute(),
    db
      .selectFrom('tasks')
      .select(['event_seq', 'event_bytes'])
      .where('task_id', '=', taskId)
      .executeTakeFirst(),
  ]);
  return {
    types: new Map(keys.map((k) => [k.key, k.type])),
    count: totals?.event_seq ?? 0,
    bytes: Number(totals?.event_bytes ?? 0),
  };
}

/** Events of a task after `after`, in order, at most `limit`. */
export async function readTaskEvents(
  db: Kysely<Database>,
  taskId: string,
  after: number,
  limit: number,
): Promise<TaskEvent[]> {
  const rows = await db
    .selectFrom('task_events')
    .select(['seq', 'type', 'payload', 'created_at'])
    .where('task_id', '=', taskId)
    .where('seq', '>', after)
    .orderBy('seq')
    .limit(limit)
    .execute();
  return rows.map(toTaskEvent);
}

/** Events of several tasks, each after its own number, in order per task (an instance's shared read). */
export async function readEventsOfTasks(
  db: Kysely<Database>,
  after: ReadonlyMap<string, number>,
  limitPerTask: number,
): Promise<Map<string, TaskEvent[]>> {
  const found = new Map<string, TaskEvent[]>();
  if (after.size === 0) return found;
  const { rows } = await sql<{
    task_id: string;
    seq: number;
    type: string;
    payload: unknown;
    created_at: Date;
  }>`
    select e.task_id, e.seq, e.type, e.payload, e.created_at
    from unnest(${[...after.keys()]}::text[], ${[...after.values()]}::int[]) as w(task_id, after)
    cross join lateral (
      select * from task_events e where e.task_id = w.task_id and e.seq > w.after order by e.seq limit ${limitPerTask}
    ) e
    order by e.task_id, e.seq`.execute(db);
  for (const row of rows) {
    let events = found.get(row.task_id);
    if (events === undefined) found.set(row.task_id, (events = []));
    events.push(toTaskEvent(row));
  }
  return found;
}

function toTaskEvent(row: { seq: number; type: string; payload: unknown; created_at: Date }): TaskEvent {
  return {
    seq: row.seq,
    type: row.type,
    payload: row.payload as Record<string, unknown>,
    createdAt: row.created_at,
  };
}

/** Where a task's events stand: the first still kept (retention may have dropped older ones) and the last. */
export interface EventRange {
  status: TaskStatus;
  statusMessage: string | null;
  lastUpdatedAt: Date;
  /** The first event still kept; `last + 1` when none is. */
  earliest: number;
  last: number;
}

/** A task's event range, by id (the caller has checked whose it is). */
export async function eventRange(db: Kysely<Database>, taskId: string): Promise<EventRange | undefined> {
  const row = await db
    .selectFrom('tasks as t')
    .select(['t.status', 't.status_message', 't.last_updated_at', 't.event_seq'])
    .select(
      sql<number | null>`(select min(e.seq) from task_events e where e.task_id = t.task_id)`.as('earliest'),
    )
    .where('t.task_id', '=', taskId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    status: row.status as TaskStatus,
    statusMessage: row.status_message,
    lastUpdatedAt: row.last_updated_at,
    earliest: row.earliest ?? row.event_seq + 1,
    last: row.event_seq,
  };
}

/** The rows of several tasks as their event readers need them (the backstop's shared read). */
export async function eventRangesOf(
  db: Kysely<Database>,
  taskIds: readonly string[],
): Promise<Map<string, Omit<EventRange, 'earliest'>>> {
  if (taskIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('tasks')
    .select(['task_id', 'status', 'status_message', 'last_updated_at', 'event_seq'])
    .where('task_id', 'in', [...taskIds])
    .execute();
  return new Map(
    rows.map((r) => [
      r.task_id,
      {
        status: r.status as TaskStatus,
        statusMessage: r.status_message,
        lastUpdatedAt: r.last_updated_at,
        last: r.event_seq,
      },
    ]),
  );
}

/**
 * The number of a task's last event as a reader gets it: a finished task's stream ends with one more,
 * its final status (seq event_seq + 1), made from the task's row rather than stored (see task-events.ts).
 */
export function latestEventSeq(view: { status: TaskStatus; eventSeq: number }): number {
  return isTerminal(view.status) ? view.eventSeq + 1 : view.eventSeq;
}

/** Deletes events older than `before` (TASK_EVENT_RETENTION_MS), at most `limit`; how many. */
export async function deleteOldEvents(db: Kysely<Database>, before: Date, limit: number): Promise<number> {
  const { numAffectedRows } = await sql`
    delete from task_events where ctid = any(array(
      select ctid from task_events where created_at < ${before} limit ${limit}
    ))`.execute(db);
  return Number(numAffectedRows ?? 0);
}
