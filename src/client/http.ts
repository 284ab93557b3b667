import { TASKS_EXTENSION } from '../core/errors.ts';
import {
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  isJsonObject,
  META_PROTOCOL_VERSION,
  type JsonObject,
} from '../core/wire.ts';
import { SseReader } from './sse.ts';

/** The protocol revision this client speaks. */
const PROTOCOL_VERSION = '2026-07-28';

/** The server could not be reached, or answered without a JSON-RPC response. */
export class McpConnectionError extends Error {
  override readonly name = 'McpConnectionError';
}

/** The server refused the credentials (HTTP 401 or 403). */
export class McpAuthError extends Error {
  override readonly name = 'McpAuthError';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** The server answered the request with a JSON-RPC error. */
export class McpRpcError extends Error {
  override readonly name: string = 'McpRpcError';
  constructor(
    readonly method: string,
    readonly code: number,
    readonly rpcMessage: string,
    readonly data?: unknown,
  ) {
    super(`${method}: ${rpcMessage} (${code})`);
  }
}

export interface HttpOptions {
  /** The MCP endpoint, e.g. `https://host/mcp`. */
  url: string;
  /** Sent as `Authorization: Bearer …`. */
  token?: string | undefined;
  /** Extra headers on every request. */
  headers?: Record<string, string> | undefined;
  clientInfo?: { name: string; version: string } | undefined;
  /**
   * The client's capabilities; the tasks extension is always declared. Default: form elicitation, which
   * a task's questions need (answered through `onInput`, now or on a later `resume`).
   */
  capabilities?: JsonObject | undefined;
  fetch?: typeof fetch | undefined;
}

/** The headers SEP-2243 asks for: `Mcp-Name` carries the tool name or the task id. */
function mcpNameOf(method: string, params: JsonObject): string | undefined {
  if (method === 'tools/call') return typeof params.name === 'string' ? params.name : undefined;
  if (method.startsWith('tasks/')) return typeof params.taskId === 'string' ? params.taskId : undefined;
  return undefined;
}

/**
 * Stateless 2026-07-28 requests over HTTP: each one a POST carrying the protocol version, the client's
 * capabilities and info in `_meta`, with the routing headers. Answers may be JSON or an SSE stream.
 */
export class McpHttp {
  readonly url: string;
  #nextId = 1;
  readonly #opts: HttpOptions;
  readonly #fetch: typeof fetch;

  constructor(opts: HttpOptions) {
    this.url = opts.url;
    this.#opts = opts;
    this.#fetch = opts.fetch ?? globalThis.fetch;
  }

  /** Whether requests carry a bearer token. */
  get sendsToken(): boolean {
    return this.#opts.token !== undefined;
  }

  /** Sends one request and returns its result; throws McpConnectionError, McpAuthError or McpRpcError. */
  async request(method: string, params: JsonObject = {}, signal?: AbortSignal): Promise<JsonObject> {
    const id = this.#nextId++;
    const res = await this.#post(method, params, id, 'application/json, text/event-stream', signal);
    const message = await this.#answerOf(method, res, id, false);
    if (!isJsonObject(message.result)) throw new McpConnectionError(`${method}: the response has no result`);
    return message.result;
  }

