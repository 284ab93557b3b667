import { DomainError, ProtocolError, ProtocolErrorCode } from '../core/errors.ts';

/** No tool of this name is registered. */
export class ToolNotFoundError extends DomainError {
  override readonly name = 'ToolNotFoundError';
  constructor(readonly toolName: string) {
    super(`Unknown tool: ${toolName}`);
  }

  toProtocolError(): ProtocolError {
    return new ProtocolError(ProtocolErrorCode.InvalidParams, this.message);
  }
}
