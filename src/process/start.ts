import { artifactPath } from '../core/artifacts.ts';
import { MCP_PATH } from '../core/wire.ts';
import { availableParallelism } from 'node:os';
import type { ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import type { PgBoss } from 'pg-boss';
import { publicOrigin, type Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { assertMigrated } from '../db/migrations.ts';
import { retryWhileUnreachable, waitForDatabase } from '../db/wait.ts';
import { sharedSecret } from '../db/shared-secret.ts';
import { CHANNELS, ChangeFeed } from '../events/change-feed.ts';
import { createServerEvents } from '../events/server-events.ts';
import type { AuthEnv } from '../http/auth/middleware.ts';
import type { Logger } from '../log.ts';
import { migrateDatabase } from '../migrate.ts';
import type { PromptDefinition } from '../prompts/define.ts';
import { BossTaskQueue } from '../queue/boss.ts';
import type { ResourceDefinition, ResourceTemplateDefinition } from '../resources/define.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { ToolRegistry } from '../tools/registry.ts';
import type { TriggerDefinition } from '../launch/triggers/define.ts';
import { TriggerRegistry } from '../launch/triggers/registry.ts';
import { TaskService } from '../tasks/service.ts';
import { startSyncCallThreads, type SyncCallThreads } from '../threads/pool.ts';
import { signalPath, type SignalDelivery } from '../core/signal-delivery.ts';
import { checkSchedules } from '../launch/schedules/check.ts';
import type { ScheduleDefinition } from '../launch/schedules/define.ts';
import { startSchedules } from './schedules.ts';
import { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from '../worker/pool.ts';
import { CleanupStack } from './cleanups.ts';
import { openDatabase, type DatabaseConnection } from './database.ts';
import { LISTENER_NAME, serveMcp, type McpEndpoint, type McpEndpointParts } from './http.ts';
import { startOperational, type Operational } from './operational.ts';
import { startQueue, type StartupRetry } from './queue.ts';
import { REVISION_CHANNELS, revisionMaintenance } from './revisions.ts';
import type { Role } from './role.ts';

export type { Role } from './role.ts';

export interface ProcessOptions {
  config: Config;
  log: Logger;
  tools: readonly ToolDefinition[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
  prompts?: readonly PromptDefinition[];
  /** Tools called on a clock (defineSchedule), synced to the database at start. */
  schedules?: readonly ScheduleDefinition[];
  /** Webhook triggers (`POST /triggers/{name}`), each of one of `tools`. */
  triggers?: readonly TriggerDefinition[];
  role: Role;
  /** Listen on HOST:PORT (default true for roles that serve HTTP). */
  listen?: boolean;
  serverVersion?: string;
  /**
   * The URL of a module exporting `tools` (as `--tools` modules do): synchronous calls of its tools run
   * on SYNC_CALL_THREADS worker threads that load it. Unset: they run on the event loop.
   */
  toolsModule?: string | undefined;
}

/** A started process: what tests and the embedding server reach, and its stop. */
export interface ServerProcess {
  db: Db;
  boss: PgBoss;
  app: Hono<AuthEnv> | undefined;
  server: ServerType | undefined;
  /** `http://host:port/mcp` once listening. */
  url: string | undefined;
  /** `http://host:port` of the METRICS_PORT listener, when there is one. */
  metricsUrl: string | undefined;
  workers: WorkerPool | undefined;
  /** Delivers a task's signal by its token (see DurableMcpServer.deliverSignal). */
  deliverSignal(token: string, payload: unknown): Promise<SignalDelivery>;
  stop(): Promise<void>;
}

/**
 * The composition root: builds a process from its configuration, each part on the one before it
 * (database, probes, schema, queue, change feed, workers, HTTP), each pushing its own stop on one
 * cleanup stack. A start that fails stops what had started.
 */
export async function startProcess(opts: ProcessOptions): Promise<ServerProcess> {
  const { config, log, role } = opts;
  const cleanups = new CleanupStack(log);
  let draining: (() => Promise<void>) | undefined;
  const stop = async () => {
    await draining?.();
    draining = undefined;
    await cleanups.run();
  };
  // A trigger of a tool not served is refused before anything connects.
  const triggers = new TriggerRegistry(opts.triggers ?? [], opts.tools);
  try {
    const tools = new ToolRegistry(opts.tools);
    checkSchedules(opts.schedules ?? [], tools, config.MAX_ARGUMENTS_BYTES);
    const conn = await openDatabase(config, log, role, cleanups);
    const operational = await startOperational(conn, config, log, cleanups);
    draining = () => drain(operational, opts);
    const { boss, feed, retry } = await startStorage(conn, operational, opts, cleanups);
    const queue = new BossTaskQueue(boss);
    const events = createServerEvents(conn.db);
    const links = publicLinks(opts);
    const workers =
      role === 'server'
        ? undefined
        : await startWorkers(
            conn.db,
            { boss, queue, feed, tools, events, metrics: operational.metrics, ...links },
            opts,
          );
    if (workers !== undefined) cleanups.push(() => workers.stop());
    const tasks = taskService(conn.db, queue, workers, config);
    await startSchedules({ db: conn.db, tasks, tools, metrics: operational.metrics }, opts, retry, cleanups);
    const endpoint =
      role === 'worker'
        ? undefined
        : await startEndpoint(
            {
              conn,
              config,
              log,
              tools,
              triggers,
              tasks,
              queue,
              events,
              feed,
              operational,
              artifactUrl: links.artifactUrl,
            },
            opts,
            retry,
            cleanups,
          );
    if (endpoint?.url !== undefined) links.listeningAt(endpoint.url);
    log.info('started', { role, tools: opts.tools.map((t) => t.name) });
    return {
      db: conn.db,
      boss,
      app: endpoint?.app,
      server: endpoint?.server,
      url: endpoint?.url,
      metricsUrl: operational.metricsUrl,
      workers,
      deliverSignal: (token, payload) => tasks.deliverSignal(token, payload),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Out of rotation first: /readyz says 503 while the process still serves for DRAIN_DELAY_MS. */
async function drain(operational: Operational, { config, log, role }: ProcessOptions): Promise<void> {
  if (operational.readiness.isDraining) return;
  operational.readiness.drain();
  if (config.DRAIN_DELAY_MS > 0 && role !== 'worker') {
    log.info('draining', { delayMs: config.DRAIN_DELAY_MS });
    await new Promise((resolve) => setTimeout(resolve, config.DRAIN_DELAY_MS));
  }
}

/**
 * What every role stands on once the database answers: the schema, pg-boss and the LISTEN connection.
 * Every step waits out an unreachable database (e.g. Postgres restarting meanwhile), until
 * DB_STARTUP_TIMEOUT_MS; later steps retry with the same deadline (`retry`).
 */
async function startStorage(
  conn: DatabaseConnection,
  operational: Operational,
  { config, log, role }: ProcessOptions,
  cleanups: CleanupStack,
): Promise<{ boss: PgBoss; feed: ChangeFeed; retry: StartupRetry }> {
  const deadline = Date.now() + config.DB_STARTUP_TIMEOUT_MS;
  const retry: StartupRetry = (step, fn) => retryWhileUnreachable(step, fn, { log, deadline });
  await waitForDatabase(conn.db, log, config.DB_STARTUP_TIMEOUT_MS);
  await ensureSchema(conn, config, log, retry, deadline);
  const boss = await startQueue(conn, { config, role, log, metrics: operational.metrics, retry }, cleanups);
  // One LISTEN connection per process: task changes, new runs, list changes.
  // A transaction-mode pooler cannot carry LISTEN: it takes the direct connection.
  const feed = new ChangeFeed(conn.directUrl, log, {
    channels: [...Object.values(CHANNELS), ...REVISION_CHANNELS],
    applicationName: `${LISTENER_NAME}:${role}`,
  });
  await retry('listen', () => feed.start());
  cleanups.push(() => feed.stop());
  return { boss, feed, retry };
}

/**
 * The links the process hands out (signal deliveries, artifact downloads), on the public origin:
 * PUBLIC_URL, else the endpoint's own once it listens (a worker-only process has none: set PUBLIC_URL).
 */
function publicLinks({ config, log, role }: ProcessOptions) {
  let origin = publicOrigin(config);
  if (role === 'worker' && config.PUBLIC_URL === undefined) {
    log.warn(
      'PUBLIC_URL is not set: the signal and artifact download links this worker writes name ' + origin,
    );
  }
  return {
    signalUrl: (token: string) => `${origin}${signalPath(token)}`,
    artifactUrl: (taskId: string, name: string) => `${origin}${artifactPath(MCP_PATH, taskId, name)}`,
    /** The endpoint listens at `url` (its port may have been 0): links name it, unless PUBLIC_URL does. */
    listeningAt(url: string) {
      if (config.PUBLIC_URL === undefined) origin = new URL(url).origin;
    },
  };
}

/** The task service: its eager starts use this process's workers (WORKER_EAGER_START), its quotas the settings. */
function taskService(db: Db, queue: BossTaskQueue, workers: WorkerPool | undefined, config: Config) {
  return new TaskService({
    db,
    queue,
    startHere: config.WORKER_EAGER_START ? (rank) => workers?.startHere(rank) : undefined,
    quotas: {
      maxActiveTasks: config.MAX_ACTIVE_TASKS_PER_PRINCIPAL,
      ratePerSecond: config.TASK_CREATE_RATE_PER_SECOND,
      burst: config.TASK_CREATE_BURST,
    },
  });
}

/** The sync-call threads, then the MCP endpoint (its stop, which lets requests in flight finish, runs first). */
async function startEndpoint(
  parts: Omit<McpEndpointParts, 'requestStateSecret' | 'listen' | 'syncCalls'>,
  opts: ProcessOptions,
  retry: StartupRetry,
  cleanups: CleanupStack,
): Promise<McpEndpoint> {
  const syncCalls = await startThreads(opts);
  if (syncCalls !== undefined) cleanups.push(() => syncCalls.stop());
  const requestStateSecret =
    opts.config.REQUEST_STATE_SECRET ??
    (await retry('shared secret', () => sharedSecret(parts.conn.db, 'request-state')));
  return serveMcp(
    {
      ...parts,
      resources: opts.resources,
      resourceTemplates: opts.resourceTemplates,
      prompts: opts.prompts,
      syncCalls,
      requestStateSecret,
      serverVersion: opts.serverVersion,
      listen: opts.listen ?? true,
    },
    cleanups,
  );
}

/** The sync-call threads, when the tools come from a module and SYNC_CALL_THREADS is not 0. */
async function startThreads({
  config,
  log,
  toolsModule,
}: ProcessOptions): Promise<SyncCallThreads | undefined> {
  const threads = config.SYNC_CALL_THREADS === 'auto' ? availableParallelism() : config.SYNC_CALL_THREADS;
  if (toolsModule === undefined || threads === 0) return undefined;
  return startSyncCallThreads({
    moduleUrl: toolsModule,
    threads,
    loopBudgetUs: config.SYNC_CALL_LOOP_BUDGET_US,
    log,
  });
}

/** Migrates at start (MIGRATE_ON_START), or checks that someone did. */
async function ensureSchema(
  conn: DatabaseConnection,
  config: Config,
  log: Logger,
  retry: StartupRetry,
  deadline: number,
): Promise<void> {
  if (!config.MIGRATE_ON_START) return retry('schema check', () => assertMigrated(conn.db));
  await retry('migrate', () =>
    migrateDatabase({ connectionString: conn.directUrl, log, startupTimeoutMs: deadline - Date.now() }),
  );
}

/** The worker pool with the process's settings, and the revisions' maintenance beside its sweep. */
function startWorkers(
  db: Db,
  parts: Pick<
    WorkerPoolOptions,
    'boss' | 'queue' | 'feed' | 'tools' | 'events' | 'metrics' | 'signalUrl' | 'artifactUrl'
  >,
  { config, log }: ProcessOptions,
): Promise<WorkerPool> {
  return startWorkerPool({
    db,
    ...parts,
    log,
    concurrency: config.WORKER_CONCURRENCY,
    ...(config.WORKER_RESERVED_SLOTS >= 0 && { reservedSlots: config.WORKER_RESERVED_SLOTS }),
    pollIntervalMs: config.WORKER_POLL_INTERVAL_MS,
    leaseMs: config.LEASE_MS,
    cancelCheckIntervalMs: config.CANCEL_CHECK_INTERVAL_MS,
    cancelGraceMs: config.CANCEL_GRACE_MS,
    statusThrottleMs: config.STATUS_THROTTLE_MS,
    retryLimit: config.TASK_RETRY_LIMIT,
    retryDelaySeconds: config.TASK_RETRY_DELAY_SECONDS,
    maxResultBytes: config.MAX_RESULT_BYTES,
    maxStepBytes: config.MAX_STEP_BYTES,
    maxArtifactBytes: config.MAX_ARTIFACT_BYTES,
    maxStepsPerTask: config.MAX_STEPS_PER_TASK,
    childLimits: { maxDepth: config.MAX_CHILD_DEPTH, maxPerTask: config.MAX_CHILDREN_PER_TASK },
    taskDefaults: { ttlMs: config.TASK_TTL_MS, pollIntervalMs: config.TASK_POLL_INTERVAL_MS },
    maxArgumentsBytes: config.MAX_ARGUMENTS_BYTES,
    eventLimits: {
      maxEventBytes: config.MAX_EVENT_BYTES,
      maxEventsPerTask: config.MAX_EVENTS_PER_TASK,
      maxEventBytesPerTask: config.MAX_EVENT_BYTES_PER_TASK,
    },
    eventRetentionMs: config.TASK_EVENT_RETENTION_MS,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    sweepIntervalMs: config.SWEEP_INTERVAL_MS,
    sweepBatchSize: config.SWEEP_BATCH_SIZE,
    purgeGraceMs: config.TASK_PURGE_GRACE_MS,
    maintenance: revisionMaintenance(db, config),
  });
}
