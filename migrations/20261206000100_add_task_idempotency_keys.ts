import { sql, type Kysely } from 'kysely';

// Idempotent create: a client that retries `tools/call` after losing the answer names the same key (its
// `_meta`, or the tool's own `idempotencyKey`), and gets the task the first call created. The key is
// unique per principal for as long as that task is stored; the fingerprint (the tool and its arguments)
// tells a retry from a different request that reuses the key.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('idempotency_key', 'text')
    .addColumn('idempotency_fingerprint', 'text')
    .execute();
  await sql`create unique index tasks_idempotency_key_idx on tasks (principal, idempotency_key)
    where idempotency_key is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index tasks_idempotency_key_idx`.execute(db);
  await db.schema
    .alterTable('tasks')
    .dropColumn('idempotency_key')
    .dropColumn('idempotency_fingerprint')
    .execute();
}
