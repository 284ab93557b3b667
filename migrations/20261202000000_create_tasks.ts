import { sql, type Kysely } from 'kysely';

// Migrations import nothing from src/: they must not depend on today's types.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('tasks')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('principal', 'text', (c) => c.notNull())
    .addColumn('tool_name', 'text', (c) => c.notNull())
    .addColumn('arguments', 'jsonb', (c) => c.notNull())
    .addColumn('prepared', 'jsonb')
    .addColumn('client_capabilities', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('working', 'input_required', 'completed', 'failed', 'cancelled')`),
    )
    .addColumn('status_message', 'text')
    .addColumn('result', 'jsonb')
    .addColumn('error', 'jsonb')
    .addColumn('ttl_ms', 'bigint')
    .addColumn('poll_interval_ms', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz')
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('leased_by', 'text')
    .addColumn('lease_expires_at', 'timestamptz')
    .addColumn('cancel_requested_at', 'timestamptz')
    .execute();

  // The sweeper's scans: expired tasks, oldest first.
  await db.schema
    .createIndex('tasks_expires_at_idx')
    .on('tasks')
    .column('expires_at')
    .where(sql.ref('expires_at'), 'is not', null)
    .execute();

  // The lease reaper's scan: running attempts whose lease lapsed.
  await db.schema
    .createIndex('tasks_lease_expires_at_idx')
    .on('tasks')
    .column('lease_expires_at')
    .where(sql.ref('leased_by'), 'is not', null)
    .execute();

  await db.schema
    .createTable('task_input_requests')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request', 'jsonb', (c) => c.notNull())
    .addColumn('response', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('answered_at', 'timestamptz')
    .addPrimaryKeyConstraint('task_input_requests_pkey', ['task_id', 'key'])
    .execute();

  await db.schema
    .createTable('task_steps')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('output', 'jsonb', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('task_steps_pkey', ['task_id', 'name'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_steps').execute();
  await db.schema.dropTable('task_input_requests').execute();
  await db.schema.dropTable('tasks').execute();
}
