/**
 * The task events chaos run (`npm run test:event-chaos`, issue #34): several tasks of the shipped
 * scan_rows tool, each emitting thousands of events (every matching row inside a step's body, a line of
 * partial output between steps, with sleeps), run by two worker processes behind real nginx round-robin
 * (deploy/mcp-locations.conf) over two HTTP instances, while a chaos loop SIGKILLs the worker holding
 * each task at random points of its stream (and starts it again a moment later), and SIGKILLs one HTTP
 * instance twice (and starts it again). Meanwhile readers (test/helpers/event-reader.ts) follow every
 * task's tasks/stream through nginx; each leaves at random points (the fetch aborted) and resumes with
 * `after` = the last seq it got, and a killed instance ends the streams it serves, which resume the same
 * way on whichever instance nginx picks.
 *
 * Then it audits: every reader got, for every task, seqs 1..N exactly once (N the final status, its last
 * event), every event the one scan_rows writes at that place (row and scanValue, the partial lines); every
 * task completed with the right count; the stored events 1..N with no gap and one per key; every task's
 * worker SIGKILLed mid-stream and the task taken over by a later attempt, streams open when the instance
 * died (else the chaos missed). Prints a summary line; exits non-zero on any mismatch.
 *
 *   node --import tsx test/system/event-stream-chaos.ts
 *   EVENT_CHAOS_TASKS=4 EVENT_CHAOS_READERS=10 …   (also EVENT_CHAOS_ROWS, EVENT_CHAOS_THRESHOLD,
 *     EVENT_CHAOS_BATCH_MS, EVENT_CHAOS_CREATE_EVERY_MS, EVENT_CHAOS_KILLS_PER_TASK,
 *     EVENT_CHAOS_LEAVE_EVERY, EVENT_CHAOS_SEED)
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { META_IDEMPOTENCY_KEY } from '../../src/core/wire.ts';
import {
  expectedScanEvents,
  followTaskEvents,
  streamProblems,
  type FollowResult,
  type ScanArgs,
} from '../helpers/event-reader.ts';
import { CHAOS_ENV, startCluster, timedLog, type ClusterProcess } from '../helpers/system/cluster.ts';
import { Workload } from '../helpers/system/workload.ts';

const log = timedLog();
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const TASKS = env('EVENT_CHAOS_TASKS', 4);
const READERS = env('EVENT_CHAOS_READERS', 20);
const ARGS: ScanArgs = {
  rows: env('EVENT_CHAOS_ROWS', 20_000),
  batchSize: 100,
  batchMs: env('EVENT_CHAOS_BATCH_MS', 20),
  threshold: env('EVENT_CHAOS_THRESHOLD', 150),
};
const CREATE_EVERY_MS = env('EVENT_CHAOS_CREATE_EVERY_MS', 3_000);
/** A task's worker is SIGKILLed this many times, each at a random point between 10 % and 70 % of its events. */
const KILLS_PER_TASK = env('EVENT_CHAOS_KILLS_PER_TASK', 2);
/** A reader leaves a connection after 1 to 2 × this many of its events (uniformly drawn). */
const LEAVE_EVERY = env('EVENT_CHAOS_LEAVE_EVERY', 1_000);
const SEED = env('EVENT_CHAOS_SEED', Math.floor(Math.random() * 2 ** 31));
const DEADLINE_MS = 300_000;

/** A small seeded generator (mulberry32): a run's draws (kill marks, leaves, pauses) come from its printed seed. */
const random = (() => {
  let a = SEED >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
})();
const between = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));

const expected = expectedScanEvents(ARGS);
const matches = expected.filter((e) => e.type === 'com.example.scan/row').length;

// ---------- the cluster ----------
const cluster = await startCluster({ name: 'event-stream-chaos', instances: 2, workers: 2, env: CHAOS_ENV });
const { http, workers } = cluster;
log(
  `nginx ${cluster.url} → http :${cluster.ports.join(', :')}; 2 workers; ${cluster.database.describe}; seed ${SEED}`,
);
/** Its `rpc` (retrying through outages) and `poll`; no jobs of its own. */
const client = new Workload({
  url: cluster.url,
  httpPorts: cluster.ports,
  counts: { analyze: 0, confirm: 0, cancel: 0, fail: 0 },
});

