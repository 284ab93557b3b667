// What the dashboard tells an operator about one task, and what an operator does from it, in a real
// headless Chromium against a real server with its workers: a task's arguments with its secrets
// redacted, a pending question, each attempt's outcome, error and stack excerpt, fifty steps as one row;
// a paused task resumed and a finished one forked, each through a confirmation page and each in the
// audit trail with who did it. Everything an operator or a client wrote is shown as text. Over plain
// HTTP: the forms' checks, the refusals, the sign-in's name and the bearer token's actor.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';
import { launchChromium, signedInPage, textOf } from '../helpers/dashboard-browser.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'dashboard-token-for-operator-tests';
const SHOTS = path.resolve(import.meta.dirname, '../../test-output/dashboard');
/** Markup where text belongs: a page must show it as these characters, never as elements. */
const MARKUP = `<img src=x onerror="alert(1)"><script>alert('x')</script>`;

const secretArgs = defineTool({
  name: 'secret_args',
  description: 'Takes an API key and row tokens its operators must not see (test tool).',
  inputSchema: z.object({
    apiKey: z.string(),
    rows: z.array(z.object({ token: z.string(), n: z.number() })),
    padding: z.string(),
  }),
  taskSupport: 'required',
  secretArguments: ['apiKey', 'rows.*.token'],
  handler: () => ({ content: [{ type: 'text', text: 'ok' }] }),
});

/** How often each label's handler ran (this file's runtime runs its workers in this process). */
const crashes = new Map<string, number>();
const alwaysCrashes = defineTool({
  name: 'always_crashes',
  description: 'Throws on every attempt, saying which (test tool).',
  inputSchema: z.object({ label: z.string() }),
  taskSupport: 'required',
  retry: { maxAttempts: 3, backoff: { initialMs: 0 } },
  handler({ label }) {
    const n = (crashes.get(label) ?? 0) + 1;
    crashes.set(label, n);
    throw new Error(`boom ${n}: ${label}`);
  },
});

/** Downstreams that are up: a task calling one that is down pauses when its attempts run out. */
const downstreamUp = new Set<string>();
const needsDownstream = defineTool({
  name: 'needs_downstream',
  description: 'Two steps; the second calls a downstream that may be down. Pauses (test tool).',
  inputSchema: z.object({ downstream: z.string() }),
  taskSupport: 'required',
  retry: { maxAttempts: 2, backoff: { initialMs: 0 }, onExhausted: 'pause' },
  async handler({ downstream }, ctx) {
    await ctx.step('prepare', () => 1);
    await ctx.step('call', () => {
      if (!downstreamUp.has(downstream)) throw new Error(`downstream ${downstream} unavailable`);
      return 2;
    });
    return { content: [{ type: 'text', text: `${downstream} called` }] };
  },
});

const server = useTestServer({
  tools: [...SHIPPED_TOOLS, secretArgs, alwaysCrashes, needsDownstream],
  env: { DASHBOARD_TOKEN: TOKEN, CANCEL_CHECK_INTERVAL_MS: '200' },
});
let browser: Browser | undefined;
let origin: string;

