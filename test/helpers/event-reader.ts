/**
 * A resuming reader of one task's events (tasks/stream, SEP-2694 draft), as a client that must see
 * every event once: it reads the stream (streamTaskEvents) and, whenever a connection ends before the
 * stream's result (it left on purpose, the instance died, the balancer cut it, a 5xx), opens it again
 * with `after` = the last seq it got, on the next of its URLs. It records what such a client would
 * notice: duplicates (a seq not after the last one), gaps (seqs skipped), reconnects, and events other
 * than the ones expected. For the crash tests (test/processes/task-events-*.test.ts), the isolation test
 * and the chaos run (test/system/event-stream-chaos.ts); no vitest import.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { SCAN_ROW_EVENT, scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { streamTaskEvents } from './mcp.ts';

const EVENT = 'notifications/tasks/event';
export const STATUS_EVENT = 'dev.durable-mcp-tasks/status';
const PARTIAL_EVENT = 'dev.durable-mcp-tasks/partial';

/** An event as the reader got it. */
export interface ReceivedEvent {
  seq: number;
  type: string;
  payload: Record<string, any>;
}

/** What an event should be (its seq is its place in the list, from 1). */
export type ExpectedEvent = Omit<ReceivedEvent, 'seq'>;

/** How one connection ended. */
export type ConnectionEnd =
  /** The stream's result came: the task ended and every event was sent. */
  | 'complete'
  /** The reader aborted the fetch (`leaveAfter`). */
  | 'left'
  /** The stream ended without its result (the instance stopped or died, the balancer cut it). */
  | 'cut'
  /** No stream: a transport error, a 5xx, -32603. */
  | 'failed';

export interface Connection {
  url: string;
  after: number | undefined;
  /** Events it delivered. */
  events: number;
  end: ConnectionEnd;
  detail?: string;
  /** When it was opened and when it ended (ms since the epoch). */
  startedAt: number;
  endedAt: number;
}

export interface FollowOptions {
  /** The endpoint, or several (instances): after a cut or a failure the next connection takes the next URL. */
  url: string | readonly string[];
  taskId: string;
  /** The first connection's cursor (default none: from the earliest event kept). */
  after?: number;
  headers?: Record<string, string>;
  /** Asked after each event: true aborts the fetch there, and the reader resumes after that event. */
  leaveAfter?: (event: ReceivedEvent, inConnection: number) => boolean;
  /** The pause before resuming after a leave (default none); after a cut or a failure it is 100 ms. */
  pauseMs?: () => number;
  /** Events 1, 2, 3… should be these (the final status comes after them): others are counted `wrong`. */
  expected?: readonly ExpectedEvent[];
  /** Keep every event in `events` (default true; a long chaos run keeps counts only). */
  keep?: boolean;
  /** Throws when the stream has not ended after this long (default 120 s). */
  timeoutMs?: number;
}

export interface FollowResult {
  taskId: string;
  /** Every event as it came, duplicates included (empty with `keep: false`). */
  events: ReceivedEvent[];
  /** Events received, duplicates included. */
  received: number;
  /** Events whose seq was not after the last one received. */
  duplicates: number;
  /** Seqs skipped: an event whose seq was past the next one. */
  gaps: number;
  /** Events unlike the expected one at their seq (with `expected`), and the first few of them. */
  wrong: number;
  firstWrong: string[];
  /** The last event received: the final status when the stream ended as it should. */
  last: ReceivedEvent | undefined;
  connections: Connection[];
}

/** A stream refused with a JSON-RPC error a retry would not change (not found, a bad cursor, events gone). */
export class StreamRefusedError extends Error {
  constructor(
    readonly taskId: string,
    readonly error: { code: number; message: string; data?: unknown },
  ) {
    super(`tasks/stream ${taskId} refused: ${error.code} ${error.message}`);
  }
}

/** Reads the task's events to the stream's end, resuming as often as it takes; see the module's comment. */
export async function followTaskEvents(opts: FollowOptions): Promise<FollowResult> {
  const urls = typeof opts.url === 'string' ? [opts.url] : opts.url;
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  const result: FollowResult = {
    taskId: opts.taskId,
    events: [],
    received: 0,
    duplicates: 0,
    gaps: 0,
    wrong: 0,
    firstWrong: [],
    last: undefined,
    connections: [],
  };
  let cursor = opts.after;
  let urlIndex = 0;
  for (;;) {
    if (Date.now() > deadline) {
      throw new Error(
        `tasks/stream ${opts.taskId}: no end within ${opts.timeoutMs ?? 120_000} ms (cursor ${cursor}, ${result.connections.length} connections)`,
      );
    }
    const startedAt = Date.now();
    const connection = await connect(opts, result, urls[urlIndex % urls.length]!, cursor, deadline);
    result.connections.push({ ...connection, startedAt, endedAt: Date.now() });
    cursor = result.last?.seq ?? cursor;
    if (connection.end === 'complete') return result;
    if (connection.end === 'left') {
      const pause = opts.pauseMs?.() ?? 0;
      if (pause > 0) await sleep(pause);
    } else {
      urlIndex++;
      await sleep(100);
    }
  }
}

