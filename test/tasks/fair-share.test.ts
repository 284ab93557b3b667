// One principal cannot starve another (issue #22): fair claims across principals, a tool's per-key
// concurrency limit across two worker processes, and the per-principal creation quotas. Real Postgres,
// real pg-boss, real HTTP, bearer tokens for two principals.
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { defineTool } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { useTestProcesses } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { waiter } from '../helpers/test-tools.ts';

const PRINCIPALS = ['alice', 'bob'] as const;
type Principal = (typeof PRINCIPALS)[number];
const as = (p: Principal) => ({ headers: { authorization: `Bearer ${p}-token` } });
const BEARER_ENV = {
  AUTH_MODE: 'bearer',
  AUTH_TOKENS: PRINCIPALS.map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
};

/** Handlers of `keyed_work` running right now in this test process, by group, and the most seen at once. */
const inHandler = new Map<string, number>();
const mostInHandler = new Map<string, number>();

/** At most 3 legs per group run at once, cluster-wide. */
const keyedWork = defineTool({
  name: 'keyed_work',
  description: 'works ms in its slot; at most 3 at once per group (test tool)',
  inputSchema: z.object({ group: z.string(), ms: z.number().int().default(150) }),
  taskSupport: 'required',
  concurrency: { limit: 3, key: (args) => args.group },
  async handler({ group, ms }) {
    const now = (inHandler.get(group) ?? 0) + 1;
    inHandler.set(group, now);
    mostInHandler.set(group, Math.max(now, mostInHandler.get(group) ?? 0));
    try {
      await sleep(ms);
    } finally {
      inHandler.set(group, inHandler.get(group)! - 1);
    }
    return { content: [{ type: 'text', text: group }] };
  },
});

const TOOLS = [...SHIPPED_TOOLS, waiter, keyedWork];

/** Processes on the file's database with both principals' tokens (and `env` over them). */
const processes = useTestProcesses({ tools: TOOLS, env: BEARER_ENV });
const startProcess = processes.start;
/** Stops a process this file started (each describe runs on its own). */
const stopProcess = processes.stop;

/** Creates a task as `who`; its id. */
async function create(mcp: RawMcp, who: Principal, name: string, args: Record<string, unknown>) {
  return (await mcp.result('tools/call', { name, arguments: args }, as(who))).taskId as string;
}

/** Polls `who`'s task until it is terminal. */
function finished(mcp: RawMcp, who: Principal, taskId: string, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const task = await mcp.result('tasks/get', { taskId }, as(who));
      return ['completed', 'failed', 'cancelled'].includes(task.status as string) && task;
    },
    { timeoutMs, what: `${who}'s task ${taskId} finishing` },
  );
}

