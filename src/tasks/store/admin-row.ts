// A task as the operator sees it (every column an operator needs, whoever owns it): the columns the
// operator's reads select, and their mapping to fields. (For admin-list.ts and admin-task.ts.)
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

export interface AdminTask extends TaskView {
  principal: string;
  toolName: string;
  attempt: number;
  failures: number;
  leasedBy: string | null;
  leaseExpiresAt: Date | null;
  cancelRequestedAt: Date | null;
  expiresAt: Date | null;
  /** Set while the task is paused (still `working`): its attempts ran out under `onExhausted: 'pause'`. */
  pausedAt: Date | null;
}

export const ADMIN_COLUMNS = [
  ...TASK_VIEW_COLUMNS,
  'principal',
  'tool_name',
  'attempt',
  'failures',
  'leased_by',
  'lease_expires_at',
  'cancel_requested_at',
  'expires_at',
  'paused_at',
] as const;

export type AdminRow = Parameters<typeof toTaskView>[0] & {
  principal: string;
  tool_name: string;
  attempt: number;
  failures: number;
  leased_by: string | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  expires_at: Date | null;
  paused_at: Date | null;
};

export function toAdminTask(row: AdminRow): AdminTask {
  return {
    ...toTaskView(row),
    principal: row.principal,
    toolName: row.tool_name,
    attempt: row.attempt,
    failures: row.failures,
    leasedBy: row.leased_by,
    leaseExpiresAt: row.lease_expires_at,
    cancelRequestedAt: row.cancel_requested_at,
    expiresAt: row.expires_at,
    pausedAt: row.paused_at,
  };
}
