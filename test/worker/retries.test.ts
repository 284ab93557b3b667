/**
 * Retry policies through the public API: a step's own policy (attempts counted in Postgres, short
 * backoffs in the slot, long ones parked), a step's timeout, a NonRetryableError, and a tool's policy.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, NonRetryableError } from '../../src/index.ts';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** Calls of each flaky step, by task: what the "downstream" saw (the handler's own count is not trusted). */
const calls = new Map<string, number>();
const called = (key: string) => {
  const n = (calls.get(key) ?? 0) + 1;
  calls.set(key, n);
  return n;
};
/** The attempt number each call of a flaky step was given (StepInfo.attempt), by task. */
const attemptsSeen = new Map<string, number[]>();

const flaky = defineTool({
  name: 'flaky',
  description: 'A step that fails its first `failFirst` calls, then succeeds.',
  inputSchema: z.object({
    failFirst: z.number().int(),
    maxAttempts: z.number().int(),
    initialMs: z.number().int(),
    mode: z.enum(['throw', 'hang', 'fatal']),
  }),
  taskSupport: 'required',
  async handler({ failFirst, maxAttempts, initialMs, mode }, ctx) {
    const value = await ctx.step(
      'fetch',
      async (signal, { attempt }) => {
        attemptsSeen.set(ctx.taskId!, [...(attemptsSeen.get(ctx.taskId!) ?? []), attempt]);
        const n = called(ctx.taskId!);
        if (n > failFirst) return n;
        if (mode === 'fatal') throw new NonRetryableError('the account is closed');
        if (mode === 'hang')
          await new Promise((_, reject) =>
            signal.addEventListener('abort', () => reject(signal.reason as Error)),
          );
        throw new Error(`downstream unavailable (call ${n})`);
      },
      { retry: { maxAttempts, backoff: { initialMs, factor: 2 } }, timeoutMs: 300 },
    );
    return { content: [{ type: 'text', text: `ok after ${value} calls` }] };
  },
});

/** A handler that crashes `crashes` times: the tool's policy (3 attempts, no delay) decides. */
const crashy = defineTool({
  name: 'crashy',
  description: 'Crashes, then succeeds.',
  inputSchema: z.object({ crashes: z.number().int() }),
  taskSupport: 'required',
  retry: { maxAttempts: 3, backoff: { initialMs: 0 } },
  async handler({ crashes }, ctx) {
    if (called(ctx.taskId!) <= crashes) throw new Error('crash');
    return { content: [{ type: 'text', text: 'survived' }] };
  },
});

const server = useTestServer({ tools: [flaky, crashy] });

async function run(
  tool: string,
  args: Record<string, unknown>,
): Promise<{ taskId: string; done: Record<string, any> }> {
  const created = await server.mcp.callTool(tool, args);
  const taskId = created.taskId as string;
  return { taskId, done: await server.mcp.waitForTask(taskId, undefined, 20_000) };
}

async function failuresOf(taskId: string): Promise<{ failures: number; last_error: string } | undefined> {
  const { rows } = await sql<{ failures: number; last_error: string }>`
    select failures, last_error from task_step_failures where task_id = ${taskId} and name = 'fetch'`.execute(
    server.rt.db,
  );
  return rows[0];
}

describe('retry policies', () => {
  it("a step's policy retries it in the slot, and its failures are stored", async () => {
    const { taskId, done } = await run('flaky', {
      failFirst: 2,
      maxAttempts: 4,
      initialMs: 50,
      mode: 'throw',
    });
    expect(done.status).toBe('completed');
    expect(done.result.content[0].text).toBe('ok after 3 calls');
    expect(attemptsSeen.get(taskId)).toEqual([1, 2, 3]);
    expect(await failuresOf(taskId)).toEqual({ failures: 2, last_error: 'downstream unavailable (call 2)' });
    // What `tasks show` and the dashboard print.
    expect((await adminGetTask(server.rt.db, taskId))!.stepFailures).toEqual([
      { name: 'fetch', failures: 2, lastError: 'downstream unavailable (call 2)', at: expect.any(Date) },
    ]);
  });

  it('a long backoff parks the task until its next attempt', async () => {
    const created = await server.mcp.callTool('flaky', {
      failFirst: 1,
      maxAttempts: 2,
      initialMs: 2_500,
      mode: 'throw',
    });
    const taskId = created.taskId as string;
    const parked = await server.mcp.waitForTask(taskId, (t) =>
      /^Retrying step fetch/.test(t.statusMessage ?? ''),
    );
    expect(parked.statusMessage).toBe(
      'Retrying step fetch (attempt 2 of 2) after: downstream unavailable (call 1)',
    );
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    const done = await server.mcp.waitForTask(taskId, undefined, 20_000);
    expect(done.result.content[0].text).toBe('ok after 2 calls');
    // The second call ran in the task's next attempt: its number was counted on, not started afresh.
    expect(attemptsSeen.get(taskId)).toEqual([1, 2]);
  });

  it('a step that times out is retried by its policy, then fails the task naming the step', async () => {
    const retried = await run('flaky', { failFirst: 1, maxAttempts: 2, initialMs: 10, mode: 'hang' });
    expect(retried.done.result.content[0].text).toBe('ok after 2 calls');
    const exhausted = await run('flaky', { failFirst: 5, maxAttempts: 2, initialMs: 10, mode: 'hang' });
    expect(exhausted.done.status).toBe('failed');
    expect(exhausted.done.error.message).toBe(
      'step "fetch" failed after 2 attempts: step "fetch" timed out after 300 ms',
    );
    expect(calls.get(exhausted.taskId)).toBe(2);
  });

  it('a NonRetryableError fails the task at once with its message', async () => {
    const { taskId, done } = await run('flaky', {
      failFirst: 5,
      maxAttempts: 5,
      initialMs: 10,
      mode: 'fatal',
    });
    expect(done.status).toBe('failed');
    expect(done.error.message).toBe('the account is closed');
    expect(calls.get(taskId)).toBe(1);
  });

  it("a tool's policy retries its handler", async () => {
    const survived = await run('crashy', { crashes: 2 });
    expect(survived.done.result.content[0].text).toBe('survived');
    const gave = await run('crashy', { crashes: 3 });
    expect(gave.done.status).toBe('failed');
    expect(gave.done.statusMessage).toBe('Tool execution failed: internal error after 3 attempts');
    expect(calls.get(gave.taskId)).toBe(3);
  });
});
