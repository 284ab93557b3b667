import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { purgeDeliveries } from './deliveries.ts';

/**
 * Deletes, in one bounded batch, sessions that ended (DELETE) or sat idle past `idleTtlMs`, with their
 * subscriptions, stream logs and unread answers. Returns how many went.
 */
export async function purgeSessions(db: Kysely<Database>, limit: number, idleTtlMs: number): Promise<number> {
  const rows = await db
    .deleteFrom('mcp_sessions')
    .where(
      'session_id',
      'in',
      db
        .selectFrom('mcp_sessions')
        .select('session_id')
        .where((eb) =>
          eb.or([
            eb('ended_at', 'is not', null),
            eb('last_seen_at', '<', sql<Date>`now() - make_interval(secs => ${idleTtlMs / 1000})`),
          ]),
        )
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returning('session_id')
    .execute();
  return rows.length;
}

/**
 * Deletes, in one bounded batch, stream log events older than `retentionMs` (resumption has a horizon)
 * and answers to server requests nobody took within it (their call ended).
 */
export async function purgeSessionEvents(
  db: Kysely<Database>,
  limit: number,
  retentionMs: number,
): Promise<number> {
  const rows = await db
    .deleteFrom('mcp_session_events')
    .where(
      'event_id',
      'in',
      db
        .selectFrom('mcp_session_events')
        .select('event_id')
        .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${retentionMs / 1000})`)
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returning('event_id')
    .execute();
  const stale = await db
    .deleteFrom('mcp_session_responses')
    .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${retentionMs / 1000})`)
    .executeTakeFirst();
  const claims = await purgeDeliveries(db, retentionMs);
  return rows.length + Number(stale.numDeletedRows) + claims;
}

/** The revision's maintenance, run by every worker's sweeper once a minute at most. */
export function sessionMaintenance(
  db: Kysely<Database>,
  { idleTtlMs, eventRetentionMs }: { idleTtlMs: number; eventRetentionMs: number },
) {
  return [
    { name: 'sessions', everyMs: 60_000, batch: (limit: number) => purgeSessions(db, limit, idleTtlMs) },
    {
      name: 'session events',
      everyMs: 60_000,
      batch: (limit: number) => purgeSessionEvents(db, limit, eventRetentionMs),
    },
  ];
}
