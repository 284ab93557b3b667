/**
 * The suite's MCP client helper, for vitest files and the system tests alike (no vitest import): the
 * request and header builders of both protocol eras, one reply reader (over the one SSE parser in
 * sse.ts), `postMcp` (one request, no checks), `RawMcp` (every reply checked against the 2026-07-28
 * schema) and `listen` (subscriptions/listen as a live stream). The ext-tasks port is in ext-tasks.ts.
 */
import { readSse, sseMessages, type SseStream } from './sse.ts';
import { waitFor } from './wait.ts';
import { assertWireValid } from './wire-schema.ts';

export const PROTOCOL_VERSION = '2026-07-28';
/** The session era the same endpoint serves: `initialize`, then `Mcp-Session-Id` on every request. */
export const LEGACY_PROTOCOL_VERSION = '2025-11-25';
export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const TASK_CAPS = { extensions: { [TASKS_EXT]: {} }, elicitation: { form: {} } };
export const ACCEPT = 'application/json, text/event-stream';
const TERMINAL = ['completed', 'failed', 'cancelled'];

type Params = Record<string, unknown>;

// ------------------------------------------------------------------------------------------------
// 2026-07-28: stateless; the envelope in params._meta, mirrored in routing headers.

/** The param that Mcp-Name mirrors, per method. */
const NAME_SOURCE: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
  'tasks/steer': 'taskId',
  'tasks/pause': 'taskId',
  'tasks/resume': 'taskId',
};

/** The Mcp-Name of a request: its tool or prompt name, resource URI or task id (undefined for other methods). */
export function mcpName(method: string, params: Params = {}): string | undefined {
  const source = NAME_SOURCE[method];
  const value = source === undefined ? undefined : params[source];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The headers of a 2026-07-28 POST: content type, Accept, MCP-Protocol-Version, Mcp-Method and (when
 * the method has one) Mcp-Name. `extra` adds or overrides headers; `undefined` removes one.
 */
export function mcpHeaders(
  method: string,
  params: Params = {},
  extra: Record<string, string | undefined> = {},
): Record<string, string> {
  const name = mcpName(method, params);
  const headers: Record<string, string | undefined> = {
    'content-type': 'application/json',
    accept: ACCEPT,
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
    ...extra,
  };
  return Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<
    string,
    string
  >;
}

export interface RequestOptions {
  /** JSON-RPC id; by default the next of a process-wide counter. */
  id?: number | string;
  /** Client capabilities; TASK_CAPS by default. */
  caps?: Record<string, unknown>;
  /** Sent as io.modelcontextprotocol/clientInfo when given. */
  clientInfo?: { name: string; version: string };
  /** More _meta entries, over the envelope's. */
  meta?: Record<string, unknown>;
}

let nextId = 1;

/** A 2026-07-28 JSON-RPC request: `params` plus the `_meta` envelope (protocol version, capabilities). */
export function mcpRequest(method: string, params: Params = {}, opts: RequestOptions = {}) {
  return {
    jsonrpc: '2.0' as const,
    id: opts.id ?? nextId++,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': opts.caps ?? TASK_CAPS,
        ...(opts.clientInfo === undefined ? {} : { 'io.modelcontextprotocol/clientInfo': opts.clientInfo }),
        ...opts.meta,
      },
    },
  };
}

// ------------------------------------------------------------------------------------------------
// 2025-11-25: initialize mints a session; every later request names it.

/** The headers of a 2025-11-25 request: before `initialize` without a session, after it with one. */
export function rev2025Headers(
  opts: { sessionId?: string; protocolVersion?: string } = {},
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: ACCEPT,
    ...(opts.sessionId === undefined
      ? {}
      : {
          'mcp-session-id': opts.sessionId,
          'mcp-protocol-version': opts.protocolVersion ?? LEGACY_PROTOCOL_VERSION,
        }),
    ...extra,
  };
}

