import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';

/** SQLSTATE 53300: max_connections, or a role's or database's connection limit, is reached. */
export function isTooManyConnections(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '53300';
}

type Connect = {
  (): Promise<pg.PoolClient>;
  (cb: (err: Error | undefined, client?: pg.PoolClient, done?: (release?: unknown) => void) => void): void;
};

export interface ConnectionLimitOptions {
  /** How long a request may wait for a connection in all (the pool's connectionTimeoutMillis). */
  connectTimeoutMs: number;
  /** How long the pool keeps to the connections it has before it tries to open more again. */
  restoreAfterMs?: number;
}

/**
 * When Postgres refuses a new connection because its limit is reached, a query should wait for one of
 * the connections the pool already holds instead of failing: the pool lowers its own max to what it
 * holds (so further checkouts queue, bounded by its connection timeout) and raises it back after
 * `restoreAfterMs`. A pool that holds none retries with backoff within the same bound. So a process
 * whose budget does not fit in max_connections slows down; its requests fail (-32603) only when no
 * connection frees up in time. Works for pg-pool's promise and callback forms (pg-boss uses the latter
 * through `pool.query`).
 */
export function adaptToConnectionLimit(
  pool: pg.Pool,
  { connectTimeoutMs, restoreAfterMs = 5_000 }: ConnectionLimitOptions,
): void {
  const options = (pool as unknown as { options: { max: number } }).options;
  const configuredMax = options.max;
  const original = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  let restore: NodeJS.Timeout | undefined;

  const connect = async (): Promise<pg.PoolClient> => {
    const deadline = Date.now() + connectTimeoutMs;
    for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
      try {
        return await original();
      } catch (err) {
        if (!isTooManyConnections(err) || Date.now() + delay > deadline) throw err;
        options.max = Math.max(1, pool.totalCount);
        clearTimeout(restore);
        restore = setTimeout(() => (options.max = configuredMax), restoreAfterMs);
        restore.unref();
        // Holding connections: queue for them at once. Holding none: wait before trying again.
        if (pool.totalCount === 0) await sleep(delay);
      }
    }
  };

  (pool as unknown as { connect: Connect }).connect = ((
    cb?: (err: Error | undefined, client?: pg.PoolClient, done?: (release?: unknown) => void) => void,
  ) => {
    const result = connect();
    if (cb === undefined) return result;
    result.then(
      (client) => cb(undefined, client, (release?: unknown) => client.release(release as Error | boolean)),
      (err: unknown) => cb(err as Error),
    );
    return undefined;
  }) as Connect;
}
