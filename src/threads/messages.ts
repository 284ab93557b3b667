// What the HTTP process and a sync-call thread say to each other over the thread's port.
import { ProtocolError } from '../core/errors.ts';
import type {
  CallToolResult,
  ClientCapabilities,
  InputRequests,
  InputResponses,
  JsonObject,
  Notification,
} from '../core/wire.ts';
import type { LogLevel } from '../tools/define.ts';
import { InputRequiredSignal } from '../tools/request-backend.ts';

/** The part of a call's context that crosses to the thread (the rest is asked of the HTTP process). */
export interface CallContext {
  principal: string;
  clientCapabilities: ClientCapabilities;
  responses: InputResponses;
  progressToken?: string | number | undefined;
  logLevel?: LogLevel | undefined;
  /** Whether the call has a stream for notifications, and one it can close early. */
  canNotify: boolean;
  canCloseStream: boolean;
}

/** What a handler may ask of the HTTP process while it runs; each is answered by an `answer`. */
export type Ask =
  | { op: 'notify'; notification: Notification }
  | { op: 'closeStream' }
  | { op: 'listChanged'; kind: 'tools' | 'prompts' | 'resources' }
  | { op: 'resourceUpdated'; uri: string };

export type ToThread =
  | { type: 'call'; id: number; tool: string; arguments: JsonObject; ctx: CallContext }
  | { type: 'abort'; id: number; reason: string }
  | { type: 'answer'; seq: number; error?: string | undefined };

/** How a handler's throw crosses back: the errors the HTTP process tells apart, and any other by its message. */
export type ThrownError =
  | { kind: 'protocol'; code: number; message: string; data?: unknown }
  | { kind: 'input'; inputRequests: InputRequests }
  | { kind: 'error'; message: string };

export type FromThread =
  | { type: 'ready'; tools: string[] }
  | { type: 'load-failed'; message: string }
  | { type: 'ask'; id: number; seq: number; ask: Ask }
  /** `ms`: how long the handler's run took on the thread. */
  | { type: 'done'; id: number; result: CallToolResult; ms: number }
  | { type: 'failed'; id: number; error: ThrownError; ms: number };

export function encodeThrown(err: unknown): ThrownError {
  if (err instanceof ProtocolError) {
    return { kind: 'protocol', code: err.code, message: err.message, data: err.data };
  }
  if (err instanceof InputRequiredSignal) return { kind: 'input', inputRequests: err.inputRequests };
  return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
}

export function decodeThrown(error: ThrownError): Error {
  switch (error.kind) {
    case 'protocol':
      return new ProtocolError(error.code, error.message, error.data);
    case 'input':
      return new InputRequiredSignal(error.inputRequests);
    case 'error':
      return new Error(error.message);
  }
}
