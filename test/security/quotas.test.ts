// Per-principal bounds on what a client makes the server store (issue #22): sessions, what a session
// and a task keep of the client's, and steps per task. Each refuses with its error, names its limit, and
// admits again once usage drops. Real Postgres, real HTTP.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { initializeRequest, rev2025Headers, readReply } from '../helpers/mcp.ts';
import { openRev2025Session, openSessionGet } from '../helpers/rev2025-session.ts';
import { waitFor } from '../helpers/wait.ts';
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
    MAX_GET_STREAMS_PER_PRINCIPAL: '2',
    MAX_RESULT_WAITS_PER_PRINCIPAL: '2',
  },
});

/** A 2025-11-25 initialize: its HTTP status, reply and session id. */
async function initialize(clientInfo = { name: 'quota-test', version: '1.0.0' }) {
  const res = await fetch(server.rt.url, {
    method: 'POST',
    headers: rev2025Headers(),
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
      headers: rev2025Headers({ sessionId: opened[0]!.sessionId! }),
    });
    expect(ended.status).toBe(200);
    const admitted = await initialize();
    expect(admitted.status).toBe(200);
    expect(await refusalsOf('MAX_SESSIONS_PER_PRINCIPAL')).toBe(1);
    // The quota is the file's: the sessions go, for the tests after this one.
    for (const { sessionId } of [...opened.slice(1), admitted]) {
      await fetch(server.rt.url, { method: 'DELETE', headers: rev2025Headers({ sessionId: sessionId! }) });
    }
  });
});

/** A 2025-11-25 request of `sessionId`, left open: resolves with the response once its headers arrive. */
function rev2025Post(sessionId: string, method: string, params: object, signal?: AbortSignal) {
  return fetch(server.rt.url, {
    method: 'POST',
    headers: rev2025Headers({ sessionId }),
    body: JSON.stringify({ jsonrpc: '2.0', id: `${method}-${Math.random()}`, method, params }),
    ...(signal === undefined ? {} : { signal }),
  });
}

/** Expects the 429 of a quota named `limit`. */
async function expectRefused(res: Response, limit: string) {
  const reply = await readReply(res);
  expect(reply.status).toBe(429);
  expect(reply.body.error).toMatchObject({ code: -31429, data: { limit } });
  expect(reply.body.error.message).toContain(`${limit}=2`);
}

async function refusalsOf(limit: string): Promise<number> {
  const metrics = await (await fetch(new URL('/metrics', server.rt.url))).text();
  const line = metrics
    .split('\n')
    .find((l) => l.startsWith(`durable_mcp_quota_refusals_total{limit="${limit}"}`));
  return Number(line?.split(' ').at(-1) ?? 0);
}

describe('streams and waits one principal holds open on an instance', () => {
  it('MAX_GET_STREAMS_PER_PRINCIPAL: the next GET gets -31429 and 429, and one is admitted once a stream closes', async () => {
    const sessionId = await openRev2025Session(server.rt.url);
    const first = await openSessionGet(server.rt.url, sessionId);
    const second = await openSessionGet(server.rt.url, sessionId);
    const before = await refusalsOf('MAX_GET_STREAMS_PER_PRINCIPAL');
    await expectRefused(
      await fetch(server.rt.url, {
        headers: { ...rev2025Headers({ sessionId }), accept: 'text/event-stream' },
      }),
      'MAX_GET_STREAMS_PER_PRINCIPAL',
    );
    expect(await refusalsOf('MAX_GET_STREAMS_PER_PRINCIPAL')).toBe(before + 1);
    first.close();
    const third = await waitFor(() => openSessionGet(server.rt.url, sessionId).catch(() => undefined), {
      what: 'a GET admitted after one closed',
    });
    second.close();
    third.close();
  });

  it('MAX_RESULT_WAITS_PER_PRINCIPAL: the next tasks/result gets -31429 and 429, and one is admitted once a wait ends', async () => {
    const sessionId = await openRev2025Session(server.rt.url, { tasks: {} });
    const taskIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await readReply(
        await rev2025Post(sessionId, 'tools/call', {
          name: 'approved_export',
          arguments: { batches: 1 },
          task: { ttl: 60_000 },
        }),
      );
      taskIds.push(created.body.result.task.taskId as string);
    }
    // An admitted wait becomes an SSE stream after a second (its headers arrive then); a refusal is at once.
    const waits = taskIds.slice(0, 2).map(() => new AbortController());
    const open = await Promise.all(
      waits.map((abort, i) => rev2025Post(sessionId, 'tasks/result', { taskId: taskIds[i] }, abort.signal)),
    );
    expect(open.map((res) => res.status)).toEqual([200, 200]);
    await expectRefused(
      await rev2025Post(sessionId, 'tasks/result', { taskId: taskIds[2] }),
      'MAX_RESULT_WAITS_PER_PRINCIPAL',
    );
    // A wait whose stream opened lasts until its task ends (its client may resume the stream elsewhere).
    await readReply(await rev2025Post(sessionId, 'tasks/cancel', { taskId: taskIds[0] }));
    await readReply(open[0]!);
    const admitted = new AbortController();
    await waitFor(
      async () => {
        const res = await rev2025Post(sessionId, 'tasks/result', { taskId: taskIds[2] }, admitted.signal);
        if (res.status === 200) return true;
        await res.arrayBuffer();
        return false;
      },
      { what: 'a tasks/result admitted after one ended', intervalMs: 100 },
    );
    admitted.abort();
    for (const abort of waits) abort.abort();
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
      { name: 'confirm_action', arguments: { action: 'q'.repeat(1000) } },
      { caps },
    );
    expect(refused).toMatchObject({ code: -32602, message: expect.stringContaining('clientCapabilities') });
    // Either alone fits.
    expect(await server.mcp.callTool('confirm_action', { action: 'q'.repeat(1000) })).toMatchObject({
      resultType: 'task',
    });
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
