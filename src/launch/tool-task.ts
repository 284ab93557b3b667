import type { NewTask, TaskTraits } from '../tasks/store/create.ts';
import type { Idempotency } from '../tasks/store/idempotency.ts';
import { assertSize, assertStorable } from '../core/limits.ts';
import { describeIssues } from '../core/errors.ts';
import type { ClientCapabilities, JsonObject } from '../core/wire.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { concurrencyOf, debounceOf, rateLimitOf } from '../tools/concurrency-key.ts';
import { unknownArgumentsMessage } from '../tools/unknown-arguments.ts';

/** What a task gets where its tool says nothing: the server's TASK_TTL_MS and TASK_POLL_INTERVAL_MS. */
export interface TaskDefaults {
  ttlMs: number | null;
  pollIntervalMs: number;
}

/** Arguments a tool refuses (names it does not take, or its zod schema's issues), as one readable line per issue. */
export class InvalidToolArgumentsError extends Error {
  constructor(
    readonly toolName: string,
    message: string,
  ) {
    super(message);
    this.name = 'InvalidToolArgumentsError';
  }
}

/**
 * Checks `rawArgs` against the tool's schema (the same two checks as a client's `tools/call`: unknown
 * argument names first, then zod) and returns them parsed; InvalidToolArgumentsError otherwise.
 */
export function parseToolArguments(tool: ToolDefinition, rawArgs: JsonObject): unknown {
  const unknown = unknownArgumentsMessage(tool.name, tool.inputSchema, rawArgs);
  if (unknown !== undefined) throw new InvalidToolArgumentsError(tool.name, unknown);
  const parsed = tool.inputSchema.safeParse(rawArgs);
  if (!parsed.success) {
    throw new InvalidToolArgumentsError(
      tool.name,
      `Invalid arguments for tool ${tool.name}:\n${describeIssues(parsed.error)}`,
    );
  }
  return parsed.data;
}

/** Who starts the task and how: everything of a NewTask that does not come from the tool itself. */
export interface ToolTaskStart extends TaskTraits {
  principal: string;
  defaults: TaskDefaults;
  /** The arguments as `parseToolArguments` returned them (for the tool's concurrency key). */
  parsedArgs: unknown;
  prepared?: unknown;
  clientCapabilities?: ClientCapabilities | undefined;
  idempotency?: Idempotency | undefined;
  traceContext?: NewTask['traceContext'];
}

/**
 * Refuses what cannot be stored with a task (ProtocolError -32602): JSON Postgres would refuse, or
 * arguments and client capabilities over `maxBytes` together. Checked before anything else runs.
 */
export function assertStorableArguments(
  rawArgs: JsonObject,
  clientCapabilities: unknown,
  maxBytes: number,
): void {
  assertStorable('arguments', rawArgs);
  assertStorable('clientCapabilities', clientCapabilities);
  // Both are stored with the task: together they are held to the arguments' limit.
  assertSize('arguments with clientCapabilities', { arguments: rawArgs, clientCapabilities }, maxBytes);
}

/**
 * The task a call of `tool` with `rawArgs` creates, whoever starts it (a client's `tools/call`, a parent
 * task, a schedule, a trigger): the tool's TTL, poll interval, flow control (concurrency, rate limit, debounce, timeout) and secret arguments over
 * the server's defaults. Check the arguments first (parseToolArguments, assertStorableArguments).
 */
export function toolTaskOf(
  tool: ToolDefinition,
  rawArgs: JsonObject,
  start: ToolTaskStart,
): Omit<NewTask, 'taskId'> {
  const { principal, defaults, parsedArgs, ...rest } = start;
  return {
    ...rest,
    principal,
    toolName: tool.name,
    arguments: rawArgs,
    prepared: start.prepared,
    clientCapabilities: start.clientCapabilities ?? {},
    ttlMs: tool.ttlMs === undefined ? defaults.ttlMs : tool.ttlMs,
    pollIntervalMs: tool.pollIntervalMs ?? defaults.pollIntervalMs,
    concurrency: concurrencyOf(tool, parsedArgs, principal),
    rateLimit: rateLimitOf(tool, parsedArgs, principal),
    debounce: debounceOf(tool, parsedArgs, principal),
    timeoutMs: tool.timeoutMs,
    secretArguments: tool.secretArguments,
  };
}
