/**
 * ctx.steering (SEP-2669 draft, experimental) against a real server process, Postgres and pg-boss: a task
 * waiting for a steering message parks without a slot and `tasks/steer` wakes it; messages are read in
 * the order sent; every read is a checkpoint, so a replay after a crash returns the same messages and
 * no message is read twice or lost; a wait with a timeout ends with nothing.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { atGate, legReads, openGate, STEERING_TOOLS } from '../helpers/steering-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer({ tools: STEERING_TOOLS });

const steer = (taskId: string, message: string) => server.mcp.result('tasks/steer', { taskId, message });

async function start(tool: string, args: Record<string, unknown>): Promise<string> {
  return (await server.mcp.callTool(tool, args)).taskId as string;
}

/** Until the task waits for a steering message, parked: no attempt of this process runs it. */
async function waitUntilParked(taskId: string, statusMessage = 'Waiting for a steering message') {
  await waitFor(
    async () =>
      (await server.mcp.getTask(taskId)).statusMessage === statusMessage &&
      !server.rt.workers!.running.has(taskId),
    { what: `task ${taskId} parked waiting for steering` },
  );
}

/** What the task's read steps recorded, in order: the messages each returned. */
async function readSteps(taskId: string): Promise<Array<{ name: string; messages: string[] }>> {
  const { rows } = await sql<{ name: string; output: { value: Array<{ message: string }> } }>`
    select name, output from task_steps
     where task_id = ${taskId} and name like 'steering:%' and name not like '%:wait' order by position`.execute(
    server.rt.db,
  );
  return rows.map((r) => ({ name: r.name, messages: r.output.value.map((m) => m.message) }));
}

describe('ctx.steering', () => {
  it('parks a task waiting for a message (no slot held) and wakes it on tasks/steer; reads in order', async () => {
    const taskId = await start('steer_collect', { count: 3 });
    await waitUntilParked(taskId);
    const acks = [await steer(taskId, 'a'), await steer(taskId, 'b'), await steer(taskId, 'c')];
    expect(acks.map((a) => a.resultType)).toEqual(['complete', 'complete', 'complete']);
    const done = await server.mcp.waitForTask(taskId);
    expect(done.status).toBe('completed');
    expect(done.result.content[0].text).toBe('1:a,2:b,3:c');
    expect((await readSteps(taskId)).map((s) => s.messages)).toEqual([['a'], ['b'], ['c']]);
  });

  it('pending() takes every message sent while the task ran, in order; a later read finds none', async () => {
    const taskId = await start('steer_gated', { steps: 1 });
    await waitFor(() => atGate(`${taskId}:s0`), { what: 'step s0 running' });
    for (const message of ['x', 'y', 'z']) await steer(taskId, message);
    openGate(`${taskId}:s0`);
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content[0].text).toBe('1:x,2:y,3:z|none');
    expect(await readSteps(taskId)).toEqual([
      { name: 'steering:1', messages: ['x', 'y', 'z'] },
      { name: 'steering:2', messages: [] },
    ]);
  });

  it('a replay after a crash returns the same messages in the same order, each read exactly once', async () => {
    const taskId = await start('steer_collect', { count: 3, crashAfter: 2 });
    await waitUntilParked(taskId);
    await steer(taskId, 'one');
    await steer(taskId, 'two');
    // It reads both, crashes, and its retry replays both reads from their checkpoints, then waits again.
    await waitFor(
      async () =>
        (await adminGetTask(server.rt.db, taskId))!.attempts.some((a) => a.outcome === 'crash_retry') &&
        (await server.mcp.getTask(taskId)).statusMessage === 'Waiting for a steering message' &&
        !server.rt.workers!.running.has(taskId),
      { what: 'the retry waiting for a third message' },
    );
    await steer(taskId, 'three');
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content[0].text).toBe('1:one,2:two,3:three');
    // Every leg (the crashed one, its retry, each wake-up) saw the same messages in the same order.
    const all = ['1:one', '2:two', '3:three'];
    for (const leg of legReads.get(taskId)!) expect(all.slice(0, leg.length)).toEqual(leg);
    expect(legReads.get(taskId)!.at(-1)).toEqual(all);
    expect((await readSteps(taskId)).map((s) => s.messages)).toEqual([['one'], ['two'], ['three']]);
  });

  it('a wait with a timeout ends with nothing once the timeout passes', async () => {
    const taskId = await start('steer_timeout', { timeoutMs: 300 });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content[0].text).toBe('timed out');
    expect(await readSteps(taskId)).toEqual([{ name: 'steering:1', messages: [] }]);
  });
});
