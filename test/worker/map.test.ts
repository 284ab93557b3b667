/**
 * Fan-out (`ctx.map`) through the public API: items run as child tasks across the pool within the
 * map's concurrency (checked from the database, not from the handler), results come back in order,
 * the parent waits without a slot and shows `k/n items`, a failing item is retried by the map's policy
 * and one that fails for good fails the map and stops the rest, a cancel stops every item, and a
 * synchronous call runs its items in its request.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, StepFailedError, type MapItemInfo, type ToolContext } from '../../src/index.ts';
import { adminActivity } from '../../src/tasks/store/admin-activity.ts';
import { adminListTasks } from '../../src/tasks/store/admin-list.ts';
import { listTasks } from '../../src/tasks/store/list.ts';
import { mapItemsOf, mostItemsAtOnce } from '../helpers/map-items.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const squaresInput = z.object({
  count: z.number().int().nonnegative(),
  concurrency: z.number().int().positive().optional(),
  itemMs: z.number().int().nonnegative().default(0),
  failAt: z.number().int().optional(),
  flakyAt: z.number().int().optional(),
});

/**
 * Squares `count` numbers, `concurrency` at a time, each item taking `itemMs`; item `failAt` always
 * throws, item `flakyAt` throws once.
 */
async function squaresHandler(
  { count, concurrency, itemMs, failAt, flakyAt }: z.output<typeof squaresInput>,
  ctx: ToolContext,
) {
  const numbers = await ctx.step('numbers', () => Array.from({ length: count }, (_, i) => i));
  const squared = await ctx.map(
    'square',
    numbers,
    async (n, index, signal, run) => {
      await new Promise((resolve) => setTimeout(resolve, itemMs));
      signal.throwIfAborted();
      if (index === failAt) throw new Error(`item ${index} is broken`);
      if (index === flakyAt) flakyRuns.push(run);
      if (index === flakyAt && !flaky.has(index)) {
        flaky.add(index);
        throw new Error('flaky once');
      }
      return n * n;
    },
    {
      ...(concurrency !== undefined && { concurrency }),
      retry: { maxAttempts: 2, backoff: { initialMs: 10 } },
    },
  );
  const total = await ctx.step('total', () => squared.reduce((a, b) => a + b, 0));
  return {
    content: [{ type: 'text' as const, text: String(total) }],
    structuredContent: { squared, total },
  };
}
const flaky = new Set<number>();
/** What the flaky item's function was told of each of its runs. */
const flakyRuns: MapItemInfo[] = [];

const squares = defineTool({
  name: 'squares',
  description: 'Squares numbers in parallel items.',
  inputSchema: squaresInput,
  taskSupport: 'required',
  handler: squaresHandler,
});

/** The same handler in a tool that never runs as a task. */
const squaresNow = defineTool({
  name: 'squares_now',
  description: 'Squares numbers in parallel, inside its request.',
  inputSchema: squaresInput,
  taskSupport: 'never',
  handler: squaresHandler,
});

const server = useTestServer({ tools: [squares, squaresNow], env: { WORKER_CONCURRENCY: '16' } });

async function start(args: Record<string, unknown>): Promise<string> {
  const created = await server.mcp.callTool('squares', args);
  expect(created.resultType).toBe('task');
  return created.taskId as string;
}

const itemsOf = (taskId: string) => mapItemsOf(server.rt.db, taskId);

describe('ctx.map', () => {
  it('runs every item once, at most `concurrency` at a time, and returns the results in order', async () => {
    const taskId = await start({ count: 60, concurrency: 4, itemMs: 20 });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent.squared).toEqual(Array.from({ length: 60 }, (_, i) => i * i));
    const items = await itemsOf(taskId);
    expect(items).toHaveLength(60);
    expect(items.every((i) => i.status === 'completed' && i.claims.length === 1)).toBe(true);
    expect(mostItemsAtOnce(items)).toBeLessThanOrEqual(4);
    expect(mostItemsAtOnce(items)).toBeGreaterThan(1);
    // The items are the parent's work: never listed on their own (2025-11-25 tasks/list, the operator's list).
    const { principal } = await server.rt.db
      .selectFrom('tasks')
      .select('principal')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    const listed = (await listTasks(server.rt.db, principal, { limit: 100 })).tasks.map((t) => t.taskId);
    expect(listed).toContain(taskId);
    expect(listed.filter((id) => id.startsWith(`${taskId}_`))).toEqual([]);
    const operatorList = await adminListTasks(server.rt.db, { limit: 1000 });
    expect(operatorList.some((t) => t.taskId.startsWith(`${taskId}_`))).toBe(false);
    // Nor counted in the dashboard's throughput: the tasks created in the last minutes are the top-level ones.
    const created = (await adminActivity(server.rt.db, 10)).reduce((sum, m) => sum + m.created, 0);
    expect(created).toBe(operatorList.length);
  });

  it('parks the parent without a slot while its items run, with k/n items in its statusMessage', async () => {
    const taskId = await start({ count: 6, concurrency: 2, itemMs: 400 });
    const waiting = await server.mcp.waitForTask(taskId, (t) =>
      /^square: [1-5]\/6 items$/.test(t.statusMessage ?? ''),
    );
    expect(waiting.status).toBe('working');
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    expect((await server.mcp.waitForTask(taskId)).status).toBe('completed');
  });

  it('retries a failing item by the map policy; one that fails for good fails the map and stops the rest', async () => {
    const flakyTask = await start({ count: 5, concurrency: 2, flakyAt: 3 });
    const recovered = await server.mcp.waitForTask(flakyTask);
    expect(recovered.status).toBe('completed');
    expect(recovered.result.structuredContent.total).toBe(0 + 1 + 4 + 9 + 16);
    expect(flakyRuns).toEqual([
      { map: 'square', index: 3, attempt: 1 },
      { map: 'square', index: 3, attempt: 2 },
    ]);

    const broken = await start({ count: 40, concurrency: 2, itemMs: 50, failAt: 1 });
    const failed = await server.mcp.waitForTask(broken);
    expect(failed.status).toBe('failed');
    expect(failed.statusMessage).toContain('item 1 is broken');
    expect(failed.statusMessage).toContain(
      new StepFailedError('square[1]', 2, new Error('x')).message.split(':')[0],
    );
    // No item is left to run: the rest were cancelled, most of them before they started.
    const items = await waitFor(async () => {
      const rows = await itemsOf(broken);
      return rows.every((i) => ['completed', 'failed', 'cancelled'].includes(i.status)) ? rows : undefined;
    });
    expect(items.filter((i) => i.status === 'cancelled').length).toBeGreaterThan(30);
  });

  it('a cancel of the parent stops its items', async () => {
    const taskId = await start({ count: 50, concurrency: 3, itemMs: 300 });
    await server.mcp.waitForTask(taskId, (t) => /^square: [1-9]/.test(t.statusMessage ?? ''));
    await server.mcp.request('tasks/cancel', { taskId });
    await server.mcp.waitForTask(taskId, (t) => t.status === 'cancelled');
    const items = await waitFor(async () => {
      const rows = await itemsOf(taskId);
      return rows.every((i) => i.status !== 'working') ? rows : undefined;
    });
    expect(items.filter((i) => i.status === 'cancelled').length).toBeGreaterThan(40);
  });

  it('a synchronous call runs its items in its request', async () => {
    const result = await server.mcp.callTool('squares_now', { count: 10, concurrency: 3 });
    expect(result.structuredContent).toEqual({
      squared: Array.from({ length: 10 }, (_, i) => i * i),
      total: 285,
    });
  });
});
