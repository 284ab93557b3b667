// The schedule part of the compose scenario (bench/compose.ts): a schedule every second (6-field cron
// '* * * * * *', overlap 'allow') fired by three worker processes — every process role runs the firing
// loop (src/process/start.ts startSchedules) — while a random one of them is SIGKILLed every 2–8 s and
// started again, for BENCH_SCHEDULE_SECONDS (300). Then, from the database: each tick's tasks (found by
// the tick's idempotency key, as fire.ts makes it), the ticks with none or with more than one, and each
// task's lag (its created_at, Postgres's clock, minus its tick). Goal: every tick once, lag p99 ≤ 1 s.
import { setTimeout as sleep } from 'node:timers/promises';
import { scheduleIdempotency } from '../../src/tasks/store/idempotency.ts';
import { EVERY_SECOND } from './compose-tools.ts';
import { rows, type Proc, type ScratchDb } from './harness.ts';
import { worker } from './processes.ts';
import { pct } from './sequential.ts';

const SECONDS = Number(process.env.BENCH_SCHEDULE_SECONDS ?? 300);
const INSTANCES = 3;
const TOOLS = ['--tools', 'bench/lib/compose-tools.ts'];
const ENV = { BENCH_COMPOSE_SCHEDULE: '1' };

interface TickTask {
  key: string;
  createdAt: number;
}

async function tickTasks(db: ScratchDb): Promise<TickTask[]> {
  const got = await db.sql<{ key: string; at: number }>(
    `select idempotency_key as key, (extract(epoch from created_at) * 1000)::float8 as at
       from tasks where origin = $1`,
    [`schedule:${EVERY_SECOND.name}`],
  );
  return got.map((r) => ({ key: r.key, createdAt: r.at }));
}

const keyOf = (tick: number) =>
  scheduleIdempotency(
    EVERY_SECOND.name,
    new Date(tick).toISOString(),
    EVERY_SECOND.tool,
    EVERY_SECOND.arguments,
  ).key;

/** Waits until the tick at `tick` (ms) has a task. */
async function untilFired(db: ScratchDb, tick: number, timeoutMs: number): Promise<void> {
  const key = keyOf(tick);
  const deadline = Date.now() + timeoutMs;
  while (!(await tickTasks(db)).some((t) => t.key === key)) {
    if (Date.now() > deadline) throw new Error(`the tick ${new Date(tick).toISOString()} never fired`);
    await sleep(200);
  }
}

/** Kills a random instance every 2–8 s (at a random point of a second) and starts it again, until `end`. */
async function killAtRandom(db: ScratchDb, procs: Proc[], end: number): Promise<number> {
  let kills = 0;
  for (;;) {
    await sleep(2_000 + Math.random() * 6_000);
    if (Date.now() >= end) return kills;
    const i = Math.floor(Math.random() * procs.length);
    const exited = new Promise((r) => procs[i]!.child.once('exit', r));
    procs[i]!.child.kill('SIGKILL');
    await exited;
    kills++;
    procs[i] = await worker(db, ENV, TOOLS);
  }
}

export async function benchComposeSchedule(db: ScratchDb): Promise<void> {
  const procs: Proc[] = [];
  let kills = 0;
  try {
    for (let i = 0; i < INSTANCES; i++) procs.push(await worker(db, ENV, TOOLS));
    // The window opens on the first whole second after a tick has fired (the schedule is synced).
    const deadline = Date.now() + 120_000;
    while ((await tickTasks(db)).length === 0) {
      if (Date.now() > deadline) throw new Error('the schedule never fired');
      await sleep(200);
    }
    const first = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    const last = first + (SECONDS - 1) * 1000;
    kills = await killAtRandom(db, procs, last);
    await untilFired(db, last, 60_000);
    const tasks = await tickTasks(db);
    const byKey = new Map<string, number[]>();
    for (const t of tasks) byKey.set(t.key, [...(byKey.get(t.key) ?? []), t.createdAt]);
    let missing = 0;
    let duplicates = 0;
    const lags: number[] = [];
    for (let tick = first; tick <= last; tick += 1000) {
      const made = byKey.get(keyOf(tick)) ?? [];
      if (made.length === 0) missing++;
      duplicates += Math.max(0, made.length - 1);
      for (const at of made) lags.push(at - tick);
    }
    const ms = (p: number) => (lags.length === 0 ? 'n/a' : `${pct(lags, p).toFixed(0)} ms`);
    rows.push({
      scenario: `schedule '* * * * * *', ${INSTANCES} worker processes firing, ${kills} SIGKILLs (a random one every 2–8 s, restarted), ${SECONDS} ticks`,
      ours: `${missing} missing, ${duplicates} duplicates; lag p50 ${ms(50)}, p99 ${ms(99)}, max ${ms(100)}`,
      floor: 'each tick once, at its second',
      ratio: '',
      target: '0 missing, 0 duplicates, lag p99 ≤ 1 s',
    });
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}
