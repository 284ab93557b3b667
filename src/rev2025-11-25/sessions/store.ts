import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { SESSION_CHANNELS } from '../channels.ts';
import type { ClientCapabilities, JsonObject } from '../../core/wire.ts';

/** A 2025-11-25 session as every instance sees it. */
export interface Session {
  sessionId: string;
  principal: string;
  protocolVersion: string;
  clientCapabilities: ClientCapabilities;
  clientInfo: JsonObject;
  logLevel: string | null;
}

/** 144 bits from the CSPRNG, base64url: unguessable, visible ASCII as the transport requires. */
export function newSessionId(): string {
  return randomBytes(18).toString('base64url');
}

/**
 * Creates a session unless its principal already holds `maxSessions` live ones (not ended, seen within
 * `idleTtlMs`): undefined then. One statement; creates racing on several instances may each pass the
 * count, so the quota can be overshot by as many as race, never grow without bound.
 */
export async function createSession(
  db: Kysely<Database>,
  s: Omit<Session, 'sessionId' | 'logLevel'>,
  { maxSessions, idleTtlMs }: { maxSessions: number; idleTtlMs: number },
): Promise<string | undefined> {
  const sessionId = newSessionId();
  const { rows } = await sql<{ session_id: string }>`
    insert into mcp_sessions (session_id, principal, protocol_version, client_capabilities, client_info)
    select ${sessionId}, ${s.principal}, ${s.protocolVersion}, ${JSON.stringify(s.clientCapabilities)}::jsonb,
      ${JSON.stringify(s.clientInfo)}::jsonb
    where (select count(*) from (
        select 1 from mcp_sessions
        where principal = ${s.principal} and ended_at is null
          and last_seen_at > now() - ${idleTtlMs} * interval '1 millisecond'
        limit ${maxSessions}::int
      ) live) < ${maxSessions}::int
    returning session_id`.execute(db);
  return rows[0]?.session_id;
}

/** A live session as read from Postgres, with how long ago it was last seen (by the database's clock). */
export interface SessionRow {
  session: Session;
  idleMs: number;
}

/**
 * The session with this id if it is live (not ended, not idle past `idleTtlMs`), whoever it belongs
 * to: the caller compares the principal. A read: it writes nothing.
 */
export async function readSession(
  db: Kysely<Database>,
  sessionId: string,
  idleTtlMs: number,
): Promise<SessionRow | undefined> {
  const row = await db
    .selectFrom('mcp_sessions')
    .select([
      'session_id',
      'principal',
      'protocol_version',
      'client_capabilities',
      'client_info',
      'log_level',
      sql<number>`(extract(epoch from now() - last_seen_at) * 1000)::float8`.as('idle_ms'),
    ])
    .where('session_id', '=', sessionId)
    .where('ended_at', 'is', null)
    .where('last_seen_at', '>', sql<Date>`now() - make_interval(secs => ${idleTtlMs / 1000})`)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    idleMs: Math.max(0, row.idle_ms),
    session: {
      sessionId: row.session_id,
      principal: row.principal,
      protocolVersion: row.protocol_version,
      clientCapabilities: row.client_capabilities as ClientCapabilities,
      clientInfo: row.client_info as JsonObject,
      logLevel: row.log_level,
    },
  };
}

/**
 * Marks a live session seen now, if its mark is older than `staleMs`: a statement that writes (a row
 * version, a WAL record) only then. False when the session is gone, or when its mark was fresh already
 * (another instance refreshed it): the caller reads it again to tell which.
 */
export async function touchSession(
  db: Kysely<Database>,
  sessionId: string,
  staleMs: number,
  idleTtlMs: number,
): Promise<boolean> {
  const row = await db
    .updateTable('mcp_sessions')
    .set({ last_seen_at: sql`now()` })
    .where('session_id', '=', sessionId)
    .where('ended_at', 'is', null)
    .where('last_seen_at', '<', sql<Date>`now() - make_interval(secs => ${staleMs / 1000})`)
    .where('last_seen_at', '>', sql<Date>`now() - make_interval(secs => ${idleTtlMs / 1000})`)
    .returning('session_id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * DELETE: the session ends for every instance (the NOTIFY, sent at commit, makes each forget it and
 * close its streams). One statement.
 */
export async function endSession(db: Kysely<Database>, sessionId: string): Promise<void> {
  await sql`
    with ended as (
      update mcp_sessions set ended_at = now() where session_id = ${sessionId} and ended_at is null
    )
    select pg_notify(${SESSION_CHANNELS.ended}, ${sessionId})`.execute(db);
}

/** logging/setLevel; every instance re-reads the session (NOTIFY at commit). One statement. */
export async function setLogLevel(db: Kysely<Database>, sessionId: string, level: string): Promise<void> {
  await sql`
    with changed as (update mcp_sessions set log_level = ${level} where session_id = ${sessionId})
    select pg_notify(${SESSION_CHANNELS.changed}, ${sessionId})`.execute(db);
}

export async function subscribe(db: Kysely<Database>, sessionId: string, uri: string): Promise<void> {
  await db
    .insertInto('mcp_session_subscriptions')
    .values({ session_id: sessionId, uri })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export async function unsubscribe(db: Kysely<Database>, sessionId: string, uri: string): Promise<void> {
  await db
    .deleteFrom('mcp_session_subscriptions')
    .where('session_id', '=', sessionId)
    .where('uri', '=', uri)
    .execute();
}

export async function isSubscribed(db: Kysely<Database>, sessionId: string, uri: string): Promise<boolean> {
  const row = await db
    .selectFrom('mcp_session_subscriptions')
    .select('uri')
    .where('session_id', '=', sessionId)
    .where('uri', '=', uri)
    .executeTakeFirst();
  return row !== undefined;
}
