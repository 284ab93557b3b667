import { RATE_LIMITED_CODE } from '../core/errors.ts';
import { answer } from './methods.ts';
import type { SessionRequest } from './request.ts';
import { SessionStream, SSE_HEADERS } from './sse.ts';

/**
 * Answers a session request. A request that completes before anything must go out first is answered
 * as JSON, which costs no writes. The response becomes a resumable SSE stream (logged, so that a
 * client that loses it resumes it on any instance with GET + Last-Event-ID) at the moment the handler
 * sends a notification or a request of its own, closes the stream, or is still running after
 * `streamAfterMs`. A client that accepts no SSE always gets JSON.
 */
export async function respond(req: Omit<SessionRequest, 'stream'>): Promise<Response> {
  const { rev, c, session } = req;
  const headers = { 'Mcp-Session-Id': session.sessionId };
  if (!(c.req.header('accept') ?? '').includes('text/event-stream')) {
    const message = await answer({ ...req, stream: undefined });
    return c.json(message, statusOf(message), headers);
  }
  const stream = new SessionStream(rev.sessions, session.sessionId, undefined, {
    primeWithRetryMs: rev.retryMs ?? 3_000,
  });
  const failed = (why: string) => (err: unknown) =>
    rev.log.warn('session stream failed', { why, error: String(err) });
  const longCall = setTimeout(
    () => void stream.open().catch(failed('long call')),
    rev.streamAfterMs ?? 1_000,
  );
  const final = answer({ ...req, stream });
  await Promise.race([stream.opened, final]);
  clearTimeout(longCall);
  if (!stream.isOpen) {
    const message = await final;
    return c.json(message, statusOf(message), headers);
  }
  const keepAlive = setInterval(() => stream.keepAlive(), rev.keepAliveMs ?? 15_000);
  void final
    .then((message) => stream.send(message))
    .catch(failed('answer'))
    .finally(() => {
      clearInterval(keepAlive);
      stream.close();
    });
  return new Response(stream.body, { status: 200, headers: { ...SSE_HEADERS, ...headers } });
}

/** A JSON answer's HTTP status: 429 for a principal over a quota (-31429), as the 2026-07-28 path does; else 200. */
function statusOf(message: object): 200 | 429 {
  const error = (message as { error?: { code?: unknown } }).error;
  return error?.code === RATE_LIMITED_CODE ? 429 : 200;
}
