/**
 * The connection-killer test (`npm run test:conn-killer`, run by .ci/run): nginx in front of two HTTP
 * instances, two workers, one private Postgres; while tasks of every kind run through nginx,
 * `pg_terminate_backend` hits 200 random backends of the processes' connections, taking each kind in
 * turn: idle pool connections, connections checked out inside a transaction (between its statements),
 * active queries, the LISTEN connections and pg-boss's. No process may exit; no acknowledged task may be
 * lost or end wrong. Prints the kills by kind and the client-visible errors; exits non-zero on any
 * failure.
 *
 *   node --import tsx test/system/conn-killer-test.ts [kills]
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CHAOS_ENV, startCluster, timedLog } from '../helpers/system/cluster.ts';
import { checkAllServing } from '../helpers/system/probes.ts';
import { Workload } from '../helpers/system/workload.ts';

const KILLS = Number(process.argv[2] ?? 200);
const DEADLINE = Date.now() + 5 * 60_000;
const log = timedLog();

const cluster = await startCluster({
  name: 'killer',
  pooler: 'none',
  env: CHAOS_ENV,
});
log(`nginx ${cluster.url} → http :${cluster.ports.join(', :')}; 2 workers; killing ${KILLS} backends`);

// ---------- the killer ----------
/** The kinds of connection, each a filter on pg_stat_activity, taken in turn. */
const KINDS: Record<string, string> = {
  'idle (pool)': `application_name in ('durable-mcp-tasks:server', 'durable-mcp-tasks:worker') and state = 'idle'`,
  'in a transaction': `application_name like 'durable-mcp-tasks:%' and state like 'idle in transaction%'`,
  'active query': `application_name in ('durable-mcp-tasks:server', 'durable-mcp-tasks:worker') and state = 'active'`,
  // durable-mcp-tasks:listen:<role> (the role appended since 1e46b74).
  LISTEN: `application_name like 'durable-mcp-tasks:listen%'`,
  'pg-boss': `application_name = 'durable-mcp-tasks:pg-boss'`,
};
const kills = new Map<string, number>(Object.keys(KINDS).map((k) => [k, 0]));
let total = 0;
const admin = await cluster.database.connect();
let stopKiller = false;
const killer = (async () => {
  const kinds = Object.keys(KINDS);
  for (let i = 0; total < KILLS && !stopKiller && Date.now() < DEADLINE; i++) {
    const kind = kinds[i % kinds.length]!;
    // A transaction is open for a few milliseconds: look for one many times before moving on.
    for (let tries = 0; tries < (kind === 'in a transaction' ? 200 : 20); tries++) {
      const { rows } = await admin.query<{ pid: number }>(
        `select pg_terminate_backend(pid) as killed, pid from pg_stat_activity
          where pid = (select pid from pg_stat_activity
                        where datname = current_database() and pid <> pg_backend_pid() and ${KINDS[kind]}
                        order by random() limit 1)`,
      );
      if (rows.length > 0) {
        kills.set(kind, kills.get(kind)! + 1);
        total++;
        break;
      }
      await sleep(2);
    }
    // The pace of the killer: about 20 kills a second, spread over the workload's rounds.
    await sleep(40);
  }
})();

// ---------- workload rounds until the killer is done ----------
let failures = 0;
let rounds = 0;
const workloads: Workload[] = [];
try {
  do {
    const workload = new Workload({
      url: cluster.url,
      httpPorts: cluster.ports,
      counts: { analyze: 60, confirm: 24, cancel: 16, fail: 8 },
      chunkDelayMs: 50,
    });
    workloads.push(workload);
    await workload.run(30);
    failures += await workload.check(cluster.database.url, log);
    rounds++;
  } while (total < KILLS && Date.now() < DEADLINE);
  stopKiller = true;
  await killer;
  log(
    `backends terminated: ${total} (${[...kills].map(([k, n]) => `${k}: ${n}`).join(', ')}) over ${rounds} rounds`,
  );
  log(`client-visible errors: ${workloads.map((w) => w.errorsBetween(0, Date.now())).join('; ')}`);
  if (total < KILLS) {
    log(`only ${total} of ${KILLS} kills before the deadline`);
    failures++;
  }
  for (const [kind, n] of kills)
    if (n === 0) {
      log(`no backend of kind "${kind}" was ever terminated: the test did not cover it`);
      failures++;
    }
  failures += await checkAllServing(cluster, workloads.at(-1)!, log);
  log(`processes that exited by themselves: ${cluster.unexpectedExits.length}`);
  failures += cluster.unexpectedExits.length;
  const passed = workloads.reduce((n, w) => n + w.outcomes.filter((o) => o.ok).length, 0);
  console.log(`${passed} passed, ${failures} failed`);
} finally {
  stopKiller = true;
  await killer.catch(() => {});
  await admin.end().catch(() => {});
  await cluster.stop();
}
process.exit(failures === 0 ? 0 : 1);
