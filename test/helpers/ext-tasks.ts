/**
 * The one `ConnectedMcpSessionPort` of the suite: @modelcontextprotocol/ext-tasks' `withTasks` over
 * stateless 2026-07-28 POSTs (no server-to-client requests, no listen stream), built on mcp.ts.
 */
import {
  createApplicationInputHandler,
  DispatchError,
  type ApplicationElicitResult,
  type ConnectedMcpSessionPort,
  type DispatchOptions,
  type JsonRpcResponse,
  type ResolvedInputExchangeContext,
} from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import { postMcp, TASK_CAPS, TASKS_EXT, type RequestOptions, type RpcReply } from './mcp.ts';

type JsonObject = { readonly [key: string]: JsonValue };
const isObj = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
const obj = (v: unknown): JsonObject => (isObj(v) ? v : {});
const CAPS_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** How the port sends one request; `postMcp` to the port's URL by default. Throws on a transport failure. */
export type PortSend = (
  method: string,
  params: Record<string, unknown>,
  opts: RequestOptions & { headers: Record<string, string>; signal?: AbortSignal },
) => Promise<RpcReply>;

/** What a test may watch: each request sent, each reply (throw to fail the dispatch), each abort. */
export interface PortHooks {
  sent?(method: string): void;
  replied?(method: string, reply: RpcReply): void;
  /** A request its caller aborted (e.g. a poll in flight when the session closed): it has no reply. */
  aborted?(method: string): void;
}

export interface PortOptions {
  clientInfo?: { name: string; version: string };
  /** The client's capabilities; ext-tasks' own are merged in, and the tasks extension always declared. */
  caps?: Record<string, unknown>;
  send?: PortSend;
  hooks?: PortHooks;
}

/**
 * A port for `withTasks`: each dispatch is one POST with the 2026-07-28 envelope and routing headers.
 * A transport failure is a `DispatchError`, retryable unless the request was a `tools/call` (a lost
 * reply may have created a task); a reply with no JSON-RPC response is a non-retryable one.
 */
export function extTasksPort(url: string, opts: PortOptions = {}): ConnectedMcpSessionPort {
  const send: PortSend = opts.send ?? ((method, params, o) => postMcp(url, method, params, o));
  const base = obj(opts.caps ?? TASK_CAPS);

  async function dispatch(request: JsonValue, options: DispatchOptions = {}): Promise<JsonRpcResponse> {
    if (!isObj(request) || typeof request.method !== 'string') {
      throw new DispatchError('request must be {method, params}');
    }
    const method = request.method;
    const { _meta, ...params } = obj(request.params);
    // The envelope is the port's to write; whatever else ext-tasks put in _meta goes along.
    const {
      [CAPS_KEY]: asked,
      'io.modelcontextprotocol/protocolVersion': _version,
      'io.modelcontextprotocol/clientInfo': _clientInfo,
      ...meta
    } = obj(_meta);
    const caps = {
      ...base,
      ...obj(asked),
      extensions: { ...obj(base.extensions), ...obj(obj(asked).extensions), [TASKS_EXT]: {} },
    };
    // Mcp-Name is derived from the params; the rest of the host's headers go as they are.
    const headers = Object.fromEntries(
      Object.entries(options.context?.headers ?? {}).filter(([k]) => k.toLowerCase() !== 'mcp-name'),
    );
    const timeoutMs = options.context?.requestTimeoutMs;
    const signals = [
      options.signal,
      timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs),
    ].filter((s) => s !== undefined);
    opts.hooks?.sent?.(method);
    let reply: RpcReply;
    try {
      reply = await send(method, params, {
        caps,
        meta,
        headers,
        ...(opts.clientInfo === undefined ? {} : { clientInfo: opts.clientInfo }),
        ...(signals.length === 0 ? {} : { signal: AbortSignal.any(signals) }),
      });
    } catch (cause) {
      if (options.signal?.aborted) {
        opts.hooks?.aborted?.(method);
        throw cause;
      }
      throw new DispatchError(`transport failure for ${method}`, method !== 'tools/call', { cause });
    }
    opts.hooks?.replied?.(method, reply);
    const m = reply.body;
    if (isObj(m.error)) {
      const { code, message, data } = m.error as { code: unknown; message: unknown; data?: JsonValue };
      return {
        kind: 'error',
        error: {
          code: Number(code),
          message: typeof message === 'string' ? message : JSON.stringify(message),
          ...(data === undefined ? {} : { data }),
        },
      };
    }
    if ('result' in m && m.result !== undefined) return { kind: 'result', result: m.result as JsonValue };
    throw new DispatchError(`HTTP ${reply.status}: no JSON-RPC response for ${method}`, false);
  }

  return {
    endpointId: url,
    taskCapabilities: { generation: 'v2', capabilities: {} },
    dispatch,
    onServerRequest: () => () => {},
    onNotification: () => () => {},
    onInvalidated: () => () => {},
    invalidated: false,
  };
}

/** An elicitation a session was asked, with ext-tasks' context (task id, input key). */
export interface Elicited {
  params: Readonly<Record<string, JsonValue>>;
  ctx: ResolvedInputExchangeContext;
}

/**
 * A `withTasks` input handler that records each elicitation in `elicited` and answers it with `answer`;
 * sampling fails (no test server asks for it) and roots are empty.
 */
export function recordingInputHandler(
  elicited: Elicited[],
  answer: (e: Elicited) => ApplicationElicitResult,
): ReturnType<typeof createApplicationInputHandler<void>> {
  return createApplicationInputHandler<void>({
    elicitation: async (request, ctx) => {
      const e = { params: request.params, ctx };
      elicited.push(e);
      return answer(e);
    },
    sampling: async () => {
      throw new Error('sampling is not expected from this server');
    },
    roots: async () => ({ roots: [] }),
  });
}
