import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';
import type { JsonObject } from '../../core/wire.ts';

/** Records that the server is sending these requests to the client: only their answers are kept. */
export async function expectResponses(
  db: Kysely<Database>,
  sessionId: string,
  requestIds: readonly string[],
): Promise<void> {
  if (requestIds.length === 0) return;
  await db
    .insertInto('mcp_session_responses')
    .values(requestIds.map((request_id) => ({ session_id: sessionId, request_id, response: null })))
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/**
 * Stores the client's answer to a request the server sent it (elicitation, sampling, roots) and wakes
 * whichever instance waits for it: the POST that carries the answer may land anywhere. An answer to a
 * request the server is not waiting for (never sent, already answered, given up) stores nothing.
 */
export async function recordResponse(
  db: Kysely<Database>,
  sessionId: string,
  requestId: string,
  response: JsonObject,
): Promise<void> {
  await sql`
    with stored as (
      update mcp_session_responses set response = ${JSON.stringify(response)}::jsonb
      where session_id = ${sessionId} and request_id = ${requestId} and response is null
      returning 1
    )
    select pg_notify(${SESSION_CHANNELS.response}, ${`${sessionId} ${requestId}`}) from stored`.execute(db);
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
    .where('response', 'is not', null)
    .returning(['request_id', 'response'])
    .execute();
  return new Map(rows.map((r) => [r.request_id, r.response as JsonObject]));
}

/** The server stopped waiting for these requests (answered, timed out, cancelled): forget them. */
export async function forgetResponses(
  db: Kysely<Database>,
  sessionId: string,
  requestIds: readonly string[],
): Promise<void> {
  if (requestIds.length === 0) return;
  await db
    .deleteFrom('mcp_session_responses')
    .where('session_id', '=', sessionId)
    .where('request_id', 'in', requestIds)
    .execute();
}
