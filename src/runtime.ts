import { serve, type ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import { sql } from 'kysely';
import pg from 'pg';
import type { PgBoss } from 'pg-boss';
import { startWorkerPool, type WorkerPool } from './worker/pool.ts';
import type { Config } from './config.ts';
import { adaptToConnectionLimit } from './db/connection-limit.ts';
import { createDb, type Db } from './db/database.ts';
import { startEmbeddedPostgres, type RunningPostgres } from './db/embedded.ts';
import { assertMigrated } from './db/migrate.ts';
import { isUnreachable, retryWhileUnreachable, waitForDatabase } from './db/wait.ts';
import { migrateDatabase } from './migrate.ts';
import { sharedSecret } from './db/shared-secret.ts';
import { CHANNELS, ChangeFeed } from './events/change-feed.ts';
import { createServerEvents } from './events/server-events.ts';
import { createApp } from './http/app.ts';
import { operationalRoutes, Readiness } from './http/health.ts';
import { Metrics, type StoreStats } from './core/metrics.ts';
import { readStoreStats } from './tasks/store/stats.ts';
import { securityFromConfig } from './http/auth/from-config.ts';
import type { AuthEnv } from './http/auth/middleware.ts';
import { guardNodeServer } from './http/node-server.ts';
import { PollLimiter } from './protocol/poll-limiter.ts';
import { coerceError, type Logger } from './log.ts';
import { createDispatcher } from './protocol/dispatch.ts';
import type { ServerDeps } from './protocol/server-deps.ts';
import { BossTaskQueue, createBoss, ensureRunQueue } from './queue/boss.ts';
import { TaskService } from './tasks/service.ts';
import type { PromptDefinition } from './prompts/define.ts';
import { PromptRegistry } from './prompts/registry.ts';
import type { ResourceDefinition, ResourceTemplateDefinition } from './resources/define.ts';
import { ResourceRegistry } from './resources/registry.ts';
import {
  createSessionTransport,
  SESSION_CHANNELS,
  SessionService,
  sessionMaintenance,
} from './rev2025-11-25/index.ts';
import type { ToolDefinition } from './tools/define.ts';
import { ToolRegistry } from './tools/registry.ts';
import { RequestStateSealer } from './tools/request-state.ts';

export type Role = 'all' | 'server' | 'worker';

/** The LISTEN connection's application_name, `:role` appended: instances that serve HTTP find each other by it. */
const LISTENER_NAME = 'durable-mcp-tasks:listen';

export interface RuntimeOptions {
  config: Config;
  log: Logger;
  tools: readonly ToolDefinition[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
  prompts?: readonly PromptDefinition[];
  role: Role;
  /** Listen on HOST:PORT (default true for roles that serve HTTP). */
  listen?: boolean;
  serverVersion?: string;
}

export interface Runtime {
  db: Db;
  boss: PgBoss;
  app: Hono<AuthEnv> | undefined;
  server: ServerType | undefined;
  /** `http://host:port/mcp` once listening. */
  url: string | undefined;
  /** `http://host:port` of the METRICS_PORT listener, when there is one. */
  metricsUrl: string | undefined;
  workers: WorkerPool | undefined;
  stop(): Promise<void>;
}

/** Builds a process from its configuration: database (embedded when DATABASE_URL is unset), queue, HTTP, workers. */
export async function startRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const { config, log, role } = opts;
  const cleanups: Array<() => Promise<void>> = [];
  let readiness: Readiness | undefined;
  const stop = async () => {
    // Out of rotation first: /readyz says 503 while the process still serves for DRAIN_DELAY_MS.
    if (readiness !== undefined && !readiness.isDraining) {
      readiness.drain();
      if (config.DRAIN_DELAY_MS > 0 && role !== 'worker') {
        log.info('draining', { delayMs: config.DRAIN_DELAY_MS });
        await new Promise((resolve) => setTimeout(resolve, config.DRAIN_DELAY_MS));
      }
    }
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((err: unknown) =>
        log.warn('shutdown step failed', { error: coerceError(err).message }),
      );
    }
    cleanups.length = 0;
  };

  try {
    let connectionString = config.DATABASE_URL;
    let directUrl = config.DATABASE_DIRECT_URL ?? connectionString;
    if (connectionString === undefined) {
      if (directUrl !== undefined) throw new Error('DATABASE_DIRECT_URL is set but DATABASE_URL is not');
      const embedded: RunningPostgres = await startEmbeddedPostgres({
        dataDir: config.EMBEDDED_PG_DIR,
        port: config.EMBEDDED_PG_PORT,
        log,
      });
      cleanups.push(() => embedded.stop());
      connectionString = directUrl = embedded.connectionString;
    }
    if (directUrl === undefined) throw new Error('unreachable: no database URL');

    const timeouts = {
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
      lockTimeoutMs: config.DB_LOCK_TIMEOUT_MS,
      idleInTransactionTimeoutMs: config.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    };
    // A transaction-mode pooler in front (DATABASE_DIRECT_URL set) cannot carry named statements.
    const prepare =
      config.DB_PREPARED_STATEMENTS === 'on' ||
      (config.DB_PREPARED_STATEMENTS === 'auto' && config.DATABASE_DIRECT_URL === undefined);
    const { db, pool: appPool } = createDb({
      connectionString,
      prepare,
      max: config.DB_POOL_MAX,
      applicationName: `durable-mcp-tasks:${role}`,
      connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS,
      timeouts,
    });
    cleanups.push(() => db.destroy());
    const ready = new Readiness({
      log,
      async checkDatabase() {
        await sql`select 1`.execute(db);
        return assertMigrated(db).then(
          () => undefined,
          () => 'schema' as const,
        );
      },
    });
    readiness = ready;
    const metrics = new Metrics();
    metrics.addPool('app', appPool);
    let stats: { at: number; value: Promise<StoreStats | undefined> } | undefined;
    metrics.addStoreStats(() => {
      if (stats === undefined || Date.now() - stats.at >= config.METRICS_STORE_CACHE_MS) {
        stats = {
          at: Date.now(),
          value: readStoreStats(db).catch((err: unknown) => {
            log.warn('metrics: reading the store failed', { error: coerceError(err).message });
            return undefined;
          }),
        };
      }
      return stats.value;
    });
    const operational = { readiness: ready, metrics, metricsToken: config.METRICS_TOKEN };
    // The probe listener closes last, so it reports the drain until the process is gone.
    let metricsUrl: string | undefined;
    if (config.METRICS_PORT !== undefined) {
      const probes = operationalRoutes(operational);
      const host = config.METRICS_HOST ?? config.HOST;
      const listening = await listen(probes.fetch, host, config.METRICS_PORT, 'METRICS_PORT');
      metricsUrl = `http://${host.includes(':') ? `[${host}]` : host}:${listening.port}`;
      cleanups.push(
        () =>
          new Promise<void>((resolve) => {
            listening.server.close(() => resolve());
            (listening.server as unknown as ClosableServer).closeAllConnections();
          }),
      );
      log.info('probes listening', { url: metricsUrl });
    }
    // Every start-up step waits out an unreachable database (e.g. Postgres restarting meanwhile).
    const deadline = Date.now() + config.DB_STARTUP_TIMEOUT_MS;
    const retry = <T>(step: string, fn: () => Promise<T>) =>
      retryWhileUnreachable(step, fn, { log, deadline });
    await waitForDatabase(db, log, config.DB_STARTUP_TIMEOUT_MS);
    if (config.MIGRATE_ON_START) {
      await retry('migrate', () =>
        migrateDatabase({ connectionString: directUrl, log, startupTimeoutMs: deadline - Date.now() }),
      );
    } else {
      await retry('schema check', () => assertMigrated(db));
    }

    const boss = await retry('pg-boss', async () => {
      const b = createBoss({
        connectionString,
        max: config.QUEUE_POOL_MAX,
        prepare,
        supervise: role !== 'server',
        timeouts,
        connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS,
      });
      b.on('error', (err) => log.error('pg-boss error', { error: coerceError(err).message }));
      try {
        await b.start();
        return b;
      } catch (err) {
        await b.stop({ graceful: false, close: true }).catch(() => {});
        if (isUnreachable(err)) throw err;
        throw new Error(
          `pg-boss: ${coerceError(err).message} (run \`durable-mcp-tasks migrate\` as the owner role)`,
          {
            cause: err,
          },
        );
      }
    });
    cleanups.push(() => boss.stop({ graceful: true, timeout: config.SHUTDOWN_GRACE_MS, close: true }));
    const bossPool = (boss.getDb() as { pool?: unknown }).pool;
    if (bossPool instanceof pg.Pool) {
      adaptToConnectionLimit(bossPool, { connectTimeoutMs: config.DB_CONNECT_TIMEOUT_MS });
      metrics.addPool('queue', bossPool);
    }
    await retry('run queue', () => ensureRunQueue(boss));

    // One LISTEN connection per process: task changes, new runs, list changes.
    // A transaction-mode pooler cannot carry LISTEN: it takes the direct connection.
    const feed = new ChangeFeed(directUrl, log, {
      channels: [...Object.values(CHANNELS), ...Object.values(SESSION_CHANNELS)],
      applicationName: `${LISTENER_NAME}:${role}`,
    });
    await retry('listen', () => feed.start());
    cleanups.push(() => feed.stop());

    const tools = new ToolRegistry(opts.tools);
    const queue = new BossTaskQueue(boss);
    const events = createServerEvents(db);
    let workers: WorkerPool | undefined;
    if (role !== 'server') {
      workers = await startWorkerPool({
        db,
        boss,
        queue,
        feed,
        tools,
        events,
        metrics,
        log,
        concurrency: config.WORKER_CONCURRENCY,
        pollIntervalMs: config.WORKER_POLL_INTERVAL_MS,
        leaseMs: config.LEASE_MS,
        cancelCheckIntervalMs: config.CANCEL_CHECK_INTERVAL_MS,
        statusThrottleMs: config.STATUS_THROTTLE_MS,
        retryLimit: config.TASK_RETRY_LIMIT,
        retryDelaySeconds: config.TASK_RETRY_DELAY_SECONDS,
        maxResultBytes: config.MAX_RESULT_BYTES,
        shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
        sweepIntervalMs: config.SWEEP_INTERVAL_MS,
        sweepBatchSize: config.SWEEP_BATCH_SIZE,
        purgeGraceMs: config.TASK_PURGE_GRACE_MS,
        maintenance: sessionMaintenance(db, {
          idleTtlMs: config.SESSION_IDLE_TTL_MS,
          eventRetentionMs: config.SESSION_EVENT_RETENTION_MS,
        }),
      });
      const pool = workers;
      cleanups.push(() => pool.stop());
    }

    let app: Hono<AuthEnv> | undefined;
    let server: ServerType | undefined;
    let url: string | undefined;
    if (role !== 'worker') {
      const secret =
        config.REQUEST_STATE_SECRET ??
        (await retry('shared secret', () => sharedSecret(db, 'request-state')));
      const shutdown = new AbortController();
      const deps: ServerDeps = {
        serverInfo: { name: config.SERVER_NAME, version: opts.serverVersion ?? '0.1.0' },
        tools,
        resources: new ResourceRegistry(opts.resources, opts.resourceTemplates),
        prompts: new PromptRegistry(opts.prompts),
        tasks: new TaskService({
          db,
          queue,
          startHere: config.WORKER_EAGER_START ? () => workers?.startHere() : undefined,
        }),
        requestState: new RequestStateSealer(secret),
        events,
        feed,
        shutdown: shutdown.signal,
        taskDefaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
        listTtlMs: 60_000,
        subscriptionPollMs: config.SUBSCRIPTION_POLL_MS,
        limits: {
          maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
          maxInputResponsesBytes: config.MAX_INPUT_RESPONSES_BYTES,
          maxSubscriptionsPerPrincipal: config.MAX_SUBSCRIPTIONS_PER_PRINCIPAL,
        },
        pollLimiter: config.RATE_LIMIT_POLLING ? new PollLimiter() : undefined,
        metrics,
      };
      // Refuse unsafe settings (e.g. no authentication on a public address) before binding anything.
      securityFromConfig(config, config.PORT);
      const dispatcher = createDispatcher(deps);
      const sessions = new SessionService(db, {
        idleTtlMs: config.SESSION_IDLE_TTL_MS,
        feed,
        servingListeners: [`${LISTENER_NAME}:all`, `${LISTENER_NAME}:server`],
      });
      const buildApp = (port: number) => {
        const security = securityFromConfig(config, port);
        return createApp({
          dispatcher,
          log,
          auth: security.auth,
          resourceMetadata: security.resourceMetadata,
          allowedHosts: security.allowedHosts,
          maxBodyBytes: config.MAX_BODY_BYTES,
          maxJsonDepth: config.MAX_JSON_DEPTH,
          keepAliveMs: config.SSE_KEEPALIVE_MS,
          operational,
          dashboard:
            config.DASHBOARD_TOKEN === undefined
              ? undefined
              : {
                  token: config.DASHBOARD_TOKEN,
                  db,
                  tools: tools.list().map((t) => t.name),
                  log,
                },
          sessions: (binding) =>
            createSessionTransport({
              ...binding,
              db,
              dispatcher,
              sessions,
              tasks: deps.tasks,
              tools,
              serverInfo: deps.serverInfo,
              serves: { resources: !deps.resources.empty, prompts: !deps.prompts.empty },
              feed,
              shutdown: shutdown.signal,
              requestorsIdentified: config.AUTH_MODE !== 'none',
            }),
          allowedOrigins: config.ALLOWED_ORIGINS.split(',')
            .map((o) => o.trim())
            .filter((o) => o !== ''),
        });
      };
      app = buildApp(config.PORT);
      if (opts.listen ?? true) {
        let current = app;
        const listening = await listen(
          (req) => current.fetch(req),
          config.HOST,
          config.PORT,
          'PORT (or --port)',
          (s) =>
            // Before any connection: an oversized request's 413 must reach a client still sending the body.
            guardNodeServer(s, { maxBodyBytes: config.MAX_BODY_BYTES }),
        );
        // The public URL (OAuth metadata) names the port actually bound, e.g. with PORT=0.
        if (listening.port !== config.PORT) app = current = buildApp(listening.port);
        server = listening.server;
        const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
        url = `http://${host}:${listening.port}/mcp`;
        const s = server;
        // Stop accepting first; requests in flight finish before the database goes away. Open
        // subscriptions are ended first, with their graceful result.
        cleanups.push(() => closeServer(s as unknown as ClosableServer, shutdown, config.SHUTDOWN_GRACE_MS));
        log.info('listening', {
          url,
          ...(config.DASHBOARD_TOKEN === undefined ? {} : { dashboard: new URL('/dashboard', url).href }),
        });
      }
    }
    log.info('started', { role, tools: opts.tools.map((t) => t.name) });
    return { db, boss, app, server, url, metricsUrl, workers, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Binds an HTTP server; a port that cannot be bound (taken, or not allowed) is one clear error naming the
 * setting, not an unhandled 'error' event.
 */
function listen(
  fetch: (req: Request) => Response | Promise<Response>,
  hostname: string,
  port: number,
  setting: string,
  prepare?: (server: ServerType) => void,
): Promise<{ server: ServerType; port: number }> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname, port }, (info) => {
      server.off('error', refused);
      resolve({ server, port: info.port });
    });
    const refused = (err: NodeJS.ErrnoException) => {
      server.close();
      const why =
        err.code === 'EADDRINUSE' ? 'is already in use' : `cannot be bound (${err.code ?? err.message})`;
      reject(new Error(`${hostname}:${port} ${why}: choose another with ${setting}`));
    };
    server.once('error', refused);
    prepare?.(server);
  });
}

interface ClosableServer {
  close(cb: () => void): void;
  closeIdleConnections(): void;
  closeAllConnections(): void;
}

/**
 * Stops accepting connections, ends subscriptions (they send their graceful result), closes each
 * keep-alive connection as soon as it is idle, and after `graceMs` closes whatever is left.
 */
async function closeServer(
  server: ClosableServer,
  shutdown: AbortController,
  graceMs: number,
): Promise<void> {
  shutdown.abort();
  await new Promise<void>((resolve) => {
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearInterval(idle);
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
