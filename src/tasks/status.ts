import { TASK_STATUSES, type TaskStatus } from '../protocol/wire.ts';

export { TASK_STATUSES, type TaskStatus };

export const TERMINAL_STATUSES = [
  'completed',
  'failed',
  'cancelled',
] as const satisfies readonly TaskStatus[];
export const ACTIVE_STATUSES = ['working', 'input_required'] as const satisfies readonly TaskStatus[];

/** Every legal transition; terminal states have none. Each store UPDATE names its `from` set from here. */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = Object.freeze({
  working: ['input_required', 'completed', 'failed', 'cancelled'],
  input_required: ['working', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
});

export function isTerminal(status: TaskStatus): boolean {
  return (TERMINAL_STATUSES as readonly TaskStatus[]).includes(status);
}

export function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** The statuses a task may be in for a transition to `to`. */
export function fromStatuses(to: TaskStatus): TaskStatus[] {
  return TASK_STATUSES.filter((from) => canTransition(from, to));
}
