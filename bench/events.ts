/**
 * The events scenario of bench/run.ts (#34): task events, written with ctx.emit on a worker and read with
 * tasks/stream, each figure beside a floor measured in the same run. Two `server` processes behind real
 * nginx (deploy/mcp-locations.conf, round robin) and one `worker` process, serving
 * bench/lib/event-tools.ts, with bearer tokens for alice and bob.
 *
 *   - latency: BENCH_EVENT_SAMPLES (200) events of a `bench_ticks` task, 20 ms apart, each stamped with
 *     the wall-clock time of its emit on the worker and timed on arrival at a tasks/stream client
 *     through nginx (so read by a server instance, not the worker). Floor: as many synchronous `echo`
 *     tools/call round trips through the same nginx, half before and half after.
 *   - throughput: one `bench_flood` task (an awaited ctx.emit loop) for BENCH_EMIT_SECONDS (6 ×
 *     BENCH_DURATION: 60 s by default): events per second from its first append to its completion, and
 *     commits per event, counted from the statements: each append is one statement and one commit, and
 *     the events it wrote share its transaction's created_at. (pg_stat_database is no count for a window
 *     of seconds: a busy machine's backends report their commits up to a minute late, in lumps.) Floor:
 *     the same rows INSERTed into a table of task_events' shape in batches of the sizes ours wrote, one
 *     statement and one commit each, one after the other.
 *   - readers (bench/event-readers.ts): BENCH_EVENT_READERS (1,000) streams, then 10, on one instance
 *     following 10 tasks that emit 10 events/s each; and alice's tasks/get beside them.
 *   - reconnects (bench/event-readers.ts): BENCH_EVENT_RECONNECTS (100) aborts and resumes of a reader.
 *
 * BENCH_EVENT_PARTS (latency,reconnects,readers,throughput) runs some of the parts.
 */
import { TASK_EVENT_NOTIFICATION } from '../src/core/task-events.ts';
import { startNginx, type Nginx } from '../test/helpers/system/nginx.ts';
import { benchReaders, benchReconnects } from './event-readers.ts';
import { BENCH_EVENT, wallClockMs } from './lib/event-tools.ts';
import {
  AUTH_ENV,
  clientOf,
  openEventStream,
  pgClient,
  untilTerminal,
  type Rpc,
} from './lib/event-streams.ts';
import { DURATION, fmt, rows, type Proc, type ScratchDb } from './lib/harness.ts';
import { server, worker } from './lib/processes.ts';
import { pct } from './lib/sequential.ts';

const SAMPLES = Number(process.env.BENCH_EVENT_SAMPLES ?? 200);
const SAMPLE_INTERVAL_MS = 20;
/** Events of each latency run that are not timed: the stream may not be open yet when they are emitted. */
const UNTIMED = 5;
const FLOOD_SECONDS = Number(process.env.BENCH_EMIT_SECONDS ?? 6 * DURATION);
const TOOLS = ['--tools', 'bench/lib/event-tools.ts'];
const FLOOR_TABLE = 'bench_event_rows';

export interface Cluster {
  db: ScratchDb;
  servers: Proc[];
  worker: Proc;
  nginx: Nginx;
}

const summary = (ms: number[]) => `p50 ${pct(ms, 50).toFixed(2)} ms, p99 ${pct(ms, 99).toFixed(2)} ms`;

// ---- latency: ctx.emit on the worker → a tasks/stream client through nginx ----

/** One synchronous echo round trip (ms). */
async function echoOnce(call: Rpc): Promise<number> {
  const started = performance.now();
  await call('tools/call', { name: 'echo', arguments: { text: 'x' } });
  return performance.now() - started;
}

/** A bench_ticks task of `events` events, read live through nginx: each timed event's emit → arrival (ms). */
async function emitToClient(c: Cluster, call: Rpc, events: number): Promise<number[]> {
  const created = await call('tools/call', {
    name: 'bench_ticks',
    arguments: { events, intervalMs: SAMPLE_INTERVAL_MS },
  });
  const taskId = created.taskId as string;
  const ms: number[] = [];
  const stream = await openEventStream(c.nginx.url, 'bob', taskId, {
    onMessage: (m) => {
      const arrived = wallClockMs();
      if (m.method !== TASK_EVENT_NOTIFICATION || m.params.type !== BENCH_EVENT) return;
      if (m.params.payload.i > UNTIMED) ms.push(arrived - (m.params.payload.at as number));
    },
  });
  await stream.ended;
  if (ms.length !== events - UNTIMED) throw new Error(`${ms.length} of ${events - UNTIMED} events arrived`);
  return ms;
}

async function benchLatency(c: Cluster): Promise<void> {
  const call = clientOf(c.nginx.url, 'bob');
  for (let i = 0; i < 20; i++) await echoOnce(call);
  await emitToClient(c, call, UNTIMED + 20);
  const echo: number[] = [];
  for (let i = 0; i < SAMPLES / 2; i++) echo.push(await echoOnce(call));
  const events = await emitToClient(c, call, UNTIMED + SAMPLES);
  for (let i = 0; i < SAMPLES / 2; i++) echo.push(await echoOnce(call));
  rows.push({
    scenario: `ctx.emit on the worker → tasks/stream client through nginx (2 servers), ${SAMPLES} events ${SAMPLE_INTERVAL_MS} ms apart`,
    ours: summary(events),
    floor: `sync echo round trip through the same nginx: ${summary(echo)}`,
    ratio: `p50 ${fmt.x(pct(events, 50) / pct(echo, 50))}`,
    target: 'p50 ≤ 3×',
  });
}

