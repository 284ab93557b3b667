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
 *   node --import tsx test/system/cluster-test.ts
 *   CLUSTER_POOLER=pgbouncer node --import tsx test/system/cluster-test.ts   (through a real PgBouncer)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CHAOS_ENV, startCluster, timedLog } from '../helpers/system/cluster.ts';
import { checkAllServing, firstSuccessfulGet } from '../helpers/system/probes.ts';
import { Workload } from '../helpers/system/workload.ts';

const log = timedLog();

// A Postgres of this test's own, so that it can be restarted under load; PgBouncer if CLUSTER_POOLER says so.
const cluster = await startCluster({
  name: 'cluster',
  env: CHAOS_ENV,
});
const { http, workers, ports } = cluster;
log(`nginx ${cluster.url} → http :${ports.join(', :')}; 2 workers; ${cluster.database.describe}`);

const workload = new Workload({
  url: cluster.url,
  httpPorts: ports,
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
  await cluster.database.restart(mode);
  const up = Date.now();
  const recovered =
    probeTask === undefined ? [] : await Promise.all(ports.map((p) => firstSuccessfulGet(p, probeTask)));
  outages.push({ mode, down, up, recovered, underLoad });
  log(
    `Postgres back after ${up - down} ms; first tasks/get per instance ${recovered.map((r) => `${r - up} ms`).join(', ')} later`,
  );
}

// The pauses between the steps are the schedule of the chaos, not waits for a condition: each step
// lands at some point of the running workload (checked below: the restarts happened under load).
let chaosFailures = 0;
const chaos = (async () => {
  await sleep(1_500);
  log('SIGKILL worker-1');
  await workers[0]!.kill('SIGKILL');
  await sleep(2_500);
  log('restarting http-1 (SIGTERM, then start again)');
  await http[0]!.restart();
  log('http-1 is back; starting worker-1 again');
  await workers[0]!.restart();
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
  let failures = chaosFailures + (await workload.check(cluster.database.url, log));
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
  failures += await checkAllServing(cluster, workload, log);
  log(`processes that exited by themselves: ${cluster.unexpectedExits.length}`);
  failures += cluster.unexpectedExits.length;
  console.log(`${workload.outcomes.filter((o) => o.ok).length} passed, ${failures} failed`);
  exitCode = failures === 0 ? 0 : 1;
} finally {
  await cluster.stop();
}
process.exit(exitCode);
