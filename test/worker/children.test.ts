/**
 * Child tasks (`ctx.callTool`, `ctx.spawn`, `ctx.join`, `ctx.joinFirst`) through the public API on a real
 * process: a child's result comes back to its parent, a failed child arrives as ChildTaskFailedError
 * the parent can catch, a replay finds the same child (one row), the limits refuse with the setting's
 * name, children are the principal's own tasks (another principal gets -32602), and a cancel of the
 * parent cancels its children but a detached one.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ChildTaskFailedError, defineTool, NonRetryableError } from '../../src/index.ts';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { taskPage } from '../../src/http/dashboard/task-page.ts';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { runCli } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

/** Returns its text after `ms`; fails for good with `fail` as its message. */
const echoChild = defineTool({
  name: 'echo_child',
  description: 'Echoes its text (a child task).',
  inputSchema: z.object({ text: z.string(), ms: z.number().int().default(0), fail: z.string().optional() }),
  taskSupport: 'required',
  handler: async ({ text, ms, fail }, ctx) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    ctx.signal.throwIfAborted();
    if (fail !== undefined) throw new NonRetryableError(fail);
    return { content: [{ type: 'text', text }] };
  },
});

/** Runs until cancelled. */
const waitChild = defineTool({
  name: 'wait_child',
  description: 'Waits until cancelled (a child task).',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: async (_args, ctx) => {
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    ctx.signal.throwIfAborted();
    return { content: [] };
  },
});

/** Sleeps an hour: parked, held by no worker. */
const sleepyChild = defineTool({
  name: 'sleepy_child',
  description: 'Sleeps an hour (a child task).',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: async (_args, ctx) => {
    await ctx.sleep('nap', 3_600_000);
    return { content: [] };
  },
});

/** Sleeps an hour with a TTL of a quarter second: it expires while it sleeps. */
const expiringChild = defineTool({
  name: 'expiring_child',
  description: 'Expires while it sleeps (a child task).',
  inputSchema: z.object({}),
  taskSupport: 'required',
  ttlMs: 250,
  handler: async (_args, ctx) => {
    await ctx.sleep('nap', 3_600_000);
    return { content: [] };
  },
});

/** Calls sleepy_child (or `tool`) and says how it ended. */
const callSleepy = defineTool({
  name: 'call_sleepy',
  description: 'Calls sleepy_child and catches its end.',
  inputSchema: z.object({ tool: z.string().default('sleepy_child') }),
  taskSupport: 'required',
  handler: async ({ tool }, ctx) => {
    try {
      await ctx.callTool(tool, {});
      return { content: [{ type: 'text', text: 'woke' }] };
    } catch (err) {
      if (!(err instanceof ChildTaskFailedError)) throw err;
      return { content: [{ type: 'text', text: `caught ${err.status}: ${err.message}` }] };
    }
  },
});

const text = (r: { content: unknown[] }) => (r.content[0] as { text: string }).text;

/** Parents that crash once after spawning: their replay must find the same child. */
const crashedOnce = new Set<string>();

const callParent = defineTool({
  name: 'call_parent',
  description: 'Calls echo_child and says what came back.',
  inputSchema: z.object({
    text: z.string(),
    fail: z.string().optional(),
    crashOnce: z.boolean().default(false),
  }),
  taskSupport: 'required',
  handler: async ({ text: t, fail, crashOnce }, ctx) => {
    const args = { text: t, ms: 50, ...(fail !== undefined && { fail }) };
    try {
      if (!crashOnce) {
        return {
          content: [{ type: 'text', text: `child said ${text(await ctx.callTool('echo_child', args))}` }],
        };
      }
      // spawn + join is callTool with a crash between the child's creation and the wait for it.
      const handle = await ctx.spawn('echo_child', args);
      if (!crashedOnce.has(ctx.taskId!)) {
        crashedOnce.add(ctx.taskId!);
        throw new Error('crash after the spawn');
      }
      const [result] = await ctx.join([handle]);
      return { content: [{ type: 'text', text: `child said ${text(result!)}` }] };
    } catch (err) {
      if (!(err instanceof ChildTaskFailedError)) throw err;
      return {
        content: [
          { type: 'text', text: `caught ${err.status} of ${err.childTaskId}: ${err.error?.message}` },
        ],
      };
    }
  },
});

