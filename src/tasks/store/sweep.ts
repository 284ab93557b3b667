import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES } from '../status.ts';
import { TIMED_OUT_EXISTS } from './timeout.ts';

export const EXPIRED_ERROR = { code: -32603, message: 'Task has expired' } as const;

/**
 * Marks up to `limit` expired non-terminal tasks `failed` ("Task has expired"). Setting the cancel flag
 * too makes a running attempt stop. SKIP LOCKED lets several sweepers run at once.
 */
export async function expireTasks(db: Kysely<Database>, limit: number): Promise<string[]> {
  const rows = await db
    .updateTable('tasks')
    .set({
      status: 'failed',
      error: JSON.stringify(EXPIRED_ERROR),
      status_message: EXPIRED_ERROR.message,
      paused_at: null,
      cancel_requested_at: sql`coalesce(cancel_requested_at, now())`,
      leased_by: null,
      lease_expires_at: null,
      last_updated_at: sql`now()`,
    })
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('expires_at', '<=', sql<Date>`now()`)
        // (A map's items end with their parent: see the migration add_task_map_items.)
        .where('parent_task_id', 'is', null)
        .where('status', 'in', ACTIVE_STATUSES)
        .orderBy('expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .where('status', 'in', ACTIVE_STATUSES)
    .returning('task_id')
    .execute();
  return rows.map((r) => r.task_id);
}

/** Deletes up to `limit` finished tasks whose TTL ran out more than `graceMs` ago (with their rows). */
export async function purgeTasks(db: Kysely<Database>, limit: number, graceMs: number): Promise<number> {
  const rows = await db
    .deleteFrom('tasks')
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('expires_at', '<=', sql<Date>`now() - ${graceMs} * interval '1 millisecond'`)
        .where('parent_task_id', 'is', null)
        .where('status', 'in', TERMINAL_STATUSES)
        // Artifacts go first, in bounded batches (purgeArtifactChunks): never in one cascading delete.
        .where((eb) =>
          eb.not(
            eb.exists(
              eb
                .selectFrom('task_artifacts as a')
                .select('a.task_id')
                .whereRef('a.task_id', '=', 'tasks.task_id'),
            ),
          ),
        )
        .orderBy('expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returning('task_id')
    .execute();
  return rows.length;
}

/** Chunks (of at most 1 MiB) the sweeper deletes per statement: each statement's work and WAL stay bounded. */
export const ARTIFACT_PURGE_CHUNKS = 64;

/**
 * The artifacts to delete: those of tasks the purge is due to delete, and `writing` ones whose attempt
 * ended (it lost its lease, crashed, or the task moved on or finished) and so can never complete.
 */
const doomedArtifacts = (graceMs: number) => sql`
  select a.artifact_id from task_artifacts a join tasks t on t.task_id = a.task_id
   where t.expires_at <= now() - ${graceMs} * interval '1 millisecond' and t.parent_task_id is null
     and t.status in (${sql.join([...TERMINAL_STATUSES])})
  union all
  select a.artifact_id from task_artifacts a join tasks t on t.task_id = a.task_id
   where a.state = 'writing' and (t.status <> 'working' or t.attempt > a.attempt)`;

/** Deletes up to `limit` chunks of doomed artifacts (see doomedArtifacts); how many. */
export async function purgeArtifactChunks(
  db: Kysely<Database>,
  limit: number,
  graceMs: number,
): Promise<number> {
  const result = await sql`
    delete from task_artifact_chunks c using (
      select artifact_id, seq from task_artifact_chunks
       where artifact_id in (${doomedArtifacts(graceMs)})
       limit ${limit} for update skip locked
    ) v where c.artifact_id = v.artifact_id and c.seq = v.seq`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Deletes up to `limit` doomed artifacts that have no chunks left; how many. */
export async function purgeEmptyArtifacts(
  db: Kysely<Database>,
  limit: number,
  graceMs: number,
): Promise<number> {
  const result = await sql`
    delete from task_artifacts a using (
      select artifact_id from task_artifacts d
       where artifact_id in (${doomedArtifacts(graceMs)})
         and not exists (select 1 from task_artifact_chunks c where c.artifact_id = d.artifact_id)
       limit ${limit} for update skip locked
    ) v where a.artifact_id = v.artifact_id`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** One cheap indexed probe: is there anything for a sweep to do? Keeps idle workers nearly silent. */
export async function sweepNeeded(db: Kysely<Database>, graceMs: number): Promise<boolean> {
  const row = await sql<{ needed: boolean }>`
    select exists (select 1 from tasks where status = 'working' and lease_expires_at < now())
        or exists (select 1 from tasks where expires_at <= now() and parent_task_id is null
                                          and status in ('working', 'input_required'))
        or ${TIMED_OUT_EXISTS}
        or exists (select 1 from tasks where expires_at <= now() - ${graceMs} * interval '1 millisecond'
                                          and parent_task_id is null and status in ('completed', 'failed', 'cancelled'))
        or exists (select 1 from task_artifacts a join tasks t on t.task_id = a.task_id
                    where a.state = 'writing' and (t.status <> 'working' or t.attempt > a.attempt))
       as needed`.execute(db);
  return row.rows[0]?.needed === true;
}
