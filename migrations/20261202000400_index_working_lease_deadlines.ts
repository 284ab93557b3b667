import { sql, type Kysely } from 'kysely';

// lease_expires_at is now also the claim deadline of a queued run (no lease holder): the sweeper's
// probe and both of its scans (lapsed leases, stuck deliveries) look at working tasks by it.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('tasks_lease_expires_at_idx').ifExists().execute();
  await db.schema
    .createIndex('tasks_working_lease_expires_at_idx')
    .on('tasks')
    .column('lease_expires_at')
    .where(sql.ref('status'), '=', 'working')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('tasks_working_lease_expires_at_idx').execute();
  await db.schema
    .createIndex('tasks_lease_expires_at_idx')
    .on('tasks')
    .column('lease_expires_at')
    .where(sql.ref('leased_by'), 'is not', null)
    .execute();
}