/** The tasks created so far, and their readers. */
const tasks: string[] = [];
const reads: Array<Promise<FollowResult>> = [];

// ---------- chaos ----------
// Driven by the tasks' progress (not by the clock), so that the kills land mid-stream however fast the
// machine: each task's worker is SIGKILLed when the task has written a random share of its events (and
// started again a moment later); the instance when all the tasks together have written a quarter of their
// events, and again at two thirds.
const kills = { workers: 0, instances: 0 };
/** When the instance was SIGKILLed. */
const instanceKills: number[] = [];
/** The tasks whose worker was SIGKILLed while it held them. */
const killedTasks = new Set<string>();
/** Per task: the event counts at which its worker is killed (ascending). */
const killAt = new Map<string, number[]>();
const instanceKillAt = [0.25, 0.66].map((share) => Math.round(share * TASKS * expected.length));
let chaosFailures = 0;
let running = true;
const restarts: Promise<void>[] = [];

async function restartLater(proc: ClusterProcess, downMs: number): Promise<void> {
  await sleep(downMs);
  await proc.restart();
  log(`${proc.name} started again (pid ${proc.pid})`);
}

function chaosStep(what: string, step: () => Promise<void>): Promise<void> {
  return step().catch((err: unknown) => {
    log(`CHAOS STEP FAILED (${what}): ${String(err)}`);
    chaosFailures++;
  });
}

interface Progress {
  task_id: string;
  status: string;
  event_seq: number;
  attempt: number;
  pid: string | null;
}
/** The tasks' progress, read every 200 ms by both loops. */
let progress: Progress[] = [];
const watcher = await cluster.database.connect();
const progressReader = (async () => {
  while (running) {
    progress = (
      await watcher
        .query<Progress>(
          `select task_id, status, event_seq, attempt, split_part(leased_by, ':', 2) as pid from tasks
            where task_id = any($1) order by created_at`,
          [tasks],
        )
        .catch(() => ({ rows: progress }))
    ).rows;
    await sleep(200);
  }
})();

/** SIGKILLs the worker holding a task that passed its next mark (it starts again a moment later). */
const workerKiller = (async () => {
  while (running) {
    for (const p of progress) {
      const marks = killAt.get(p.task_id) ?? [];
      const holder = workers.find((w) => w.alive && String(w.pid) === p.pid);
      if (p.status !== 'working' || marks.length === 0 || p.event_seq < marks[0]! || holder === undefined)
        continue;
      marks.shift();
      await chaosStep(`SIGKILL ${holder.name}`, async () => {
        const pid = holder.pid;
        await holder.kill('SIGKILL');
        kills.workers++;
        killedTasks.add(p.task_id);
        log(`SIGKILL ${holder.name} (pid ${pid}), holding task ${p.task_id} at event ${p.event_seq}`);
        restarts.push(chaosStep(`restart ${holder.name}`, () => restartLater(holder, between(200, 1_500))));
      });
    }
    await sleep(100);
  }
})();

/** SIGKILLs the first instance at each mark of all the tasks' events together, and starts it again. */
const instanceKiller = (async () => {
  while (running && instanceKillAt.length > 0) {
    const written = progress.reduce((n, p) => n + p.event_seq, 0);
    if (written >= instanceKillAt[0]!) {
      instanceKillAt.shift();
      const instance = http[0]!;
      await chaosStep(`SIGKILL ${instance.name}`, async () => {
        const pid = instance.pid;
        instanceKills.push(Date.now());
        await instance.kill('SIGKILL');
        kills.instances++;
        log(`SIGKILL ${instance.name} (pid ${pid}) at ${written} events written`);
        await restartLater(instance, between(500, 2_000));
      });
    }
    await sleep(100);
  }
})();

