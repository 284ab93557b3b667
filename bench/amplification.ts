/**
 * The amplification scenario of bench/run.ts (#22): what idle streams cost the others. Bob holds
 * IDLE_STREAMS 2025-11-25 GET streams open on one session, then RESULT_WAITS tasks/result waits, while
 * tasks are created at CREATES_PER_SECOND (bob's, run by a worker); alice's tasks/get is measured beside the same run without the streams (the
 * floor), and so are the database commits and this server's reads of changed tasks per task change.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CHANNELS } from '../src/events/change-feed.ts';
import { hashToken } from '../src/http/auth/static-tokens.ts';
import { openRev2025Session, openSessionGet } from '../test/helpers/rev2025-session.ts';
import { rev2025Headers, readReply } from '../test/helpers/mcp.ts';
import type { SseStream } from '../test/helpers/sse.ts';
import {
  DURATION,
  fmt,
  load,
  MCP_HEADERS,
  rows,
  rpcBody,
  type LoadResult,
  type ScratchDb,
} from './lib/harness.ts';
import { mcpUrl, server, worker } from './lib/processes.ts';

const IDLE_STREAMS = Number(process.env.BENCH_IDLE_STREAMS ?? 300);
const RESULT_WAITS = Number(process.env.BENCH_RESULT_WAITS ?? 1_000);
const CREATES_PER_SECOND = 20;
const TOKENS = { alice: 'alice-bench-token', bob: 'bob-bench-token' } as const;
type Principal = keyof typeof TOKENS;
const AUTH_ENV = {
  AUTH_MODE: 'bearer',
  AUTH_TOKENS: Object.entries(TOKENS)
    .map(([p, t]) => `${p}=${hashToken(t)}`)
    .join(','),
};
const bearer = (p: Principal) => ({ authorization: `Bearer ${TOKENS[p]}` });

/** A 2026-07-28 request of `who`'s; its result. */
async function call(
  url: string,
  who: Principal,
  method: string,
  params: Record<string, unknown>,
  name?: string,
) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...MCP_HEADERS(method, name), ...bearer(who) },
    body: rpcBody(method, params),
  });
  const body = (await res.json()) as { result?: Record<string, unknown>; error?: unknown };
  if (body.result === undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

/** Bob creates tasks at CREATES_PER_SECOND until stopped (each a change when created, and when done). */
function churn(url: string): () => Promise<void> {
  const inFlight = new Set<Promise<unknown>>();
  const timer = setInterval(() => {
    const p = call(
      url,
      'bob',
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 10 } },
      'analyze_numbers',
    )
      .catch(() => {})
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  }, 1000 / CREATES_PER_SECOND);
  return async () => {
    clearInterval(timer);
    await Promise.all(inFlight);
  };
}

/** This server's reads of changed tasks so far (its /metrics; 0 for a server without the counter). */
async function changeReads(url: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', url))).text();
  const line = text.split('\n').find((l) => l.startsWith('durable_mcp_task_change_reads_total '));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

interface Window {
  changes: number;
  commits: number;
  reads: number;
}

/** What one window of `seconds` costs: the task changes announced, the database's commits, our reads. */
async function measureWindow(db: ScratchDb, url: string, seconds: number): Promise<Window> {
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  let changes = 0;
  listener.on('notification', () => changes++);
  await listener.query(`listen ${CHANNELS.task}`);
  const commits = async () =>
    Number(
      (
        await db.sql<{ n: string }>(
          'select xact_commit as n from pg_stat_database where datname = current_database()',
        )
      )[0]!.n,
    );
  const [c0, r0] = [await commits(), await changeReads(url)];
  await sleep(seconds * 1000);
  const [c1, r1] = [await commits(), await changeReads(url)];
  await listener.end();
  return { changes, commits: c1 - c0, reads: r1 - r0 };
}

/** What bob holds open through a phase: opened before it, closed by what it returns. */
type Holding = (url: string) => Promise<() => Promise<void>>;

const nothing: Holding = async () => async () => {};

/** `n` idle GET streams on one session of bob's. */
const idleStreams =
  (n: number): Holding =>
  async (url) => {
    const open: SseStream[] = [];
    const session = await openRev2025Session(url, {}, bearer('bob'));
    for (let i = 0; i < n; i++) open.push(await openSessionGet(url, session, undefined, bearer('bob')));
    return async () => {
      for (const s of open) s.close();
    };
  };

/** `n` tasks/result waits of bob's, each on a task of his that waits for a signal; his tasks are cancelled after. */
const resultWaits =
  (n: number): Holding =>
  async (url) => {
    const session = await openRev2025Session(url, { tasks: {} }, bearer('bob'));
    let id = 0;
    const post = (method: string, params: object, signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: rev2025Headers({ sessionId: session }, bearer('bob')),
        body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
        ...(signal === undefined ? {} : { signal }),
      });
    const taskIds: string[] = [];
    for (let i = 0; i < n; i++) {
      const task = { ttl: 3_600_000 };
      const created = await readReply(
        await post('tools/call', { name: 'approved_export', arguments: { batches: 1 }, task }),
      );
      taskIds.push(created.body.result.task.taskId as string);
    }
    const waits = new AbortController();
    // Each wait's answer turns into an SSE stream after a second: its headers are the sign it is open.
    const opened = await Promise.all(taskIds.map((taskId) => post('tasks/result', { taskId }, waits.signal)));
    const refused = opened.filter((res) => res.status !== 200).length;
    if (refused > 0) throw new Error(`${refused} of bob's ${n} tasks/result waits were refused`);
    return async () => {
      for (const taskId of taskIds) await readReply(await post('tasks/cancel', { taskId }));
      waits.abort();
    };
  };