  /**
   * Opens a request whose answer is a stream (`subscriptions/listen`) and hands each message to
   * `onMessage` until the stream ends or `signal` aborts. Throws like `request` if the server refuses it.
   */
  async stream(
    method: string,
    params: JsonObject,
    onMessage: (message: JsonObject) => void,
    signal: AbortSignal,
  ): Promise<void> {
    try {
      for await (const message of this.messages(method, params, signal, { streamOnly: true })) {
        onMessage(message);
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
  }

  /**
   * Sends a request whose answer may be a stream (`tasks/stream`) and yields its messages as they come:
   * each notification, then the response, if the stream ends with one (a JSON answer is its one
   * message). The body is read only as messages are asked for, and let go when the caller stops.
   * Throws McpRpcError for an error response, McpConnectionError when the connection drops mid-stream
   * (and, with `streamOnly`, for an answer that is not a stream), like `request` otherwise.
   */
  async *messages(
    method: string,
    params: JsonObject,
    signal: AbortSignal,
    { streamOnly = false }: { streamOnly?: boolean } = {},
  ): AsyncGenerator<JsonObject, void, undefined> {
    const id = this.#nextId++;
    const res = await this.#post(method, params, id, 'text/event-stream, application/json', signal);
    const type = res.headers.get('content-type') ?? '';
    if (!type.includes('text/event-stream') || res.body === null) {
      yield await this.#answerOf(method, res, id, streamOnly);
      return;
    }
    const reader = new SseReader();
    const decoder = new TextDecoder();
    const body = (res.body as ReadableStream<Uint8Array>).getReader();
    try {
      for (;;) {
        const { value, done } = await body.read().catch((err: unknown) => {
          if (signal.aborted) throw err;
          throw new McpConnectionError(`${method}: the stream from ${this.url} broke off: ${causeOf(err)}`);
        });
        const messages = done ? reader.end() : reader.push(decoder.decode(value, { stream: true }));
        for (const message of messages) {
          if (message.id === id && isJsonObject(message.error)) throw rpcErrorOf(method, message.error);
          yield message;
        }
        if (done) return;
      }
    } finally {
      // A caller that stops early lets the connection go.
      await body.cancel().catch(() => {});
    }
  }

  /**
   * The response in a whole body (JSON, or an SSE stream read to its end), unless it is an error;
   * `streamOnly` refuses any answer that was not a stream.
   */
  async #answerOf(method: string, res: Response, id: number, streamOnly: boolean): Promise<JsonObject> {
    const body = await res.text().catch((err: unknown) => {
      throw new McpConnectionError(`${method}: the answer from ${this.url} broke off: ${causeOf(err)}`);
    });
    let message: JsonObject | undefined;
    try {
      message = responseIn(body, res.headers.get('content-type') ?? '', id);
    } catch {
      message = undefined;
    }
    if (message !== undefined && isJsonObject(message.error)) throw rpcErrorOf(method, message.error);
    if (streamOnly) {
      throw new McpConnectionError(`${method}: ${this.url} answered HTTP ${res.status} without a stream`);
    }
    if (message === undefined) {
      throw new McpConnectionError(
        `${this.url} answered HTTP ${res.status} without a JSON-RPC response: ${body.slice(0, 200)}`,
      );
    }
    return message;
  }

  async #post(
    method: string,
    params: JsonObject,
    id: number,
    accept: string,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const name = mcpNameOf(method, params);
    const headers: Record<string, string> = {
      ...this.#opts.headers,
      'content-type': 'application/json',
      accept,
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
      ...(this.#opts.token === undefined ? {} : { authorization: `Bearer ${this.#opts.token}` }),
    };
    const capabilities = this.#opts.capabilities ?? { elicitation: { form: {} } };
    const meta = {
      [META_PROTOCOL_VERSION]: PROTOCOL_VERSION,
      [META_CLIENT_CAPABILITIES]: {
        ...capabilities,
        extensions: { ...(capabilities.extensions as JsonObject | undefined), [TASKS_EXTENSION]: {} },
      },
      [META_CLIENT_INFO]: this.#opts.clientInfo ?? { name: 'durable-mcp-tasks-client', version: '0' },
    };
    let res: Response;
    try {
      res = await this.#fetch(this.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new McpConnectionError(`cannot reach ${this.url}: ${causeOf(err)}`);
    }
    if (res.status === 401 || res.status === 403) {
      await res.body?.cancel();
      throw new McpAuthError(
        this.#opts.token === undefined
          ? `${this.url} answered ${res.status}: it wants a bearer token`
          : `${this.url} answered ${res.status}: it refused the token given`,
        res.status,
      );
    }
    return res;
  }
}

/** What a failed fetch or read says went wrong (undici puts the socket's error in `cause`). */
const causeOf = (err: unknown) =>
  err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);

function rpcErrorOf(method: string, error: JsonObject): McpRpcError {
  return new McpRpcError(method, Number(error.code), String(error.message), error.data);
}

/** The JSON-RPC response with `id` in a body that is either JSON or a whole SSE stream. */
function responseIn(body: string, contentType: string, id: number): JsonObject | undefined {
  if (!contentType.includes('text/event-stream')) {
    const parsed: unknown = JSON.parse(body);
    return isJsonObject(parsed) ? parsed : undefined;
  }
  const reader = new SseReader();
  return [...reader.push(body), ...reader.end()].find((m) => m.id === id);
}
