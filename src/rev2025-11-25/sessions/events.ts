import { sql, type Kysely } from 'kysely';
import { SERVER_EVENTS, TASK_EVENT_NOTIFICATION } from '../../core/task-events.ts';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';

/** One SSE event of a session's stream: its id (its number in the session) and its message (none: priming). */
export interface StreamEvent {
  eventId: string;
  message: unknown;
}

/**
 * Appends messages (a `null`: a priming event) to a stream's log before they are written to the wire,
 * so that a client that lost the stream can resume it on any instance with Last-Event-ID; returns their
 * ids, in order. An id is the session's next number (the session's row is locked for the statement: a
 * session's appends take turns), so ids count this session's events and nobody else's. One statement
 * and one commit for the lot (a burst of task events costs one, not one each).
 */
export async function appendEvents(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  messages: readonly unknown[],
): Promise<string[]> {
  const n = messages.length;
  // The numbers, the inserts and the wake-up of a resumed stream elsewhere (one NOTIFY: Postgres folds
  // a transaction's identical ones).
  const { rows } = await sql<{ event_id: string }>`
    with s as (
      update mcp_sessions set event_seq = event_seq + ${n} where session_id = ${sessionId}
      returning event_seq - ${n} as base
    ), e as (
      insert into mcp_session_events (session_id, stream_id, message, seq)
      select ${sessionId}, ${streamId}, nullif(m.message, 'null'::jsonb), s.base + m.n
      from s, jsonb_array_elements(${JSON.stringify(messages)}::jsonb) with ordinality as m(message, n)
      returning seq
    )
    select e.seq::text as event_id, pg_notify(${SESSION_CHANNELS.event}, ${`${sessionId} ${streamId}`})
    from e order by e.seq`.execute(db);
  if (rows.length !== n)
    throw new Error(`appending events to session ${sessionId} returned ${rows.length} of ${n} rows`);
  return rows.map((r) => r.event_id);
}

/** The stream an event id belongs to, in this session; undefined for an id the session never issued. */
export async function streamOf(
  db: Kysely<Database>,
  sessionId: string,
  eventId: string,
): Promise<string | undefined> {
  if (!/^\d{1,18}$/.test(eventId)) return undefined;
  const row = await db
    .selectFrom('mcp_session_events')
    .select('stream_id')
    .where('seq', '=', eventId)
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return row?.stream_id;
}

/** The stream's events after `afterEventId`, oldest first, priming events left out. */
export async function eventsAfter(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  afterEventId: string,
): Promise<StreamEvent[]> {
  const rows = await db
    .selectFrom('mcp_session_events')
    .select(['seq', 'message'])
    .where('session_id', '=', sessionId)
    .where('stream_id', '=', streamId)
    .where('seq', '>', afterEventId)
    .where('message', 'is not', null)
    .orderBy('seq')
    .execute();
  return rows.map((r) => ({ eventId: r.seq, message: r.message }));
}

/** Where a task's events stand in a session's log (`notifications/tasks/event` rows). */
export interface LoggedTaskEvents {
  /** The last seq any stream of the session logged. */
  inSession: number;
  /** The last seq the stream asked about logged; undefined when it logged none. */
  onStream: number | undefined;
  /** Whether that stream logged the task's final status event (its last). */
  endedOnStream: boolean;
}

/**
 * The task events a session's streams logged, by task (one task with `taskId`): where each stands in
 * the session, and on `streamId`. A stream starts a task after these, so a task's events are copied into
 * the session's log about once however often its streams reconnect. Reads the session's retained log
 * (SESSION_EVENT_RETENTION_MS) once.
 */
export async function loggedTaskEvents(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  taskId?: string,
): Promise<Map<string, LoggedTaskEvents>> {
  const { rows } = await sql<{
    task_id: string;
    in_session: string;
    on_stream: string | null;
    ended_on_stream: boolean;
  }>`
    select message #>> '{params,taskId}' as task_id,
      max((message #>> '{params,seq}')::bigint)::text as in_session,
      (max((message #>> '{params,seq}')::bigint) filter (where stream_id = ${streamId}))::text as on_stream,
      coalesce(bool_or(message #>> '{params,type}' = ${SERVER_EVENTS.status})
        filter (where stream_id = ${streamId}), false) as ended_on_stream
    from mcp_session_events
    where session_id = ${sessionId} and message ->> 'method' = ${TASK_EVENT_NOTIFICATION}
      ${taskId === undefined ? sql`` : sql`and message #>> '{params,taskId}' = ${taskId}`}
    group by 1`.execute(db);
  return new Map(
    rows.map((r) => [
      r.task_id,
      {
        inSession: Number(r.in_session),
        onStream: r.on_stream === null ? undefined : Number(r.on_stream),
        endedOnStream: r.ended_on_stream,
      },
    ]),
  );
}

/**
 * The last seq of each task a stream logged up to `eventId` (what its client has when it resumes from
 * there): a replay skips an event logged twice (an instance that wrote the stream a moment after another
 * took it over).
 */
export async function taskEventsUpTo(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  eventId: string,
): Promise<Map<string, number>> {
  const { rows } = await sql<{ task_id: string; seq: string }>`
    select message #>> '{params,taskId}' as task_id, max((message #>> '{params,seq}')::bigint)::text as seq
    from mcp_session_events
    where session_id = ${sessionId} and stream_id = ${streamId} and seq <= ${eventId}
      and message ->> 'method' = ${TASK_EVENT_NOTIFICATION}
    group by 1`.execute(db);
  return new Map(rows.map((r) => [r.task_id, Number(r.seq)]));
}

/** The ids of the requests for a task's input that a stream logged (see task-input.ts). */
export async function loggedInputRequestIds(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  prefix: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('mcp_session_events')
    .select(sql<string>`message ->> 'id'`.as('id'))
    .where('session_id', '=', sessionId)
    .where('stream_id', '=', streamId)
    .where(sql<boolean>`message ->> 'method' is not null and starts_with(message ->> 'id', ${prefix})`)
    .execute();
  return rows.map((r) => r.id);
}

/**
 * A resumed stream takes over from whoever still writes it (an instance that has not noticed its
 * client left): that one stops. Payload: `session stream producer`.
 */
export async function takeStream(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  producer: string,
): Promise<void> {
  await sql`select pg_notify(${SESSION_CHANNELS.taken}, ${`${sessionId} ${streamId} ${producer}`})`.execute(
    db,
  );
}
