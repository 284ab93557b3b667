/**
 * The rate-limit part of the compose scenario (`defineTool({ rateLimit })`): a backlog of tasks of one
 * tool limited to BENCH_RATE_PER_SECOND (20) starts a second, created before any worker runs, then
 * BENCH_RATE_WORKERS (4) worker processes drain it. The measured rate is the first legs' starts (their
 * attempts' `claimed_at`, Postgres's clock) within BENCH_RATE_SECONDS (5) from the first start of the
 * second window (the first is spread over the workers' start-up), per second, printed beside the limit; and the most starts in any one-second window (never above the limit). The
 * target: the measured rate within ±5 % of the limit. Run alone: `node --import tsx bench/compose-rate.ts`;
 * or from bench/run.ts as benchComposeRate(db).
 */
import { fileURLToPath } from 'node:url';
import { printTable, rows, scratchDb, type Proc, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';
import { rpcClient } from './lib/sequential.ts';

const RATE = Number(process.env.BENCH_RATE_PER_SECOND ?? 20);
const SECONDS = Number(process.env.BENCH_RATE_SECONDS ?? 5);
const WORKERS = Number(process.env.BENCH_RATE_WORKERS ?? 4);
const TOOLS = ['--tools', 'bench/lib/rate-tools.ts'];
const ENV = { BENCH_RATE_PER_SECOND: String(RATE) };

/** Creates `n` tasks, 16 requests at a time. */
async function createBacklog(url: string, n: number): Promise<void> {
  const call = rpcClient(url);
  let next = 0;
  const caller = async () => {
    while (next < n) await call('tools/call', { name: 'rate_limited_noop', arguments: { n: next++ } });
  };
  await Promise.all(Array.from({ length: 16 }, caller));
}

/** The first legs' start times (ms, Postgres's clock), sorted. */
async function firstStarts(db: ScratchDb): Promise<number[]> {
  const got = await db.sql<{ at: number }>(
    `select (extract(epoch from claimed_at) * 1000)::float8 as at from task_attempts
      where attempt = 1 order by claimed_at`,
  );
  return got.map((r) => r.at);
}

async function waitForStarts(db: ScratchDb, n: number, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const starts = await firstStarts(db);
    if (starts.length >= n) return starts;
    if (Date.now() > deadline)
      throw new Error(`${starts.length} of ${n} tasks started within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function benchComposeRate(db: ScratchDb): Promise<void> {
  // More than the window can start, so that the limit, not the backlog, sets the pace throughout.
  const backlog = Math.ceil(RATE * (SECONDS + 2) * 1.2);
  const srv = await server(db, ENV, [], TOOLS);
  const workers: Proc[] = [];
  try {
    await createBacklog(mcpUrl(srv), backlog);
    for (let i = 0; i < WORKERS; i++) workers.push(await worker(db, ENV, TOOLS));
    const starts = await waitForStarts(db, RATE * (SECONDS + 2), (SECONDS + 30) * 1_000);
    // The window opens on the second window's first start: the first window's starts are spread over
    // the workers' start-up (their first fetch, their first claims), which is not the limiter's pace.
    const t0 = starts[RATE]!;
    const inWindow = starts.filter((s) => s >= t0 && s < t0 + SECONDS * 1_000).length;
    const measured = inWindow / SECONDS;
    const most = Math.max(...starts.map((t) => starts.filter((s) => s >= t && s < t + 1_000).length));
    rows.push({
      scenario: `rateLimit ${RATE}/s, ${WORKERS} worker processes, backlog ${backlog}, ${SECONDS} s of starts after the first window`,
      ours: `${measured.toFixed(1)} starts/s (most in any 1 s: ${most})`,
      floor: `limit ${RATE}/s`,
      ratio: `${(measured / RATE).toFixed(3)}× of the limit`,
      target: 'within ±5 %, never above the limit in any 1 s',
    });
  } finally {
    await Promise.all([...workers.map((w) => w.stop()), srv.stop()]);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const db = await scratchDb('compose_rate');
  try {
    await benchComposeRate(db);
    printTable();
  } finally {
    await db.drop();
  }
}
