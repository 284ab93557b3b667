import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { coerceError, type Logger } from '../log.ts';

/**
 * The core's channels Postgres NOTIFYs on: task rows (by trigger), runs, list changes and resource
 * updates. A protocol revision may add its own (the feed listens on whatever it is given).
 */
export const CHANNELS = {
  task: 'mcp_task_changes',
  /** A task's cancel was requested (by trigger): the worker running it stops it at once. */
  taskCancel: 'mcp_task_cancels',
  /** A run of a task was enqueued: idle workers fetch at once. */
  run: 'mcp_task_runs',
  list: 'mcp_list_changed',
  resource: 'mcp_resource_updated',
  /** A task's events were appended (payload: its id): streams of its events read them. */
  taskEvents: 'mcp_task_events',
} as const;

type Listener = (payload: string) => void;

/**
 * One LISTEN connection per process, fanned out to in-process listeners. NOTIFY is a wake-up hint:
 * after a reconnect (when notifications may have been missed) every `onResync` listener is called, and
 * consumers poll as a backstop anyway.
 */
export class ChangeFeed {
  readonly #connectionString: string;
  readonly #log: Logger;
  readonly #channels: readonly string[];
  readonly #applicationName: string;
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #resync = new Set<() => void>();
  #client: pg.Client | undefined;
  #stopped = false;
  #ready: Promise<void> | undefined;

  /**
   * `channels`: every channel name to LISTEN on (the core's by default); `applicationName`: the LISTEN
   * connection's, so that peers can find the listeners in pg_stat_activity.
   */
  constructor(
    connectionString: string,
    log: Logger,
    {
      channels = Object.values(CHANNELS),
      applicationName = 'durable-mcp-tasks:listen',
    }: { channels?: readonly string[]; applicationName?: string } = {},
  ) {
    this.#connectionString = connectionString;
    this.#log = log;
    this.#channels = [...new Set(channels)];
    this.#applicationName = applicationName;
  }

  /** True while the LISTEN connection is up: a notification sent now will be heard. */
  get listening(): boolean {
    return this.#client !== undefined;
  }

  /** Resolves once the first LISTEN is in place (a failed start may be retried). */
  start(): Promise<void> {
    this.#ready ??= this.#connect().catch((err: unknown) => {
      this.#ready = undefined;
      throw err;
    });
    return this.#ready;
  }

  /** Calls `listener` with the payload of each NOTIFY on `channel` (a name the feed listens on). */
  on(channel: string, listener: Listener): () => void {
    let set = this.#listeners.get(channel);
    if (set === undefined) this.#listeners.set(channel, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  onResync(listener: () => void): () => void {
    this.#resync.add(listener);
    return () => this.#resync.delete(listener);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#health);
    await this.#client?.end().catch(() => {});
    this.#client = undefined;
  }

  #health: NodeJS.Timeout | undefined;

  #dispatch(channel: string, payload: string, listeners: Iterable<Listener>): void {
    for (const listener of listeners) {
      try {
        listener(payload);
      } catch (err) {
        this.#log.warn('change feed listener failed', { channel, error: coerceError(err).message });
      }
    }
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#connectionString,
      application_name: this.#applicationName,
      keepAlive: true,
    });
    client.on('notification', (n) => {
      const listeners = this.#listeners.get(n.channel);
      if (listeners !== undefined) this.#dispatch(n.channel, n.payload ?? '', [...listeners]);
    });
    client.on('error', (err) => {
      this.#log.warn('change feed connection lost', { error: coerceError(err).message });
      void this.#reconnect(client);
    });
    client.on('end', () => void this.#reconnect(client));
    try {
      await client.connect();
      for (const name of this.#channels) await client.query(`listen ${name}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    if (this.#stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    // A half-open socket never errors by itself: a cheap query now and then finds it.
    clearInterval(this.#health);
    this.#health = setInterval(() => {
      client.query('select 1').catch(() => void this.#reconnect(client));
    }, 30_000);
    this.#health.unref();
  }

  async #reconnect(dead: pg.Client): Promise<void> {
    if (this.#stopped || this.#client !== dead) return;
    this.#client = undefined;
    clearInterval(this.#health);
    await dead.end().catch(() => {});
    for (let delay = 100; !this.#stopped; delay = Math.min(delay * 2, 5000)) {
      await sleep(delay);
      try {
        await this.#connect();
        if (this.#stopped) return;
        for (const listener of this.#resync) listener();
        return;
      } catch (err) {
        this.#log.warn('change feed reconnect failed', { error: coerceError(err).message });
      }
    }
  }
}
