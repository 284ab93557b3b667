import { CHANNELS } from '../events/change-feed.ts';
import { SESSION_CHANNELS } from './channels.ts';
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { Session } from './sessions/store.ts';
import type { Rev2025Options } from './options.ts';
import { quotaRefusal, rpcError, SESSION_HEADER } from './wire.ts';
import { SessionStream, SSE_HEADERS } from './sse.ts';
import { deliverTaskInput } from './task-input.ts';
import { taskOf } from './tasks.ts';
import type { TaskView } from '../tasks/store/view.ts';

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
 * connection dropped: what it missed from the log, then what comes next, until its response); without,
 * the session's own stream for notifications that belong to no request (list changes, updates of
 * subscribed resources). Either ends when the session ends.
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
      return resume(o, session, { streamId, after: lastEventId, release });
    }
    return standalone(o, session, release);
  };
}

/** Sets up what ends a session stream: the client leaving, the session ending, shutdown. */
function lifetime(o: Rev2025Options, session: Session, stream: SessionStream, extra: Array<() => void> = []) {
  const keepAlive = setInterval(() => stream.keepAlive(), o.keepAliveMs ?? 15_000);
  const offs: Array<() => void> = [...extra];
  const end = () => {
    clearInterval(keepAlive);
    for (const off of offs) off();
    o.shutdown.removeEventListener('abort', end);
    stream.close();
  };
  offs.push(
    o.feed?.on(SESSION_CHANNELS.ended, (sessionId) => {
      if (sessionId === session.sessionId) end();
    }) ?? (() => {}),
  );
  o.shutdown.addEventListener('abort', end, { once: true });
  stream.gone.signal.addEventListener('abort', end, { once: true });
  return { end, offs };
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

/**
 * The session's own stream: list changes, updates of subscribed resources, and for the tasks the session
 * created, their status notifications and the input requests no other stream sent (see task-input.ts),
 * those waiting when the stream opens included.
 */
function standalone(o: Rev2025Options, session: Session, release: () => void): Response {
  const streamId = `get-${randomBytes(9).toString('base64url')}`;
  const stream = new SessionStream(o.sessions, session.sessionId, streamId);
  const warn = (err: unknown) => o.log.warn('stream write failed', { error: String(err) });
  const send = (method: string, params?: object) =>
    void stream.send({ jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }) }).catch(warn);
  const hasTasks = session.protocolVersion === '2025-11-25';
  const channel = { rev: o, session, stream, streamId };
  // One task at a time, in order: a status notification goes out before the requests it announces.
  let taskUpdates = Promise.resolve();
  const onTask = (read: () => Promise<TaskView[]>) => {
    taskUpdates = taskUpdates
      .then(async () => {
        // Another principal's task, or one gone since: nothing to say.
        const views = await read().catch(() => []);
        for (const view of views) {
          if (view.origin !== session.sessionId || stream.gone.signal.aborted) continue;
          send('notifications/tasks/status', taskOf(view));
          await deliverTaskInput(channel, view);
        }
      })
      .catch(warn);
  };
  if (hasTasks) {
    onTask(async () => {
      const filter = { origin: session.sessionId, status: 'input_required' as const };
      const { tasks } = await o.tasks.list(session.principal, filter);
      // A page lists tasks without their input requests: each is read whole.
      return Promise.all(tasks.map((t) => o.tasks.get(t.taskId, session.principal)));
    });
  }
  const offs = [
    release,
    o.feed?.on(CHANNELS.list, (kind) => send(`notifications/${kind}/list_changed`)) ?? (() => {}),
    // The session's tasks as the process's one read of each change found them: no read of its own.
    hasTasks
      ? o.taskChanges.watchOrigin(session.sessionId, session.principal, (view) => onTask(async () => [view]))
      : () => {},
    () => void o.sessions.releaseDeliveries(streamId).catch(warn),
    o.feed?.on(CHANNELS.resource, (uri) => {
      void o.sessions
        .isSubscribed(session.sessionId, uri)
        .then((yes) => yes && send('notifications/resources/updated', { uri }))
        .catch(() => {});
    }) ?? (() => {}),
  ];
  lifetime(o, session, stream, offs);
  return new Response(stream.body, {
    status: 200,
    headers: { ...SSE_HEADERS, 'Mcp-Session-Id': session.sessionId },
  });
}
