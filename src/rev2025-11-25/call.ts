import { ProtocolError, ProtocolErrorCode, TASKS_EXTENSION } from '../core/errors.ts';
import { META_CLIENT_CAPABILITIES, type InputRequests, type JsonObject } from '../core/wire.ts';
import type { RequestContext } from '../protocol/context.ts';
import { handlerContext, withRequestSignal, type SessionRequest } from './request.ts';
import { ask } from './server-requests.ts';
import { rev2025Task, toRev2025Result } from './shapes.ts';

/** MRTR rounds a call may take before it is refused: a handler asking forever is a bug. */
const MAX_ROUNDS = 32;

/**
 * tools/call. At 2025-11-25 a task exists only when the request carries `params.task` (whatever the
 * session declared); otherwise the tool runs here, its progress and log notifications and its input
 * requests going out on the call's stream. It goes on if the stream drops (the client resumes it) and
 * stops on shutdown or the client's notifications/cancelled.
 */
export async function toolsCall(req: SessionRequest): Promise<JsonObject> {
  const { rev, session, params } = req;
  const policy = rev.tools.get(typeof params.name === 'string' ? params.name : '').taskSupport ?? 'never';
  const { task, ...call } = params;
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
  return withRequestSignal(req, (signal) =>
    augmented ? createTask(req, call, signal) : runWithServerRequests(req, call, signal),
  );
}

/**
 * The same task as 2026-07-28 creates (one row, its first run committed before the answer), shaped as
 * 2025-11-25's CreateTaskResult.
 */
async function createTask(req: SessionRequest, call: JsonObject, signal: AbortSignal): Promise<JsonObject> {
  const ctx = handlerContext(req, { params: call, signal });
  const caps = { ...req.session.clientCapabilities, extensions: { [TASKS_EXTENSION]: {} } };
  const created = await req.rev.dispatcher.dispatch({
    ...ctx,
    meta: { ...ctx.meta, [META_CLIENT_CAPABILITIES]: caps },
  });
  return { task: rev2025Task(created) };
}

/**
 * Runs a synchronous call whose handler may need input. The handler runs as at 2026-07-28 (MRTR: it
 * returns `input_required` with its requests and an integrity-protected state, and never runs as a
 * task: the session's capabilities declare no tasks extension to it); here the server plays the
 * client's part of MRTR: it sends each input request to the client on the call's stream, waits for
 * the answers, and calls again with them. The client sees one call.
 */
async function runWithServerRequests(
  req: SessionRequest,
  call: JsonObject,
  signal: AbortSignal,
): Promise<JsonObject> {
  const { rev, session, stream } = req;
  // A task-optional tool must not become a task because the session declared the extension.
  const { [TASKS_EXTENSION]: _tasks, ...extensions } = session.clientCapabilities.extensions ?? {};
  const caps = { ...session.clientCapabilities, extensions };
  const ctx: RequestContext = handlerContext(req, {
    params: call,
    signal,
    ...(stream === undefined
      ? {}
      : {
          notify: (n) => stream.send({ jsonrpc: '2.0', ...n }),
          closeStream: () =>
            void stream
              .open()
              .then(() => stream.close())
              .catch(() => {}),
        }),
  });
  const base = { ...ctx, meta: { ...ctx.meta, [META_CLIENT_CAPABILITIES]: caps } };
  let params = call;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const result = await rev.dispatcher.dispatch({ ...base, params });
    if (result.resultType !== 'input_required') return toRev2025Result(result);
    if (stream === undefined) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        'This call needs input from the client: send Accept: text/event-stream so the server can ask for it',
      );
    }
    const answers = await ask(
      { rev, sessionId: session.sessionId, stream, signal },
      result.inputRequests as InputRequests,
    );
    params = { ...call, inputResponses: answers, requestState: result.requestState };
  }
  throw new ProtocolError(ProtocolErrorCode.InternalError, 'The handler asked for input too many times');
}