/** A 2025-11-25 `initialize` request. */
export function initializeRequest(
  opts: {
    id?: number | string;
    protocolVersion?: string;
    capabilities?: Record<string, unknown>;
    clientInfo?: { name: string; version: string };
  } = {},
) {
  return {
    jsonrpc: '2.0' as const,
    id: opts.id ?? nextId++,
    method: 'initialize',
    params: {
      protocolVersion: opts.protocolVersion ?? LEGACY_PROTOCOL_VERSION,
      capabilities: opts.capabilities ?? {},
      clientInfo: opts.clientInfo ?? { name: 'raw-test-client', version: '0.0.0' },
    },
  };
}

// ------------------------------------------------------------------------------------------------
// Replies

export interface RpcReply {
  status: number;
  headers: Headers;
  text: string;
  /** Every JSON-RPC message in the body (several for an SSE stream; none if the body is not JSON). */
  messages: Array<Record<string, any>>;
  /** The response to the request (the last message carrying an id or an error), or `{}`. */
  body: Record<string, any>;
}

/** The JSON-RPC messages of a body: one JSON message, or an SSE stream's. Throws on a body that is neither. */
export function parseMessages(contentType: string, text: string): Array<Record<string, any>> {
  if (text === '') return [];
  if (contentType.includes('text/event-stream')) return sseMessages(text);
  return [JSON.parse(text) as Record<string, any>];
}

/** Reads a whole response: status, headers, text and its JSON-RPC messages (none if unparseable). */
export async function readReply(res: Response): Promise<RpcReply> {
  const text = await res.text();
  let messages: Array<Record<string, any>> = [];
  try {
    messages = parseMessages(res.headers.get('content-type') ?? '', text);
  } catch {
    messages = [];
  }
  const body = [...messages].reverse().find((m) => 'id' in m || 'error' in m) ?? {};
  return { status: res.status, headers: res.headers, text, messages, body };
}

/**
 * One 2026-07-28 request over fetch, with its envelope and routing headers; the reply is read, not
 * checked. Throws what fetch throws (a transport failure).
 */
export async function postMcp(
  url: string,
  method: string,
  params: Params = {},
  opts: RequestOptions & { headers?: Record<string, string | undefined>; signal?: AbortSignal } = {},
): Promise<RpcReply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: mcpHeaders(method, params, opts.headers),
    body: JSON.stringify(mcpRequest(method, params, opts)),
    ...(opts.signal === undefined ? {} : { signal: opts.signal }),
  });
  return readReply(res);
}

// ------------------------------------------------------------------------------------------------
// RawMcp: the tests' client, strict about what the server sends

export interface CallOptions {
  caps?: Record<string, unknown>;
  meta?: Record<string, unknown>;
  /** Header overrides; `undefined` removes a header. */
  headers?: Record<string, string | undefined>;
  id?: number | string;
}

/** A raw Streamable HTTP client: builds the 2026-07-28 envelope and headers, validates every reply. */
export class RawMcp {
  constructor(
    readonly url: string,
    readonly caps: Record<string, unknown> = TASK_CAPS,
  ) {}

  /** POSTs any body with the given headers (over content type and Accept), unchanged. */
  async post(body: string, headers: Record<string, string> = {}, method = 'POST'): Promise<RpcReply> {
    const res = await fetch(this.url, {
      method,
      headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
      ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
    });
    const reply = await readReply(res);
    // Whatever was sent, the reply must be well-formed JSON-RPC per the 2026-07-28 schema.
    for (const message of reply.messages) assertWireValid('(raw)', message);
    return reply;
  }

  /** Sends a well-formed request (overridable piece by piece) and checks the reply against the schema. */
  async request(method: string, params: Params = {}, opts: CallOptions = {}): Promise<RpcReply> {
    const body = mcpRequest(method, params, {
      ...opts,
      caps: opts.caps ?? this.caps,
      clientInfo: { name: 'raw-test-client', version: '0.0.0' },
    });
    const reply = await this.post(JSON.stringify(body), mcpHeaders(method, params, opts.headers));
    for (const message of reply.messages) assertWireValid(method, message);
    return reply;
  }

