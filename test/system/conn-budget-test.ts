/**
 * The connection-budget test (`npm run test:conn-budget`, run by .ci/run). N = 2 HTTP instances and
 * M = 2 workers behind nginx, on a private Postgres, as a runtime role that owns nothing (the owner
 * migrated and granted it).
 *
 * 1. Under load, the processes never hold more than (N + M) × (DB_POOL_MAX + QUEUE_POOL_MAX + 1)
 *    connections: each its Kysely pool, pg-boss's pool and one LISTEN connection.
 * 2. max_connections reached (another client takes every free slot for a while) under load: no
 *    process exits, requests wait for the connections their pool holds, what clients see is at most
 *    JSON-RPC -32603 (retryable), never a dropped connection or a 5xx; every acknowledged task ends
 *    right, and afterwards every process serves.
 *
 * Prints the peak connections by kind and the client-visible errors; exits non-zero on any failure.
 *
 *   node --import tsx test/system/conn-budget-test.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createLogger } from '../../src/log.ts';
import { migrateDatabase } from '../../src/migrate.ts';
import { CHAOS_ENV, startCluster, timedLog } from '../helpers/system/cluster.ts';
import { checkAllServing } from '../helpers/system/probes.ts';
import { Workload } from '../helpers/system/workload.ts';

const DB_POOL_MAX = 4;
const QUEUE_POOL_MAX = 2;
const N = 2;
const M = 2;
const BUDGET = (N + M) * (DB_POOL_MAX + QUEUE_POOL_MAX + 1);
// Superusers keep their 3 reserved slots (the test's own monitor); the runtime role gets the rest.
const MAX_CONNECTIONS = 60;
const HOG_MS = 8_000;
/** Slots the other client leaves to the runtime role, beyond what its processes hold at that moment. */
const LEAVE_FREE = 2;
const APP = 'mcp_app';
const PASSWORD = 'budget-test';

const log = timedLog();

let hogUrl = '';
const cluster = await startCluster({
  name: 'budget',
  instances: N,
  workers: M,
  pooler: 'none',
  // Superusers keep 3 reserved slots: the test's own monitor and checks.
  postgresSettings: { max_connections: String(MAX_CONNECTIONS), superuser_reserved_connections: '3' },
  env: {
    MIGRATE_ON_START: 'false',
    DB_POOL_MAX: String(DB_POOL_MAX),
    QUEUE_POOL_MAX: String(QUEUE_POOL_MAX),
    ...CHAOS_ENV,
    LEASE_MS: '3000',
    DB_CONNECT_TIMEOUT_MS: '2000',
  },
  // The owner migrates and grants; the processes run as a role that owns nothing.
  async prepare(database) {
    const admin = await database.connect();
    try {
      await admin.query(`create role ${APP} login password '${PASSWORD}' nosuperuser`);
      await admin.query(`create role other_app login password '${PASSWORD}' nosuperuser`);
    } finally {
      await admin.end();
    }
    await migrateDatabase({ connectionString: database.url, log: createLogger('warn'), appRole: APP });
    const as = (user: string) => Object.assign(new URL(database.url), { username: user, password: PASSWORD });
    hogUrl = as('other_app').toString();
    return { DATABASE_URL: as(APP).toString() };
  },
});
const dbUrl = cluster.database.url;
log(
  `nginx → ${N} HTTP instances, ${M} workers as role ${APP}; DB_POOL_MAX=${DB_POOL_MAX}, ` +
    `QUEUE_POOL_MAX=${QUEUE_POOL_MAX}: budget ${BUDGET} connections`,
);

/** Samples the runtime role's connections every 20 ms; returns the peak and its make-up. */
function sampleConnections(): { stop(): Promise<{ peak: number; at: Record<string, number> }> } {
  let stopped = false;
  let peak = 0;
  let at: Record<string, number> = {};
  const done = (async () => {
    let monitor: pg.Client | undefined;
    while (!stopped) {
      try {
        if (monitor === undefined) {
          monitor = new pg.Client({ connectionString: dbUrl });
          monitor.on('error', () => {});
          await monitor.connect();
        }
        const { rows } = await monitor.query<{ app: string; n: number }>(
          `select application_name as app, count(*)::int as n from pg_stat_activity
            where usename = $1 group by 1`,
          [APP],
        );
        const total = rows.reduce((s, r) => s + r.n, 0);
        if (total > peak) {
          peak = total;
          at = Object.fromEntries(rows.map((r) => [r.app, r.n]));
        }
      } catch {
        await monitor?.end().catch(() => {});
        monitor = undefined; // Postgres restarting
      }
      await sleep(20);
    }
    await monitor?.end().catch(() => {});
  })();
  return {
    stop: async () => {
      stopped = true;
      await done;
      return { peak, at };
    },
  };
}

