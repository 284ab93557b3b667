import { postMcp } from '../mcp.ts';
import { waitFor } from '../wait.ts';
import type { Cluster } from './cluster.ts';
import type { Workload } from './workload.ts';

/**
 * Polls `tasks/get` of a known task on one HTTP instance directly (not through the balancer) until it
 * succeeds; returns when it did. Used to time the recovery after a database outage.
 */
export async function firstSuccessfulGet(port: number, taskId: string, timeoutMs = 60_000): Promise<number> {
  return waitFor(
    () =>
      postMcp(`http://127.0.0.1:${port}/mcp`, 'tasks/get', { taskId }).then(
        (reply) => reply.body.result?.taskId === taskId && Date.now(),
        () => false,
      ),
    { timeoutMs, what: `instance :${port} answering tasks/get` },
  );
}

/**
 * Every process still runs and serves: each HTTP instance answers `tasks/get` directly, and each worker
 * takes part in running a final burst of tasks (its pid appears as a lease holder). Returns failures.
 */
export async function checkAllServing(
  cluster: Cluster,
  workload: Workload,
  log: (msg: string) => void,
): Promise<number> {
  let failures = 0;
  for (const p of [...cluster.http, ...cluster.workers]) {
    if (!p.alive) {
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
  for (const proc of cluster.http) {
    try {
      await firstSuccessfulGet(proc.port!, ids[0]!, 10_000);
    } catch {
      log(`  NOT SERVING: ${proc.name} (:${proc.port})`);
      failures++;
    }
  }
  const want = new Set(cluster.workers.map((w) => String(w.pid)));
  const seen = new Set<string>();
  const db = await cluster.database.connect();
  try {
    await waitFor(
      async () => {
        const rows = await db.query<{ pid: string }>(
          `select distinct split_part(leased_by, ':', 2) as pid from tasks
            where task_id = any($1) and leased_by is not null`,
          [ids],
        );
        for (const r of rows.rows) seen.add(r.pid);
        return [...want].every((pid) => seen.has(pid));
      },
      { timeoutMs: 30_000, intervalMs: 50, what: 'every worker leasing a task of the burst' },
    ).catch(() => {});
  } finally {
    await db.end();
  }
  for (const w of cluster.workers) {
    if (!seen.has(String(w.pid))) {
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
    `after the chaos: ${cluster.http.length} HTTP instances and ${cluster.workers.length} workers alive and serving: ${failures === 0}`,
  );
  return failures;
}
