// Flow control per tool (docs/tools.md, "Flow control"): a rate limit on task starts, cluster-wide and
// queued rather than refused; a debounce that collapses a burst into one task run with the last
// arguments; a timeoutMs that fails the whole task past its deadline, whether or not a worker runs then.
// Real Postgres, real pg-boss, real HTTP, real worker processes.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/tools/define.ts';
import { ToolRegistry } from '../../src/tools/registry.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { useTestProcesses } from '../helpers/server-process.ts';
import { bump, count, waiter } from '../helpers/test-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const RATE = { limit: 3, per: 1_000 };

/** At most 3 starts per second per group. */
const rateLimited = defineTool({
  name: 'rate_limited',
  description: 'answers at once; at most 3 starts a second per group (test tool)',
  inputSchema: z.object({ group: z.string(), n: z.number().int() }),
  taskSupport: 'required',
  rateLimit: { ...RATE, key: (args) => args.group },
  handler: ({ n }) => ({ content: [{ type: 'text', text: `n=${n}` }] }),
});

/** One run per burst of calls on the same document, with the last call's arguments. */
const debounced = defineTool({
  name: 'debounced',
  description: 'a burst of calls per doc runs once, with the last arguments (test tool)',
  inputSchema: z.object({ doc: z.string(), n: z.number().int() }),
  taskSupport: 'required',
  debounce: { ms: 3_000, key: (args) => args.doc },
  handler: ({ doc, n }) => {
    bump(`debounced:${doc}`);
    return { content: [{ type: 'text', text: `${doc}:n=${n}` }] };
  },
});

/** Sleeps durably for a minute, with a timeout of 1.5 s. */
const sleepsPastTimeout = defineTool({
  name: 'sleeps_past_timeout',
  description: 'sleeps a minute durably; times out after 1.5 s (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  timeoutMs: 1_500,
  async handler(_args, ctx) {
    await ctx.sleep('long', 60_000);
    return { content: [{ type: 'text', text: 'slept' }] };
  },
});

/** The waiter, in its slot until aborted, with a timeout of 1.5 s: the timeout must abort it. */
const busyPastTimeout = defineTool({ ...waiter, name: 'busy_past_timeout', timeoutMs: 1_500 });

const TOOLS = [rateLimited, debounced, sleepsPastTimeout, busyPastTimeout];
const FAST_SWEEP = { SWEEP_INTERVAL_MS: '100' };

const processes = useTestProcesses({ tools: TOOLS });
const startProcess = processes.start;
const stopProcess = processes.stop;

async function create(mcp: RawMcp, name: string, args: Record<string, unknown>) {
  return (await mcp.result('tools/call', { name, arguments: args })).taskId as string;
}

function finished(mcp: RawMcp, taskId: string, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const task = await mcp.result('tasks/get', { taskId });
      return ['completed', 'failed', 'cancelled'].includes(task.status as string) && task;
    },
    { timeoutMs, what: `task ${taskId} finishing` },
  );
}

/** The first legs' start times (their attempts' claimed_at, as Postgres stamped them), in ms, sorted. */
async function firstStarts(taskIds: string[]): Promise<number[]> {
  const { rows } = await sql<{ at: number }>`
    select (extract(epoch from claimed_at) * 1000)::float8 as at from task_attempts
    where task_id = any(${taskIds}::text[]) and attempt = 1 order by claimed_at`.execute(processes.tdb.db);
  return rows.map((r) => r.at);
}

/** The most starts in any window of `per` ms starting at a start (the only windows where the count can peak). */
function mostPerWindow(starts: number[], per: number): number {
  return Math.max(...starts.map((t) => starts.filter((s) => s >= t && s < t + per).length));
}

