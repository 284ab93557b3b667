import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { CHANNELS } from './change-feed.ts';

import type { ServerEvents } from '../core/server-events.ts';

export { NO_EVENTS, type ListKind, type ServerEvents } from '../core/server-events.ts';

export function createServerEvents(db: Kysely<Database>): ServerEvents {
  const notify = async (channel: string, payload: string) => {
    await sql`select pg_notify(${channel}, ${payload})`.execute(db);
  };
  return {
    listChanged: (kind) => notify(CHANNELS.list, kind),
    resourceUpdated: (uri) => notify(CHANNELS.resource, uri),
  };
}
