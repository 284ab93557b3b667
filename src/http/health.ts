import { Hono } from 'hono';
import { coerceError, type Logger } from '../log.ts';

/** Why a process is not ready: logged, never sent (the probes reveal nothing but the status). */
export type NotReadyReason = 'draining' | 'database' | 'schema';

export interface ReadinessOptions {
  /** Throws when the database is unreachable or its schema is not current. */
  checkDatabase: () => Promise<'database' | 'schema' | undefined>;
  log: Logger;
  /** A database check's answer is reused this long, so probes cost at most one query per interval. */
  cacheMs?: number;
}

/**
 * Readiness of one process: not draining, the database reachable and migrated. Draining starts on
 * SIGTERM (`drain()`) and never ends.
 */
export class Readiness {
  private draining = false;
  private cached: { at: number; reason: NotReadyReason | undefined } | undefined;
  private inFlight: Promise<NotReadyReason | undefined> | undefined;
  private lastReason: NotReadyReason | undefined;

  constructor(private readonly opts: ReadinessOptions) {}

  drain(): void {
    this.draining = true;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** undefined when ready, else why not. */
  async check(): Promise<NotReadyReason | undefined> {
    const reason = this.draining ? 'draining' : await this.database();
    if (reason !== this.lastReason) {
      if (reason === undefined) this.opts.log.info('ready');
      else this.opts.log.warn('not ready', { reason });
      this.lastReason = reason;
    }
    return reason;
  }

  private database(): Promise<NotReadyReason | undefined> {
    const cacheMs = this.opts.cacheMs ?? 1000;
    if (this.cached !== undefined && Date.now() - this.cached.at < cacheMs) {
      return Promise.resolve(this.cached.reason);
    }
    // Concurrent probes share one check.
    this.inFlight ??= this.opts
      .checkDatabase()
      .catch((err: unknown) => {
        this.opts.log.debug('readiness: database check failed', { error: coerceError(err).message });
        return 'database' as const;
      })
      .then((reason) => {
        this.cached = { at: Date.now(), reason };
        this.inFlight = undefined;
        return reason;
      });
    return this.inFlight;
  }
}

/**
 * `GET /healthz` (the process serves; no database call) and `GET /readyz` (200 ready, 503 otherwise).
 * No authentication and any Host: probes come from load balancers and kubelets by address.
 */
export function healthRoutes(readiness: Readiness | undefined): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    if (readiness === undefined) return c.json({ status: 'ready' });
    const reason = await readiness.check();
    return reason === undefined
      ? c.json({ status: 'ready' })
      : c.json({ status: 'unavailable' }, 503, { 'retry-after': '1' });
  });
  return app;
}
