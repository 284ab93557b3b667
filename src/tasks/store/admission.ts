import { sql, type Kysely, type RawBuilder } from 'kysely';
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
  const { maxActiveTasks: max, ratePerSecond: rate } = quotas;
  const { rows } = await sql<{ active: number; metered: boolean; tokens: number | null }>`
    with active as (${activeTaskCount(principal)}), metered as (
      ${takeToken(principal, quotas, sql`${rate}::float8 > 0 and (select n from active) < ${max}::int`, sql`1`)}
    )
    select (select n from active) as active, exists (select 1 from metered) as metered,
      (select ${refilledTokens(quotas)} from principal_creation_buckets b where b.principal = ${principal}) as tokens`.execute(
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
export function admissionStatement(
  db: Kysely<Database>,
  principal: string,
  quotas: CreationQuotas,
): Statement {
  const { maxActiveTasks: max, ratePerSecond: rate } = quotas;
  const admitted = sql.id(ADMITTED_ACTIVE);
  const statement =
    rate <= 0
      ? sql`select n as ${admitted} from (${activeTaskCount(principal)}) a where n < ${max}::int`
      : takeToken(
          principal,
          quotas,
          sql`(${activeTaskCount(principal)}) < ${max}::int`,
          sql`(${activeTaskCount(principal)}) as ${admitted}`,
        );
  const compiled = statement.compile(db);
  return { text: compiled.sql, values: compiled.parameters, keep: ADMITTED_ACTIVE };
}

/** The principal's bucket's tokens now (alias `b`): refilled at the rate since its last take, up to the burst. */
const refilledTokens = ({ ratePerSecond: rate, burst }: CreationQuotas) =>
  sql`least(${burst}::float8, b.tokens + extract(epoch from now() - b.refilled_at) * ${rate}::float8)`;

/**
 * Takes a token from the principal's bucket (made full on its first take) when `when` holds and a token is
 * there; its row is `returning` when it took one, none when not.
 */
const takeToken = (
  principal: string,
  quotas: CreationQuotas,
  when: RawBuilder<unknown>,
  returning: RawBuilder<unknown>,
) => sql`insert into principal_creation_buckets as b (principal, tokens, refilled_at)
  select ${principal}, ${quotas.burst}::float8 - 1, now() where ${when}
  on conflict (principal) do update set tokens = ${refilledTokens(quotas)} - 1, refilled_at = now()
  where ${refilledTokens(quotas)} >= 1
  returning ${returning}`;
