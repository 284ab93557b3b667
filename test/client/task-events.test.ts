// TasksClient.events (tasks/stream, the SEP-2694 draft) against two servers: ours (scan_rows, events
// from 1, a final dev.durable-mcp-tasks/status event) and the independent one
// (test/helpers/independent-tasks-server.ts: events from 0 as the draft says, no final event of ours,
// streams cut on demand). Connections dropped mid-stream, streams ended without a result or closed
// early, and a host that restarts: each event comes once, in order, with nothing missing.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FileTaskStore,
  TaskEventsGoneError,
  TasksClient,
  type EventsOptions,
  type TaskEvent,
} from '../../src/client/index.ts';
import { deleteOldEvents } from '../../src/tasks/store/events.ts';
import { SCAN_ROW_EVENT, scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { useIndependentTasksServer } from '../helpers/independent-tasks-server.ts';
import { postMcp } from '../helpers/mcp.ts';
import { startTestProcess, useTestServer } from '../helpers/server-process.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/wait.ts';

const stateDir = () => mkdtempSync(path.join(tmpdir(), 'client-events-'));

/** Reads the iterator to its end, handing each event to `seen` (its index among those read). */
async function readAll(
  events: AsyncIterable<TaskEvent>,
  seen: (event: TaskEvent, index: number) => void = () => {},
): Promise<TaskEvent[]> {
  const read: TaskEvent[] = [];
  for await (const event of events) {
    seen(event, read.length);
    read.push(event);
  }
  return read;
}

/** Seqs from `from`, one after another: no gap and no repeat. */
const expectContiguous = (events: readonly TaskEvent[], from: number) =>
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => from + i));

describe('TasksClient.events against our server', () => {
  const server = useTestServer();
  const scan = { rows: 600, batchSize: 50, batchMs: 100, threshold: 100 };
  const matching = Array.from({ length: scan.rows }, (_, i) => i).filter((i) => scanValue(i) < 100);
  const rowsOf = (events: TaskEvent[]) =>
    events.filter((e) => e.type === SCAN_ROW_EVENT).map((e) => e.payload.row);

  it('reads a scan_rows task’s events in order to its final status, and saves the cursor', async () => {
    const store = new FileTaskStore(stateDir());
    const client = new TasksClient({ url: server.rt.url, store });
    const { taskId } = await server.mcp.callTool('scan_rows', scan);
    const events = await readAll(client.events(taskId));
    expectContiguous(events, 1);
    expect(rowsOf(events)).toEqual(matching);
    expect(events.filter((e) => e.type === 'dev.durable-mcp-tasks/partial')).toHaveLength(12);
    expect(events.at(-1)).toMatchObject({
      type: 'dev.durable-mcp-tasks/status',
      payload: { status: 'completed' },
    });
    expect(Date.parse(events[0]!.time!)).not.toBeNaN();
    expect(events[0]!.meta).toMatchObject({ 'io.modelcontextprotocol/related-task': { taskId } });
    expect(await store.eventCursor(client.url, taskId)).toBe(events.at(-1)!.seq);
    // Read again from the cursor kept: nothing is left.
    expect(await readAll(client.events(taskId))).toEqual([]);
  });

  it('opens the stream again after the connection drops mid-stream (three times), each event once', async () => {
    const proxy = await startTcpProxy(server.rt.url);
    try {
      const client = new TasksClient({ url: proxy.url });
      const { taskId } = await server.mcp.callTool('scan_rows', scan);
      const reconnects: string[] = [];
      const cutsWhileWorking: string[] = [];
      const events = await readAll(
        client.events(taskId, { onReconnect: (reason) => reconnects.push(reason.message) }),
        (_, i) => {
          if (i !== 3 && i !== 20 && i !== 40) return;
          expect(proxy.cut()).toBeGreaterThan(0);
          cutsWhileWorking.push(String(i));
        },
      );
      expect(cutsWhileWorking).toEqual(['3', '20', '40']);
      expect(reconnects.length).toBeGreaterThanOrEqual(3);
      expectContiguous(events, 1);
      expect(rowsOf(events)).toEqual(matching);
      expect(events.at(-1)?.type).toBe('dev.durable-mcp-tasks/status');
    } finally {
      await proxy.close();
    }
  });

  it('goes on through another instance when the one it reads from shuts down mid-stream', async () => {
    // An HTTP-only instance on the same database, behind the proxy: the task runs on the file's own workers.
    const doomed = await startTestProcess({ databaseUrl: server.tdb.url, role: 'server' });
    const proxy = await startTcpProxy(doomed.url);
    let stopping: Promise<void> | undefined;
    try {
      const client = new TasksClient({ url: proxy.url });
      const { taskId } = await server.mcp.callTool('scan_rows', scan);
      const reconnects: string[] = [];
      const events = await readAll(
        client.events(taskId, { onReconnect: (reason) => reconnects.push(reason.message) }),
        (_, i) => {
          if (i !== 10) return;
          // New connections go to the other instance; the one streaming shuts down (its stream ends).
          proxy.retarget(server.rt.url);
          stopping = doomed.stop();
        },
      );
      // Ended without a result, as a server shutting down ends a task event stream.
      expect(reconnects[0]).toMatch(/ended the stream without a result$/);
      expectContiguous(events, 1);
      expect(rowsOf(events)).toEqual(matching);
      expect(events.at(-1)?.type).toBe('dev.durable-mcp-tasks/status');
    } finally {
      await (stopping ?? doomed.stop());
      await proxy.close();
    }
  });

  it('a host that restarts goes on after the last event it processed', async () => {
    const dir = stateDir();
    const { taskId } = await server.mcp.callTool('scan_rows', scan);
    const before = new TasksClient({ url: server.rt.url, store: new FileTaskStore(dir) });
    const first: TaskEvent[] = [];
    for await (const event of before.events(taskId)) {
      // The 11th is not processed: the host goes away holding it.
      if (first.length === 10) break;
      first.push(event);
    }
    const after = new TasksClient({ url: server.rt.url, store: new FileTaskStore(dir) });
    const rest = await readAll(after.events(taskId));
    expect(rest[0]?.seq).toBe(11);
    const all = [...first, ...rest];
    expectContiguous(all, 1);
    expect(rowsOf(all)).toEqual(matching);
  });

  it('events retention dropped: a TaskEventsGoneError with earliestSeq, or skipped with ifGone', async () => {
    const client = new TasksClient({ url: server.rt.url });
    const { taskId } = await server.mcp.callTool('scan_rows', { rows: 20, batchSize: 10, threshold: 1_000 });
    const all = await readAll(client.events(taskId, { after: 0 }));
    await deleteOldEvents(server.tdb.db, new Date(Date.now() + 60_000), 1_000);
    const last = all.at(-1)!.seq;
    const thrown = await readAll(client.events(taskId, { after: 3 })).catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(TaskEventsGoneError);
    expect(thrown).toMatchObject({ code: -32010, taskId, after: 3, earliestSeq: last });
    const gone: TaskEventsGoneError[] = [];
    const opts: EventsOptions = { after: 3, ifGone: 'skip', onGone: (g) => gone.push(g) };
    const skipped = await readAll(client.events(taskId, opts));
    expect(gone.map((g) => g.earliestSeq)).toEqual([last]);
    expect(skipped.map((e) => [e.seq, e.type])).toEqual([[last, 'dev.durable-mcp-tasks/status']]);
  });
});

