// What the events scenario's parts share: the two principals (bearer tokens), tasks/stream as a light
// client (no wire validation: a thousand of them share the bench process), and the counters a window of
// load is measured with.
import pg from 'pg';
import { TASK_EVENT_NOTIFICATION } from '../../src/core/task-events.ts';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { mcpHeaders, mcpRequest } from '../../test/helpers/mcp.ts';
import { readSse, type SseStream } from '../../test/helpers/sse.ts';
import type { ScratchDb } from './harness.ts';
import { rpcClient } from './sequential.ts';

const TOKENS = { alice: 'alice-events-token', bob: 'bob-events-token' } as const;
export type Principal = keyof typeof TOKENS;

/** The servers' settings for bearer tokens of alice and bob. */
export const AUTH_ENV = {
  AUTH_MODE: 'bearer',
  AUTH_TOKENS: Object.entries(TOKENS)
    .map(([p, t]) => `${p}=${hashToken(t)}`)
    .join(','),
};

export const bearer = (who: Principal) => ({ authorization: `Bearer ${TOKENS[who]}` });

/** One request at a time to `url` as `who`. */
export const clientOf = (url: string, who: Principal) => rpcClient(url, bearer(who));
export type Rpc = ReturnType<typeof clientOf>;

/** A `notifications/tasks/event` message's params. */
export interface EventParams {
  taskId: string;
  seq: number;
  type: string;
  payload: Record<string, any>;
}

/** The event a message carries, or undefined (the result, another notification). */
export const eventOf = (message: Record<string, any>): EventParams | undefined =>
  message.method === TASK_EVENT_NOTIFICATION ? (message.params as EventParams) : undefined;

/**
 * tasks/stream of `who`'s task after `after` (without: from its earliest event), live: `onMessage` sees
 * each message as it is parsed, before `next()` hands it out. Throws unless the answer is a stream.
 */
export async function openEventStream(
  url: string,
  who: Principal,
  taskId: string,
  opts: { after?: number | undefined; onMessage?: (message: Record<string, any>) => void } = {},
): Promise<SseStream> {
  const params = opts.after === undefined ? { taskId } : { taskId, after: opts.after };
  const abort = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    signal: abort.signal,
    headers: mcpHeaders('tasks/stream', params, bearer(who)),
    body: JSON.stringify(mcpRequest('tasks/stream', params)),
  });
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    throw new Error(`tasks/stream of ${taskId}: HTTP ${res.status}, ${(await res.text()).slice(0, 300)}`);
  }
  return readSse(res, abort, opts.onMessage);
}

/** Polls the task until it ends (or `timeoutMs` passes); its last tasks/get. */
export async function untilTerminal(call: Rpc, taskId: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const task = await call('tasks/get', { taskId });
    if (task.status !== 'working') return task;
    if (Date.now() > deadline) throw new Error(`task ${taskId} still working after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A server's shared reads of task events so far (its /metrics: durable_mcp_task_event_reads_total). */
export async function eventReadsSoFar(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('durable_mcp_task_event_reads_total '));
  if (line === undefined) throw new Error('no durable_mcp_task_event_reads_total on /metrics');
  return Number(line.split(' ')[1]);
}

/** The events the tasks have appended so far (their rows' event_seq). */
export async function eventsSoFar(db: ScratchDb, taskIds: readonly string[]): Promise<number> {
  const [row] = await db.sql<{ n: number }>(
    'select coalesce(sum(event_seq), 0)::int as n from tasks where task_id = any($1)',
    [taskIds],
  );
  return row!.n;
}

/** A client of its own on the scratch database (the floors' inserts). */
export async function pgClient(db: ScratchDb): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  return client;
}