/** How many of these tasks a worker holds now (a live lease), from the database. */
async function runningOf(taskIds: string[]) {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from tasks
    where task_id = any(${taskIds}::text[]) and leased_by is not null and lease_expires_at > now()`.execute(
    processes.tdb.db,
  );
  return rows[0]!.n;
}

describe('fair claims across principals', () => {
  it("a principal holding every slot but the reserved one does not keep another's task waiting", async () => {
    const rt = await startProcess({ env: { WORKER_CONCURRENCY: '8' } });
    const mcp = new RawMcp(rt.url);
    // bob: 12 legs of 60 s in their slots, more than the pool has.
    const bobs: string[] = [];
    for (let i = 0; i < 12; i++)
      bobs.push(await create(mcp, 'bob', 'waiter', { tag: `bob-${i}`, ms: 60_000 }));
    await waitFor(async () => (await runningOf(bobs)) >= 7, { what: "bob's legs filling 7 of 8 slots" });

    const alices = await create(mcp, 'alice', 'analyze_numbers', { count: 10 });
    expect((await finished(mcp, 'alice', alices)).status).toBe('completed');
    // While every one of bob's tasks is still working, and he never held the reserved slot.
    expect(await runningOf(bobs)).toBe(7);
    for (const taskId of bobs) {
      expect((await mcp.result('tasks/get', { taskId }, as('bob'))).status).toBe('working');
    }
    for (const taskId of bobs) await mcp.result('tasks/cancel', { taskId }, as('bob'));
    for (const taskId of bobs) await finished(mcp, 'bob', taskId);
    await stopProcess(rt);
  }, 60_000);
});

describe('a per-key concurrency limit', () => {
  it('is never exceeded across two worker processes, and every task completes', async () => {
    const server = await startProcess({ env: { WORKER_CONCURRENCY: '8', WORKER_EAGER_START: 'false' } });
    const worker = await startProcess({ role: 'worker', env: { WORKER_CONCURRENCY: '8' } });
    const mcp = new RawMcp(server.url);
    // The database's view, sampled while the tasks run: legs holding a live lease, per key.
    let mostLeased = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await sql<{ n: number }>`
          select coalesce(max(n), 0)::int as n from (
            select count(*) as n from tasks
            where concurrency_key is not null and leased_by is not null and lease_expires_at > now()
            group by concurrency_key) per_key`.execute(processes.tdb.db);
        mostLeased = Math.max(mostLeased, rows[0]!.n);
        await sleep(5);
      }
    })();
    const ids = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) =>
        create(mcp, i % 2 ? 'alice' : 'bob', 'keyed_work', { group: 'a' }),
      ),
      ...Array.from({ length: 6 }, () => create(mcp, 'alice', 'keyed_work', { group: 'b' })),
    ]);
    for (const [i, id] of ids.entries()) {
      const who = i < 20 && i % 2 === 0 ? 'bob' : 'alice';
      expect((await finished(mcp, who, id, 60_000)).status).toBe('completed');
    }
    sampling = false;
    await sampler;
    expect(mostInHandler.get('a')).toBe(3);
    expect(mostInHandler.get('b')).toBeLessThanOrEqual(3);
    expect(mostLeased).toBeGreaterThan(0);
    expect(mostLeased).toBeLessThanOrEqual(3);
    // Both workers took part.
    const { rows } = await sql<{ n: number }>`
      select count(distinct worker_id)::int as n from task_attempts where task_id = any(${ids}::text[])`.execute(
      processes.tdb.db,
    );
    expect(rows[0]!.n).toBe(2);
    await stopProcess(worker);
    await stopProcess(server);
  }, 120_000);
});

describe('quotas per principal', () => {
  it('refuses a create over MAX_ACTIVE_TASKS_PER_PRINCIPAL with -31429 and 429, and admits again once one ends', async () => {
    const rt = await startProcess({ env: { MAX_ACTIVE_TASKS_PER_PRINCIPAL: '3' } });
    const mcp = new RawMcp(rt.url);
    const held = [];
    for (let i = 0; i < 3; i++)
      held.push(await create(mcp, 'alice', 'waiter', { tag: `q-${i}`, ms: 60_000 }));
    const refused = await mcp.error(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 1 } },
      as('alice'),
    );
    expect(refused).toMatchObject({
      status: 429,
      code: -31429,
      message: expect.stringContaining('MAX_ACTIVE_TASKS_PER_PRINCIPAL=3'),
      data: { limit: 'MAX_ACTIVE_TASKS_PER_PRINCIPAL' },
    });
    // Another principal is not held to alice's count.
    await create(mcp, 'bob', 'analyze_numbers', { count: 1 });
    await mcp.result('tasks/cancel', { taskId: held[0] }, as('alice'));
    await finished(mcp, 'alice', held[0]!);
    await create(mcp, 'alice', 'analyze_numbers', { count: 1 });
    const metrics = await (await fetch(new URL('/metrics', rt.url))).text();
    expect(metrics).toMatch(/durable_mcp_quota_refusals_total\{limit="MAX_ACTIVE_TASKS_PER_PRINCIPAL"\} 1/);
    for (const taskId of held.slice(1)) await mcp.result('tasks/cancel', { taskId }, as('alice'));
    await stopProcess(rt);
  }, 60_000);

  it('meters creations by TASK_CREATE_RATE_PER_SECOND after a burst, with Retry-After, and admits again later', async () => {
    const rt = await startProcess({ env: { TASK_CREATE_RATE_PER_SECOND: '1', TASK_CREATE_BURST: '3' } });
    const mcp = new RawMcp(rt.url);
    // Ten at once: the burst admits three, and the rate one a second more, however slow the machine is
    // (all ten would pass only if they took seven seconds).
    const replies = await Promise.all(
      Array.from({ length: 10 }, () =>
        mcp.request('tools/call', { name: 'analyze_numbers', arguments: { count: 1 } }, as('bob')),
      ),
    );
    const admitted = replies.filter((r) => r.status === 200);
    expect(admitted.length).toBeGreaterThanOrEqual(3);
    const reply = replies.find((r) => r.status !== 200)!;
    expect(reply.status).toBe(429);
    expect(reply.body.error).toMatchObject({ code: -31429, data: { limit: 'TASK_CREATE_RATE_PER_SECOND' } });
    const retryAfterMs = (reply.body.error as { data: { retryAfterMs: number } }).data.retryAfterMs;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(Number(reply.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // alice has her own bucket.
    await create(mcp, 'alice', 'analyze_numbers', { count: 1 });
    // Admitted again once the bucket refills (a refused call takes no token).
    await waitFor(
      async () =>
        (await mcp.request('tools/call', { name: 'analyze_numbers', arguments: { count: 1 } }, as('bob')))
          .status === 200,
      { timeoutMs: 10_000, intervalMs: 250, what: "bob's creation admitted again" },
    );
    await stopProcess(rt);
  }, 60_000);
});
