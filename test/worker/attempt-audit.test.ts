/**
 * The audit of a normal run, against a real server process, Postgres and pg-boss: a map of 20 items, a
 * handler that crashes until its attempts run out, a task cancelled while it waits and one that
 * completes; afterwards no finished task has an attempt without an end (the dashboard and `tasks show`
 * would show it as running), and every item's attempt ended `completed`.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { useTestServer } from '../helpers/server-process.ts';

const squares = defineTool({
  name: 'squares',
  description: 'Squares 20 numbers, one map item each.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const numbers = Array.from({ length: 20 }, (_, i) => i);
    const squared = await ctx.map('square', numbers, (n) => Promise.resolve(n * n), { concurrency: 4 });
    return { content: [{ type: 'text', text: String(squared.length) }], structuredContent: { squared } };
  },
});

const crashes = defineTool({
  name: 'crashes',
  description: 'Crashes every time.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  retry: { maxAttempts: 3, backoff: { initialMs: 0 } },
  handler: () => {
    throw new Error('boom');
  },
});

const waits = defineTool({
  name: 'waits',
  description: 'Waits for a signal nobody delivers.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    const outcome = await ctx.waitForSignal(await ctx.createSignal('never'));
    return { content: [{ type: 'text', text: outcome.status }] };
  },
});

const quick = defineTool({
  name: 'quick',
  description: 'Completes at once.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: 'done' }] }),
});

const server = useTestServer({ tools: [squares, crashes, waits, quick] });

const start = async (tool: string) => (await server.mcp.callTool(tool, {})).taskId as string;

describe('after a normal run', () => {
  it('no finished task has an attempt left open', async () => {
    const mapId = await start('squares');
    const crashId = await start('crashes');
    const waitId = await start('waits');
    const quickId = await start('quick');
    await server.mcp.waitForTask(waitId, (t) => t.statusMessage === 'Waiting for signal never');
    await server.mcp.result('tasks/cancel', { taskId: waitId });
    expect((await server.mcp.waitForTask(mapId)).status).toBe('completed');
    expect((await server.mcp.waitForTask(crashId)).status).toBe('failed');
    expect((await server.mcp.waitForTask(waitId)).status).toBe('cancelled');
    expect((await server.mcp.waitForTask(quickId)).status).toBe('completed');

    const { rows: items } = await sql<{ outcome: string | null; n: number }>`
      select a.outcome, count(*)::int as n from task_attempts a join tasks t on t.task_id = a.task_id
      where t.parent_task_id = ${mapId} group by 1`.execute(server.rt.db);
    expect(items).toEqual([{ outcome: 'completed', n: 20 }]);

    const { rows: open } = await sql<{ task_id: string; status: string; attempt: number }>`
      select t.task_id, t.status, a.attempt from task_attempts a join tasks t on t.task_id = a.task_id
      where t.status in ('completed', 'failed', 'cancelled') and a.ended_at is null`.execute(server.rt.db);
    expect(open).toEqual([]);
  });
});
