/**
 * What one durable one-step task costs Postgres (docs/scaling.md): WAL bytes, commits, statements and rows
 * written per task, for the create (a `server` alone) and for the run to completion (a `worker` draining
 * what was created), and the connections each process holds at its defaults. Run it on a Postgres of its
 * own (BENCH_ADMIN_URL), with `pg_stat_statements` preloaded: WAL and `pg_stat_statements` are counted
 * for the whole cluster, so anything else writing there would be counted too.
 *
 *   BENCH_ADMIN_URL=postgres://postgres@127.0.0.1:55432/postgres node --import tsx bench/wal-per-task.ts
 *
 * Settings: BENCH_WAL_TASKS (2000), BENCH_WAL_CLIENTS (16, requests in flight while creating).
 */
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { MCP_HEADERS, rpcBody, scratchDb, type Proc, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';

const TASKS = Number(process.env.BENCH_WAL_TASKS ?? 2000);
const CLIENTS = Number(process.env.BENCH_WAL_CLIENTS ?? 16);
/** Longer than an idle backend's stats flush (10 s in Postgres 15), so pg_stat_* have every commit. */
const SETTLE_MS = 12_000;

interface Snapshot {
  at: number;
  lsn: string;
  walBytes: number;
  walRecords: number;
  walFpi: number;
  commits: number;
  rows: Map<string, number>;
}

async function snapshot(db: ScratchDb): Promise<Snapshot> {
  const [w] = await db.sql<{ lsn: string; b: string; r: string; f: string; c: string }>(
    `select pg_current_wal_lsn()::text as lsn, w.wal_bytes::text as b, w.wal_records::text as r,
            w.wal_fpi::text as f, d.xact_commit::text as c
       from pg_stat_wal w, pg_stat_database d where d.datname = current_database()`,
  );
  const tables = await db.sql<{ t: string; n: string }>(
    `select schemaname || '.' || relname as t, (n_tup_ins + n_tup_upd + n_tup_del)::text as n from pg_stat_user_tables`,
  );
  return {
    at: Date.now(),
    lsn: w!.lsn,
    walBytes: Number(w!.b),
    walRecords: Number(w!.r),
    walFpi: Number(w!.f),
    commits: Number(w!.c),
    rows: new Map(tables.map((r) => [r.t, Number(r.n)])),
  };
}

/** WAL bytes between two LSNs, by Postgres's own arithmetic. */
async function walBetween(db: ScratchDb, a: Snapshot, b: Snapshot): Promise<number> {
  const [r] = await db.sql<{ d: string }>(`select pg_wal_lsn_diff($1, $2)::text as d`, [b.lsn, a.lsn]);
  return Number(r!.d);
}

/** Connections to the bench Postgres per client process (`ss`), the most seen in any one sample. */
function connectionSampler(port: number, pids: () => Map<number, string>) {
  const most = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      let out = '';
      try {
        out = execFileSync('ss', ['-tnpH', 'state', 'established', 'dst', `127.0.0.1:${port}`], {
          encoding: 'utf8',
        });
      } catch {
        return;
      }
      const count = new Map<string, number>();
      for (const m of out.matchAll(/pid=(\d+)/g)) {
        const who = pids().get(Number(m[1])) ?? 'other';
        count.set(who, (count.get(who) ?? 0) + 1);
      }
      for (const [who, n] of count) most.set(who, Math.max(most.get(who) ?? 0, n));
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
}

/** Creates TASKS tasks; when each half of them was done (ms from the start), and how many failed. */
async function createTasks(srv: Proc): Promise<{ failed: number; halves: number[] }> {
  const body = rpcBody('tools/call', { name: 'analyze_numbers', arguments: { count: 1000 } });
  const headers = { ...MCP_HEADERS('tools/call', 'analyze_numbers'), 'content-type': 'application/json' };
  let sent = 0;
  let done = 0;
  let failed = 0;
  const t0 = Date.now();
  const halves: number[] = [];
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (sent < TASKS) {
        sent++;
        const res = await fetch(mcpUrl(srv), { method: 'POST', headers, body });
        const text = await res.text();
        if (!res.ok || !text.includes('"taskId"')) failed++;
        if (++done === TASKS / 2 || done === TASKS) halves.push(Date.now() - t0);
      }
    }),
  );
  return { failed, halves };
}

async function waitFor(db: ScratchDb, status: string, n: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const [{ c }] = (await db.sql(`select count(*)::int as c from tasks where status = $1`, [status])) as [
      { c: number },
    ];
    if (c >= n) return;
    if (Date.now() > deadline) throw new Error(`only ${c}/${n} tasks ${status}`);
    await sleep(200);
  }
}

async function statements(db: ScratchDb, top = 12): Promise<{ total: number; lines: string[] }> {
  const rows = await db.sql<{ calls: string; ms: string; query: string }>(
    `select calls::text, round(mean_exec_time::numeric, 3)::text as ms, regexp_replace(left(query, 90), '\\s+', ' ', 'g') as query from pg_stat_statements s
       join pg_database d on d.oid = s.dbid where d.datname = current_database() order by calls desc`,
  );
  const total = rows.reduce((a, r) => a + Number(r.calls), 0);
  return {
    total,
    lines: rows
      .slice(0, top)
      .map((r) => `${(Number(r.calls) / TASKS).toFixed(2)}/task, ${r.ms} ms each  ${r.query}`),
  };
}

