import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { rev2025Headers, RawMcp, readReply } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';

// 2025-11-25 tasks, driven by the client most hosts run: @modelcontextprotocol/sdk 1.x.
const server = useTestServer();
let client: Client;
let transport: StreamableHTTPClientTransport;
let elicitations = 0;

beforeAll(async () => {
  client = new Client({ name: 'sdk1-tasks', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations++;
    const related = request.params._meta?.['io.modelcontextprotocol/related-task'] as
      { taskId?: string } | undefined;
    expect(related?.taskId).toEqual(expect.any(String));
    return { action: 'accept', content: { confirm: true } };
  });
  transport = new StreamableHTTPClientTransport(new URL(server.rt.url));
  await client.connect(transport);
  await client.listTools();
});
afterAll(async () => {
  await client?.close();
});

/** POSTs one message in the client's session (as a raw client would): its HTTP status and JSON-RPC reply. */
async function sendInSession(message: Record<string, unknown>) {
  const res = await fetch(server.rt.url, {
    method: 'POST',
    headers: rev2025Headers({ sessionId: transport.sessionId! }),
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  // A JSON answer, the message of an SSE answer, or none (202: readReply's body is then `{}`).
  const { status, body } = await readReply(res);
  return { status, reply: body as { error?: { code: number; message: string } } };
}

/** One request in the client's session. */
let nextId = 1000;
const postInSession = (method: string, params: Record<string, unknown>) =>
  sendInSession({ id: nextId++, method, params });

/** Runs a tool as a task through callToolStream; returns every message it yielded. */
async function stream(name: string, args: Record<string, unknown>) {
  const seen: Array<{ type: string; [k: string]: unknown }> = [];
  for await (const message of client.experimental.tasks.callToolStream(
    { name, arguments: args },
    CallToolResultSchema,
    { task: { ttl: 60_000 } },
  )) {
    seen.push(message as { type: string });
  }
  return seen;
}

describe('2025-11-25 tasks on the durable store', () => {
  it('declares the tasks capability', () => {
    expect(client.getServerCapabilities()?.tasks).toEqual({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
  });

  it('runs analyze_numbers as a task to its exact result', async () => {
    const seen = await stream('analyze_numbers', { count: 20_000, chunkSize: 5000 });
    const created = seen.find((m) => m.type === 'taskCreated') as
      { task: Record<string, unknown> } | undefined;
    expect(created?.task).toMatchObject({
      status: 'working',
      ttl: expect.any(Number),
      createdAt: expect.any(String),
    });
    const result = seen.find((m) => m.type === 'result') as { result: Record<string, unknown> } | undefined;
    expect(result?.result.structuredContent).toEqual(expectedAnalysis(20_000, 5000));
    expect(seen.some((m) => m.type === 'error')).toBe(false);
  });

  it('export_csv: tasks/result carries the resource_link, and resources/read returns the artifact at 2025-11-25', async () => {
    const seen = await stream('export_csv', { megabytes: 1 });
    const result = seen.find((m) => m.type === 'result') as
      { result: { content: Array<Record<string, unknown>> } } | undefined;
    const link = result?.result.content[1];
    expect(link).toMatchObject({ type: 'resource_link', name: 'export.csv', size: expect.any(Number) });
    const read = await client.readResource({ uri: link!.uri as string });
    const text = (read.contents[0] as { text: string }).text;
    expect(Buffer.byteLength(text)).toBe(link!.size);
    expect(text.startsWith('id,sku,quantity,price_cents\n0,SKU-0,0,0\n')).toBe(true);
  });

  it('asks for input through tasks/result: confirm_action completes once the client answers', async () => {
    const before = elicitations;
    const seen = await stream('confirm_action', { action: 'deploy' });
    expect(elicitations).toBe(before + 1);
    const result = seen.find((m) => m.type === 'result') as unknown as {
      result: { content: Array<{ text: string }> };
    };
    expect(result.result.content[0]!.text).toBe('confirmed: deploy');
  });

  it('getTask, listTasks (paged, newest first) and cancelTask; a finished task cannot be cancelled', async () => {
    // approved_export waits for a signal nobody sends: it stays working. (confirm_action would not: this
    // client answers its question as soon as the session's GET stream carries it.)
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      for await (const m of client.experimental.tasks.callToolStream(
        { name: 'approved_export', arguments: {} },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      )) {
        if (m.type === 'taskCreated') {
          ids.push(m.task.taskId);
          break;
        }
      }
    }
    const task = await client.experimental.tasks.getTask(ids[0]!);
    expect(task.status).toBe('working');
    const listed = await client.experimental.tasks.listTasks();
    expect(listed.tasks.map((t) => t.taskId)).toEqual(expect.arrayContaining(ids));
    expect(listed.tasks[0]!.taskId).toBe(ids[2]);
    const cancelled = await client.experimental.tasks.cancelTask(ids[1]!);
    expect(cancelled.status).toBe('cancelled');
    expect((await client.experimental.tasks.getTask(ids[1]!)).status).toBe('cancelled');
    await expect(client.experimental.tasks.cancelTask(ids[1]!)).rejects.toThrow(/terminal status: cancelled/);
  });

  it('pages tasks/list with an opaque cursor', async () => {
    for (let i = 0; i < 52; i++) {
      const res = await postInSession('tools/call', {
        name: 'analyze_numbers',
        arguments: { count: 1 },
        task: {},
      });
      expect(res.status).toBe(200);
    }
    const first = await client.experimental.tasks.listTasks();
    expect(first.tasks).toHaveLength(50);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await client.experimental.tasks.listTasks(first.nextCursor);
    const all = [...first.tasks, ...second.tasks].map((t) => t.taskId);
    expect(new Set(all).size).toBe(all.length);
    await expect(client.experimental.tasks.listTasks('not-a-cursor')).rejects.toThrow(/Invalid cursor/);
  });

  it('a task id or cursor Postgres could not take is refused with -32602 before any query', async () => {
    const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const hostile: [string, Record<string, unknown>][] = [
      ['tasks/get', { taskId: 'a\u0000b' }],
      ['tasks/cancel', { taskId: 'a\u0000b' }],
      ['tasks/result', { taskId: 'a\u0000b' }],
      ['tasks/get', { taskId: 'x'.repeat(10_000) }],
      ['tasks/list', { cursor: cursor(['2026-12-05T00:00:00.000Z', 'a\u0000b']) }],
      ['tasks/list', { cursor: cursor(['0000-01-01T00:00:00.000Z', 'abc']) }],
      ['tasks/list', { cursor: cursor(['+275760-09-13T00:00:00.000Z', 'abc']) }],
    ];
    for (const [method, params] of hostile) {
      const { status, reply } = await postInSession(method, params);
      expect({ method, status, code: reply?.error?.code }).toEqual({ method, status: 200, code: -32602 });
    }
  });

  it('answers and cancels that name no request, or hold what Postgres cannot store, are refused or ignored', async () => {
    const long = 'x'.repeat(10_000);
    // Ids no request of the server's has: accepted and dropped, never stored (nor NOTIFYd).
    expect((await sendInSession({ id: long, result: {} })).status).toBe(202);
    expect(
      (await sendInSession({ method: 'notifications/cancelled', params: { requestId: long } })).status,
    ).toBe(202);
    // An answer holding NUL, or over MAX_INPUT_RESPONSES_BYTES: 400 with -32602, naming the limit.
    for (const result of [
      { action: 'accept', content: { note: 'a\u0000b' } },
      { big: 'y'.repeat(800_000) },
    ]) {
      const { status, reply } = await sendInSession({ id: 's-0123456789', result });
      expect(status).toBe(400);
      expect(reply?.error).toMatchObject({
        code: -32602,
        message: expect.stringMatching(/at most \d+ bytes/),
      });
    }
    // An answer shaped like one to a server request the server never sent: accepted, and not stored.
    expect((await sendInSession({ id: 's-never-issued', result: { action: 'accept' } })).status).toBe(202);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from mcp_session_responses where request_id = 's-never-issued'`.execute(
      server.tdb.db,
    );
    expect(rows[0]!.n).toBe(0);
    // The session still serves.
    expect((await postInSession('tasks/list', {})).status).toBe(200);
  });

  it('without authentication (one principal for every client) a session lists its own tasks only', async () => {
    // A task of this principal made at 2026-07-28, and the tasks of the session above: none are another
    // session's to see.
    await new RawMcp(server.rt.url).callTool('analyze_numbers', { count: 1 });
    const other = new Client({ name: 'sdk1-other', version: '1.0.0' }, { capabilities: {} });
    await other.connect(new StreamableHTTPClientTransport(new URL(server.rt.url)));
    try {
      expect((await other.experimental.tasks.listTasks()).tasks).toEqual([]);
      const mine = other.experimental.tasks.callToolStream(
        { name: 'analyze_numbers', arguments: { count: 1 } },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      );
      let created: string | undefined;
      for await (const m of mine) if (m.type === 'taskCreated') created = m.task.taskId;
      expect((await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([created]);
      expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).not.toContain(created);
    } finally {
      await other.close();
    }
  });

  it('a tool result with isError ends the task failed at 2025-11-25; tasks/result returns it as it is', async () => {
    const seen = await stream('fail_with', { kind: 'tool' });
    const created = seen.find((m) => m.type === 'taskCreated') as unknown as { task: { taskId: string } };
    expect((await client.experimental.tasks.getTask(created.task.taskId)).status).toBe('failed');
    const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(result._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId: created.task.taskId });
  });

  it('a task created at 2025-11-25 is the same row for a 2026-07-28 client of the same principal', async () => {
    const seen = await stream('analyze_numbers', { count: 10 });
    const created = seen.find((m) => m.type === 'taskCreated') as unknown as { task: { taskId: string } };
    const viaNewEra = await new RawMcp(server.rt.url).getTask(created.task.taskId);
    expect(viaNewEra).toMatchObject({ taskId: created.task.taskId, status: 'completed' });
  });
});
