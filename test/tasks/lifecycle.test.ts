import { describe, expect, it } from 'vitest';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { count, TEST_TOOLS } from '../helpers/test-tools.ts';

const server = useTestServer({ tools: [...SHIPPED_TOOLS, ...TEST_TOOLS] });

async function start(name: string, args: Record<string, unknown> = {}): Promise<string> {
  const created = await server.mcp.callTool(name, args);
  expect(created.resultType).toBe('task');
  return created.taskId as string;
}

const waitInput = (taskId: string) => server.mcp.waitForTask(taskId, (t) => t.status === 'input_required');
const accept = (content: Record<string, unknown>) => ({ action: 'accept', content });

describe('a data job as a task', () => {
  it('reports chunk progress in statusMessage and completes with the exact result', async () => {
    const taskId = await start('analyze_numbers', { count: 50_000, chunkSize: 10_000, delayMsPerChunk: 100 });
    const midway = await server.mcp.waitForTask(taskId, (t) =>
      /^chunk [1-4]\/5$/.test(t.statusMessage ?? ''),
    );
    expect(midway.status).toBe('working');
    const done = await server.mcp.waitForTask(taskId);
    expect(done).toMatchObject({ status: 'completed', statusMessage: 'chunk 5/5' });
    expect(done.result).toMatchObject({
      resultType: 'complete',
      structuredContent: expectedAnalysis(50_000, 10_000),
    });
    expect(done.result.content[0].text).toContain(`sum=${expectedAnalysis(50_000, 10_000).sum}`);
  });
});

describe('input_required', () => {
  it('confirm_action asks with a form elicitation and completes once answered', async () => {
    const taskId = await start('confirm_action', { action: 'deploy' });
    const waiting = await waitInput(taskId);
    expect(Object.keys(waiting.inputRequests)).toEqual(['confirm']);
    expect(waiting.inputRequests.confirm).toMatchObject({
      method: 'elicitation/create',
      params: {
        mode: 'form',
        requestedSchema: {
          type: 'object',
          properties: { confirm: { type: 'boolean' } },
          required: ['confirm'],
        },
      },
    });
    // No worker is held while the task waits.
    expect(server.rt.workers!.running.has(taskId)).toBe(false);
    expect(
      await server.mcp.result('tasks/update', {
        taskId,
        inputResponses: { confirm: accept({ confirm: true }) },
      }),
    ).toEqual({
      resultType: 'complete',
      _meta: expect.any(Object),
    });
    const done = await server.mcp.waitForTask(taskId);
    expect(done).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'confirmed: deploy' }] },
    });
  });

  it('confirm_action reports a declined action', async () => {
    const taskId = await start('confirm_action', { action: 'drop table' });
    await waitInput(taskId);
    await server.mcp.result('tasks/update', { taskId, inputResponses: { confirm: { action: 'decline' } } });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content[0].text).toBe('declined: drop table');
  });

  it('accepts a partial answer and shows only the outstanding key at once', async () => {
    const taskId = await start('two_questions');
    const waiting = await waitInput(taskId);
    expect(Object.keys(waiting.inputRequests).sort()).toEqual(['first', 'second']);
    await server.mcp.result('tasks/update', {
      taskId,
      inputResponses: { first: accept({ a: 'x' }), bogus: accept({}) },
    });
    const partly = await server.mcp.getTask(taskId);
    expect(partly.status).toBe('input_required');
    expect(Object.keys(partly.inputRequests)).toEqual(['second']);
    // An answered key is not answered again.
    await server.mcp.result('tasks/update', { taskId, inputResponses: { first: accept({ a: 'changed' }) } });
    await server.mcp.result('tasks/update', { taskId, inputResponses: { second: accept({ b: 'y' }) } });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result.content[0].text).toBe('x+y');
  });

  it('ignores responses for unknown keys, and for tasks not waiting for input', async () => {
    const taskId = await start('confirm_action', { action: 'a' });
    await waitInput(taskId);
    await server.mcp.result('tasks/update', { taskId, inputResponses: { nope: accept({ confirm: true }) } });
    const still = await server.mcp.getTask(taskId);
    expect(still.status).toBe('input_required');
    expect(Object.keys(still.inputRequests)).toEqual(['confirm']);
    await server.mcp.result('tasks/update', {
      taskId,
      inputResponses: { confirm: accept({ confirm: true }) },
    });
    const done = await server.mcp.waitForTask(taskId);
    await server.mcp.result('tasks/update', {
      taskId,
      inputResponses: { confirm: accept({ confirm: false }) },
    });
    expect(await server.mcp.getTask(taskId)).toEqual({ ...done, _meta: expect.any(Object) });
  });

  it('rejects responses that are not objects with -32602 and changes nothing', async () => {
    const taskId = await start('confirm_action', { action: 'b' });
    const before = await waitInput(taskId);
    for (const inputResponses of [{ confirm: 'yes' }, { confirm: [1] }, 'all', null]) {
      expect(await server.mcp.error('tasks/update', { taskId, inputResponses })).toMatchObject({
        code: -32602,
      });
    }
    expect(await server.mcp.error('tasks/update', { taskId })).toMatchObject({ code: -32602 });
    expect(await server.mcp.getTask(taskId)).toEqual(before);
  });

  it('never reuses an input key within a task: a later request gets a new key', async () => {
    const taskId = await start('sequential_questions');
    expect(Object.keys((await waitInput(taskId)).inputRequests)).toEqual(['q1']);
    await server.mcp.result('tasks/update', { taskId, inputResponses: { q1: accept({ a: '1' }) } });
    const second = await server.mcp.waitForTask(
      taskId,
      (t) => t.status === 'input_required' && 'q2' in t.inputRequests,
    );
    expect(Object.keys(second.inputRequests)).toEqual(['q2']);
    // Answering the old key again changes nothing.
    await server.mcp.result('tasks/update', { taskId, inputResponses: { q1: accept({ a: 'x' }) } });
    expect(Object.keys((await server.mcp.getTask(taskId)).inputRequests)).toEqual(['q2']);
    await server.mcp.result('tasks/update', { taskId, inputResponses: { q2: accept({ b: '2' }) } });
    expect((await server.mcp.waitForTask(taskId)).result.content[0].text).toBe('12');
    const keys = await server.tdb.db
      .selectFrom('task_input_requests')
      .select('key')
      .where('task_id', '=', taskId)
      .orderBy('key')
      .execute();
    expect(keys.map((k) => k.key)).toEqual(['q1', 'q2']);
  });

  it('replays the handler after input without repeating a finished step', async () => {
    const taskId = await start('stepper', { tag: 'replay' });
    await waitInput(taskId);
    await server.mcp.result('tasks/update', { taskId, inputResponses: { go: accept({ word: 'yes' }) } });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.result).toMatchObject({ content: [{ text: 'yes:42' }], structuredContent: { a: 41, b: 42 } });
    expect(count('replay:handler')).toBe(2);
    expect(count('replay:a')).toBe(1);
    expect(count('replay:b')).toBe(1);
  });
});

