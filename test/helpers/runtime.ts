import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startRuntime, type Role, type Runtime } from '../../src/runtime.ts';
import type { ToolDefinition } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { databaseEnv } from './database-env.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { RawMcp } from './mcp.ts';

export interface TestRuntimeOptions {
  databaseUrl: string;
  role?: Role;
  tools?: readonly ToolDefinition[];
  env?: Record<string, string>;
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
export async function startTestRuntime(opts: TestRuntimeOptions): Promise<Runtime & { url: string }> {
  const config = loadConfig({ ...FAST_ENV, ...opts.env, ...databaseEnv(opts.databaseUrl) });
  const runtime = await startRuntime({
    config,
    log: createLogger(config.LOG_LEVEL),
    role: opts.role ?? 'all',
    tools: opts.tools ?? SHIPPED_TOOLS,
    listen: (opts.role ?? 'all') !== 'worker',
  });
  return { ...runtime, url: runtime.url ?? '' };
}

export interface TestServer {
  /** The file's own database (cloned from the migrated template). */
  readonly tdb: TestDatabase;
  readonly rt: Runtime & { url: string };
  /** A raw client with the tasks extension and form elicitation declared. */
  readonly mcp: RawMcp;
}

/**
 * The usual test-file setup: a fresh database and a runtime (HTTP + workers) on it for the whole file,
 * torn down after it. Properties are readable once the file's tests run.
 */
export function useTestServer(opts: Omit<TestRuntimeOptions, 'databaseUrl'> = {}): TestServer {
  let tdb: TestDatabase | undefined;
  let rt: (Runtime & { url: string }) | undefined;
  let mcp: RawMcp | undefined;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = await startTestRuntime({ ...opts, databaseUrl: tdb.url });
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
