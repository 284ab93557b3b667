import { sql, type Kysely } from 'kysely';

// 2025-11-25 era sessions (Mcp-Session-Id), so that any instance serves any session: the session, its
// resource subscriptions, the log of what its SSE streams carried (for Last-Event-ID resumption), and
// the client's answers to the server's requests (elicitation, sampling, roots), which may arrive at
// another instance than the one waiting for them.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mcp_sessions')
    .addColumn('session_id', 'text', (c) => c.primaryKey())
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('protocol_version', 'text', (c) => c.notNull())
    .addColumn('client_capabilities', 'jsonb', (c) => c.notNull())
    .addColumn('client_info', 'jsonb', (c) => c.notNull())
    .addColumn('log_level', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('ended_at', 'timestamptz')
    .execute();
  // The sweeper's scan: sessions idle past their expiry, and ended ones.
  await db.schema.createIndex('mcp_sessions_last_seen').on('mcp_sessions').column('last_seen_at').execute();

  await db.schema
    .createTable('mcp_session_subscriptions')
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('mcp_sessions.session_id').onDelete('cascade'),
    )
    .addColumn('uri', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('mcp_session_subscriptions_pk', ['session_id', 'uri'])
    .execute();
  await db.schema
    .createIndex('mcp_session_subscriptions_uri')
    .on('mcp_session_subscriptions')
    .column('uri')
    .execute();

  await db.schema
    .createTable('mcp_session_events')
    .addColumn('event_id', 'bigserial', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('mcp_sessions.session_id').onDelete('cascade'),
    )
    .addColumn('stream_id', 'text', (c) => c.notNull())
    .addColumn('message', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('mcp_session_events_stream')
    .on('mcp_session_events')
    .columns(['session_id', 'stream_id', 'event_id'])
    .execute();
  await db.schema
    .createIndex('mcp_session_events_age')
    .on('mcp_session_events')
    .column('created_at')
    .execute();

  await db.schema
    .createTable('mcp_session_responses')
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('mcp_sessions.session_id').onDelete('cascade'),
    )
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('response', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('mcp_session_responses_pk', ['session_id', 'request_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('mcp_session_responses').execute();
  await db.schema.dropTable('mcp_session_events').execute();
  await db.schema.dropTable('mcp_session_subscriptions').execute();
  await db.schema.dropTable('mcp_sessions').execute();
}
