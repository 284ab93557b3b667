import { expect } from 'vitest';
import { assertWireValid } from './wire-schema.ts';

export const PROTOCOL_VERSION = '2026-07-28';
export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const TASK_CAPS = { extensions: { [TASKS_EXT]: {} }, elicitation: { form: {} } };

export interface RpcReply {
  status: number;
  headers: Headers;
  text: string;
  /** Every JSON-RPC message in the body (several for an SSE stream). */
  messages: Array<Record<string, unknown>>;
  /** The response to the request (the last message carrying an id or an error). */
  body: Record<string, any>;
}

export interface CallOptions {
  caps?: Record<string, unknown>;
  meta?: Record<string, unknown>;
  /** Header overrides; `undefined` removes a header. */
  headers?: Record<string, string | undefined>;
  id?: number | string;
}

const NAME_SOURCE: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

function parseBody(contentType: string, text: string): Array<Record<string, unknown>> {
  if (text === '') return [];
  if (contentType.includes('text/event-stream')) {
    return text
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)) as Record<string, unknown>);
  }
  return [JSON.parse(text) as Record<string, unknown>];
}

let nextId = 1;

/** A raw Streamable HTTP client: builds the 2026-07-28 envelope and headers, validates every reply. */
export class RawMcp {
  constructor(
    readonly url: string,
    readonly caps: Record<string, unknown> = TASK_CAPS,
  ) {}

  /** POSTs any body with the given headers, unchanged. */
  async post(body: string, headers: Record<string, string> = {}, method = 'POST'): Promise<RpcReply> {
    const res = await fetch(this.url, {
      method,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
    });
    const text = await res.text();
    let messages: Array<Record<string, unknown>> = [];
    try {
      messages = parseBody(res.headers.get('content-type') ?? '', text);
    } catch {
      messages = [];
    }
    // Whatever was sent, the reply must be well-formed JSON-RPC per the 2026-07-28 schema.
    for (const message of messages) assertWireValid('(raw)', message);
    const body_ = [...messages].reverse().find((m) => 'id' in m || 'error' in m) ?? {};
    return { status: res.status, headers: res.headers, text, messages, body: body_ };
  }

  /** Sends a well-formed request (overridable piece by piece) and checks the reply against the schema. */
  async request(
    method: string,
    params: Record<string, unknown> = {},
    opts: CallOptions = {},
  ): Promise<RpcReply> {
    const id = opts.id ?? nextId++;
    const meta = {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientCapabilities': opts.caps ?? this.caps,
      'io.modelcontextprotocol/clientInfo': { name: 'raw-test-client', version: '0.0.0' },
      ...opts.meta,
    };
    const body = { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } };
    const headers: Record<string, string | undefined> = {
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
    };
    const source = NAME_SOURCE[method];
    if (source !== undefined && typeof params[source] === 'string') headers['mcp-name'] = params[source];
    Object.assign(headers, opts.headers);
    const clean = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >;
    const reply = await this.post(JSON.stringify(body), clean);
    for (const message of reply.messages) assertWireValid(method, message);
    return reply;
  }

  /** The result of a request that must succeed. */
  async result(
    method: string,
    params: Record<string, unknown> = {},
    opts: CallOptions = {},
  ): Promise<Record<string, any>> {
    const reply = await this.request(method, params, opts);
    expect(reply.body.error, `${method} failed: ${reply.text}`).toBeUndefined();
    expect(reply.status).toBe(200);
    return reply.body.result as Record<string, any>;
  }

  /** The error of a request that must fail, with its HTTP status. */
  async error(
    method: string,
    params: Record<string, unknown> = {},
    opts: CallOptions = {},
  ): Promise<{ status: number; code: number; message: string; data?: any; id: unknown }> {
    const reply = await this.request(method, params, opts);
    expect(reply.body.error, `${method} should fail: ${reply.text}`).toBeDefined();
    return { status: reply.status, ...reply.body.error, id: reply.body.id };
  }

  callTool(name: string, args: Record<string, unknown> = {}, opts: CallOptions = {}) {
    return this.result('tools/call', { name, arguments: args }, opts);
  }

  getTask(taskId: string) {
    return this.result('tasks/get', { taskId });
  }

  /** Polls tasks/get until `done` holds (default: a terminal status). */
  async waitForTask(
    taskId: string,
    done: (task: Record<string, any>) => boolean = (t) =>
      ['completed', 'failed', 'cancelled'].includes(t.status),
    timeoutMs = 15_000,
  ): Promise<Record<string, any>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const task = await this.getTask(taskId);
      if (done(task)) return task;
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}
