// The tool API of child tasks (ctx.callTool, ctx.spawn, ctx.join, ctx.joinFirst): handles, options, and
// the error a child that did not complete arrives as.
import type { CallToolResult } from '../core/wire.ts';
import { markClass } from '../core/marks.ts';
import { NonRetryableError } from './retry.ts';

/** A child task started with `ctx.spawn`: pass it to `ctx.join` or `ctx.joinFirst`. */
export interface ChildHandle {
  /** The child's task id (an ordinary task of the same principal: `tasks/get` works on it). */
  readonly taskId: string;
  /** Its name within the parent (ChildOptions.name, or `<tool>#<n>`). */
  readonly name: string;
  readonly toolName: string;
}

/** How a child task is started. */
export interface ChildOptions {
  /**
   * The child's name within its parent, unique like a step's: the parent's replays find the same child
   * by it. Default `<tool>#<n>`: the n-th child of that tool this run of the handler starts (0, 1…),
   * which holds as long as the handler starts its children in the same order on every replay.
   */
  name?: string;
  /**
   * Outlives its parent: not cancelled when the parent is cancelled or ends before it. Default false: a
   * parent that ends (any way) cancels its unfinished children.
   */
  detached?: boolean;
}

/** What `ctx.joinFirst` returns: the child that ended first, and its result. */
export interface FirstChild {
  handle: ChildHandle;
  /** Its index in the handles given to `joinFirst`. */
  index: number;
  result: CallToolResult;
}

/** How a child that did not complete ended. */
export type ChildFailureStatus = 'failed' | 'cancelled';

/**
 * A child task that failed, was cancelled or expired, as `ctx.callTool` / `ctx.join` / `ctx.joinFirst`
 * throw it. Catch it to go on without the child; uncaught, it fails the parent at once (it is not
 * retried: the child's own retry policy already ran). A child's tool error (`isError: true`) is a
 * completed child, returned as its result.
 */
export class ChildTaskFailedError extends NonRetryableError {
  override readonly name = 'ChildTaskFailedError';
  constructor(
    readonly childTaskId: string,
    readonly toolName: string,
    readonly status: ChildFailureStatus,
    /** The child's error, as `tasks/get` gives it (JSON-RPC code and message), when it failed. */
    readonly error: { code: number; message: string } | undefined,
    reason: string,
  ) {
    super(`child task ${childTaskId} (${toolName}) ${status}: ${reason}`);
  }
}
// (A tools module may catch it from another copy of the package than the one that threw it.)
markClass(ChildTaskFailedError, 'ChildTaskFailedError');
