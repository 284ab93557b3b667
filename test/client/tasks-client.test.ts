// `durable-mcp-tasks/client` against two 2026-07-28 Tasks servers: ours, and an independent one built on
// @modelcontextprotocol/server 2.x (test/helpers/independent-tasks-server.ts), so that the client is not
// tuned to ours. Real HTTP sockets, real Postgres and workers behind ours, task ids kept in files.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FileTaskStore,
  MemoryTaskStore,
  TasksClient,
  type InputHandler,
  type TaskRecord,
  type ToolOutcome,
} from '../../src/client/index.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { startIndependentTasksServer } from '../helpers/independent-tasks-server.ts';
import { useTestServer } from '../helpers/server-process.ts';

/** What each server's tools are called to run a slow task and a task that asks for input. */
interface ServerCase {
  name: string;
  url: () => string;
  slow: { tool: string; args: Record<string, unknown>; check: (outcome: ToolOutcome) => void };
  asking: { tool: string; args: Record<string, unknown>; answer: InputHandler; text: string };
  failing?: { tool: string; args: Record<string, unknown> };
  /** Whether it serves `notifications/tasks` on `subscriptions/listen`. */
  listens: boolean;
}

const textOf = (outcome: ToolOutcome) => (outcome.result?.content as Array<{ text: string }>)[0]!.text;

const ours = useTestServer();
let independent: { url: string; close(): Promise<void> };
beforeAll(async () => {
  independent = await startIndependentTasksServer();
});
afterAll(async () => {
  await independent?.close();
});

const accept =
  (content: Record<string, unknown>): InputHandler =>
  async (requests) =>
    Object.fromEntries(Object.keys(requests).map((key) => [key, { action: 'accept', content }]));

const CASES: ServerCase[] = [
  {
    name: 'ours',
    url: () => ours.rt.url,
    slow: {
      tool: 'analyze_numbers',
      args: { count: 300_000, chunkSize: 100_000, delayMsPerChunk: 300 },
      check: (o) => expect(o.result?.structuredContent).toEqual(expectedAnalysis(300_000, 100_000)),
    },
    asking: {
      tool: 'confirm_action',
      args: { action: 'restart' },
      answer: accept({ confirm: true }),
      text: 'confirmed: restart',
    },
    listens: true,
  },
  {
    name: 'independent (@modelcontextprotocol/server 2.x)',
    url: () => independent.url,
    slow: {
      tool: 'slow_count',
      args: { steps: 8 },
      check: (o) => expect(textOf(o)).toBe('counted to 8'),
    },
    asking: { tool: 'ask_name', args: {}, answer: accept({ name: 'Ada' }), text: 'hello Ada' },
    failing: { tool: 'always_fails', args: {} },
    listens: false,
  },
];

