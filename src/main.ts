import './node-version.ts';
import { readFileSync } from 'node:fs';
import { loadConfig, type Config } from './config.ts';
import { coerceError, createLogger, type Logger } from './log.ts';
import { migrateDatabase } from './migrate.ts';
import { startRuntime, type Role } from './runtime.ts';
import { SHIPPED_TOOLS } from './tools/shipped/index.ts';

const PKG = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

/**
 * Process entry: `npm start` (HTTP + workers), `npm run server` (HTTP only), `npm run migrate` (the
 * schema, then exit).
 */
export async function main(defaultRole: Role | 'migrate' = 'all'): Promise<void> {
  const roleArg = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
  const role = roleArg ?? defaultRole;
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
  if (role === 'migrate') return migrate(config, log);
  if (role !== 'all' && role !== 'server' && role !== 'worker') throw new Error(`Unknown role: ${role}`);
  const runtime = await startRuntime({ config, log, role, tools: SHIPPED_TOOLS, serverVersion: PKG.version });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    runtime
      .stop()
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
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/** `npm run migrate`: as the owner role, on a direct connection; grants DB_APP_ROLE when set. */
async function migrate(config: Config, log: Logger): Promise<void> {
  const connectionString = config.DATABASE_DIRECT_URL ?? config.DATABASE_URL;
  if (connectionString === undefined) {
    throw new Error('migrate needs DATABASE_URL (npm start migrates its embedded Postgres by itself)');
  }
  await migrateDatabase({
    connectionString,
    log,
    appRole: config.DB_APP_ROLE,
    startupTimeoutMs: config.DB_STARTUP_TIMEOUT_MS,
  });
  log.info('migrated', { grantedTo: config.DB_APP_ROLE });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    process.stderr.write(`fatal: ${coerceError(err).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
