import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { PerPrincipalCap } from '../core/per-principal-cap.ts';
import { ListParamsSchema, TaskIdParamsSchema, type JsonObject } from '../core/wire.ts';
import { wellFormedTaskId } from '../tasks/ids.ts';
import { latestEventSeq } from '../tasks/store/events.ts';
import { toWireTask, type TaskView } from '../tasks/store/view.ts';
import { cancelTaskNow } from './cancel.ts';
import type { Rev2025Options } from './options.ts';
import type { SessionRequest } from './request.ts';
import { rev2025Task, toRev2025Result } from './shapes.ts';
import { forwardTaskEvents, startOf, type EventChannel } from './task-events.ts';
import { deliverTaskInput, RELATED_TASK } from './task-input.ts';
import { countQuotaRefusal } from './wire.ts';

/** A stored task as 2025-11-25 shapes it. */
export const taskOf = (view: TaskView): JsonObject => rev2025Task(toWireTask(view));

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export async function tasksGet({ rev, session, params }: SessionRequest): Promise<JsonObject> {
  const taskId = wellFormedTaskId(TaskIdParamsSchema.parse(params).taskId);
  return taskOf(await rev.tasks.get(taskId, session.principal));
}

export async function tasksList({ rev, session, params }: SessionRequest): Promise<JsonObject> {
  const { cursor } = ListParamsSchema.parse(params);
  // Without authentication every client is one principal: a session then lists only its own tasks.
  const origin = rev.requestorsIdentified ? undefined : session.sessionId;
  const page = await rev.tasks.list(session.principal, { cursor, origin });
  return {
    tasks: page.tasks.map(taskOf),
    ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }),
  };
}