describe.each(CASES)('TasksClient against $name', (server) => {
  const stateDir = () => mkdtempSync(path.join(tmpdir(), 'client-state-'));

  it('records a task before it waits, follows it to its result, and marks it shown', async () => {
    const dir = stateDir();
    const client = new TasksClient({ url: server.url(), store: new FileTaskStore(dir) });
    let recorded: TaskRecord | undefined;
    const statuses: string[] = [];
    const outcome = await client.callTool(server.slow.tool, server.slow.args, {
      onTask: (record) => void (recorded = record),
      onStatus: (task) => statuses.push(task.status),
    });
    expect(outcome.status).toBe('completed');
    server.slow.check(outcome);
    expect(recorded?.taskId).toBe(outcome.taskId);
    expect(statuses.at(-1)).toBe('completed');
    const [kept] = await new FileTaskStore(dir).list(server.url());
    expect(kept).toMatchObject({ taskId: outcome.taskId, tool: server.slow.tool, status: 'completed' });
    expect(kept?.shownAt).toEqual(expect.any(String));
    expect(await client.pending()).toEqual([]);
  });

  it('resumes three tasks after a simulated host restart, answering the one that waits for input', async () => {
    const dir = stateDir();
    const before = new TasksClient({ url: server.url(), store: new FileTaskStore(dir) });
    const started: string[] = [];
    const calls = [server.slow, server.asking, server.slow].map(async ({ tool, args }) => {
      // The host goes away as soon as each task exists: its call stops following it.
      const host = new AbortController();
      await expect(
        before.callTool(tool, args, {
          signal: host.signal,
          onTask: (record) => {
            started.push(record.taskId);
            host.abort();
          },
        }),
      ).rejects.toThrow();
    });
    await Promise.all(calls);
    expect(started).toHaveLength(3);

    const after = new TasksClient({ url: server.url(), store: new FileTaskStore(dir) });
    const pending = await after.pending();
    expect(pending.map((r) => r.taskId).sort()).toEqual([...started].sort());
    const outcomes = await Promise.all(
      pending.map((r) => after.resume(r.taskId, { onInput: server.asking.answer })),
    );
    expect(
      outcomes.map((o) => o.status),
      JSON.stringify(outcomes),
    ).toEqual(['completed', 'completed', 'completed']);
    const byTool = new Map(pending.map((r, i) => [r.tool, outcomes[i]!]));
    server.slow.check(byTool.get(server.slow.tool)!);
    expect(textOf(byTool.get(server.asking.tool)!)).toBe(server.asking.text);
    expect(await after.pending()).toEqual([]);
  });

  it('follows a task by notifications when the server offers subscriptions/listen, by polling otherwise', async () => {
    const sent: string[] = [];
    const counting: typeof fetch = async (input, init) => {
      sent.push((JSON.parse(init?.body as string) as { method: string }).method);
      return fetch(input, init);
    };
    const listening = new TasksClient({ url: server.url(), fetch: counting });
    server.slow.check(await listening.callTool(server.slow.tool, server.slow.args));
    const polls = sent.filter((m) => m === 'tasks/get').length;
    // The client always asks; a server that does not listen refuses, and the client polls.
    expect(sent).toContain('subscriptions/listen');
    // Notifications carry the task: a poll is only the backstop.
    if (server.listens) expect(polls).toBeLessThanOrEqual(3);
    sent.length = 0;
    const polling = new TasksClient({ url: server.url(), fetch: counting });
    server.slow.check(await polling.callTool(server.slow.tool, server.slow.args, { listen: false }));
    expect(sent).not.toContain('subscriptions/listen');
    if (server.listens) expect(sent.filter((m) => m === 'tasks/get').length).toBeGreaterThan(polls);
  });

  it.runIf(server.failing !== undefined)(
    'a failed task is an outcome with its error, not a throw',
    async () => {
      const client = new TasksClient({ url: server.url() });
      const outcome = await client.callTool(server.failing!.tool, server.failing!.args);
      expect(outcome.status).toBe('failed');
      expect(outcome.error).toMatchObject({ code: expect.any(Number), message: expect.any(String) });
    },
  );
});

describe('task records', () => {
  it('are dropped once shown and past their TTL; unshown ones stay whatever their age', async () => {
    const store = new MemoryTaskStore();
    const client = new TasksClient({ url: 'http://127.0.0.1:1/mcp', store });
    const record = (taskId: string, shownAt?: string): TaskRecord => ({
      taskId,
      serverUrl: client.url,
      tool: 't',
      argumentsSummary: '{}',
      createdAt: '2026-12-01T00:00:00.000Z',
      status: shownAt === undefined ? 'working' : 'completed',
      checkedAt: '2026-12-01T00:00:00.000Z',
      ttlMs: 3_600_000,
      answeredKeys: [],
      ...(shownAt === undefined ? {} : { shownAt }),
    });
    await store.save(record('shown', '2026-12-01T00:10:00.000Z'));
    await store.save(record('unshown'));
    expect(await client.prune(Date.parse('2026-12-01T00:30:00.000Z'))).toBe(0);
    expect(await client.prune(Date.parse('2026-12-01T01:00:01.000Z'))).toBe(1);
    expect((await store.list()).map((r) => r.taskId)).toEqual(['unshown']);
  });
});
