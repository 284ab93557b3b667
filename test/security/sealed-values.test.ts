// Every sealed, signed or secret value the server hands out, sent back tampered with: cut short, or with
// its last character swapped (for most of them a swap that Node's lenient base64url decoder reads as the
// very same bytes). Each is refused with the answer its route gives any value it never issued, and the
// value as it was issued still works.
import { createHash, createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseTaskInputRequestId } from '../../src/rev2025-11-25/task-input.ts';
import { listTasks } from '../../src/tasks/store/list.ts';
import { defineTool } from '../../src/tools/define.ts';
import { digest } from '../../src/tools/request-state.ts';
import { openRev2025Session } from '../helpers/rev2025-session.ts';
import { rev2025Headers, readReply } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { lastCharacterSwapped, sameBytes, tamperVariants } from '../helpers/tamper.ts';
import { waitFor } from '../helpers/wait.ts';

const DASHBOARD_TOKEN = 'dashboard-token-for-sealed-values';
const REQUEST_STATE_SECRET = 'request-state-secret-for-sealed-values';

const nameForm = {
  message: 'Your name?',
  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
};

const askName = defineTool({
  name: 'ask_name',
  description: 'MRTR: one elicitation, then a greeting (test tool)',
  inputSchema: z.object({}),
  async handler(_args, ctx) {
    const answer = await ctx.elicit('user_name', nameForm);
    return { content: [{ type: 'text', text: `Hello, ${(answer.content as { name: string }).name}!` }] };
  },
});

const awaitSignal = defineTool({
  name: 'await_signal',
  description: 'Waits for a signal (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const outcome = await ctx.waitForSignal(await ctx.createSignal('go'));
    return { content: [{ type: 'text', text: outcome.status }] };
  },
});

const quickTask = defineTool({
  name: 'quick_task',
  description: 'A task that completes at once (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: 'done' }] }),
});

const server = useTestServer({
  tools: [askName, awaitSignal, quickTask],
  env: { DASHBOARD_TOKEN, REQUEST_STATE_SECRET },
});
const origin = () => new URL(server.rt.url).origin;

const accept = (name: string) => ({ action: 'accept', content: { name } });

/** ask_name answered, with `requestState`. */
const answerWith = (requestState: string) =>
  server.mcp.request('tools/call', {
    name: 'ask_name',
    arguments: {},
    inputResponses: { user_name: accept('Ada') },
    requestState,
  });

async function expectStateRefused(state: string): Promise<void> {
  for (const [how, tampered] of Object.entries(tamperVariants(state))) {
    const reply = await answerWith(tampered);
    expect({ how, error: reply.body.error }).toMatchObject({
      how,
      error: { code: -32602, message: 'Invalid requestState' },
    });
  }
  const done = await answerWith(state);
  expect(done.body.result).toMatchObject({ content: [{ type: 'text', text: 'Hello, Ada!' }] });
}

/** A state as the version before sealed them: `<payload, base64url>.<HMAC-SHA256 of it>`. */
function legacyState(): string {
  const payload = {
    v: 1,
    p: 'local',
    m: 'tools/call:ask_name',
    d: digest({}),
    e: Date.now() + 60_000,
    r: {},
  };
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  const key = createHash('sha256').update(REQUEST_STATE_SECRET).digest();
  return `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`;
}

describe('requestState', () => {
  it('refuses a sealed state whose tag was cut or respelled, and takes it as issued', async () => {
    const first = await server.mcp.callTool('ask_name', {});
    const state = first.requestState as string;
    // The tag is the last part: swapping its last character leaves its 16 bytes as they were.
    const tag = state.split('.')[3]!;
    expect(sameBytes(tag, lastCharacterSwapped(tag))).toBe(true);
    await expectStateRefused(state);
  });

  it('refuses a state of the earlier HMAC-signed shape whose MAC was cut or respelled', async () => {
    const state = legacyState();
    const mac = state.split('.')[1]!;
    expect(sameBytes(mac, lastCharacterSwapped(mac))).toBe(true);
    await expectStateRefused(state);
  });
});

describe('signal tokens', () => {
  it('delivers to the token as issued only', async () => {
    const created = await server.mcp.callTool('await_signal', {});
    const taskId = created.taskId as string;
    const token = await waitFor(async () => {
      const { rows } = await sql<{ output: { value: { token: string } } }>`
        select output from task_steps where task_id = ${taskId} and name = 'signal:go'`.execute(server.rt.db);
      return rows[0]?.output.value.token;
    });
    const deliver = (t: string) => fetch(`${origin()}/signals/${t}`, { method: 'POST', body: '1' });
    for (const [how, tampered] of Object.entries(tamperVariants(token))) {
      const res = await deliver(tampered);
      expect({ how, status: res.status, body: await res.json() }).toEqual({
        how,
        status: 404,
        body: { error: 'no such signal' },
      });
    }
    expect((await deliver(token)).status).toBe(202);
    expect((await server.mcp.waitForTask(taskId)).status).toBe('completed');
  });
});

