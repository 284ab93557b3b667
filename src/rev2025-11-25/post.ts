import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { RequestContext } from '../protocol/context.ts';
import { ProtocolError, ProtocolErrorCode, TASKS_EXTENSION, toProtocolError } from '../core/errors.ts';
import {
  LEGACY_VERSIONS,
  legacyCapabilities,
  legacyTools,
  negotiateVersion,
  toLegacyResult,
  type LegacyVersion,
} from './shapes.ts';
import {
  LOG_LEVELS,
  META_CLIENT_CAPABILITIES,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  type ClientCapabilities,
  type JsonObject,
  type RequestId,
  type RequestMeta,
} from '../core/wire.ts';
import type { Session } from './sessions/store.ts';
import { runWithServerRequests, SERVER_REQUEST_ID_PREFIX } from './call.ts';
import { tasksCancel, tasksGet, tasksList, tasksResult } from './tasks.ts';
import { isRequestId, rpcError, SESSION_HEADER, type LegacyOptions } from './common.ts';
import { SessionStream, SSE_HEADERS } from './sse.ts';

/** Methods whose 2026-07-28 handlers serve the session era too, their results reshaped. */
const SHARED = new Set([
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
]);

type Message = {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
  result?: unknown;
  error?: unknown;
};

/**
 * POST /mcp for the 2025-11-25 (and 2025-06-18, 2025-03-26) revisions: `initialize` opens a session
 * kept in Postgres, so any instance serves every later request of it; notifications and the client's
 * answers to server requests get 202; requests are answered as JSON, or on an SSE stream when the
 * server has to talk first (progress, logs, elicitation, sampling, roots).
 */
export function legacyPost(o: LegacyOptions) {
  return async (c: Context, text: string): Promise<Response> => {
    let message: Message;
    try {
      message = JSON.parse(text) as Message;
    } catch {
      return c.json(rpcError(null, ProtocolErrorCode.ParseError, 'Parse error'), 400);
    }
    if (
      message === null ||
      typeof message !== 'object' ||
      Array.isArray(message) ||
      message.jsonrpc !== '2.0'
    ) {
      return c.json(rpcError(null, ProtocolErrorCode.InvalidRequest, 'Invalid Request'), 400);
    }
    const id = isRequestId(message.id) ? message.id : undefined;
    const version = c.req.header('mcp-protocol-version');
    if (version !== undefined && !(LEGACY_VERSIONS as readonly string[]).includes(version)) {
      return c.json(
        rpcError(id, -32000, `Bad Request: Unsupported protocol version: ${version}`, {
          supported: [...LEGACY_VERSIONS, PROTOCOL_VERSION],
        }),
        400,
      );
    }
    const principal = o.principalOf(c);
    const sessionHeader = c.req.header(SESSION_HEADER);
    if (message.method === 'initialize') {
      if (sessionHeader !== undefined) {
        return c.json(
          rpcError(id, ProtocolErrorCode.InvalidRequest, 'Invalid Request: already initialized'),
          400,
        );
      }
      if (id === undefined) {
        return c.json(
          rpcError(null, ProtocolErrorCode.InvalidRequest, 'Invalid Request: initialize needs an id'),
          400,
        );
      }
      return initialize(o, c, id, principal, (message.params ?? {}) as JsonObject);
    }
    if (sessionHeader === undefined) {
      return c.json(rpcError(id, -32000, 'Bad Request: Mcp-Session-Id header is required'), 400);
    }
    const session = await o.sessions.find(sessionHeader, principal);
    if (session === undefined) return c.json(rpcError(id, -32001, 'Session not found'), 404);

    if (message.method === undefined && id !== undefined && ('result' in message || 'error' in message)) {
      // The client's answer to a request the server sent it: whoever waits for it reads it. Only ids
      // the server issues are stored, so a client cannot fill the table with answers nobody awaits.
      if (typeof id === 'string' && id.startsWith(SERVER_REQUEST_ID_PREFIX)) {
        await o.sessions.recordResponse(session.sessionId, id, message);
      }
      return c.body(null, 202);
    }
    if (typeof message.method !== 'string') {
      return c.json(rpcError(id, ProtocolErrorCode.InvalidRequest, 'Invalid Request'), 400);
    }
    if (message.id === undefined) {
      const p = message.params as { requestId?: unknown } | undefined;
      if (message.method === 'notifications/cancelled' && isRequestId(p?.requestId)) {
        await o.sessions.cancelRequest(session.sessionId, String(p.requestId));
      }
      return c.body(null, 202); // notifications/initialized, cancelled, …
    }
    if (id === undefined) {
      return c.json(rpcError(null, ProtocolErrorCode.InvalidRequest, 'Invalid Request: bad id'), 400);
    }
    const params = (message.params ?? {}) as JsonObject;
    if (params === null || typeof params !== 'object' || Array.isArray(params)) {
      return c.json(rpcError(id, ProtocolErrorCode.InvalidParams, 'Invalid params'), 200);
    }
    return request(o, c, session, id, message.method, params);
  };
}

