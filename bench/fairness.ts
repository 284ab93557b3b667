// Fair share (issue #22): what one principal's load does to another's. An HTTP server and one worker
// process (32 slots) in bearer mode, principals alice and bob, real sockets. Each number is beside the
// same measure taken in the same run without bob's load, and (where the choice is ours to measure) beside
// the same run without the reserved slots, the way claims worked before.
import { setTimeout as sleep } from 'node:timers/promises';
import { hashToken } from '../src/http/auth/static-tokens.ts';
import { postMcp, TASKS_EXT } from '../test/helpers/mcp.ts';
import { fmt, rows, type Proc, type ScratchDb } from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';
import { pct } from './lib/sequential.ts';

const FLOOD_TASKS = Number(process.env.BENCH_FAIR_FLOOD ?? 3000);
/** How long each of bob's chunks holds its slot (3 chunks a task). */
const HOLD_MS = Number(process.env.BENCH_FAIR_HOLD_MS ?? 2000);
const ALICE_TASKS = 5;
const CONCURRENCY = 32;

type Principal = 'alice' | 'bob';
const AUTH_ENV = {
  AUTH_MODE: 'bearer',
  AUTH_TOKENS: `alice=${hashToken('alice-token')},bob=${hashToken('bob-token')}`,
  TASK_POLL_INTERVAL_MS: '5',
};

/** One 2026-07-28 request as `who`; its result (a throw on an error). */
async function call(url: string, who: Principal, method: string, params: Record<string, unknown>) {
  const reply = await postMcp(url, method, params, {
    caps: { extensions: { [TASKS_EXT]: {} } },
    headers: { authorization: `Bearer ${who}-token` },
  });
  if (reply.body.result === undefined) throw new Error(`${method}: ${JSON.stringify(reply.body.error)}`);
  return reply.body.result as Record<string, any>;
}

const create = async (url: string, who: Principal, args: Record<string, unknown>) =>
  (await call(url, who, 'tools/call', { name: 'analyze_numbers', arguments: args })).taskId as string;

/** Creates a trivial task of alice's and polls it to completion: ms from the create to `completed`. */
async function aliceRoundTrip(url: string): Promise<number> {
  const t0 = performance.now();
  const taskId = await create(url, 'alice', { count: 10 });
  const deadline = Date.now() + 120_000;
  while ((await call(url, 'alice', 'tasks/get', { taskId })).status !== 'completed') {
    if (Date.now() > deadline) throw new Error(`alice's task ${taskId} did not complete in 120 s`);
    await sleep(5);
  }
  return performance.now() - t0;
}

/** alice's round trips, one after the other. */
async function aliceRoundTrips(url: string, n = ALICE_TASKS): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) times.push(await aliceRoundTrip(url));
  return times;
}

/** `n` tasks of bob's created by 16 concurrent clients; their ids. */
async function bobCreates(url: string, n: number, args: Record<string, unknown>): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < n) {
        next++;
        ids.push(await create(url, 'bob', args));
      }
    }),
  );
  return ids;
}