describe('TasksClient.events against the independent server', () => {
  const server = useIndependentTasksServer();
  const keepsThree = useIndependentTasksServer({ keepEvents: 3 });

  const slowCount = async (url: string, steps: number): Promise<string> => {
    const created = await postMcp(url, 'tools/call', { name: 'slow_count', arguments: { steps } });
    return created.body.result.taskId as string;
  };
  const stepsOf = (events: TaskEvent[]) =>
    events.filter((e) => e.type === 'org.example.count/step').map((e) => e.payload.k);
  const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  it('reads a task’s events from seq 0 to the end of the stream once the task ended', async () => {
    const client = new TasksClient({ url: server.url });
    const taskId = await slowCount(server.url, 5);
    const events = await readAll(client.events(taskId));
    expectContiguous(events, 0);
    expect(stepsOf(events)).toEqual(range(5));
    expect(events.at(-1)).toMatchObject({
      type: 'org.example.tasks/status',
      payload: { status: 'completed' },
    });
    expect(events[0]!.time).toBeUndefined();
  });

  it('goes on after a stream closed early, one ended without a result, and a dropped connection', async () => {
    const client = new TasksClient({ url: server.url });
    const taskId = await slowCount(server.url, 30);
    const cuts: Array<[number, string]> = [];
    const reconnects: string[] = [];
    const how = ['close', 'end', 'drop'] as const;
    const events = await readAll(
      client.events(taskId, { onReconnect: (reason) => reconnects.push(reason.message) }),
      (_, i) => {
        const cut = how[[4, 10, 16].indexOf(i)];
        if (cut !== undefined) cuts.push([server.cutStreams(cut), cut]);
      },
    );
    expect(cuts).toEqual([
      [1, 'close'],
      [1, 'end'],
      [1, 'drop'],
    ]);
    expect(reconnects).toHaveLength(3);
    expectContiguous(events, 0);
    expect(stepsOf(events)).toEqual(range(30));
    expect(events.at(-1)?.payload).toMatchObject({ status: 'completed' });
  });

  it('a host that restarts mid-stream goes on from its file store, after a dropped connection too', async () => {
    const dir = stateDir();
    const taskId = await slowCount(server.url, 20);
    const before = new TasksClient({ url: server.url, store: new FileTaskStore(dir) });
    const first: TaskEvent[] = [];
    for await (const event of before.events(taskId)) {
      if (first.length === 3) server.cutStreams('drop');
      if (first.length === 8) break;
      first.push(event);
    }
    const after = new TasksClient({ url: server.url, store: new FileTaskStore(dir) });
    const rest = await readAll(after.events(taskId));
    expect(rest[0]?.seq).toBe(8);
    const all = [...first, ...rest];
    expectContiguous(all, 0);
    expect(stepsOf(all)).toEqual(range(20));
  });

  it('a cursor older than the events kept: TaskEventsGoneError, or the earliest kept with ifGone', async () => {
    const client = new TasksClient({ url: keepsThree.url });
    const taskId = await slowCount(keepsThree.url, 10);
    await waitFor(
      async () => (await postMcp(keepsThree.url, 'tasks/get', { taskId })).body.result.status === 'completed',
      { what: 'the task to complete' },
    );
    // 10 steps and the completed status: seqs 0–10, of which 8–10 are kept.
    const kept = await readAll(client.events(taskId));
    expect(kept.map((e) => e.seq)).toEqual([8, 9, 10]);
    const thrown = await readAll(client.events(taskId, { after: 2 })).catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(TaskEventsGoneError);
    expect(thrown).toMatchObject({ code: -32010, earliestSeq: 8, data: { reason: 'events_gone', taskId } });
    const skipped = await readAll(client.events(taskId, { after: 2, ifGone: 'skip' }));
    expect(skipped).toEqual(kept);
  });
});
