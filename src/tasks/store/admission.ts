import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { QuotaExceededError } from '../../core/errors.ts';

/** What one principal may create: cluster-wide, counted in Postgres. */
export interface CreationQuotas {
  /** Non-terminal top-level tasks (`working`, `input_required`) a principal may hold. */
  maxActiveTasks: number;
  /** Task creations per second, refilled continuously; 0 turns the rate limit off. */
  ratePerSecond: number;
  /** Creations allowed at once from a full bucket. */
  burst: number;
}

/**
 * Admits one task creation of `principal`, or throws QuotaExceededError naming the limit. One statement:
 * it counts the principal's active tasks (up to the quota) and, when under it, takes a token from the
 * principal's bucket (a row per principal; concurrent creates queue on it, so the rate holds across
 * instances). Returns the active count: the task's rank, which orders its run behind lighter principals'.
 * A refused create takes no token.
 */
export async function admitCreation(
  db: Kysely<Database>,
  principal: string,
  quotas: CreationQuotas,
): Promise<{ rank: number }> {
  const { maxActiveTasks: max, ratePerSecond: rate, burst } = quotas;
  const refilled = sql`least(${burst}::float8, b.tokens + extract(epoch from now() - b.refilled_at) * ${rate}::float8)`;
  const { rows } = await sql<{ active: number; metered: boolean; tokens: number | null }>`
    with active as (
      select count(*)::int as n from (
        select 1 from tasks
        where principal = ${principal} and parent_task_id is null and status in ('working', 'input_required')
        limit ${max}::int
      ) held
    ), metered as (
      insert into principal_creation_buckets as b (principal, tokens, refilled_at)
      select ${principal}, ${burst}::float8 - 1, now()
      where ${rate}::float8 > 0 and (select n from active) < ${max}::int
      on conflict (principal) do update set tokens = ${refilled} - 1, refilled_at = now()
      where ${refilled} >= 1
      returning 1
    )
    select (select n from active) as active, exists (select 1 from metered) as metered,
      (select ${refilled} from principal_creation_buckets b where b.principal = ${principal}) as tokens`.execute(
    db,
  );
  const row = rows[0]!;
  if (row.active >= max) {
    throw new QuotaExceededError(
      'MAX_ACTIVE_TASKS_PER_PRINCIPAL',
      max,
      `Too many active tasks: finish or cancel some before creating more`,
    );
  }
  if (rate > 0 && !row.metered) {
    const retryAfterMs = ((1 - (row.tokens ?? 0)) / rate) * 1000;
    throw new QuotaExceededError(
      'TASK_CREATE_RATE_PER_SECOND',
      rate,
      'Creating tasks too fast',
      Math.max(1, retryAfterMs),
    );
  }
  return { rank: row.active };
}
