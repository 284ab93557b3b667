import type { Kysely } from 'kysely';
import { sql } from 'kysely';

// Artifacts: the large outputs of a task (ctx.artifact, and a result too large to store inline), written
// as they are produced in chunks of at most 1 MiB, one row each, so that neither a writer nor a reader
// ever holds a whole artifact. An artifact is `writing` until its last chunk is in, then `complete` in the
// same statement that records its step; readers see complete ones only. Each chunk's insert is fenced by
// the artifact's attempt (the task's attempt when it began), so a lost attempt cannot add to it; what
// it left behind is deleted by the sweeper, in bounded batches, as are a purged task's artifacts.
// Bytes live in bytea (TOAST, stored out of line, not compressed: exports are often compressed already,
// and pglz would cost the writer CPU), not in large objects: rows are fenced, purged and granted like
// every other table, and a pooler in transaction mode carries them.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_artifacts')
    .addColumn('artifact_id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('writing', 'complete')`))
    .addColumn('chunk_size', 'integer', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('chunks', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('sha256', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .execute();
  // One complete artifact per name and task; attempts that lost their lease may leave `writing` ones.
  await sql`create unique index task_artifacts_name_idx on task_artifacts (task_id, name)
    where state = 'complete'`.execute(db);
  await sql`create index task_artifacts_task_idx on task_artifacts (task_id)`.execute(db);
  await sql`create index task_artifacts_writing_idx on task_artifacts (task_id) where state = 'writing'`.execute(
    db,
  );
  await db.schema
    .createTable('task_artifact_chunks')
    .addColumn('artifact_id', 'uuid', (c) =>
      c.notNull().references('task_artifacts.artifact_id').onDelete('cascade'),
    )
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('data', 'bytea', (c) => c.notNull())
    .addPrimaryKeyConstraint('task_artifact_chunks_pk', ['artifact_id', 'seq'])
    .execute();
  await sql`alter table task_artifact_chunks alter column data set storage external`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_artifact_chunks').execute();
  await db.schema.dropTable('task_artifacts').execute();
}