function report(label: string, a: Snapshot, b: Snapshot, wal: number, idle: IdleRate): string[] {
  const secs = (b.at - a.at) / 1000;
  const walNet = wal - idle.wal * secs;
  const commitsNet = b.commits - a.commits - idle.commits * secs;
  const rowLines = [...b.rows]
    .map(([t, n]) => [t, n - (a.rows.get(t) ?? 0)] as const)
    .filter(([, d]) => d > 0)
    .sort((x, y) => y[1] - x[1])
    .map(([t, d]) => `    ${(d / TASKS).toFixed(2)} ${t}`);
  return [
    `${label}: ${secs.toFixed(1)} s (incl. ${SETTLE_MS / 1000} s settle), WAL ${a.lsn} → ${b.lsn}`,
    `  WAL ${Math.round(wal / TASKS)} B/task gross, ${Math.round(walNet / TASKS)} B/task net of idle` +
      ` (${b.walRecords - a.walRecords} records, ${b.walFpi - a.walFpi} full-page images)`,
    `  commits ${((b.commits - a.commits) / TASKS).toFixed(2)}/task gross, ${(commitsNet / TASKS).toFixed(2)}/task net of idle`,
    `  rows written (ins+upd+del) per task:`,
    ...rowLines,
  ];
}

interface IdleRate {
  wal: number;
  commits: number;
}

async function main(): Promise<void> {
  const db = await scratchDb('wal');
  const port = Number(new URL(db.url).port || 5432);
  const pids = new Map<number, string>([[process.pid, 'bench']]);
  const sampler = connectionSampler(port, () => pids);
  const out: string[] = [];
  let srv: Proc | undefined;
  let wrk: Proc | undefined;
  try {
    srv = await server(db);
    pids.set(srv.child.pid!, 'server');
    wrk = await worker(db, { METRICS_PORT: '' });
    pids.set(wrk.child.pid!, 'worker');
    // Idle: both processes up, nothing to do (sweeps, heartbeats, pg-boss maintenance).
    await sleep(SETTLE_MS);
    const i0 = await snapshot(db);
    await sleep(30_000);
    const i1 = await snapshot(db);
    const idleSecs = (i1.at - i0.at) / 1000;
    const idle: IdleRate = {
      wal: (await walBetween(db, i0, i1)) / idleSecs,
      commits: (i1.commits - i0.commits) / idleSecs,
    };
    out.push(
      `idle (server + worker): ${Math.round(idle.wal)} B/s of WAL, ${idle.commits.toFixed(1)} commits/s`,
    );
    const idleConns = await sampler.stop();
    out.push(
      `connections held, most at once from start through idle: ${JSON.stringify(Object.fromEntries(idleConns))}`,
    );

    // Create: the worker stopped, so the server's statements are the create's alone.
    await wrk.stop();
    wrk = undefined;
    const busy = connectionSampler(port, () => pids);
    await sleep(SETTLE_MS);
    await db.sql(`select pg_stat_statements_reset()`);
    const c0 = await snapshot(db);
    const t0 = Date.now();
    const { failed, halves } = await createTasks(srv);
    const createSecs = (Date.now() - t0) / 1000;
    const [first = 0, all = 0] = halves;
    const createStatements = await statements(db);
    await sleep(SETTLE_MS);
    const c1 = await snapshot(db);
    out.push(
      `created ${TASKS} tasks (${failed} failed) in ${createSecs.toFixed(1)} s, ${CLIENTS} in flight: ${Math.round(TASKS / createSecs)} req/s` +
        ` (first half ${Math.round(TASKS / 2 / (first / 1000))} req/s, second half ${Math.round(TASKS / 2 / ((all - first) / 1000))} req/s)`,
    );
    out.push(...report('create', c0, c1, await walBetween(db, c0, c1), idle));
    out.push(
      `  statements per task: ${(createStatements.total / TASKS).toFixed(2)} (pg_stat_statements), top:`,
    );
    out.push(...createStatements.lines.map((l) => `    ${l}`));

    // Run: a worker at its defaults drains them.
    await db.sql(`select pg_stat_statements_reset()`);
    const r0 = await snapshot(db);
    const t1 = Date.now();
    wrk = await worker(db, { METRICS_PORT: '' });
    pids.set(wrk.child.pid!, 'worker');
    await waitFor(db, 'completed', TASKS);
    const runSecs = (Date.now() - t1) / 1000;
    const runStatements = await statements(db);
    await sleep(SETTLE_MS);
    const r1 = await snapshot(db);
    out.push(
      `drained ${TASKS} tasks in ${runSecs.toFixed(1)} s (incl. worker start): ${Math.round(TASKS / runSecs)} tasks/s`,
    );
    out.push(...report('run to completion', r0, r1, await walBetween(db, r0, r1), idle));
    out.push(`  statements per task: ${(runStatements.total / TASKS).toFixed(2)} (pg_stat_statements), top:`);
    out.push(...runStatements.lines.map((l) => `    ${l}`));
    const busyConns = await busy.stop();
    out.push(
      `connections held, most at once while creating and draining: ${JSON.stringify(Object.fromEntries(busyConns))}`,
    );
  } finally {
    await wrk?.stop();
    await srv?.stop();
    await db.drop();
  }
  console.log(out.join('\n'));
}

await main();
