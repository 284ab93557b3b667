/**
 * tasks/steer, tasks/pause and tasks/resume (SEP-2669 draft, experimental) over HTTP, with two
 * principals (bearer tokens), a real server process, Postgres and pg-boss: only a task's owner steers,
 * pauses or resumes it (another principal, and an unknown id, get exactly what tasks/get gives them,
 * and nothing changes); a pause takes an idle task at once and a running one at its next checkpoint;
 * the resume runs it on from there; what the task's state or tool does not allow is refused with
 * -32602 saying why, nothing stored.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { hashToken } from '../../src/http/auth/static-tokens.ts';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { PAUSE_REQUESTED, PAUSED_BY_OWNER } from '../../src/tasks/store/owner-pause.ts';
import type { CallOptions } from '../helpers/mcp.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { atGate, openGate, STEERING_TOOLS } from '../helpers/steering-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const server = useTestServer({
  tools: STEERING_TOOLS,
  env: {
    AUTH_MODE: 'bearer',
    AUTH_TOKENS: ['alice', 'bob'].map((p) => `${p}=${hashToken(`${p}-token`)}`).join(','),
    MAX_STEERING_MESSAGE_BYTES: '64',
    MAX_STEERING_MESSAGES_PER_TASK: '3',
  },
});

const as = (principal: string): CallOptions => ({ headers: { authorization: `Bearer ${principal}-token` } });
const ALICE = as('alice');

async function start(tool: string, args: Record<string, unknown>): Promise<string> {
  return (await server.mcp.callTool(tool, args, ALICE)).taskId as string;
}

const getTask = (taskId: string) => server.mcp.result('tasks/get', { taskId }, ALICE);

/** An error as the client sees it, without the request's own id. */
async function errorOf(method: string, params: Record<string, unknown>, opts: CallOptions) {
  const { id: _id, ...error } = await server.mcp.error(method, params, opts);
  return error;
}

/** The task once it ended (alice's; RawMcp's waitForTask sends no credentials). */
async function waitForEnd(taskId: string): Promise<Record<string, any>> {
  return waitFor(
    async () => {
      const task = await getTask(taskId);
      return ['completed', 'failed', 'cancelled'].includes(task.status as string) && task;
    },
    { what: `task ${taskId} ending` },
  );
}

async function steeringRows(taskId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from task_steering where task_id = ${taskId}`.execute(server.rt.db);
  return rows[0]!.n;
}

/** Runs of the task due now (a parked task's own recheck, a day away, is not one). */
async function runsDueNow(taskId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pgboss.job where name = 'task-run' and data->>'taskId' = ${taskId}
      and state in ('created', 'retry') and start_after <= now() + interval '1 minute'`.execute(server.rt.db);
  return rows[0]!.n;
}

async function waitUntilParked(taskId: string): Promise<void> {
  await waitFor(
    async () =>
      (await getTask(taskId)).statusMessage === 'Waiting for a steering message' &&
      !server.rt.workers!.running.has(taskId),
    { what: `task ${taskId} parked waiting for steering` },
  );
}

