/**
 * The independent in-memory Tasks server (independent-tasks-server.ts), over a real socket, driven by
 * the official requester `@modelcontextprotocol/ext-tasks` (`withTasks` over the suite's port) through
 * all three tools, and by raw requests for the error cases. Every reply is checked against the
 * 2026-07-28 schema (assertWireValid), and the tasks/get results against ext-tasks' v2 schemas.
 */
import {
  TaskCancelledError,
  TaskFailedError,
  resultFromTaskOutcome,
  withTasks,
  type ApplicationElicitResult,
  type TaskExecutionEvent,
  type TaskView,
} from '@modelcontextprotocol/ext-tasks/client';
import {
  CreateTaskResultV2Schema,
  DetailedTaskV2Schema,
  GetTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extTasksPort, recordingInputHandler, type Elicited } from './ext-tasks.ts';
import { startIndependentTasksServer, type IndependentTasksServer } from './independent-tasks-server.ts';
import { PROTOCOL_VERSION, postMcp, TASKS_EXT, type RpcReply } from './mcp.ts';
import { waitFor } from './wait.ts';
import { assertWireValid } from './wire-schema.ts';

let server: IndependentTasksServer;

beforeAll(async () => {
  server = await startIndependentTasksServer();
});
afterAll(async () => {
  await server?.close();
});

/** A withTasks session on the server; records every reply, schema violation, elicitation and task event. */
function openSession(answer: (e: Elicited) => ApplicationElicitResult = () => ({ action: 'cancel' })) {
  const replies: Array<{ method: string; body: Record<string, any> }> = [];
  const violations: string[] = [];
  const elicited: Elicited[] = [];
  const errors: Error[] = [];
  const events: TaskExecutionEvent<unknown>[] = [];
  const port = extTasksPort(server.url, {
    clientInfo: { name: 'independent-server-test', version: '0.0.0' },
    hooks: {
      replied: (method, reply) => {
        replies.push({ method, body: reply.body });
        for (const message of reply.messages) {
          try {
            assertWireValid(method, message);
          } catch (err) {
            violations.push((err as Error).message);
          }
        }
      },
    },
  });
  const session = withTasks(port, {
    onInputRequest: recordingInputHandler(elicited, answer),
    onError: (err) => errors.push(err),
  });
  const results = (method: string) => replies.filter((r) => r.method === method).map((r) => r.body.result);
  const tasks = () => events.flatMap((e) => (e.type === 'task' ? [e.task] : []));
  return {
    session,
    elicited,
    onEvent: (e: TaskExecutionEvent<unknown>) => void events.push(e),
    tasks,
    results,
    /** The wire was clean, and each tasks/get result is a valid GetTaskResult and DetailedTask. */
    expectValidWire() {
      expect(violations).toEqual([]);
      expect(errors.map((e) => e.message)).toEqual([]);
      const gets = results('tasks/get');
      expect(gets.length).toBeGreaterThan(0);
      for (const result of gets) {
        expect(GetTaskResultV2Schema.safeParse(result).error).toBeUndefined();
        expect(DetailedTaskV2Schema.safeParse(result).error).toBeUndefined();
        expect(result.resultType).toBe('complete');
      }
      return gets as Array<Record<string, any>>;
    },
  };
}

/** The one CreateTaskResult of a session: valid, with the server's own task id and timings. */
function expectCreateTaskResult(result: unknown, taskId: string) {
  const parsed = CreateTaskResultV2Schema.safeParse(result);
  expect(parsed.error).toBeUndefined();
  expect(result).toMatchObject({
    resultType: 'task',
    taskId,
    status: 'working',
    ttlMs: 60_000,
    pollIntervalMs: 50,
    createdAt: expect.any(String),
    lastUpdatedAt: expect.any(String),
  });
  expect(taskId).toMatch(/^ind-[\w-]{24}$/);
}

