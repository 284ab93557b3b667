// CANCEL_GRACE_MS: a handler that ignores ctx.signal no longer keeps its cancelled task `working`. Past the
// grace the task is `cancelled` (a lease of ten minutes rules the lease path out), whatever the handler
// returns later is discarded, and its leg keeps its slot, counted as stuck, until the handler returns.
import { sql } from 'kysely';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CANCEL_TOOLS, handlerEvents, release } from '../helpers/cancel-tools.ts';
import { launchChromium, signedInPage, textOf } from '../helpers/dashboard-browser.ts';
import { sample, scrape } from '../helpers/prometheus.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const TOOL = 'ignores_cancel';
const TOKEN = 'cancel-grace-dashboard-token';

describe('a running handler that ignores its cancel', () => {
  const server = useTestServer({
    tools: CANCEL_TOOLS,
    env: {
      WORKER_CONCURRENCY: '1',
      WORKER_RESERVED_SLOTS: '0',
      LEASE_MS: '600000',
      CANCEL_GRACE_MS: '500',
      DASHBOARD_TOKEN: TOKEN,
    },
  });
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  // (A failed test must not leave its handler holding the one slot for the next.)
  afterEach(() => release('stuck'));
  const metrics = async () => scrape(new URL(server.rt.url).origin);
  const gauge = async (name: string) => sample(await metrics(), name) ?? 0;
  const finished = async (status: string) =>
    sample(await metrics(), 'durable_mcp_tasks_finished_total', { tool: TOOL, status }) ?? 0;
  const storedTask = (taskId: string) =>
    server.tdb.db
      .selectFrom('tasks')
      .select(['status', 'result', 'status_message', 'leased_by'])
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
  const storedAttempt = (taskId: string) =>
    server.tdb.db
      .selectFrom('task_attempts')
      .select(['outcome', 'error_message', 'ended_at', 'stuck_since'])
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
  /** The dashboard as an operator reads it in Chromium: the overview's stuck-legs card, the task's attempts. */
  const dashboardAttempts = async (taskId: string) => {
    const page = await signedInPage(browser, new URL(server.rt.url).origin, TOKEN);
    try {
      const stuckCard = await textOf(page, '.card.queue[title*="cancel grace"] .n');
      await page.goto(`${new URL(server.rt.url).origin}/dashboard/tasks/${taskId}`);
      return { attempts: await textOf(page, 'table.attempts'), stuckCard };
    } finally {
      await page.context().close();
    }
  };

  it('ends cancelled after the grace while the handler still runs, and counts it once', async () => {
    const { mcp } = server;
    const cancelledBefore = await finished('cancelled');
    const { taskId } = await mcp.callTool(TOOL, { seconds: 60, tag: 'stuck' });
    await waitFor(() => handlerEvents.includes('stuck:started'), { what: 'the handler starting' });

    await mcp.result('tasks/cancel', { taskId });
    const task = await mcp.waitForTask(taskId as string, (t) => t.status !== 'working', 20_000);
    expect(task.status).toBe('cancelled');
    expect(task.statusMessage).toBe('Cancelled by request');
    expect(handlerEvents).not.toContain('stuck:returned');
    expect(await storedTask(taskId as string)).toMatchObject({ status: 'cancelled', leased_by: null });
    expect(await finished('cancelled')).toBe(cancelledBefore + 1);
    await waitFor(async () => (await gauge('durable_mcp_worker_stuck_legs')) === 1, {
      what: 'one stuck leg',
    });
    // Its attempt says how it ended and that its leg is stuck; so does the dashboard, in Chromium.
    expect(await storedAttempt(taskId as string)).toMatchObject({ outcome: 'cancelled' });
    expect((await storedAttempt(taskId as string)).error_message).toMatch(/had not returned 500 ms after/);
    expect((await storedAttempt(taskId as string)).stuck_since).toBeInstanceOf(Date);
    const seen = await dashboardAttempts(taskId as string);
    expect(seen.attempts).toMatch(/cancelled stuck leg since/);
    expect(seen.attempts).toMatch(/had not returned 500 ms after its cancel signal/);
    expect(seen.stuckCard).toBe('1');

    // Its slot stays taken: the next task waits in the queue until the handler returns.
    const next = await mcp.callTool('honours_cancel', { seconds: 0, tag: 'next' });
    await waitFor(async () => (await gauge('durable_mcp_queue_runs_waiting')) === 1, {
      what: 'the next run waiting in the queue',
    });
    expect(await gauge('durable_mcp_worker_slots_busy')).toBe(1);
    expect(handlerEvents).not.toContain('next:started');

    release('stuck');
    expect((await mcp.waitForTask(next.taskId as string)).status).toBe('completed');
    expect(handlerEvents.indexOf('stuck:returned')).toBeGreaterThan(-1);
    expect(handlerEvents.indexOf('stuck:returned')).toBeLessThan(handlerEvents.indexOf('next:started'));
    await waitFor(async () => (await gauge('durable_mcp_worker_stuck_legs')) === 0, {
      what: 'no stuck leg once the handler returned',
    });
    await waitFor(async () => (await storedAttempt(taskId as string)).stuck_since === null, {
      what: 'its attempt no longer marked stuck',
    });
    expect(await storedAttempt(taskId as string)).toMatchObject({ outcome: 'cancelled' });

    // The late result was discarded by the attempt's fence, and not counted a second time.
    expect(await storedTask(taskId as string)).toMatchObject({
      status: 'cancelled',
      result: null,
      status_message: 'Cancelled by request',
    });
    expect((await mcp.getTask(taskId as string)).status).toBe('cancelled');
    expect(await finished('cancelled')).toBe(cancelledBefore + 1);
    expect(await finished('completed')).toBe(0);
  });

  it('a stuck mark its worker stopped renewing (the worker died) is no longer shown', async () => {
    const { mcp } = server;
    const { taskId } = await mcp.callTool(TOOL, { seconds: 0, tag: 'quick' });
    expect((await mcp.waitForTask(taskId as string)).status).toBe('completed');
    // As a worker that died with the leg stuck leaves it: marked, and no longer renewed.
    const markStuck = (seenAgo: string) =>
      sql`update task_attempts set stuck_since = now() - interval '5 minutes',
            stuck_seen_at = now() - ${seenAgo}::interval
          where task_id = ${taskId}`.execute(server.tdb.db);
    await markStuck('2 minutes');
    const stale = await dashboardAttempts(taskId as string);
    expect(stale.stuckCard).toBe('0');
    expect(stale.attempts).not.toMatch(/stuck leg/);
    // Renewed lately, the same mark counts (the worker renews every 10 s, and a minute without is stale).
    await markStuck('5 seconds');
    const live = await dashboardAttempts(taskId as string);
    expect(live.stuckCard).toBe('1');
    expect(live.attempts).toMatch(/completed stuck leg since/);
    await sql`update task_attempts set stuck_since = null, stuck_seen_at = null where task_id = ${taskId}`.execute(
      server.tdb.db,
    );
  });

  it('a handler that honours its signal ends cancelled by its own leg, with no stuck leg', async () => {
    const { mcp } = server;
    const { taskId } = await mcp.callTool('honours_cancel', { seconds: 60, tag: 'polite' });
    await waitFor(() => handlerEvents.includes('polite:started'), { what: 'the handler starting' });
    await mcp.result('tasks/cancel', { taskId });
    expect((await mcp.waitForTask(taskId as string)).status).toBe('cancelled');
    expect(await gauge('durable_mcp_worker_stuck_legs')).toBe(0);
    expect(await gauge('durable_mcp_worker_slots_busy')).toBe(0);
  });
});
