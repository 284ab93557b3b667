import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';
import type { JsonObject } from '../../core/wire.ts';

/**
 * Stores the client's answer to a request the server sent it (elicitation, sampling, roots) and wakes
 * whichever instance waits for it: the POST that carries the answer may land anywhere.
 */
export async function recordResponse(
  db: Kysely<Database>,
  sessionId: string,
  requestId: string,
  response: JsonObject,
): Promise<void> {
  await sql`
    with stored as (
      insert into mcp_session_responses (session_id, request_id, response)
      values (${sessionId}, ${requestId}, ${JSON.stringify(response)}::jsonb)
      on conflict do nothing
    )
    select pg_notify(${SESSION_CHANNELS.response}, ${`${sessionId} ${requestId}`})`.execute(db);
}

/** Takes (reads and deletes) the answers that arrived for these requests. */
export async function takeResponses(
  db: Kysely<Database>,
  sessionId: string,
  requestIds: readonly string[],
): Promise<Map<string, JsonObject>> {
  if (requestIds.length === 0) return new Map();
  const rows = await db
    .deleteFrom('mcp_session_responses')
    .where('session_id', '=', sessionId)
    .where('request_id', 'in', requestIds)
    .returning(['request_id', 'response'])
    .execute();
  return new Map(rows.map((r) => [r.request_id, r.response as JsonObject]));
}
