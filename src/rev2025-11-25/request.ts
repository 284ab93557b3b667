import type { Context } from 'hono';
import {
  META_CLIENT_CAPABILITIES,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
  type JsonObject,
  type RequestId,
  type RequestMeta,
} from '../core/wire.ts';
import type { RequestContext } from '../protocol/context.ts';
import { SESSION_CHANNELS } from './channels.ts';
import type { Rev2025Options } from './options.ts';
import type { Session } from './sessions/store.ts';
import type { SessionStream } from './sse.ts';
import { isRequestId } from './wire.ts';

/** One request of a session, as the revision's methods see it. */
export interface SessionRequest {
  rev: Rev2025Options;
  c: Context;
  session: Session;
  id: RequestId;
  method: string;
  params: JsonObject;
  /** The response's stream (it opens when something must go out first); none for a JSON-only client. */
  stream: SessionStream | undefined;
}

/**
 * The request as the shared method handlers see it: the session stands in for the `_meta` envelope
 * (its version, capabilities and log level), and tasks it creates carry 2025-11-25's traits (an isError result fails the task).
 */
export function handlerContext(
  req: SessionRequest,
  overrides: Partial<Pick<RequestContext, 'params' | 'signal' | 'notify' | 'closeStream'>> = {},
): RequestContext {
  const { rev, c, session, id, method, params } = req;
  const requestMeta = (params._meta ?? {}) as JsonObject;
  const progressToken = requestMeta.progressToken;
  const meta: RequestMeta = {
    [META_PROTOCOL_VERSION]: session.protocolVersion,
    [META_CLIENT_CAPABILITIES]: session.clientCapabilities,
    ...(session.logLevel === null
      ? {}
      : { [META_LOG_LEVEL]: session.logLevel as RequestMeta[typeof META_LOG_LEVEL] }),
    ...(isRequestId(progressToken) ? { progressToken } : {}),
  };
  return {
    id,
    method,
    params,
    meta,
    principal: session.principal,
    taskTraits: {
      origin: session.sessionId,
      toolErrorFails: session.protocolVersion === '2025-11-25',
    },
    spanAttributes: {
      'mcp.session.id': session.sessionId,
      'mcp.protocol.version': session.protocolVersion,
    },
    log: rev.log.scope({ requestId: id }),
    header: (name) => c.req.header(name),
    signal: c.req.raw.signal,
    ...overrides,
  };
}

/**
 * The signal of a request: aborted by the client's notifications/cancelled (sent to any instance) and
 * at shutdown; when the HTTP request goes away, unless its stream has opened (the client may resume
 * that). `release` stops listening once the request is answered.
 */
export function requestSignal(req: SessionRequest): { signal: AbortSignal; release: () => void } {
  const { rev, c, session, id, stream } = req;
  const abort = new AbortController();
  const stop = (why: string) => () => abort.abort(new Error(why));
  const onShutdown = stop('shutting down');
  rev.shutdown.addEventListener('abort', onShutdown, { once: true });
  const onGone = () => {
    if (stream?.isOpen !== true) abort.abort(new Error('client went away'));
  };
  c.req.raw.signal.addEventListener('abort', onGone, { once: true });
  const off = rev.feed?.on(SESSION_CHANNELS.cancel, (payload) => {
    if (payload === `${session.sessionId} ${String(id)}`) abort.abort(new Error('cancelled by the client'));
  });
  return {
    signal: abort.signal,
    release: () => {
      off?.();
      rev.shutdown.removeEventListener('abort', onShutdown);
      c.req.raw.signal.removeEventListener('abort', onGone);
    },
  };
}

/** Runs `fn` with the request's abort signal, released when it settles. */
export async function withRequestSignal<T>(
  req: SessionRequest,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { signal, release } = requestSignal(req);
  try {
    return await fn(signal);
  } finally {
    release();
  }
}
