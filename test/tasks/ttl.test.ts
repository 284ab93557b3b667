import { describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { count, TEST_TOOLS } from '../helpers/test-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer({
  tools: [...SHIPPED_TOOLS, ...TEST_TOOLS],
  env: { TASK_PURGE_GRACE_MS: '500' },
});

const statusOf = async (taskId: string) =>
  (await server.tdb.db.selectFrom('tasks').select('status').where('task_id', '=', taskId).executeTakeFirst())
    ?.status;

/** Sweeps, as the timer-driven sweeper would, until `done` holds; returns what the sweeps did in all. */
async function sweepUntil(done: () => Promise<boolean>, what: string) {
  const total = { expired: 0, purged: 0 };
  await waitFor(
    async () => {
      const swept = await server.rt.workers!.sweep();
      total.expired += swept.expired;
      total.purged += swept.purged;
      return done();
    },
    { what },
  );
  return total;
}

describe('TTL', () => {
  it('announces the tool’s ttlMs and pollIntervalMs, or the configured defaults', async () => {
    const short = await server.mcp.callTool('expiring');
    expect(short).toMatchObject({ ttlMs: 300, pollIntervalMs: 50 });
    const normal = await server.mcp.callTool('analyze_numbers', { count: 1 });
    expect(normal).toMatchObject({ ttlMs: 3_600_000, pollIntervalMs: 20 });
  });

  it('fails a task waiting for input past its TTL, then purges it (-32602 afterwards)', async () => {
    const { taskId } = await server.mcp.callTool('expiring');
    await server.mcp.waitForTask(taskId, (t) => t.status === 'input_required');
    const swept = await sweepUntil(async () => (await statusOf(taskId)) === 'failed', 'the task expiring');
    expect(swept.expired).toBeGreaterThanOrEqual(1);
    const expired = await server.mcp.getTask(taskId);
    expect(expired).toMatchObject({
      status: 'failed',
      statusMessage: 'Task has expired',
      error: { code: -32603, message: 'Task has expired' },
    });
    expect(expired).not.toHaveProperty('inputRequests');
    // Answering now changes nothing.
    await server.mcp.result('tasks/update', {
      taskId,
      inputResponses: { never: { action: 'accept', content: { x: '1' } } },
    });
    expect((await server.mcp.getTask(taskId)).status).toBe('failed');

    // Purged once TASK_PURGE_GRACE_MS has passed since it expired.
    const purged = await sweepUntil(async () => (await statusOf(taskId)) === undefined, 'the task purged');
    expect(purged.purged).toBeGreaterThanOrEqual(1);
    const gone = await server.mcp.error('tasks/get', { taskId });
    expect(gone).toMatchObject({ code: -32602, message: 'Failed to retrieve task: Task not found' });
    const rows = await server.tdb.db
      .selectFrom('task_input_requests')
      .select('key')
      .where('task_id', '=', taskId)
      .execute();
    expect(rows).toEqual([]);
  });

  it('stops a running handler whose task expired', async () => {
    const { taskId } = await server.mcp.callTool('expiring_waiter', { tag: 'ttl-running' });
    await server.mcp.waitForTask(taskId, () => count('ttl-running:started') === 1);
    await sweepUntil(async () => (await statusOf(taskId)) === 'failed', 'the task expiring');
    await waitFor(() => count('ttl-running:aborted') > 0, { timeoutMs: 2000, what: 'the handler aborted' });
    expect(count('ttl-running:aborted')).toBe(1);
    const task = await server.mcp.getTask(taskId);
    expect(task).toMatchObject({ status: 'failed', error: { message: 'Task has expired' } });
  });
});
