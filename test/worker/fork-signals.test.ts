/**
 * A fork of a task that created a signal (`tasks fork --from-step`, and the dashboard's fork), against a
 * real server process, Postgres and pg-boss: the fork's signal is its source's as it stood at the fork
 * point (delivered: the payload replays; timed out: so again; else pending), always under a new token,
 * so the source's token never reaches the fork; a pending one's new URL is what the fork's caller gets.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { runCli } from '../helpers/cli.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const DASHBOARD_TOKEN = 'dashboard-token-for-fork-signals';

/** Each task's runs of the step after the wait (what ran, by task). */
const afterRuns = new Map<string, number>();

/** Creates signal `go`, sends its URL out (a step), waits for it, then runs one more step. */
const gated = defineTool({
  name: 'gated',
  description: 'Waits for signal go, then runs one step.',
  inputSchema: z.object({ timeoutMs: z.number().int().positive().optional() }),
  taskSupport: 'required',
  async handler({ timeoutMs }, ctx) {
    const go = await ctx.createSignal('go', timeoutMs === undefined ? {} : { timeoutMs });
    await ctx.step('announce', () => go.url);
    const outcome = await ctx.waitForSignal(go);
    await ctx.step('after', () => {
      afterRuns.set(ctx.taskId!, (afterRuns.get(ctx.taskId!) ?? 0) + 1);
      return outcome.status;
    });
    return { content: [{ type: 'text', text: outcome.status }], structuredContent: { outcome, url: go.url } };
  },
});

const server = useTestServer({ tools: [gated], env: { DASHBOARD_TOKEN } });

interface CliFork {
  taskId: string;
  signals: { name: string; url: string; timeoutAt: string | null }[];
}

/** `tasks fork --json`, with the server's own origin as PUBLIC_URL (the URL a worker would build). */
async function fork(sourceId: string, fromStep: string): Promise<CliFork> {
  const env = { DATABASE_URL: server.tdb.url, PUBLIC_URL: new URL(server.rt.url).origin };
  const run = await runCli(['tasks', 'fork', sourceId, '--from-step', fromStep, '--json'], { env });
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as CliFork;
}

async function start(args: { timeoutMs?: number } = {}): Promise<{ taskId: string; token: string }> {
  const created = await server.mcp.callTool('gated', args);
  const taskId = created.taskId as string;
  const token = await waitFor(async () => {
    const { rows } = await sql<{ output: { value: { token: string } } }>`
      select output from task_steps where task_id = ${taskId} and name = 'signal:go'`.execute(server.rt.db);
    return rows[0]?.output.value.token;
  });
  return { taskId, token };
}

const waiting = (taskId: string) =>
  server.mcp.waitForTask(taskId, (t) => t.statusMessage === 'Waiting for signal go');

const signalUrl = (token: string) => new URL(`/signals/${token}`, server.rt.url).href;

const deliver = (url: string, payload: unknown) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });

async function signalRow(taskId: string) {
  const { rows } = await sql<{ delivered_at: Date | null; payload: unknown; timeout_at: Date | null }>`
    select delivered_at, payload, timeout_at from task_signals where task_id = ${taskId} and name = 'go'`.execute(
    server.rt.db,
  );
  return rows[0];
}

