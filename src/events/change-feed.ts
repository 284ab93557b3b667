import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { coerceError, type Logger } from '../log.ts';

/** Channels Postgres NOTIFYs on: task rows (by trigger), list changes and resource updates. */
export const CHANNELS = {
  task: 'mcp_task_changes',
  /** A task's cancel was requested (by trigger): the worker running it stops it at once. */
  taskCancel: 'mcp_task_cancels',
  /** A run of a task was enqueued: idle workers fetch at once. */
  run: 'mcp_task_runs',
  list: 'mcp_list_changed',
  resource: 'mcp_resource_updated',
  /** A 2025-11-25 session ended (DELETE): its streams close. */
  session: 'mcp_session_ended',
  /** A session's stream got an event: a resumed stream on another instance forwards it. */
  sessionEvent: 'mcp_session_events',
  /** A client answered a request the server sent it: the instance waiting for it reads it. */
  response: 'mcp_session_responses',
  /** A 2025-era client cancelled one of its requests (notifications/cancelled): whoever runs it stops. */
  cancel: 'mcp_request_cancelled',
} as const;
export type Channel = keyof typeof CHANNELS;

type Listener = (payload: string) => void;

/**
 * One LISTEN connection per process, fanned out to in-process listeners. NOTIFY is a wake-up hint:
 * after a reconnect (when notifications may have been missed) every `onResync` listener is called, and
 * consumers poll as a backstop anyway.
 */
export class ChangeFeed {
  readonly #connectionString: string;
  readonly #log: Logger;
  readonly #listeners = new Map<Channel, Set<Listener>>();
  readonly #resync = new Set<() => void>();
  #client: pg.Client | undefined;
  #stopped = false;
  #ready: Promise<void> | undefined;

  constructor(connectionString: string, log: Logger) {
    this.#connectionString = connectionString;
    this.#log = log;
  }

  /** Resolves once the first LISTEN is in place (a failed start may be retried). */
  start(): Promise<void> {
    this.#ready ??= this.#connect().catch((err: unknown) => {
      this.#ready = undefined;
      throw err;
    });
    return this.#ready;
  }

  on(channel: Channel, listener: Listener): () => void {
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

  #dispatch(channel: Channel, payload: string, listeners: Iterable<Listener>): void {
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
      application_name: 'durable-mcp-tasks:listen',
      keepAlive: true,
    });
    client.on('notification', (n) => {
      const channel = (Object.keys(CHANNELS) as Channel[]).find((c) => CHANNELS[c] === n.channel);
      if (channel !== undefined)
        this.#dispatch(channel, n.payload ?? '', [...(this.#listeners.get(channel) ?? [])]);
    });
    client.on('error', (err) => {
      this.#log.warn('change feed connection lost', { error: coerceError(err).message });
      void this.#reconnect(client);
    });
    client.on('end', () => void this.#reconnect(client));
    try {
      await client.connect();
      for (const name of Object.values(CHANNELS)) await client.query(`listen ${name}`);
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
