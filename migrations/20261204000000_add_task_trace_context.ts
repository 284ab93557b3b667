import type { Kysely } from 'kysely';

// The W3C trace context of the request that created a task ({traceparent, tracestate?, baggage?}), so that
// each run leg, on any worker and after any crash, continues the same trace. Null when nothing was traced.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tasks').addColumn('trace_context', 'jsonb').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('tasks').dropColumn('trace_context').execute();
}
