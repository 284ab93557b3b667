import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';

/**
 * Claims the right to send these input requests of a task to a session, for one stream: returns the keys
 * this stream claimed (none that another stream, on any instance, already sent).
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  sessionId: string,
  taskId: string,
  keys: readonly string[],
  streamId: string,
): Promise<string[]> {
  if (keys.length === 0) return [];
  const rows = await db
    .insertInto('mcp_session_input_deliveries')
    .values(keys.map((key) => ({ session_id: sessionId, task_id: taskId, key, stream_id: streamId })))
    .onConflict((oc) => oc.doNothing())
    .returning('key')
    .execute();
  return rows.map((r) => r.key);
}

/**
 * A resumed stream holds the claims of the input requests it logged before (the client got them then,
 * or gets them in the replay): it does not send them again, whoever else claimed them meanwhile.
 */
export async function holdDeliveries(
  db: Kysely<Database>,
  sessionId: string,
  claims: ReadonlyArray<{ taskId: string; key: string }>,
  streamId: string,
): Promise<void> {
  if (claims.length === 0) return;
  await db
    .insertInto('mcp_session_input_deliveries')
    .values(
      claims.map((c) => ({ session_id: sessionId, task_id: c.taskId, key: c.key, stream_id: streamId })),
    )
    .onConflict((oc) =>
      oc.columns(['session_id', 'task_id', 'key']).doUpdateSet({ stream_id: streamId, sent_at: sql`now()` }),
    )
    .execute();
}

/** A stream ended: what it sent and was not answered may go out again on the session's next stream. */
export async function releaseDeliveries(db: Kysely<Database>, streamId: string): Promise<void> {
  await db.deleteFrom('mcp_session_input_deliveries').where('stream_id', '=', streamId).execute();
}

/** Claims older than the retention (a stream whose instance died without releasing them). */
export async function purgeDeliveries(db: Kysely<Database>, retentionMs: number): Promise<number> {
  const result = await db
    .deleteFrom('mcp_session_input_deliveries')
    .where('sent_at', '<', sql<Date>`now() - make_interval(secs => ${retentionMs / 1000})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
