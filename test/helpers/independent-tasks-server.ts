/**
 * A second, independent 2026-07-28 MCP server with the Tasks extension (`io.modelcontextprotocol/tasks`,
 * SEP-2663), held entirely in memory, so that clients can be shown not to be tuned to our own server.
 * It shares no code with `src/`: the MCP side is the official `@modelcontextprotocol/server` 2.x
 * (`createMcpHandler` for stateless 2026-07-28 Streamable HTTP with its envelope and `Mcp-Method` /
 * `Mcp-Name` checks, `McpServer` for tools and `server/discover`, `inputRequired` for elicitation
 * requests); the task store, the three `tasks/*` handlers and a small node:http bridge are written here.
 *
 * Tools: `slow_count {steps}` (steps × 100 ms, statusMessage `k/steps`, then `counted to N`),
 * `ask_name` (input_required with an `elicitation/create` form, then `hello <name>`) and
 * `always_fails` (a failed task with a JSON-RPC error). A client that declares the extension gets a
 * task for every call; one that does not gets the same work done inline (ask_name then asks through
 * the multi round-trip flow).
 *
 * Task events, written from the SEP-2694 draft alone (seps/2694-resumable-task-event-streams.md, PR
 * #2694): each task keeps its own log, numbered from 0 as the draft says; slow_count writes
 * `org.example.count/step {k, steps}` per step, and every change of status writes
 * `org.example.tasks/status {status, statusMessage?}`. `tasks/stream {taskId, after?}` sends the events
 * after the cursor as `notifications/tasks/event` on the request's SSE stream, live, and returns an
 * empty result once the task ended and everything was sent; a cursor older than what is kept
 * (`keepEvents`) is `events_gone` (-32010). The tests cut open streams three ways with `cutStreams`.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  inputRequired,
  inputResponse,
  McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type InputRequest,
  type InputResponseView,
  type McpHttpHandler,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { afterAll, beforeAll } from 'vitest';
import { z } from 'zod';

const TASKS_EXT = 'io.modelcontextprotocol/tasks';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
/** SEP-2694's error for a cursor older than the events kept. */
const EVENTS_GONE = -32010;
const POLL_INTERVAL_MS = 50;
const TTL_MS = 60_000;
const STEP_MS = 100;

/** A running independent server: its endpoint URL and a way to stop it. */
export interface IndependentTasksServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Cancels running work, then closes the handler and the socket. */
  close(): Promise<void>;
  /**
   * Cuts every open `tasks/stream` now: `close` returns its empty result early (the draft allows a
   * receiver to close before the task ends), `end` ends the HTTP response without a result (as a
   * server going down does), `drop` destroys the connection. Returns how many were cut.
   */
  cutStreams(how: 'close' | 'end' | 'drop'): number;
}

export interface IndependentServerOptions {
  /** How many of a task's latest events are kept (default all); older ones are gone. */
  keepEvents?: number;
}

type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
type JsonRpcError = { code: number; message: string; data?: unknown };

interface TaskEvent {
  seq: number;
  type: string;
  payload: Record<string, unknown>;
}

interface TaskRecord {
  readonly taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  readonly createdAt: string;
  lastUpdatedAt: string;
  result?: CallToolResult;
  error?: JsonRpcError;
  /** The one outstanding request while input_required, and how to hand its response to the work. */
  pending?: { key: string; request: InputRequest; deliver(response: unknown): void };
  readonly abort: AbortController;
  /** The events kept (the latest `keepEvents`), and the seq the next one gets. */
  readonly events: TaskEvent[];
  nextSeq: number;
  /** Woken on every new event and status change: the open streams of the task. */
  readonly watchers: Set<() => void>;
}

/** What a tool's work sees: its abort signal, a progress line, and a way to ask the client for input. */
interface WorkControl {
  readonly signal: AbortSignal;
  progress(statusMessage: string): void;
  /** Resolves with the client's response to `request`, asked under `key` (unique within the task). */
  ask(key: string, request: InputRequest): Promise<InputResponseView>;
  /** Appends an event to the task's log (a no-op when the work runs inline). */
  emit(type: string, payload: Record<string, unknown>): void;
}

