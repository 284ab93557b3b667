import { TaskIdSchema } from '../core/wire.ts';
import { TaskNotFoundError } from './errors.ts';
import { randomBytes } from 'node:crypto';

/**
 * 144 bits from the CSPRNG, base64url: unguessable, and safe in an Mcp-Name header as it is. An id
 * never starts with `-`, so a shell command line (`durable-mcp-tasks tasks show <id>`) cannot read
 * it as an option; redrawing the 1 in 64 that would costs a fraction of a bit.
 */
export function newTaskId(): string {
  for (;;) {
    const id = randomBytes(18).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** True when `taskId` has the shape of an id this server issues (no NUL, no 10 kB strings). */
export const isWellFormedTaskId = (taskId: string): boolean => TaskIdSchema.safeParse(taskId).success;

/**
 * A task id from a request, in either revision: one that cannot name a task is answered exactly like an
 * unknown one, before any query (Postgres never sees a NUL or a 10 kB id).
 */
export function wellFormedTaskId(taskId: string): string {
  if (!isWellFormedTaskId(taskId)) throw new TaskNotFoundError(taskId.slice(0, 64));
  return taskId;
}
