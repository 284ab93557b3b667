import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { InputRequests, JsonObject } from '../core/wire.ts';
import { SESSION_CHANNELS } from './channels.ts';
import type { Rev2025Options } from './options.ts';
import type { SessionStream } from './sse.ts';

/** The ids of the server's own requests to the client start with this (their answers are stored). */
export const SERVER_REQUEST_ID_PREFIX = 's-';

export interface ServerRequests {
  rev: Rev2025Options;
  sessionId: string;
  stream: SessionStream;
  signal: AbortSignal;
  /** Merged into each request's `params._meta` (e.g. the related task). */
  meta?: JsonObject | undefined;
}

/**
 * Sends input requests (elicitation, sampling, roots) to the client on `stream` as server-to-client
 * requests and returns its answers by key: the answers arrive as POSTs that may land on any instance
 * and reach this one through Postgres. A refusal (a JSON-RPC error) fails the request.
 */
export async function ask(to: ServerRequests, requests: InputRequests): Promise<Record<string, JsonObject>> {
  const ids = new Map<string, string>();
  for (const key of Object.keys(requests)) {
    ids.set(`${SERVER_REQUEST_ID_PREFIX}${randomBytes(9).toString('base64url')}`, key);
  }
  // Recorded before they go out: an answer is kept only for a request the server sent.
  await to.rev.sessions.expectResponses(to.sessionId, [...ids.keys()]);
  try {
    return await askRecorded(to, requests, ids);
  } finally {
    await to.rev.sessions.forgetResponses(to.sessionId, [...ids.keys()]).catch(() => {});
  }
}

/** Sends the recorded requests on the stream and waits for every answer. */
async function askRecorded(
  to: ServerRequests,
  requests: InputRequests,
  ids: ReadonlyMap<string, string>,
): Promise<Record<string, JsonObject>> {
  for (const [requestId, key] of ids) {
    const request = requests[key]!;
    const params = { ...request.params };
    if (to.meta !== undefined) params._meta = { ...(params._meta as JsonObject | undefined), ...to.meta };
    await to.stream.send({
      jsonrpc: '2.0',
      id: requestId,
      method: request.method,
      ...(Object.keys(params).length === 0 ? {} : { params }),
    });
  }
  const responses = await waitForResponses(to, [...ids.keys()]);
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
  { rev, sessionId, signal }: ServerRequests,
  requestIds: readonly string[],
): Promise<Map<string, JsonObject>> {
  const got = new Map<string, JsonObject>();
  const deadline = Date.now() + (rev.inputTimeoutMs ?? 600_000);
  let woken = false;
  let wake: (() => void) | undefined;
  const off = rev.feed?.on(SESSION_CHANNELS.response, (payload) => {
    if (!payload.startsWith(`${sessionId} `)) return;
    woken = true;
    wake?.();
  });
  try {
    for (;;) {
      woken = false;
      const missing = requestIds.filter((r) => !got.has(r));
      for (const [r, response] of await rev.sessions.takeResponses(sessionId, missing)) got.set(r, response);
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