// ---------- tasks and readers ----------
/** Creates a task through nginx (an idempotency key: a create retried after a lost reply makes no second). */
async function createTask(): Promise<string> {
  const reply = await client.rpc(
    'tools/call',
    { name: 'scan_rows', arguments: { ...ARGS } },
    { meta: { [META_IDEMPOTENCY_KEY]: randomUUID() } },
  );
  const taskId = reply.body.result?.taskId as string | undefined;
  if (taskId === undefined) throw new Error(`tools/call created no task: ${reply.text.slice(0, 300)}`);
  return taskId;
}

/** One reader of one task: starts a little after the task, leaves at random points, resumes with after. */
async function readTask(taskId: string, reader: number): Promise<FollowResult> {
  await sleep(between(0, 2_000));
  let leaveAt = 0;
  return followTaskEvents({
    url: cluster.url,
    taskId,
    // Half of the readers start with after=0, the others without a cursor.
    ...(reader % 2 === 0 ? { after: 0 } : {}),
    expected,
    keep: false,
    leaveAfter: (_event, n) => {
      if (n === 1) leaveAt = between(1, 2 * LEAVE_EVERY);
      return n >= leaveAt;
    },
    pauseMs: () => between(0, 300),
    timeoutMs: DEADLINE_MS,
  });
}

let exitCode = 1;
const started = Date.now();
try {
  log(
    `${TASKS} tasks of scan_rows ${JSON.stringify(ARGS)} (${expected.length + 1} events each), one every ${CREATE_EVERY_MS} ms; ` +
      `${READERS} readers of each through nginx, leaving a connection after 1–${2 * LEAVE_EVERY} events`,
  );
  for (let i = 0; i < TASKS; i++) {
    if (i > 0) await sleep(CREATE_EVERY_MS);
    const taskId = await createTask();
    tasks.push(taskId);
    const marks = Array.from({ length: KILLS_PER_TASK }, () =>
      between(0.1 * expected.length, 0.7 * expected.length),
    );
    killAt.set(
      taskId,
      marks.sort((a, b) => a - b),
    );
    for (let r = 0; r < READERS; r++) reads.push(readTask(taskId, r));
  }
  const done: FollowResult[] = [];
  const ticker = setInterval(() => logProgress(done.length), 15_000);
  const results = await Promise.allSettled(reads.map((r) => r.then((v) => (done.push(v), v))));
  clearInterval(ticker);
  log(`reads done in ${((Date.now() - started) / 1000).toFixed(0)} s; stopping the chaos`);
  running = false;
  await Promise.all([progressReader, workerKiller, instanceKiller]);
  await Promise.all(restarts);
  await watcher.end();
  exitCode = (await audit(results)) === 0 ? 0 : 1;
} finally {
  await cluster.stop();
}
process.exit(exitCode);

/** Where the tasks stand (their last event written), and how many reads ended. */
function logProgress(readsDone: number): void {
  const state = (p: Progress) => (p.status === 'working' ? `attempt ${p.attempt}` : p.status);
  log(
    `  events written: ${progress.map((p) => `${p.event_seq} (${state(p)})`).join(', ')}; reads done: ${readsDone}/${reads.length}`,
  );
}

