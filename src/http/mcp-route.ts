import type { Metrics } from '../core/metrics.ts';
import type { Context } from 'hono';
import type { Logger } from '../log.ts';
import type { MethodResult } from '../protocol/context.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import {
  assertSupportedVersion,
  httpStatusFor,
  parseMessage,
  parseRequestMeta,
} from '../protocol/envelope.ts';
import { ProtocolError, ProtocolErrorCode, toProtocolError } from '../core/errors.ts';
import { databaseUnavailableError } from '../core/unavailable.ts';
import type { IsDatabaseUnavailable } from './unavailable.ts';
import type { RequestId, RequestMeta } from '../core/wire.ts';
import type { Notification } from '../core/wire.ts';
import { validateRoutingHeaders } from '../protocol/routing-headers.ts';

export interface McpRouteOptions {
  dispatcher: Dispatcher;
  /** The principal the auth middleware resolved for this request. */
  principalOf: (c: Context) => string;
  log: Logger;
  /** SSE comment interval on open streams, so that idle intermediaries keep them. */
  keepAliveMs?: number;
  maxJsonDepth?: number;
  /** Counts requests refused before they reach a method (the dispatcher counts the rest). */
  metrics?: Metrics | undefined;
  /** Whether a failure is the database being out of reach (a warning and a retry hint, not a fault). */
  isDatabaseUnavailable?: IsDatabaseUnavailable;
}

/** An error response; `id` is omitted when the request's could not be read (the 2026-07-28 schema has no null id). */
function errorBody(id: RequestId | null, error: ProtocolError) {
  return id === null
    ? { jsonrpc: '2.0' as const, error: error.toJSON() }
    : { jsonrpc: '2.0' as const, id, error: error.toJSON() };
}

const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  'X-Accel-Buffering': 'no',
} as const;

type Outcome = { ok: true; result: MethodResult } | { ok: false; error: unknown };

/**
 * POST /mcp at 2026-07-28 (the router has read the body): one JSON-RPC message per request. The answer is JSON, unless the method sends a
 * notification before its result (progress, log messages, a subscription's acknowledgement): then the
 * response becomes an SSE stream at that moment. So errors found before anything is streamed keep
 * their HTTP status, and a stream closed by the client aborts the request's signal.
 */
export function mcpPost({
  dispatcher,
  principalOf,
  log,
  keepAliveMs = 15_000,
  maxJsonDepth = 64,
  metrics,
  isDatabaseUnavailable = () => false,
}: McpRouteOptions) {
  const refused = (method: string | undefined, error: ProtocolError) =>
    metrics?.requests.inc({
      // A label only for a method the server serves: a client could mint any number of names.
      method: method !== undefined && dispatcher.has(method) ? method : 'unknown',
      outcome: String(error.code),
    });
  return async (c: Context, text: string) => {
    const incoming = parseMessage(text, { maxDepth: maxJsonDepth });
    if (incoming.kind === 'error') {
      refused(undefined, incoming.error);
      return c.json(errorBody(incoming.id, incoming.error), httpStatusFor(incoming.error));
    }
    // This revision defines no client notifications over HTTP; accepting them is harmless.
    if (incoming.kind === 'notification') return c.body(null, 202);

    const { id, method } = incoming.message;
    const params = incoming.message.params ?? {};
    const reqLog = log.scope({ requestId: id, method });
    const toError = (err: unknown) => {
      if (!isDatabaseUnavailable(err)) {
        return toProtocolError(err, (cause) =>
          reqLog.error('request failed', { method, error: String(cause), stack: (cause as Error).stack }),
        );
      }
      reqLog.warn('database unavailable', { method, error: String(err) });
      return databaseUnavailableError();
    };
    const fail = (err: unknown) => {
      const error = toError(err);
      const retryAfterMs = (error.data as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
      if (error.httpStatus === 429 && typeof retryAfterMs === 'number') {
        c.header('Retry-After', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
      }
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
      refused(method, toError(err));
      return fail(err);
    }

    const abort = new AbortController();
    // Removed when the request is done: the incoming signal may outlive it (keep-alive), and the
    // listener would keep this request's closure (its params, its result) alive with it. (Removed by
    // hand: aborting a second controller for it would build a DOMException with a stack every request.)
    const incomingSignal = c.req.raw.signal;
    const onClientGone = () => abort.abort(new Error('client went away'));
    incomingSignal.addEventListener('abort', onClientGone, { once: true });
    const encoder = new TextEncoder();
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    let streaming = false;
    let startStream: () => void = () => {};
    const started = new Promise<'stream'>((resolve) => (startStream = () => resolve('stream')));
    const write = (text: string) => {
      if (abort.signal.aborted || controller === undefined) return;
      try {
        controller.enqueue(encoder.encode(text));
      } catch {
        abort.abort(new Error('stream closed'));
      }
    };
    const frame = (message: object) => `event: message\ndata: ${JSON.stringify(message)}\n\n`;
    // Made when the first notification turns the response into a stream (most requests never do).
    let body: ReadableStream<Uint8Array> | undefined;
    const openStream = () =>
      (body ??= new ReadableStream<Uint8Array>({
        start: (ctl) => void (controller = ctl),
        cancel: () => abort.abort(new Error('client closed the stream')),
      }));
    const notify = async (n: Notification) => {
      if (abort.signal.aborted) return;
      if (!streaming) {
        streaming = true;
        openStream();
        startStream();
      }
      write(frame({ jsonrpc: '2.0', ...n }));
    };

    const settled: Promise<Outcome> = dispatcher
      .dispatch({
        id,
        method,
        params,
        meta,
        principal: principalOf(c),
        log: reqLog,
        header: (name) => c.req.header(name),
        signal: abort.signal,
        notify,
      })
      .then(
        (result) => ({ ok: true as const, result }),
        (error: unknown) => ({ ok: false as const, error }),
      );
    const outcome = settled.finally(() => incomingSignal.removeEventListener('abort', onClientGone));

    if ((await Promise.race([started, outcome.then(() => 'done' as const)])) === 'done' && !streaming) {
      const done = await outcome;
      return done.ok ? c.json({ jsonrpc: '2.0', id, result: done.result }) : fail(done.error);
    }

    const keepAlive = setInterval(() => write(':\n\n'), keepAliveMs);
    void outcome.then((done) => {
      clearInterval(keepAlive);
      if (!abort.signal.aborted) {
        write(
          frame(done.ok ? { jsonrpc: '2.0', id, result: done.result } : errorBody(id, toError(done.error))),
        );
        controller?.close();
      }
    });
    return new Response(openStream(), { status: 200, headers: SSE_HEADERS });
  };
}
