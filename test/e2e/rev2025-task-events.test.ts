import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { rev2025Headers } from '../helpers/mcp.ts';
import {
  openRev2025Session,
  openSessionGet,
  postInSession,
  useTwoInstances,
} from '../helpers/rev2025-session.ts';
import { readSse, type SseStream } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

// Task events at 2025-11-25: scan_rows's events reach a session's client as notifications/tasks/event
// on its tasks/result stream and on its GET stream, resumable with Last-Event-ID on either instance.
const two = useTwoInstances();

interface Scan {
  rows: number;
  batchSize: number;
  batchMs: number;
  threshold: number;
}
type TaskEvent = { taskId: string; seq: number; type: string; payload: Record<string, any>; _meta: any };

const STATUS_EVENT = 'dev.durable-mcp-tasks/status';

/** Starts scan_rows as a task of the session; returns its id. */
async function startScan(url: string, sessionId: string, scan: Scan): Promise<string> {
  const reply = await postInSession(url, sessionId, {
    id: 1,
    method: 'tools/call',
    params: { name: 'scan_rows', arguments: scan, task: { ttl: 600_000 } },
  });
  return (reply.body.result as { task: { taskId: string } }).task.taskId;
}

/** The task's events among a stream's messages, in the order they came. */
const eventsOf = (messages: ReadonlyArray<Record<string, any>>, taskId: string): TaskEvent[] =>
  messages
    .filter((m) => m.method === 'notifications/tasks/event' && m.params.taskId === taskId)
    .map((m) => m.params as TaskEvent);

/** Every event of the scan, once each, in order: its matching rows, a partial line per batch, the final status last. */
function expectWholeScan(events: readonly TaskEvent[], scan: Scan) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  const matching = Array.from({ length: scan.rows }, (_, i) => i).filter(
    (i) => scanValue(i) < scan.threshold,
  );
  expect(events.filter((e) => e.type === 'com.example.scan/row').map((e) => e.payload.row)).toEqual(matching);
  expect(events.filter((e) => e.type === 'dev.durable-mcp-tasks/partial')).toHaveLength(
    Math.ceil(scan.rows / scan.batchSize),
  );
  expect(events.at(-1)).toMatchObject({ type: STATUS_EVENT, payload: { status: 'completed' } });
  const { taskId } = events[0]!;
  expect(events[0]!._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
}

/** Waits until the stream carried the task's final status event. */
const untilFinal = (stream: SseStream, taskId: string) =>
  waitFor(() => eventsOf(stream.messages, taskId).at(-1)?.type === STATUS_EVENT, {
    timeoutMs: 30_000,
    what: () => `the final status on the stream (got ${eventsOf(stream.messages, taskId).length} events)`,
  });

/** A session opened on `a` with its GET stream open on `getUrl`, running `scan` as a task. */
async function scanWithGet(getUrl: string, scan: Scan) {
  const sessionId = await openRev2025Session(two.a.url);
  const get = await openSessionGet(getUrl, sessionId);
  const taskId = await startScan(two.a.url, sessionId, scan);
  return { sessionId, get, taskId };
}

/** How many events the task has written so far (read from its row). */
async function writtenEvents(taskId: string): Promise<number> {
  const row = await two.a.db
    .selectFrom('tasks')
    .select('event_seq')
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();
  return Number(row.event_seq);
}

/** The SSE id of the last event a stream received. */
const lastIdOf = (stream: SseStream) => stream.events.filter((e) => e.id !== undefined).at(-1)!.id!;