describe('a fork of a task that created a signal', () => {
  it('delivered before the fork point: the fork replays the payload, with no new delivery', async () => {
    const source = await start();
    await waiting(source.taskId);
    expect((await deliver(signalUrl(source.token), { by: 'carol' })).status).toBe(202);
    const done = await server.mcp.waitForTask(source.taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'delivered', payload: { by: 'carol' } });

    const forked = await fork(source.taskId, 'after');
    expect(forked.signals).toEqual([]);
    const result = await server.mcp.waitForTask(forked.taskId);
    expect(result.status).toBe('completed');
    expect(result.result.structuredContent.outcome).toEqual({
      status: 'delivered',
      payload: { by: 'carol' },
    });
    expect(afterRuns.get(forked.taskId)).toBe(1);
    // Its copied handle names a token of its own: not the source's.
    expect(result.result.structuredContent.url).not.toBe(done.result.structuredContent.url);
    expect(await signalRow(forked.taskId)).toMatchObject({ payload: { value: { by: 'carol' } } });
  });

  it('pending at the fork point (the source was cancelled while waiting): the fork waits for its new URL only', async () => {
    const source = await start();
    await waiting(source.taskId);
    await server.mcp.result('tasks/cancel', { taskId: source.taskId });
    expect(await server.mcp.getTask(source.taskId)).toMatchObject({ status: 'cancelled' });

    const forked = await fork(source.taskId, 'announce');
    expect(forked.signals).toEqual([{ name: 'go', url: expect.any(String), timeoutAt: null }]);
    const url = forked.signals[0]!.url;
    expect(url).toMatch(new RegExp(`^${new URL(server.rt.url).origin}/signals/[A-Za-z0-9_-]{32}$`));
    expect(url).not.toBe(signalUrl(source.token));
    await waiting(forked.taskId);

    // The source's token is refused as before, and wakes nothing.
    const old = await deliver(signalUrl(source.token), 'from the old link');
    expect(old.status).toBe(409);
    expect(await signalRow(forked.taskId)).toMatchObject({ delivered_at: null });
    expect(await server.mcp.getTask(forked.taskId)).toMatchObject({ status: 'working' });

    expect((await deliver(url, { by: 'dave' })).status).toBe(202);
    const result = await server.mcp.waitForTask(forked.taskId);
    expect(result.status).toBe('completed');
    expect(result.result.structuredContent).toEqual({
      outcome: { status: 'delivered', payload: { by: 'dave' } },
      url,
    });
  });

  it('timed out: before the fork point it times out in the fork too; after it, the fork waits its whole timeout again', async () => {
    const source = await start({ timeoutMs: 300 });
    const done = await server.mcp.waitForTask(source.taskId);
    expect(done.result.structuredContent.outcome).toEqual({ status: 'timed_out' });

    const replayed = await fork(source.taskId, 'after');
    expect(replayed.signals).toEqual([]);
    const replayedResult = await server.mcp.waitForTask(replayed.taskId);
    expect(replayedResult.result.structuredContent.outcome).toEqual({ status: 'timed_out' });

    const before = new Date();
    const again = await fork(source.taskId, 'announce');
    expect(again.signals).toEqual([{ name: 'go', url: expect.any(String), timeoutAt: expect.any(String) }]);
    // The source's 300 ms, counted from the fork (by the database's clock: within this test's span).
    const timeoutAt = new Date(again.signals[0]!.timeoutAt!);
    expect((await signalRow(again.taskId))!.timeout_at).toEqual(timeoutAt);
    expect(timeoutAt.getTime()).toBeGreaterThan(before.getTime());
    expect(timeoutAt.getTime()).toBeLessThanOrEqual(Date.now() + 300);
    const result = await server.mcp.waitForTask(again.taskId);
    expect(result.result.structuredContent.outcome).toEqual({ status: 'timed_out' });
    expect(afterRuns.get(again.taskId)).toBe(1);
  });

  it("the dashboard's fork shows the new signal URL, which wakes the fork", async () => {
    const source = await start();
    await waiting(source.taskId);
    await server.mcp.result('tasks/cancel', { taskId: source.taskId });

    const origin = new URL(server.rt.url).origin;
    const login = await fetch(`${origin}/dashboard/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: DASHBOARD_TOKEN, operator: 'erin' }),
      redirect: 'manual',
    });
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    const confirm = await (
      await fetch(`${origin}/dashboard/tasks/${source.taskId}/fork`, { headers: { cookie } })
    ).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(confirm)![1]!;
    const forked = await fetch(`${origin}/dashboard/tasks/${source.taskId}/fork`, {
      method: 'POST',
      headers: { cookie, origin },
      body: new URLSearchParams({ csrf, fromStep: 'announce' }),
      redirect: 'manual',
    });
    expect(forked.status).toBe(200);
    const page = await forked.text();
    const url = /<code class="signal-url">([^<]+)<\/code>/.exec(page)![1]!;
    const forkId = /href="\/dashboard\/tasks\/([^"/]+)"/.exec(page)![1]!;
    expect(url).toMatch(new RegExp(`^${origin}/signals/[A-Za-z0-9_-]{32}$`));
    expect(url).not.toBe(signalUrl(source.token));

    await waiting(forkId);
    expect((await deliver(url, 'approved')).status).toBe(202);
    const result = await server.mcp.waitForTask(forkId);
    expect(result.result.structuredContent).toEqual({
      outcome: { status: 'delivered', payload: 'approved' },
      url,
    });
  });
});
