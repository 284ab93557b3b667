import { sql, type Kysely } from 'kysely';

// The per-principal session quota (MAX_SESSIONS_PER_PRINCIPAL) counts a principal's live sessions at
// every initialize.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index mcp_sessions_principal_live_idx on mcp_sessions (principal, last_seen_at)
    where ended_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index mcp_sessions_principal_live_idx`.execute(db);
}
