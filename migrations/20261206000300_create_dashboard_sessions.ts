import type { Kysely } from 'kysely';

// The dashboard's sign-ins, server-side: a random cookie per sign-in (its SHA-256 stored, never the
// cookie), its own CSRF token, an expiry; sign-out deletes the row, so a copied cookie dies with it.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('dashboard_sessions')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('csrf', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('dashboard_sessions').execute();
}