beforeAll(async () => {
  origin = new URL(server.rt.url).origin;
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

const signIn = (name?: string) => signedInPage(browser!, origin, TOKEN, name);
const taskUrl = (taskId: string, action = '') => `${origin}/dashboard/tasks/${taskId}${action}`;

async function started(tool: string, args: Record<string, unknown>): Promise<string> {
  return (await server.mcp.callTool(tool, args)).taskId as string;
}

/** Nothing a client or an operator wrote became an element of the page. */
async function expectNoMarkup(page: Page) {
  expect(await page.$$('main script, main img, [onerror]')).toHaveLength(0);
}

describe("a task's page answers why", () => {
  it('shows its arguments with the secret fields redacted, cut at 16 KiB with the full size', async () => {
    const taskId = await started('secret_args', {
      apiKey: 'sk-live-TOPSECRET',
      rows: [
        { token: 'row-token-ONE', n: 1 },
        { token: 'row-token-TWO', n: 2 },
      ],
      padding: 'p'.repeat(20_000),
    });
    await server.mcp.waitForTask(taskId);
    const page = await signIn();
    await page.goto(taskUrl(taskId));
    const shown = (await page.textContent('pre.arguments'))!;
    // jsonb orders keys by length: rows, then apiKey, then the long padding, which is cut.
    expect(shown).toContain('"apiKey": "[redacted]"');
    expect(shown.match(/"token": "\[redacted\]"/g)).toHaveLength(2);
    expect(shown).toContain('"n": 2');
    const size = /\n… \((\d+) bytes\)$/.exec(shown);
    expect(size, shown.slice(-80)).not.toBeNull();
    expect(Number(size![1])).toBeGreaterThan(20_000);
    expect(Buffer.byteLength(shown)).toBeLessThan(16 * 1024 + 40);
    // The secrets are nowhere in what the browser got.
    const source = await page.content();
    for (const secret of ['sk-live-TOPSECRET', 'row-token-ONE', 'row-token-TWO'])
      expect(source).not.toContain(secret);
    await page.context().close();
  });

  it('shows a pending question first, as text', async () => {
    const taskId = await started('confirm_action', { action: MARKUP });
    await server.mcp.waitForTask(taskId, (t) => t.status === 'input_required');
    const page = await signIn();
    await page.goto(taskUrl(taskId));
    expect(await textOf(page, 'section.waiting')).toContain(
      `Waiting for input: Do you confirm this action: ${MARKUP}?`,
    );
    expect(await textOf(page, 'ol.timeline')).toContain(
      `Asked for input confirm (elicitation/create): Do you confirm this action: ${MARKUP}?`,
    );
    await expectNoMarkup(page);
    await page.screenshot({ path: path.join(SHOTS, '9-task-waiting.png'), fullPage: true });
    await page.context().close();
  });

  it("lists a failed task's attempts: each outcome and error message, the stack excerpt behind <details>", async () => {
    const taskId = await started('always_crashes', { label: MARKUP });
    expect((await server.mcp.waitForTask(taskId)).status).toBe('failed');
    const page = await signIn();
    await page.goto(taskUrl(taskId));
    const rows = page.locator('table.attempts tbody tr');
    expect(await rows.count()).toBe(3);
    const cells = async (n: number) =>
      (await rows.nth(n).locator('td').allTextContents()).map((t) => t.trim());
    for (const [i, outcome] of (['crash_retry', 'crash_retry', 'failed'] as const).entries()) {
      const [attempt, , , ended, shownOutcome, error] = await cells(i);
      expect(attempt).toBe(String(i + 1));
      expect(ended).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
      expect(shownOutcome).toBe(outcome);
      expect(error).toContain(`Error: boom ${i + 1}: ${MARKUP}`);
    }
    // The stack excerpt is there, closed until asked for.
    const stack = rows.nth(2).locator('details.stack');
    expect(await stack.getAttribute('open')).toBeNull();
    expect(await stack.locator('pre').isVisible()).toBe(false);
    await stack.locator('summary').click();
    expect(await stack.getAttribute('open')).toBe('');
    expect(await stack.locator('pre').isVisible()).toBe(true);
    expect(await stack.locator('pre').textContent()).toMatch(/^\s*at /);
    expect(await textOf(page, 'ol.timeline')).toContain(`Attempt 3 ended failed: Error: boom 3: ${MARKUP}`);
    await expectNoMarkup(page);
    await page.screenshot({ path: path.join(SHOTS, '10-task-attempts.png'), fullPage: true });
    await page.context().close();
  });

  it('collapses fifty chunk steps into one row with their count, which opens onto each', async () => {
    const taskId = await started('analyze_numbers', { count: 50_000, chunkSize: 1000 });
    await server.mcp.waitForTask(taskId);
    const history = (await adminGetTask(server.rt.db, taskId))!;
    const page = await signIn();
    await page.goto(taskUrl(taskId));
    expect(await page.locator('ol.timeline > li').count()).toBeLessThan(8);
    const steps = page.locator('ol.timeline details.steps');
    expect(await steps.count()).toBe(1);
    const iso = (d: Date) =>
      d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z');
    expect(await textOf(page, 'ol.timeline details.steps summary')).toBe(
      `Steps chunk-* ×50 done (first at ${iso(history.steps[0]!.at)}, last at ${iso(history.steps.at(-1)!.at)}, attempt 1)`,
    );
    expect(await steps.locator('li').first().isVisible()).toBe(false);
    await steps.locator('summary').click();
    const names = await steps.locator('li code').allTextContents();
    expect(names).toEqual(Array.from({ length: 50 }, (_, i) => `chunk-${i + 1}`));
    expect(await steps.locator('li').first().isVisible()).toBe(true);
    await page.context().close();
  });
});

describe("an operator's actions, each confirmed first and recorded with who took it", () => {
  it('resumes a paused task: a Paused badge and filter, a confirmation page, then it runs again', async () => {
    const taskId = await started('needs_downstream', { downstream: 'billing' });
    await waitFor(async () => (await adminGetTask(server.rt.db, taskId))?.task.pausedAt != null, {
      what: `task ${taskId} paused`,
      timeoutMs: 20_000,
    });
    const page = await signIn('bob');

    // The list's paused filter shows it, with its badge.
    await page.check('input[name=status][value=paused]');
    await page.click('form.filters button');
    const listed = page.locator('table.tasks tbody tr[data-task-id]');
    expect(await listed.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-task-id')))).toEqual([
      taskId,
    ]);
    expect(await listed.locator('.badge').allTextContents()).toEqual(['working', 'paused']);

    await page.click(`a[href="/dashboard/tasks/${taskId}"]`);
    expect(await page.locator('h1 .badge').allTextContents()).toEqual(['working', 'paused']);
    expect(await textOf(page, 'section.paused')).toMatch(/^Paused since .*Paused: failed after 2 attempts/);
    expect(await textOf(page, 'table.attempts')).toContain('Error: downstream billing unavailable');
    await page.screenshot({ path: path.join(SHOTS, '11-task-paused.png'), fullPage: true });

    // The button leads to a confirmation page; that page changes nothing.
    await page.click('a.button.primary:text("Resume")');
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${taskId}/resume`);
    expect(await textOf(page, 'section.confirm h1')).toBe(`Resume task ${taskId} (needs_downstream, local)?`);
    expect((await adminGetTask(server.rt.db, taskId))!.task.pausedAt).not.toBeNull();

    downstreamUp.add('billing');
    await page.click('form.confirm button');
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${taskId}`);
    expect(await textOf(page, 'ol.timeline')).toContain('Resumed by dashboard:bob');
    // Running again, the page refreshes itself until the task completes.
    await page.locator('h1 .badge', { hasText: /^completed$/ }).waitFor({ timeout: 20_000 });
    expect((await server.mcp.getTask(taskId)).status).toBe('completed');
    const { actions } = (await adminGetTask(server.rt.db, taskId))!;
    expect(actions.map((a) => [a.action, a.actor])).toEqual([['resume', 'dashboard:bob']]);
    await page.context().close();
  });

  it('forks a finished task from a chosen step: the new task says where it came from, and completes the same', async () => {
    const sourceId = await started('analyze_numbers', { count: 5_000, chunkSize: 1000 });
    const source = await server.mcp.waitForTask(sourceId);
    const page = await signIn('carol');
    await page.goto(taskUrl(sourceId));
    await page.click('a.button:text("Fork")');
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${sourceId}/fork`);
    expect(await page.locator('select[name=fromStep] option').allTextContents()).toEqual([
      'from the start',
      ...[1, 2, 3, 4, 5].map((k) => `from step chunk-${k}`),
    ]);
    await page.selectOption('select[name=fromStep]', 'chunk-4');
    await page.screenshot({ path: path.join(SHOTS, '12-confirm-fork.png'), fullPage: true });
    await page.click('form.confirm button');

    // The new task's page: forked from the source, from chunk-4; the three steps before it copied.
    const forkId = /\/dashboard\/tasks\/([^/]+)$/.exec(new URL(page.url()).pathname)![1]!;
    expect(forkId).not.toBe(sourceId);
    expect(await textOf(page, 'ol.timeline')).toContain(
      `Forked by dashboard:carol from ${sourceId} (from step chunk-4)`,
    );
    await page.locator('h1 .badge', { hasText: /^completed$/ }).waitFor({ timeout: 20_000 });
    const fork = await server.mcp.getTask(forkId);
    expect(fork.status).toBe('completed');
    expect(fork.result.structuredContent).toEqual(source.result.structuredContent);
    // chunk-1..3 were copied (as the fork's attempt 1, at their source's times); chunk-4 and 5 ran again.
    const sourceSteps = (await adminGetTask(server.rt.db, sourceId))!.steps;
    const forkSteps = (await adminGetTask(server.rt.db, forkId))!.steps;
    expect(forkSteps.map((st) => [st.name, st.attempt])).toEqual([
      ['chunk-1', 1],
      ['chunk-2', 1],
      ['chunk-3', 1],
      ['chunk-4', 2],
      ['chunk-5', 2],
    ]);
    expect(forkSteps.slice(0, 3).map((st) => st.at)).toEqual(sourceSteps.slice(0, 3).map((st) => st.at));
    expect(forkSteps[3]!.at.getTime()).toBeGreaterThan(sourceSteps[4]!.at.getTime());

    // The source's timeline links to its fork.
    await page.goto(taskUrl(sourceId));
    expect(await textOf(page, 'ol.timeline')).toContain(
      `Forked by dashboard:carol into ${forkId} (from step chunk-4)`,
    );
    await page.click(`ol.timeline a[href="/dashboard/tasks/${forkId}"]`);
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${forkId}`);
    await page.context().close();
  });

  it("shows an operator's name as text, in the header and in the audit trail", async () => {
    const page = await signIn(`<i>eve</i> & "co"`);
    expect(await textOf(page, 'header .who')).toBe(`dashboard:<i>eve</i> & "co"`);
    expect(await page.$$('header i')).toHaveLength(0);
    const taskId = await started('analyze_numbers', { count: 1000, chunkSize: 1000 });
    await server.mcp.waitForTask(taskId);
    await page.goto(taskUrl(taskId, '/fork'));
    await page.click('form.confirm button');
    await page.goto(taskUrl(taskId));
    expect(await textOf(page, 'ol.timeline')).toContain(`Forked by dashboard:<i>eve</i> & "co" into`);
    expect(await page.$$('main i')).toHaveLength(0);
    await page.context().close();
  });
});

