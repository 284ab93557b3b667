/**
 * The cluster test (`npm run test:cluster`, run by .ci/run): real nginx round-robin in front of two HTTP
 * instances, two worker processes, one private Postgres; a few hundred tasks of the shipped tools driven
 * through nginx by independent clients (ext-tasks' withTasks, and raw HTTP), including input answered
 * through a different instance than the one that created the task, and cancels. Meanwhile one worker is
 * SIGKILLed, one HTTP instance restarted, and Postgres itself restarted twice (`-m fast`, then
 * `-m immediate`). Every acknowledged task must end in the right state with the right result; none lost,
 * none run to completion twice; no process may exit by itself, and every one must serve afterwards.
 * Prints numbers (client-visible errors per outage, time from Postgres back up to the first successful
 * `tasks/get`); exits non-zero on any mismatch.
 *
 *   node --import tsx scripts/cluster-test.ts
 *   CLUSTER_POOLER=pgbouncer node --import tsx scripts/cluster-test.ts   (through a real PgBouncer)
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startEmbeddedPostgres, type RunningPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/log.ts';
import { freePort } from '../test/helpers/ports.ts';
import { clusterDatabase } from './cluster/database.ts';
import { startNginx } from './cluster/nginx.ts';
import { checkAllServing, firstSuccessfulGet } from './cluster/probes.ts';
import { Processes, waitHttp, type ClusterProcess } from './cluster/processes.ts';
import { Workload } from './cluster/workload.ts';

const t0 = Date.now();
const log = (msg: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}`);

// ---------- infrastructure ----------
// A Postgres of this test's own, so that it can be restarted under load.
const pgDir = mkdtempSync(path.join(tmpdir(), 'mcp-cluster-pg-'));
chmodSync(pgDir, 0o755);
const pgOptions = {
  dataDir: path.join(pgDir, 'data'),
  port: await freePort(),
  database: 'cluster',
  log: createLogger('warn'),
};
let postgres: RunningPostgres = await startEmbeddedPostgres(pgOptions);
const dbUrl = postgres.connectionString;
const database = await clusterDatabase(dbUrl);

const procs = new Processes({
  ...database.env,
  LOG_LEVEL: 'warn',
  TASK_POLL_INTERVAL_MS: '50',
  LEASE_MS: '2000',
  SWEEP_INTERVAL_MS: '500',
  WORKER_CONCURRENCY: '16',
  SHUTDOWN_GRACE_MS: '3000',
  DB_CONNECT_TIMEOUT_MS: '1000',
});
const httpPorts = [await freePort(), await freePort()];
const startHttp = (i: number) =>
  procs.start(`http-${i + 1}`, ['src/main.ts', '--role=server'], { PORT: String(httpPorts[i]) });
const http: ClusterProcess[] = [startHttp(0)];
await waitHttp(httpPorts[0]!); // the first instance migrates; then the rest start
http.push(startHttp(1));
const workers = [procs.start('worker-1', ['workers/main.ts']), procs.start('worker-2', ['workers/main.ts'])];
await waitHttp(httpPorts[1]!);
const nginx = await startNginx(httpPorts);
log(
  `nginx :${nginx.port} → http :${httpPorts.join(', :')}; 2 workers; private Postgres :${pgOptions.port}, ${database.describe}`,
);

const workload = new Workload({
  url: nginx.url,
  httpPorts,
  counts: { analyze: 150, confirm: 60, cancel: 40, fail: 20 },
});

// ---------- chaos ----------
let workloadDone = false;
const outages: Array<{ mode: string; down: number; up: number; recovered: number[]; underLoad: boolean }> =
  [];
async function restartPostgres(mode: 'fast' | 'immediate'): Promise<void> {
  const probeTask = [...workload.acknowledged][0];
  const underLoad = !workloadDone;
  log(`Postgres restart -m ${mode}`);
  const down = Date.now();
  await postgres.stop({ mode });
  postgres = await startEmbeddedPostgres(pgOptions);
  const up = Date.now();
  const recovered =
    probeTask === undefined ? [] : await Promise.all(httpPorts.map((p) => firstSuccessfulGet(p, probeTask)));
  outages.push({ mode, down, up, recovered, underLoad });
  log(
    `Postgres back after ${up - down} ms; first tasks/get per instance ${recovered.map((r) => `${r - up} ms`).join(', ')} later`,
  );
}

let chaosFailures = 0;
const chaos = (async () => {
  await sleep(1_500);
  log('SIGKILL worker-1');
  workers[0]!.expectExit();
  workers[0]!.child.kill('SIGKILL');
  await sleep(2_500);
  log('restarting http-1 (SIGTERM, then start again)');
  http[0]!.expectExit();
  http[0]!.child.kill('SIGTERM');
  await http[0]!.exited;
  http[0] = startHttp(0);
  await waitHttp(httpPorts[0]!);
  log('http-1 is back; starting a replacement worker');
  workers[0] = procs.start('worker-3', ['workers/main.ts']);
  await sleep(1_500);
  await restartPostgres('fast');
  await sleep(3_000);
  await restartPostgres('immediate');
})().catch((err: unknown) => {
  log(`CHAOS STEP FAILED: ${String(err)}`);
  chaosFailures++;
});

let exitCode = 1;
try {
  log(`driving ${workload.total} tasks through nginx, 40 at a time`);
  await workload.run(40);
  workloadDone = true;
  await chaos;
  // ---------- checks ----------
  let failures = chaosFailures + (await workload.check(dbUrl, log));
  for (const o of outages) {
    log(
      `outage -m ${o.mode}: ${o.up - o.down} ms down; client-visible errors until every instance answered again: ` +
        `${workload.errorsBetween(o.down, Math.max(...o.recovered, o.up))}`,
    );
    if (!o.underLoad) {
      log(`  the -m ${o.mode} restart happened after the workload had ended: not under load`);
      failures++;
    }
  }
  log(`client-visible errors in the whole run: ${workload.errorsBetween(0, Date.now())}`);
  failures += await checkAllServing({
    workload,
    dbUrl,
    http: http.map((proc, i) => ({ proc, port: httpPorts[i]! })),
    workers,
    log,
  });
  log(`processes that exited by themselves: ${procs.unexpectedExits.length}`);
  failures += procs.unexpectedExits.length;
  console.log(`${workload.outcomes.filter((o) => o.ok).length} passed, ${failures} failed`);
  exitCode = failures === 0 ? 0 : 1;
} finally {
  await procs.stopAll();
  await nginx.stop();
  await database.stop();
  await postgres.stop();
  rmSync(pgDir, { recursive: true, force: true });
}
process.exit(exitCode);
