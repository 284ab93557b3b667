// GET /mcp/tasks/{taskId}/events: a task's events as plain text/event-stream, as curl and a browser read
// them, from a real server (HTTP on a socket, workers, Postgres) with bearer tokens for two principals.
import { describe, expect, it } from 'vitest';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { deleteOldEvents } from '../../src/tasks/store/events.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { insertTestTask } from '../helpers/db.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { emitAwaitSignal, FIRST_EVENT, SECOND_EVENT, signalUrlOf } from '../helpers/signal-event-tool.ts';
import { readSse, SseParser } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer({
  tools: [...SHIPPED_TOOLS, emitAwaitSignal],
  env: {
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: ['alice', 'bob'].map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
    SSE_KEEPALIVE_MS: '100',
  },
});
const as = (who: string) => ({ headers: { authorization: `Bearer ${who}-token` } });
const TERMINAL = ['completed', 'failed', 'cancelled'];

type Event = { taskId: string; seq: number; type: string; payload: Record<string, any>; _meta: any };

/** GET the events URL as curl would: the token, and a cursor in the header or the query. */
function getEvents(
  taskId: string,
  { who = 'alice', lastEventId, after }: { who?: string; lastEventId?: string; after?: string } = {},
) {
  const url = new URL(`/mcp/tasks/${encodeURIComponent(taskId)}/events`, server.rt.url);
  if (after !== undefined) url.searchParams.set('after', after);
  const headers: Record<string, string> = { authorization: `Bearer ${who}-token` };
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  return fetch(url, { headers });
}

/** A whole stream (a finished task's): its text, its events with data, and their data parsed. */
async function readToEnd(res: Response) {
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/event-stream');
  const text = await res.text();
  const parser = new SseParser();
  const events = [...parser.push(text), ...parser.end()].filter((e) => e.data !== '');
  return { text, events, data: events.map((e) => JSON.parse(e.data) as Event) };
}

async function finished(name: string, args: Record<string, unknown>) {
  const { taskId } = await server.mcp.callTool(name, args, as('alice'));
  await waitFor(async () => {
    const task = await server.mcp.result('tasks/get', { taskId }, as('alice'));
    return TERMINAL.includes(task.status) && task;
  });
  return taskId as string;
}