const fanOut = defineTool({
  name: 'fan_out',
  description: 'Starts one echo_child per text and joins them (all, or the first).',
  inputSchema: z.object({ texts: z.array(z.string()), delays: z.array(z.number()), first: z.boolean() }),
  taskSupport: 'required',
  handler: async ({ texts, delays, first }, ctx) => {
    const handles = [];
    for (const [i, t] of texts.entries())
      handles.push(await ctx.spawn('echo_child', { text: t, ms: delays[i]! }));
    if (first) {
      const won = await ctx.joinFirst(handles);
      return { content: [{ type: 'text', text: `${won.index}:${text(won.result)}` }] };
    }
    const results = await ctx.join(handles);
    return { content: [{ type: 'text', text: results.map(text).join(',') }] };
  },
});

const nest = defineTool({
  name: 'nest',
  description: 'Calls itself `depth` levels deep.',
  inputSchema: z.object({ depth: z.number().int() }),
  taskSupport: 'required',
  handler: async ({ depth }, ctx) => {
    if (depth === 0) return { content: [{ type: 'text', text: 'bottom' }] };
    return ctx.callTool('nest', { depth: depth - 1 });
  },
});

const cancelParent = defineTool({
  name: 'cancel_parent',
  description: 'Starts a waiting child and a detached one, then waits for both.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: async (_args, ctx) => {
    const attached = await ctx.spawn('wait_child', {});
    const detached = await ctx.spawn('wait_child', {}, { name: 'free', detached: true });
    await ctx.join([attached, detached]);
    return { content: [] };
  },
});

const server = useTestServer({
  tools: [
    echoChild,
    waitChild,
    sleepyChild,
    expiringChild,
    callSleepy,
    callParent,
    fanOut,
    nest,
    cancelParent,
  ],
  env: {
    WORKER_CONCURRENCY: '8',
    MAX_CHILD_DEPTH: '2',
    MAX_CHILDREN_PER_TASK: '3',
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: ['alice', 'bob'].map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
  },
});

const as = (p: string) => ({ headers: { authorization: `Bearer ${p}-token` } });
const TERMINAL = ['completed', 'failed', 'cancelled'];
const pageText = async (html: ReturnType<typeof taskPage>) => (await html).toString();

async function call(name: string, args: Record<string, unknown>): Promise<string> {
  const created = await server.mcp.result('tools/call', { name, arguments: args }, as('alice'));
  expect(created.resultType).toBe('task');
  return created.taskId as string;
}

async function ended(taskId: string, principal = 'alice'): Promise<Record<string, any>> {
  let last: Record<string, any> | undefined;
  return waitFor(
    async () => {
      last = await server.mcp.result('tasks/get', { taskId }, as(principal));
      return TERMINAL.includes(last.status as string) && last;
    },
    { timeoutMs: 20_000, what: () => `task ${taskId} ending (still ${last?.status ?? 'unread'})` },
  );
}

const childrenOf = async (taskId: string) =>
  (
    await sql<{
      task_id: string;
      status: string;
      principal: string;
      spawn_name: string;
    }>`select task_id, status, principal, spawn_name from tasks where spawned_by = ${taskId} order by spawn_name`.execute(
      server.rt.db,
    )
  ).rows;

