import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { CHANNELS } from '../../events/change-feed.ts';
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

export async function createSession(
  db: Kysely<Database>,
  s: Omit<Session, 'sessionId' | 'logLevel'>,
): Promise<string> {
  const sessionId = newSessionId();
  await db
    .insertInto('mcp_sessions')
    .values({
      session_id: sessionId,
      principal: s.principal,
      protocol_version: s.protocolVersion,
      client_capabilities: JSON.stringify(s.clientCapabilities),
      client_info: JSON.stringify(s.clientInfo),
    })
    .execute();
  return sessionId;
}

/**
 * The live session with this id, if it belongs to `principal`: another principal's session and an
 * unknown or ended one look the same. Refreshes `last_seen_at` at most every 30 s (idle expiry).
 */
export async function findSession(
  db: Kysely<Database>,
  sessionId: string,
  principal: string,
  idleTtlMs = 3_600_000,
): Promise<Session | undefined> {
  // A write per request would be costly; a refresh at most every 30 s (sooner for a short TTL) is not.
  const refreshAfterS = Math.min(30, idleTtlMs / 2000);
  const row = await db
    .updateTable('mcp_sessions')
    .set({
      last_seen_at: sql`case when last_seen_at < now() - make_interval(secs => ${refreshAfterS}) then now() else last_seen_at end`,
    })
    .where('session_id', '=', sessionId)
    .where('principal', '=', principal)
    .where('ended_at', 'is', null)
    .where('last_seen_at', '>', sql<Date>`now() - make_interval(secs => ${idleTtlMs / 1000})`)
    .returning([
      'session_id',
      'principal',
      'protocol_version',
      'client_capabilities',
      'client_info',
      'log_level',
    ])
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    sessionId: row.session_id,
    principal: row.principal,
    protocolVersion: row.protocol_version,
    clientCapabilities: row.client_capabilities as ClientCapabilities,
    clientInfo: row.client_info as JsonObject,
    logLevel: row.log_level,
  };
}

/** DELETE: the session ends for every instance; its streams close as they notice. */
export async function endSession(db: Kysely<Database>, sessionId: string): Promise<void> {
  await db
    .updateTable('mcp_sessions')
    .set({ ended_at: sql`now()` })
    .where('session_id', '=', sessionId)
    .where('ended_at', 'is', null)
    .execute();
  await sql`select pg_notify(${CHANNELS.session}, ${sessionId})`.execute(db);
}

export async function setLogLevel(db: Kysely<Database>, sessionId: string, level: string): Promise<void> {
  await db
    .updateTable('mcp_sessions')
    .set({ log_level: level })
    .where('session_id', '=', sessionId)
    .execute();
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
