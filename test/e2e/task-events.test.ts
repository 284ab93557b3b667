// Task events (SEP-2694 draft): written by ctx.emit on a worker, read with tasks/stream on the server,
// in one process with real Postgres and pg-boss.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../../src/process/start.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { deleteOldEvents } from '../../src/tasks/store/events.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { emitBadly, emitChangesType, emitThenCrash } from '../helpers/event-tools.ts';
import { RawMcp, streamTaskEvents } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
let mcp: RawMcp;

beforeAll(async () => {
  tdb = await createTestDatabase();
  rt = await startTestProcess({
    databaseUrl: tdb.url,
    tools: [...SHIPPED_TOOLS, emitThenCrash, emitBadly, emitChangesType],
    env: {
      SUBSCRIPTION_POLL_MS: '500',
      MAX_EVENT_BYTES: '1000',
      MAX_EVENTS_PER_TASK: '50',
      MAX_EVENT_STREAMS_PER_PRINCIPAL: '2',
    },
  });
  mcp = new RawMcp(rt.url);
});
afterAll(async () => {
  await rt?.stop();
  await tdb?.drop();
});

type Event = { seq: number; type: string; payload: Record<string, any> };

/** Reads a tasks/stream to its end: the events in order, and the final response. */
async function readToEnd(taskId: string, after?: number) {
  const stream = await streamTaskEvents(rt.url, taskId, after);
  await stream.ended;
  const events = stream.messages
    .filter((m) => m.method === 'notifications/tasks/event')
    .map((m) => m.params as Event & { taskId: string; _meta: Record<string, any> });
  const response = stream.messages.find((m) => 'id' in m);
  return { events, response };
}

/** Seqs from `from`, one after another: no gap and no repeat. */
function expectContiguous(events: readonly Event[], from: number) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => from + i));
}

/** Opens the plain events endpoint and closes it at once: its status. */
async function streamAndClose(taskId: string): Promise<number> {
  const abort = new AbortController();
  const res = await fetch(`${rt.url}/tasks/${taskId}/events`, { signal: abort.signal });
  abort.abort();
  return res.status;
}

