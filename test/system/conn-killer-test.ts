/**
 * The connection-killer test (`npm run test:conn-killer`, run by .ci/run): nginx in front of two HTTP
 * instances, two workers, one private Postgres; while tasks of every kind run through nginx,
 * `pg_terminate_backend` hits 200 random backends of the processes' connections, taking each kind in
 * turn: idle pool connections, connections checked out inside a transaction (between its statements),
 * active queries, the LISTEN connections and pg-boss's. No process may exit; no acknowledged task may be
 * lost or end wrong. Prints the kills by kind and the client-visible errors; exits non-zero on any
 * failure.
 *
 *   node --import tsx scripts/conn-killer-test.ts [kills]
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createLogger } from '../src/log.ts';
import { freePort } from '../test/helpers/ports.ts';
import { startNginx } from './cluster/nginx.ts';
import { checkAllServing } from './cluster/probes.ts';
import { Processes, waitHttp } from './cluster/processes.ts';
import { Workload } from './cluster/workload.ts';

const KILLS = Number(process.argv[2] ?? 200);
const DEADLINE = Date.now() + 5 * 60_000;
const t0 = Date.now();
const log = (msg: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}`);

const pgDir = mkdtempSync(path.join(tmpdir(), 'mcp-killer-pg-'));
chmodSync(pgDir, 0o755);
const postgres = await startEmbeddedPostgres({
  dataDir: path.join(pgDir, 'data'),
  port: await freePort(),
  database: 'killer',
  log: createLogger('warn'),
});
const dbUrl = postgres.connectionString;
const procs = new Processes({
  DATABASE_URL: dbUrl,
  LOG_LEVEL: 'warn',
  TASK_POLL_INTERVAL_MS: '50',
  LEASE_MS: '2000',
  SWEEP_INTERVAL_MS: '500',
  WORKER_CONCURRENCY: '16',
  SHUTDOWN_GRACE_MS: '3000',
  DB_CONNECT_TIMEOUT_MS: '1000',
});
const httpPorts = [await freePort(), await freePort()];
const http = [procs.start('http-1', ['src/main.ts', '--role=server'], { PORT: String(httpPorts[0]) })];
await waitHttp(httpPorts[0]!);
http.push(procs.start('http-2', ['src/main.ts', '--role=server'], { PORT: String(httpPorts[1]) }));
const workers = [procs.start('worker-1', ['workers/main.ts']), procs.start('worker-2', ['workers/main.ts'])];
await waitHttp(httpPorts[1]!);
const nginx = await startNginx(httpPorts);
log(`nginx :${nginx.port} → http :${httpPorts.join(', :')}; 2 workers; killing ${KILLS} backends`);

// ---------- the killer ----------
/** The kinds of connection, each a filter on pg_stat_activity, taken in turn. */
const KINDS: Record<string, string> = {
  'idle (pool)': `application_name in ('durable-mcp-tasks:server', 'durable-mcp-tasks:worker') and state = 'idle'`,
  'in a transaction': `application_name like 'durable-mcp-tasks:%' and state like 'idle in transaction%'`,
  'active query': `application_name in ('durable-mcp-tasks:server', 'durable-mcp-tasks:worker') and state = 'active'`,
  LISTEN: `application_name = 'durable-mcp-tasks:listen'`,
  'pg-boss': `application_name = 'durable-mcp-tasks:pg-boss'`,
};
const kills = new Map<string, number>(Object.keys(KINDS).map((k) => [k, 0]));
let total = 0;
const admin = new pg.Client({ connectionString: dbUrl });
admin.on('error', () => {});
await admin.connect();
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
      url: nginx.url,
      httpPorts,
      counts: { analyze: 60, confirm: 24, cancel: 16, fail: 8 },
      chunkDelayMs: 50,
    });
    workloads.push(workload);
    await workload.run(30);
    failures += await workload.check(dbUrl, log);
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
  failures += await checkAllServing({
    workload: workloads.at(-1)!,
    dbUrl,
    http: http.map((proc, i) => ({ proc, port: httpPorts[i]! })),
    workers,
    log,
  });
  log(`processes that exited by themselves: ${procs.unexpectedExits.length}`);
  failures += procs.unexpectedExits.length;
  const passed = workloads.reduce((n, w) => n + w.outcomes.filter((o) => o.ok).length, 0);
  console.log(`${passed} passed, ${failures} failed`);
} finally {
  stopKiller = true;
  await killer.catch(() => {});
  await admin.end().catch(() => {});
  await procs.stopAll();
  await nginx.stop();
  await postgres.stop();
  rmSync(pgDir, { recursive: true, force: true });
}
process.exit(failures === 0 ? 0 : 1);
