/**
 * The readers' parts of the events scenario (bench/events.ts, which starts the cluster):
 *
 *   - many readers: bob's FOLLOWED_TASKS (10) `bench_ticks` tasks emit BENCH_EVENT_RATE (2) events/s
 *     each while tasks/stream readers on one server instance follow them (as many on each; in a thread of
 *     the bench process's own): none, FEW_READERS (10), then BENCH_EVENT_READERS (1,000). Measured over
 *     BENCH_DURATION: the instance's shared reads of task events per event appended
 *     (durable_mcp_task_event_reads_total), which should not grow with the readers; then alice's tasks/get
 *     on the same instance, one at a time for BENCH_DURATION, against the same with no readers (bob's
 *     tasks emitting all the same).
 *   - reconnects: a reader of a task emitting 200 events/s through nginx processes 1–20 events, aborts and
 *     resumes with `after` (the last it processed), BENCH_EVENT_RECONNECTS (100) times, then reads to the
 *     end once the task is cancelled: every seq from 1 to the final status must arrive once.
 */
import type { Cluster } from './events.ts';
import {
  clientOf,
  eventOf,
  eventReadsSoFar,
  eventsSoFar,
  openEventStream,
  untilTerminal,
  type Rpc,
} from './lib/event-streams.ts';
import { DURATION, fmt, rows } from './lib/harness.ts';
import { mcpUrl } from './lib/processes.ts';
import { readersInThread, type Readers } from './lib/reader-thread.ts';
import { pct } from './lib/sequential.ts';

const READERS = Number(process.env.BENCH_EVENT_READERS ?? 1_000);
const FEW_READERS = 10;
const FOLLOWED_TASKS = 10;
/** Events per second of each followed task. */
const FOLLOWED_RATE = Number(process.env.BENCH_EVENT_RATE ?? 2);
/** Between the streams' opening and the window. */
const SETTLE_MS = 2_000;
const RECONNECTS = Number(process.env.BENCH_EVENT_RECONNECTS ?? 100);
const RECONNECT_INTERVAL_MS = 5;
/** Enough for any run: the tasks are cancelled when done with. */
const FOREVER = 10_000_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** tasks/get of `taskId`, one at a time for `seconds`: each one's latency (ms). */
async function pollGets(call: Rpc, taskId: string, seconds: number): Promise<number[]> {
  const end = Date.now() + seconds * 1000;
  const ms: number[] = [];
  while (Date.now() < end) {
    const started = performance.now();
    await call('tasks/get', { taskId });
    ms.push(performance.now() - started);
  }
  return ms;
}

/** `n` bench_ticks tasks of the caller's emitting every `intervalMs` until cancelled; their ids. */
async function tickers(call: Rpc, n: number, intervalMs: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const created = await call('tools/call', {
      name: 'bench_ticks',
      arguments: { events: FOREVER, intervalMs },
    });
    ids.push(created.taskId as string);
  }
  return ids;
}

interface ReadersWindow {
  events: number;
  reads: number;
  sent: number;
}

/**
 * `readers` streams (in a thread of their own) on the first server following bob's tasks: a window of
 * counts, then alice's tasks/get.
 */
async function withReaders(c: Cluster, readers: number, aliceTask: string) {
  const srv = c.servers[0]!;
  const bob = clientOf(mcpUrl(srv), 'bob');
  const tasks = await tickers(bob, FOLLOWED_TASKS, 1000 / FOLLOWED_RATE);
  let open: Readers | undefined;
  try {
    open =
      readers === 0
        ? undefined
        : await readersInThread({ url: mcpUrl(srv), who: 'bob', taskIds: tasks, readers });
    const counts = async (): Promise<ReadersWindow & { silent: number }> => {
      const got = await open?.counts();
      return {
        events: await eventsSoFar(c.db, tasks),
        reads: await eventReadsSoFar(srv.port),
        sent: got?.messages ?? 0,
        silent: got?.silent ?? 0,
      };
    };
    // (The streams' catch-up reads, as they open, are their own: the window starts after them.)
    await sleep(SETTLE_MS);
    const before = await counts();
    await sleep(DURATION * 1000);
    const after = await counts();
    if (after.silent > 0) throw new Error(`${after.silent} of ${readers} readers got nothing`);
    const gets = await pollGets(clientOf(mcpUrl(srv), 'alice'), aliceTask, DURATION);
    const window = {
      events: after.events - before.events,
      reads: after.reads - before.reads,
      sent: after.sent - before.sent,
    };
    return { window, gets };
  } finally {
    for (const taskId of tasks) await bob('tasks/cancel', { taskId });
    await open?.end();
  }
}

