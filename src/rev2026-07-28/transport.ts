// POST /mcp at 2026-07-28: one JSON-RPC message per request, its `_meta` envelope and routing headers
// checked, dispatched to the shared method handlers, answered with JSON or, once the method sends a
// notification first, an SSE stream.
import type { Context } from 'hono';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { EventStreamInterruptedError } from '../core/task-events.ts';
import type { RequestId, RequestMeta } from '../core/wire.ts';
import type { Logger } from '../log.ts';
import type { MethodResult } from '../protocol/context.ts';
import type { Dispatcher } from '../protocol/dispatch.ts';
import { toRequestError } from '../protocol/request-error.ts';
import type { RevisionBinding, RevisionTransport } from '../protocol/revision.ts';
import { assertSupportedVersion, httpStatusFor, parseMessage, parseRequestMeta } from './envelope.ts';
import { LateStream } from './late-stream.ts';
import { validateParamHeaders } from './param-headers.ts';
import { validateRoutingHeaders } from './routing-headers.ts';
import { PROTOCOL_VERSION } from './version.ts';

export interface TransportOptions extends RevisionBinding {
  dispatcher: Dispatcher;
}

/** An error response; `id` is omitted when the request's could not be read (the 2026-07-28 schema has no null id). */
function errorBody(id: RequestId | null, error: ProtocolError) {
  return id === null
    ? { jsonrpc: '2.0' as const, error: error.toJSON() }
    : { jsonrpc: '2.0' as const, id, error: error.toJSON() };
}

type Outcome = { ok: true; result: MethodResult } | { ok: false; error: unknown };

/** A request that passed the envelope's checks, with what answering it needs. */
interface Accepted {
  id: RequestId;
  method: string;
  params: Record<string, unknown>;
  meta: RequestMeta;
  log: Logger;
}

/**
 * The 2026-07-28 revision's transport. It claims a POST that names its version in MCP-Protocol-Version;
 * as the router's first revision it also answers every POST no other revision claims (so a request
 * without the header is told what it lacks).
 */
export function createTransport(opts: TransportOptions): RevisionTransport {
  return {
    claimsPost: (header) => header('mcp-protocol-version') === PROTOCOL_VERSION,
    post: postHandler(opts),
  };
}

/**
 * The POST handler (the router has read the body). Errors found before anything is streamed keep their
 * HTTP status; a stream closed by the client aborts the request's abort signal.
 */
function postHandler(opts: TransportOptions) {
  const { dispatcher, metrics, maxJsonDepth } = opts;
  const refused = (method: string | undefined, error: ProtocolError) =>
    metrics?.requests.inc({
      // A label only for a method the server serves: a client could mint any number of names.
      method: method !== undefined && dispatcher.has(method) ? method : 'unknown',
      outcome: String(error.code),
    });
  return async (c: Context, text: string): Promise<Response> => {
    const incoming = parseMessage(text, { maxDepth: maxJsonDepth });
    if (incoming.kind === 'error') {
      refused(undefined, incoming.error);
      return c.json(errorBody(incoming.id, incoming.error), httpStatusFor(incoming.error));
    }
    // This revision defines no client notifications over HTTP; accepting them is harmless.
    if (incoming.kind === 'notification') return c.body(null, 202);
    const { id, method } = incoming.message;
    const params = incoming.message.params ?? {};
    const log = opts.log.scope({ requestId: id, method });
    let meta: RequestMeta;
    try {
      meta = checkEnvelope(c, dispatcher, method, params);
    } catch (err) {
      const error = toError(opts, log, method, err);
      refused(method, error);
      return failure(c, id, error);
    }
    return answer(c, opts, { id, method, params, meta, log });
  };
}

/** The `_meta` envelope, the routing headers that mirror it, the version and the method: its meta. */
function checkEnvelope(
  c: Context,
  dispatcher: Dispatcher,
  method: string,
  params: Record<string, unknown>,
): RequestMeta {
  const meta = parseRequestMeta(params);
  validateRoutingHeaders((name) => c.req.header(name), method, params, meta);
  assertSupportedVersion(meta);
  if (!dispatcher.has(method)) {
    throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${method}`);
  }
  return meta;
}

/**
 * Dispatches the request and answers: JSON when the method settles without notifying first, else the
 * stream its first notification opened, the result as its last event.
 */
async function answer(c: Context, opts: TransportOptions, req: Accepted): Promise<Response> {
  const abort = new AbortController();
  // Removed when the request is done: the incoming signal may outlive it (keep-alive), and the
  // listener would keep this request's closure (its params, its result) alive with it. (Removed by
  // hand: aborting a second controller for it would build a DOMException with a stack every request.)
  const incomingSignal = c.req.raw.signal;
  const onClientGone = () => abort.abort(new Error('client went away'));
  incomingSignal.addEventListener('abort', onClientGone, { once: true });
  const stream = new LateStream(abort);
  const settled: Promise<Outcome> = opts.dispatcher
    .dispatch({
      id: req.id,
      method: req.method,
      params: req.params,
      meta: req.meta,
      principal: opts.principalOf(c),
      log: req.log,
      header: (name) => c.req.header(name),
      checkArgumentHeaders: (inputSchema, args) =>
        validateParamHeaders(inputSchema, args, (name) => c.req.header(name)),
      signal: abort.signal,
      notify: stream.notify,
    })
    .then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );
  const outcome = settled.finally(() => incomingSignal.removeEventListener('abort', onClientGone));
  if (
    (await Promise.race([stream.started, outcome.then(() => 'done' as const)])) === 'done' &&
    !stream.streaming
  ) {
    const done = await outcome;
    return done.ok
      ? c.json({ jsonrpc: '2.0', id: req.id, result: done.result })
      : failure(c, req.id, toError(opts, req.log, req.method, done.error));
  }
  const final = (done: Outcome) => {
    if (done.ok) return { jsonrpc: '2.0', id: req.id, result: done.result };
    // (A task event stream cut by a shutdown ends without a result: its client resumes it elsewhere.)
    if (done.error instanceof EventStreamInterruptedError) return undefined;
    return errorBody(req.id, toError(opts, req.log, req.method, done.error));
  };
  return stream.respond(outcome, final, opts.keepAliveMs ?? 15_000);
}

/** The JSON error response for what a request threw (with Retry-After for a rate limit). */
function failure(c: Context, id: RequestId, error: ProtocolError): Response {
  const retryAfterMs = (error.data as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
  if (error.httpStatus === 429 && typeof retryAfterMs === 'number') {
    c.header('Retry-After', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  }
  return c.json(errorBody(id, error), httpStatusFor(error));
}

/** The protocol error for what a request threw (see toRequestError). */
function toError(opts: TransportOptions, log: Logger, method: string, err: unknown): ProtocolError {
  return toRequestError(err, { isDatabaseUnavailable: opts.isDatabaseUnavailable, log, method });
}
