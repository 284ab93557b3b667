// What the worker's fast path keeps: a status message still waiting for its throttle is written with the
// completion (no separate write, no lost message), and a cancel reaches a running handler by NOTIFY alone
// (the periodic lease check is set far beyond the test's patience), and an idle worker fetches once per
// task it is woken for. Every task goes through the queue here (no eager start on this process's worker).
import { describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer({
  tools: SHIPPED_TOOLS,
  env: {
    STATUS_THROTTLE_MS: '60000',
    CANCEL_CHECK_INTERVAL_MS: '600000',
    WORKER_POLL_INTERVAL_MS: '600000',
    WORKER_EAGER_START: 'false',
  },
});

describe('the worker path', () => {
  it('fetches from the queue once per task when idle, not again after each task it ran', async () => {
    const boss = server.rt.boss;
    const fetch = boss.fetch.bind(boss);
    let fetches = 0;
    boss.fetch = ((...args: Parameters<typeof fetch>) => {
      fetches++;
      return fetch(...args);
    }) as typeof boss.fetch;
    try {
      for (let i = 0; i < 6; i++) {
        const { taskId } = await server.mcp.callTool('analyze_numbers', { count: 10 });
        expect((await server.mcp.waitForTask(taskId as string)).status).toBe('completed');
      }
    } finally {
      boss.fetch = fetch;
    }
    // One per NOTIFY (the backstop poll is set beyond the test); three per task before a freed slot
    // stopped polling an empty queue.
    expect(fetches).toBeGreaterThanOrEqual(6);
    expect(fetches).toBeLessThanOrEqual(8);
  });

  it('writes the last status message with the completion when its throttle has not come round', async () => {
    const { taskId } = await server.mcp.callTool('analyze_numbers', { count: 3000, chunkSize: 1000 });
    const done = await server.mcp.waitForTask(taskId as string);
    expect(done).toMatchObject({ status: 'completed', statusMessage: 'chunk 3/3' });
  });

  it('stops a running handler on tasks/cancel through the cancel NOTIFY', async () => {
    const { taskId } = await server.mcp.callTool('analyze_numbers', {
      count: 100_000,
      chunkSize: 1000,
      delayMsPerChunk: 100,
    });
    // Running: at least one step done.
    const rows = () =>
      server.tdb.db
        .selectFrom('task_steps')
        .select('name')
        .where('task_id', '=', taskId as string)
        .execute();
    await waitFor(async () => (await rows()).length > 0, { what: 'a first step done' });
    const asked = Date.now();
    await server.mcp.result('tasks/cancel', { taskId });
    const done = await server.mcp.waitForTask(taskId as string, undefined, 10_000);
    expect(done.status).toBe('cancelled');
    // Well before the 600 s lease check: the NOTIFY woke the worker.
    expect(Date.now() - asked).toBeLessThan(5_000);
  });
});