describe('tasks/steer, tasks/pause, tasks/resume', () => {
  it('server/discover declares them among the experimental drafts of the tasks extension', async () => {
    const result = await server.mcp.result('server/discover', {}, { ...ALICE, caps: {} });
    expect(result.capabilities.experimental['io.modelcontextprotocol/tasks'].steering).toEqual({
      draft: 'SEP-2669',
      steer: true,
      pause: true,
    });
    expect(result.capabilities.extensions['io.modelcontextprotocol/tasks']).toEqual({});
  });

  it('gives another principal, and an unknown id, exactly what tasks/get gives, and changes nothing', async () => {
    const taskId = await start('steer_collect', { count: 1 });
    await waitUntilParked(taskId);
    for (const [who, id] of [
      ['bob', taskId],
      ['alice', 'AAAAAAAAAAAAAAAAAAAAAAAA'],
    ] as const) {
      const expected = await errorOf('tasks/get', { taskId: id }, as(who));
      expect(expected.code).toBe(-32602);
      for (const method of ['tasks/steer', 'tasks/pause', 'tasks/resume']) {
        expect(await errorOf(method, { taskId: id, message: 'take over' }, as(who))).toEqual(expected);
      }
    }
    expect(await steeringRows(taskId)).toBe(0);
    const task = (await adminGetTask(server.rt.db, taskId))!;
    expect(task.task.pausedAt).toBeNull();
    expect(task.actions).toEqual([]);
    // Paused by its owner, it stays paused whatever another principal asks.
    await server.mcp.result('tasks/pause', { taskId }, ALICE);
    const hidden = await errorOf('tasks/get', { taskId }, as('bob'));
    expect(await errorOf('tasks/resume', { taskId }, as('bob'))).toEqual(hidden);
    expect((await adminGetTask(server.rt.db, taskId))!.task.pausedAt).not.toBeNull();
    await server.mcp.result('tasks/resume', { taskId }, ALICE);
    // The owner's own steer still works: the task was left as it was.
    await server.mcp.result('tasks/steer', { taskId, message: 'mine' }, ALICE);
    expect((await waitForEnd(taskId)).status).toBe('completed');
  });

  it('pauses an idle task at once; steering waits while it is paused; resume runs it on', async () => {
    const taskId = await start('steer_collect', { count: 1 });
    await waitUntilParked(taskId);
    const paused = await server.mcp.result('tasks/pause', { taskId }, ALICE);
    expect(paused).toMatchObject({
      resultType: 'complete',
      status: 'working',
      statusMessage: PAUSED_BY_OWNER,
    });
    expect((await adminGetTask(server.rt.db, taskId))!.task.pausedAt).not.toBeNull();
    // Accepted while paused (SEP-2669), kept for the resume: nothing runs the task meanwhile.
    await server.mcp.result('tasks/steer', { taskId, message: 'go' }, ALICE);
    expect(await runsDueNow(taskId)).toBe(0);
    expect(await errorOf('tasks/pause', { taskId }, ALICE)).toMatchObject({
      code: -32602,
      message: 'Invalid params: the task is already paused',
    });
    const resumed = await server.mcp.result('tasks/resume', { taskId }, ALICE);
    expect(resumed).toMatchObject({ status: 'working', statusMessage: 'Resumed by client:alice' });
    const done = await waitForEnd(taskId);
    expect(done.result.content[0].text).toBe('1:go');
    const actions = (await adminGetTask(server.rt.db, taskId))!.actions;
    expect(actions.map((a) => [a.action, a.actor])).toEqual([
      ['pause', 'client:alice'],
      ['resume', 'client:alice'],
    ]);
    // Ended: nothing to resume, pause or steer.
    for (const [method, why] of [
      ['tasks/resume', 'the task is not paused'],
      ['tasks/pause', 'the task has ended (completed): only a working task pauses'],
      ['tasks/steer', 'the task has ended (completed): it reads no more steering messages'],
    ] as const) {
      expect(await errorOf(method, { taskId, message: 'late' }, ALICE)).toMatchObject({
        code: -32602,
        message: `Invalid params: ${why}`,
      });
    }
    expect(await steeringRows(taskId)).toBe(1);
  });

  it('pauses a running task at its next checkpoint, and resumes it from there', async () => {
    const taskId = await start('steer_gated', { steps: 3 });
    await waitFor(() => atGate(`${taskId}:s0`), { what: 'step s0 running' });
    const asked = await server.mcp.result('tasks/pause', { taskId }, ALICE);
    expect(asked).toMatchObject({ status: 'working', statusMessage: PAUSE_REQUESTED });
    expect((await adminGetTask(server.rt.db, taskId))!.task.pausedAt).toBeNull();
    // The worker running it heard of the request (NOTIFY); s0 ends, and s1 does not start.
    await waitFor(() => server.rt.workers!.running.get(taskId)?.pauseRequested === true, {
      what: 'the attempt told of the pause',
    });
    openGate(`${taskId}:s0`);
    await waitFor(async () => (await adminGetTask(server.rt.db, taskId))!.task.pausedAt != null, {
      what: 'the task paused',
    });
    expect(await getTask(taskId)).toMatchObject({ status: 'working', statusMessage: PAUSED_BY_OWNER });
    expect(atGate(`${taskId}:s1`)).toBe(false);
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    openGate(`${taskId}:s1`);
    openGate(`${taskId}:s2`);
    await server.mcp.result('tasks/resume', { taskId }, ALICE);
    const done = await waitForEnd(taskId);
    expect(done.result.content[0].text).toBe('|none');
    const { rows } = await sql<{ name: string; attempt: number }>`
      select name, attempt from task_steps where task_id = ${taskId} and name ~ '^s[0-9]+$' order by position`.execute(
      server.rt.db,
    );
    // s0 ran in the attempt that paused; s1 and s2 in the resumed one.
    expect(rows.map((r) => r.name)).toEqual(['s0', 's1', 's2']);
    expect(rows[1]!.attempt).toBeGreaterThan(rows[0]!.attempt);
  });

  it('a resume before the checkpoint withdraws the pause it asked for', async () => {
    const taskId = await start('steer_gated', { steps: 2 });
    await waitFor(() => atGate(`${taskId}:s0`), { what: 'step s0 running' });
    await server.mcp.result('tasks/pause', { taskId }, ALICE);
    const resumed = await server.mcp.result('tasks/resume', { taskId }, ALICE);
    expect(resumed.statusMessage).toBe('Resumed by client:alice');
    await waitFor(() => server.rt.workers!.running.get(taskId)?.pauseRequested === false, {
      what: 'the attempt told of the withdrawal',
    });
    openGate(`${taskId}:s0`);
    openGate(`${taskId}:s1`);
    expect((await waitForEnd(taskId)).status).toBe('completed');
    expect((await adminGetTask(server.rt.db, taskId))!.task.pausedAt).toBeNull();
  });

  it('refuses a steer to a tool that does not read steering, storing nothing', async () => {
    const taskId = await start('no_steering', {});
    const error = await errorOf('tasks/steer', { taskId, message: 'hello' }, ALICE);
    expect(error).toMatchObject({
      code: -32602,
      message:
        'Invalid params: tool no_steering does not read steering messages (its definition has no steering: true): nothing was stored',
    });
    expect(await steeringRows(taskId)).toBe(0);
    const { rows } = await sql<{ steering_sent: number }>`
      select steering_sent from tasks where task_id = ${taskId}`.execute(server.rt.db);
    expect(rows[0]!.steering_sent).toBe(0);
  });

  it('refuses an oversized message and one past the count per task, naming the setting', async () => {
    const taskId = await start('steer_gated', { steps: 1 });
    await waitFor(() => atGate(`${taskId}:s0`), { what: 'step s0 running' });
    expect(await errorOf('tasks/steer', { taskId, message: 'x'.repeat(65) }, ALICE)).toMatchObject({
      code: -32602,
      message: 'Invalid params: message is 65 bytes, over MAX_STEERING_MESSAGE_BYTES (64)',
    });
    expect(await steeringRows(taskId)).toBe(0);
    for (const message of ['a', 'b', 'c']) {
      await server.mcp.result('tasks/steer', { taskId, message }, ALICE);
    }
    expect(await errorOf('tasks/steer', { taskId, message: 'd' }, ALICE)).toMatchObject({
      code: -32602,
      message:
        'Invalid params: the task already got 3 steering messages, the most one task takes (MAX_STEERING_MESSAGES_PER_TASK 3)',
    });
    openGate(`${taskId}:s0`);
    expect((await waitForEnd(taskId)).result.content[0].text).toBe('1:a,2:b,3:c|none');
  });
});