/** One connection: its events recorded in `result`, until the result, a leave, a cut or a failure. */
async function connect(
  opts: FollowOptions,
  result: FollowResult,
  url: string,
  after: number | undefined,
  deadline: number,
): Promise<Omit<Connection, 'startedAt' | 'endedAt'>> {
  const connection: Omit<Connection, 'startedAt' | 'endedAt'> = { url, after, events: 0, end: 'failed' };
  let stream: Awaited<ReturnType<typeof streamTaskEvents>>;
  try {
    stream = await streamTaskEvents(url, opts.taskId, after, opts.headers ? { headers: opts.headers } : {});
  } catch (err) {
    // A transport failure, or a body that is not JSON (the balancer's 502 page).
    return { ...connection, detail: String(err) };
  }
  if (stream.status >= 500) {
    stream.close();
    return { ...connection, detail: `HTTP ${stream.status}` };
  }
  let ended = false;
  void stream.ended.then(() => (ended = true));
  try {
    for (;;) {
      let message: Record<string, any>;
      try {
        // (Short waits: a next() under way when the stream ends may not be woken; the next call sees it.)
        message = await stream.next(250);
      } catch {
        // The stream ended without its result (every message before its end was taken), or the deadline passed.
        if (ended || Date.now() > deadline) return { ...connection, end: 'cut' };
        continue;
      }
      if (message.method === EVENT) {
        const event = take(opts, result, message.params as Record<string, any>);
        connection.events++;
        if (opts.leaveAfter?.(event, connection.events) === true) return { ...connection, end: 'left' };
      } else if (message.error !== undefined) {
        const error = message.error as { code: number; message: string; data?: unknown };
        if (error.code !== -32603) throw new StreamRefusedError(opts.taskId, error);
        return { ...connection, detail: `${error.code} ${error.message}` };
      } else if (message.result !== undefined) {
        return { ...connection, end: 'complete' };
      }
    }
  } finally {
    stream.close();
  }
}

/** Records one event: counted as a duplicate, after a gap, or unlike the expected one. */
function take(opts: FollowOptions, result: FollowResult, params: Record<string, any>): ReceivedEvent {
  const event: ReceivedEvent = { seq: params.seq, type: params.type, payload: params.payload };
  const last = result.last?.seq ?? opts.after ?? 0;
  result.received++;
  if (opts.keep ?? true) result.events.push(event);
  if (params.taskId !== opts.taskId) wrong(result, `seq ${event.seq}: the event of task ${params.taskId}`);
  if (event.seq <= last) {
    result.duplicates++;
    return event;
  }
  result.gaps += event.seq - last - 1;
  result.last = event;
  const expected = opts.expected;
  if (expected !== undefined && event.seq <= expected.length) {
    const want = expected[event.seq - 1]!;
    if (event.type !== want.type || !isDeepStrictEqual(event.payload, want.payload))
      wrong(result, `seq ${event.seq}: ${JSON.stringify(event)}, expected ${JSON.stringify(want)}`);
  } else if (expected !== undefined && (event.seq > expected.length + 1 || event.type !== STATUS_EVENT)) {
    wrong(result, `seq ${event.seq}: ${JSON.stringify(event)} after the ${expected.length} expected`);
  }
  return event;
}

function wrong(result: FollowResult, what: string): void {
  result.wrong++;
  if (result.firstWrong.length < 5) result.firstWrong.push(what);
}

/**
 * What a reader of the whole stream should have seen, or undefined: events 1..N once each, in order,
 * ending with the final status `status` (and, with `expected`, every other event as expected). The
 * problems are said in one line.
 */
export function streamProblems(
  read: FollowResult,
  { status = 'completed', expected }: { status?: string; expected?: readonly ExpectedEvent[] } = {},
): string | undefined {
  const problems: string[] = [];
  if (read.duplicates > 0) problems.push(`${read.duplicates} duplicates`);
  if (read.gaps > 0) problems.push(`${read.gaps} seqs skipped`);
  if (read.wrong > 0) problems.push(`${read.wrong} unexpected events (${read.firstWrong.join('; ')})`);
  if (read.last?.type !== STATUS_EVENT || read.last.payload.status !== status)
    problems.push(`last event ${JSON.stringify(read.last)}, not the final status ${status}`);
  if (expected !== undefined && read.last?.seq !== expected.length + 1)
    problems.push(`final seq ${read.last?.seq}, expected ${expected.length + 1}`);
  if (read.connections.at(-1)?.end !== 'complete') problems.push('no result at the end');
  return problems.length === 0 ? undefined : `task ${read.taskId}: ${problems.join(', ')}`;
}

/** scan_rows's arguments (its defaults as the tool's schema has them). */
export interface ScanArgs {
  rows: number;
  batchSize?: number;
  batchMs?: number;
  threshold?: number;
}

/**
 * The events scan_rows (src/tools/shipped/scan-rows.ts) writes for `args`, in order: per batch, each
 * matching row (`scanValue`), then the batch's line of partial output. Its final status comes after.
 */
export function expectedScanEvents({ rows, batchSize = 100, threshold = 1_000 }: ScanArgs): ExpectedEvent[] {
  const events: ExpectedEvent[] = [];
  for (let start = 0; start < rows; start += batchSize) {
    const end = Math.min(rows, start + batchSize);
    let found = 0;
    for (let row = start; row < end; row++) {
      const value = scanValue(row);
      if (value >= threshold) continue;
      found++;
      events.push({ type: SCAN_ROW_EVENT, payload: { row, value } });
    }
    events.push({
      type: PARTIAL_EVENT,
      payload: { content: [{ type: 'text', text: `rows ${start}–${end - 1}: ${found} matching` }] },
    });
  }
  return events;
}
