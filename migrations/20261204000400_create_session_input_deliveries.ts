import { sql, type Kysely } from 'kysely';

// 2025-11-25: which stream sent a task's pending input request to a session. A task's input request goes
// to the client once, on whichever stream claims it first (the session's GET stream or a tasks/result
// stream, on any instance); a claim is released when its stream ends before the answer came.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mcp_session_input_deliveries')
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('mcp_sessions.session_id').onDelete('cascade'),
    )
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('stream_id', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('mcp_session_input_deliveries_pk', ['session_id', 'task_id', 'key'])
    .execute();
  await db.schema
    .createIndex('mcp_session_input_deliveries_stream')
    .on('mcp_session_input_deliveries')
    .column('stream_id')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('mcp_session_input_deliveries').execute();
}
