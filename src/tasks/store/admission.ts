import { sql, type Kysely } from 'kysely';
import { activeTaskCount } from '../../db/active-tasks.ts';
import type { Database } from '../../db/database.ts';
import { QuotaExceededError } from '../../core/errors.ts';
import type { Statement } from '../../db/statements.ts';

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
 * it reads the principal's active tasks and, when under the quota, takes a token from the
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
    with active as (${activeTaskCount(principal)}), metered as (
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

/** The column in which the create's statement returns the principal's active count (its rank). */
export const ADMITTED_ACTIVE = 'admitted_active';

/**
 * The admission as a part of the create's own statement (`withStatements`): a row, the principal's active
 * count before this task, when the creation is admitted (a token taken when the rate is metered); none when
 * refused, and then the statement fails and writes nothing — `admitCreation` says why. It reads the counts
 * at the statement's start, so the task it creates is not among them.
 */
export function admissionStatement(principal: string, quotas: CreationQuotas): Statement {
  const { maxActiveTasks: max, ratePerSecond: rate, burst } = quotas;
  const active = `(select coalesce(sum(active), 0)::int from principal_active_tasks where principal = $1)`;
  if (rate <= 0) {
    return {
      text: `select n as ${ADMITTED_ACTIVE} from (select ${active} as n) a where n < $2::int`,
      values: [principal, max],
      keep: ADMITTED_ACTIVE,
    };
  }
  const refilled = `least($3::float8, b.tokens + extract(epoch from now() - b.refilled_at) * $4::float8)`;
  return {
    text: `insert into principal_creation_buckets as b (principal, tokens, refilled_at)
      select $1, $3::float8 - 1, now() where ${active} < $2::int
      on conflict (principal) do update set tokens = ${refilled} - 1, refilled_at = now()
      where ${refilled} >= 1
      returning ${active} as ${ADMITTED_ACTIVE}`,
    values: [principal, max, burst, rate],
    keep: ADMITTED_ACTIVE,
  };
}
