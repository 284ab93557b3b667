import type { Session } from './store.ts';

interface Entry {
  session: Session;
  /** When the session was last seen, on this process's clock (Date.now()), as the database said. */
  seenAt: number;
  /** When this process read it from the database. */
  readAt: number;
}

/**
 * The sessions this instance has read lately, so that a request of a known session costs no round
 * trip. It is a copy, kept correct by NOTIFY: a session that ends or changes anywhere is forgotten at
 * once (the session store notifies at commit), and everything is forgotten when the LISTEN connection
 * was lost (notifications may have been missed). `maxAgeMs` bounds how long an entry is trusted even
 * so; `maxEntries` bounds the memory (the oldest read goes first).
 */
export class SessionCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxAgeMs: number;
  readonly #maxEntries: number;

  constructor({ maxAgeMs = 10_000, maxEntries = 10_000 }: { maxAgeMs?: number; maxEntries?: number } = {}) {
    this.#maxAgeMs = maxAgeMs;
    this.#maxEntries = maxEntries;
  }

  /** The cached session, if read within `maxAgeMs`, with when it was last seen. */
  get(sessionId: string, now = Date.now()): { session: Session; seenAt: number } | undefined {
    const entry = this.#entries.get(sessionId);
    if (entry === undefined) return undefined;
    if (now - entry.readAt > this.#maxAgeMs) {
      this.#entries.delete(sessionId);
      return undefined;
    }
    return entry;
  }

  set(session: Session, seenAt: number, now = Date.now()): void {
    this.#entries.delete(session.sessionId);
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    this.#entries.set(session.sessionId, { session, seenAt, readAt: now });
  }

  /** The session was marked seen now (its entry stays as old as its read). */
  seen(sessionId: string, now = Date.now()): void {
    const entry = this.#entries.get(sessionId);
    if (entry !== undefined) entry.seenAt = now;
  }

  forget(sessionId: string): void {
    this.#entries.delete(sessionId);
  }

  clear(): void {
    this.#entries.clear();
  }
}
