import { sql, type Kysely } from 'kysely';
import { CHANNELS } from '../../events/change-feed.ts';
import type { Database } from '../../db/database.ts';
import type { JsonObject } from '../../core/wire.ts';
import { appendEvent, eventsAfter, streamOf, type StreamEvent } from './events.ts';
import { recordResponse, takeResponses } from './responses.ts';
import {
  createSession,
  endSession,
  findSession,
  isSubscribed,
  setLogLevel,
  subscribe,
  unsubscribe,
  type Session,
} from './store.ts';

/** The 2025-11-25 sessions, their stream logs and pending answers, for the HTTP layer. */
export class SessionService {
  readonly #db: Kysely<Database>;
  readonly #idleTtlMs: number;
  constructor(db: Kysely<Database>, { idleTtlMs = 3_600_000 }: { idleTtlMs?: number } = {}) {
    this.#db = db;
    this.#idleTtlMs = idleTtlMs;
  }

  create(s: Omit<Session, 'sessionId' | 'logLevel'>): Promise<string> {
    return createSession(this.#db, s);
  }
  find(sessionId: string, principal: string): Promise<Session | undefined> {
    return findSession(this.#db, sessionId, principal, this.#idleTtlMs);
  }
  end(sessionId: string): Promise<void> {
    return endSession(this.#db, sessionId);
  }
  setLogLevel(sessionId: string, level: string): Promise<void> {
    return setLogLevel(this.#db, sessionId, level);
  }
  subscribe(sessionId: string, uri: string): Promise<void> {
    return subscribe(this.#db, sessionId, uri);
  }
  unsubscribe(sessionId: string, uri: string): Promise<void> {
    return unsubscribe(this.#db, sessionId, uri);
  }
  isSubscribed(sessionId: string, uri: string): Promise<boolean> {
    return isSubscribed(this.#db, sessionId, uri);
  }
  appendEvent(sessionId: string, streamId: string, message: unknown): Promise<string> {
    return appendEvent(this.#db, sessionId, streamId, message);
  }
  streamOf(sessionId: string, eventId: string): Promise<string | undefined> {
    return streamOf(this.#db, sessionId, eventId);
  }
  eventsAfter(sessionId: string, streamId: string, afterEventId: string): Promise<StreamEvent[]> {
    return eventsAfter(this.#db, sessionId, streamId, afterEventId);
  }
  /** notifications/cancelled: tells whichever instance runs the request to stop it. */
  async cancelRequest(sessionId: string, requestId: string): Promise<void> {
    await sql`select pg_notify(${CHANNELS.cancel}, ${`${sessionId} ${requestId}`})`.execute(this.#db);
  }
  recordResponse(sessionId: string, requestId: string, response: JsonObject): Promise<void> {
    return recordResponse(this.#db, sessionId, requestId, response);
  }
  takeResponses(sessionId: string, requestIds: readonly string[]): Promise<Map<string, JsonObject>> {
    return takeResponses(this.#db, sessionId, requestIds);
  }
}
