import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { countTasks } from '../helpers/db.ts';
import { listen, mcpHeaders, mcpRequest } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const regional = defineTool({
  name: 'regional',
  description: 'mirrors region into Mcp-Param-Region (test tool)',
  inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }),
  handler: ({ region }) => ({ content: [{ type: 'text', text: region }] }),
});

const bigResult = defineTool({
  name: 'big_result',
  description: 'returns n bytes of text (test tool)',
  inputSchema: z.object({ n: z.number().int() }),
  taskSupport: 'required',
  handler: ({ n }) => ({ content: [{ type: 'text', text: 'x'.repeat(n) }] }),
});

const server = useTestServer({
  tools: [...SHIPPED_TOOLS, bigResult, regional],
  env: {
    MAX_ARGUMENTS_BYTES: '2000',
    MAX_INPUT_RESPONSES_BYTES: '1000',
    MAX_RESULT_BYTES: '5000',
    MAX_JSON_DEPTH: '16',
    RATE_LIMIT_POLLING: 'true',
    TASK_POLL_INTERVAL_MS: '2000',
    MAX_SUBSCRIPTIONS_PER_PRINCIPAL: '2',
  },
});

/** A task's status read from the database: polling tasks/get here would be answered 429 (RATE_LIMIT_POLLING). */
const statusOf = async (taskId: string) =>
  (
    await server.tdb.db
      .selectFrom('tasks')
      .select('status')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow()
  ).status;

