import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import { toRequestError } from '../protocol/request-error.ts';
import { isStorable } from '../core/limits.ts';
import { LOG_LEVELS, type JsonObject } from '../core/wire.ts';
import { toolsCall } from './call.ts';
import { handlerContext, withRequestSignal, type SessionRequest } from './request.ts';
import { rev2025Tools, toRev2025Result, type Rev2025Version } from './shapes.ts';
import { tasksCancel, tasksGet, tasksList, tasksResult } from './tasks.ts';

/** Methods whose 2026-07-28 handlers serve the 2025-11-25 revision too, their results reshaped. */
const SHARED = new Set([
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
]);

/** The methods of the 2025-11-25 revision that are its own (the rest are SHARED with 2026-07-28). */
const METHODS: Record<string, (req: SessionRequest) => Promise<JsonObject>> = {
  ping: async () => ({}),
  'logging/setLevel': async ({ rev, session, params }) => {
    if (!(LOG_LEVELS as readonly unknown[]).includes(params.level)) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid params: unknown log level');
    }
    await rev.sessions.setLogLevel(session.sessionId, params.level as string);
    return {};
  },
  'resources/subscribe': resourcesOnly(async ({ rev, session, params }) => {
    await rev.sessions.subscribe(session.sessionId, uriOf(params));
    return {};
  }),
  'resources/unsubscribe': resourcesOnly(async ({ rev, session, params }) => {
    await rev.sessions.unsubscribe(session.sessionId, uriOf(params));
    return {};
  }),
  'tools/list': async ({ rev, session }) => ({
    tools: rev2025Tools(rev.tools, session.protocolVersion as Rev2025Version),
  }),
  'tools/call': toolsCall,
  'tasks/get': tasksOnly(tasksGet),
  'tasks/list': tasksOnly(tasksList),
  'tasks/cancel': tasksOnly(tasksCancel),
  'tasks/result': tasksOnly((req) => withRequestSignal(req, (signal) => tasksResult(req, signal))),
};

/** The longest resource URI a subscription is stored for. */
const MAX_URI_CHARS = 2_048;

function uriOf(params: JsonObject): string {
  if (typeof params.uri !== 'string') {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid params: uri is required');
  }
  if (params.uri.length > MAX_URI_CHARS || !isStorable(params.uri)) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Invalid params: uri must be at most ${MAX_URI_CHARS} characters, without NUL characters`,
    );
  }
  return params.uri;
}

/** A server without resources has no resources/subscribe: -32601, nothing stored. */
function resourcesOnly(method: (req: SessionRequest) => Promise<JsonObject>) {
  return (req: SessionRequest) => {
    if (!req.rev.serves.resources) {
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    }
    return method(req);
  };
}

/** Tasks exist at 2025-11-25 only; a stray `task` param (sdk 1.x sends one) is ignored elsewhere. */
function tasksOnly(method: (req: SessionRequest) => Promise<JsonObject>) {
  return (req: SessionRequest) => {
    if (req.session.protocolVersion !== '2025-11-25') {
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    }
    return method(req);
  };
}

/** The JSON-RPC response to one request of a session (an error response for a failure). */
export async function answer(req: SessionRequest): Promise<object> {
  const { rev, id, method } = req;
  try {
    const own = Object.hasOwn(METHODS, method) ? METHODS[method] : undefined;
    if (own !== undefined) return { jsonrpc: '2.0', id, result: await own(req) };
    if (!SHARED.has(method) || !rev.dispatcher.has(method)) {
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `Method not found: ${method}`);
    }
    const result = await rev.dispatcher.dispatch(handlerContext(req));
    return { jsonrpc: '2.0', id, result: toRev2025Result(result) };
  } catch (err) {
    const error = toRequestError(err, {
      isDatabaseUnavailable: rev.isDatabaseUnavailable,
      log: rev.log,
      method,
    });
    return { jsonrpc: '2.0', id, error: error.toJSON() };
  }
}
