/**
 * The official conformance suite against two instances behind a real nginx, round-robin, no
 * stickiness (`npm run conformance:cluster`, run by .ci/run): at 2025-11-25 every request of a session
 * (its GET stream, the client's answers to the server's elicitation and sampling requests, the resumed
 * stream of `test_reconnection`, the DELETE) may land on the other instance. Both instances and their
 * workers share one database; nothing is sticky. Prints how many requests each instance served.
 *
 *   node --import tsx scripts/conformance-cluster.ts
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/log.ts';
import { startRuntime, type Runtime } from '../src/runtime.ts';
import { CONFORMANCE_FIXTURE } from '../test/conformance/fixture.ts';
import { freePort } from '../test/helpers/ports.ts';
import { startNginx } from './cluster/nginx.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const pgDir = mkdtempSync(path.join(tmpdir(), 'mcp-conformance-cluster-'));
chmodSync(pgDir, 0o755);
const postgres = await startEmbeddedPostgres({
  dataDir: path.join(pgDir, 'data'),
  port: await freePort(),
  database: 'conformance',
  log: createLogger('warn'),
});

const runtimes: Runtime[] = [];
const served: number[] = [];
let code = 1;
try {
  for (let i = 0; i < 2; i++) {
    const config = loadConfig({
      ...process.env,
      DATABASE_URL: postgres.connectionString,
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
    });
    const runtime = await startRuntime({
      config,
      log: createLogger('warn'),
      role: 'all',
      ...CONFORMANCE_FIXTURE,
    });
    runtimes.push(runtime);
    served.push(0);
    runtime.server?.on('request', () => served[i]!++);
  }
  const ports = runtimes.map((r) => Number(new URL(r.url!).port));
  const nginx = await startNginx(ports);
  try {
    const url = nginx.url.replace('127.0.0.1', 'localhost');
    console.log(`nginx ${url} → instances :${ports.join(', :')} (round-robin, no stickiness)`);
    code = await new Promise<number>((resolve) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', path.join(ROOT, 'test/conformance/run.ts'), '--url', url],
        { stdio: 'inherit', cwd: ROOT },
      );
      child.once('exit', (c) => resolve(c ?? 1));
    });
    console.log(`requests served per instance: ${served.join(', ')}`);
    if (served.some((n) => n === 0)) {
      console.log('an instance served nothing: the balancer did not spread the sessions');
      code = 1;
    }
  } finally {
    await nginx.stop();
  }
} finally {
  for (const runtime of runtimes) await runtime.stop();
  await postgres.stop();
  rmSync(pgDir, { recursive: true, force: true });
}
process.exit(code);
