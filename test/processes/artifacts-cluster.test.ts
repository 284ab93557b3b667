/**
 * Artifacts in a deployment: two HTTP instances behind real nginx (round-robin, no stickiness) and a
 * separate worker process. A 200 MiB export streams into Postgres while the worker's RSS stays flat, and
 * downloads through nginx byte-identical, resumed once with Range after the connection is cut (the two
 * halves may come from different instances). A worker SIGKILLed mid-artifact leaves nothing readable, and
 * the next attempt writes the artifact whole, once.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/database.ts';
import { exportRows } from '../../src/tools/shipped/export-csv.ts';
import { suiteClusterDatabase } from '../helpers/database-env.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { FAST_ENV } from '../helpers/server-process.ts';
import { startCluster, type Cluster } from '../helpers/system/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

const MIB = 1_048_576;
const DOWNLOAD_URL = 'dev.durable-mcp-tasks/downloadUrl';
const SHA256 = 'dev.durable-mcp-tasks/sha256';

let cluster: Cluster;
/** The cluster's database, for the test's own checks. */
let db: Db;
let mcp: RawMcp;
/** As `npm run worker` and the image run it (see docs/operations.md). */
const NODE_ARGS = ['--max-semi-space-size=8'];

beforeAll(async () => {
  const nginxPort = await freePort();
  cluster = await startCluster({
    name: 'artifacts-cluster',
    instances: 2,
    workers: 1,
    ...suiteClusterDatabase(),
    nginxPort,
    workerNodeArgs: NODE_ARGS,
    env: {
      ...FAST_ENV,
      LOG_LEVEL: 'warn',
      // The links name the load balancer, as in a real deployment.
      PUBLIC_URL: `http://127.0.0.1:${nginxPort}`,
      LEASE_MS: '2000',
      SWEEP_INTERVAL_MS: '300',
      DB_POOL_MAX: '4',
      QUEUE_POOL_MAX: '2',
    },
  });
  ({ db } = createDb({ connectionString: cluster.database.url, max: 4, applicationName: 'test' }));
  mcp = new RawMcp(cluster.url);
}, 120_000);
afterAll(async () => {
  await db?.destroy();
  await cluster?.stop();
});

/** A process's resident set, from /proc (bytes). */
const rssOf = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

/** The largest RSS of the processes while `work` runs, sampled every 50 ms, minus their RSS before it. */
async function rssGrowth<T>(pids: number[], work: () => Promise<T>): Promise<{ value: T; growth: number[] }> {
  const before = pids.map(rssOf);
  const peak = [...before];
  const sampler = setInterval(() => pids.forEach((pid, i) => (peak[i] = Math.max(peak[i]!, rssOf(pid)))), 50);
  try {
    const value = await work();
    return { value, growth: peak.map((p, i) => p - before[i]!) };
  } finally {
    clearInterval(sampler);
  }
}

async function exportSha256(megabytes: number): Promise<string> {
  const hash = createHash('sha256');
  for await (const page of exportRows(megabytes)) hash.update(page);
  return hash.digest('hex');
}

async function runExport(megabytes: number, pageDelayMs = 0) {
  const { taskId } = await mcp.callTool('export_csv', { megabytes, pageDelayMs });
  return mcp.waitForTask(taskId as string, undefined, 180_000);
}

