import { migrateDatabase } from '../migrate.ts';
import { coerceError, createLogger } from '../log.ts';
import { createServer, fromEnv, type ServerRole, type Settings } from '../server.ts';
import { SHIPPED_TOOLS, SHIPPED_TOOLS_MODULE } from '../tools/shipped/index.ts';
import { loadToolsModule, type ToolsModule } from './load-tools.ts';
import { startTracingFromEnv } from '../tracing-sdk.ts';
import { PACKAGE_VERSION } from '../version.ts';

export interface ServeOptions {
  tools?: string;
  port?: number;
  host?: string;
}

/** The settings of a serving command: the environment, then the command line's flags over it. */
export function settingsFor(opts: ServeOptions, env: NodeJS.ProcessEnv = process.env): Settings {
  const settings = fromEnv(env);
  return {
    ...settings,
    ...(opts.port !== undefined && { PORT: opts.port }),
    ...(opts.host !== undefined && { HOST: opts.host }),
  };
}

/** The tools, and the module they come from (which the sync-call threads load). */
async function toolsFor(opts: ServeOptions): Promise<ToolsModule & { toolsModule: string }> {
  if (opts.tools === undefined) return { tools: SHIPPED_TOOLS, toolsModule: SHIPPED_TOOLS_MODULE };
  return { ...(await loadToolsModule(opts.tools)), toolsModule: opts.tools };
}

/**
 * `start`, `server`, `worker`: runs until SIGINT or SIGTERM, then drains (SHUTDOWN_GRACE_MS) and exits 0;
 * a second SIGINT (Ctrl-C) exits at once.
 */
export async function serve(role: ServerRole, opts: ServeOptions): Promise<void> {
  const settings = settingsFor(opts);
  const log = createLogger(settings.LOG_LEVEL, {}, { format: settings.LOG_FORMAT });
  const tracing = await startTracingFromEnv(process.env, log, {
    serviceName: 'durable-mcp-tasks',
    serviceVersion: PACKAGE_VERSION,
    role,
  });
  const mod = await toolsFor(opts);
  const server = createServer({ ...mod, role, settings, logger: log });
  await server.start();

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      // A second Ctrl-C is a person in a hurry; a repeated SIGTERM (e.g. from a supervisor) is not.
      if (signal !== 'SIGINT') return;
      log.warn('second Ctrl-C: exiting without draining', { signal });
      process.exit(1);
    }
    stopping = true;
    log.info('shutting down', { signal });
    server
      .stop()
      .then(() => tracing?.shutdown())
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        log.error('shutdown failed', { error: coerceError(err).message });
        process.exit(1);
      });
  };
  // Operators' memory probe: SIGUSR2 logs memory use (after a full GC when node runs with --expose-gc).
  process.on('SIGUSR2', () => {
    (globalThis as { gc?: () => void }).gc?.();
    const m = process.memoryUsage();
    log.warn('memory', { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external });
  });
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
  if (process.env.npm_command !== undefined) stopWithParent(() => shutdown('SIGTERM'));
}

/**
 * Under npm (`npx durable-mcp-tasks`, an npm script without `exec`), a SIGTERM to npm reaches the shell
 * between npm and this process, which dies without passing it on: this process is left running,
 * re-parented. When the parent goes away, shut down as if signalled.
 */
function stopWithParent(stop: () => void): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, 500);
  timer.unref();
}

/** `migrate`: our schema and pg-boss's, as the owner role, on a direct connection; grants DB_APP_ROLE when set. */
export async function migrate(): Promise<void> {
  const settings = fromEnv();
  const log = createLogger(settings.LOG_LEVEL, {}, { format: settings.LOG_FORMAT });
  const connectionString = settings.DATABASE_DIRECT_URL ?? settings.DATABASE_URL;
  if (connectionString === undefined) {
    throw new Error('migrate needs DATABASE_URL (`start` migrates its embedded Postgres by itself)');
  }
  await migrateDatabase({
    connectionString,
    log,
    appRole: settings.DB_APP_ROLE,
    startupTimeoutMs: settings.DB_STARTUP_TIMEOUT_MS,
  });
  log.info('migrated', { grantedTo: settings.DB_APP_ROLE });
}
