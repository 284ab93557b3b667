/**
 * Each principal's rank (its active top-level tasks) as this process last read it, so that a create can
 * take its place in the queue and its admission in one statement: the rank is needed before the statement
 * (the run's priority, whether a reserved slot may take it), and the statement returns the count it read,
 * which the next create of that principal uses. A rank older than `maxAgeMs` is not used (the create reads
 * it first, as its first one here does); at most `maxPrincipals` are kept, the least recently read going
 * first. The quota itself is never judged from here: the statement checks it against the counts.
 */
export class PrincipalRanks {
  readonly #ranks = new Map<string, { rank: number; at: number }>();
  readonly #maxAgeMs: number;
  readonly #maxPrincipals: number;

  constructor({
    maxAgeMs = 1_000,
    maxPrincipals = 10_000,
  }: { maxAgeMs?: number; maxPrincipals?: number } = {}) {
    this.#maxAgeMs = maxAgeMs;
    this.#maxPrincipals = maxPrincipals;
  }

  /** The principal's rank read within `maxAgeMs`, or undefined. */
  recent(principal: string, now = Date.now()): number | undefined {
    const known = this.#ranks.get(principal);
    if (known === undefined || now - known.at > this.#maxAgeMs) return undefined;
    return known.rank;
  }

  /** The principal's rank as just read: `active` tasks before the one being created, which is now one more. */
  read(principal: string, active: number, now = Date.now()): void {
    this.#ranks.delete(principal);
    this.#ranks.set(principal, { rank: active + 1, at: now });
    if (this.#ranks.size > this.#maxPrincipals) {
      const oldest = this.#ranks.keys().next().value;
      if (oldest !== undefined) this.#ranks.delete(oldest);
    }
  }
}
