import { sql, type Kysely } from 'kysely';

// A 2025-11-25 stream's SSE ids were the event log's global bigserial: any principal could count the
// cluster's traffic from the gaps between its own ids. Now each session numbers its own events (`seq`,
// from a counter on the session, taken in the append's statement), and the SSE id is that number.
// Existing events keep their old id as their number, and each session's counter starts past them, so a
// client resuming across the upgrade still names its event.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('mcp_sessions')
    .addColumn('event_seq', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('mcp_session_events').addColumn('seq', 'bigint').execute();
  await sql`update mcp_session_events set seq = event_id`.execute(db);
  await sql`update mcp_sessions s set event_seq = e.last
    from (select session_id, max(seq) as last from mcp_session_events group by session_id) e
    where e.session_id = s.session_id`.execute(db);
  await sql`alter table mcp_session_events alter column seq set not null`.execute(db);
  await db.schema
    .createIndex('mcp_session_events_seq')
    .on('mcp_session_events')
    .columns(['session_id', 'seq'])
    .unique()
    .execute();
  await db.schema.dropIndex('mcp_session_events_stream').execute();
  await db.schema
    .createIndex('mcp_session_events_stream')
    .on('mcp_session_events')
    .columns(['session_id', 'stream_id', 'seq'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('mcp_session_events_stream').execute();
  await db.schema
    .createIndex('mcp_session_events_stream')
    .on('mcp_session_events')
    .columns(['session_id', 'stream_id', 'event_id'])
    .execute();
  await db.schema.dropIndex('mcp_session_events_seq').execute();
  await db.schema.alterTable('mcp_session_events').dropColumn('seq').execute();
  await db.schema.alterTable('mcp_sessions').dropColumn('event_seq').execute();
}