describe('tasks/cancel', () => {
  it('cancels a task waiting for input at once', async () => {
    const taskId = await start('confirm_action', { action: 'c' });
    await waitInput(taskId);
    expect((await server.mcp.result('tasks/cancel', { taskId })).resultType).toBe('complete');
    const task = await server.mcp.getTask(taskId);
    expect(task.status).toBe('cancelled');
    expect(task).not.toHaveProperty('result');
    expect(task).not.toHaveProperty('error');
    expect(task).not.toHaveProperty('inputRequests');
  });

  it('fires a running handler’s abort signal and ends cancelled (latency: npm run bench)', async () => {
    const taskId = await start('waiter', { tag: 'cancel-running' });
    await server.mcp.waitForTask(taskId, () => count('cancel-running:started') === 1);
    await server.mcp.result('tasks/cancel', { taskId });
    const done = await server.mcp.waitForTask(taskId);
    expect(done.status).toBe('cancelled');
    expect(count('cancel-running:aborted')).toBe(1);
  });

  it('acknowledges a cancel of a finished task and leaves it as it was', async () => {
    const taskId = await start('analyze_numbers', { count: 5 });
    const done = await server.mcp.waitForTask(taskId);
    expect((await server.mcp.result('tasks/cancel', { taskId })).resultType).toBe('complete');
    expect(await server.mcp.getTask(taskId)).toEqual(done);
  });
});

describe('failures', () => {
  it('a tool error completes with isError', async () => {
    const done = await server.mcp.waitForTask(await start('fail_with', { kind: 'tool' }));
    expect(done).toMatchObject({ status: 'completed', result: { resultType: 'complete', isError: true } });
  });

  it('a protocol error fails with that JSON-RPC error and a statusMessage', async () => {
    const done = await server.mcp.waitForTask(await start('fail_with', { kind: 'protocol' }));
    expect(done).toMatchObject({
      status: 'failed',
      statusMessage: 'Tool execution failed: Protocol error, as requested',
      error: { code: -32603, message: 'Protocol error, as requested' },
    });
    expect(done).not.toHaveProperty('result');
  });

  it('a protocol error that cannot be stored as it is still fails the task (with the generic error)', async () => {
    const done = await server.mcp.waitForTask(await start('unstorable_error'));
    expect(done).toMatchObject({ status: 'failed', error: { code: -32603, message: 'Internal error' } });
  });

  it('a crash is retried by policy, then fails with -32603', async () => {
    const taskId = await start('fail_with', { kind: 'crash' });
    const done = await server.mcp.waitForTask(taskId);
    expect(done).toMatchObject({ status: 'failed', error: { code: -32603, message: 'Internal error' } });
    const row = await server.tdb.db
      .selectFrom('tasks')
      .select('attempt')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(row.attempt).toBe(3); // the first run and TASK_RETRY_LIMIT = 2 retries
  });

  it('a retry after a crash does not repeat a finished step', async () => {
    const done = await server.mcp.waitForTask(await start('crash_once', { tag: 'crash' }));
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ text: 'checkpointed' }] } });
    expect(count('crash:handler')).toBe(2);
    expect(count('crash:before')).toBe(1);
  });
});

describe('task ids', () => {
  it.each(['tasks/get', 'tasks/update', 'tasks/cancel'])(
    '%s answers unknown, malformed and huge ids with -32602',
    async (method) => {
      for (const taskId of [
        'AAAAAAAAAAAAAAAAAAAAAAAA',
        'not a task',
        '../../etc/passwd',
        'x'.repeat(10_240),
      ]) {
        const error = await server.mcp.error(method, { taskId, inputResponses: {} });
        expect(error).toMatchObject({ status: 200, code: -32602 });
        expect(error.message).toBe('Failed to retrieve task: Task not found');
      }
    },
  );

  it.each(['tasks/get', 'tasks/update', 'tasks/cancel'])(
    '%s needs the tasks extension on the request (-32021)',
    async (method) => {
      const taskId = await start('analyze_numbers', { count: 3 });
      const error = await server.mcp.error(method, { taskId, inputResponses: {} }, { caps: {} });
      expect(error).toMatchObject({
        status: 400,
        code: -32021,
        data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      });
    },
  );
});