// ---- throughput: one task emitting flat out ----

/** Runs a bench_flood task of `seconds` to completion; its id. */
async function flood(call: Rpc, seconds: number): Promise<string> {
  const created = await call('tools/call', { name: 'bench_flood', arguments: { seconds } });
  const taskId = created.taskId as string;
  const task = await untilTerminal(call, taskId, seconds * 1000 + 300_000);
  if (task.status !== 'completed') throw new Error(`bench_flood ended ${String(task.status)}`);
  return taskId;
}

/** What a flood task wrote: its events, the size of each append in order, first append → completion (s). */
async function written(db: ScratchDb, taskId: string) {
  const batches = await db.sql<{ n: number }>(
    'select count(*)::int as n from task_events where task_id = $1 group by created_at order by created_at',
    [taskId],
  );
  const [{ s }] = (await db.sql(
    `select extract(epoch from t.last_updated_at - min(e.created_at))::float8 as s
     from tasks t join task_events e using (task_id) where t.task_id = $1 group by t.last_updated_at`,
    [taskId],
  )) as [{ s: number }];
  const sizes = batches.map((b) => b.n);
  return { events: sizes.reduce((a, b) => a + b, 0), sizes, seconds: s };
}

/** The floor: the same rows as ours, INSERTed a batch per statement (and commit), ours' batch sizes in turn. */
async function insertFloor(db: ScratchDb, sizes: readonly number[]): Promise<number> {
  await db.sql(`create table ${FLOOR_TABLE} (like task_events including all)`);
  const client = await pgClient(db);
  try {
    let seq = 0;
    const started = performance.now();
    for (const size of sizes) {
      const seqs: number[] = [];
      const keys: string[] = [];
      const payloads: string[] = [];
      for (let k = 0; k < size; k++) {
        seqs.push(++seq);
        keys.push(`p0:${seq - 1}`);
        payloads.push(JSON.stringify({ i: seq }));
      }
      await client.query(
        `insert into ${FLOOR_TABLE} (task_id, seq, key, type, payload)
         select 'floor', s, k, $1, p from unnest($2::int[], $3::text[], $4::jsonb[]) as r(s, k, p)`,
        [BENCH_EVENT, seqs, keys, payloads],
      );
    }
    return (performance.now() - started) / 1000;
  } finally {
    await client.end();
  }
}

async function benchThroughput(c: Cluster): Promise<void> {
  const call = clientOf(c.nginx.url, 'bob');
  await flood(call, 1); // warm-up: the worker's JIT and pool
  const ours = await written(c.db, await flood(call, FLOOD_SECONDS));
  const floorSeconds = await insertFloor(c.db, ours.sizes);
  const rate = ours.events / ours.seconds;
  const floorRate = ours.events / floorSeconds;
  const mean = ours.events / ours.sizes.length;
  rows.push({
    scenario: `one task emitting flat out for ${FLOOD_SECONDS} s (an awaited ctx.emit loop)`,
    ours:
      `${Math.round(rate).toLocaleString('en')} events/s (${ours.events.toLocaleString('en')} in ` +
      `${ours.sizes.length.toLocaleString('en')} appends: ${(1 / mean).toFixed(4)} commits per event)`,
    floor:
      `pg, the same rows, one INSERT … unnest per batch of ours' sizes: ` +
      `${Math.round(floorRate).toLocaleString('en')} events/s`,
    ratio: fmt.x(rate / floorRate),
    target: '≥ 0.5×',
  });
}

// ---- the cluster ----

async function startCluster(db: ScratchDb): Promise<Cluster> {
  // (The readers' part opens BENCH_EVENT_READERS streams of bob's on one instance, past the default quota
  // once it asks for more than 1,000.)
  const env = { ...AUTH_ENV, MAX_EVENT_STREAMS_PER_PRINCIPAL: '1000000' };
  const servers = await Promise.all([0, 1].map(() => server(db, env, [], TOOLS)));
  const wrk = await worker(
    db,
    // The flood writes far past the default bound of a task's events (100,000).
    { METRICS_PORT: '', MAX_EVENTS_PER_TASK: '1000000000', MAX_EVENT_BYTES_PER_TASK: '1000000000000' },
    TOOLS,
  );
  const nginx = await startNginx(servers.map((s) => s.port));
  return { db, servers, worker: wrk, nginx };
}

const PARTS: Record<string, (c: Cluster) => Promise<void>> = {
  latency: benchLatency,
  reconnects: benchReconnects,
  readers: benchReaders,
  throughput: benchThroughput,
};
const CHOSEN_PARTS = (process.env.BENCH_EVENT_PARTS ?? Object.keys(PARTS).join(',')).split(',');

/** Each part's rows are in the table as soon as it ends: a part that fails leaves the ones before it. */
export async function benchEvents(db: ScratchDb): Promise<void> {
  const c = await startCluster(db);
  try {
    for (const [part, run] of Object.entries(PARTS)) if (CHOSEN_PARTS.includes(part)) await run(c);
  } finally {
    await c.nginx.stop();
    await Promise.all([c.worker.stop(), ...c.servers.map((s) => s.stop())]);
  }
}