// ---------- the audit ----------
async function audit(results: PromiseSettledResult<FollowResult>[]): Promise<number> {
  let failures = chaosFailures;
  const fail = (what: string, items: readonly unknown[]) => {
    if (items.length === 0) return;
    failures += items.length;
    log(`FAIL ${what}: ${items.length}`);
    for (const item of items.slice(0, 5))
      log(`    ${typeof item === 'string' ? item : JSON.stringify(item)}`);
  };
  fail(
    'readers that gave up',
    results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : [])),
  );
  const readsDone = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  // (The readers of one task mostly say the same: each problem once, with how many readers saw it.)
  const problems = new Map<string, number>();
  for (const r of readsDone) {
    const problem = streamProblems(r, { expected });
    if (problem !== undefined) problems.set(problem, (problems.get(problem) ?? 0) + 1);
  }
  fail(
    'reads not exactly 1..N once, ending with the final status, each event the expected one',
    [...problems].map(([problem, n]) => `${n} readers: ${problem}`),
  );

  // The tasks, as a client sees them, and as stored.
  for (const taskId of tasks) {
    const t = await client
      .poll(taskId, (task) => task.status !== 'working', 60_000)
      .catch((err: unknown) => ({ status: String(err) }) as Record<string, any>);
    const ok =
      t.status === 'completed' &&
      t.result?.structuredContent?.matches === matches &&
      t._meta?.['dev.durable-mcp-tasks/latestEventSeq'] === expected.length + 1;
    if (!ok) fail(`task ${taskId} not completed as expected`, [JSON.stringify(t).slice(0, 400)]);
  }
  const db = await cluster.database.connect();
  const attempts = new Map<string, number>();
  try {
    const { rows } = await db.query<{
      task_id: string;
      event_seq: number;
      n: string;
      keys: string;
      min: number | null;
      max: number | null;
      attempts: string;
    }>(
      `select t.task_id, t.event_seq, count(e.seq) as n, count(distinct e.key) as keys, min(e.seq) as min,
              max(e.seq) as max, (select count(*) from task_attempts a where a.task_id = t.task_id) as attempts
         from tasks t left join task_events e using (task_id) where t.task_id = any($1) group by t.task_id`,
      [tasks],
    );
    fail(
      'tasks whose stored events are not 1..N, one per key, N the expected count',
      rows
        .filter(
          (r) =>
            r.event_seq !== expected.length ||
            Number(r.n) !== expected.length ||
            Number(r.keys) !== expected.length ||
            r.min !== 1 ||
            r.max !== expected.length,
        )
        .map((r) => ({ ...r, expected: expected.length })),
    );
    for (const r of rows) attempts.set(r.task_id, Number(r.attempts));
  } finally {
    await db.end();
  }

  const connections = readsDone.flatMap((r) => r.connections);
  const count = (end: string) => connections.filter((c) => c.end === end).length;
  const received = readsDone.reduce((n, r) => n + r.received, 0);
  const duplicates = readsDone.reduce((n, r) => n + r.duplicates, 0);
  const gaps = readsDone.reduce((n, r) => n + r.gaps, 0);
  const wrong = readsDone.reduce((n, r) => n + r.wrong, 0);
  log(
    `attempts per task: ${tasks.map((t) => attempts.get(t)).join(', ')}; connections: ${connections.length} ` +
      `(left on purpose ${count('left')}, cut ${count('cut')}, failed ${count('failed')}, complete ${count('complete')})`,
  );
  const failedWith = new Map<string, number>();
  for (const c of connections)
    if (c.end === 'failed') failedWith.set(c.detail ?? '', (failedWith.get(c.detail ?? '') ?? 0) + 1);
  if (failedWith.size > 0)
    log(`  failed connections (a retry follows each): ${JSON.stringify(Object.fromEntries(failedWith))}`);
  // The streams open when the instance was killed: about half went through it (round-robin).
  const across = connections.filter((c) => instanceKills.some((at) => c.startedAt < at && c.endedAt >= at));
  const acrossBy = new Map<string, number>();
  for (const c of across) acrossBy.set(c.end, (acrossBy.get(c.end) ?? 0) + 1);
  log(`streams open at an instance kill: ${across.length} (${JSON.stringify(Object.fromEntries(acrossBy))})`);
  fail(
    'tasks whose worker was never SIGKILLed mid-stream',
    tasks.filter((t) => !killedTasks.has(t)),
  );
  fail(
    'tasks SIGKILLed mid-stream but never taken over by a later attempt',
    tasks.filter((t) => killedTasks.has(t) && (attempts.get(t) ?? 0) < 2),
  );
  if (kills.instances === 0 || across.length === 0)
    fail('no stream was open when the instance was killed (the kills missed)', [JSON.stringify(kills)]);
  fail(
    'processes that exited by themselves',
    cluster.unexpectedExits.map((e) => `${e.name}: ${e.code ?? e.signal}`),
  );
  console.log(
    `event-stream chaos: tasks ${tasks.length}, events ${received} (${expected.length + 1} per task × ${READERS} readers), ` +
      `reconnects ${connections.length - readsDone.length}, kills ${kills.workers} workers + ${kills.instances} instance, ` +
      `duplicates ${duplicates}, gaps ${gaps}, wrong ${wrong}; ${failures} failures; ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  return failures;
}
