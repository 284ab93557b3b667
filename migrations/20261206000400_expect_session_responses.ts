import type { Kysely } from 'kysely';

// A 2025-11-25 session's answers to the server's own requests are kept only for requests the server
// sent: each is recorded (response null) before it goes out, and an answer fills its row. An answer to
// an id the server never issued finds no row and is dropped, so it stores nothing.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('mcp_session_responses')
    .alterColumn('response', (c) => c.dropNotNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.deleteFrom('mcp_session_responses').where('response', 'is', null).execute();
  await db.schema
    .alterTable('mcp_session_responses')
    .alterColumn('response', (c) => c.setNotNull())
    .execute();
}
