import { randomBytes } from 'node:crypto';
import { decodeCanonicalBase64url } from '../core/base64url.ts';
import { JsonObjectSchema, type JsonObject } from '../core/wire.ts';
import type { TaskView } from '../tasks/store/view.ts';
import type { Rev2025Options } from './options.ts';
import type { Session } from './sessions/store.ts';
import type { SessionStream } from './sse.ts';

/**
 * A task's input requests at 2025-11-25. The client hears of them on whichever of the session's streams
 * is open (its GET stream, or a `tasks/result` stream; clients such as the Inspector and ext-tasks call
 * tasks/result only at a terminal status), each request once. Its id names the task and the key, so the
 * POST that answers it resumes the task on any instance, as `tasks/update` does at 2026-07-28: no
 * stream waits for the answer.
 */
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** The ids of a task's input requests start with this (those of a call's own requests with `s-`). */
export const TASK_INPUT_ID_PREFIX = 't-';

function taskInputRequestId(taskId: string, key: string): string {
  const names = Buffer.from(JSON.stringify([taskId, key])).toString('base64url');
  return `${TASK_INPUT_ID_PREFIX}${randomBytes(4).toString('base64url')}.${names}`;
}

/** The task and key an input request's id names, or undefined for any other id. */
export function parseTaskInputRequestId(id: string): { taskId: string; key: string } | undefined {
  if (!id.startsWith(TASK_INPUT_ID_PREFIX)) return undefined;
  const names = decodeCanonicalBase64url(id.slice(id.indexOf('.') + 1));
  if (names === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(names.toString('utf8'));
    if (Array.isArray(value) && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return { taskId: value[0], key: value[1] };
    }
  } catch {
    // falls through: not an id this server made
  }
  return undefined;
}

/** A session's stream that may carry input requests; `streamId` names its claims. */
export interface InputChannel {
  rev: Rev2025Options;
  session: Session;
  stream: SessionStream;
  streamId: string;
}

/** Sends the task's outstanding input requests that no stream of the session has sent yet. */
export async function deliverTaskInput(to: InputChannel, view: TaskView): Promise<void> {
  if (view.status !== 'input_required' || view.inputRequests === null) return;
  const requests = view.inputRequests;
  const { sessionId } = to.session;
  const keys = await to.rev.sessions.claimDeliveries(
    sessionId,
    view.taskId,
    Object.keys(requests),
    to.streamId,
  );
  for (const key of keys) {
    const { method, params } = requests[key]!;
    const meta = { ...(params?._meta as JsonObject | undefined), [RELATED_TASK]: { taskId: view.taskId } };
    await to.stream.send({
      jsonrpc: '2.0',
      id: taskInputRequestId(view.taskId, key),
      method,
      params: { ...params, _meta: meta },
    });
  }
}

/**
 * The client's answer to a task's input request: stored as the task's input response (the task resumes
 * once all are in). An error, or a result that is not an object, answers nothing: the request stays
 * outstanding, and `tasks/get` still shows it.
 */
export async function answerTaskInput(
  rev: Rev2025Options,
  session: Session,
  target: { taskId: string; key: string },
  message: { result?: unknown; error?: unknown },
): Promise<void> {
  const result = JsonObjectSchema.safeParse(message.result);
  if (!result.success) {
    rev.log.info('input request refused by the client', { taskId: target.taskId, key: target.key });
    return;
  }
  await rev.tasks.answer(target.taskId, session.principal, { [target.key]: result.data }).catch((err) => {
    rev.log.info('answer to an input request not taken', { taskId: target.taskId, error: String(err) });
  });
}