describe('GET /mcp/tasks/{taskId}/events', () => {
  it('streams a task from its first event to its final status, then ends the response', async () => {
    const rows = 300;
    const created = await server.mcp.callTool(
      'scan_rows',
      { rows, batchSize: 50, batchMs: 20, threshold: 100 },
      as('alice'),
    );
    const taskId = created.taskId as string;
    const { text, events, data } = await readToEnd(await getEvents(taskId));
    // A retry hint first; then one event per task event: its seq as the id, no event name.
    expect(text.startsWith('retry: 3000\n\n')).toBe(true);
    expect(events.every((e) => e.event === undefined)).toBe(true);
    expect(events.map((e) => e.id)).toEqual(data.map((d) => String(d.seq)));
    expect(data.map((d) => d.seq)).toEqual(data.map((_, i) => i + 1));
    const matching = Array.from({ length: rows }, (_, i) => i).filter((i) => scanValue(i) < 100);
    expect(data.filter((d) => d.type === 'com.example.scan/row').map((d) => d.payload.row)).toEqual(matching);
    expect(data.at(-1)).toMatchObject({
      taskId,
      type: 'dev.durable-mcp-tasks/status',
      payload: { status: 'completed' },
    });
    // The data is what tasks/stream sends as notifications/tasks/event params.
    expect(data[0]!._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
    expect(Date.parse(data[0]!._meta['dev.durable-mcp-tasks/time'])).not.toBeNaN();
    const task = await server.mcp.result('tasks/get', { taskId }, as('alice'));
    expect(task._meta['dev.durable-mcp-tasks/latestEventSeq']).toBe(data.at(-1)!.seq);
  });

  it('sends each event as it is written, with keep-alives between, and ends after the final status', async () => {
    const { taskId } = await server.mcp.callTool('emit_await_signal', { note: 'live' }, as('alice'));
    const res = await getEvents(taskId as string);
    expect(res.status).toBe(200);
    const stream = readSse(res);
    expect(await stream.next()).toMatchObject({ seq: 1, type: FIRST_EVENT, payload: { note: 'live' } });
    const waiting = await waitFor(async () => {
      const task = await server.mcp.result('tasks/get', { taskId }, as('alice'));
      return signalUrlOf(task.statusMessage) !== undefined && task;
    });
    expect(waiting.status).toBe('working');
    // The stream stays open while the task waits: comments keep it alive.
    await waitFor(() => stream.comments >= 2, { what: 'keep-alive comments' });
    const delivered = await fetch(signalUrlOf(waiting.statusMessage)!, { method: 'POST', body: '{"go":1}' });
    expect(delivered.status).toBe(202);
    await stream.ended;
    expect(stream.messages.map((d) => [d.seq, d.type])).toEqual([
      [1, FIRST_EVENT],
      [2, SECOND_EVENT],
      [3, 'dev.durable-mcp-tasks/status'],
    ]);
  });

  it('resumes after Last-Event-ID (or ?after=) with exactly the events that follow; at the end, 204', async () => {
    const taskId = await finished('scan_rows', { rows: 100, batchSize: 10, threshold: 500 });
    const all = (await readToEnd(await getEvents(taskId))).data;
    const resumed = (await readToEnd(await getEvents(taskId, { lastEventId: '7' }))).data;
    expect(resumed).toEqual(all.slice(7));
    expect((await readToEnd(await getEvents(taskId, { after: '7' }))).data).toEqual(all.slice(7));
    // An EventSource reconnecting keeps its URL's first `after`: Last-Event-ID wins.
    const both = (await readToEnd(await getEvents(taskId, { after: '2', lastEventId: '9' }))).data;
    expect(both).toEqual(all.slice(9));
    expect((await readToEnd(await getEvents(taskId, { after: '0' }))).data).toEqual(all);
    // Nothing after the last event of a finished task: 204, which tells an EventSource to stop.
    const atEnd = await getEvents(taskId, { lastEventId: String(all.at(-1)!.seq) });
    expect(atEnd.status).toBe(204);
    expect(await atEnd.text()).toBe('');
  });

  it('answers an unknown task, or another principal’s, with the 404 of an artifact download', async () => {
    const bobs = await insertTestTask(server.tdb.db, { principal: 'bob', toolName: 'scan_rows' });
    const artifact404 = await fetch(new URL(`/mcp/artifacts/${bobs}/x.csv`, server.rt.url), as('alice'));
    const expected = { status: artifact404.status, body: await artifact404.text() };
    expect(expected).toEqual({ status: 404, body: 'Not found' });
    for (const id of [bobs, 'no-such-task', 'x'.repeat(200), 'a b']) {
      const res = await getEvents(id);
      expect({ status: res.status, body: await res.text() }, id).toEqual(expected);
    }
    // Bob reads his own (it has not run: nothing yet, so the stream stays open); a HEAD gets its headers alone.
    const own = await getEvents(bobs, { who: 'bob' });
    expect(own.status).toBe(200);
    await own.body!.cancel();
    const head = await fetch(new URL(`/mcp/tasks/${bobs}/events`, server.rt.url), {
      method: 'HEAD',
      ...as('bob'),
    });
    expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([
      200,
      'text/event-stream',
      '',
    ]);
    // No token, or a wrong one: the endpoint's 401.
    const anonymous = await fetch(new URL(`/mcp/tasks/${bobs}/events`, server.rt.url));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect((await getEvents(bobs, { who: 'mallory' })).status).toBe(401);
  });

  it('refuses a cursor that is not a seq, or is past the last event, with 400 and one line', async () => {
    const taskId = await finished('scan_rows', { rows: 10, batchSize: 10, threshold: 500 });
    const task = await server.mcp.result('tasks/get', { taskId }, as('alice'));
    const latest = task._meta['dev.durable-mcp-tasks/latestEventSeq'] as number;
    const cases: [{ lastEventId?: string; after?: string }, RegExp][] = [
      [{ lastEventId: 'abc' }, /^Invalid Last-Event-ID "abc": the seq of the last event received/],
      [{ lastEventId: '-1' }, /^Invalid Last-Event-ID "-1"/],
      [{ lastEventId: '1.5' }, /^Invalid Last-Event-ID "1\.5"/],
      [{ lastEventId: '99999999999' }, /^Invalid Last-Event-ID/],
      [{ after: 'x' }, /^Invalid after "x"/],
      [{ after: '' }, /^Invalid after ""/],
      [
        { after: String(latest + 1) },
        new RegExp(`^The cursor \\(${latest + 1}\\) is past the task's last event \\(${latest}\\)$`),
      ],
    ];
    for (const [cursor, message] of cases) {
      const res = await getEvents(taskId, cursor);
      expect(res.status, JSON.stringify(cursor)).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await res.json()) as { error: { code: number; message: string } };
      expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32602 } });
      expect(body.error.message).toMatch(message);
      expect(body.error.message).not.toContain('\n');
    }
  });

  it('answers 410 with -32010 and earliestSeq when retention dropped the events after the cursor', async () => {
    const taskId = await finished('scan_rows', { rows: 20, batchSize: 10, threshold: 1_000 });
    await deleteOldEvents(server.tdb.db, new Date(Date.now() + 60_000), 1_000);
    const res = await getEvents(taskId, { lastEventId: '3' });
    expect(res.status).toBe(410);
    expect(await res.json()).toEqual({
      jsonrpc: '2.0',
      error: {
        code: -32010,
        message: 'Task events are no longer available',
        data: { reason: 'events_gone', taskId, earliestSeq: 23 },
      },
    });
    // Without a cursor: from what is kept, here only the final status.
    const kept = (await readToEnd(await getEvents(taskId))).data;
    expect(kept.map((d) => [d.seq, d.type])).toEqual([[23, 'dev.durable-mcp-tasks/status']]);
  });
});
