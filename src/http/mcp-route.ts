import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Logger } from '../log.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import {
  assertSupportedVersion,
  httpStatusFor,
  parseMessage,
  parseRequestMeta,
} from '../protocol/envelope.ts';
import { ProtocolError, ProtocolErrorCode, toProtocolError } from '../protocol/errors.ts';
import { META_LOG_LEVEL, type RequestId, type RequestMeta } from '../protocol/wire.ts';
import type { Notification } from '../tools/context.ts';
import { validateRoutingHeaders } from './routing-headers.ts';

export interface McpRouteOptions {
  dispatcher: Dispatcher;
  /** Resolves the principal of a request (authentication comes later; for now configuration). */
  principalOf: (c: Context) => string;
  log: Logger;
}

function errorBody(id: RequestId | null, error: ProtocolError) {
  return { jsonrpc: '2.0' as const, id, error: error.toJSON() };
}

/** Methods whose response may stream request-scoped notifications (progress, log messages). */
const STREAMING_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read']);

function wantsStream(method: string, meta: RequestMeta): boolean {
  return (
    STREAMING_METHODS.has(method) && (meta.progressToken !== undefined || meta[META_LOG_LEVEL] !== undefined)
  );
}

/** POST /mcp: one JSON-RPC message per request, answered as JSON or, when it streams, as SSE. */
export function mcpPost({ dispatcher, principalOf, log }: McpRouteOptions) {
  return async (c: Context) => {
    const incoming = parseMessage(await c.req.text());
    if (incoming.kind === 'error')
      return c.json(errorBody(incoming.id, incoming.error), httpStatusFor(incoming.error));
    // This revision defines no client notifications over HTTP; accepting them is harmless.
    if (incoming.kind === 'notification') return c.body(null, 202);

    const { id, method } = incoming.message;
    const params = incoming.message.params ?? {};
    const reqLog = log.scope({ requestId: id });
    const fail = (err: unknown) => {
      const error = toProtocolError(err, (cause) =>
        reqLog.error('request failed', { method, error: String(cause), stack: (cause as Error).stack }),
      );
      return c.json(errorBody(id, error), httpStatusFor(error));
    };

    let meta: RequestMeta;
    try {
      meta = parseRequestMeta(params);
      validateRoutingHeaders((name) => c.req.header(name), method, params, meta);
      assertSupportedVersion(meta);
      if (!dispatcher.has(method)) {
        throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${method}`);
      }
    } catch (err) {
      return fail(err);
    }

    const principal = principalOf(c);
    const base = { id, method, params, meta, principal, log: reqLog };
    if (!wantsStream(method, meta)) {
      try {
        const result = await dispatcher.dispatch({ ...base, signal: c.req.raw.signal });
        return c.json({ jsonrpc: '2.0', id, result });
      } catch (err) {
        return fail(err);
      }
    }

    c.header('X-Accel-Buffering', 'no');
    c.header('Cache-Control', 'no-cache');
    return streamSSE(c, async (stream) => {
      const abort = new AbortController();
      stream.onAbort(() => abort.abort(new Error('client closed the stream')));
      const send = async (message: object) => {
        if (!abort.signal.aborted) await stream.writeSSE({ event: 'message', data: JSON.stringify(message) });
      };
      const notify = (n: Notification) => send({ jsonrpc: '2.0', ...n });
      try {
        const result = await dispatcher.dispatch({ ...base, signal: abort.signal, notify });
        await send({ jsonrpc: '2.0', id, result });
      } catch (err) {
        const error = toProtocolError(err, (cause) =>
          reqLog.error('request failed', { method, error: String(cause) }),
        );
        await send(errorBody(id, error));
      }
    });
  };
}