type Work<A> = (args: A, ctl: WorkControl) => Promise<CallToolResult>;

// ---------------------------------------------------------------------------------------------
// Tools: each is one piece of work, run as a task or inline.

const slowCount: Work<{ steps: number }> = async ({ steps }, ctl) => {
  for (let k = 1; k <= steps; k++) {
    await sleep(STEP_MS, undefined, { signal: ctl.signal });
    ctl.emit('org.example.count/step', { k, steps });
    ctl.progress(`${k}/${steps}`);
  }
  return { content: [{ type: 'text', text: `counted to ${steps}` }] };
};

const NAME_SCHEMA = {
  type: 'object' as const,
  properties: { name: { type: 'string' as const } },
  required: ['name'],
};

const NoArgs = z.strictObject({});
type NoArgs = z.infer<typeof NoArgs>;

const askName: Work<NoArgs> = async (_args, ctl) => {
  const response = await ctl.ask(
    'who',
    inputRequired.elicit({ message: 'Who is asking?', requestedSchema: NAME_SCHEMA }),
  );
  const name =
    response.kind === 'elicit' && response.action === 'accept' ? response.content?.name : undefined;
  if (typeof name !== 'string') {
    return { content: [{ type: 'text', text: 'no name given' }], isError: true };
  }
  return { content: [{ type: 'text', text: `hello ${name}` }] };
};

const alwaysFails: Work<NoArgs> = async (_args, ctl) => {
  await sleep(STEP_MS, undefined, { signal: ctl.signal });
  throw new ProtocolError(ProtocolErrorCode.InternalError, 'always_fails failed, as it always does');
};

// ---------------------------------------------------------------------------------------------
// The in-memory task store and the tasks/* methods.

const isTerminal = (status: TaskStatus) =>
  status === 'completed' || status === 'failed' || status === 'cancelled';

function toRpcError(err: unknown): JsonRpcError {
  if (err instanceof ProtocolError) {
    return { code: err.code, message: err.message, ...(err.data === undefined ? {} : { data: err.data }) };
  }
  return { code: ProtocolErrorCode.InternalError, message: 'Internal error' };
}

function eventsGone(taskId: string, earliestSeq: number): ProtocolError {
  return new ProtocolError(EVENTS_GONE, 'Task events are no longer available', {
    reason: 'events_gone',
    taskId,
    earliestSeq,
  });
}

function declaresTasks(ctx: ServerContext): boolean {
  const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const caps = envelope[CLIENT_CAPABILITIES_META_KEY] as { extensions?: Record<string, unknown> } | undefined;
  return caps?.extensions?.[TASKS_EXT] !== undefined;
}

class TaskStore {
  readonly #tasks = new Map<string, TaskRecord>();
  readonly #keepEvents: number;
  /** How each open stream is told to close early (`cutStreams('close')`). */
  readonly closers = new Set<() => void>();

  constructor(opts: IndependentServerOptions) {
    this.#keepEvents = opts.keepEvents ?? Number.POSITIVE_INFINITY;
  }