const perEvent = (w: ReadersWindow, n: number) => (w.events === 0 ? 0 : n / w.events);
const latencies = (ms: number[]) =>
  `p50 ${pct(ms, 50).toFixed(2)} ms, p99 ${pct(ms, 99).toFixed(2)} ms (${ms.length.toLocaleString('en')} gets)`;

export async function benchReaders(c: Cluster): Promise<void> {
  const alice = clientOf(mcpUrl(c.servers[0]!), 'alice');
  const created = await alice('tools/call', { name: 'bench_ticks', arguments: { events: 1, intervalMs: 0 } });
  const aliceTask = created.taskId as string;
  await untilTerminal(alice, aliceTask, 60_000);
  const idle = await withReaders(c, 0, aliceTask);
  const few = await withReaders(c, FEW_READERS, aliceTask);
  const many = await withReaders(c, READERS, aliceTask);
  const counted = ({ window: w }: { window: ReadersWindow }) =>
    `${perEvent(w, w.reads).toFixed(2)} reads per event (${w.events} events, ${w.sent.toLocaleString('en')} sent)`;
  rows.push(
    {
      scenario: `${READERS} tasks/stream readers on one instance, ${FOLLOWED_TASKS} tasks × ${FOLLOWED_RATE} events/s: shared reads per event`,
      ours: counted(many),
      floor: `${FEW_READERS} readers: ${counted(few)}`,
      ratio: fmt.x(perEvent(many.window, many.window.reads) / perEvent(few.window, few.window.reads)),
      target: '≈ 1× (not × readers)',
    },
    {
      scenario: `alice's tasks/get, one at a time, same instance, while ${READERS} readers follow bob's tasks`,
      ours: latencies(many.gets),
      floor: `no readers (bob's tasks emitting): ${latencies(idle.gets)}`,
      ratio: `p50 ${fmt.x(pct(many.gets, 50) / pct(idle.gets, 50))}, p99 ${fmt.x(pct(many.gets, 99) / pct(idle.gets, 99))}`,
      target: 'p99 ≤ 1.5×',
    },
  );
}

// ---- reconnects ----

/** A small deterministic generator (so that every run reconnects at the same points). */
function randomInts(seed: number) {
  let state = seed;
  return (max: number) => {
    state = (state * 48_271) % 2_147_483_647; // (MINSTD: exact in doubles)
    return 1 + (state % max);
  };
}

/** Reads up to `take` events from a new connection after `after`; the seqs processed, and the ms to the first. */
async function readSome(c: Cluster, taskId: string, after: number | undefined, take: number) {
  const started = performance.now();
  const stream = await openEventStream(c.nginx.url, 'bob', taskId, { after });
  const seqs: number[] = [];
  let first = 0;
  let final = false;
  try {
    while (seqs.length < take && !final) {
      const event = eventOf(await stream.next(10_000));
      if (event === undefined) break; // the result: the stream's end
      if (seqs.length === 0) first = performance.now() - started;
      seqs.push(event.seq);
      final = event.type === 'dev.durable-mcp-tasks/status';
    }
  } finally {
    stream.close();
  }
  return { seqs, first, final };
}

export async function benchReconnects(c: Cluster): Promise<void> {
  const bob = clientOf(c.nginx.url, 'bob');
  const [taskId] = await tickers(bob, 1, RECONNECT_INTERVAL_MS);
  const next = randomInts(34);
  const seqs: number[] = [];
  const firsts: number[] = [];
  let final = false;
  for (let r = 0; r <= RECONNECTS && !final; r++) {
    if (r === RECONNECTS) await bob('tasks/cancel', { taskId: taskId! });
    const read = await readSome(c, taskId!, seqs.at(-1), r === RECONNECTS ? Infinity : next(20));
    seqs.push(...read.seqs);
    if (read.seqs.length > 0) firsts.push(read.first);
    final = read.final;
  }
  const duplicates = seqs.length - new Set(seqs).size;
  const last = Math.max(...seqs);
  const gaps = last - new Set(seqs).size;
  const outOfOrder = seqs.filter((s, i) => i > 0 && s <= seqs[i - 1]!).length;
  rows.push({
    scenario: `${RECONNECTS} forced reconnects of a reader through nginx (abort, resume with after), ${1000 / RECONNECT_INTERVAL_MS} events/s`,
    ours:
      `${duplicates} duplicates, ${gaps} gaps, ${outOfOrder} out of order in ${seqs.length.toLocaleString('en')} events` +
      `${final ? ', ended with its status' : ', NO final status'}; resume → first event p50 ${pct(firsts, 50).toFixed(1)} ms`,
    floor: '-',
    ratio: '-',
    target: '0 duplicates, 0 gaps',
  });
}
