import type { ArtifactLink, ArtifactOptions, ArtifactSource } from '../core/artifacts.ts';
import type { z } from 'zod';
import type { MapItemFn, MapOptions, RetryPolicy, StepFn, StepOptions } from './retry.ts';
import type { ServerEvents } from '../core/server-events.ts';
import type { Steering } from './steering.ts';
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

/** A signal a task waits for: give `url` (or `token`) to whoever must deliver it. */
export interface SignalHandle {
  readonly name: string;
  /** The credential: whoever holds it can deliver the signal, once. */
  readonly token: string;
  /** `POST` a JSON body here to deliver it (PUBLIC_URL, or http://HOST:PORT, + `/signals/{token}`). */
  readonly url: string;
  /** When a wait for it times out; null when only the task's TTL bounds it. */
  readonly timeoutAt: Date | null;
}

/** How a wait for a signal ended: its payload, or its timeout (a result, not an exception). */
export type SignalResult = { status: 'delivered'; payload: unknown } | { status: 'timed_out' };

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
  /**
   * Emits an event on the task's event stream (experimental, SEP-2694): `type` best vendor-prefixed
   * (`com.example/row`), `payload` a JSON object (any other JSON value goes as `{ value }`). Events are numbered 1, 2, 3… per task and stored in
   * Postgres, many per commit: the returned promise resolves at once unless many are queued (then when
   * a batch is written), so a tight loop need not await it; everything emitted is written before the
   * task parks, asks for input or finishes. Clients follow the stream live with `tasks/stream` (or `GET
   * /mcp/tasks/{taskId}/events`) and resume it after a disconnect. Each event is tied to where the
   * handler emitted it (between which steps, or inside which step's run): a leg that runs again after a
   * crash skips the events already written, so no reader sees one twice. Bounded by MAX_EVENT_BYTES,
   * MAX_EVENTS_PER_TASK and MAX_EVENT_BYTES_PER_TASK. Does nothing in a synchronous call, and inside a
   * map item's function.
   */
  emit(type: string, payload?: unknown): Promise<void>;
  /**
   * Appends content blocks (text, resource links…) to the task's partial output: a
   * `dev.durable-mcp-tasks/partial` event `{ content }`, as SEP-2679 shapes partial results. As `emit`.
   */
  partial(content: JsonObject[]): Promise<void>;
  /** Sends `notifications/progress` on a synchronous call's SSE stream when the client asked for progress. */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /** Sends `notifications/message` on a synchronous call's SSE stream when `level` is at or above the request's log level. */
  log(level: LogLevel, data: unknown, logger?: string): Promise<void>;
  /**
   * Runs `fn` once per task: its result is checkpointed in Postgres and returned without running `fn`
   * again when the handler is replayed after input, a retry or a crash. Code outside steps must be
   * deterministic; a step in flight when a worker dies may run twice, so steps must be idempotent.
   * `fn` gets the step's abort signal (the task's; with `timeoutMs`, one that also fires at the timeout).
   * `retry` retries `fn` alone: short backoffs wait in the slot, longer ones park the task until the
   * next attempt; when its attempts are used up the task fails (StepFailedError), whatever the tool's
   * own policy. Each failure is counted with its error (`tasks show`, the dashboard). `fn`'s second
   * argument says which run of the step this is (`attempt`, from 1): with `retry`, counted before the
   * body starts, so `maxAttempts` bounds the body's runs even when workers die mid-step.
   */
  step<T>(name: string, fn: StepFn<T>, options?: StepOptions): Promise<T>;
  /**
   * Runs `fn` once per item, in parallel over the whole worker pool, at most `concurrency` at a time
   * (default 8), and returns the results in the items' order. Each item is checkpointed on its own
   * (a crash redoes only unfinished items; an item in flight when its worker dies runs again, so `fn`
   * must be idempotent); the task waits without a slot meanwhile, its statusMessage saying `k/n items`.
   * An item whose `fn` throws is retried by `retry` (default: the tool's policy); one that fails for
   * good stops the others and the map throws StepFailedError. An item runs on any worker by replaying
   * the handler up to this call from its checkpoints, so everything before it must be steps or
   * deterministic code, and `fn` gets only its item, index, signal and run (`{ map, index, attempt }`):
   * no `ctx` inside it (the handler's `ctx` it closes over is its task's: `ctx.taskId` there is the
   * task's id, not the item's). `name` is unique within the task, like a step's. A synchronous call runs
   * the items in its request.
   */
  map<T, R>(name: string, items: readonly T[], fn: MapItemFn<T, R>, options?: MapOptions): Promise<R[]>;
  /**
   * Waits `duration` ms, or until a Date, durably: the deadline is recorded once under `name` (unique
   * within the task, like a step's), the leg ends and the task stays `working` with a statusMessage
   * saying until when, holding no worker slot and no connection; any worker runs it again at the
   * deadline, and the handler replays to here and goes on. Sleeps under a second wait in the slot. A
   * cancel during a sleep cancels at once; the TTL keeps running. A synchronous call waits in its request.
   */
  sleep(name: string, duration: number | Date): Promise<void>;
  /**
   * Changes a tool's code safely while its tasks run: `if (await ctx.patched('new-validation')) { new
   * steps } else { old steps }`. A task that had already recorded steps past this point (it started on the
   * old code) gets false and replays the old path; a task that reaches it now gets true, records that,
   * and gets true on every replay. Once no task started before the deploy is left, drop the old path and
   * the call. Without it, a replay that meets a different step where one was recorded fails the task
   * with a message naming both (the determinism guard).
   */
  patched(id: string): Promise<boolean>;
  /**
   * Writes a large output (an export, a report, a CSV) to Postgres as the task's artifact `name`, in
   * chunks as `source` produces them: a string, bytes, or an (async) iterable of them such as a Node
   * readable stream, never held whole. Returns a `resource_link` (its `tasks://{taskId}/artifacts/{name}`
   * URI, `size`, and the HTTP download URL in `_meta`) to put in the result; the task's requestor reads it
   * with `resources/read` or downloads it. Recorded once per task like a step (`name` unique within the
   * task): a replay gets the link back without reading `source`, and an attempt that dies midway leaves
   * nothing visible (the next one writes it whole). Tasks only.
   */
  artifact(name: string, source: ArtifactSource, options?: ArtifactOptions): Promise<ArtifactLink>;
  /**
   * Creates a signal once per task (the same handle on every replay): something outside the calling
   * client (a webhook, a third party's approval link) delivers it with `POST /signals/{token}` on any
   * instance, or `server.deliverSignal(token, payload)`; the first delivery wins. Tasks only.
   */
  createSignal(name: string, opts?: { timeoutMs?: number }): Promise<SignalHandle>;
  /**
   * Waits for the signal without a worker: the leg ends and the task stays `working` ("Waiting for
   * signal …") until it is delivered or times out. A signal delivered before the wait is kept and
   * returned at once. A cancel during the wait cancels at once. `statusMessage` replaces "Waiting for
   * signal <name>" (the task's requestor sees it: put the URL there only if they may deliver it).
   */
  waitForSignal(signal: SignalHandle, opts?: { statusMessage?: string }): Promise<SignalResult>;
  /**
   * The messages the task's requestor sends it while it runs (`tasks/steer`; experimental, SEP-2669
   * draft), for a tool defined with `steering: true`: `next()` waits for one without a worker, `pending()`
   * takes what came. Each read is a checkpoint, so a replay returns the same messages. Tasks only.
   */
  readonly steering: Steering;
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

