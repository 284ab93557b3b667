import type { Config } from '../config.ts';
import { Metrics, type StoreStats } from '../core/metrics.ts';
import { operationalRoutes, Readiness } from '../http/health.ts';
import { coerceError, type Logger } from '../log.ts';
import { readStoreStats } from '../tasks/store/stats.ts';
import type { CleanupStack } from './cleanups.ts';
import type { DatabaseConnection } from './database.ts';
import { closeNow, listen } from './listener.ts';

/** What /healthz, /readyz and /metrics answer from, on the MCP port and on METRICS_PORT. */
export interface Operational {
  readiness: Readiness;
  metrics: Metrics;
  metricsToken: string | undefined;
}

/**
 * Readiness and metrics (the pools' and the store's gauges, the latter cached for
 * METRICS_STORE_CACHE_MS), and the METRICS_PORT listener when there is one. That listener closes last,
 * so it reports the drain until the process is gone.
 */
export async function startOperational(
  conn: DatabaseConnection,
  config: Config,
  log: Logger,
  cleanups: CleanupStack,
): Promise<Operational & { metricsUrl: string | undefined }> {
  const readiness = new Readiness({ log, checkDatabase: () => conn.check() });
  const metrics = new Metrics();
  metrics.addPool('app', conn.pool);
  let stats: { at: number; value: Promise<StoreStats | undefined> } | undefined;
  metrics.addStoreStats(() => {
    if (stats === undefined || Date.now() - stats.at >= config.METRICS_STORE_CACHE_MS) {
      stats = {
        at: Date.now(),
        value: readStoreStats(conn.db).catch((err: unknown) => {
          log.warn('metrics: reading the store failed', { error: coerceError(err).message });
          return undefined;
        }),
      };
    }
    return stats.value;
  });
  const operational = { readiness, metrics, metricsToken: config.METRICS_TOKEN };
  if (config.METRICS_PORT === undefined) return { ...operational, metricsUrl: undefined };
  const probes = operationalRoutes(operational);
  const host = config.METRICS_HOST ?? config.HOST;
  const listening = await listen(probes.fetch, host, config.METRICS_PORT, 'METRICS_PORT');
  const metricsUrl = `http://${host.includes(':') ? `[${host}]` : host}:${listening.port}`;
  cleanups.push(() => closeNow(listening.server));
  log.info('probes listening', { url: metricsUrl });
  return { ...operational, metricsUrl };
}