async function waitUntil(db: ScratchDb, sql: string, what: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (!((await db.sql(sql)) as [{ ok: boolean }])[0].ok) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 300 s`);
    await sleep(20);
  }
}

/** A server and one worker of 32 slots (`reserved` of them for light principals) on a fresh task table. */
async function cluster(
  db: ScratchDb,
  reserved?: number,
): Promise<{ url: string; stop: () => Promise<void> }> {
  await db.sql('delete from tasks');
  await db.sql('delete from principal_creation_buckets');
  const procs: Proc[] = [
    await server(db, AUTH_ENV),
    await worker(db, {
      ...AUTH_ENV,
      METRICS_PORT: '',
      WORKER_CONCURRENCY: String(CONCURRENCY),
      ...(reserved === undefined ? {} : { WORKER_RESERVED_SLOTS: String(reserved) }),
    }),
  ];
  return {
    url: mcpUrl(procs[0]!),
    stop: async () => {
      await Promise.all(procs.map((p) => p.stop()));
    },
  };
}

/** Bob's legs hold every slot he may take: alice's round trip then, with and without the reserved slots. */
async function underHeldSlots(db: ScratchDb, reserved?: number): Promise<number[]> {
  const c = await cluster(db, reserved);
  try {
    await bobCreates(c.url, CONCURRENCY, { count: 3, chunkSize: 1, delayMsPerChunk: HOLD_MS });
    const held = CONCURRENCY - (reserved ?? CONCURRENCY / 8);
    await waitUntil(
      db,
      `select count(*) >= ${held} as ok from tasks where leased_by is not null and status = 'working'`,
      "bob's legs in the slots",
    );
    return await aliceRoundTrips(c.url, 1);
  } finally {
    await c.stop();
  }
}

/**
 * Right after bob's flood of one-chunk tasks: alice's round trip, her tasks/get latency while the
 * flood drains, and the drain's rate.
 */
async function afterFlood(db: ScratchDb, reserved?: number) {
  const c = await cluster(db, reserved);
  try {
    const probe = await create(c.url, 'alice', { count: 1 });
    const gets: number[] = [];
    const t0 = Date.now();
    await bobCreates(c.url, FLOOD_TASKS, { count: 1 });
    const roundTrip = await aliceRoundTrip(c.url);
    let drained = false;
    const sampling = (async () => {
      while (!drained) {
        const t = performance.now();
        await call(c.url, 'alice', 'tasks/get', { taskId: probe });
        gets.push(performance.now() - t);
      }
    })();
    await waitUntil(
      db,
      `select count(*) filter (where status = 'completed') >= ${FLOOD_TASKS + 1 + 1} as ok from tasks`,
      "bob's flood drained",
    );
    const seconds = (Date.now() - t0) / 1000;
    drained = true;
    await sampling;
    return { roundTrip, gets, rate: FLOOD_TASKS / seconds };
  } finally {
    await c.stop();
  }
}

export async function benchFairness(db: ScratchDb): Promise<void> {
  const idle = await cluster(db);
  let idleTrips: number[];
  const idleGets: number[] = [];
  try {
    idleTrips = await aliceRoundTrips(idle.url);
    const probe = await create(idle.url, 'alice', { count: 1 });
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      await call(idle.url, 'alice', 'tasks/get', { taskId: probe });
      idleGets.push(performance.now() - t);
    }
  } finally {
    await idle.stop();
  }
  const idleP50 = pct(idleTrips, 50);
  const held = await underHeldSlots(db);
  const heldBefore = await underHeldSlots(db, 0);
  rows.push({
    scenario: `alice's trivial task while bob's legs hold the slots (32 slots, ${HOLD_MS * 3} ms legs)`,
    ours: `${held[0]!.toFixed(0)} ms (without reserved slots: ${heldBefore[0]!.toFixed(0)} ms)`,
    floor: `idle: p50 ${idleP50.toFixed(0)} ms`,
    ratio: fmt.x(held[0]! / idleP50),
    target: '≤ 2 s',
  });
  const flood = await afterFlood(db);
  const floodBefore = await afterFlood(db, 0);
  rows.push(
    {
      scenario: `alice's trivial task right after bob's flood of ${FLOOD_TASKS} tasks`,
      ours: `${flood.roundTrip.toFixed(0)} ms`,
      floor: `idle: p50 ${idleP50.toFixed(0)} ms`,
      ratio: fmt.x(flood.roundTrip / idleP50),
      target: '≤ 2 s',
    },
    {
      scenario: `alice's tasks/get while bob's flood drains`,
      ours: `p50 ${pct(flood.gets, 50).toFixed(2)} ms, p99 ${pct(flood.gets, 99).toFixed(2)} ms`,
      floor: `idle: p50 ${pct(idleGets, 50).toFixed(2)} ms, p99 ${pct(idleGets, 99).toFixed(2)} ms`,
      ratio: fmt.x(pct(flood.gets, 99) / pct(idleGets, 99)),
      target: 'p99 ≤ 3×',
    },
    {
      scenario: `bob's flood drained (created and run), fair claims vs none`,
      ours: `${Math.round(flood.rate)} tasks/s`,
      floor: `without reserved slots: ${Math.round(floodBefore.rate)} tasks/s`,
      ratio: fmt.x(flood.rate / floodBefore.rate),
      target: '≈ 1×',
    },
  );
}