describe("the actions' forms over plain HTTP", () => {
  const auth = { authorization: `Bearer ${TOKEN}` };
  const csrfOf = async (taskId: string) => {
    const page = await (await fetch(taskUrl(taskId), { headers: auth })).text();
    return /name="csrf" value="([^"]+)"/.exec(page)![1]!;
  };
  const post = (url: string, body: Record<string, string>, headers: Record<string, string> = auth) =>
    fetch(url, { method: 'POST', headers, body: new URLSearchParams(body), redirect: 'manual' });

  it('refuses an action the task is not in a state for, on the page and in the form', async () => {
    const running = await started('analyze_numbers', {
      count: 100_000,
      chunkSize: 1000,
      delayMsPerChunk: 500,
    });
    await server.mcp.waitForTask(running, (t) => typeof t.statusMessage === 'string');
    const csrf = await csrfOf(running);
    // A running task: no resume (not paused), no fork (not finished); a finished one: no cancel.
    expect((await fetch(taskUrl(running, '/resume'), { headers: auth })).status).toBe(409);
    expect((await fetch(taskUrl(running, '/fork'), { headers: auth })).status).toBe(409);
    expect((await post(taskUrl(running, '/resume'), { csrf })).status).toBe(409);
    const fork = await post(taskUrl(running, '/fork'), { csrf });
    expect(fork.status).toBe(409);
    expect(await fork.text()).toContain('only a finished task can be forked');
    // No token, no action; the confirmation pages need a sign-in.
    expect((await post(taskUrl(running, '/fork'), {})).status).toBe(403);
    expect((await post(taskUrl(running, '/resume'), {})).status).toBe(403);
    expect((await fetch(taskUrl(running, '/cancel'), { redirect: 'manual' })).status).toBe(303);
    expect((await adminGetTask(server.rt.db, running))!.actions).toEqual([]);
    await server.mcp.result('tasks/cancel', { taskId: running });
    await server.mcp.waitForTask(running);
    expect((await fetch(taskUrl(running, '/cancel'), { headers: auth })).status).toBe(409);
    // A cancel form from before the end cancels nothing, and the audit trail holds no dashboard cancel.
    expect((await post(taskUrl(running, '/cancel'), { csrf })).status).toBe(409);
    const after = (await adminGetTask(server.rt.db, running))!.actions;
    expect(after.filter((a) => a.actor.startsWith('dashboard'))).toEqual([]);
    // A step the task does not have.
    const done = await started('analyze_numbers', { count: 1000, chunkSize: 1000 });
    await server.mcp.waitForTask(done);
    const noStep = await post(taskUrl(done, '/fork'), { csrf, fromStep: 'no-such-step' });
    expect(noStep.status).toBe(409);
    expect(await noStep.text()).toContain('has no step');
    expect((await fetch(taskUrl('no-such-task', '/fork'), { headers: auth })).status).toBe(404);
  });

  it('records a bearer-token request as `dashboard`', async () => {
    const taskId = await started('analyze_numbers', { count: 1000, chunkSize: 1000 });
    await server.mcp.waitForTask(taskId);
    const forked = await post(taskUrl(taskId, '/fork'), { csrf: await csrfOf(taskId) });
    expect(forked.status).toBe(303);
    const forkId = /\/dashboard\/tasks\/([^/]+)$/.exec(forked.headers.get('location')!)![1]!;
    const { actions } = (await adminGetTask(server.rt.db, taskId))!;
    expect(actions).toEqual([
      expect.objectContaining({ action: 'fork', actor: 'dashboard', detail: { newTaskId: forkId } }),
    ]);
  });

  it("takes a sign-in's name only if it is one: at most 64 printable characters", async () => {
    const signIn = (operator: string) => post(`${origin}/dashboard/login`, { token: TOKEN, operator }, {});
    expect((await signIn('x'.repeat(65))).status).toBe(400);
    expect((await signIn('bell\u0007')).status).toBe(400);
    expect((await signIn('new\nline')).status).toBe(400);
    const named = await signIn(`  Zoë O'Brien-${'z'.repeat(40)}  `);
    expect(named.status).toBe(303);
    const cookie = named.headers.get('set-cookie')!.split(';')[0]!;
    const page = await (await fetch(`${origin}/dashboard`, { headers: { cookie } })).text();
    expect(page).toContain(`dashboard:Zoë O&#39;Brien-${'z'.repeat(40)}<`);
    expect((await signIn('')).status).toBe(303);
  });
});