describe('transport hardening', () => {
  it('rejects a foreign Host (DNS rebinding) with 403 and accepts loopback names', async () => {
    const body = JSON.stringify(mcpRequest('server/discover', {}, { caps: {} }));
    const { request } = await import('node:http');
    const send = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          server.rt.url,
          {
            method: 'POST',
            headers: mcpHeaders('server/discover', {}, { host }),
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect(await send('evil.example.com')).toBe(403);
    expect(await send('attacker.test:3000')).toBe(403);
    expect(await send('localhost:3000')).toBe(200);
    expect(await send(new URL(server.rt.url).host)).toBe(200);
  });

  it('rejects JSON nested deeper than the limit with 400 and -32600', async () => {
    const deep = '['.repeat(40) + ']'.repeat(40);
    const reply = await server.mcp.post(
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","deep":${deep}}}}`,
      mcpHeaders('tools/call', { name: 'echo' }),
    );
    expect(reply.status).toBe(400);
    expect(reply.body.error).toMatchObject({
      code: -32600,
      message: 'Invalid Request: JSON nested deeper than 16',
    });
    // Brackets inside strings do not count.
    expect(
      (await server.mcp.callTool('echo', { text: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[' })).content[0].text,
    ).toHaveLength(28);
  });

  it('limits argument size (-32602, no task created)', async () => {
    const before = await countTasks(server.tdb.db);
    const error = await server.mcp.error('tools/call', {
      name: 'analyze_numbers',
      arguments: { count: 5, pad: 'x'.repeat(3000) },
    });
    expect(error).toMatchObject({ code: -32602 });
    expect(error.message).toMatch(/arguments is \d+ bytes, over the limit of 2000/);
    expect(await countTasks(server.tdb.db)).toBe(before);
  });

  it('limits inputResponses size (-32602, the task unchanged)', async () => {
    const { taskId } = await server.mcp.callTool('confirm_action', { action: 'a' });
    await waitFor(async () => (await statusOf(taskId)) === 'input_required', { what: 'input_required' });
    const error = await server.mcp.error('tasks/update', {
      taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true, pad: 'y'.repeat(2000) } } },
    });
    expect(error).toMatchObject({ code: -32602 });
    expect(error.message).toMatch(/inputResponses is \d+ bytes, over the limit of 1000/);
    expect((await server.mcp.getTask(taskId)).status).toBe('input_required');
  });

  it('stores a result over the stored-result limit as an artifact: the task completes with a link to it', async () => {
    const small = await server.mcp.callTool('big_result', { n: 100 });
    const big = await server.mcp.callTool('big_result', { n: 10_000 });
    const wait = async (taskId: string) => {
      await waitFor(async () => (await statusOf(taskId)) !== 'working', { what: `task ${taskId} ending` });
      return server.mcp.getTask(taskId);
    };
    const kept = await wait(small.taskId);
    expect(kept.status).toBe('completed');
    expect(kept.result.content).toEqual([{ type: 'text', text: 'x'.repeat(100) }]);
    const spilled = await wait(big.taskId);
    expect(spilled.status).toBe('completed');
    expect(spilled.result.content[0].text).toMatch(
      /The result \(\d+ bytes\) is larger than .* \(MAX_RESULT_BYTES, 5000\)/,
    );
    expect(spilled.result.content[1]).toMatchObject({ type: 'resource_link', name: 'tool-result.json' });
    const stored = await fetch(spilled.result.content[1]._meta['dev.durable-mcp-tasks/downloadUrl']);
    expect(await stored.json()).toEqual({ content: [{ type: 'text', text: 'x'.repeat(10_000) }] });
  });

  it('answers tasks/get polled faster than the task’s pollIntervalMs with 429 and Retry-After', async () => {
    const { taskId } = await server.mcp.callTool('confirm_action', { action: 'poll me' });
    expect((await server.mcp.request('tasks/get', { taskId })).status).toBe(200);
    const reply = await server.mcp.request('tasks/get', { taskId });
    expect(reply.status).toBe(429);
    expect(reply.body.error).toMatchObject({ code: -31429 });
    expect(Number(reply.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another principal's polling, or another task's, is not affected; after the interval it is allowed.
    const other = await server.mcp.callTool('confirm_action', { action: 'other' });
    expect((await server.mcp.request('tasks/get', { taskId: other.taskId })).status).toBe(200);
    // The interval passing is what is tested (half the task's 2000 ms pollIntervalMs, and a margin).
    await new Promise((r) => setTimeout(r, 1100));
    expect((await server.mcp.request('tasks/get', { taskId })).status).toBe(200);
  });

  it('checks Mcp-Param headers: raw non-ASCII bytes, or a value that does not match, get -32020', async () => {
    const ok = await server.mcp.request(
      'tools/call',
      { name: 'regional', arguments: { region: 'eu-1' } },
      { headers: { 'mcp-param-region': 'eu-1' } },
    );
    expect(ok.status).toBe(200);
    // Raw UTF-8 bytes (an intermediary reads "é", Node "Ã©"): must come Base64-encoded instead.
    const raw = await server.mcp.error(
      'tools/call',
      { name: 'regional', arguments: { region: 'Ã©' } },
      { headers: { 'mcp-param-region': 'Ã©' } },
    );
    expect(raw).toMatchObject({ status: 400, code: -32020 });
    const encoded = await server.mcp.request(
      'tools/call',
      { name: 'regional', arguments: { region: 'é' } },
      {
        headers: { 'mcp-param-region': `=?base64?${Buffer.from('é').toString('base64')}?=` },
      },
    );
    expect(encoded.status).toBe(200);
    expect(
      await server.mcp.error('tools/call', { name: 'regional', arguments: { region: 'eu-1' } }),
    ).toMatchObject({
      status: 400,
      code: -32020,
    });
  });

  it('keeps validation errors small: the first issues only', async () => {
    const inputResponses = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));
    const error = await server.mcp.error('tasks/update', {
      taskId: 'AAAAAAAAAAAAAAAAAAAAAAAA',
      inputResponses,
    });
    expect(error.code).toBe(-32602);
    expect(error.message).toContain('(and 90 more issues)');
  });

  it('limits open subscriptions per principal (429)', async () => {
    const a = await listen(server.rt.url, { toolsListChanged: true });
    const b = await listen(server.rt.url, { toolsListChanged: true });
    await a.next();
    await b.next();
    expect(
      await server.mcp.error('subscriptions/listen', { notifications: { toolsListChanged: true } }),
    ).toMatchObject({
      status: 429,
    });
    a.close();
    await a.ended;
    // The server frees the slot once it sees the socket closed: until then a third stream gets 429.
    const c = await waitFor(
      async () => {
        const stream = await listen(server.rt.url, { toolsListChanged: true });
        if (stream.status === 200) return stream;
        stream.close();
        return undefined;
      },
      { what: 'a subscription slot freed' },
    );
    expect((await c.next()).method).toBe('notifications/subscriptions/acknowledged');
    b.close();
    c.close();
  });

  it('never leaks internals in errors', async () => {
    const reply = await server.mcp.request('tools/call', {
      name: 'analyze_numbers',
      arguments: { count: 'DROP TABLE tasks' },
    });
    expect(reply.text).not.toMatch(/at .*\.ts:\d+|node_modules|select |insert |update .* set/i);
  });
});
