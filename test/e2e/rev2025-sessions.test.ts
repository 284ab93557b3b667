import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createServerEvents } from '../../src/events/server-events.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { defineResource } from '../../src/resources/define.ts';
import { defineTool, type ToolDefinition } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { initializeRequest, rev2025Headers, readReply, type RpcReply } from '../helpers/mcp.ts';
import { readSse } from '../helpers/sse.ts';
import { waitFor } from '../helpers/wait.ts';

// A synchronous tool that needs the user: at 2025-11-25 the server asks the client itself, on the
// call's stream, and the answer comes back as a separate POST (to any instance).
const askName = defineTool({
  name: 'ask_name',
  description: 'Asks the user for a name, then greets them',
  inputSchema: z.object({}).loose(),
  async handler(_args, ctx) {
    const answer = await ctx.elicit('name', {
      message: 'Your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    });
    const content = answer.content as { name?: string } | undefined;
    return {
      content: [{ type: 'text', text: `Hello, ${answer.action === 'accept' ? content?.name : 'nobody'}` }],
    };
  },
});
const TOOLS = [...SHIPPED_TOOLS, askName] as ToolDefinition[];
/** The resource the session stream's test subscribes to. */
const RESOURCES = [
  defineResource({
    uri: 'test://watched',
    name: 'watched',
    read: (uri) => [{ uri, mimeType: 'text/plain', text: 'watched' }],
  }),
];

let tdb: TestDatabase;
let a: ServerProcess & { url: string };
let b: ServerProcess & { url: string };

beforeAll(async () => {
  tdb = await createTestDatabase();
  a = await startTestProcess({
    databaseUrl: tdb.url,
    tools: TOOLS,
    resources: RESOURCES,
    env: { SESSION_IDLE_TTL_MS: '60000' },
  });
  b = await startTestProcess({ databaseUrl: tdb.url, tools: TOOLS, resources: RESOURCES, role: 'server' });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
  await tdb?.drop();
});

/** POSTs one message (with a 2025-11-25 request's headers, over `headers`) and reads the whole reply. */
async function post(url: string, body: object, headers: Record<string, string> = {}): Promise<RpcReply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...rev2025Headers(), ...headers },
    body: JSON.stringify(body),
  });
  return readReply(res);
}

async function initialize(
  url: string,
  protocolVersion = '2025-11-25',
  capabilities: Record<string, unknown> = {},
) {
  const reply = await post(
    url,
    initializeRequest({ id: 1, protocolVersion, capabilities, clientInfo: { name: 'raw', version: '1' } }),
  );
  expect(reply.status).toBe(200);
  const sessionId = reply.headers.get('mcp-session-id');
  expect(sessionId).toMatch(/^[\x21-\x7E]{16,}$/);
  return { sessionId: sessionId!, result: reply.body.result as Record<string, any> };
}

/** A session on instance a that calls ask_name as request `id`: the call's response (its SSE stream). */
async function callAskName(id: number) {
  const { sessionId } = await initialize(a.url, '2025-11-25', { elicitation: {} });
  const headers = rev2025Headers({ sessionId });
  const res = await fetch(a.url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'ask_name', arguments: {} },
    }),
  });
  return { headers, res };
}

