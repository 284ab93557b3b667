/**
 * Durable sleep (`ctx.sleep`) through the public API: a sleeping task holds no worker slot, stays
 * `working` with a statusMessage that says until when, wakes on its deadline on any worker, and a
 * cancel during the sleep ends it at once.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultConfig } from '../../src/config.ts';
import { defineTool } from '../../src/index.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

/** Records the time before and after a sleep of `ms`, each in a step. */
const nap = defineTool({
  name: 'nap',
  description: 'Sleeps durably between two steps.',
  inputSchema: z.object({ ms: z.number().int().nonnegative() }),
  taskSupport: 'required',
  async handler({ ms }, ctx) {
    const before = await ctx.step('before', () => Date.now());
    await ctx.sleep('nap', ms);
    const after = await ctx.step('after', () => Date.now());
    return { content: [{ type: 'text', text: 'rested' }], structuredContent: { before, after } };
  },
});

/** The same sleep in a tool that never runs as a task: it waits in its request. */
const syncNap = defineTool({
  name: 'sync_nap',
  description: 'Sleeps inside its request.',
  inputSchema: z.object({ ms: z.number().int().nonnegative() }),
  taskSupport: 'never',
  async handler({ ms }, ctx) {
    const before = Date.now();
    await ctx.sleep('nap', ms);
    return { content: [{ type: 'text', text: 'rested' }], structuredContent: { slept: Date.now() - before } };
  },
});

const server = useTestServer({
  tools: [nap, syncNap],
  env: { WORKER_CONCURRENCY: '4', MAX_ACTIVE_TASKS_PER_PRINCIPAL: '5000', TASK_CREATE_BURST: '5000' },
});

async function startNap(ms: number): Promise<string> {
  const created = await server.mcp.callTool('nap', { ms });
  expect(created.resultType).toBe('task');
  return created.taskId as string;
}

const asleep = (taskId: string) =>
  server.mcp.waitForTask(taskId, (t) => /^Sleeping until /.test(t.statusMessage ?? ''));

/** A gauge's value in a Prometheus text exposition. */
function gauge(exposition: string, name: string): number {
  const line = exposition.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

/** The task's lease as Postgres holds it: a sleeping task has none. */
async function leaseOf(taskId: string): Promise<string | null> {
  const { rows } = await sql<{ leased_by: string | null }>`
    select leased_by from tasks where task_id = ${taskId}`.execute(server.rt.db);
  return rows[0]!.leased_by;
}

describe('ctx.sleep', () => {
  it('parks the task without a slot and resumes it after the deadline', async () => {
    const taskId = await startNap(1_500);
    const sleeping = await asleep(taskId);
    expect(sleeping.status).toBe('working');
    const until = Date.parse(sleeping.statusMessage.slice('Sleeping until '.length));
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    expect(await leaseOf(taskId)).toBeNull();
    const done = await server.mcp.waitForTask(taskId);
    expect(done.status).toBe('completed');
    const { before, after } = done.result.structuredContent;
    expect(after - before).toBeGreaterThanOrEqual(1_500);
    expect(after).toBeGreaterThanOrEqual(until);
  });

  it('lets more tasks sleep than the worker has slots', async () => {
    // 4 slots, 12 sleepers: all twelve are asleep at once, none holding a slot.
    const ids = await Promise.all(Array.from({ length: 12 }, () => startNap(3_000)));
    for (const id of ids) await asleep(id);
    expect(server.rt.workers!.running.size).toBe(0);
    const done = await Promise.all(ids.map((id) => server.mcp.waitForTask(id)));
    expect(done.map((t) => t.status)).toEqual(ids.map(() => 'completed'));
  });

  it('ends at once when the task is cancelled while it sleeps', async () => {
    const taskId = await startNap(60_000);
    await asleep(taskId);
    await server.mcp.result('tasks/cancel', { taskId });
    // No wait: the cancel itself ended the task.
    expect(await server.mcp.getTask(taskId)).toMatchObject({ status: 'cancelled' });
    // And its wake-up, when it comes, does not run it again.
    const { rows } = await sql<{ attempt: number }>`
      select attempt from tasks where task_id = ${taskId}`.execute(server.rt.db);
    expect(rows[0]!.attempt).toBe(1);
  });

  it('1,000 tasks asleep hold no worker slot, and the connections do not grow with them', async () => {
    const ids: string[] = [];
    for (let batch = 0; batch < 20; batch++) {
      ids.push(...(await Promise.all(Array.from({ length: 50 }, () => startNap(600_000)))));
    }
    await waitFor(
      async () => {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from tasks
           where task_id = any(${ids}::text[]) and status = 'working' and status_message like 'Sleeping until %'`.execute(
          server.rt.db,
        );
        return rows[0]!.n === ids.length;
      },
      { timeoutMs: 60_000, what: 'all 1,000 tasks asleep' },
    );
    const metrics = await (await fetch(new URL('/metrics', server.rt.url))).text();
    expect(gauge(metrics, 'durable_mcp_worker_slots_busy')).toBe(0);
    expect(gauge(metrics, 'durable_mcp_queue_runs_delayed')).toBeGreaterThanOrEqual(1_000);
    // Postgres sees this process's pools and its LISTEN connection, whatever sleeps.
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from pg_stat_activity where datname = current_database()`.execute(
      server.rt.db,
    );
    const { DB_POOL_MAX, QUEUE_POOL_MAX } = defaultConfig();
    expect(rows[0]!.n).toBeLessThanOrEqual(DB_POOL_MAX + QUEUE_POOL_MAX + 1);
  }, 120_000);

  it('waits in the slot for a sleep under a second', async () => {
    const taskId = await startNap(300);
    const seen: string[] = [];
    const done = await waitFor(
      async () => {
        const task = await server.mcp.getTask(taskId);
        if (typeof task.statusMessage === 'string') seen.push(task.statusMessage);
        return task.status === 'completed' && task;
      },
      { timeoutMs: 10_000, intervalMs: 20 },
    );
    const { before, after } = done.result.structuredContent;
    expect(after - before).toBeGreaterThanOrEqual(300);
    expect(seen.filter((m) => m.startsWith('Sleeping'))).toEqual([]);
  });

  it('a synchronous call waits in its request', async () => {
    const result = await server.mcp.callTool('sync_nap', { ms: 1_200 });
    expect(result.resultType).toBe('complete');
    expect(result.structuredContent.slept).toBeGreaterThanOrEqual(1_200);
  });
});
