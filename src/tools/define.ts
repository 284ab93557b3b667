import type { z } from 'zod';
import type { ServerEvents } from '../core/server-events.ts';
import type {
  CallToolResult,
  ClientCapabilities,
  ElicitResult,
  InputRequests,
  JsonObject,
  LOG_LEVELS,
} from '../core/wire.ts';

/**
 * Whether a call of the tool becomes a task: `required` (clients that did not declare the tasks extension
 * get -32021), `optional` (a task when the client declared the extension, a synchronous result
 * otherwise) or `never` (always synchronous).
 */
export type TaskSupport = 'required' | 'optional' | 'never';

export type LogLevel = (typeof LOG_LEVELS)[number];

/** Parameters of a form- or URL-mode `elicitation/create` request. */
export type ElicitParams = JsonObject & { message: string };

/** What a handler sees while it runs, as a task on a worker or synchronously on an HTTP instance. */
export interface ToolContext {
  /** The authenticated principal the call belongs to. */
  readonly principal: string;
  /** The task's id; `undefined` when the call runs synchronously. */
  readonly taskId: string | undefined;
  /** Capabilities the client declared on the request that started the call. */
  readonly clientCapabilities: ClientCapabilities;
  /** What the tool's `prepare` phase returned, if it has one. */
  readonly prepared: unknown;
  /** Raise list-changed or resource-updated notifications for `subscriptions/listen` streams on every instance. */
  readonly events: ServerEvents;
  /** Fires on `tasks/cancel`, on lost leases, or when the client closes a synchronous call's stream. */
  readonly signal: AbortSignal;
  /** Sets the task's `statusMessage` (throttled writes). A no-op for synchronous calls. */
  status(message: string): void;
  /** Sends `notifications/progress` on a synchronous call's SSE stream when the client asked for progress. */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /** Sends `notifications/message` on a synchronous call's SSE stream when `level` is at or above the request's log level. */
  log(level: LogLevel, data: unknown, logger?: string): Promise<void>;
  /**
   * Runs `fn` once per task: its result is checkpointed in Postgres and returned without running `fn`
   * again when the handler is replayed after input, a retry or a crash. Code outside steps must be
   * deterministic; a step in flight when a worker dies may run twice, so steps must be idempotent.
   */
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
  /**
   * Asks the client for input. Keys must be unique over the task's lifetime and stable across replays:
   * the same key always names the same request. Resolves once every key has been answered; until then a
   * task waits in `input_required` without holding a worker, and a synchronous call answers with an
   * MRTR `InputRequiredResult`.
   */
  input(requests: InputRequests): Promise<Record<string, JsonObject>>;
  /** `input` for one form elicitation. */
  elicit(key: string, params: ElicitParams): Promise<ElicitResult>;
  /** `input` for one `sampling/createMessage` request. */
  sample(key: string, params: JsonObject): Promise<JsonObject>;
  /** `input` for one `roots/list` request. */
  listRoots(key: string): Promise<JsonObject>;
  /**
   * Ends the response stream of a synchronous call early; the handler goes on, and the client
   * resumes the stream with `Last-Event-ID` to get what follows (2025-11-25 SSE polling, e.g. to free
   * a proxy's connection during a long call). Does nothing where the call has no resumable stream.
   */
  closeStream(): void;
}

/** The context of a `prepare` phase: synchronous, before any task exists. */
export type PrepareContext = Omit<ToolContext, 'taskId' | 'prepared' | 'status'>;

/** A tool: its wire description, its zod input schema and its handler. */
export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  name: string;
  title?: string;
  description: string;
  inputSchema: S;
  /**
   * The JSON Schema published in tools/list, when it must be exactly this one (e.g. 2020-12 features zod
   * does not express); arguments are still validated by `inputSchema`. Default: derived from `inputSchema`.
   */
  inputJsonSchema?: JsonObject;
  /** Default `never`. */
  taskSupport?: TaskSupport;
  /** Task time-to-live; `null` for unlimited. Default: the server's TASK_TTL_MS. */
  ttlMs?: number | null;
  /** Suggested polling interval for this tool's tasks. Default: the server's TASK_POLL_INTERVAL_MS. */
  pollIntervalMs?: number;
  annotations?: JsonObject;
  /**
   * Runs synchronously on the HTTP instance before a task is created, and may gather input over MRTR
   * (`ctx.input` answers with an `InputRequiredResult` until the client has answered). Its JSON result
   * is stored with the task as `ctx.prepared`.
   */
  prepare?: (args: z.output<S>, ctx: PrepareContext) => Promise<unknown>;
  handler: (args: z.output<S>, ctx: ToolContext) => Promise<CallToolResult> | CallToolResult;
}

/** Declares a tool with its argument types inferred from the zod schema. */
export function defineTool<S extends z.ZodType>(def: ToolDefinition<S>): ToolDefinition<S> {
  return def;
}
