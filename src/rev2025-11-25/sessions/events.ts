import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { CHANNELS } from '../../events/change-feed.ts';

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
  const row = await db
    .insertInto('mcp_session_events')
    .values({
      session_id: sessionId,
      stream_id: streamId,
      message: message === null ? null : JSON.stringify(message),
    })
    .returning('event_id')
    .executeTakeFirstOrThrow();
  await sql`select pg_notify(${CHANNELS.sessionEvent}, ${`${sessionId} ${streamId}`})`.execute(db);
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