describe('2025-11-25 task events', () => {
  it('tasks/result carries the events in order, the final status last, then the result', async () => {
    const sessionId = await openRev2025Session(two.b.url);
    const scan = { rows: 400, batchSize: 50, batchMs: 20, threshold: 100 };
    const taskId = await startScan(two.b.url, sessionId, scan);
    const reply = await postInSession(two.b.url, sessionId, {
      id: 2,
      method: 'tasks/result',
      params: { taskId },
    });
    expect(reply.headers.get('content-type')).toContain('text/event-stream');
    const events = eventsOf(reply.messages, taskId);
    expectWholeScan(events, scan);
    // The result is the stream's last message, after every event.
    const last = reply.messages.at(-1)!;
    const matches = events.filter((e) => e.type === 'com.example.scan/row').length;
    expect(last.result.structuredContent).toEqual({ rows: scan.rows, matches });
    expect(last.result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
  });

  it('the GET stream carries them; a tasks/result after that sends none of them again (JSON)', async () => {
    const scan = { rows: 300, batchSize: 100, batchMs: 20, threshold: 200 };
    const { sessionId, get, taskId } = await scanWithGet(two.b.url, scan);
    try {
      await untilFinal(get, taskId);
      expectWholeScan(eventsOf(get.messages, taskId), scan);
      const reply = await postInSession(two.a.url, sessionId, {
        id: 2,
        method: 'tasks/result',
        params: { taskId },
      });
      expect(reply.headers.get('content-type')).toContain('application/json');
      expect(reply.body.result.structuredContent).toMatchObject({ rows: scan.rows });
    } finally {
      get.close();
    }
  });

  it('a task that emits none: no event anywhere, and tasks/result stays a JSON answer', async () => {
    const sessionId = await openRev2025Session(two.a.url);
    const get = await openSessionGet(two.b.url, sessionId);
    try {
      const created = await postInSession(two.a.url, sessionId, {
        id: 1,
        method: 'tools/call',
        params: { name: 'analyze_numbers', arguments: { count: 1_000 }, task: { ttl: 60_000 } },
      });
      const { taskId } = created.body.result.task as { taskId: string };
      await waitFor(() =>
        get.messages.some(
          (m) => m.method === 'notifications/tasks/status' && m.params.status === 'completed',
        ),
      );
      expect(get.messages.filter((m) => m.method === 'notifications/tasks/event')).toEqual([]);
      // Finished and nothing to send: the answer is JSON, as it was before task events.
      const reply = await postInSession(two.a.url, sessionId, {
        id: 2,
        method: 'tasks/result',
        params: { taskId },
      });
      expect(reply.headers.get('content-type')).toContain('application/json');
      expect(reply.body.result.structuredContent).toMatchObject({ count: 1_000 });
    } finally {
      get.close();
    }
  });

  it('a dropped GET stream resumed with Last-Event-ID, on the other instance then the same one, goes on without a duplicate or a gap', async () => {
    const scan = { rows: 3_000, batchSize: 100, batchMs: 60, threshold: 100 };
    const { sessionId, get: first, taskId } = await scanWithGet(two.a.url, scan);
    const received: Array<Record<string, any>> = [];
    // Drops the stream once it carried `n` more events and the task wrote more since; returns its last id.
    const dropAfter = async (stream: SseStream, n: number) => {
      await waitFor(() => eventsOf(stream.messages, taskId).length >= n, { timeoutMs: 30_000 });
      stream.close();
      await stream.ended;
      received.push(...stream.messages);
      const seen = Math.max(...eventsOf(received, taskId).map((e) => e.seq));
      await waitFor(async () => (await writtenEvents(taskId)) > seen + 10, { timeoutMs: 30_000 });
      return lastIdOf(stream);
    };
    const second = await openSessionGet(two.b.url, sessionId, await dropAfter(first, 30));
    const third = await openSessionGet(two.a.url, sessionId, await dropAfter(second, 30));
    try {
      await untilFinal(third, taskId);
      received.push(...third.messages);
      expectWholeScan(eventsOf(received, taskId), scan);
    } finally {
      third.close();
    }
  });

  it('a GET stream resumed elsewhere while its connection is still open: the old one ends, the resumed one carries the rest once', async () => {
    const scan = { rows: 2_000, batchSize: 100, batchMs: 60, threshold: 100 };
    const { sessionId, get: old, taskId } = await scanWithGet(two.a.url, scan);
    await waitFor(() => eventsOf(old.messages, taskId).length >= 10, { timeoutMs: 30_000 });
    // What the client has when it resumes: the old stream up to here.
    const had = [...old.messages];
    const resumed = await openSessionGet(two.b.url, sessionId, lastIdOf(old));
    let oldEnded = false;
    void old.ended.then(() => (oldEnded = true));
    try {
      await waitFor(() => oldEnded, { what: 'the server ending the stream that was taken over' });
      await untilFinal(resumed, taskId);
      expectWholeScan(eventsOf([...had, ...resumed.messages], taskId), scan);
    } finally {
      old.close();
      resumed.close();
    }
  });

  it('a new GET stream (no Last-Event-ID) starts after what the session was sent, never from the start', async () => {
    const scan = { rows: 2_000, batchSize: 100, batchMs: 60, threshold: 100 };
    const { sessionId, get: first, taskId } = await scanWithGet(two.a.url, scan);
    await waitFor(() => eventsOf(first.messages, taskId).length >= 20, { timeoutMs: 30_000 });
    first.close();
    await first.ended;
    const got = eventsOf(first.messages, taskId).map((e) => e.seq);
    const next = await openSessionGet(two.b.url, sessionId);
    try {
      await untilFinal(next, taskId);
      const seqs = eventsOf(next.messages, taskId).map((e) => e.seq);
      expect(seqs[0]).toBeGreaterThan(Math.max(...got));
      expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    } finally {
      next.close();
    }
  });

  it('a dropped tasks/result stream resumed on the other instance goes on to the result', async () => {
    const sessionId = await openRev2025Session(two.a.url);
    const scan = { rows: 1_500, batchSize: 100, batchMs: 60, threshold: 100 };
    const taskId = await startScan(two.a.url, sessionId, scan);
    const abort = new AbortController();
    const res = await fetch(two.a.url, {
      method: 'POST',
      signal: abort.signal,
      headers: rev2025Headers({ sessionId }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/result', params: { taskId } }),
    });
    const result = readSse(res, abort);
    await waitFor(() => eventsOf(result.messages, taskId).length >= 15, { timeoutMs: 30_000 });
    result.close();
    await result.ended;
    const resumed = await openSessionGet(two.b.url, sessionId, lastIdOf(result));
    await resumed.ended;
    const messages = [...result.messages, ...resumed.messages];
    expectWholeScan(eventsOf(messages, taskId), scan);
    expect(messages.at(-1)).toMatchObject({ id: 7, result: { structuredContent: { rows: scan.rows } } });
  });
});

describe('@modelcontextprotocol/sdk 1.x with a task that emits events', () => {
  it('runs scan_rows through callToolStream to its result; the events do not disturb it, and an app can read them', async () => {
    const client = new Client({ name: 'sdk1-events', version: '1.0.0' }, { capabilities: {} });
    const errors: unknown[] = [];
    client.onerror = (err) => errors.push(err);
    const heard: TaskEvent[] = [];
    // Unknown notifications are ignored unless the app asks for them: this one does, to check they came.
    client.fallbackNotificationHandler = async (n) => {
      if (n.method === 'notifications/tasks/event') heard.push(n.params as unknown as TaskEvent);
    };
    await client.connect(new StreamableHTTPClientTransport(new URL(two.a.url)));
    try {
      const scan = { rows: 500, batchSize: 50, batchMs: 20, threshold: 100 };
      const seen: Array<{ type: string; [k: string]: any }> = [];
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'scan_rows', arguments: scan },
        CallToolResultSchema,
        { task: { ttl: 60_000 }, onprogress: () => errors.push(new Error('progress was not asked for')) },
      )) {
        seen.push(message);
      }
      expect(seen.some((m) => m.type === 'error')).toBe(false);
      const result = seen.find((m) => m.type === 'result')!.result as {
        structuredContent: { matches: number };
      };
      const taskId = (seen.find((m) => m.type === 'taskCreated')!.task as { taskId: string }).taskId;
      await waitFor(() => heard.some((e) => e.taskId === taskId && e.type === STATUS_EVENT));
      // Deduplicated by (taskId, seq), as the draft tells clients to.
      const bySeq = new Map(heard.filter((e) => e.taskId === taskId).map((e) => [e.seq, e]));
      const events = [...bySeq.values()].sort((x, y) => x.seq - y.seq);
      expectWholeScan(events, scan);
      expect(events.filter((e) => e.type === 'com.example.scan/row')).toHaveLength(
        result.structuredContent.matches,
      );
      expect(errors).toEqual([]);
    } finally {
      await client.close();
    }
  });
});
