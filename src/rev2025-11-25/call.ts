import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestContext } from '../protocol/context.ts';
import { ProtocolError, ProtocolErrorCode, toProtocolError } from '../core/errors.ts';
import { toLegacyResult } from './shapes.ts';
import type { InputRequests, JsonObject } from '../core/wire.ts';
import type { Session } from './sessions/store.ts';
import type { LegacyOptions } from './common.ts';
import type { SessionStream } from './sse.ts';

/** The ids of the server's own requests to the client start with this (their answers are stored). */
export const SERVER_REQUEST_ID_PREFIX = 's-';

/** MRTR rounds a call may take before it is refused: a handler asking forever is a bug. */
const MAX_ROUNDS = 32;

/**
 * Runs a 2025-era request whose handler may need input, on its SSE stream. The handler runs as in
 * 2026-07-28 (MRTR: it returns `input_required` with its requests and an integrity-protected state);
 * here the server plays the client's part of MRTR: it sends each input request to the client on this
 * stream as a server-to-client request, waits for the answers (a POST that may land on any instance
 * and reaches us through Postgres), and calls again with them. The client sees one call.
 */
export async function runWithServerRequests(
  o: LegacyOptions,
  ctx: RequestContext,
  session: Session,
  stream: SessionStream | undefined,
): Promise<object> {
  const { id } = ctx;
  let params = ctx.params;
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const result = (await o.dispatcher.dispatch({ ...ctx, params })) as JsonObject;
      if (result.resultType !== 'input_required') {
        return { jsonrpc: '2.0', id, result: toLegacyResult(result) };
      }
      if (stream === undefined) {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidRequest,
          'This call needs input from the client: send Accept: text/event-stream so the server can ask for it',
        );
      }
      const answers = await ask(o, session, stream, result.inputRequests as InputRequests, ctx.signal);
      params = { ...ctx.params, inputResponses: answers, requestState: result.requestState };
    }
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'The handler asked for input too many times');
  } catch (err) {
    const error = toProtocolError(err, (cause) =>
      ctx.log.error('request failed', { method: ctx.method, error: String(cause) }),
    );
    return { jsonrpc: '2.0', id, error: error.toJSON() };
  }
}

/**
 * Sends the input requests to the client on `stream` (with `meta` in their params' `_meta`, e.g. the
 * related task) and returns its answers by key.
 */
export async function ask(
  o: LegacyOptions,
  session: Session,
  stream: SessionStream,
  requests: InputRequests,
  signal: AbortSignal,
  meta?: JsonObject,
): Promise<Record<string, JsonObject>> {
  const ids = new Map<string, string>();
  for (const [key, request] of Object.entries(requests)) {
    const requestId = `${SERVER_REQUEST_ID_PREFIX}${randomBytes(9).toString('base64url')}`;
    ids.set(requestId, key);
    const params = { ...request.params };
    if (meta !== undefined) params._meta = { ...(params._meta as JsonObject | undefined), ...meta };
    await stream.send({
      jsonrpc: '2.0',
      id: requestId,
      method: request.method,
      ...(Object.keys(params).length === 0 ? {} : { params }),
    });
  }
  const responses = await waitForResponses(o, session.sessionId, [...ids.keys()], signal);
  const answers: Record<string, JsonObject> = {};
  for (const [requestId, response] of responses) {
    const key = ids.get(requestId)!;
    const error = response.error as { code?: unknown; message?: unknown } | undefined;
    if (error !== undefined) {
      throw new ProtocolError(
        typeof error.code === 'number' ? error.code : ProtocolErrorCode.InternalError,
        `The client refused ${requests[key]!.method}: ${typeof error.message === 'string' ? error.message : 'error'}`,
      );
    }
    answers[key] = (response.result ?? {}) as JsonObject;
  }
  return answers;
}

/**
 * Waits until the client has answered every request: woken by the change feed when an answer is
 * stored on any instance, with a poll as the backstop (a NOTIFY is a hint, never the only path).
 */
async function waitForResponses(
  o: LegacyOptions,
  sessionId: string,
  requestIds: readonly string[],
  signal: AbortSignal,
): Promise<Map<string, JsonObject>> {
  const got = new Map<string, JsonObject>();
  const deadline = Date.now() + (o.inputTimeoutMs ?? 600_000);
  let woken = false;
  let wake: (() => void) | undefined;
  const off = o.feed?.on('response', (payload) => {
    if (!payload.startsWith(`${sessionId} `)) return;
    woken = true;
    wake?.();
  });
  try {
    for (;;) {
      woken = false;
      const missing = requestIds.filter((r) => !got.has(r));
      for (const [r, response] of await o.sessions.takeResponses(sessionId, missing)) got.set(r, response);
      if (got.size === requestIds.length) return got;
      if (signal.aborted) throw new ProtocolError(ProtocolErrorCode.InternalError, 'Request cancelled');
      if (Date.now() > deadline) {
        throw new ProtocolError(ProtocolErrorCode.InternalError, 'The client did not answer in time');
      }
      if (!woken) {
        const timer = new AbortController();
        await Promise.race([
          sleep(1_000, undefined, { signal: timer.signal }).catch(() => {}),
          new Promise<void>((resolve) => (wake = resolve)),
        ]);
        timer.abort();
        wake = undefined;
      }
    }
  } finally {
    off?.();
  }
}