describe('the 2025-11-25 revision on the same endpoint', () => {
  it('serves @modelcontextprotocol/sdk 1.x: connect, listTools, callTool, elicitation answered by the client', async () => {
    const client = new Client({ name: 'sdk1', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      expect(request.params.message).toBe('Your name?');
      return { action: 'accept', content: { name: 'Ada' } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(a.url)));
    try {
      expect(client.getServerVersion()?.name).toBe('durable-mcp-tasks');
      const { tools } = await client.listTools();
      expect(tools.find((t) => t.name === 'analyze_numbers')?.execution).toEqual({ taskSupport: 'optional' });
      expect(tools.find((t) => t.name === 'echo')?.execution).toEqual({ taskSupport: 'forbidden' });
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'hi' }]);
      const greeted = await client.callTool({ name: 'ask_name', arguments: {} });
      expect(greeted.content).toEqual([{ type: 'text', text: 'Hello, Ada' }]);
      expect(await client.ping()).toEqual({});
    } finally {
      await client.close();
    }
  });

  it('serves @modelcontextprotocol/client 2.x with its default version negotiation (initialize)', async () => {
    const client = new Client2({ name: 'client2-default', version: '1.0.0' }, { capabilities: {} });
    await client.connect(new Transport2(new URL(a.url)));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'v2' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'v2' }]);
    } finally {
      await client.close();
    }
  });

  it('a session opened on one instance is served by the other; DELETE there ends it everywhere', async () => {
    const { sessionId, result } = await initialize(a.url);
    expect(result).toMatchObject({
      protocolVersion: '2025-11-25',
      serverInfo: { name: 'durable-mcp-tasks' },
    });
    const headers = rev2025Headers({ sessionId });
    expect((await post(b.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(
      202,
    );
    const listed = await post(b.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
    expect(listed.messages.at(-1)!.result.tools.length).toBe(TOOLS.length);
    const deleted = await fetch(b.url, { method: 'DELETE', headers });
    expect(deleted.status).toBe(200);
    const after = await post(a.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
    expect(after.status).toBe(404);
    expect(after.body).toMatchObject({ error: { code: -32001 } });
  });

  it('DELETE on either instance is a 404 on both at once, for sessions both have served', async () => {
    for (let i = 0; i < 10; i++) {
      const { sessionId } = await initialize(i % 2 === 0 ? a.url : b.url);
      const headers = rev2025Headers({ sessionId });
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
      // Both instances hold it in memory now.
      for (const url of [a.url, b.url]) expect((await post(url, list, headers)).status).toBe(200);
      const deleted = await fetch(i % 2 === 0 ? b.url : a.url, { method: 'DELETE', headers });
      expect(deleted.status).toBe(200);
      const after = await Promise.all([a.url, b.url].map((url) => post(url, list, headers)));
      expect(after.map((r) => r.status)).toEqual([404, 404]);
    }
  });

  it('answers requests that need no stream as JSON, writing nothing: no event logged, the session row untouched', async () => {
    const { sessionId } = await initialize(a.url);
    const headers = rev2025Headers({ sessionId });
    const rowVersion = async () =>
      (
        await tdb.db
          .selectFrom('mcp_sessions')
          .select(sql<string>`xmin::text`.as('xmin'))
          .where('session_id', '=', sessionId)
          .executeTakeFirstOrThrow()
      ).xmin;
    const before = await rowVersion();
    const requests = [
      { method: 'ping' },
      { method: 'tools/list' },
      { method: 'tools/call', params: { name: 'echo', arguments: { text: 'json' } } },
    ];
    for (const [i, request] of requests.entries()) {
      for (const url of [a.url, b.url]) {
        const reply = await post(url, { jsonrpc: '2.0', id: 10 + i, ...request }, headers);
        expect(reply.headers.get('content-type')).toContain('application/json');
        expect(reply.body).toMatchObject({ id: 10 + i, result: {} });
      }
    }
    expect(await rowVersion()).toBe(before);
    const events = await tdb.db
      .selectFrom('mcp_session_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('session_id', '=', sessionId)
      .executeTakeFirstOrThrow();
    expect(Number(events.n)).toBe(0);
  });

  it('a call still running after a second streams, primed and logged, and resumes on the other instance', async () => {
    const { sessionId } = await initialize(a.url);
    const headers = rev2025Headers({ sessionId });
    const abort = new AbortController();
    // Synchronous (no params.task): 3 chunks of 600 ms, in the HTTP process.
    const res = await fetch(a.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 21,
        method: 'tools/call',
        params: { name: 'analyze_numbers', arguments: { count: 3, chunkSize: 1, delayMsPerChunk: 600 } },
      }),
      signal: abort.signal,
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const stream = readSse(res, abort);
    // The first event primes the stream: an id to resume from and a retry interval.
    const primed = await waitFor(() => stream.events[0], { what: 'the priming event' });
    expect(primed).toMatchObject({ id: expect.stringMatching(/^\S+$/), retry: expect.any(Number) });
    // The client drops the stream; the call goes on, and the other instance replays its answer.
    stream.close();
    const resumed = await fetch(b.url, {
      headers: { ...headers, accept: 'text/event-stream', 'last-event-id': primed.id! },
    });
    expect(resumed.status).toBe(200);
    const final = await readSse(resumed).next(10_000);
    expect(final).toMatchObject({ id: 21, result: { content: [{ type: 'text' }] } });
    expect(JSON.stringify(final)).toContain('Analyzed 3 values');
  });

  it('runs a task-optional tool synchronously when the session declared the tasks extension but the call has no params.task (the Inspector)', async () => {
    const { sessionId } = await initialize(a.url, '2025-11-25', {
      extensions: { 'io.modelcontextprotocol/tasks': {} },
    });
    const headers = rev2025Headers({ sessionId });
    const called = await post(
      b.url,
      {
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'analyze_numbers', arguments: { count: 1000 } },
      },
      headers,
    );
    const reply = called.body;
    expect(reply.result.task).toBeUndefined();
    expect(reply.result.taskId).toBeUndefined();
    expect(reply.result.content[0].text).toContain('Analyzed 1000 values');
  });

  it('the answer to a server request may land on the other instance', async () => {
    const { headers, res } = await callAskName(7);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const stream = readSse(res);
    const next = () => stream.next(10_000);
    const request = await next();
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Your name?' } });
    const answered = await post(
      b.url,
      { jsonrpc: '2.0', id: request.id, result: { action: 'accept', content: { name: 'Grace' } } },
      headers,
    );
    expect(answered.status).toBe(202);
    expect(await next()).toMatchObject({
      id: 7,
      result: { content: [{ type: 'text', text: 'Hello, Grace' }] },
    });
  });

  it('negotiates 2025-06-18 for a client of that revision (no task fields in tools/list)', async () => {
    const { sessionId, result } = await initialize(a.url, '2025-06-18');
    expect(result.protocolVersion).toBe('2025-06-18');
    const listed = await post(
      a.url,
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      rev2025Headers({ sessionId, protocolVersion: '2025-06-18' }),
    );
    const tools = listed.messages.at(-1)!.result.tools as Array<Record<string, unknown>>;
    expect(tools.every((t) => !('execution' in t))).toBe(true);
  });

  it('answers a request without a session 400, with an unknown one 404; a version it does not serve gets the latest', async () => {
    const missing = await post(
      a.url,
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { 'mcp-protocol-version': '2025-11-25' },
    );
    expect(missing.status).toBe(400);
    const unknown = await post(
      a.url,
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { 'mcp-session-id': 'nope' },
    );
    expect(unknown.status).toBe(404);
    expect((await initialize(a.url, '2024-01-01')).result.protocolVersion).toBe('2025-11-25');
  });

  it('resources/subscribe: a URI over 2,048 characters or with a NUL is -32602; a server without resources of its own serves its artifacts', async () => {
    const { sessionId } = await initialize(a.url, '2025-11-25');
    const headers = rev2025Headers({ sessionId });
    for (const uri of ['test://' + 'x'.repeat(9_000), 'test://a\u0000b']) {
      const reply = await post(
        a.url,
        { jsonrpc: '2.0', id: 3, method: 'resources/subscribe', params: { uri } },
        headers,
      );
      expect(reply.body).toMatchObject({ error: { code: -32602 } });
    }
    const bare = await startTestProcess({ databaseUrl: tdb.url, tools: TOOLS, role: 'server' });
    try {
      const session = await initialize(bare.url, '2025-11-25');
      // The template of tasks' artifacts is always registered: the resources methods are there.
      const templates = await post(
        bare.url,
        { jsonrpc: '2.0', id: 4, method: 'resources/templates/list', params: {} },
        rev2025Headers({ sessionId: session.sessionId }),
      );
      expect(templates.body).toMatchObject({
        result: { resourceTemplates: [{ uriTemplate: 'tasks://{taskId}/artifacts/{name}' }] },
      });
    } finally {
      await bare.stop();
    }
  });

  it("the session stream (GET, on the other instance) carries list changes, updates of subscribed resources and its tasks' status", async () => {
    const { sessionId } = await initialize(a.url, '2025-11-25', { elicitation: {} });
    const headers = rev2025Headers({ sessionId });
    await post(
      a.url,
      { jsonrpc: '2.0', id: 2, method: 'resources/subscribe', params: { uri: 'test://watched' } },
      headers,
    );
    const abort = new AbortController();
    const res = await fetch(b.url, {
      headers: { ...headers, accept: 'text/event-stream' },
      signal: abort.signal,
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const stream = readSse(res, abort);
    try {
      // Raised on one process, delivered by the instance that holds the stream (through Postgres).
      const events = createServerEvents(tdb.db);
      const waitFor = async (method: string) => {
        for (;;) {
          const m = await stream.next(10_000);
          if (m.method === method) return m;
        }
      };
      await events.resourceUpdated('test://not-subscribed');
      await events.resourceUpdated('test://watched');
      expect((await waitFor('notifications/resources/updated')).params).toEqual({ uri: 'test://watched' });
      await events.listChanged('tools');
      await waitFor('notifications/tools/list_changed');
      const created = await post(
        a.url,
        {
          jsonrpc: '2.0',
          id: 3,
          method: 'tools/call',
          params: { name: 'analyze_numbers', arguments: { count: 10 }, task: {} },
        },
        headers,
      );
      const taskId = created.messages.at(-1)!.result.task.taskId as string;
      for (;;) {
        const status = await waitFor('notifications/tasks/status');
        expect(status.params.taskId).toBe(taskId);
        if (status.params.status === 'completed') break;
      }
    } finally {
      stream.close();
    }
  });

  it('notifications/cancelled, sent to the other instance, stops a call waiting for the client', async () => {
    const { headers, res } = await callAskName(9);
    const stream = readSse(res);
    expect((await stream.next(10_000)).method).toBe('elicitation/create');
    const sent = await post(
      b.url,
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } },
      headers,
    );
    expect(sent.status).toBe(202);
    expect(await stream.next(10_000)).toMatchObject({ id: 9, error: { code: -32603 } });
  });

  it('an idle session expires and is swept; a session in use does not', async () => {
    const short = await startTestProcess({
      databaseUrl: tdb.url,
      tools: TOOLS,
      env: { SESSION_IDLE_TTL_MS: '1000' },
    });
    try {
      const idle = await initialize(short.url);
      const busy = await initialize(short.url);
      const headersOf = (sessionId: string) => rev2025Headers({ sessionId });
      // The TTL is the property under test: the busy session is used every 200 ms for 2.5 TTLs.
      for (const until = Date.now() + 2_500; Date.now() < until;) {
        const ping = await post(
          short.url,
          { jsonrpc: '2.0', id: 1, method: 'ping' },
          headersOf(busy.sessionId),
        );
        expect(ping.status).toBe(200);
        await new Promise((r) => setTimeout(r, 200));
      }
      const gone = await post(
        short.url,
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        headersOf(idle.sessionId),
      );
      expect(gone.status).toBe(404);
      expect((await short.workers!.maintain()).sessions).toBeGreaterThanOrEqual(1);
    } finally {
      await short.stop();
    }
  });
});
