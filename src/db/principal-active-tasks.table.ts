/**
 * A principal's active (working, input_required) top-level tasks, kept by triggers on `tasks` over 32
 * stripes per principal (see migration 20261212000000): the principal's count is the sum of its rows.
 */
export interface PrincipalActiveTasksTable {
  principal: string;
  /** The stripe of the changes counted here: the changing connection's `pg_backend_pid() & 31` (a stripe alone may be negative). */
  stripe: number;
  active: number;
}
