import type { Context } from 'hono';
import { ProtocolErrorCode } from '../core/errors.ts';
import { isStorable, jsonBytes } from '../core/limits.ts';
import type { ClientCapabilities, JsonObject, RequestId } from '../core/wire.ts';
import type { Rev2025Options } from './options.ts';
import { respond } from './respond.ts';
import { SERVER_REQUEST_ID_PREFIX } from './server-requests.ts';
import { answerTaskInput, parseTaskInputRequestId } from './task-input.ts';
import { REV2025_VERSIONS, rev2025Capabilities, negotiateVersion } from './shapes.ts';
import type { Session } from './sessions/store.ts';
import { isRequestId, isSessionVersion, quotaRefusal, rpcError, SESSION_HEADER } from './wire.ts';

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
 * answers to server requests get 202; requests are answered by `respond` (JSON, or an SSE stream when
 * the server has to talk first).
 */
export function sessionPost(rev: Rev2025Options) {
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
    if (version !== undefined && !isSessionVersion(version)) {
      return c.json(
        rpcError(id, -32000, `Bad Request: Unsupported protocol version: ${version}`, {
          supported: [...REV2025_VERSIONS, ...rev.otherVersions],
        }),
        400,
      );
    }
    const principal = rev.principalOf(c);
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
      return initialize(rev, c, id, principal, (message.params ?? {}) as JsonObject);
    }
    if (sessionHeader === undefined) {
      return c.json(rpcError(id, -32000, 'Bad Request: Mcp-Session-Id header is required'), 400);
    }
    const session = await rev.sessions.find(sessionHeader, principal);
    if (session === undefined) return c.json(rpcError(id, -32001, 'Session not found'), 404);
    return afterInitialize(rev, c, session, message, id);
  };
}

/** A message of an open session: a client's answer, a notification, or a request. */
async function afterInitialize(
  rev: Rev2025Options,
  c: Context,
  session: Session,
  message: Message,
  id: RequestId | undefined,
): Promise<Response> {
  if (message.method === undefined && id !== undefined && ('result' in message || 'error' in message)) {
    // The client's answer to a request the server sent it: whoever waits for it reads it. Only ids
    // the server issues are stored, so a client cannot fill the table with answers nobody awaits.
    if (!isUsableId(id)) return c.body(null, 202); // (no request of ours has such an id: nothing awaits it)
    const answer = 'result' in message ? message.result : message.error;
    if (!isStorable(answer) || jsonBytes(answer) > rev.maxInputResponsesBytes) {
      return c.json(
        rpcError(
          null,
          ProtocolErrorCode.InvalidParams,
          `Invalid params: an answer must be at most ${rev.maxInputResponsesBytes} bytes of JSON, without NUL characters or unpaired surrogates`,
        ),
        400,
      );
    }
    const taskInput = typeof id === 'string' ? parseTaskInputRequestId(id) : undefined;
    if (taskInput !== undefined) {
      await answerTaskInput(rev, session, taskInput, message);
    } else if (typeof id === 'string' && id.startsWith(SERVER_REQUEST_ID_PREFIX)) {
      await rev.sessions.recordResponse(session.sessionId, id, message);
    }
    return c.body(null, 202);
  }
  if (typeof message.method !== 'string') {
    return c.json(rpcError(id, ProtocolErrorCode.InvalidRequest, 'Invalid Request'), 400);
  }
  if (message.id === undefined) {
    const p = message.params as { requestId?: unknown } | undefined;
    if (
      message.method === 'notifications/cancelled' &&
      isRequestId(p?.requestId) &&
      isUsableId(p.requestId)
    ) {
      await rev.sessions.cancelRequest(session.sessionId, String(p.requestId));
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
  return respond({ rev, c, session, id, method: message.method, params });
}

async function initialize(
  rev: Rev2025Options,
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
  const stored = { capabilities, clientInfo };
  if (jsonBytes(stored) > rev.maxSessionMetadataBytes || !isStorable(stored)) {
    return c.json(
      rpcError(
        id,
        ProtocolErrorCode.InvalidParams,
        `Invalid params: capabilities and clientInfo must be storable and hold at most ${rev.maxSessionMetadataBytes} bytes as JSON`,
      ),
      200,
    );
  }
  const version = negotiateVersion(params.protocolVersion);
  let sessionId: string;
  try {
    sessionId = await rev.sessions.create({
      principal,
      protocolVersion: version,
      clientCapabilities: normalizeCapabilities(capabilities as ClientCapabilities),
      clientInfo: clientInfo as JsonObject,
    });
  } catch (err) {
    return quotaRefusal(c, id, err, rev.metrics);
  }
  const result = {
    protocolVersion: version,
    capabilities: rev2025Capabilities({ version, ...rev.serves }),
    serverInfo: rev.serverInfo,
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

/** Longer request ids are no request's, of ours or (for a cancel) any a client may fairly use. */
const MAX_REQUEST_ID_CHARS = 256;

/** An id worth looking up or passing on: a number, or a short string Postgres can store. */
function isUsableId(id: RequestId): boolean {
  return typeof id === 'number' || (id.length <= MAX_REQUEST_ID_CHARS && isStorable(id));
}