async function waitTerminal(taskId: string) {
  for (;;) {
    const task = await mcp.getTask(taskId);
    if (['completed', 'failed', 'cancelled'].includes(task.status)) return task;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tasks/stream', () => {
  it('streams a running task’s events live, numbered 1, 2, 3…, then its final status and the result', async () => {
    const rows = 400;
    const { taskId } = await mcp.callTool('scan_rows', { rows, batchSize: 50, batchMs: 20, threshold: 100 });
    const { events, response } = await readToEnd(taskId);
    expectContiguous(events, 1);
    const matching = Array.from({ length: rows }, (_, i) => i).filter((i) => scanValue(i) < 100);
    expect(events.filter((e) => e.type === 'com.example.scan/row').map((e) => e.payload.row)).toEqual(
      matching,
    );
    expect(events.filter((e) => e.type === 'dev.durable-mcp-tasks/partial')).toHaveLength(rows / 50);
    expect(events.at(-1)).toMatchObject({
      type: 'dev.durable-mcp-tasks/status',
      payload: { status: 'completed' },
    });
    expect(events[0]!._meta).toMatchObject({ 'io.modelcontextprotocol/related-task': { taskId } });
    expect(Date.parse(events[0]!._meta['dev.durable-mcp-tasks/time'])).not.toBeNaN();
    expect(response).toMatchObject({ result: { resultType: 'complete' } });
    const task = await mcp.getTask(taskId);
    expect(task._meta['dev.durable-mcp-tasks/latestEventSeq']).toBe(events.at(-1)!.seq);
  });

  it('resumes after a cursor with exactly the events that follow it; at the end, answers at once', async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 100, batchSize: 10, threshold: 500 });
    await waitTerminal(taskId);
    const all = await readToEnd(taskId);
    const resumed = await readToEnd(taskId, 7);
    expect(resumed.events).toEqual(all.events.slice(7));
    const atEnd = await streamTaskEvents(rt.url, taskId, all.events.at(-1)!.seq);
    expect(atEnd.json).toMatchObject({ result: { resultType: 'complete' } });
  });

  it('a handler that runs again after a crash writes no event twice', async () => {
    const { taskId } = await mcp.callTool('emit_then_crash', { tag: `t${Date.now()}` });
    const { events } = await readToEnd(taskId);
    expectContiguous(events, 1);
    expect(events.map((e) => `${e.type.split('/')[1]}:${e.payload.i ?? e.payload.status}`)).toEqual([
      'before:0',
      'before:1',
      'before:2',
      'body:0',
      'body:1',
      'after:0',
      'after:1',
      'after:2',
      'after:3',
      'after:4',
      'status:completed',
    ]);
  });

  it('a replay that emits another type where one was written fails its task (the determinism guard)', async () => {
    const { taskId } = await mcp.callTool('emit_changes_type', { tag: `g${Date.now()}` });
    const task = await waitTerminal(taskId);
    expect(task.status).toBe('failed');
    expect(task.error.message).toMatch(
      /emitted "com.example.test\/new" where this task recorded "com.example.test\/old"/,
    );
  });

  it('holds at most MAX_EVENT_STREAMS_PER_PRINCIPAL streams of a principal open on an instance (429 beyond)', async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 60, batchSize: 1, batchMs: 500 });
    const open = [await streamTaskEvents(rt.url, taskId), await streamTaskEvents(rt.url, taskId, 0)];
    await Promise.all(open.map((s) => s.next(10_000)));
    const refused = await mcp.error('tasks/stream', { taskId });
    expect(refused).toMatchObject({
      status: 429,
      code: -31429,
      data: { limit: 'MAX_EVENT_STREAMS_PER_PRINCIPAL' },
    });
    const viaHttp = await fetch(`${rt.url}/tasks/${taskId}/events`);
    expect(viaHttp.status).toBe(429);
    open[0]!.close();
    await open[0]!.ended;
    // The closed stream's place is free again.
    await waitFor(async () => (await streamAndClose(taskId)) === 200);
    open[1]!.close();
    await mcp.result('tasks/cancel', { taskId });
  });

  it('refuses a bad cursor, and answers an unknown or another principal’s task as tasks/get does', async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 10 });
    await waitTerminal(taskId);
    for (const after of [-1, 1.5, 'x', 1_000_000]) {
      const error = await mcp.error('tasks/stream', { taskId, after });
      expect(error.code).toBe(-32602);
    }
    const foreign = await insertTestTask(tdb.db, { principal: 'somebody-else', toolName: 'scan_rows' });
    for (const id of [foreign, 'no-such-task']) {
      const viaGet = await mcp.error('tasks/get', { taskId: id });
      const viaStream = await mcp.error('tasks/stream', { taskId: id });
      expect({ ...viaStream, id: undefined }).toEqual({ ...viaGet, id: undefined });
    }
  });

  it('answers events gone (-32010, earliestSeq) when retention dropped what the cursor asks for', async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 20, batchSize: 10, threshold: 1_000 });
    await waitTerminal(taskId);
    await deleteOldEvents(tdb.db, new Date(Date.now() + 60_000), 1_000);
    const error = await mcp.error('tasks/stream', { taskId, after: 3 });
    expect(error).toMatchObject({
      code: -32010,
      message: 'Task events are no longer available',
      data: { reason: 'events_gone', taskId, earliestSeq: 23 },
    });
    // Without a cursor the stream starts at what is kept: here, only the final status.
    const { events } = await readToEnd(taskId);
    expect(events.map((e) => e.seq)).toEqual([23]);
  });

  it('refuses what breaks the rules of an emit with an error naming the rule or the setting', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ type: 'a row', payload: {} }, /must be 1 to 200 letters/],
      [{ type: 'dev.durable-mcp-tasks/status', payload: {} }, /reserved/],
      [{ type: 'com.example/x', payload: {}, withNul: true }, /NUL characters/],
      [{ type: 'com.example/x', payload: { s: 'x'.repeat(2_000) } }, /MAX_EVENT_BYTES \(1000\)/],
      [{ type: 'com.example/x', payload: {}, count: 51 }, /MAX_EVENTS_PER_TASK \(50\)/],
    ];
    for (const [args, message] of cases) {
      const created = await mcp.callTool('emit_badly', args);
      const { taskId } = created;
      if (taskId === undefined) throw new Error(JSON.stringify(created));
      const task = await waitTerminal(taskId);
      expect(task.status).toBe('failed');
      expect(task.error.message).toMatch(message);
    }
  });
});
