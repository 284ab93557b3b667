import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';

// The dashboard's sign-ins. Their table keeps its older name, dashboard_sessions: renaming it would take a
// migration (and a release that reads both names), for a name no user sees.

/** How long a dashboard sign-in lasts. */
export const DASHBOARD_SIGN_IN_MS = 12 * 3_600_000;

const hashOf = (token: string) => createHash('sha256').update(token).digest('base64url');
const random = () => randomBytes(32).toString('base64url');

/**
 * A new sign-in: a random cookie value (256 bits) and its own CSRF token; only the cookie's hash is
 * stored, with the name the operator gave (null: none), which the audit trail records as who acted.
 * Ended sign-ins are deleted in the same statement, so the table holds live ones only.
 */
export async function openDashboardSignIn(
  db: Kysely<Database>,
  operator: string | null = null,
): Promise<{ token: string; csrf: string }> {
  const token = random();
  const csrf = random();
  await sql`
    with expired as (delete from dashboard_sessions where expires_at < now())
    insert into dashboard_sessions (token_hash, csrf, expires_at, operator)
    values (${hashOf(token)}, ${csrf}, now() + ${DASHBOARD_SIGN_IN_MS} * interval '1 millisecond',
            ${operator})`.execute(db);
  return { token, csrf };
}

/** A live sign-in: its CSRF token and the operator's name (null: none given). */
export interface DashboardSignIn {
  csrf: string;
  operator: string | null;
}

/** The live sign-in this cookie value names; undefined for any other value. */
export async function readDashboardSignIn(
  db: Kysely<Database>,
  token: string,
): Promise<DashboardSignIn | undefined> {
  // Any value a browser may send: only a hash of it reaches Postgres.
  return db
    .selectFrom('dashboard_sessions')
    .select(['csrf', 'operator'])
    .where('token_hash', '=', hashOf(token))
    .where('expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
}

/** Sign-out: the cookie is worthless from now on, on every instance. */
export async function closeDashboardSignIn(db: Kysely<Database>, token: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('token_hash', '=', hashOf(token)).execute();
}
