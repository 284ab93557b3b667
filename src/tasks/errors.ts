import { DomainError, ProtocolError, ProtocolErrorCode } from '../core/errors.ts';

/** No task with this id is visible to the caller (absent, purged, or another principal's). */
export class TaskNotFoundError extends DomainError {
  override readonly name = 'TaskNotFoundError';
  constructor(readonly taskId: string) {
    super('Task not found');
  }

  toProtocolError(): ProtocolError {
    return new ProtocolError(ProtocolErrorCode.InvalidParams, 'Failed to retrieve task: Task not found');
  }
}
