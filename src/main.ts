import { readFileSync } from 'node:fs';
import { loadConfig } from './config.ts';
import { coerceError, createLogger } from './log.ts';
import { startRuntime, type Role } from './runtime.ts';
import { SHIPPED_TOOLS } from './tools/shipped/index.ts';

const PKG = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

/** Process entry: `npm start` (HTTP + workers), `npm run server` (HTTP only). */
export async function main(defaultRole: Role = 'all'): Promise<void> {
  const roleArg = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
  const role = (roleArg ?? defaultRole) as Role;
  if (!['all', 'server', 'worker'].includes(role)) throw new Error(`Unknown role: ${role}`);
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
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

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    process.stderr.write(`fatal: ${coerceError(err).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
