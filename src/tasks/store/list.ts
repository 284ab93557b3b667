import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { decodeCanonicalBase64url } from '../../core/base64url.ts';
import { ProtocolError, ProtocolErrorCode } from '../../core/errors.ts';
import { isWellFormedTaskId } from '../ids.ts';
import type { TaskStatus } from '../status.ts';
import { TASK_VIEW_COLUMNS, toTaskView, type TaskView } from './view.ts';

/** An opaque cursor: the last row's (created_at, task_id), newest first. */
function encodeCursor(view: TaskView): string {
  return Buffer.from(JSON.stringify([view.createdAt.toISOString(), view.taskId])).toString('base64url');
}

function decodeCursor(cursor: string): [string, string] {
  // Only the very text encodeCursor wrote: any other spelling of its bytes is not a cursor we issued.
  const bytes = decodeCanonicalBase64url(cursor);
  try {
    const value = bytes === undefined ? undefined : (JSON.parse(bytes.toString('utf8')) as unknown);
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      typeof value[1] === 'string' &&
      // Exactly what encodeCursor writes: a date Postgres reads, an id of our shape (no NUL reaches it).
      isIsoInstant(value[0]) &&
      isWellFormedTaskId(value[1])
    ) {
      return [value[0], value[1]];
    }
  } catch {
    // falls through
  }
  throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Failed to list tasks: Invalid cursor');
}

/** An instant as toISOString writes it, in years 1–9999 (JavaScript's year 0 and ±years are not Postgres's). */
function isIsoInstant(text: string): boolean {
  const at = new Date(text);
  if (Number.isNaN(at.getTime()) || at.toISOString() !== text) return false;
  const year = at.getUTCFullYear();
  return year >= 1 && year <= 9999;
}

/** Which of a principal's tasks a page lists: those made at `origin` (see TaskTraits), in `status`. */
export interface TaskListFilter {
  cursor?: string | undefined;
  origin?: string | undefined;
  status?: TaskStatus | undefined;
  limit?: number;
}

/**
 * One page of a principal's tasks, newest first, by keyset (an index range, whatever the history),
 * narrowed by the filter.
 */
export async function listTasks(
  db: Kysely<Database>,
  principal: string,
  { cursor, origin, status, limit = 50 }: TaskListFilter,
): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
  let query = db
    .selectFrom('tasks')
    .select(TASK_VIEW_COLUMNS)
    .where('principal', '=', principal)
    // (A map's items are the work of their parent, never listed on their own.)
    .where('parent_task_id', 'is', null)
    .orderBy('created_at', 'desc')
    .orderBy('task_id', 'desc')
    .limit(limit + 1);
  if (origin !== undefined) query = query.where('origin', '=', origin);
  if (status !== undefined) query = query.where('status', '=', status);
  if (cursor !== undefined) {
    const [createdAt, taskId] = decodeCursor(cursor);
    query = query.where(sql<boolean>`(created_at, task_id) < (${createdAt}::timestamptz, ${taskId})`);
  }
  const rows = await query.execute();
  const tasks = rows.slice(0, limit).map(toTaskView);
  return rows.length > limit ? { tasks, nextCursor: encodeCursor(tasks.at(-1)!) } : { tasks };
}
