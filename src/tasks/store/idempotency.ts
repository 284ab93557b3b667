import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { IdempotencyConflictError } from '../errors.ts';
import { getTaskView } from './read.ts';
import type { TaskView } from './view.ts';

/** A create's idempotency key (a digest of the caller's), and a digest of the request it was for. */
export interface Idempotency {
  key: string;
  fingerprint: string;
}

const digest = (text: string) => createHash('sha256').update(text).digest('base64url');

/**
 * The stored form of a caller's key for a request: both digests, so that neither the key nor the
 * arguments are stored twice as text the caller controls. The fingerprint covers the tool and its
 * arguments (as sent: a retry sends the same bytes' JSON).
 */
function idempotencyOf(key: string, toolName: string, args: unknown): Idempotency {
  return { key: digest(key), fingerprint: digest(JSON.stringify([toolName, args])) };
}

/** A client's key (`_meta`): one space of keys per principal. */
export const clientIdempotency = (key: string, toolName: string, args: unknown): Idempotency =>
  idempotencyOf(`client\n${key}`, toolName, args);

/** A tool's own key (`defineTool({ idempotencyKey })`): one space per tool, apart from the clients'. */
export const toolIdempotency = (key: string, toolName: string, args: unknown): Idempotency =>
  idempotencyOf(`tool ${toolName}\n${key}`, toolName, args);

/**
 * A webhook trigger's key (`defineTrigger({ idempotencyKey })`, e.g. a delivery id): one space per
 * trigger, apart from the clients' and the tools', so that a redelivery finds the task its first
 * delivery created and nothing else does.
 */
export const triggerIdempotency = (
  key: string,
  triggerName: string,
  toolName: string,
  args: unknown,
): Idempotency => idempotencyOf(`trigger ${triggerName}\n${key}`, toolName, args);

/**
 * The task an earlier create of `principal` made with this key, if it is still stored; a different
 * request under the same key is an IdempotencyConflictError.
 */
export async function taskOfIdempotencyKey(
  db: Kysely<Database>,
  principal: string,
  idempotency: Idempotency,
): Promise<TaskView | undefined> {
  const row = await db
    .selectFrom('tasks')
    .select(['task_id', 'idempotency_fingerprint'])
    .where('principal', '=', principal)
    .where('idempotency_key', '=', idempotency.key)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  if (row.idempotency_fingerprint !== idempotency.fingerprint) throw new IdempotencyConflictError();
  return getTaskView(db, row.task_id, principal);
}

/** Whether `err` is the unique violation of a concurrent create with the same key. */
export function isIdempotencyRace(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'tasks_idempotency_key_idx';
}

/**
 * A schedule's tick (`schedule`, and the tick, or a run-now request, as `tick`): one key per tick, so
 * that every instance firing it, and every retry after a crash, finds the one task it created.
 */
export const scheduleIdempotency = (schedule: string, tick: string, toolName: string, args: unknown) =>
  idempotencyOf(`schedule ${schedule}\n${tick}`, toolName, args);
