import { TASK_STATUSES, type TaskStatus } from '../core/wire.ts';

export { TASK_STATUSES, type TaskStatus };

export const TERMINAL_STATUSES = [
  'completed',
  'failed',
  'cancelled',
] as const satisfies readonly TaskStatus[];
/** Every guarded store UPDATE that ends or cancels a task names these as its `from` set. */
export const ACTIVE_STATUSES = ['working', 'input_required'] as const satisfies readonly TaskStatus[];

export function isTerminal(status: TaskStatus): boolean {
  return (TERMINAL_STATUSES as readonly TaskStatus[]).includes(status);
}
