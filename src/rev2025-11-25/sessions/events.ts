import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';

/** One SSE event of a session's stream: its id (its number in the session) and its message (none: priming). */
export interface StreamEvent {
  eventId: string;
  message: unknown;
}

/**
 * Appends a message (or, with `null`, a priming event) to a stream's log before it is written to the
 * wire, so that a client that lost the stream can resume it on any instance with Last-Event-ID. Its id
 * is the session's next number (the session's row is locked for the statement: a session's appends
 * take turns), so ids count this session's events and nobody else's.
 */
export async function appendEvent(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  message: unknown,
): Promise<string> {
  // The number, the insert and the wake-up of a resumed stream elsewhere: one statement, one commit.
  const { rows } = await sql<{ event_id: string }>`
    with s as (
      update mcp_sessions set event_seq = event_seq + 1 where session_id = ${sessionId} returning event_seq
    ), e as (
      insert into mcp_session_events (session_id, stream_id, message, seq)
      select ${sessionId}, ${streamId}, ${message === null ? null : JSON.stringify(message)}::jsonb, s.event_seq
      from s
      returning seq
    )
    select e.seq::text as event_id, pg_notify(${SESSION_CHANNELS.event}, ${`${sessionId} ${streamId}`})
    from e`.execute(db);
  const [row] = rows;
  if (row === undefined) throw new Error(`appending an event to session ${sessionId} returned no row`);
  return row.event_id;
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
