import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { coerceError, type Logger } from '../log.ts';

/** Channels Postgres NOTIFYs on: task rows (by trigger), list changes and resource updates. */
export const CHANNELS = {
  task: 'mcp_task_changes',
  /** A run of a task was enqueued: idle workers fetch at once. */
  run: 'mcp_task_runs',
  list: 'mcp_list_changed',
  resource: 'mcp_resource_updated',
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

  /** Resolves once the first LISTEN is in place. */
  start(): Promise<void> {
    this.#ready ??= this.#connect();
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
    await this.#client?.end().catch(() => {});
    this.#client = undefined;
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#connectionString,
      application_name: 'durable-mcp-tasks:listen',
    });
    client.on('notification', (n) => {
      const channel = (Object.keys(CHANNELS) as Channel[]).find((c) => CHANNELS[c] === n.channel);
      if (channel === undefined) return;
      for (const listener of this.#listeners.get(channel) ?? []) listener(n.payload ?? '');
    });
    client.on('error', (err) => {
      this.#log.warn('change feed connection lost', { error: coerceError(err).message });
      void this.#reconnect(client);
    });
    client.on('end', () => void this.#reconnect(client));
    await client.connect();
    for (const name of Object.values(CHANNELS)) await client.query(`listen ${name}`);
    this.#client = client;
  }

  async #reconnect(dead: pg.Client): Promise<void> {
    if (this.#stopped || this.#client !== dead) return;
    this.#client = undefined;
    await dead.end().catch(() => {});
    for (let delay = 100; !this.#stopped; delay = Math.min(delay * 2, 5000)) {
      await sleep(delay);
      try {
        await this.#connect();
        for (const listener of this.#resync) listener();
        return;
      } catch (err) {
        this.#log.warn('change feed reconnect failed', { error: coerceError(err).message });
      }
    }
  }
}