describe('artifacts behind nginx with two instances and a worker process', () => {
  it('a 200 MiB export: the worker’s RSS grows < 64 MiB, and the download through nginx, cut and resumed with Range, is byte-identical', async () => {
    const worker = cluster.workers[0]!;
    await runExport(4); // the code paths warm, before the baseline
    const { value: task, growth } = await rssGrowth([worker.pid], () => runExport(200));
    console.log(`worker RSS growth during a 200 MiB artifact: ${(growth[0]! / MIB).toFixed(1)} MiB`);
    expect(task.status).toBe('completed');
    expect(growth[0]).toBeLessThan(64 * MIB);
    const link = task.result.content[1];
    expect(link.uri).toBe(`tasks://${task.taskId}/artifacts/export.csv`);
    expect(link._meta[SHA256]).toBe(await exportSha256(200));
    const url = link._meta[DOWNLOAD_URL] as string;
    expect(new URL(url).origin).toBe(new URL(cluster.nginx!.url).origin);

    const started = performance.now();
    const { value: sha, growth: serverGrowth } = await rssGrowth(
      cluster.http.map((p) => p.pid),
      () => cutAndResume(url, link.size, 80 * MIB),
    );
    const seconds = (performance.now() - started) / 1000;
    console.log(`downloaded ${(link.size / MIB).toFixed(0)} MiB through nginx in ${seconds.toFixed(1)} s`);
    console.log(
      `HTTP instances' RSS growth while serving: ${serverGrowth.map((g) => (g / MIB).toFixed(1)).join(', ')} MiB`,
    );
    expect(sha).toBe(link._meta[SHA256]);
    // Bounded well under the 200 MiB served: nothing holds the artifact whole. (What an instance grows by
    // is garbage from pg's socket buffers that V8 collects lazily; docs/performance.md has a 1 GiB run.)
    for (const g of serverGrowth) expect(g).toBeLessThan(128 * MIB);
    expect(cluster.unexpectedExits).toEqual([]);
  }, 300_000);

  it('a worker SIGKILLed mid-artifact leaves no partial artifact readable; the next attempt writes it whole once', async () => {
    const { taskId } = await mcp.callTool('export_csv', { megabytes: 40, pageDelayMs: 3 });
    const uri = `tasks://${taskId}/artifacts/export.csv`;
    await waitFor(async () => (await chunksWritten(taskId)) >= 5, {
      timeoutMs: 60_000,
      what: 'five chunks written',
    });
    await cluster.workers[0]!.kill('SIGKILL');
    // Nothing readable by any path while the first attempt's chunks are stored.
    expect(await chunksWritten(taskId)).toBeGreaterThanOrEqual(5);
    expect((await mcp.error('resources/read', { uri })).code).toBe(-32602);
    const path = `/mcp/artifacts/${taskId}/export.csv`;
    expect((await fetch(new URL(path, cluster.url))).status).toBe(404);

    // A new worker process takes the task over (the same command, started again).
    await cluster.workers[0]!.restart();
    const task = await mcp.waitForTask(taskId, undefined, 180_000);
    expect(task.status).toBe('completed');
    const link = task.result.content[1];
    expect(link._meta[SHA256]).toBe(await exportSha256(40));
    // One complete artifact, written by the second attempt; the first one's rows are swept.
    const rows = await waitFor(
      async () => {
        const { rows } = await sql<{ state: string; attempt: number; chunks: number; size: string }>`
        select state, attempt, chunks, size from task_artifacts where task_id = ${taskId}`.execute(db);
        return rows.length === 1 && rows;
      },
      { timeoutMs: 30_000, what: "the killed attempt's artifact swept" },
    );
    expect(rows[0]).toMatchObject({ state: 'complete', attempt: 2, chunks: Math.ceil(link.size / MIB) });
    const res = await fetch(new URL(path, cluster.url));
    const hash = createHash('sha256');
    for await (const part of res.body!) hash.update(part);
    expect(hash.digest('hex')).toBe(link._meta[SHA256]);
  }, 300_000);
});

/** Chunks stored for the task's artifacts (complete or not). */
async function chunksWritten(taskId: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*) as n from task_artifact_chunks c join task_artifacts a using (artifact_id)
    where a.task_id = ${taskId}`.execute(db);
  return Number(rows[0]!.n);
}

/**
 * Downloads `url`, cutting the connection once `cutAt` bytes have arrived, then fetches the rest with
 * `Range` and `If-Range`; the whole body's sha256.
 */
async function cutAndResume(url: string, size: number, cutAt: number): Promise<string> {
  const hash = createHash('sha256');
  const abort = new AbortController();
  const first = await fetch(url, { signal: abort.signal });
  expect(first.status).toBe(200);
  const etag = first.headers.get('etag')!;
  let received = 0;
  const reader = first.body!.getReader();
  while (received < cutAt) {
    const { done, value } = await reader.read();
    if (done) throw new Error('the download ended before the cut');
    hash.update(value);
    received += value.length;
  }
  abort.abort();
  await reader.cancel().catch(() => {});
  const rest = await fetch(url, { headers: { range: `bytes=${received}-`, 'if-range': etag } });
  expect(rest.status).toBe(206);
  expect(rest.headers.get('content-range')).toBe(`bytes ${received}-${size - 1}/${size}`);
  for await (const part of rest.body!) {
    hash.update(part);
    received += part.length;
  }
  expect(received).toBe(size);
  return hash.digest('hex');
}
