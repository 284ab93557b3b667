import { bearerToken, sameSecret } from './auth/secret.ts';
import { Hono } from 'hono';
import type { Metrics } from '../core/metrics.ts';
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

export interface OperationalOptions {
  readiness?: Readiness | undefined;
  metrics?: Metrics | undefined;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken?: string | undefined;
}

/**
 * `GET /healthz` (the process serves; no database call), `GET /readyz` (200 ready, 503 otherwise) and
 * `GET /metrics` (Prometheus text format). No MCP authentication and any Host: probes and scrapers come
 * by address; /metrics has its own optional token.
 */
export function operationalRoutes({ readiness, metrics, metricsToken }: OperationalOptions = {}): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    if (readiness === undefined) return c.json({ status: 'ready' });
    const reason = await readiness.check();
    return reason === undefined
      ? c.json({ status: 'ready' })
      : c.json({ status: 'unavailable' }, 503, { 'retry-after': '1' });
  });
  if (metrics !== undefined) {
    app.get('/metrics', async (c) => {
      if (metricsToken !== undefined) {
        if (!sameSecret(bearerToken(c.req.header('authorization')), metricsToken)) {
          return c.text('unauthorized\n', 401, { 'www-authenticate': 'Bearer realm="metrics"' });
        }
      }
      const { contentType, body } = await metrics.exposition();
      return c.body(body, 200, { 'content-type': contentType });
    });
  }
  return app;
}
