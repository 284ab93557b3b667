/**
 * The cancel scenario of bench/run.ts: the time from `tasks/cancel` to a `tasks/get` that says `cancelled`,
 * for a handler that ignores ctx.signal (its task ends by CANCEL_GRACE_MS), beside one that honours it (its
 * own leg ends the task), measured in the same run against the same `server` and `worker` processes, which
 * serve `test/helpers/cancel-tools.ts`. BENCH_CANCELS (25) cancels of each, one at a time, each once the
 * worker has claimed its task; BENCH_CANCEL_GRACE_MS (2000) is the worker's CANCEL_GRACE_MS. The target:
 * the uncooperative p99 within the grace and one second.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { fmt, rows, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';
import { pct, rpcClient } from './lib/sequential.ts';

const CANCELS = Number(process.env.BENCH_CANCELS ?? 25);
const GRACE_MS = Number(process.env.BENCH_CANCEL_GRACE_MS ?? 2_000);
const TOOLS = ['--tools', 'test/helpers/cancel-tools.ts'];

type Rpc = ReturnType<typeof rpcClient>;

/** Polls `probe` every few milliseconds until it holds; fails after `timeoutMs`. */
async function until(probe: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(5);
  }
}

/** One task of `tool`, cancelled once the worker holds it: tasks/cancel → an observed `cancelled` (ms). */
async function cancelOnce(call: Rpc, db: ScratchDb, tool: string, seconds: number): Promise<number> {
  const created = await call('tools/call', { name: tool, arguments: { seconds } }, tool);
  const taskId = created.taskId as string;
  await until(async () => {
    const [row] = await db.sql<{ held: boolean }>(
      'select leased_by is not null as held from tasks where task_id = $1',
      [taskId],
    );
    return row?.held === true;
  }, `${tool}: claimed by the worker`);
  const started = performance.now();
  await call('tasks/cancel', { taskId }, taskId);
  let status = '';
  await until(async () => {
    status = (await call('tasks/get', { taskId }, taskId)).status as string;
    return status !== 'working';
  }, `${tool}: ended after its cancel`);
  if (status !== 'cancelled') throw new Error(`${tool}: ended ${status} after its cancel`);
  return performance.now() - started;
}

const summary = (ms: number[]) => `p50 ${pct(ms, 50).toFixed(0)} ms, p99 ${pct(ms, 99).toFixed(0)} ms`;

export async function benchCancel(db: ScratchDb): Promise<void> {
  const srv = await server(db, {}, [], TOOLS);
  // A stopped handler that ignores its signal keeps its slot until it returns (a few seconds past the
  // grace here): enough slots that the next cancel never waits for one.
  const wrk = await worker(db, { CANCEL_GRACE_MS: String(GRACE_MS), WORKER_CONCURRENCY: '32' }, TOOLS);
  try {
    const call = rpcClient(mcpUrl(srv));
    await cancelOnce(call, db, 'honours_cancel', 60); // warm-up
    const cooperative: number[] = [];
    const uncooperative: number[] = [];
    for (let i = 0; i < CANCELS; i++) {
      cooperative.push(await cancelOnce(call, db, 'honours_cancel', 60));
      uncooperative.push(await cancelOnce(call, db, 'ignores_cancel', GRACE_MS / 1000 + 3));
    }
    const bound = GRACE_MS + 1_000;
    rows.push({
      scenario: `tasks/cancel → cancelled, handler ignores ctx.signal (CANCEL_GRACE_MS ${GRACE_MS}, ${CANCELS} cancels)`,
      ours: summary(uncooperative),
      floor: `a handler that honours ctx.signal: ${summary(cooperative)}`,
      ratio: `${fmt.x(pct(uncooperative, 99) / bound)} of the bound`,
      target: `p99 ≤ grace + 1 s (${bound} ms)`,
    });
  } finally {
    await Promise.all([wrk.stop(), srv.stop()]);
  }
}
