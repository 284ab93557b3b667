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

/** An idempotency key names an earlier create of a different tool or different arguments. */
export class IdempotencyConflictError extends DomainError {
  override readonly name = 'IdempotencyConflictError';
  constructor() {
    super('Idempotency key reused for a different request');
  }

  toProtocolError(): ProtocolError {
    return new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      'This idempotency key was used for a different tool call (another tool or other arguments)',
    );
  }
}

/**
 * A task interaction its task's state does not allow (SEP-2669 draft's error summary: pause a task that
 * is not working, resume one that is not paused, steer one that ended or does not read steering).
 */
export class InvalidTaskStateError extends DomainError {
  override readonly name = 'InvalidTaskStateError';

  toProtocolError(): ProtocolError {
    return new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid params: ${this.message}`);
  }
}
