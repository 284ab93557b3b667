import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Processes, type ClusterProcess } from './processes.ts';
import type { Workload } from './workload.ts';

/**
 * Polls `tasks/get` of a known task on one HTTP instance directly (not through the balancer) until it
 * succeeds; returns when it did. Used to time the recovery after a database outage.
 */
export async function firstSuccessfulGet(port: number, taskId: string, timeoutMs = 60_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tasks/get',
          'mcp-name': taskId,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tasks/get',
          params: {
            taskId,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {
                extensions: { 'io.modelcontextprotocol/tasks': {} },
              },
            },
          },
        }),
      });
      const body = (await res.json()) as { result?: { taskId?: string } };
      if (body.result?.taskId === taskId) return Date.now();
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`instance :${port} did not answer tasks/get in time`);
    await sleep(20);
  }
}

/**
 * Every process still runs and serves: each HTTP instance answers `tasks/get` directly, and each worker
 * takes part in running a final burst of tasks (its pid appears as a lease holder). Returns failures.
 */
export async function checkAllServing(opts: {
  workload: Workload;
  dbUrl: string;
  http: ReadonlyArray<{ proc: ClusterProcess; port: number }>;
  workers: readonly ClusterProcess[];
  log: (msg: string) => void;
}): Promise<number> {
  const { workload, dbUrl, http, workers, log } = opts;
  let failures = 0;
  for (const p of [...http.map((h) => h.proc), ...workers]) {
    if (!Processes.alive(p)) {
      log(`  NOT RUNNING: ${p.name}`);
      failures++;
    }
  }
  const burst = await Promise.all(
    Array.from({ length: 48 }, () =>
      workload.rpc('tools/call', {
        name: 'analyze_numbers',
        arguments: { count: 20_000, chunkSize: 5000, delayMsPerChunk: 300 },
      }),
    ),
  );
  const ids = burst.map((r) => r.body.result?.taskId as string);
  for (const { proc, port } of http) {
    try {
      await firstSuccessfulGet(port, ids[0]!, 10_000);
    } catch {
      log(`  NOT SERVING: ${proc.name} (:${port})`);
      failures++;
    }
  }
  const want = new Set(workers.map((w) => String(w.child.pid)));
  const seen = new Set<string>();
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const deadline = Date.now() + 30_000;
  while ([...want].some((pid) => !seen.has(pid)) && Date.now() < deadline) {
    const rows = await db.query<{ pid: string }>(
      `select distinct split_part(leased_by, ':', 2) as pid from tasks
        where task_id = any($1) and leased_by is not null`,
      [ids],
    );
    for (const r of rows.rows) seen.add(r.pid);
    await sleep(50);
  }
  await db.end();
  for (const w of workers) {
    if (!seen.has(String(w.child.pid))) {
      log(`  NOT SERVING: ${w.name} ran none of the final burst`);
      failures++;
    }
  }
  for (const id of ids) {
    const done = await workload.poll(id, (t) =>
      ['completed', 'failed', 'cancelled'].includes(t.status as string),
    );
    if (done.status !== 'completed') failures++;
  }
  log(
    `after the chaos: ${http.length} HTTP instances and ${workers.length} workers alive and serving: ${failures === 0}`,
  );
  return failures;
}
