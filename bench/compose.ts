/**
 * The compose scenario (`npm run bench -- compose`): tasks made by tasks, clocks and limits, each beside
 * its floor measured in the same run. Prints; never fails on a number.
 *
 *   calls     a parent calling one child (ctx.callTool) end to end — tools/call, then tasks/get every
 *             BENCH_COMPOSE_POLL_MS (5) until completed — beside one plain task of the same work, one
 *             after the other BENCH_COMPOSE_CALLS (200) times each: p50/p99, ratio (goal ≤ 2×).
 *   fanout    BENCH_COMPOSE_CHILDREN (1000) children spawned and joined (ctx.spawn, ctx.join) beside
 *             ctx.map of as many items of the same work, BENCH_COMPOSE_ROUNDS (3) rounds: wall time, ratio.
 *   schedule  a schedule every second with three worker processes firing it (every process role runs
 *             the firing loop), a random one SIGKILLed every 2–8 s and started again, for
 *             BENCH_SCHEDULE_SECONDS (300): every tick once (bench/lib/compose-schedule.ts).
 *   rate      rateLimit N/s held by 4 worker processes over BENCH_RATE_SECONDS (60 here) (bench/compose-rate.ts).
 *
 * BENCH_COMPOSE_PARTS (default all: calls,fanout,schedule,rate) picks some. The calls and fanout parts share
 * one server and BENCH_COMPOSE_WORKERS (1) worker process; schedule and rate each get a database of their own.
 * Run alone: `node --import tsx bench/compose.ts`; or from bench/run.ts as benchCompose(db).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { fmt, printTable, rows, scratchDb, type Proc, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';
import { pct, rpcClient } from './lib/sequential.ts';
import { benchComposeSchedule } from './lib/compose-schedule.ts';

const CALLS = Number(process.env.BENCH_COMPOSE_CALLS ?? 200);
const CHILDREN = Number(process.env.BENCH_COMPOSE_CHILDREN ?? 1_000);
const ROUNDS = Number(process.env.BENCH_COMPOSE_ROUNDS ?? 3);
const WORKERS = Number(process.env.BENCH_COMPOSE_WORKERS ?? 1);
const POLL_MS = Number(process.env.BENCH_COMPOSE_POLL_MS ?? 5);
const PARTS = (process.env.BENCH_COMPOSE_PARTS ?? 'calls,fanout,schedule,rate').split(',');
export const COMPOSE_TOOLS = ['--tools', 'bench/lib/compose-tools.ts'];

type Call = ReturnType<typeof rpcClient>;

/** Starts a task of `name` and polls it to completed: the time from the call to the completed tasks/get (ms). */
async function endToEnd(call: Call, name: string, args: Record<string, unknown>, pollMs: number) {
  const t0 = performance.now();
  const created = await call('tools/call', { name, arguments: args }, name);
  const taskId = (created.taskId ?? created.task?.taskId) as string;
  const deadline = Date.now() + 600_000;
  for (;;) {
    const task = await call('tasks/get', { taskId }, taskId);
    if (task.status === 'completed') return performance.now() - t0;
    if (task.status !== 'working')
      throw new Error(`${name} ${taskId}: ${task.status} ${task.statusMessage ?? ''}`);
    if (Date.now() > deadline) throw new Error(`${name} ${taskId} not completed in 600 s`);
    await sleep(pollMs);
  }
}

const ms = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms`;

async function benchCalls(call: Call): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await endToEnd(call, 'bench_work', { i }, POLL_MS);
    await endToEnd(call, 'bench_parent', { i }, POLL_MS);
  }
  const plain: number[] = [];
  const parent: number[] = [];
  // Interleaved, so that the machine's moods fall on both alike.
  for (let i = 0; i < CALLS; i++) {
    plain.push(await endToEnd(call, 'bench_work', { i }, POLL_MS));
    parent.push(await endToEnd(call, 'bench_parent', { i }, POLL_MS));
  }
  rows.push({
    scenario: `a parent calling one child (ctx.callTool), tools/call → completed, ${CALLS} in a row (poll ${POLL_MS} ms)`,
    ours: ms(parent),
    floor: `one plain task of the same work: ${ms(plain)}`,
    ratio: `${fmt.x(pct(parent, 50) / pct(plain, 50))} p50, ${fmt.x(pct(parent, 99) / pct(plain, 99))} p99`,
    target: 'p50 ≤ 2×',
  });
}

async function benchFanout(call: Call): Promise<void> {
  const spawned: number[] = [];
  const mapped: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    mapped.push(await endToEnd(call, 'bench_map', { n: CHILDREN }, 20));
    spawned.push(await endToEnd(call, 'bench_fanout', { n: CHILDREN }, 20));
  }
  const median = (xs: number[]) => pct(xs, 50);
  const list = (xs: number[]) => xs.map((x) => (x / 1000).toFixed(2)).join(', ');
  rows.push({
    scenario: `${CHILDREN} children spawned and joined (ctx.spawn, ctx.join), ${WORKERS} worker process(es), ${ROUNDS} rounds`,
    ours: `median ${(median(spawned) / 1000).toFixed(2)} s (${list(spawned)} s)`,
    floor: `ctx.map of ${CHILDREN} items, all at once: median ${(median(mapped) / 1000).toFixed(2)} s (${list(mapped)} s)`,
    ratio: fmt.x(median(spawned) / median(mapped)),
    target: 'printed',
  });
}

async function benchOnCluster(db: ScratchDb): Promise<void> {
  const srv = await server(db, {}, [], COMPOSE_TOOLS);
  const workers: Proc[] = [];
  try {
    for (let i = 0; i < WORKERS; i++) workers.push(await worker(db, {}, COMPOSE_TOOLS));
    const call = rpcClient(mcpUrl(srv));
    // Every worker is up (started without a readiness check) once a few tasks of each kind completed.
    for (let i = 0; i < 2 * WORKERS; i++) {
      await endToEnd(call, 'bench_work', { i }, POLL_MS);
      await endToEnd(call, 'bench_map', { n: 10 }, POLL_MS);
      await endToEnd(call, 'bench_fanout', { n: 10 }, POLL_MS);
    }
    if (PARTS.includes('calls')) await benchCalls(call);
    if (PARTS.includes('fanout')) await benchFanout(call);
  } finally {
    await Promise.all([...workers.map((w) => w.stop()), srv.stop()]);
  }
}

/** In a scratch database of its own (the rate part counts every first leg in its database). */
async function inOwnDb(label: string, run: (db: ScratchDb) => Promise<void>): Promise<void> {
  const db = await scratchDb(label);
  try {
    await run(db);
  } finally {
    await db.drop();
  }
}

export async function benchCompose(db: ScratchDb): Promise<void> {
  if (PARTS.includes('calls') || PARTS.includes('fanout')) await benchOnCluster(db);
  if (PARTS.includes('schedule')) await inOwnDb('compose_schedule', benchComposeSchedule);
  if (PARTS.includes('rate')) {
    // compose-rate.ts reads its settings when loaded; here the rate is held for a minute unless told.
    process.env.BENCH_RATE_SECONDS ??= '60';
    const { benchComposeRate } = await import('./compose-rate.ts');
    await inOwnDb('compose_rate', benchComposeRate);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const db = await scratchDb('compose');
  try {
    await benchCompose(db);
    printTable();
  } finally {
    await db.drop();
  }
}