/** The churn on, what bob holds open: its window, then alice's tasks/get under load. */
async function phase(db: ScratchDb, url: string, taskId: string, holding: Holding) {
  const close = await holding(url);
  const stop = churn(url);
  try {
    // Postgres counts an idle connection's commits up to 10 s late: opening the streams must not count.
    await sleep(11_000);
    const window = await measureWindow(db, url, DURATION);
    const get = await load(url, {
      headers: { ...MCP_HEADERS('tasks/get', taskId), ...bearer('alice') },
      body: rpcBody('tasks/get', { taskId }),
    });
    return { window, get };
  } finally {
    await stop();
    await close();
  }
}

const perChange = (w: Window, n: number) => (w.changes === 0 ? 0 : n / w.changes);
const perChangeText = (w: Window) =>
  `${perChange(w, w.commits).toFixed(1)} commits, ${perChange(w, w.reads).toFixed(2)} change reads per change (${w.changes} changes)`;
const latency = (o: LoadResult, f: LoadResult) => `p50 ${fmt.x(o.p50 / f.p50)}, p99 ${fmt.x(o.p99 / f.p99)}`;

type Phase = Awaited<ReturnType<typeof phase>>;

/** The two rows of a phase in which bob held `held` (`things` when he held none: the floor). */
function phaseRows(held: string, things: string, ours: Phase, floor: Phase) {
  return [
    {
      scenario: `alice's tasks/get, ${held} of bob's, ${CREATES_PER_SECOND} creates/s`,
      ours: fmt.rps(ours.get),
      floor: `no ${things}: ${fmt.rps(floor.get)}`,
      ratio: latency(ours.get, floor.get),
      target: '≈ 1×',
    },
    {
      scenario: `the same: database per task change`,
      ours: perChangeText(ours.window),
      floor: `no ${things}: ${perChangeText(floor.window)}`,
      ratio: fmt.x(
        perChange(ours.window, ours.window.commits) / perChange(floor.window, floor.window.commits),
      ),
      target: `≈ 1× (not × ${things})`,
    },
  ];
}

// ---- idle streams: what they cost everyone else ----
export async function benchAmplification(db: ScratchDb): Promise<void> {
  const srv = await server(db, AUTH_ENV);
  const wrk = await worker(db);
  try {
    const url = mcpUrl(srv);
    const created = await call(
      url,
      'alice',
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 1000 } },
      'analyze_numbers',
    );
    const taskId = created.taskId as string;
    for (let i = 0; (await call(url, 'alice', 'tasks/get', { taskId }, taskId)).status !== 'completed'; i++) {
      if (i > 300) throw new Error(`alice's task ${taskId} never completed`);
      await sleep(100);
    }
    const floor = await phase(db, url, taskId, nothing);
    const ours = await phase(db, url, taskId, idleStreams(IDLE_STREAMS));
    const waiting = await phase(db, url, taskId, resultWaits(RESULT_WAITS));
    rows.push(
      ...phaseRows(`${IDLE_STREAMS} idle GET streams`, 'streams', ours, floor),
      ...phaseRows(`${RESULT_WAITS} tasks/result waits`, 'waits', waiting, floor),
    );
  } finally {
    await wrk.stop();
    await srv.stop();
  }
}