describe('child tasks', () => {
  it('ctx.callTool returns the child’s result; the child is the principal’s own task', async () => {
    const parent = await call('call_parent', { text: 'hello' });
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    expect(text(done.result)).toBe('child said hello');
    // The wait's "Waiting for …" does not outlive it: the finished parent says what it joined.
    expect(done.statusMessage).toBe('echo_child#0: 1/1 children');
    const children = await childrenOf(parent);
    expect(children).toHaveLength(1);
    expect(children[0]).toMatchObject({
      status: 'completed',
      principal: 'alice',
      spawn_name: 'echo_child#0',
    });
    // tasks/get works on the child for its principal, and another principal gets what a missing task gets.
    const child = await server.mcp.result('tasks/get', { taskId: children[0]!.task_id }, as('alice'));
    expect(child.status).toBe('completed');
    const foreign = await server.mcp.error('tasks/get', { taskId: children[0]!.task_id }, as('bob'));
    const missing = await server.mcp.error('tasks/get', { taskId: 'AAAAAAAAAAAAAAAAAAAAAAAA' }, as('bob'));
    expect(foreign.code).toBe(-32602);
    expect({ status: foreign.status, code: foreign.code }).toEqual({
      status: missing.status,
      code: missing.code,
    });
  });

  it('ctx.callTool nests: a chain within MAX_CHILD_DEPTH returns the bottom’s result', async () => {
    const top = await call('nest', { depth: 2 });
    const done = await ended(top);
    expect(done.status).toBe('completed');
    expect(text(done.result)).toBe('bottom');
  });

  it('a failed child arrives as ChildTaskFailedError, which the parent catches', async () => {
    const parent = await call('call_parent', { text: 'x', fail: 'the child broke' });
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    const [child] = await childrenOf(parent);
    expect(child!.status).toBe('failed');
    expect(text(done.result)).toBe(`caught failed of ${child!.task_id}: the child broke`);
  });

  it('a replay after a crash gets the same child: one child row', async () => {
    const parent = await call('call_parent', { text: 'again', crashOnce: true });
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    expect(crashedOnce.has(parent)).toBe(true);
    expect(text(done.result)).toBe('child said again');
    expect(await childrenOf(parent)).toHaveLength(1);
  });

  it('join waits for every child and returns their results in order', async () => {
    const parent = await call('fan_out', { texts: ['a', 'b', 'c'], delays: [300, 0, 100], first: false });
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    expect(text(done.result)).toBe('a,b,c');
  });

  it('joinFirst returns the child that ended first; the others are cancelled when the parent ends', async () => {
    const parent = await call('fan_out', { texts: ['slow', 'fast'], delays: [10_000, 0], first: true });
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    expect(text(done.result)).toBe('1:fast');
    await waitFor(async () => (await childrenOf(parent)).every((c) => TERMINAL.includes(c.status)), {
      timeoutMs: 10_000,
      what: 'the slow child stopping with its parent',
    });
    expect((await childrenOf(parent)).map((c) => c.status)).toEqual(['cancelled', 'completed']);
  });

  it('refuses a child past MAX_CHILDREN_PER_TASK, naming the setting', async () => {
    const parent = await call('fan_out', { texts: ['1', '2', '3', '4'], delays: [0, 0, 0, 0], first: false });
    const done = await ended(parent);
    expect(done.status).toBe('failed');
    expect(done.error.message).toContain('MAX_CHILDREN_PER_TASK (3)');
    expect(await childrenOf(parent)).toHaveLength(3);
  });

  it('refuses a child past MAX_CHILD_DEPTH, naming the setting', async () => {
    const top = await call('nest', { depth: 3 });
    const done = await ended(top);
    expect(done.status).toBe('failed');
    expect(done.error.message).toContain('MAX_CHILD_DEPTH (2)');
  });

  it('cancelling the parent cancels its children, but not a detached one', async () => {
    const parent = await call('cancel_parent', {});
    await waitFor(async () => (await childrenOf(parent)).length === 2, {
      timeoutMs: 10_000,
      what: 'both children created',
    });
    await server.mcp.result('tasks/cancel', { taskId: parent }, as('alice'));
    expect((await ended(parent)).status).toBe('cancelled');
    const [free, attached] = await childrenOf(parent);
    expect(free!.spawn_name).toBe('free');
    expect((await ended(attached!.task_id)).status).toBe('cancelled');
    expect((await server.mcp.result('tasks/get', { taskId: free!.task_id }, as('alice'))).status).toBe(
      'working',
    );
    await server.mcp.result('tasks/cancel', { taskId: free!.task_id }, as('alice'));
    expect((await ended(free!.task_id)).status).toBe('cancelled');
  });

  it(
    'tasks show and the dashboard’s task page link a parent and its children',
    { timeout: 90_000 },
    async () => {
      const parent = await call('fan_out', { texts: ['p', 'q'], delays: [0, 0], first: false });
      await ended(parent);
      const [p, q] = await childrenOf(parent);
      const history = await adminGetTask(server.rt.db, parent);
      expect(history?.children.map((c) => [c.taskId, c.name, c.toolName, c.status])).toEqual([
        [p!.task_id, 'echo_child#0', 'echo_child', 'completed'],
        [q!.task_id, 'echo_child#1', 'echo_child', 'completed'],
      ]);
      expect(history?.parent).toBeNull();
      const childHistory = await adminGetTask(server.rt.db, q!.task_id);
      expect(childHistory?.parent).toEqual({ taskId: parent, name: 'echo_child#1', detached: false });
      const page = await pageText(
        taskPage(childHistory!, { csrf: 'x', actor: 'op' }, { events: undefined, followable: false }),
      );
      expect(page).toContain(`href="/dashboard/tasks/${parent}"`);
      const parentPage = await pageText(
        taskPage(history!, { csrf: 'x', actor: 'op' }, { events: undefined, followable: false }),
      );
      expect(parentPage).toContain(`href="/dashboard/tasks/${q!.task_id}"`);
      const shown = await runCli(['tasks', 'show', parent], { env: { DATABASE_URL: server.tdb.url } });
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain('children (2)');
      expect(shown.stdout).toContain(q!.task_id);
      const shownChild = await runCli(['tasks', 'show', q!.task_id], {
        env: { DATABASE_URL: server.tdb.url },
      });
      expect(shownChild.stdout).toContain(`started by ${parent} as echo_child#1`);
    },
  );

  it('a child its client cancels while it sleeps wakes its parent, which catches the cancel', async () => {
    const parent = await call('call_sleepy', {});
    const child = await waitFor(
      async () => {
        const [row] = await childrenOf(parent);
        if (row === undefined) return false;
        const got = await server.mcp.result('tasks/get', { taskId: row.task_id }, as('alice'));
        return String(got.statusMessage).startsWith('Sleeping') && row.task_id;
      },
      { timeoutMs: 10_000, what: 'the child sleeping' },
    );
    await server.mcp.result('tasks/cancel', { taskId: child }, as('alice'));
    // Well before the parent's backstop look (a minute): the cancel itself wakes it.
    const done = await ended(parent);
    expect(done.status).toBe('completed');
    expect(text(done.result)).toBe(
      `caught cancelled: child task ${child} (sleepy_child) cancelled: Cancelled by request`,
    );
  });

  it('a child that expires wakes its parent with the expiry, which it catches', async () => {
    const parent = await call('call_sleepy', { tool: 'expiring_child' });
    // The sweeper's pass (tests sweep by hand) expires the child and wakes its parent.
    const child = await waitFor(
      async () => {
        await server.rt.workers!.sweep();
        const [row] = await childrenOf(parent);
        return row?.status === 'failed' && row.task_id;
      },
      { timeoutMs: 10_000, what: 'the child expired' },
    );
    const done = await ended(parent);
    expect(text(done.result)).toBe(
      `caught failed: child task ${child} (expiring_child) failed: Task has expired`,
    );
  });
});
