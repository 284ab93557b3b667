import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startRuntime, type Role, type Runtime } from '../../src/runtime.ts';
import type { ToolDefinition } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';

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
};

/** A real process runtime (HTTP on a real socket, pg-boss, workers) against a test database. */
export async function startTestRuntime(opts: TestRuntimeOptions): Promise<Runtime & { url: string }> {
  const config = loadConfig({ ...FAST_ENV, ...opts.env, DATABASE_URL: opts.databaseUrl });
  const runtime = await startRuntime({
    config,
    log: createLogger(config.LOG_LEVEL),
    role: opts.role ?? 'all',
    tools: opts.tools ?? SHIPPED_TOOLS,
    listen: (opts.role ?? 'all') !== 'worker',
  });
  return { ...runtime, url: runtime.url ?? '' };
}
