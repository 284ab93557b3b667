import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { QuotaExceededError } from '../../core/errors.ts';
import type { JsonObject } from '../../core/wire.ts';
import type { Database } from '../../db/database.ts';
import type { ChangeFeed } from '../../events/change-feed.ts';
import { SESSION_CHANNELS } from '../channels.ts';
import { SessionCache } from './cache.ts';
import { claimDeliveries, holdDeliveries, releaseDeliveries } from './deliveries.ts';
import {
  appendEvents,
  eventsAfter,
  loggedInputRequestIds,
  loggedTaskEvents,
  streamOf,
  takeStream,
  taskEventsUpTo,
  type LoggedTaskEvents,
  type StreamEvent,
} from './events.ts';
import { expectResponses, forgetResponses, recordResponse, takeResponses } from './responses.ts';
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
  /**
   * The application_name of the LISTEN connections of every instance that caches sessions (see
   * ChangeFeed): a DELETE or setLevel answers once that many instances said they forgot the session.
   * Without it, once this instance did.
   */
  servingListeners?: readonly string[] | undefined;
  /** Live sessions one principal may hold (MAX_SESSIONS_PER_PRINCIPAL); unlimited by default. */
  maxSessionsPerPrincipal?: number | undefined;
}

/** How long a DELETE waits for the other instances to forget the session before it answers anyway. */
const FORGET_WAIT_MS = 2_000;

/** The 2025-11-25 sessions, their stream logs and pending answers, for the revision's transport. */
export class SessionService {
  readonly #db: Kysely<Database>;
  readonly #idleTtlMs: number;
  readonly #maxSessions: number;
  /** `last_seen_at` is refreshed when older than this: idle expiry needs no write per request. */
  readonly #refreshAfterMs: number;
  readonly #feed: ChangeFeed | undefined;
  readonly #servingListeners: readonly string[] | undefined;
  readonly #cache = new SessionCache();
  readonly #instanceId = randomBytes(6).toString('hex');
  /** Counts what made cached sessions stale: a read that overlapped one is not cached. */
  #invalidations = 0;