  /** The result of a request that must succeed. */
  async result(method: string, params: Params = {}, opts: CallOptions = {}): Promise<Record<string, any>> {
    const reply = await this.request(method, params, opts);
    if (reply.body.error !== undefined || reply.status !== 200 || reply.body.result === undefined)
      throw new Error(`${method} failed: HTTP ${reply.status} ${reply.text}`);
    return reply.body.result as Record<string, any>;
  }

  /** The error of a request that must fail, with its HTTP status. */
  async error(
    method: string,
    params: Params = {},
    opts: CallOptions = {},
  ): Promise<{ status: number; code: number; message: string; data?: any; id: unknown }> {
    const reply = await this.request(method, params, opts);
    if (reply.body.error === undefined)
      throw new Error(`${method} should fail: HTTP ${reply.status} ${reply.text}`);
    return { status: reply.status, ...reply.body.error, id: reply.body.id };
  }

  callTool(name: string, args: Params = {}, opts: CallOptions = {}) {
    return this.result('tools/call', { name, arguments: args }, opts);
  }

  getTask(taskId: string) {
    return this.result('tasks/get', { taskId });
  }

  /** Polls tasks/get until `done` holds (default: a terminal status). */
  async waitForTask(
    taskId: string,
    done: (task: Record<string, any>) => boolean = (t) => TERMINAL.includes(t.status as string),
    timeoutMs = 15_000,
  ): Promise<Record<string, any>> {
    let last: Record<string, any> | undefined;
    return waitFor(
      async () => {
        last = await this.getTask(taskId);
        return done(last) && last;
      },
      {
        timeoutMs,
        what: () => `task ${taskId} (still ${last?.status ?? 'unread'}) reaching the state waited for`,
      },
    );
  }
}

/** Opens subscriptions/listen over a real socket; its SSE events are parsed, and checked, as they arrive. */
export async function listen(
  url: string,
  notifications: Params,
  opts: { id?: number | string; caps?: Record<string, unknown>; headers?: Record<string, string> } = {},
): Promise<SseStream> {
  const abort = new AbortController();
  const params = { notifications };
  const res = await fetch(url, {
    method: 'POST',
    signal: abort.signal,
    headers: mcpHeaders('subscriptions/listen', params, opts.headers),
    body: JSON.stringify(
      mcpRequest('subscriptions/listen', params, {
        id: opts.id ?? Math.floor(Math.random() * 1e9),
        ...(opts.caps === undefined ? {} : { caps: opts.caps }),
      }),
    ),
  });
  return readSse(res, abort, (message) => assertWireValid('subscriptions/listen', message));
}

/** tasks/stream (SEP-2694 draft) as a live stream: `notifications/tasks/event` messages, then the result. */
export async function streamTaskEvents(
  url: string,
  taskId: string,
  after?: number,
  opts: { headers?: Record<string, string> } = {},
): Promise<SseStream & { json?: Record<string, any> }> {
  const abort = new AbortController();
  const params = after === undefined ? { taskId } : { taskId, after };
  const res = await fetch(url, {
    method: 'POST',
    signal: abort.signal,
    headers: mcpHeaders('tasks/stream', params, opts.headers),
    body: JSON.stringify(mcpRequest('tasks/stream', params)),
  });
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    // Nothing to stream (a finished task read to its end), or an error: a JSON answer.
    const json = (await res.json()) as Record<string, any>;
    const done = Promise.resolve();
    return {
      status: res.status,
      contentType: res.headers.get('content-type') ?? '',
      messages: [json],
      events: [],
      comments: 0,
      ended: done,
      json,
      next: async () => json,
      close: () => {},
    };
  }
  return readSse(res, abort, (message) => assertWireValid('tasks/stream', message));
}
