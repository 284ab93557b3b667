import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startProcess, type Role, type ServerProcess } from '../../src/process/start.ts';
import type { ScheduleDefinition } from '../../src/launch/schedules/define.ts';
import type { ResourceDefinition } from '../../src/resources/define.ts';
import type { ToolDefinition } from '../../src/tools/define.ts';
import type { TriggerDefinition } from '../../src/launch/triggers/define.ts';
import { SHIPPED_TOOLS, SHIPPED_TOOLS_MODULE } from '../../src/tools/shipped/index.ts';
import { databaseEnv } from './database-env.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { RawMcp } from './mcp.ts';

export interface TestProcessOptions {
  databaseUrl: string;
  role?: Role;
  tools?: readonly ToolDefinition[];
  /** Resources to serve (default none: the server then has no resources methods). */
  resources?: readonly ResourceDefinition[];
  /** Webhook triggers (`POST /triggers/{name}`), of `tools`. */
  triggers?: readonly TriggerDefinition[];
  env?: Record<string, string>;
  /** Tools called on a clock (defineSchedule). */
  schedules?: readonly ScheduleDefinition[];
  /** The module sync-call threads load (default: the shipped tools' when `tools` is unset, else none). */
  toolsModule?: string;
}

/** Settings that keep tests quick: short polls, no timer-driven sweeps (tests sweep explicitly). */
export const FAST_ENV: Record<string, string> = {
  HOST: '127.0.0.1',
  PORT: '0',
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
  TASK_POLL_INTERVAL_MS: '20',
  WORKER_POLL_INTERVAL_MS: '1000',
  CANCEL_CHECK_INTERVAL_MS: '1000',
  STATUS_THROTTLE_MS: '0',
  SWEEP_INTERVAL_MS: '3600000',
  TASK_RETRY_DELAY_SECONDS: '0',
  WORKER_CONCURRENCY: '4',
  SHUTDOWN_GRACE_MS: '2000',
  // Store gauges read fresh on every scrape.
  METRICS_STORE_CACHE_MS: '0',
};

/** A real process runtime (HTTP on a real socket, pg-boss, workers) against a test database. */
export async function startTestProcess(opts: TestProcessOptions): Promise<ServerProcess & { url: string }> {
  const config = loadConfig({ ...FAST_ENV, ...opts.env, ...databaseEnv(opts.databaseUrl) });
  const runtime = await startProcess({
    config,
    log: createLogger(config.LOG_LEVEL),
    role: opts.role ?? 'all',
    tools: opts.tools ?? SHIPPED_TOOLS,
    // As the CLI serves them: the shipped tools' synchronous calls run on sync-call threads.
    toolsModule: opts.toolsModule ?? (opts.tools === undefined ? SHIPPED_TOOLS_MODULE : undefined),
    ...(opts.resources !== undefined && { resources: opts.resources }),
    ...(opts.schedules !== undefined && { schedules: opts.schedules }),
    ...(opts.triggers !== undefined && { triggers: opts.triggers }),
    listen: (opts.role ?? 'all') !== 'worker',
  });
  return { ...runtime, url: runtime.url ?? '' };
}

export interface TestServer {
  /** The file's own database (cloned from the migrated template). */
  readonly tdb: TestDatabase;
  readonly rt: ServerProcess & { url: string };
  /** A raw client with the tasks extension and form elicitation declared. */
  readonly mcp: RawMcp;
}

/**
 * The usual test-file setup: a fresh database and a runtime (HTTP + workers) on it for the whole file,
 * torn down after it. Properties are readable once the file's tests run.
 */
export function useTestServer(opts: Omit<TestProcessOptions, 'databaseUrl'> = {}): TestServer {
  let tdb: TestDatabase | undefined;
  let rt: (ServerProcess & { url: string }) | undefined;
  let mcp: RawMcp | undefined;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = await startTestProcess({ ...opts, databaseUrl: tdb.url });
    mcp = new RawMcp(rt.url);
  });
  afterAll(async () => {
    await rt?.stop();
    await tdb?.drop();
  });
  const ready = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the test server is not started yet');
    return v;
  };
  return {
    get tdb() {
      return ready(tdb);
    },
    get rt() {
      return ready(rt);
    },
    get mcp() {
      return ready(mcp);
    },
  };
}

/** A test file's own database and the processes its tests start and stop on it. */
export interface TestProcesses {
  /** The file's database (cloned from the migrated template). */
  readonly tdb: TestDatabase;
  /** Starts a process on the file's database: `defaults` under `opts` (their `env`s merged). */
  readonly start: (
    opts?: Omit<TestProcessOptions, 'databaseUrl'>,
  ) => Promise<ServerProcess & { url: string }>;
  /** Stops a process `start` made (the rest are stopped, the last started first, after the file). */
  readonly stop: (rt: ServerProcess) => Promise<void>;
}

/**
 * For files whose tests each start their own processes (a server and workers, with settings of their
 * own) on one database for the file: the database is made before the file's tests, and whatever is still
 * running is stopped, and the database dropped, after them.
 */
export function useTestProcesses(defaults: Omit<TestProcessOptions, 'databaseUrl'> = {}): TestProcesses {
  let tdb: TestDatabase | undefined;
  const started: ServerProcess[] = [];
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    for (const rt of started.reverse()) await rt.stop();
    await tdb?.drop();
  });
  return {
    get tdb() {
      return tdb!;
    },
    start: async (opts = {}) => {
      const env = { ...defaults.env, ...opts.env };
      const rt = await startTestProcess({ ...defaults, ...opts, env, databaseUrl: tdb!.url });
      started.push(rt);
      return rt;
    },
    stop: async (rt) => {
      started.splice(started.indexOf(rt), 1);
      await rt.stop();
    },
  };
}