  constructor(
    db: Kysely<Database>,
    { idleTtlMs = 3_600_000, feed, servingListeners, maxSessionsPerPrincipal }: SessionServiceOptions = {},
  ) {
    this.#db = db;
    this.#idleTtlMs = idleTtlMs;
    this.#maxSessions = maxSessionsPerPrincipal ?? 2_147_483_647;
    this.#refreshAfterMs = Math.min(30_000, idleTtlMs / 2);
    this.#feed = feed;
    this.#servingListeners = servingListeners;
    const forget = (sessionId: string) => {
      this.#invalidations++;
      this.#cache.forget(sessionId);
      // Whoever ended or changed it waits for every instance to say so.
      sql`select pg_notify(${SESSION_CHANNELS.forgotten}, ${`${sessionId} ${this.#instanceId}`})`
        .execute(this.#db)
        .catch(() => {});
    };
    feed?.on(SESSION_CHANNELS.ended, forget);
    feed?.on(SESSION_CHANNELS.changed, forget);
    // Notifications may have been missed while the connection was down.
    feed?.onResync(() => {
      this.#invalidations++;
      this.#cache.clear();
    });
  }

  /** Opens a session; QuotaExceededError when its principal holds MAX_SESSIONS_PER_PRINCIPAL live ones. */
  async create(s: Omit<Session, 'sessionId' | 'logLevel'>): Promise<string> {
    const max = this.#maxSessions;
    const sessionId = await createSession(this.#db, s, { maxSessions: max, idleTtlMs: this.#idleTtlMs });
    if (sessionId === undefined) {
      throw new QuotaExceededError(
        'MAX_SESSIONS_PER_PRINCIPAL',
        max,
        'Too many open sessions: end some (DELETE) or let them expire',
      );
    }
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

  /**
   * DELETE: the session ends for every instance. Answers once every instance that serves HTTP said it
   * forgot the session (or after FORGET_WAIT_MS, for an instance that hangs), so that the client's next
   * request gets 404 wherever it lands.
   */
  async end(sessionId: string): Promise<void> {
    await this.#everywhere(sessionId, () => endSession(this.#db, sessionId));
  }

  /** logging/setLevel; answers once every instance re-reads the session, as `end` does. */
  async setLogLevel(sessionId: string, level: string): Promise<void> {
    await this.#everywhere(sessionId, () => setLogLevel(this.#db, sessionId, level));
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
  /** See appendEvents. */
  appendEvents(sessionId: string, streamId: string, messages: readonly unknown[]): Promise<string[]> {
    return appendEvents(this.#db, sessionId, streamId, messages);
  }
  streamOf(sessionId: string, eventId: string): Promise<string | undefined> {
    return streamOf(this.#db, sessionId, eventId);
  }
  eventsAfter(sessionId: string, streamId: string, afterEventId: string): Promise<StreamEvent[]> {
    return eventsAfter(this.#db, sessionId, streamId, afterEventId);
  }
  /** See loggedTaskEvents. */
  loggedTaskEvents(
    sessionId: string,
    streamId: string,
    taskId?: string,
  ): Promise<Map<string, LoggedTaskEvents>> {
    return loggedTaskEvents(this.#db, sessionId, streamId, taskId);
  }
  /** See taskEventsUpTo. */
  taskEventsUpTo(sessionId: string, streamId: string, eventId: string): Promise<Map<string, number>> {
    return taskEventsUpTo(this.#db, sessionId, streamId, eventId);
  }
  loggedInputRequestIds(sessionId: string, streamId: string, prefix: string): Promise<string[]> {
    return loggedInputRequestIds(this.#db, sessionId, streamId, prefix);
  }
  /** See takeStream. */
  takeStream(sessionId: string, streamId: string, producer: string): Promise<void> {
    return takeStream(this.#db, sessionId, streamId, producer);
  }
  /** notifications/cancelled: tells whichever instance runs the request to stop it. */
  async cancelRequest(sessionId: string, requestId: string): Promise<void> {
    await sql`select pg_notify(${SESSION_CHANNELS.cancel}, ${`${sessionId} ${requestId}`})`.execute(this.#db);
  }
  expectResponses(sessionId: string, requestIds: readonly string[]): Promise<void> {
    return expectResponses(this.#db, sessionId, requestIds);
  }
  forgetResponses(sessionId: string, requestIds: readonly string[]): Promise<void> {
    return forgetResponses(this.#db, sessionId, requestIds);
  }
  recordResponse(sessionId: string, requestId: string, response: JsonObject): Promise<void> {
    return recordResponse(this.#db, sessionId, requestId, response);
  }
  takeResponses(sessionId: string, requestIds: readonly string[]): Promise<Map<string, JsonObject>> {
    return takeResponses(this.#db, sessionId, requestIds);
  }
  claimDeliveries(sessionId: string, taskId: string, keys: readonly string[], streamId: string) {
    return claimDeliveries(this.#db, sessionId, taskId, keys, streamId);
  }
  holdDeliveries(
    sessionId: string,
    claims: ReadonlyArray<{ taskId: string; key: string }>,
    streamId: string,
  ) {
    return holdDeliveries(this.#db, sessionId, claims, streamId);
  }
  releaseDeliveries(streamId: string): Promise<void> {
    return releaseDeliveries(this.#db, streamId);
  }

  /** Sessions are served from memory only while NOTIFY can tell this instance to forget them. */
  get #caching(): boolean {
    return this.#feed?.listening === true;
  }

  async #read(sessionId: string, now: number) {
    const before = this.#invalidations;
    const row = await readSession(this.#db, sessionId, this.#idleTtlMs);
    if (row === undefined) {
      this.#cache.forget(sessionId);
      return undefined;
    }
    const known = { session: row.session, seenAt: now - row.idleMs };
    // A row read while a session ended or changed may be the old one: used once, never kept.
    if (this.#caching && this.#invalidations === before) this.#cache.set(row.session, known.seenAt, now);
    return known;
  }

  /**
   * Runs `write` (which NOTIFYs `ended` or `changed` with the session id), then waits, bounded, until
   * every serving instance (counted by their LISTEN connections) said it forgot the session.
   */
  async #everywhere(sessionId: string, write: () => Promise<void>): Promise<void> {
    this.#cache.forget(sessionId);
    const feed = this.#feed;
    if (feed?.listening !== true) return write();
    const expected =
      this.#servingListeners === undefined ? 1 : await countListeners(this.#db, this.#servingListeners);
    const forgotBy = new Set<string>();
    let off: () => void = () => {};
    const forgotten = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, FORGET_WAIT_MS);
      off = feed.on(SESSION_CHANNELS.forgotten, (payload) => {
        const [id, instance] = payload.split(' ');
        if (id !== sessionId || instance === undefined) return;
        forgotBy.add(instance);
        if (forgotBy.size < expected) return;
        clearTimeout(timer);
        resolve();
      });
    });
    try {
      await write();
      await forgotten;
    } finally {
      off();
    }
  }
}

/** How many LISTEN connections with these application names this database has (the serving instances). */
async function countListeners(db: Kysely<Database>, names: readonly string[]): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and application_name = any(${names})`.execute(db);
  return Math.max(1, rows[0]?.n ?? 1);
}