/** See ToolDefinition.concurrency. */
export interface ConcurrencyLimit<A = unknown> {
  limit: number;
  key?: (args: A, ctx: { readonly principal: string }) => string;
}

/** See ToolDefinition.rateLimit. */
export interface RateLimit<A = unknown> {
  /** Task starts allowed per window: a whole number ≥ 1. */
  limit: number;
  /** The window, in ms: at most `limit` starts in any `per` ms. */
  per: number;
  key?: (args: A, ctx: { readonly principal: string }) => string;
}

/** See ToolDefinition.debounce. */
export interface Debounce<A = unknown> {
  /** How long a task waits after the last call of its burst before it starts, in ms. */
  ms: number;
  key?: (args: A, ctx: { readonly principal: string }) => string;
}

/** A tool: its wire description, its zod input schema and its handler. */
export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  name: string;
  title?: string;
  description: string;
  /**
   * The arguments, checked before the handler runs: invalid ones are a tool execution error. A call
   * naming an argument the schema's object does not have is refused too (zod would drop it silently),
   * and tools/list publishes `additionalProperties: false`, unless the object takes other keys:
   * `.loose()`, `z.looseObject`, `.catchall()`.
   */
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
  /**
   * How a task whose handler throws is retried: attempts in all, backoff, which errors. Default: the
   * server's TASK_RETRY_LIMIT retries, TASK_RETRY_DELAY_SECONDS apart. A NonRetryableError (and a
   * ProtocolError) fails the task at once. A retry runs the handler again from its checkpoints, on any
   * worker, after the delay (the slot is not held meanwhile).
   */
  retry?: RetryPolicy;
  /**
   * Caps how many of this tool's tasks run at once, cluster-wide: at most `limit` legs per key (the
   * key's value from the call's arguments and principal, e.g. `(args, ctx) => ctx.principal`; one key
   * for the whole tool when `key` is absent). Counted on running legs, not on tasks that wait (for
   * input, a signal, a sleep); a task over the limit stays `working` until a place frees. Tasks only: a
   * synchronous call is not counted.
   */
  concurrency?: ConcurrencyLimit<z.output<S>>;
  /**
   * Caps how often this tool's tasks start, cluster-wide: at most `limit` task starts (first legs) in any
   * `per` ms, per key (as `concurrency`'s: e.g. `(args) => args.apiHost`; one key for the whole tool when
   * absent). A task over the limit is queued, not refused: it stays `working` with a statusMessage saying
   * it waits for the rate limit, and starts as soon as the window allows, in creation order. Retries and
   * resumes (later legs) are not counted; a task cancelled while it waits took nothing. Tasks only. E.g.
   * `{ limit: 10, per: 1_000, key: (args) => args.account }` for an API that takes 10 requests a second.
   */
  rateLimit?: RateLimit<z.output<S>>;
  /**
   * Collapses bursts: a call whose key matches a task of the same principal that has not started yet
   * joins it instead of creating another. That task's arguments become the latest call's, and its start
   * moves to `ms` after that call; every call of the burst gets the same task id (and so the same result,
   * computed from the last arguments). Once the task has started, the next call starts a new burst. Tasks
   * only. E.g. `{ ms: 2_000, key: (args) => args.documentId }` to reindex a document once per edit burst.
   */
  debounce?: Debounce<z.output<S>>;
  /**
   * A deadline for the whole task, in ms from its creation, across every leg (retries, sleeps, waits for
   * input or signals included): past it the task fails ("timed out after timeoutMs=… (the tool's
   * timeoutMs)") and a running leg is aborted (its signal fires). Enforced from Postgres (the sweeper, and
   * every leg's start), so it holds when no worker runs at the deadline. Distinct from `ttlMs`, which says
   * how long the task (and its result) is kept. Default: none.
   */
  timeoutMs?: number;
  /**
   * Makes creates idempotent by the arguments: calls of one principal whose key is the same return the
   * task the first made, while it is stored (e.g. `(args) => args.reportId`). Without it, a client may
   * send its own key in `_meta["dev.durable-mcp-tasks/idempotencyKey"]` (docs/protocol.md).
   */
  idempotencyKey?: (args: z.output<S>, ctx: { readonly principal: string }) => string;
  /**
   * Argument fields operators must not see: dotted paths (`apiKey`, `auth.password`, `rows.*.token`),
   * shown as "[redacted]" by the dashboard and `durable-mcp-tasks tasks show`. The handler gets them whole.
   */
  secretArguments?: readonly string[];
  /**
   * The handler reads steering messages (`ctx.steering`; experimental, SEP-2669 draft): the task's
   * requestor may send them with `tasks/steer` while the task is active. Without it, `tasks/steer` on
   * this tool's tasks is refused (-32602) and nothing is stored. Default false.
   */
  steering?: boolean;
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