describe('rateLimit', () => {
  it('queues starts over the limit, across two worker processes: at most `limit` per window, all complete', async () => {
    const server = await startProcess({ env: { WORKER_CONCURRENCY: '8', WORKER_EAGER_START: 'false' } });
    const worker = await startProcess({ role: 'worker', env: { WORKER_CONCURRENCY: '8' } });
    const mcp = new RawMcp(server.url);
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, n) => create(mcp, 'rate_limited', { group: 'a', n })),
    );
    // Another key has a window of its own.
    const other = await create(mcp, 'rate_limited', { group: 'b', n: 0 });
    // A task over the limit waits, saying why.
    await waitFor(
      async () => {
        for (const taskId of ids) {
          const task = await mcp.result('tasks/get', { taskId });
          if (task.status === 'working' && /rate limit/.test(String(task.statusMessage))) return true;
        }
        return false;
      },
      { what: 'a task waiting for the rate limit, saying so' },
    );
    // One cancelled while it waits takes no start.
    const cancelled = await create(mcp, 'rate_limited', { group: 'a', n: 99 });
    await mcp.result('tasks/cancel', { taskId: cancelled });
    for (const taskId of [...ids, other]) {
      const task = await finished(mcp, taskId);
      expect(task.status).toBe('completed');
    }
    expect((await finished(mcp, cancelled)).status).toBe('cancelled');
    const starts = await firstStarts(ids);
    expect(starts).toHaveLength(12);
    expect(mostPerWindow(starts, RATE.per)).toBeLessThanOrEqual(RATE.limit);
    // 12 starts at 3 per second: the last is at least 3 windows after the first.
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(3 * RATE.per);
    expect(await firstStarts([cancelled])).toEqual([]);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from task_rate_starts where task_id = ${cancelled}`.execute(processes.tdb.db);
    expect(rows[0]!.n).toBe(0);
    // Both workers took part.
    const workers = await sql<{ n: number }>`
      select count(distinct worker_id)::int as n from task_attempts where task_id = any(${ids}::text[])`.execute(
      processes.tdb.db,
    );
    expect(workers.rows[0]!.n).toBe(2);
    await stopProcess(worker);
    await stopProcess(server);
  }, 90_000);
});

describe('debounce', () => {
  it('runs a burst of 5 calls as one task, with the last arguments; every call gets its id', async () => {
    const rt = await startProcess();
    const mcp = new RawMcp(rt.url);
    const ids: string[] = [];
    for (let n = 1; n <= 5; n++) ids.push(await create(mcp, 'debounced', { doc: 'd1', n }));
    const elsewhere = await create(mcp, 'debounced', { doc: 'd2', n: 7 });
    expect(new Set(ids).size).toBe(1);
    expect(elsewhere).not.toBe(ids[0]);
    const task = await finished(mcp, ids[0]!);
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'd1:n=5' }] });
    expect(await finished(mcp, elsewhere)).toMatchObject({
      status: 'completed',
      result: { content: [{ text: 'd2:n=7' }] },
    });
    expect(count('debounced:d1')).toBe(1);
    // Once the task has run, the next call starts a new burst.
    const next = await create(mcp, 'debounced', { doc: 'd1', n: 6 });
    expect(next).not.toBe(ids[0]);
    await mcp.result('tasks/cancel', { taskId: next });
    await stopProcess(rt);
  }, 60_000);
});

describe('timeoutMs', () => {
  const timedOut = {
    status: 'failed',
    error: { code: -32603, message: "Task timed out after timeoutMs=1500 (the tool's timeoutMs)" },
  };

  it('fails a task sleeping past it, and aborts a running leg', async () => {
    const rt = await startProcess({ env: FAST_SWEEP });
    const mcp = new RawMcp(rt.url);
    const sleeping = await create(mcp, 'sleeps_past_timeout', {});
    const busy = await create(mcp, 'busy_past_timeout', { tag: 'busy', ms: 60_000 });
    expect(await finished(mcp, sleeping)).toMatchObject(timedOut);
    expect(await finished(mcp, busy)).toMatchObject(timedOut);
    await waitFor(() => count('busy:aborted') === 1, { what: 'the running leg aborted' });
    await stopProcess(rt);
  }, 60_000);

  it('fails a task whose deadline passed while no worker ran', async () => {
    const server = await startProcess({ role: 'server' });
    const mcp = new RawMcp(server.url);
    const taskId = await create(mcp, 'sleeps_past_timeout', {});
    await waitFor(
      async () => {
        const { rows } = await sql<{ past: boolean }>`
          select deadline_at <= now() as past from tasks where task_id = ${taskId}`.execute(processes.tdb.db);
        return rows[0]?.past === true;
      },
      { what: 'the deadline passing' },
    );
    expect((await mcp.result('tasks/get', { taskId })).status).toBe('working');
    const worker = await startProcess({ role: 'worker', env: FAST_SWEEP });
    expect(await finished(mcp, taskId)).toMatchObject(timedOut);
    await stopProcess(worker);
    await stopProcess(server);
  }, 60_000);
});

describe('flow-control settings', () => {
  it('are refused at registration unless whole numbers ≥ 1, naming the setting', () => {
    const bad = [
      { rateLimit: { limit: 0, per: 1_000 } },
      { rateLimit: { limit: 1, per: 0.5 } },
      { debounce: { ms: -1 } },
      { timeoutMs: 0 },
    ];
    const names = ['rateLimit.limit', 'rateLimit.per', 'debounce.ms', 'timeoutMs'];
    for (const [i, settings] of bad.entries()) {
      expect(() => new ToolRegistry([{ ...rateLimited, ...settings } as ToolDefinition])).toThrow(
        `Tool rate_limited: ${names[i]} must be a whole number ≥ 1`,
      );
    }
    expect(() => new ToolRegistry(TOOLS)).not.toThrow();
  });
});
