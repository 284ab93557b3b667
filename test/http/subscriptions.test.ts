import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServerEvents } from '../../src/events/server-events.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { createTestDatabase, insertTestTask, type TestDatabase } from '../helpers/db.ts';
import { databaseEnv } from '../helpers/database-env.ts';
import { listen, RawMcp } from '../helpers/mcp.ts';
import { FAST_ENV, startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
let mcp: RawMcp;

beforeAll(async () => {
  tdb = await createTestDatabase();
  // HTTP only: every task here runs in a worker process started by the test.
  rt = await startTestProcess({ databaseUrl: tdb.url, role: 'server', env: { SSE_KEEPALIVE_MS: '100' } });
  mcp = new RawMcp(rt.url);
});
afterAll(async () => {
  await rt?.stop();
  await tdb?.drop();
});

const SUB = 'io.modelcontextprotocol/subscriptionId';

function startWorkerProcess(): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...FAST_ENV, ...databaseEnv(tdb.url), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited };
}

describe('subscriptions/listen', () => {
  it('needs the tasks extension for task notifications (-32021, before any stream opens)', async () => {
    const error = await mcp.error(
      'subscriptions/listen',
      { notifications: { taskIds: ['x'] } },
      { caps: {} },
    );
    expect(error).toMatchObject({
      status: 400,
      code: -32021,
      data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
    });
  });

  it('acknowledges first, with only the principal’s own existing tasks, then sends keep-alives', async () => {
    const own = await mcp.callTool('confirm_action', { action: 'listen' });
    const foreign = await insertTestTask(tdb.db, { principal: 'somebody-else', toolName: 'echo' });
    const stream = await listen(
      rt.url,
      {
        taskIds: [own.taskId, foreign, 'no-such-task'],
        toolsListChanged: true,
        promptsListChanged: true,
      },
      { id: 'sub-1' },
    );
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');
    const ack = await stream.next();
    expect(ack).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      // No prompts are registered, so promptsListChanged is not honoured.
      params: { _meta: { [SUB]: 'sub-1' }, notifications: { toolsListChanged: true, taskIds: [own.taskId] } },
    });
    const snapshot = await stream.next();
    expect(snapshot).toMatchObject({
      method: 'notifications/tasks',
      params: { taskId: own.taskId, _meta: { [SUB]: 'sub-1' } },
    });
    // Keep-alives every 100 ms (SSE_KEEPALIVE_MS): two of them, after the snapshot.
    await waitFor(() => stream.comments >= 2, { what: 'two keep-alive comments' });
    // The foreign task never shows up.
    expect(stream.messages.filter((m) => m.params?.taskId === foreign)).toEqual([]);
    stream.close();
    await mcp.result('tasks/cancel', { taskId: own.taskId });
  });

  it('delivers every change a worker in another process makes, as the full DetailedTask', async () => {
    const created = await mcp.callTool('confirm_action', { action: 'watch me' });
    const stream = await listen(rt.url, { taskIds: [created.taskId] }, { id: 42 });
    expect((await stream.next()).method).toBe('notifications/subscriptions/acknowledged');
    const worker = startWorkerProcess();
    try {
      const seen: Array<Record<string, any>> = [];
      const until = async (status: string) => {
        for (;;) {
          const m = await stream.next(20_000);
          expect(m.method).toBe('notifications/tasks');
          expect(m.params._meta).toEqual({ [SUB]: 42 });
          seen.push(m.params);
          if (m.params.status === status) return m.params;
        }
      };
      const waiting = await until('input_required');
      expect(waiting.inputRequests.confirm.method).toBe('elicitation/create');
      await mcp.result('tasks/update', {
        taskId: created.taskId,
        inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
      });
      const done = await until('completed');
      const { _meta: _notificationMeta, ...detailed } = done;
      const { _meta: _resultMeta, resultType, ...polled } = await mcp.getTask(created.taskId);
      expect(resultType).toBe('complete');
      expect(detailed).toEqual(polled);
      expect(detailed.result.content[0].text).toBe('confirmed: watch me');
      // Only what was asked for: no progress, no log messages, nothing but task notifications.
      expect(new Set(stream.messages.map((m) => m.method))).toEqual(
        new Set(['notifications/subscriptions/acknowledged', 'notifications/tasks']),
      );
    } finally {
      stream.close();
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
  });

  it('reaches listeners on another instance with list changes', async () => {
    const other = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    try {
      const stream = await listen(rt.url, { toolsListChanged: true }, { id: 7 });
      await stream.next();
      await new RawMcp(other.url).result('server/discover');
      // A tool on the other instance announces a change (ctx.events.listChanged in a handler).
      await createServerEvents(other.db).listChanged('tools');
      expect(await stream.next()).toEqual({
        jsonrpc: '2.0',
        method: 'notifications/tools/list_changed',
        params: { _meta: { [SUB]: 7 } },
      });
      stream.close();
    } finally {
      await other.stop();
    }
  });

  it('ends open streams with the graceful result when the server shuts down', async () => {
    const other = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    const stream = await listen(other.url, { toolsListChanged: true }, { id: 'bye' });
    await stream.next();
    await other.stop();
    await stream.ended;
    expect(stream.messages.at(-1)).toEqual({
      jsonrpc: '2.0',
      id: 'bye',
      result: {
        resultType: 'complete',
        _meta: {
          [SUB]: 'bye',
          'io.modelcontextprotocol/serverInfo': { name: 'durable-mcp-tasks', version: '0.1.0' },
        },
      },
    });
  });
});
