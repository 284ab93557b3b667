import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from './database.ts';

/** A secret shared by every instance on this database: the first instance to ask creates it. */
export async function sharedSecret(db: Kysely<Database>, name: string): Promise<string> {
  await db
    .insertInto('server_secrets')
    .values({ name, value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db
    .selectFrom('server_secrets')
    .select('value')
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return row.value;
}
