import type { Context } from 'hono';
import { SESSION_CHANNELS } from './channels.ts';
import type { Rev2025Options } from './options.ts';
import { GET_STREAM_PREFIX, lifetime, ownStream } from './session-stream.ts';
import type { Session } from './sessions/store.ts';
import { SessionStream, SSE_HEADERS } from './sse.ts';
import { quotaRefusal, rpcError, SESSION_HEADER } from './wire.ts';

/** The session a GET or DELETE names, or the response that refuses it (400 without, 404 unknown). */
async function sessionOf(
  o: Rev2025Options,
  c: Context,
): Promise<{ session: Session } | { refused: Response }> {
  const sessionId = c.req.header(SESSION_HEADER);
  if (sessionId === undefined) {
    return { refused: c.json(rpcError(null, -32000, 'Bad Request: Mcp-Session-Id header is required'), 400) };
  }
  const session = await o.sessions.find(sessionId, o.principalOf(c));
  if (session === undefined) return { refused: c.json(rpcError(null, -32001, 'Session not found'), 404) };
  return { session };
}

/** DELETE /mcp: the client ends its session; every instance answers 404 for it from then on. */
export function sessionDelete(o: Rev2025Options) {
  return async (c: Context): Promise<Response> => {
    const found = await sessionOf(o, c);
    if ('refused' in found) return found.refused;
    await o.sessions.end(found.session.sessionId);
    return c.body(null, 200);
  };
}

/**
 * GET /mcp: with `Last-Event-ID`, resumes the stream that id belongs to (a call's stream whose
 * connection dropped: what it missed from the log, then what comes next, until its response; the
 * session's own stream: what it missed, then live again); without, the session's own stream for
 * notifications that belong to no request (list changes, updates of subscribed resources, the session's
 * tasks). Either ends when the session ends.
 */
export function sessionGet(o: Rev2025Options) {
  return async (c: Context): Promise<Response> => {
    if (!(c.req.header('accept') ?? '').includes('text/event-stream')) {
      return c.json(rpcError(null, -32000, 'Not Acceptable: the client must accept text/event-stream'), 406);
    }
    const found = await sessionOf(o, c);
    if ('refused' in found) return found.refused;
    const { session } = found;
    const lastEventId = c.req.header('last-event-id');
    const streamId =
      lastEventId === undefined ? undefined : await o.sessions.streamOf(session.sessionId, lastEventId);
    if (lastEventId !== undefined && streamId === undefined) {
      return c.json(rpcError(null, -32000, 'Bad Request: unknown Last-Event-ID'), 400);
    }
    let release: () => void;
    try {
      release = o.caps.getStreams.take(session.principal);
    } catch (err) {
      return quotaRefusal(c, null, err, o.metrics);
    }
    if (lastEventId !== undefined && streamId !== undefined) {
      // The session's own stream goes on live; a call's stream replays until its response.
      if (streamId.startsWith(GET_STREAM_PREFIX)) {
        return ownStream(o, session, release, { streamId, after: lastEventId });
      }
      return resume(o, session, { streamId, after: lastEventId, release });
    }
    return ownStream(o, session, release);
  };
}

function resume(
  o: Rev2025Options,
  session: Session,
  { streamId, after, release }: { streamId: string; after: string; release: () => void },
): Response {
  const stream = new SessionStream(o.sessions, session.sessionId, streamId);
  let last = after;
  let done = false;
  let busy = Promise.resolve();
  const { end, offs } = lifetime(o, session, stream, [release]);
  // Replays in order, one read at a time; ends after the call's response.
  const pump = () => {
    busy = busy.then(async () => {
      if (done) return;
      for (const event of await o.sessions.eventsAfter(session.sessionId, streamId, last)) {
        stream.writeEvent(event.eventId, event.message);
        last = event.eventId;
        const m = event.message as { id?: unknown; method?: unknown };
        if (m.method === undefined && m.id !== undefined) {
          done = true;
          end();
          return;
        }
      }
    });
    busy.catch((err: unknown) => o.log.warn('stream resume failed', { error: String(err) }));
  };
  offs.push(
    o.feed?.on(SESSION_CHANNELS.event, (payload) => {
      if (payload === `${session.sessionId} ${streamId}`) pump();
    }) ?? (() => {}),
  );
  const poll = setInterval(pump, 1_000);
  offs.push(() => clearInterval(poll));
  pump();
  return new Response(stream.body, {
    status: 200,
    headers: { ...SSE_HEADERS, 'Mcp-Session-Id': session.sessionId },
  });
}