describe('the dashboard', () => {
  const get = (path: string, headers: Record<string, string>) =>
    fetch(`${origin()}${path}`, { headers, redirect: 'manual' });
  const csrfOf = async (headers: Record<string, string>) =>
    /name="csrf" value="([^"]+)"/.exec(await (await get('/dashboard', headers)).text())![1]!;
  /** A form post that passes the CSRF check reaches the handler: 404 for a task that does not exist. */
  const cancelMissing = (headers: Record<string, string>, csrf: string) =>
    fetch(`${origin()}/dashboard/tasks/no-such-task/cancel`, {
      method: 'POST',
      headers,
      body: new URLSearchParams({ csrf }),
      redirect: 'manual',
    });

  async function signIn(): Promise<string> {
    const login = await fetch(`${origin()}/dashboard/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: DASHBOARD_TOKEN }),
      redirect: 'manual',
    });
    return /^durable_mcp_dashboard=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  }

  it('knows a session cookie as issued only', async () => {
    const cookie = await signIn();
    expect(sameBytes(cookie, lastCharacterSwapped(cookie))).toBe(true);
    for (const [how, tampered] of Object.entries(tamperVariants(cookie))) {
      const res = await get('/dashboard', { cookie: `durable_mcp_dashboard=${tampered}` });
      expect({ how, status: res.status, location: res.headers.get('location') }).toEqual({
        how,
        status: 303,
        location: '/dashboard/login',
      });
    }
    expect((await get('/dashboard', { cookie: `durable_mcp_dashboard=${cookie}` })).status).toBe(200);
  });

  it('takes a form with its CSRF token as issued only, signed in with a cookie or the token', async () => {
    const signedIn: Record<string, string>[] = [
      { cookie: `durable_mcp_dashboard=${await signIn()}` },
      { authorization: `Bearer ${DASHBOARD_TOKEN}` },
    ];
    for (const headers of signedIn) {
      const csrf = await csrfOf(headers);
      expect(sameBytes(csrf, lastCharacterSwapped(csrf))).toBe(true);
      for (const [how, tampered] of Object.entries(tamperVariants(csrf))) {
        const res = await cancelMissing(headers, tampered);
        expect({ how, status: res.status, body: await res.text() }).toEqual({
          how,
          status: 403,
          body: 'Forbidden: stale form',
        });
      }
      expect((await cancelMissing(headers, csrf)).status).toBe(404);
    }
  });
});

describe('tasks/list cursors (2025-11-25)', () => {
  it('refuses a cursor cut or respelled with -32602, and pages on with it as issued', async () => {
    for (let i = 0; i < 2; i++) await server.mcp.callTool('quick_task', {});
    const page = await listTasks(server.rt.db, 'local', { limit: 1 });
    const cursor = page.nextCursor!;
    expect(sameBytes(cursor, lastCharacterSwapped(cursor))).toBe(true);
    const sessionId = await openRev2025Session(server.rt.url, { elicitation: {} });
    const list = async (c: string) =>
      (
        await readReply(
          await fetch(server.rt.url, {
            method: 'POST',
            headers: rev2025Headers({ sessionId }),
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/list', params: { cursor: c } }),
          }),
        )
      ).body;
    for (const [how, tampered] of Object.entries(tamperVariants(cursor))) {
      expect({ how, error: (await list(tampered)).error }).toMatchObject({
        how,
        error: { code: -32602, message: 'Failed to list tasks: Invalid cursor' },
      });
    }
    expect((await list(cursor)).result).toMatchObject({ tasks: expect.any(Array) });
  });
});

describe('input request ids (2025-11-25)', () => {
  it('names the task and key for the id as issued only', () => {
    const names = Buffer.from(JSON.stringify(['task-1', 'k'])).toString('base64url');
    const id = `t-AAAAAA.${names}`;
    expect(parseTaskInputRequestId(id)).toEqual({ taskId: 'task-1', key: 'k' });
    expect(sameBytes(names, lastCharacterSwapped(names))).toBe(true);
    for (const tampered of Object.values(tamperVariants(id))) {
      expect(parseTaskInputRequestId(tampered)).toBeUndefined();
    }
  });
});