async function initialize(
  o: LegacyOptions,
  c: Context,
  id: RequestId,
  principal: string,
  params: JsonObject,
): Promise<Response> {
  const capabilities = params.capabilities ?? {};
  const clientInfo = params.clientInfo ?? {};
  if (
    typeof params.protocolVersion !== 'string' ||
    typeof capabilities !== 'object' ||
    typeof clientInfo !== 'object'
  ) {
    return c.json(
      rpcError(
        id,
        ProtocolErrorCode.InvalidParams,
        'Invalid params: initialize needs protocolVersion, capabilities and clientInfo',
      ),
      200,
    );
  }
  const version = negotiateVersion(params.protocolVersion);
  const sessionId = await o.sessions.create({
    principal,
    protocolVersion: version,
    clientCapabilities: normalizeCapabilities(capabilities as ClientCapabilities),
    clientInfo: clientInfo as JsonObject,
  });
  const result = {
    protocolVersion: version,
    capabilities: legacyCapabilities({ version, ...o.serves }),
    serverInfo: o.serverInfo,
  };
  return c.json({ jsonrpc: '2.0', id, result }, 200, { 'Mcp-Session-Id': sessionId });
}

/** An empty `elicitation` capability means form mode (2025-11-25), as 2026-07-28 spells it out. */
function normalizeCapabilities(caps: ClientCapabilities): ClientCapabilities {
  const elicitation = caps.elicitation;
  if (elicitation !== undefined && Object.keys(elicitation).length === 0) {
    return { ...caps, elicitation: { form: {} } };
  }
  return caps;
}

/**
 * Answers a session-era request. A client that accepts SSE gets a stream primed with an event id and
 * `retry`, logged so that it can be resumed on any instance (GET with Last-Event-ID): notifications,
 * the server's own requests (elicitation, sampling, roots) and the response go there. A JSON-only
 * client gets the response as JSON.
 */
async function request(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  method: string,
  params: JsonObject,
): Promise<Response> {
  const headers = { 'Mcp-Session-Id': session.sessionId };
  if (!(c.req.header('accept') ?? '').includes('text/event-stream')) {
    return c.json(await answer(o, c, session, id, method, params), 200, headers);
  }
  const stream = new SessionStream(o.sessions, session.sessionId, randomBytes(12).toString('base64url'));
  await stream.prime(o.retryMs ?? 3_000);
  const keepAlive = setInterval(() => stream.keepAlive(), o.keepAliveMs ?? 15_000);
  void answer(o, c, session, id, method, params, stream)
    .then((final) => stream.send(final))
    .catch((err: unknown) => o.log.warn('session stream failed', { error: String(err) }))
    .finally(() => {
      clearInterval(keepAlive);
      stream.close();
    });
  return new Response(stream.body, { status: 200, headers: { ...SSE_HEADERS, ...headers } });
}

/** The JSON-RPC response to one request (an error response for a failure). */
async function answer(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  method: string,
  params: JsonObject,
  stream?: SessionStream,
): Promise<object> {
  const reply = (result: JsonObject) => ({ jsonrpc: '2.0', id, result });
  try {
    switch (method) {
      case 'ping':
        return reply({});
      case 'logging/setLevel': {
        const level = params.level;
        if (!(LOG_LEVELS as readonly unknown[]).includes(level)) {
          throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid params: unknown log level');
        }
        await o.sessions.setLogLevel(session.sessionId, level as string);
        return reply({});
      }
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        if (typeof params.uri !== 'string') {
          throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid params: uri is required');
        }
        if (method === 'resources/subscribe') await o.sessions.subscribe(session.sessionId, params.uri);
        else await o.sessions.unsubscribe(session.sessionId, params.uri);
        return reply({});
      }
      case 'tools/list':
        return reply({ tools: legacyTools(o.tools, session.protocolVersion as LegacyVersion) });
      case 'tools/call':
        return await call(o, c, session, id, method, params, stream);
      case 'tasks/get':
      case 'tasks/list':
      case 'tasks/cancel':
      case 'tasks/result': {
        // Tasks exist at 2025-11-25 only; a stray `task` param (sdk 1.x sends one) is ignored.
        if (session.protocolVersion !== '2025-11-25') {
          throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${method}`);
        }
        if (method === 'tasks/get') return reply(await tasksGet(o, session, params));
        if (method === 'tasks/list') return reply(await tasksList(o, session, params));
        if (method === 'tasks/cancel') return reply(await tasksCancel(o, session, params));
        const { signal, release } = requestSignal(o, c, session, id, stream);
        try {
          return reply(await tasksResult(o, session, params, stream, signal));
        } finally {
          release();
        }
      }
      default: {
        if (!SHARED.has(method) || !o.dispatcher.has(method)) {
          throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${method}`);
        }
        const result = await o.dispatcher.dispatch(context(o, c, session, id, method, params));
        return reply(toLegacyResult(result));
      }
    }
  } catch (err) {
    const error = toProtocolError(err, (cause) =>
      o.log.error('request failed', { method, error: String(cause), stack: (cause as Error).stack }),
    );
    return { jsonrpc: '2.0', id, error: error.toJSON() };
  }
}

