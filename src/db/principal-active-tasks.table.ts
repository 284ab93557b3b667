/**
 * A principal's active (working, input_required) top-level tasks, kept by triggers on `tasks` over 16
 * stripes per principal (see migration 20261212000000): the principal's count is the sum of its rows.
 */
export interface PrincipalActiveTasksTable {
  principal: string;
  /** The stripe of the tasks counted here: `hashtext(task_id) & 15`. */
  stripe: number;
  active: number;
}