/** 2025-11-25: the task is `cancelled` before the response, which carries it; a finished task is -32602. */
export async function tasksCancel({ rev, session, params }: SessionRequest): Promise<JsonObject> {
  const taskId = wellFormedTaskId(TaskIdParamsSchema.parse(params).taskId);
  const view = await cancelTaskNow(rev.db, taskId, session.principal);
  if (view === undefined) {
    const current = await rev.tasks.get(taskId, session.principal);
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Cannot cancel task in terminal status: ${current.status}`,
    );
  }
  return taskOf(view);
}

/**
 * tasks/result: blocks until the task ends, on whichever instance the client reached, handed each
 * change by the process's reader of changes (a poll at the task's interval is the backstop), then returns exactly what the call
 * would have returned, with the related-task `_meta`. While the task waits for input, its requests that
 * no other stream of the session sent go to the client on this one (see task-input.ts); their answers
 * resume the task, and this wait sees it change. On an SSE response, the task's events that no stream of
 * the session logged yet go first, in order, its final status last, then the result (task-events.ts).
 */
export async function tasksResult(req: SessionRequest, signal: AbortSignal): Promise<JsonObject> {
  const { rev, session, params, stream } = req;
  const taskId = wellFormedTaskId(TaskIdParamsSchema.parse(params).taskId);
  const related = { [RELATED_TASK]: { taskId } };
  const release = takeOrCount(rev, rev.caps.resultWaits, session.principal);
  // The task as the process's one read of each change found it (no read of this wait's own).
  let changed: TaskView | undefined;
  let wake: (() => void) | undefined;
  const off = rev.taskChanges.watchTask(taskId, session.principal, (view) => {
    changed = view;
    wake?.();
  });
  // Changes missed while the feed was down: read again at once.
  const offResync = rev.feed?.onResync(() => wake?.()) ?? (() => {});
  // One listener for the whole wait (a task may run for hours).
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort, { once: true });
  const streamId = `result-${randomBytes(9).toString('base64url')}`;
  const stopEvents = new AbortController();
  try {
    // (tasks/get's check: an unknown task, or another principal's, is not found.)
    const first = await rev.tasks.get(taskId, session.principal);
    const events =
      stream === undefined
        ? undefined
        : resultEvents({ rev, session, stream }, first, AbortSignal.any([signal, stopEvents.signal]));
    // (Awaited below; a failure before then must not go unhandled.)
    events?.catch(() => {});
    changed ??= first;
    for (;;) {
      const view = changed ?? (await rev.tasks.get(taskId, session.principal));
      changed = undefined;
      if (TERMINAL.has(view.status)) {
        await events;
        if (signal.aborted) throw new ProtocolError(ProtocolErrorCode.InternalError, 'Request cancelled');
        return finalOf(view, related);
      }
      if (view.status === 'input_required' && view.inputRequests !== null) {
        if (stream === undefined) {
          throw new ProtocolError(
            ProtocolErrorCode.InvalidRequest,
            'The task needs input: call tasks/result with Accept: text/event-stream to receive its requests',
          );
        }
        await deliverTaskInput({ rev, session, stream, streamId }, view);
      }
      if (signal.aborted) throw new ProtocolError(ProtocolErrorCode.InternalError, 'Request cancelled');
      if (changed === undefined) {
        const timer = new AbortController();
        await Promise.race([
          sleep(backstopOf(rev, view), undefined, { signal: timer.signal }).catch(() => {}),
          new Promise<void>((resolve) => (wake = resolve)),
          // (Events that failed to go out fail the wait at once.)
          events?.then(() => new Promise<void>(() => {})),
        ]);
        timer.abort();
        wake = undefined;
      }
    }
  } finally {
    stopEvents.abort();
    off();
    offResync();
    release();
    signal.removeEventListener('abort', onAbort);
    await rev.sessions.releaseDeliveries(streamId).catch(() => {});
  }
}

/**
 * The task's events on a tasks/result stream: those after the last one any stream of the session
 * logged (a GET stream that carried them all leaves none: a tasks/result called at the end then costs
 * no event), live until the final status. Resolves once it went out; rejects when an event could not
 * be sent (the wait fails: the client calls again, and the new stream starts from the log).
 */
async function resultEvents(to: EventChannel, view: TaskView, signal: AbortSignal): Promise<void> {
  const { rev, session, stream } = to;
  const logged = await rev.sessions.loggedTaskEvents(session.sessionId, stream.streamId, view.taskId);
  const after = startOf(logged.get(view.taskId));
  if (TERMINAL.has(view.status) && (view.eventSeq === 0 || after >= latestEventSeq(view))) return;
  await forwardTaskEvents(to, view.taskId, after, signal);
}

/** How long a wait sleeps between reads of its own: the feed's changes wake it sooner. */
function backstopOf(rev: Rev2025Options, view: TaskView): number {
  const interval = Math.max(view.pollIntervalMs, 250);
  return rev.feed === undefined ? interval : Math.max(interval, rev.backstopMs);
}

/** One of `cap` for `principal`, a refusal counted by its limit. */
function takeOrCount(rev: Rev2025Options, cap: PerPrincipalCap, principal: string): () => void {
  try {
    return cap.take(principal);
  } catch (err) {
    countQuotaRefusal(err, rev.metrics);
    throw err;
  }
}

/** What the original call would have returned: its result, or its JSON-RPC error. */
function finalOf(view: TaskView, related: JsonObject): JsonObject {
  if (view.result !== null && view.status !== 'cancelled') {
    const result = toRev2025Result(view.result);
    return { ...result, _meta: { ...(result._meta as JsonObject | undefined), ...related } };
  }
  if (view.status === 'cancelled') {
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'Task was cancelled', {
      [RELATED_TASK]: related[RELATED_TASK],
    });
  }
  const error = view.error ?? { code: ProtocolErrorCode.InternalError, message: 'Internal error' };
  throw new ProtocolError(
    typeof error.code === 'number' ? error.code : ProtocolErrorCode.InternalError,
    typeof error.message === 'string' ? error.message : 'Internal error',
    error.data,
  );
}
