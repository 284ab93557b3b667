import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';

/** One SSE event of a session's stream: its id (unique in the session) and its message (none: priming). */
export interface StreamEvent {
  eventId: string;
  message: unknown;
}

/**
 * Appends a message (or, with `null`, a priming event) to a stream's log before it is written to the
 * wire, so that a client that lost the stream can resume it on any instance with Last-Event-ID.
 */
export async function appendEvent(
  db: Kysely<Database>,
  sessionId: string,
  streamId: string,
  message: unknown,
): Promise<string> {
  // The insert and the wake-up of a resumed stream elsewhere: one statement, one commit.
  const { rows } = await sql<{ event_id: string }>`
    with e as (
      insert into mcp_session_events (session_id, stream_id, message)
      values (${sessionId}, ${streamId}, ${message === null ? null : JSON.stringify(message)}::jsonb)
      returning event_id
    )
    select e.event_id::text as event_id, pg_notify(${SESSION_CHANNELS.event}, ${`${sessionId} ${streamId}`})
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
    .where('event_id', '=', eventId as never)
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
    .select(['event_id', 'message'])
    .where('session_id', '=', sessionId)
    .where('stream_id', '=', streamId)
    .where('event_id', '>', afterEventId as never)
    .where('message', 'is not', null)
    .orderBy('event_id')
    .execute();
  return rows.map((r) => ({ eventId: r.event_id, message: r.message }));
}
