import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { countTasks } from '../helpers/db.ts';
import { openRev2025Session } from '../helpers/rev2025-session.ts';
import { rev2025Headers, mcpHeaders, mcpRequest, RawMcp, readReply } from '../helpers/mcp.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const aborted: string[] = [];
const sleeper = defineTool({
  name: 'sync_sleeper',
  description: 'Reports progress every 50 ms until aborted (test tool)',
  inputSchema: z.object({ id: z.string() }),
  async handler({ id }, ctx) {
    for (let i = 1; i <= 200; i++) {
      if (ctx.signal.aborted) {
        aborted.push(id);
        throw new Error('aborted');
      }
      await ctx.progress(i, 200);
      await sleep(50);
    }
    return { content: [{ type: 'text', text: 'done' }] };
  },
});

/** Takes arguments beyond its own: its schema says so (`.loose()`), and the handler sees them. */
const looseEcho = defineTool({
  name: 'loose_echo',
  description: 'Echoes every argument it was given (test tool)',
  inputSchema: z.object({ text: z.string() }).loose(),
  handler: (args) => ({ content: [{ type: 'text', text: JSON.stringify(args) }] }),
});

/** A schema transformed after parsing still takes only its object's arguments. */
const shout = defineTool({
  name: 'shout',
  description: 'Echoes its text in capitals (test tool)',
  inputSchema: z.object({ text: z.string() }).transform(({ text }) => text.toUpperCase()),
  handler: (text) => ({ content: [{ type: 'text', text }] }),
});

const server = useTestServer({ tools: [...SHIPPED_TOOLS, sleeper, looseEcho, shout] });
const plain = () => new RawMcp(server.rt.url, {});

describe('tools/list', () => {
  it('lists the shipped tools in a deterministic order with JSON Schema 2020-12 input schemas', async () => {
    const first = await server.mcp.result('tools/list');
    const second = await server.mcp.result('tools/list');
    expect(first.tools).toEqual(second.tools);
    expect(first.tools.map((t: { name: string }) => t.name)).toEqual([
      'analyze_numbers',
      'confirm_action',
      'fail_with',
      'echo',
      'approved_export',
      'checksum_shards',
      'export_csv',
      'scan_rows',
      'sync_sleeper',
      'loose_echo',
      'shout',
    ]);
    expect(first).toMatchObject({ resultType: 'complete', cacheScope: 'public' });
    expect(first.ttlMs).toBeGreaterThanOrEqual(0);
    const analyze = first.tools[0];
    expect(analyze.inputSchema).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        count: { type: 'integer', minimum: 1, maximum: 10_000_000 },
        chunkSize: { type: 'integer', default: 100_000 },
        delayMsPerChunk: { type: 'integer', minimum: 0, maximum: 10_000, default: 0 },
      },
      required: ['count'],
      additionalProperties: false,
    });
  });

  it('says which tools take no arguments but their own (additionalProperties: false) and which take any', async () => {
    const { tools } = await server.mcp.result('tools/list');
    const extra = Object.fromEntries(
      tools.map((t: { name: string; inputSchema: { additionalProperties?: unknown } }) => [
        t.name,
        t.inputSchema.additionalProperties,
      ]),
    );
    for (const tool of SHIPPED_TOOLS) expect(extra[tool.name], tool.name).toBe(false);
    expect(extra).toMatchObject({ sync_sleeper: false, shout: false, loose_echo: {} });
  });

  it('rejects a cursor it never issued with -32602', async () => {
    expect(await server.mcp.error('tools/list', { cursor: 'bogus' })).toMatchObject({ code: -32602 });
  });
});

