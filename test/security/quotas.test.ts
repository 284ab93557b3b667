// Per-principal bounds on what a client makes the server store (issue #22): sessions, what a session
// and a task keep of the client's, and steps per task. Each refuses with its error, names its limit, and
// admits again once usage drops. Real Postgres, real HTTP.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { initializeRequest, legacyHeaders, readReply } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** Records `steps` steps. */
const stepper = defineTool({
  name: 'many_steps',
  description: 'records `steps` steps (test tool)',
  inputSchema: z.object({ steps: z.number().int() }),
  taskSupport: 'required',
  async handler({ steps }, ctx) {
    for (let i = 0; i < steps; i++) await ctx.step(`s-${i}`, () => i);
    return { content: [{ type: 'text', text: `${steps} steps` }] };
  },
});

const server = useTestServer({
  tools: [...SHIPPED_TOOLS, stepper],
  env: {
    MAX_SESSIONS_PER_PRINCIPAL: '3',
    MAX_SESSION_METADATA_BYTES: '2000',
    MAX_STEPS_PER_TASK: '5',
    MAX_ARGUMENTS_BYTES: '4000',
  },
});

/** A 2025-11-25 initialize: its HTTP status, reply and session id. */
async function initialize(clientInfo = { name: 'quota-test', version: '1.0.0' }) {
  const res = await fetch(server.rt.url, {
    method: 'POST',
    headers: legacyHeaders(),
    body: JSON.stringify(initializeRequest({ clientInfo })),
  });
  const reply = await readReply(res);
  return {
    status: reply.status,
    body: reply.body,
    sessionId: res.headers.get('mcp-session-id') ?? undefined,
  };
}

describe('MAX_SESSIONS_PER_PRINCIPAL', () => {
  it('refuses a session over the quota with -31429 and 429, and admits one once a session ends', async () => {
    const opened = [];
    for (let i = 0; i < 3; i++) opened.push(await initialize());
    expect(opened.every((o) => o.status === 200 && o.sessionId !== undefined)).toBe(true);
    const refused = await initialize();
    expect(refused.status).toBe(429);
    expect(refused.sessionId).toBeUndefined();
    expect(refused.body.error).toMatchObject({
      code: -31429,
      message: expect.stringContaining('MAX_SESSIONS_PER_PRINCIPAL=3'),
      data: { limit: 'MAX_SESSIONS_PER_PRINCIPAL' },
    });
    const ended = await fetch(server.rt.url, {
      method: 'DELETE',
      headers: legacyHeaders({ sessionId: opened[0]!.sessionId! }),
    });
    expect(ended.status).toBe(200);
    expect((await initialize()).status).toBe(200);
    const metrics = await (await fetch(new URL('/metrics', server.rt.url))).text();
    expect(metrics).toMatch(/durable_mcp_quota_refusals_total\{limit="MAX_SESSIONS_PER_PRINCIPAL"\} 1/);
  });
});

describe('what a session and a task keep', () => {
  it('an initialize whose clientInfo is over MAX_SESSION_METADATA_BYTES, or holds a NUL, gets -32602 and no session', async () => {
    for (const clientInfo of [
      { name: 'x'.repeat(5000), version: '1' },
      { name: 'a\u0000b', version: '1' },
    ]) {
      const refused = await initialize(clientInfo);
      expect(refused.body.error?.code).toBe(-32602);
      expect(refused.sessionId).toBeUndefined();
    }
  });

  it("a task's clientCapabilities count against MAX_ARGUMENTS_BYTES with its arguments", async () => {
    const caps = {
      extensions: { 'io.modelcontextprotocol/tasks': {} },
      experimental: { padding: { text: 'p'.repeat(3000) } },
    };
    const refused = await server.mcp.error(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 1, padding: 'q'.repeat(1500) } },
      { caps },
    );
    expect(refused).toMatchObject({ code: -32602, message: expect.stringContaining('clientCapabilities') });
    // Either alone fits.
    await server.mcp.callTool('analyze_numbers', { count: 1, padding: 'q'.repeat(1500) });
  });
});

describe('MAX_STEPS_PER_TASK', () => {
  it('fails a task asking for one step more, naming the limit; a task within it completes', async () => {
    const within = await server.mcp.callTool('many_steps', { steps: 5 });
    expect((await server.mcp.waitForTask(within.taskId as string)).status).toBe('completed');
    const over = await server.mcp.callTool('many_steps', { steps: 6 });
    const failed = await server.mcp.waitForTask(over.taskId as string);
    expect(failed.status).toBe('failed');
    expect(failed.statusMessage).toMatch(/MAX_STEPS_PER_TASK/);
  });
});
