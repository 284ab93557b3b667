import { sql, type Kysely } from 'kysely';
import type { StoreStats } from '../../core/metrics.ts';
import type { Database } from '../../db/database.ts';
import { RUN_QUEUE } from '../../queue/boss.ts';
import { ACTIVE_STATUSES, TASK_STATUSES } from '../status.ts';
import { isStuck } from './attempt-ends.ts';

/**
 * The cluster-wide numbers behind the store gauges, in one round trip: tasks by status (paused ones as
 * `paused`), due runs waiting
 * in pg-boss and the oldest one's age, runs scheduled for later, and active tasks past their TTL that no
 * sweep has expired yet, the bytes of complete artifacts, and the legs marked stuck.
 */
export async function readStoreStats(db: Kysely<Database>, bossSchema = 'pgboss'): Promise<StoreStats> {
  const job = sql.table(`${bossSchema}.job`);
  const { rows } = await sql<{ kind: string; key: string | null; n: string; age: number | null }>`
    select 'status' as kind, case when paused_at is not null then 'paused' else status end as key,
           count(*)::text as n, null::float8 as age
      from tasks where parent_task_id is null group by 2
    union all
    select 'waiting', null, count(*)::text,
           coalesce(extract(epoch from now() - min(start_after)), 0)::float8
      from ${job}
     where name = ${RUN_QUEUE} and state in ('created', 'retry') and start_after <= now()
    union all
    select 'delayed', null, count(*)::text, null
      from ${job}
     where name = ${RUN_QUEUE} and state in ('created', 'retry') and start_after > now()
    union all
    select 'expired', null, count(*)::text, null
      from tasks
     where expires_at <= now() and parent_task_id is null and status in (${sql.join([...ACTIVE_STATUSES])})
    union all
    select 'artifacts', null, coalesce(sum(size), 0)::text, null
      from task_artifacts where state = 'complete'
    union all
    select 'stuck', null, count(*)::text, null
      from task_attempts where ${isStuck}
  `.execute(db);
  const stats: StoreStats = {
    // Every status is reported, 0 included (an alert on one must not see it vanish), and `paused`: the
    // `working` tasks that are paused (then not counted as `working`).
    tasksByStatus: Object.fromEntries([...TASK_STATUSES, 'paused'].map((s) => [s, 0])),
    runsWaiting: 0,
    runsDelayed: 0,
    oldestWaitingRunSeconds: 0,
    expiredNotSwept: 0,
    artifactBytes: 0,
    stuckLegs: 0,
  };
  for (const row of rows) {
    if (row.kind === 'status' && row.key !== null) stats.tasksByStatus[row.key] = Number(row.n);
    else if (row.kind === 'waiting') {
      stats.runsWaiting = Number(row.n);
      stats.oldestWaitingRunSeconds = Math.max(0, row.age ?? 0);
    } else if (row.kind === 'delayed') stats.runsDelayed = Number(row.n);
    else if (row.kind === 'expired') stats.expiredNotSwept = Number(row.n);
    else if (row.kind === 'artifacts') stats.artifactBytes = Number(row.n);
    else if (row.kind === 'stuck') stats.stuckLegs = Number(row.n);
  }
  return stats;
}