describe('tools/call', () => {
  it('runs echo synchronously, also for a client that declared the tasks extension', async () => {
    expect(await server.mcp.callTool('echo', { text: 'héllo' })).toMatchObject({
      resultType: 'complete',
      content: [{ type: 'text', text: 'héllo' }],
    });
  });

  it('runs analyze_numbers synchronously for a client without the extension', async () => {
    const before = await countTasks(server.tdb.db);
    const result = await plain().callTool('analyze_numbers', { count: 2500, chunkSize: 1000 });
    expect(result.resultType).toBe('complete');
    expect(result.structuredContent).toEqual(expectedAnalysis(2500, 1000));
    expect(await countTasks(server.tdb.db)).toBe(before);
  });

  it('makes analyze_numbers a task for a client with the extension, stored before the answer', async () => {
    const created = await server.mcp.callTool('analyze_numbers', { count: 10 });
    expect(created).toMatchObject({
      resultType: 'task',
      status: 'working',
      ttlMs: 3_600_000,
      pollIntervalMs: 20,
    });
    expect(created.taskId).toMatch(/^[A-Za-z0-9_-]{24,}$/);
    const row = await server.tdb.db
      .selectFrom('tasks')
      .selectAll()
      .where('task_id', '=', created.taskId)
      .executeTakeFirst();
    expect(row?.principal).toBe('local');
    const done = await server.mcp.waitForTask(created.taskId);
    expect(done.result.structuredContent).toEqual(expectedAnalysis(10, 100_000));
  });

  it('refuses a task-required tool to a client without the extension with -32021', async () => {
    const error = await plain().error('tools/call', { name: 'confirm_action', arguments: { action: 'x' } });
    expect(error).toMatchObject({
      status: 400,
      code: -32021,
      data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
    });
  });

  it('ignores a legacy task parameter', async () => {
    const result = await server.mcp.result('tools/call', {
      name: 'echo',
      arguments: { text: 't' },
      task: { ttl: 1000 },
    });
    expect(result.resultType).toBe('complete');
    const sync = await plain().result('tools/call', {
      name: 'analyze_numbers',
      arguments: { count: 3 },
      task: { ttl: 1000 },
    });
    expect(sync.resultType).toBe('complete');
  });

  it('answers an unknown tool with -32602', async () => {
    expect(await server.mcp.error('tools/call', { name: 'nope', arguments: {} })).toMatchObject({
      status: 200,
      code: -32602,
    });
  });

  it.each([
    [{ count: 0 }],
    [{ count: 'ten' }],
    [{ count: 1.5 }],
    [{ count: 20_000_000 }],
    [{}],
    [{ count: 10, delayMsPerChunk: -1 }],
  ])('reports invalid arguments %j as a tool error and creates no task', async (args) => {
    const before = await countTasks(server.tdb.db);
    const result = await server.mcp.callTool('analyze_numbers', args);
    expect(result).toMatchObject({ resultType: 'complete', isError: true });
    expect(result.content[0].text).toMatch(/^Invalid arguments for tool analyze_numbers:/);
    expect(await countTasks(server.tdb.db)).toBe(before);
  });

  it('refuses an argument the tool does not take as a tool error naming it, and creates no task', async () => {
    const before = await countTasks(server.tdb.db);
    for (const [name, args, message] of [
      ['echo', { text: 'hi', bogus: 1 }, 'unknown argument "bogus" (it takes "text")'],
      ['export_csv', { mib: 2 }, 'unknown argument "mib" (it takes "megabytes", "pageDelayMs")'],
      ['shout', { text: 'a', loud: true, x: 1 }, 'unknown arguments "loud", "x" (it takes "text")'],
    ] as const) {
      const result = await server.mcp.callTool(name, args);
      expect(result).toMatchObject({
        resultType: 'complete',
        isError: true,
        content: [{ type: 'text', text: `Invalid arguments for tool ${name}: ${message}` }],
      });
    }
    expect(await countTasks(server.tdb.db)).toBe(before);
    expect((await server.mcp.callTool('shout', { text: 'a' })).content[0].text).toBe('A');
  });

  it('refuses an unknown argument at 2025-11-25 too', async () => {
    const sessionId = await openRev2025Session(server.rt.url);
    const res = await fetch(server.rt.url, {
      method: 'POST',
      headers: rev2025Headers({ sessionId }),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'hi', bogus: 1 } },
      }),
    });
    expect((await readReply(res)).body.result).toMatchObject({
      isError: true,
      content: [
        { type: 'text', text: 'Invalid arguments for tool echo: unknown argument "bogus" (it takes "text")' },
      ],
    });
  });

  it('gives a tool whose schema takes other keys (.loose()) every argument', async () => {
    const result = await server.mcp.callTool('loose_echo', { text: 'hi', extra: 1 });
    expect(JSON.parse(result.content[0].text as string)).toEqual({ text: 'hi', extra: 1 });
  });

  it('rejects arguments that are not an object with -32602', async () => {
    expect(await server.mcp.error('tools/call', { name: 'echo', arguments: 'text' })).toMatchObject({
      code: -32602,
    });
  });

  it('streams progress as SSE when the request carries a progressToken', async () => {
    const reply = await plain().request(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 500, chunkSize: 100 } },
      { meta: { progressToken: 'p1' } },
    );
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('text/event-stream');
    expect(reply.headers.get('x-accel-buffering')).toBe('no');
    const progress = reply.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((m) => (m.params as { progress: number }).progress)).toEqual([1, 2, 3, 4, 5]);
    expect(progress.every((m) => (m.params as { progressToken: string }).progressToken === 'p1')).toBe(true);
    expect(reply.body.result.structuredContent).toEqual(expectedAnalysis(500, 100));
  });

  it('cancels a synchronous call when the client closes its SSE stream', async () => {
    const abort = new AbortController();
    const params = { name: 'sync_sleeper', arguments: { id: 'closed-stream' } };
    const res = await fetch(server.rt.url, {
      method: 'POST',
      signal: abort.signal,
      headers: mcpHeaders('tools/call', params),
      body: JSON.stringify(mcpRequest('tools/call', params, { id: 'sse-1', meta: { progressToken: 7 } })),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('notifications/progress');
    abort.abort();
    await waitFor(() => aborted.includes('closed-stream'), { timeoutMs: 3000, what: 'the handler aborted' });
    // The server goes on serving.
    expect((await server.mcp.result('server/discover')).resultType).toBe('complete');
  });
});