  /** Records a task, starts its work in the background, and returns the CreateTaskResult. */
  start<A>(work: Work<A>, args: A): Record<string, unknown> {
    const now = new Date().toISOString();
    const task: TaskRecord = {
      taskId: `ind-${randomBytes(18).toString('base64url')}`,
      status: 'working',
      createdAt: now,
      lastUpdatedAt: now,
      abort: new AbortController(),
      events: [],
      nextSeq: 0,
      watchers: new Set(),
    };
    this.#tasks.set(task.taskId, task);
    const ctl: WorkControl = {
      signal: task.abort.signal,
      progress: (statusMessage) => this.#set(task, { status: 'working', statusMessage }),
      emit: (type, payload) => this.#append(task, type, payload),
      ask: (key, request) =>
        new Promise((resolve, reject) => {
          task.abort.signal.addEventListener('abort', () => reject(task.abort.signal.reason as Error), {
            once: true,
          });
          this.#set(task, { status: 'input_required', statusMessage: 'Waiting for input' });
          task.pending = {
            key,
            request,
            deliver: (response) => resolve(inputResponse({ [key]: response }, key)),
          };
        }),
    };
    // Started on the next turn, so the CreateTaskResult always shows the seed state `working`.
    setImmediate(() => {
      work(args, ctl).then(
        (result) => this.#set(task, { status: 'completed', result }),
        (err: unknown) => {
          const error = toRpcError(err);
          this.#set(task, {
            status: 'failed',
            error,
            statusMessage: `Tool execution failed: ${error.message}`,
          });
        },
      );
    });
    return { resultType: 'task', ...this.#view(task) };
  }

  /** tasks/get: the DetailedTask (the SDK stamps `resultType: "complete"` on it). */
  get(taskId: string): Record<string, unknown> {
    const task = this.#find(taskId, 'retrieve');
    return {
      ...this.#view(task),
      ...(task.pending === undefined ? {} : { inputRequests: { [task.pending.key]: task.pending.request } }),
      ...(task.result === undefined ? {} : { result: { ...task.result, resultType: 'complete' } }),
      ...(task.error === undefined ? {} : { error: task.error }),
    };
  }

  /** tasks/update: answers the outstanding request; keys not outstanding are ignored. */
  update(taskId: string, inputResponses: Record<string, unknown>): void {
    const task = this.#find(taskId, 'update');
    const pending = task.pending;
    if (pending === undefined || !(pending.key in inputResponses)) return;
    task.pending = undefined;
    this.#set(task, { status: 'working', statusMessage: 'Input received' });
    pending.deliver(inputResponses[pending.key]);
  }

  /** tasks/cancel: a task that has not ended is cancelled at once and its work aborted. */
  cancel(taskId: string): void {
    const task = this.#find(taskId, 'cancel');
    if (isTerminal(task.status)) return;
    task.pending = undefined;
    this.#set(task, { status: 'cancelled', statusMessage: 'Cancelled at the client’s request' });
    task.abort.abort(new Error('task cancelled'));
  }

  /**
   * tasks/stream: the events after `after` (from the earliest kept without it), then each new one,
   * until the task ended and all were sent; then the empty result (SEP-2694).
   */
  async stream(
    taskId: string,
    after: number | undefined,
    ctx: ServerContext,
  ): Promise<Record<string, unknown>> {
    const task = this.#find(taskId, 'stream events of');
    let next = after === undefined ? this.#earliest(task) : after + 1;
    let closed = false;
    const close = () => {
      closed = true;
      for (const wake of task.watchers) wake();
    };
    this.closers.add(close);
    try {
      for (;;) {
        if (closed) return {};
        if (next < this.#earliest(task)) throw eventsGone(task.taskId, this.#earliest(task));
        const event = task.events.find((e) => e.seq >= next);
        if (event !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/tasks/event',
            params: { ...event, taskId, _meta: { [RELATED_TASK]: { taskId } } },
          });
          next = event.seq + 1;
          continue;
        }
        if (isTerminal(task.status)) return {};
        await this.#changed(task, ctx.mcpReq.signal);
        ctx.mcpReq.signal.throwIfAborted();
      }
    } finally {
      this.closers.delete(close);
    }
  }

  /** Stops every task's work (on close); the tasks themselves go with the store. */
  abortAll(): void {
    for (const task of this.#tasks.values()) task.abort.abort(new Error('server closing'));
    for (const close of this.closers) close();
  }

  #earliest(task: TaskRecord): number {
    return task.events[0]?.seq ?? task.nextSeq;
  }

  /** Resolves at the task's next event or change of status, or when `signal` aborts. */
  #changed(task: TaskRecord, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        task.watchers.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve();
      };
      task.watchers.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  #append(task: TaskRecord, type: string, payload: Record<string, unknown>): void {
    task.events.push({ seq: task.nextSeq++, type, payload });
    if (task.events.length > this.#keepEvents) task.events.shift();
    for (const wake of task.watchers) wake();
  }

  #find(taskId: string, verb: string): TaskRecord {
    const task = this.#tasks.get(taskId);
    if (task === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Failed to ${verb} task: Task not found`);
    }
    return task;
  }

  /**
   * The one place a task changes; an ended task never changes again (late work results are dropped).
   * A change of status is an event too.
   */
  #set(task: TaskRecord, change: Partial<Pick<TaskRecord, 'status' | 'statusMessage' | 'result' | 'error'>>) {
    if (isTerminal(task.status)) return;
    const before = task.status;
    Object.assign(task, change, { lastUpdatedAt: new Date().toISOString() });
    if (task.status !== before) {
      const message = task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage };
      this.#append(task, 'org.example.tasks/status', { status: task.status, ...message });
    }
  }

  #view(task: TaskRecord): Record<string, unknown> {
    return {
      taskId: task.taskId,
      status: task.status,
      ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
      createdAt: task.createdAt,
      lastUpdatedAt: task.lastUpdatedAt,
      ttlMs: TTL_MS,
      pollIntervalMs: POLL_INTERVAL_MS,
    };
  }
}

// ---------------------------------------------------------------------------------------------
// The MCP server, built per request by createMcpHandler over the one shared store.

/** Thrown by inline work that needs input the retried request has not carried yet. */
class NeedsInput extends Error {
  constructor(
    readonly key: string,
    readonly request: InputRequest,
  ) {
    super(`needs input '${key}'`);
  }
}

/** Runs work inside the request; asking for input ends the round with an input_required result. */
async function runInline<A>(work: Work<A>, args: A, ctx: ServerContext): Promise<CallToolResult> {
  const ctl: WorkControl = {
    signal: ctx.mcpReq.signal,
    progress: () => {},
    emit: () => {},
    ask: async (key, request) => {
      const response = inputResponse(ctx.mcpReq.inputResponses, key);
      if (response.kind === 'missing') throw new NeedsInput(key, request);
      return response;
    },
  };
  try {
    return await work(args, ctl);
  } catch (err) {
    if (err instanceof NeedsInput) {
      return inputRequired({ inputRequests: { [err.key]: err.request } }) as unknown as CallToolResult;
    }
    throw err;
  }
}

function requireTasks(ctx: ServerContext): void {
  if (!declaresTasks(ctx)) {
    throw new MissingRequiredClientCapabilityError(
      { requiredCapabilities: { extensions: { [TASKS_EXT]: {} } } },
      'Missing required client capability',
    );
  }
}

function buildServer(store: TaskStore): McpServer {
  const mcp = new McpServer(
    { name: 'independent-tasks-server', version: '0.0.0' },
    { capabilities: { extensions: { [TASKS_EXT]: {} } } },
  );
  const tool = <A>(name: string, description: string, inputSchema: z.ZodType<A>, work: Work<A>) =>
    mcp.registerTool(name, { description, inputSchema }, async (args: A, ctx: ServerContext) =>
      // The SDK passes a tools/call `resultType: "task"` through to the wire; its types do not model it.
      declaresTasks(ctx) ? (store.start(work, args) as CallToolResult) : runInline(work, args, ctx),
    );
  tool(
    'slow_count',
    'Counts to `steps`, 100 ms a step.',
    z.object({ steps: z.number().int().min(0) }),
    slowCount,
  );
  tool('ask_name', 'Asks for a name, then greets it.', NoArgs, askName);
  tool('always_fails', 'Fails with a JSON-RPC error.', NoArgs, alwaysFails);

  // One params schema for all three: the SDK lifts `inputResponses` (a multi round-trip field) out of
  // every request's params into `ctx.mcpReq.inputResponses`, tasks/update's included.
  const TaskIdParams = z.object({ taskId: z.string() });
  const taskMethod = (
    method: string,
    handle: (taskId: string, ctx: ServerContext) => Record<string, unknown>,
  ) =>
    mcp.server.setRequestHandler(method, { params: TaskIdParams }, async ({ taskId }, ctx: ServerContext) => {
      requireTasks(ctx);
      return handle(taskId, ctx);
    });
  // SEP-2694: `after` must be a non-negative integer (else -32602, which the SDK answers for the schema).
  const StreamParams = z.object({ taskId: z.string(), after: z.number().int().min(0).optional() });
  mcp.server.setRequestHandler('tasks/stream', { params: StreamParams }, async ({ taskId, after }, ctx) => {
    requireTasks(ctx);
    return store.stream(taskId, after, ctx);
  });
  taskMethod('tasks/get', (taskId) => store.get(taskId));
  taskMethod('tasks/update', (taskId, ctx) => {
    const responses = ctx.mcpReq.inputResponses;
    if (responses === undefined) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'tasks/update requires inputResponses');
    }
    store.update(taskId, responses);
    return {};
  });
  taskMethod('tasks/cancel', (taskId) => {
    store.cancel(taskId);
    return {};
  });
  return mcp;
}

// ---------------------------------------------------------------------------------------------
// HTTP: node:http in front of the SDK's web-standard handler.

/** An open `tasks/stream` response, and how to end it without its result. */
type OpenStream = { res: ServerResponse; end(): void };

async function serve(
  handler: McpHttpHandler,
  streams: Set<OpenStream>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const aborted = new AbortController();
  res.on('close', () => aborted.abort());
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    for (const v of [value ?? []].flat()) headers.append(name, v);
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const response = await handler.fetch(
    new Request(new URL(req.url ?? '/', 'http://127.0.0.1'), {
      method: req.method ?? 'GET',
      headers,
      signal: aborted.signal,
      ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
    }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers));
  const open: OpenStream = { res, end: () => aborted.abort() };
  if (req.headers['mcp-method'] === 'tasks/stream') streams.add(open);
  const reader = response.body?.getReader();
  // (Cut by `end`, or the connection dropped: what the handler still writes goes nowhere.)
  aborted.signal.addEventListener('abort', () => void reader?.cancel().catch(() => {}), { once: true });
  try {
    for (;;) {
      const chunk = await reader?.read();
      if (chunk === undefined || chunk.done || aborted.signal.aborted) break;
      res.write(chunk.value);
    }
  } finally {
    streams.delete(open);
  }
  if (!res.destroyed) res.end();
}

/**
 * Starts the independent server on 127.0.0.1 with an ephemeral port. Its tasks live in memory until
 * `close()`; `ttlMs` is advertised as 60 s but nothing expires earlier.
 */
export async function startIndependentTasksServer(
  opts: IndependentServerOptions = {},
): Promise<IndependentTasksServer> {
  const store = new TaskStore(opts);
  const streams = new Set<OpenStream>();
  const handler = createMcpHandler(() => buildServer(store), { legacy: 'reject' });
  const http = createServer((req, res) => {
    serve(handler, streams, req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      store.abortAll();
      await handler.close();
      http.closeAllConnections();
      await new Promise<void>((resolve, reject) => http.close((err) => (err ? reject(err) : resolve())));
    },
    cutStreams(how) {
      if (how === 'close') {
        const closers = [...store.closers];
        for (const close of closers) close();
        return closers.length;
      }
      const open = [...streams];
      for (const stream of open) {
        if (how === 'drop') stream.res.socket?.destroy();
        else stream.end();
      }
      return open.length;
    },
  };
}

/** The usual setup: an independent server for the test file's tests, closed after them. */
export function useIndependentTasksServer(opts: IndependentServerOptions = {}): IndependentTasksServer {
  let server: IndependentTasksServer | undefined;
  beforeAll(async () => {
    server = await startIndependentTasksServer(opts);
  });
  afterAll(async () => {
    await server?.close();
  });
  const started = () => {
    if (server === undefined) throw new Error('the independent server starts before the file’s tests');
    return server;
  };
  return {
    get url() {
      return started().url;
    },
    close: () => started().close(),
    cutStreams: (how) => started().cutStreams(how),
  };
}
