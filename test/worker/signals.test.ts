/**
 * Signals (`ctx.createSignal` / `ctx.waitForSignal`) through the public API and a real socket: a task
 * waits for a delivery from outside its client without a worker, the first delivery wins, an early
 * delivery is kept, a wait times out as a result, and a cancel during the wait ends the task at once.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

/** Waits for an approval signal, optionally sleeping first (so that it can be delivered early). */
const awaitApproval = defineTool({
  name: 'await_approval',
  description: 'Waits for an approval delivered to its signal URL.',
  inputSchema: z.object({ timeoutMs: z.number().int().positive().optional(), napMs: z.number().optional() }),
  taskSupport: 'required',
  async handler({ timeoutMs, napMs }, ctx) {
    const approval = await ctx.createSignal('approval', timeoutMs === undefined ? {} : { timeoutMs });
    if (napMs !== undefined) await ctx.sleep('nap', napMs);
    const outcome = await ctx.waitForSignal(approval);
    return {
      content: [{ type: 'text', text: outcome.status }],
      structuredContent: { outcome, url: approval.url },
    };
  },
});

const server = useTestServer({ tools: [awaitApproval] });

async function start(args: Record<string, unknown> = {}): Promise<string> {
  const created = await server.mcp.callTool('await_approval', args);
  expect(created.resultType).toBe('task');
  return created.taskId as string;
}

/** The signal's token, from the step that created it (what the handler would hand to a third party). */
async function tokenOf(taskId: string): Promise<string> {
  return waitFor(async () => {
    const { rows } = await sql<{ output: { value: { token: string } } }>`
      select output from task_steps where task_id = ${taskId} and name = 'signal:approval'`.execute(
      server.rt.db,
    );
    return rows[0]?.output.value.token;
  });
}

const waiting = (taskId: string) =>
  server.mcp.waitForTask(taskId, (t) => t.statusMessage === 'Waiting for signal approval');

function deliver(token: string, body: string | undefined) {
  return fetch(new URL(`/signals/${token}`, server.rt.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body }),
  });
}

describe('signals', () => {
  it('a task waits without a worker until the signal is delivered, once', async () => {
    const taskId = await start();
    const token = await tokenOf(taskId);
    await waiting(taskId);
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    const first = await deliver(token, JSON.stringify({ approvedBy: 'carol' }));
    expect(first.status).toBe(202);
    const second = await deliver(token, JSON.stringify({ approvedBy: 'mallory' }));
    expect(second.status).toBe(409);
    expect(await second.json()).toEqual({ error: 'this signal was already delivered' });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent.outcome).toEqual({
      status: 'delivered',
      payload: { approvedBy: 'carol' },
    });
    // The handle's URL is the endpoint's origin + /signals/{token}.
    expect(done.result.structuredContent.url).toBe(new URL(`/signals/${token}`, server.rt.url).href);
  });

  it('a signal delivered before the task waits is kept', async () => {
    const taskId = await start({ napMs: 1_500 });
    const token = await tokenOf(taskId);
    await server.mcp.waitForTask(taskId, (t) => /^Sleeping until /.test(t.statusMessage ?? ''));
    expect((await deliver(token, '"early"')).status).toBe(202);
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'delivered', payload: 'early' });
  });

  it('the library delivers too: server.deliverSignal', async () => {
    const taskId = await start();
    const token = await tokenOf(taskId);
    await waiting(taskId);
    expect(await server.rt.deliverSignal(token, { n: 1 })).toBe('delivered');
    expect(await server.rt.deliverSignal(token, { n: 2 })).toBe('already_delivered');
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'delivered', payload: { n: 1 } });
  });

  it('a wait times out as a result, and a delivery after it is refused', async () => {
    const taskId = await start({ timeoutMs: 1_500 });
    const token = await tokenOf(taskId);
    await waiting(taskId);
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'timed_out' });
    const late = await deliver(token, '{}');
    expect(late.status).toBe(409);
    expect(await late.json()).toEqual({ error: 'this signal timed out before it was delivered' });
  });

  it('a cancel during the wait ends the task at once; its signal is refused then', async () => {
    const taskId = await start();
    const token = await tokenOf(taskId);
    await waiting(taskId);
    await server.mcp.result('tasks/cancel', { taskId });
    expect(await server.mcp.getTask(taskId)).toMatchObject({ status: 'cancelled' });
    expect((await deliver(token, '{}')).status).toBe(409);
  });

  it('refuses unknown tokens, bodies that are not JSON and bodies over the limit, storing nothing', async () => {
    expect((await deliver('A'.repeat(32), '{}')).status).toBe(404);
    expect((await deliver('not a token!', '{}')).status).toBe(404);
    const taskId = await start();
    const token = await tokenOf(taskId);
    expect((await deliver(token, '{"open":')).status).toBe(400);
    expect((await deliver(token, JSON.stringify('x'.repeat(70_000)))).status).toBe(413);
    expect((await deliver(token, '"\\u0000"')).status).toBe(400);
    // Still deliverable: none of those counted.
    expect((await deliver(token, 'true')).status).toBe(202);
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'delivered', payload: true });
  });
});