/** The request as the shared handlers see it: the session stands in for the 2026-07-28 `_meta`. */
function context(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  method: string,
  params: JsonObject,
  signal: AbortSignal = c.req.raw.signal,
  notify?: RequestContext['notify'],
): RequestContext {
  const requestMeta = (params._meta ?? {}) as JsonObject;
  const progressToken = requestMeta.progressToken;
  const meta: RequestMeta = {
    [META_PROTOCOL_VERSION]: PROTOCOL_VERSION,
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
    sessionId: session.sessionId,
    log: o.log.scope({ requestId: id }),
    header: (name) => c.req.header(name),
    signal,
    notify,
  };
}

/**
 * tools/call: the handler's progress and log notifications and its input requests go out on the
 * stream; it goes on if the stream drops (the client resumes it), and stops on shutdown.
 */
async function call(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  method: string,
  params: JsonObject,
  stream: SessionStream | undefined,
): Promise<object> {
  const policy = o.tools.get(typeof params.name === 'string' ? params.name : '').taskSupport ?? 'never';
  const { task, ...rest } = params;
  const augmented = task !== null && typeof task === 'object' && session.protocolVersion === '2025-11-25';
  if (augmented && policy === 'never') {
    throw new ProtocolError(
      ProtocolErrorCode.MethodNotFound,
      `Tool ${String(params.name)} does not run as a task`,
    );
  }
  if (!augmented && policy === 'required') {
    throw new ProtocolError(
      ProtocolErrorCode.MethodNotFound,
      `Tool ${String(params.name)} runs only as a task: call it with params.task`,
    );
  }
  const { signal, release } = requestSignal(o, c, session, id, stream);
  try {
    return await callWith(o, c, session, id, method, rest, stream, signal, augmented);
  } finally {
    release();
  }
}

async function callWith(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  method: string,
  rest: JsonObject,
  stream: SessionStream | undefined,
  signal: AbortSignal,
  augmented: boolean,
): Promise<object> {
  const ctx = context(
    o,
    c,
    session,
    id,
    method,
    rest,
    signal,
    stream === undefined ? undefined : (n) => stream.send({ jsonrpc: '2.0', ...n }),
  );
  if (augmented) {
    // The same task as 2026-07-28 creates (one row, its first run committed before the answer),
    // shaped as 2025-11-25's CreateTaskResult.
    const caps = { ...session.clientCapabilities, extensions: { [TASKS_EXTENSION]: {} } };
    const created = await o.dispatcher.dispatch({
      ...ctx,
      meta: { ...ctx.meta, [META_CLIENT_CAPABILITIES]: caps },
    });
    return {
      jsonrpc: '2.0',
      id,
      result: {
        task: {
          taskId: created.taskId,
          status: created.status,
          ...(created.statusMessage === undefined ? {} : { statusMessage: created.statusMessage }),
          createdAt: created.createdAt,
          lastUpdatedAt: created.lastUpdatedAt,
          ttl: created.ttlMs,
          pollInterval: created.pollIntervalMs,
        },
      },
    };
  }
  if (stream === undefined) return runWithServerRequests(o, ctx, session, undefined);
  return runWithServerRequests(o, { ...ctx, closeStream: () => stream.close() }, session, stream);
}

/**
 * The signal of a request: aborted by the client's notifications/cancelled (sent to any instance) and
 * at shutdown; with a stream, not when the stream drops (the client may resume it), without one, when
 * the HTTP request goes away. `release` stops listening once the request is answered.
 */
function requestSignal(
  o: LegacyOptions,
  c: Context,
  session: Session,
  id: RequestId,
  stream: SessionStream | undefined,
): { signal: AbortSignal; release: () => void } {
  const abort = new AbortController();
  const stop = (why: string) => () => abort.abort(new Error(why));
  const onShutdown = stop('shutting down');
  o.shutdown.addEventListener('abort', onShutdown, { once: true });
  const onGone = stop('client went away');
  if (stream === undefined) c.req.raw.signal.addEventListener('abort', onGone, { once: true });
  const off = o.feed?.on('cancel', (payload) => {
    if (payload === `${session.sessionId} ${String(id)}`) abort.abort(new Error('cancelled by the client'));
  });
  return {
    signal: abort.signal,
    release: () => {
      off?.();
      o.shutdown.removeEventListener('abort', onShutdown);
      c.req.raw.signal.removeEventListener('abort', onGone);
    },
  };
}