/** Opens connections as another role until Postgres refuses one (53300): max_connections is reached. */
async function takeEveryFreeSlot(): Promise<pg.Client[]> {
  const clients: pg.Client[] = [];
  for (;;) {
    if (clients.length > MAX_CONNECTIONS) throw new Error(`Postgres took ${clients.length} connections`);
    const c = new pg.Client({ connectionString: hogUrl });
    c.on('error', () => {});
    try {
      await c.connect();
      clients.push(c);
    } catch (err) {
      if ((err as { code?: string }).code !== '53300') throw err;
      return clients;
    }
  }
}

/** Tasks in a terminal state, read on a connection opened before the slots ran out. */
async function terminalTasks(c: pg.Client): Promise<number> {
  const { rows } = await c.query<{ n: number }>(
    `select count(*)::int as n from tasks where status in ('completed', 'failed', 'cancelled')`,
  );
  return rows[0]!.n;
}

let failures = 0;
const workloads: Workload[] = [];
try {
  // ---------- 1. the budget holds under load ----------
  const sampler = sampleConnections();
  const busy = new Workload({
    url: cluster.url,
    httpPorts: cluster.ports,
    counts: { analyze: 120, confirm: 40, cancel: 30, fail: 10 },
    chunkDelayMs: 30,
  });
  workloads.push(busy);
  await busy.run(60);
  const { peak, at } = await sampler.stop();
  log(
    `peak connections of the runtime role under load: ${peak} of a budget of ${BUDGET} ${JSON.stringify(at)}`,
  );
  if (peak > BUDGET) {
    log(`OVER BUDGET: ${peak} > ${BUDGET}`);
    failures++;
  }
  failures += await busy.check(dbUrl, log);

  // ---------- 2. max_connections reached ----------
  // Another client takes all but a few connection slots while tasks run, holds them, then lets go.
  const scarce = new Workload({
    url: cluster.url,
    httpPorts: cluster.ports,
    counts: { analyze: 120, confirm: 40, cancel: 30, fail: 10 },
    chunkDelayMs: 30,
  });
  workloads.push(scarce);
  // Restarted, so that every pool starts empty and must open connections while slots are scarce.
  await cluster.database.restart('fast');
  const observer = new pg.Client({ connectionString: dbUrl });
  await observer.connect();
  const hog = await takeEveryFreeSlot();
  await Promise.all(hog.splice(0, LEAVE_FREE).map((c) => c.end()));
  const from = Date.now();
  const doneBefore = await terminalTasks(observer);
  log(
    `Postgres restarted; another client holds ${hog.length} slots, ${LEAVE_FREE} stay free for ` +
      `${N + M} processes whose budget is ${BUDGET}; the workload starts`,
  );
  const running = scarce.run(60);
  // How long slots stay scarce is the test's setting: the workload must get through it.
  await sleep(HOG_MS);
  const doneDuring = (await terminalTasks(observer)) - doneBefore;
  await observer.end();
  await Promise.all(hog.map((c) => c.end().catch(() => {})));
  const until = Date.now();
  log(`slots released after ${until - from} ms; tasks that ended meanwhile: ${doneDuring}`);
  await running;
  failures += await scarce.check(dbUrl, log);
  log(`client-visible errors while no slot was free: ${scarce.errorsBetween(from, until)}`);
  log(`client-visible errors in the whole phase: ${scarce.errorsBetween(0, Date.now())}`);
  const notRetryable = scarce.clientErrors.filter((e) => !e.what.includes('-32603'));
  if (notRetryable.length > 0) {
    log(`errors other than -32603: ${notRetryable.length}, e.g. ${notRetryable[0]!.what}`);
    failures++;
  }
  failures += await checkAllServing(cluster, scarce, log);
  log(`processes that exited by themselves: ${cluster.unexpectedExits.length}`);
  failures += cluster.unexpectedExits.length;
  const passed = workloads.reduce((n, w) => n + w.outcomes.filter((o) => o.ok).length, 0);
  console.log(`${passed} passed, ${failures} failed`);
} finally {
  await cluster.stop();
}
process.exit(failures === 0 ? 0 : 1);
