import { randomBytes } from 'node:crypto';
import { CHANNELS } from '../events/change-feed.ts';
import type { TaskView } from '../tasks/store/view.ts';
import { SESSION_CHANNELS } from './channels.ts';
import type { Rev2025Options } from './options.ts';
import type { Session } from './sessions/store.ts';
import { SessionStream, SSE_HEADERS } from './sse.ts';
import { GetStreamTaskEvents, taskEventOf } from './task-events.ts';
import {
  deliverTaskInput,
  parseTaskInputRequestId,
  TASK_INPUT_ID_PREFIX,
  type InputChannel,
} from './task-input.ts';
import { taskOf } from './tasks.ts';

/** A GET stream's id in the session's log starts with this (a POST's with `post-`). */
export const GET_STREAM_PREFIX = 'get-';

/** Sets up what ends a session stream: the client leaving, the session ending, shutdown. */
export function lifetime(
  o: Rev2025Options,
  session: Session,
  stream: SessionStream,
  extra: Array<() => void> = [],
) {
  const keepAlive = setInterval(() => stream.keepAlive(), o.keepAliveMs ?? 15_000);
  const offs: Array<() => void> = [...extra];
  const end = () => {
    clearInterval(keepAlive);
    for (const off of offs.splice(0)) off();
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

/**
 * The session's own stream: list changes, updates of subscribed resources, and for the tasks the session
 * created, their status notifications, their events (task-events.ts) and the input requests no other
 * stream sent (see task-input.ts), those waiting when the stream opens included.
 *
 * With `resumed` (GET + Last-Event-ID of a GET stream, on any instance), the same stream goes on: what
 * the client missed from its log, then live, under the same id, so the next Last-Event-ID resumes it
 * again; whoever still wrote it stops, and the input requests it sent are not sent again.
 */
export function ownStream(
  o: Rev2025Options,
  session: Session,
  release: () => void,
  resumed?: { streamId: string; after: string },
): Response {
  const streamId = resumed?.streamId ?? `${GET_STREAM_PREFIX}${randomBytes(9).toString('base64url')}`;
  const producer = randomBytes(6).toString('base64url');
  const stream = new SessionStream(o.sessions, session.sessionId, streamId);
  const warn = (err: unknown) => o.log.warn('stream write failed', { error: String(err) });
  const send = (method: string, params?: object) =>
    void stream.send({ jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }) }).catch(warn);
  const channel = { rev: o, session, stream, streamId };
  // Before anything live: a resumed stream's takeover and replay (the stream's first work in order).
  const ready = stream.inOrder(async () => {
    if (resumed !== undefined) await takeOver(channel, resumed.after, producer);
  });
  const hasTasks = session.protocolVersion === '2025-11-25';
  let taken = false;
  const offs = [
    release,
    o.feed?.on(CHANNELS.list, (kind) => send(`notifications/${kind}/list_changed`)) ?? (() => {}),
    // A client resumed this stream elsewhere: that instance writes it from now on (and holds its claims).
    o.feed?.on(SESSION_CHANNELS.taken, (payload) => {
      const [sid, taker, by] = payload.split(' ');
      if (sid === session.sessionId && taker === streamId && by !== producer) {
        taken = true;
        end();
      }
    }) ?? (() => {}),
    () => void (taken ? undefined : o.sessions.releaseDeliveries(streamId).catch(warn)),
    o.feed?.on(CHANNELS.resource, (uri) => {
      void o.sessions
        .isSubscribed(session.sessionId, uri)
        .then((yes) => yes && send('notifications/resources/updated', { uri }))
        .catch(() => {});
    }) ?? (() => {}),
  ];
  const { end, offs: ends } = lifetime(o, session, stream, offs);
  ready.catch((err: unknown) => {
    o.log.warn('stream resume failed', { error: String(err) });
    end();
  });
  if (hasTasks) watchTasks(channel, ready, ends, end);
  return new Response(stream.body, {
    status: 200,
    headers: { ...SSE_HEADERS, 'Mcp-Session-Id': session.sessionId },
  });
}

/**
 * The session's tasks on its own stream: a status notification for each change, their input requests,
 * their events. `offs` gets what stops them.
 */
function watchTasks(
  channel: InputChannel,
  ready: Promise<void>,
  offs: Array<() => void>,
  end: () => void,
): void {
  const { rev: o, session, stream } = channel;
  const warn = (err: unknown) => o.log.warn('stream write failed', { error: String(err) });
  const events = new GetStreamTaskEvents(channel, ready, (err) => {
    o.log.warn('task events on a GET stream failed: the stream ends, for the client to resume it', {
      error: String(err),
    });
    end();
  });
  // One task at a time, in order: a status notification goes out before the requests it announces.
  let taskUpdates = ready.catch(() => {});
  const onTask = (read: () => Promise<TaskView[]>) => {
    taskUpdates = taskUpdates
      .then(async () => {
        // Another principal's task, or one gone since: nothing to say.
        const views = await read().catch(() => []);
        for (const view of views) {
          if (view.origin !== session.sessionId || stream.gone.signal.aborted) continue;
          await stream.send({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: taskOf(view) });
          await deliverTaskInput(channel, view);
        }
      })
      .catch(warn);
  };
  onTask(async () => {
    const filter = { origin: session.sessionId, status: 'input_required' as const };
    const { tasks } = await o.tasks.list(session.principal, filter);
    // A page lists tasks without their input requests: each is read whole.
    return Promise.all(tasks.map((t) => o.tasks.get(t.taskId, session.principal)));
  });
  events.open();
  offs.push(
    // The session's tasks as the process's one read of each change found them: no read of its own.
    o.taskChanges.watchOrigin(session.sessionId, session.principal, (view) => {
      events.see(view);
      onTask(async () => [view]);
    }),
    () => events.close(),
  );
}

/**
 * A resumed GET stream takes over (whoever still writes it stops), replays what followed `after` in its
 * log, and holds the claims of the input requests it logged, so that they are not sent again.
 */
async function takeOver(
  { rev: o, session, stream, streamId }: InputChannel,
  after: string,
  producer: string,
): Promise<void> {
  await o.sessions.takeStream(session.sessionId, streamId, producer);
  const [missed, requestIds, had] = await Promise.all([
    o.sessions.eventsAfter(session.sessionId, streamId, after),
    o.sessions.loggedInputRequestIds(session.sessionId, streamId, TASK_INPUT_ID_PREFIX),
    o.sessions.taskEventsUpTo(session.sessionId, streamId, after),
  ]);
  for (const event of missed) {
    const e = taskEventOf(event.message);
    if (e !== undefined) {
      if (e.seq <= (had.get(e.taskId) ?? 0)) continue;
      had.set(e.taskId, e.seq);
    }
    stream.writeEvent(event.eventId, event.message);
  }
  const claims = requestIds.map(parseTaskInputRequestId).filter((c) => c !== undefined);
  await o.sessions.holdDeliveries(session.sessionId, claims, streamId);
}
