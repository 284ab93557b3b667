import { sql, type RawBuilder } from 'kysely';

/**
 * A principal's active top-level tasks (`working`, `input_required`), as the triggers on `tasks` keep them
 * in `principal_active_tasks` (migration 20261212000000): a sum of at most 32 rows, however many tasks the
 * principal holds. A subquery: `principal` is a value or a reference to the outer query's column.
 */
export const activeTaskCount = (principal: string | RawBuilder<unknown>) =>
  sql<number>`select coalesce(sum(active), 0)::int as n from principal_active_tasks where principal = ${principal}`;
