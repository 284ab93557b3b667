import { sql, type Kysely } from 'kysely';
import type { JsonObject } from '../../core/wire.ts';
import type { Database } from '../../db/database.ts';
import type { ChangeFeed } from '../../events/change-feed.ts';
import { SESSION_CHANNELS } from '../channels.ts';
import { SessionCache } from './cache.ts';
import { appendEvent, eventsAfter, streamOf, type StreamEvent } from './events.ts';
import { recordResponse, takeResponses } from './responses.ts';
import {
  createSession,
  endSession,
  isSubscribed,
  readSession,
  setLogLevel,
  subscribe,
  touchSession,
  unsubscribe,
  type Session,
} from './store.ts';

export interface SessionServiceOptions {
  /** A session idle (no request) this long has ended. */
  idleTtlMs?: number;
  /**
   * The process's change feed: with it, sessions are cached in memory and forgotten when they end or
   * change anywhere; without it, every request reads its session.
   */
  feed?: ChangeFeed | undefined;
}

/** How long a NOTIFY of this instance's own may take to come back before a DELETE answers anyway. */
const OWN_NOTIFY_WAIT_MS = 2_000;

/** The 2025-11-25 sessions, their stream logs and pending answers, for the era's transport. */
export class SessionService {
  readonly #db: Kysely<Database>;
  readonly #idleTtlMs: number;
  /** `last_seen_at` is refreshed when older than this: idle expiry needs no write per request. */
  readonly #refreshAfterMs: number;
  readonly #feed: ChangeFeed | undefined;
  readonly #cache = new SessionCache();

  constructor(db: Kysely<Database>, { idleTtlMs = 3_600_000, feed }: SessionServiceOptions = {}) {
    this.#db = db;
    this.#idleTtlMs = idleTtlMs;
    this.#refreshAfterMs = Math.min(30_000, idleTtlMs / 2);
    this.#feed = feed;
    const forget = (sessionId: string) => this.#cache.forget(sessionId);
    feed?.on(SESSION_CHANNELS.ended, forget);
    feed?.on(SESSION_CHANNELS.changed, forget);
    // Notifications may have been missed while the connection was down.
    feed?.onResync(() => this.#cache.clear());
  }

  async create(s: Omit<Session, 'sessionId' | 'logLevel'>): Promise<string> {
    const sessionId = await createSession(this.#db, s);
    if (this.#caching) this.#cache.set({ ...s, sessionId, logLevel: null }, Date.now());
    return sessionId;
  }

  /**
   * The live session with this id, if it belongs to `principal` (another principal's session and an
   * unknown, ended or expired one look the same). From memory when this instance read it lately;
   * `last_seen_at` is written only when it is stale.
   */
  async find(sessionId: string, principal: string): Promise<Session | undefined> {
    const now = Date.now();
    let known = this.#caching ? this.#cache.get(sessionId, now) : undefined;
    if (known === undefined || now - known.seenAt >= this.#idleTtlMs) {
      known = await this.#read(sessionId, now);
      if (known === undefined) return undefined;
    }
    if (known.session.principal !== principal) return undefined;
    if (now - known.seenAt >= this.#refreshAfterMs) {
      if (await touchSession(this.#db, sessionId, this.#refreshAfterMs, this.#idleTtlMs)) {
        this.#cache.seen(sessionId, now);
      } else {
        // Ended meanwhile, or another instance refreshed it: the database says which.
        known = await this.#read(sessionId, now);
        if (known === undefined || known.session.principal !== principal) return undefined;
      }
    }
    return known.session;
  }

  /** DELETE: answers once this instance heard its own NOTIFY, which every other instance hears with it. */
  async end(sessionId: string): Promise<void> {
    await this.#heard(SESSION_CHANNELS.ended, sessionId, () => endSession(this.#db, sessionId));
  }

  async setLogLevel(sessionId: string, level: string): Promise<void> {
    await this.#heard(SESSION_CHANNELS.changed, sessionId, () => setLogLevel(this.#db, sessionId, level));
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
    await sql`select pg_notify(${SESSION_CHANNELS.cancel}, ${`${sessionId} ${requestId}`})`.execute(this.#db);
  }
  recordResponse(sessionId: string, requestId: string, response: JsonObject): Promise<void> {
    return recordResponse(this.#db, sessionId, requestId, response);
  }
  takeResponses(sessionId: string, requestIds: readonly string[]): Promise<Map<string, JsonObject>> {
    return takeResponses(this.#db, sessionId, requestIds);
  }

  /** Sessions are served from memory only while NOTIFY can tell this instance to forget them. */
  get #caching(): boolean {
    return this.#feed?.listening === true;
  }

  async #read(sessionId: string, now: number) {
    const row = await readSession(this.#db, sessionId, this.#idleTtlMs);
    if (row === undefined) {
      this.#cache.forget(sessionId);
      return undefined;
    }
    const known = { session: row.session, seenAt: now - row.idleMs };
    if (this.#caching) this.#cache.set(row.session, known.seenAt, now);
    return known;
  }

  /** Runs `write` (which NOTIFYs `channel` with the session id) and waits, bounded, to hear it here. */
  async #heard(channel: string, sessionId: string, write: () => Promise<void>): Promise<void> {
    this.#cache.forget(sessionId);
    if (this.#feed?.listening !== true) return write();
    let off: () => void = () => {};
    const heard = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, OWN_NOTIFY_WAIT_MS);
      off = this.#feed!.on(channel, (payload) => {
        if (payload !== sessionId) return;
        clearTimeout(timer);
        resolve();
      });
    });
    try {
      await write();
      await heard;
    } finally {
      off();
    }
  }
}
