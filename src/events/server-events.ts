import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { CHANNELS } from './change-feed.ts';

export type ListKind = 'tools' | 'prompts' | 'resources';

/** Server-side notifications a tool (or the application) can raise; they reach listeners on every instance. */
export interface ServerEvents {
  listChanged(kind: ListKind): Promise<void>;
  resourceUpdated(uri: string): Promise<void>;
}

export function createServerEvents(db: Kysely<Database>): ServerEvents {
  const notify = async (channel: string, payload: string) => {
    await sql`select pg_notify(${channel}, ${payload})`.execute(db);
  };
  return {
    listChanged: (kind) => notify(CHANNELS.list, kind),
    resourceUpdated: (uri) => notify(CHANNELS.resource, uri),
  };
}

/** For processes or tests without a database: events go nowhere. */
export const NO_EVENTS: ServerEvents = {
  listChanged: async () => {},
  resourceUpdated: async () => {},
};
