/**
 * Cancel that ends, in a deployment: two HTTP instances behind real nginx (round-robin, no stickiness) and
 * a separate worker process. A handler that ignores its signal is cancelled through nginx, and the task,
 * polled through nginx, is `cancelled` within CANCEL_GRACE_MS and a generous slack: before the handler
 * returns (20 s) and long before its lease (60 s) could lapse. The worker counts the leg as stuck until the
 * handler returns; its late result is discarded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/database.ts';
import { suiteClusterDatabase } from '../helpers/database-env.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { sample, scrape } from '../helpers/prometheus.ts';
import { FAST_ENV } from '../helpers/server-process.ts';
import { startCluster, waitHttp, type Cluster } from '../helpers/system/cluster.ts';
import { waitFor } from '../helpers/wait.ts';

const GRACE_MS = 1_000;
/** How long the uncooperative handler works before it returns its (late) result. */
const HANDLER_SECONDS = 20;
/** The bound: the grace, and slack for a slow machine that neither the handler nor the lease could meet. */
const BOUND_MS = GRACE_MS + 8_000;
const TOOLS = ['--tools', 'test/helpers/cancel-tools.ts'];

let cluster: Cluster;
/** The cluster's database, for the test's own checks. */
let db: Db;
let mcp: RawMcp;
let workerMetrics: string;

beforeAll(async () => {
  const metricsPort = await freePort();
  cluster = await startCluster({
    name: 'cancel-grace-cluster',
    instances: 2,
    workers: 1,
    ...suiteClusterDatabase(),
    instance: ['src/main.ts', '--role=server', ...TOOLS],
    worker: ['workers/main.ts', ...TOOLS],
    workerEnv: { METRICS_PORT: String(metricsPort) },
    env: {
      ...FAST_ENV,
      LOG_LEVEL: 'warn',
      LEASE_MS: '60000',
      CANCEL_GRACE_MS: String(GRACE_MS),
      DB_POOL_MAX: '4',
      QUEUE_POOL_MAX: '2',
    },
  });
  workerMetrics = `http://127.0.0.1:${metricsPort}`;
  await waitHttp(metricsPort);
  ({ db } = createDb({ connectionString: cluster.database.url, max: 4, applicationName: 'test' }));
  mcp = new RawMcp(cluster.url);
}, 120_000);
afterAll(async () => {
  await db?.destroy();
  await cluster?.stop();
});

const workerGauge = async (name: string, labels: Record<string, string> = {}) =>
  sample(await scrape(workerMetrics), name, labels) ?? 0;

describe('cancel through nginx with two instances and a worker process', () => {
  it('an uncooperative handler’s task is cancelled within the bound', async () => {
    const { taskId } = await mcp.callTool('ignores_cancel', { seconds: HANDLER_SECONDS, tag: 'cluster' });
    await waitFor(async () => (await workerGauge('durable_mcp_worker_slots_busy')) === 1, {
      what: 'the worker running the handler',
    });

    await mcp.result('tasks/cancel', { taskId });
    const task = await mcp.waitForTask(taskId as string, (t) => t.status !== 'working', BOUND_MS);
    expect(task.status).toBe('cancelled');
    expect(task.statusMessage).toBe('Cancelled by request');
    // Both instances answered: the cancel and the polls took whichever nginx chose.
    expect([...cluster.nginx!.served().values()].every((n) => n > 0)).toBe(true);

    // The handler still runs, holding its slot, counted as stuck; then it returns and its result is dropped.
    await waitFor(async () => (await workerGauge('durable_mcp_worker_stuck_legs')) === 1, {
      what: 'one stuck leg on the worker',
    });
    expect(await workerGauge('durable_mcp_worker_slots_busy')).toBe(1);
    // While it runs, its worker keeps renewing the attempt's stuck mark (every 10 s).
    const mark = () =>
      db
        .selectFrom('task_attempts')
        .select(['stuck_since', 'stuck_seen_at'])
        .where('task_id', '=', taskId as string)
        .executeTakeFirstOrThrow();
    await waitFor(
      async () => {
        const { stuck_since, stuck_seen_at } = await mark();
        return stuck_since !== null && stuck_seen_at !== null && stuck_seen_at > stuck_since;
      },
      { timeoutMs: 15_000, what: 'the stuck mark renewed' },
    );
    await waitFor(async () => (await workerGauge('durable_mcp_worker_stuck_legs')) === 0, {
      timeoutMs: HANDLER_SECONDS * 1000 + 15_000,
      what: 'the stuck leg ending when its handler returns',
    });
    const after = await mcp.getTask(taskId as string);
    expect(after).toMatchObject({ status: 'cancelled', statusMessage: 'Cancelled by request' });
    const stored = await db
      .selectFrom('tasks')
      .select(['status', 'result'])
      .where('task_id', '=', taskId as string)
      .executeTakeFirstOrThrow();
    expect(stored).toEqual({ status: 'cancelled', result: null });
    await waitFor(async () => (await mark()).stuck_since === null, { what: 'the stuck mark cleared' });
    expect(await mark()).toEqual({ stuck_since: null, stuck_seen_at: null });
    expect(
      await workerGauge('durable_mcp_tasks_finished_total', { tool: 'ignores_cancel', status: 'cancelled' }),
    ).toBe(1);
    expect(cluster.unexpectedExits).toEqual([]);
  }, 90_000);
});