describe('independent tasks server, driven by @modelcontextprotocol/ext-tasks', () => {
  it('declares the tasks extension on server/discover', async () => {
    const reply = await postMcp(server.url, 'server/discover', {});
    assertWireValid('server/discover', reply.body);
    expect(reply.body.result.supportedVersions).toContain(PROTOCOL_VERSION);
    expect(reply.body.result.capabilities.extensions).toEqual({ [TASKS_EXT]: {} });
  });

  it('runs slow_count as a task, reporting k/steps, and completes with counted to N', async () => {
    const s = openSession();
    try {
      const ex = await s.session.callTool('slow_count', { steps: 5 });
      expect(ex.kind).toBe('task');
      const taskId = ex.handle!.taskId;
      const { outcome, lastTask } = await ex.settle({ onEvent: s.onEvent });

      expect(outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(outcome)).toEqual({
        resultType: 'complete',
        content: [{ type: 'text', text: 'counted to 5' }],
      });
      expect(lastTask).toMatchObject({ taskId, status: 'completed', statusMessage: '5/5' });
      const progress = s.tasks().flatMap((t) => (t.status === 'working' ? [t.statusMessage] : []));
      expect(progress.some((m) => /^[1-4]\/5$/.test(m ?? ''))).toBe(true);

      const [created] = s.results('tools/call');
      expectCreateTaskResult(created, taskId);
      const gets = s.expectValidWire();
      expect(gets.at(-1)).toMatchObject({
        status: 'completed',
        result: { resultType: 'complete', content: [{ type: 'text', text: 'counted to 5' }] },
      });
    } finally {
      await s.session.close();
    }
  });

  it('asks ask_name’s question through inputRequests, answers it with tasks/update, and greets', async () => {
    const s = openSession(() => ({ action: 'accept', content: { name: 'Ada' } }));
    try {
      const ex = await s.session.callTool('ask_name', {});
      expect(ex.kind).toBe('task');
      const taskId = ex.handle!.taskId;
      const { outcome } = await ex.settle({ onEvent: s.onEvent });

      expect(s.elicited).toHaveLength(1);
      expect(s.elicited[0]!.ctx).toMatchObject({
        scope: 'task',
        delivery: 'task-update',
        taskId,
        inputId: 'who',
      });
      expect(s.elicited[0]!.params).toMatchObject({
        mode: 'form',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      });
      expect(s.results('tasks/update')).toHaveLength(1);
      expect(outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(outcome)).toEqual({
        resultType: 'complete',
        content: [{ type: 'text', text: 'hello Ada' }],
      });

      expectCreateTaskResult(s.results('tools/call')[0], taskId);
      const gets = s.expectValidWire();
      const asking = gets.find((g) => g.status === 'input_required');
      expect(asking).toMatchObject({
        inputRequests: { who: { method: 'elicitation/create', params: { mode: 'form' } } },
      });
      expect(gets.at(-1)).toMatchObject({
        status: 'completed',
        result: { resultType: 'complete', content: [{ type: 'text', text: 'hello Ada' }] },
      });
      expect(gets.at(-1)).not.toHaveProperty('inputRequests');
    } finally {
      await s.session.close();
    }
  });

  it('completes ask_name with an isError result when the question is declined', async () => {
    const s = openSession(() => ({ action: 'decline' }));
    try {
      const ex = await s.session.callTool('ask_name', {});
      const { outcome } = await ex.settle();
      expect(s.elicited).toHaveLength(1);
      expect(outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(outcome)).toEqual({
        resultType: 'complete',
        content: [{ type: 'text', text: 'no name given' }],
        isError: true,
      });
      s.expectValidWire();
    } finally {
      await s.session.close();
    }
  });

  it('ends always_fails as a failed task carrying the JSON-RPC error', async () => {
    const s = openSession();
    try {
      const ex = await s.session.callTool('always_fails', {});
      expect(ex.kind).toBe('task');
      const { outcome, lastTask } = await ex.settle();
      expect(outcome.status).toBe('failed');
      expect(lastTask?.status).toBe('failed');
      let thrown: unknown;
      try {
        resultFromTaskOutcome(outcome);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(TaskFailedError);
      expect(thrown).toMatchObject({ code: -32603, message: 'always_fails failed, as it always does' });

      const gets = s.expectValidWire();
      expect(gets.at(-1)).toMatchObject({
        status: 'failed',
        error: { code: -32603, message: 'always_fails failed, as it always does' },
      });
      expect(gets.at(-1)).not.toHaveProperty('result');
    } finally {
      await s.session.close();
    }
  });

  it('cancels a running slow_count; the server keeps it cancelled', async () => {
    const s = openSession();
    try {
      const ex = await s.session.callTool('slow_count', { steps: 100 });
      expect(ex.kind).toBe('task');
      const taskId = ex.handle!.taskId;
      const settled = ex.settle({ onEvent: s.onEvent });
      await waitFor(() => s.tasks().some((t: TaskView) => t.statusMessage === '1/100'), {
        what: 'a working task past its first step',
      });
      await ex.cancel();
      const { outcome } = await settled;
      expect(outcome.status).toBe('cancelled');
      expect(() => resultFromTaskOutcome(outcome)).toThrow(TaskCancelledError);
      expect(s.results('tasks/cancel')).toEqual([expect.objectContaining({ resultType: 'complete' })]);

      const reply = await postMcp(server.url, 'tasks/get', { taskId });
      assertWireValid('tasks/get', reply.body);
      expect(reply.body.result).toMatchObject({ taskId, status: 'cancelled' });
      expect(reply.body.result).not.toHaveProperty('result');
    } finally {
      await s.session.close();
    }
  });
});

describe('independent tasks server, raw requests', () => {
  const expectError = (reply: RpcReply, method: string, code: number) => {
    assertWireValid(method, reply.body);
    expect(reply.body.error).toMatchObject({ code });
  };

  it('answers tasks/get, tasks/update and tasks/cancel for an unknown task id with -32602', async () => {
    const taskId = 'ind-no-such-task';
    expectError(await postMcp(server.url, 'tasks/get', { taskId }), 'tasks/get', -32602);
    expectError(
      await postMcp(server.url, 'tasks/update', { taskId, inputResponses: { who: { action: 'cancel' } } }),
      'tasks/update',
      -32602,
    );
    expectError(await postMcp(server.url, 'tasks/cancel', { taskId }), 'tasks/cancel', -32602);
  });

  it('rejects a tasks/get whose Mcp-Name is not its task id with -32020', async () => {
    const created = await postMcp(server.url, 'tools/call', { name: 'slow_count', arguments: { steps: 1 } });
    const taskId = created.body.result.taskId as string;
    const reply = await postMcp(
      server.url,
      'tasks/get',
      { taskId },
      { headers: { 'mcp-name': 'ind-other' } },
    );
    expect(reply.status).toBe(400);
    expectError(reply, 'tasks/get', -32020);
  });

  it('gives a client without the extension plain results, MRTR input, and -32021 on tasks/*', async () => {
    const caps = { elicitation: { form: {} } };
    const plain = await postMcp(
      server.url,
      'tools/call',
      { name: 'slow_count', arguments: { steps: 1 } },
      { caps },
    );
    assertWireValid('tools/call', plain.body);
    expect(plain.body.result).toMatchObject({
      resultType: 'complete',
      content: [{ type: 'text', text: 'counted to 1' }],
    });

    const asked = await postMcp(server.url, 'tools/call', { name: 'ask_name', arguments: {} }, { caps });
    assertWireValid('tools/call', asked.body);
    expect(asked.body.result).toMatchObject({
      resultType: 'input_required',
      inputRequests: { who: { method: 'elicitation/create' } },
    });
    const answered = await postMcp(
      server.url,
      'tools/call',
      {
        name: 'ask_name',
        arguments: {},
        inputResponses: { who: { action: 'accept', content: { name: 'Bo' } } },
      },
      { caps },
    );
    assertWireValid('tools/call', answered.body);
    expect(answered.body.result).toMatchObject({
      resultType: 'complete',
      content: [{ type: 'text', text: 'hello Bo' }],
    });

    const created = await postMcp(server.url, 'tools/call', { name: 'slow_count', arguments: { steps: 1 } });
    expect(created.body.result.resultType).toBe('task');
    const refused = await postMcp(server.url, 'tasks/get', { taskId: created.body.result.taskId }, { caps });
    expectError(refused, 'tasks/get', -32021);
    expect(refused.body.error.data).toEqual({ requiredCapabilities: { extensions: { [TASKS_EXT]: {} } } });
  });
});
