/**
 * The real server, over real HTTP sockets, driven by the official independent clients:
 * `@modelcontextprotocol/client` (the SDK `Client`, pinned to 2026-07-28) and
 * `@modelcontextprotocol/ext-tasks` (`withTasks` over a small fetch-based session port).
 * Every JSON-RPC message the server sends to either client is checked against the spec's schemas.
 */
import {
  Client,
  ProtocolError,
  StreamableHTTPClientTransport,
  type FetchLike,
} from '@modelcontextprotocol/client';
import {
  TaskCancelledError,
  TaskFailedError,
  resultFromTaskOutcome,
  withTasks,
  type ApplicationElicitResult,
  type TaskEnabledSession,
  type TaskExecutionEvent,
  type TaskView,
} from '@modelcontextprotocol/ext-tasks/client';
import { DetailedTaskV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../../src/process/start.ts';
import { exportRows } from '../../src/tools/shipped/export-csv.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { extTasksPort, recordingInputHandler, type Elicited } from '../helpers/ext-tasks.ts';
import { parseMessages, PROTOCOL_VERSION, RawMcp, TASKS_EXT } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { assertWireValid } from '../helpers/wire-schema.ts';

let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
let mcp: RawMcp;

beforeAll(async () => {
  tdb = await createTestDatabase();
  rt = await startTestProcess({ databaseUrl: tdb.url });
  mcp = new RawMcp(rt.url);
});
afterAll(async () => {
  await rt?.stop();
  await tdb?.drop();
});

// ---------------------------------------------------------------------------------------------
// Wire log: every message the server sent, per request method, and every schema violation.
// Violations are collected (not only thrown) so that a client library cannot swallow them.
// ---------------------------------------------------------------------------------------------

interface WireLog {
  /** Request methods in the order they were sent. */
  sent: string[];
  /** Request method of every server message that passed the schema check. */
  validated: string[];
  /** Requests the client itself aborted (e.g. a poll in flight when the session closed): no reply. */
  aborted: string[];
  violations: string[];
}

const newWireLog = (): WireLog => ({ sent: [], validated: [], aborted: [], violations: [] });

function checkMessages(log: WireLog, method: string, messages: readonly unknown[]): void {
  for (const message of messages) {
    try {
      assertWireValid(method, message);
      log.validated.push(method);
    } catch (err) {
      log.violations.push((err as Error).message);
      throw err;
    }
  }
}

/** The fetch the SDK transport uses: passes everything through, and checks a copy of each reply. */
function validatingFetch(log: WireLog, pending: Array<Promise<void>>): FetchLike {
  return async (url, init) => {
    const res = await fetch(url, init);
    if (init?.method === 'POST' && typeof init.body === 'string') {
      const sent = JSON.parse(init.body) as { method?: unknown; id?: unknown };
      if (typeof sent.method === 'string' && sent.id !== undefined) {
        const method = sent.method;
        log.sent.push(method);
        const contentType = res.headers.get('content-type') ?? '';
        pending.push(
          res
            .clone()
            .text()
            .then((text) => checkMessages(log, method, parseMessages(contentType, text)))
            .catch((err: unknown) => {
              if (!log.violations.includes((err as Error).message)) {
                log.violations.push(`${method}: ${(err as Error).message}`);
              }
            }),
        );
      }
    }
    return res;
  };
}

// ---------------------------------------------------------------------------------------------
// ext-tasks over the suite's port (test/helpers/ext-tasks.ts): one stateless POST per dispatch; the
// wire log sees every request and checks every server message with assertWireValid.
// ---------------------------------------------------------------------------------------------

function loggedPort(url: string, log: WireLog) {
  return extTasksPort(url, {
    clientInfo: { name: 'e2e-ext-tasks', version: '0.0.0' },
    hooks: {
      sent: (method) => log.sent.push(method),
      aborted: (method) => log.aborted.push(method),
      replied: (method, reply) => {
        if (reply.text !== '' && reply.messages.length === 0)
          log.violations.push(
            `${method}: HTTP ${reply.status} with a non-JSON body: ${reply.text.slice(0, 200)}`,
          );
        checkMessages(log, method, reply.messages);
        if (reply.body.result === undefined && reply.body.error === undefined)
          log.violations.push(`${method}: HTTP ${reply.status} without a JSON-RPC response`);
      },
    },
  });
}

/** An ext-tasks session over the fetch port; elicitations are recorded and answered by `answer`. */
function openSession(answer: (e: Elicited) => ApplicationElicitResult = () => ({ action: 'cancel' })): {
  session: TaskEnabledSession;
  log: WireLog;
  elicited: Elicited[];
  errors: Error[];
} {
  const log = newWireLog();
  const elicited: Elicited[] = [];
  const errors: Error[] = [];
  const session = withTasks(loggedPort(rt.url, log), {
    onInputRequest: recordingInputHandler(elicited, answer),
    onError: (err) => errors.push(err),
  });
  return { session, log, elicited, errors };
}

/** Resolves once `predicate` holds for a task event, or rejects after `timeoutMs`. */
function eventWatcher(timeoutMs: number) {
  const events: TaskExecutionEvent<unknown>[] = [];
  const waiters: Array<{ predicate: (t: TaskView) => boolean; resolve: (t: TaskView) => void }> = [];
  const onEvent = (event: TaskExecutionEvent<unknown>) => {
    events.push(event);
    if (event.type !== 'task') return;
    for (const w of [...waiters]) {
      if (w.predicate(event.task)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(event.task);
      }
    }
  };
  const waitFor = (predicate: (t: TaskView) => boolean, what: string) =>
    new Promise<TaskView>((resolve, reject) => {
      const seen = events.find((e) => e.type === 'task' && predicate(e.task));
      if (seen?.type === 'task') return resolve(seen.task);
      const timer = setTimeout(() => {
        const statuses = events.map((e) =>
          e.type === 'task' ? e.task.status : `outcome:${e.outcome.status}`,
        );
        reject(new Error(`no task event ${what} within ${timeoutMs} ms; saw ${statuses.join(', ')}`));
      }, timeoutMs);
      waiters.push({
        predicate,
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
      });
    });
  const statuses = () => events.flatMap((e) => (e.type === 'task' ? [e.task.status] : []));
  return { events, onEvent, waitFor, statuses };
}

function expectCleanWire(log: WireLog, errors: Error[] = []) {
  expect(log.violations).toEqual([]);
  expect(errors.map((e) => e.message)).toEqual([]);
  // Every request got a reply that passed the schema check, but those the client aborted itself.
  expect(log.validated.length).toBeGreaterThanOrEqual(log.sent.length - log.aborted.length);
}

// ---------------------------------------------------------------------------------------------

describe('@modelcontextprotocol/client (SDK Client, pinned to 2026-07-28)', () => {
  function sdkClient(withTasksExtension: boolean): Client {
    return new Client(
      { name: 'e2e-sdk-client', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
        capabilities: withTasksExtension ? { extensions: { [TASKS_EXT]: {} } } : {},
      },
    );
  }

  it('discovers, lists the shipped tools, calls echo and a synchronous analyze_numbers, and gets -32602 for an unknown task', async () => {
    const log = newWireLog();
    const pending: Array<Promise<void>> = [];
    const transport = () =>
      new StreamableHTTPClientTransport(new URL(rt.url), { fetch: validatingFetch(log, pending) });
    const tasksClient = sdkClient(true);
    const plainClient = sdkClient(false);
    try {
      await tasksClient.connect(transport());
      expect(log.sent[0]).toBe('server/discover');
      expect(log.sent).not.toContain('initialize');
      expect(tasksClient.getProtocolEra()).toBe('modern');
      expect(tasksClient.getNegotiatedProtocolVersion()).toBe(PROTOCOL_VERSION);
      expect(tasksClient.getDiscoverResult()?.supportedVersions).toContain(PROTOCOL_VERSION);
      expect(tasksClient.getServerCapabilities()).toMatchObject({
        tools: expect.any(Object),
        extensions: { [TASKS_EXT]: expect.any(Object) },
      });

      const { tools } = await tasksClient.listTools();
      expect(tools.map((t) => t.name)).toEqual([
        'analyze_numbers',
        'confirm_action',
        'fail_with',
        'echo',
        'approved_export',
        'checksum_shards',
        'export_csv',
        'scan_rows',
      ]);
      expect(tools.find((t) => t.name === 'analyze_numbers')?.inputSchema).toMatchObject({
        type: 'object',
        required: ['count'],
      });

      const echoed = await tasksClient.callTool({ name: 'echo', arguments: { text: 'hello, SDK' } });
      expect(echoed.content).toEqual([{ type: 'text', text: 'hello, SDK' }]);
      expect(echoed.isError ?? false).toBe(false);

      // Unknown task: a JSON-RPC error, surfaced by the SDK as a ProtocolError.
      const unknown = tasksClient.request(
        { method: 'tasks/get', params: { taskId: 'unknownTaskIdAAAAAAAAAAAAAAAA' } },
        DetailedTaskV2Schema,
      );
      await expect(unknown).rejects.toBeInstanceOf(ProtocolError);
      await expect(unknown).rejects.toMatchObject({ code: -32602 });

      // A client without the tasks extension gets analyze_numbers synchronously.
      await plainClient.connect(transport());
      const analysis = await plainClient.callTool({
        name: 'analyze_numbers',
        arguments: { count: 2500, chunkSize: 1000 },
      });
      expect(analysis.isError ?? false).toBe(false);
      expect(analysis.structuredContent).toEqual(expectedAnalysis(2500, 1000));
      expect(analysis.content).toEqual([
        { type: 'text', text: expect.stringContaining(`sum=${expectedAnalysis(2500, 1000).sum}`) },
      ]);
      // ...and is told it lacks the extension when it asks about tasks.
      const noExt = plainClient.request(
        { method: 'tasks/get', params: { taskId: 'unknownTaskIdAAAAAAAAAAAAAAAA' } },
        DetailedTaskV2Schema,
      );
      await expect(noExt).rejects.toMatchObject({ code: -32021 });
    } finally {
      await tasksClient.close();
      await plainClient.close();
    }
    await Promise.all(pending);
    expect(log.violations).toEqual([]);
    expect(log.sent.filter((m) => m === 'server/discover')).toHaveLength(2);
    expect(log.validated).toEqual(
      expect.arrayContaining(['server/discover', 'tools/list', 'tools/call', 'tasks/get']),
    );
    expect(log.validated.length).toBeGreaterThanOrEqual(log.sent.length);
  });
});

describe('@modelcontextprotocol/ext-tasks (withTasks over a fetch port)', () => {
  it('answers confirm_action’s elicitation through onInputRequest and gets the confirmed result', async () => {
    const { session, log, elicited, errors } = openSession(() => ({
      action: 'accept',
      content: { confirm: true },
    }));
    try {
      const ex = await session.callTool('confirm_action', { action: 'ship it' });
      expect(ex.kind).toBe('task');
      const taskId = ex.handle?.taskId;
      const watch = eventWatcher(10_000);
      const { outcome, lastTask } = await ex.settle({ onEvent: watch.onEvent });

      expect(elicited).toHaveLength(1);
      const [asked] = elicited;
      expect(asked!.ctx).toMatchObject({
        scope: 'task',
        delivery: 'task-update',
        taskId,
        inputId: 'confirm',
      });
      expect(asked!.params).toMatchObject({
        mode: 'form',
        message: expect.stringContaining('ship it'),
        requestedSchema: {
          type: 'object',
          properties: { confirm: { type: 'boolean' } },
          required: ['confirm'],
        },
      });
      expect(watch.statuses()).toContain('input_required');
      expect(log.sent.filter((m) => m === 'tasks/update')).toHaveLength(1);

      expect(outcome.status).toBe('completed');
      expect(lastTask?.status).toBe('completed');
      const result = resultFromTaskOutcome(outcome);
      expect(result).toMatchObject({ content: [{ type: 'text', text: 'confirmed: ship it' }] });
      expect(result).not.toHaveProperty('isError', true);
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
    expect(log.validated).toEqual(expect.arrayContaining(['tools/call', 'tasks/get', 'tasks/update']));
  });

  it('cancels a running analyze_numbers task; the server ends it cancelled within 2 s', async () => {
    const { session, log, errors } = openSession();
    let taskId: string | undefined;
    try {
      const ex = await session.callTool('analyze_numbers', {
        count: 200_000,
        chunkSize: 1000,
        delayMsPerChunk: 20,
      });
      expect(ex.kind).toBe('task');
      taskId = ex.handle!.taskId;
      const watch = eventWatcher(10_000);
      const settled = ex.settle({ onEvent: watch.onEvent });
      // Working, and visibly executing chunks (not merely queued).
      const working = await watch.waitFor(
        (t) => t.status === 'working' && /^chunk \d+\/200$/.test(t.statusMessage ?? ''),
        'showing a working task past its first chunk',
      );
      expect(working.taskId).toBe(taskId);

      await ex.cancel();
      const cancelAcked = Date.now();
      expect(log.sent).toContain('tasks/cancel');
      const { outcome } = await settled;
      expect(outcome.status).toBe('cancelled');
      expect(() => resultFromTaskOutcome(outcome)).toThrow(TaskCancelledError);

      // The local outcome follows from the ack alone; the server's own record must agree.
      const deadline = cancelAcked + 2000;
      let task = await mcp.getTask(taskId);
      while (task.status !== 'cancelled' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        task = await mcp.getTask(taskId);
      }
      expect(task.status, `server-side status ${Date.now() - cancelAcked} ms after the cancel ack`).toBe(
        'cancelled',
      );
      expect(task).not.toHaveProperty('result');
      expect(task).not.toHaveProperty('error');
      // The running attempt is stopped too, and the task stays cancelled.
      while (rt.workers!.running.has(taskId) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(rt.workers!.running.has(taskId)).toBe(false);
      const after = await mcp.getTask(taskId);
      expect(after.status).toBe('cancelled');
      expect(after.statusMessage ?? '').not.toBe('chunk 200/200');
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
    expect(log.validated).toEqual(expect.arrayContaining(['tools/call', 'tasks/get', 'tasks/cancel']));
  });

  it('reports fail_with protocol as a failed task (-32603) and fail_with tool as an isError result', async () => {
    const { session, log, errors } = openSession();
    try {
      const protocol = await session.callTool('fail_with', { kind: 'protocol' });
      expect(protocol.kind).toBe('task');
      const failed = await protocol.settle();
      expect(failed.outcome.status).toBe('failed');
      expect(failed.lastTask?.status).toBe('failed');
      let thrown: unknown;
      try {
        resultFromTaskOutcome(failed.outcome);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(TaskFailedError);
      expect(thrown).toMatchObject({ code: -32603, message: 'Protocol error, as requested' });

      const tool = await session.callTool('fail_with', { kind: 'tool' });
      expect(tool.kind).toBe('task');
      const completed = await tool.settle();
      expect(completed.outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(completed.outcome)).toMatchObject({
        isError: true,
        content: [{ type: 'text', text: 'The tool reported an error, as requested.' }],
      });
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
  });

  it('follows approved_export through its signal wait and its sleeps to the exported result', async () => {
    const { session, log, errors } = openSession();
    try {
      const ex = await session.callTool('approved_export', { batches: 2, pauseMs: 1_500 });
      expect(ex.kind).toBe('task');
      const watch = eventWatcher(15_000);
      const settled = ex.settle({ onEvent: watch.onEvent });
      // The approver, outside the client, POSTs to the link the task shows.
      const waiting = await watch.waitFor(
        (t) => (t.statusMessage ?? '').startsWith('Waiting for approval: POST '),
        'waiting for approval',
      );
      const link = new URL(waiting.statusMessage!.slice('Waiting for approval: POST '.length));
      const approve = await fetch(new URL(link.pathname, rt.url), {
        method: 'POST',
        body: '{"approve":true}',
      });
      expect(approve.status).toBe(202);
      await watch.waitFor(
        (t) => (t.statusMessage ?? '').startsWith('Sleeping until '),
        'asleep between batches',
      );
      const { outcome } = await settled;
      expect(outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(outcome)).toMatchObject({
        structuredContent: { rows: 3_000, batches: 2 },
      });
      // Polled throughout: working the whole time, never input_required.
      expect(new Set(watch.statuses())).toEqual(new Set(['working', 'completed']));
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
  });

  it('follows checksum_shards through its fan-out (k/n items) to the checksums', async () => {
    const { session, log, errors } = openSession();
    try {
      const ex = await session.callTool('checksum_shards', { shards: 40, concurrency: 4, shardMs: 50 });
      expect(ex.kind).toBe('task');
      const watch = eventWatcher(15_000);
      const settled = ex.settle({ onEvent: watch.onEvent });
      await watch.waitFor(
        (t) => /^checksum: \d+\/40 items$/.test(t.statusMessage ?? ''),
        'the map under way',
      );
      const { outcome } = await settled;
      expect(outcome.status).toBe('completed');
      expect(resultFromTaskOutcome(outcome)).toMatchObject({
        content: [{ type: 'text', text: '40 shards checksummed' }],
        structuredContent: { shards: 40 },
      });
      expect(new Set(watch.statuses())).toEqual(new Set(['working', 'completed']));
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
  });

  it('runs export_csv to a resource_link; the SDK Client reads the artifact back with resources/read', async () => {
    const { session, log, errors } = openSession();
    let uri: string;
    try {
      const ex = await session.callTool('export_csv', { megabytes: 2 });
      expect(ex.kind).toBe('task');
      const { outcome } = await ex.settle();
      expect(outcome.status).toBe('completed');
      const result = resultFromTaskOutcome(outcome) as { content: Array<Record<string, unknown>> };
      const link = result.content[1]!;
      expect(link).toMatchObject({
        type: 'resource_link',
        name: 'export.csv',
        mimeType: 'text/csv; charset=utf-8',
      });
      uri = link.uri as string;
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
    const reader = new Client(
      { name: 'e2e-sdk-reader', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
      },
    );
    try {
      await reader.connect(new StreamableHTTPClientTransport(new URL(rt.url)));
      const { resourceTemplates } = await reader.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toContain('tasks://{taskId}/artifacts/{name}');
      const read = await reader.readResource({ uri });
      expect((read.contents[0] as { text: string }).text).toBe(await exportText(2));
    } finally {
      await reader.close();
    }
  });

  it('runs analyze_numbers as a task and returns exactly the expected analysis', async () => {
    const { session, log, errors } = openSession();
    try {
      const ex = await session.callTool('analyze_numbers', { count: 30_000, chunkSize: 10_000 });
      expect(ex.kind).toBe('task');
      const { outcome, lastTask } = await ex.settle();
      expect(outcome.status).toBe('completed');
      expect(lastTask).toMatchObject({
        taskId: ex.handle!.taskId,
        status: 'completed',
        statusMessage: 'chunk 3/3',
      });
      const result = resultFromTaskOutcome(outcome);
      expect(result).toMatchObject({ structuredContent: expectedAnalysis(30_000, 10_000) });
      expect((result as { structuredContent?: unknown }).structuredContent).toEqual(
        expectedAnalysis(30_000, 10_000),
      );
    } finally {
      await session.close();
    }
    expectCleanWire(log, errors);
    expect(log.validated).toEqual(expect.arrayContaining(['tools/list', 'tools/call', 'tasks/get']));
  });
});

/** export_csv's CSV of `megabytes` MiB, as the tool writes it. */
async function exportText(megabytes: number): Promise<string> {
  let text = '';
  for await (const page of exportRows(megabytes)) text += page;
  return text;
}
