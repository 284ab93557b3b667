// The task dashboard in a real headless Chromium (Debian's, driven by playwright-core), through real nginx
// round-robin in front of two HTTP instances, with a worker runtime running the tasks: sign in, tasks in
// every state, filters, a task's timeline, and a cancel that reaches the running handler. Screenshots go to
// test-output/dashboard/. Plus the credential, CSRF and origin checks over plain HTTP.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { SHIPPED_TOOLS, SHIPPED_TOOLS_MODULE } from '../../src/tools/shipped/index.ts';
import { CHROMIUM, launchChromium, signedInPage, textOf } from '../helpers/dashboard-browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { startNginx, type Nginx } from '../helpers/system/nginx.ts';

const TOKEN = 'dashboard-token-for-tests-0123';
const SHOTS = path.resolve(import.meta.dirname, '../../test-output/dashboard');
// Small pools: four runtimes here share the test Postgres (max_connections 100) with the file vitest runs beside.
const env = {
  DASHBOARD_TOKEN: TOKEN,
  CANCEL_CHECK_INTERVAL_MS: '200',
  DB_POOL_MAX: '3',
  QUEUE_POOL_MAX: '2',
};

/** An artifact name a page must show as text: markup, both quotes, an ampersand (a name may not hold "/"). */
const ODD_NAME = `<script>alert("x")<img src=x onerror='alert(1)'> & "q".csv`;
const oddArtifact = defineTool({
  name: 'odd_artifact',
  description: 'writes an artifact with a name full of markup (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    return { content: [await ctx.artifact(ODD_NAME, 'hello')] };
  },
});
/** The shipped tools (their synchronous calls on threads, as the CLI serves them) and the test tool. */
const tools = { tools: [...SHIPPED_TOOLS, oddArtifact], toolsModule: SHIPPED_TOOLS_MODULE };

let tdb: TestDatabase;
const runtimes: Array<ServerProcess & { url: string }> = [];
let nginx: Nginx;
let base: string;
let mcp: RawMcp;
let browser: Browser | undefined;
type Kind = 'completed' | 'failed' | 'input_required' | 'cancelled' | 'working' | 'toCancel';
const ids = {} as Record<Kind, string>;

const portOf = (url: string) => Number(new URL(url).port);

beforeAll(async () => {
  tdb = await createTestDatabase();
  for (let i = 0; i < 2; i++)
    runtimes.push(await startTestProcess({ databaseUrl: tdb.url, role: 'server', env, ...tools }));
  runtimes.push(await startTestProcess({ databaseUrl: tdb.url, role: 'worker', env, ...tools }));
  nginx = await startNginx(runtimes.slice(0, 2).map((r) => portOf(r.url)));
  base = `http://127.0.0.1:${nginx.port}`;
  mcp = new RawMcp(nginx.url);

  // A task in every state.
  ids.completed = (await mcp.callTool('analyze_numbers', { count: 3000, chunkSize: 1000 })).taskId as string;
  ids.failed = (await mcp.callTool('fail_with', { kind: 'protocol' })).taskId as string;
  ids.input_required = (await mcp.callTool('confirm_action', { action: 'drop the staging table' }))
    .taskId as string;
  const slow = { count: 200_000, chunkSize: 1000, delayMsPerChunk: 200 };
  ids.cancelled = (await mcp.callTool('analyze_numbers', slow)).taskId as string;
  // (Slower: it must still run when the last test of this file checks that nothing cancelled it.)
  ids.working = (await mcp.callTool('analyze_numbers', { ...slow, delayMsPerChunk: 2000 })).taskId as string;
  ids.toCancel = (await mcp.callTool('analyze_numbers', slow)).taskId as string;
  await mcp.waitForTask(ids.completed);
  await mcp.waitForTask(ids.failed);
  await mcp.waitForTask(ids.input_required, (t) => t.status === 'input_required');
  await mcp.waitForTask(ids.cancelled, (t) => typeof t.statusMessage === 'string');
  await mcp.result('tasks/cancel', { taskId: ids.cancelled });
  await mcp.waitForTask(ids.cancelled);
  // Both running ones have started (a status message means a step is done).
  await mcp.waitForTask(ids.working, (t) => typeof t.statusMessage === 'string');
  await mcp.waitForTask(ids.toCancel, (t) => typeof t.statusMessage === 'string');

  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await nginx?.stop();
  for (const rt of runtimes.reverse()) await rt.stop();
  await tdb?.drop();
});

async function newPage(): Promise<{ page: Page; upstreams: Set<string> }> {
  const context = await browser!.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  const upstreams = new Set<string>();
  page.on('response', (r) => {
    const upstream = r.headers()['x-upstream'];
    if (upstream !== undefined && r.url().includes('/dashboard')) upstreams.add(upstream);
  });
  return { page, upstreams };
}

const rowsOf = (page: Page) =>
  page.$$eval('table.tasks tbody tr[data-task-id]', (trs) =>
    trs.map((tr) => ({ id: tr.getAttribute('data-task-id')!, status: tr.getAttribute('data-status')! })),
  );

describe('the dashboard in Chromium, through nginx in front of two instances', () => {
  it('signs in, lists every state, filters, shows a timeline, and cancels a running task', async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} (Debian's chromium package)`).toBe(true);
    const { page, upstreams } = await newPage();

    // Not signed in: the sign-in page. A wrong token is refused; the right one signs in.
    await page.goto(`${base}/dashboard`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
    await page.fill('input[name=token]', 'not-the-token-at-all');
    await page.click('button');
    await expect(page.textContent('[role=alert]')).resolves.toContain('not the dashboard token');
    await page.screenshot({ path: path.join(SHOTS, '1-sign-in.png') });
    await page.fill('input[name=token]', TOKEN);
    await page.fill('input[name=operator]', 'alice');
    await page.click('button');
    expect(new URL(page.url()).pathname).toBe('/dashboard');
    expect(await page.textContent('header .who')).toBe('dashboard:alice');

    // Every state, each task where it belongs.
    const rows = await rowsOf(page);
    for (const status of ['completed', 'failed', 'input_required', 'cancelled', 'working'] as const) {
      expect(rows).toContainEqual({ id: ids[status], status });
    }
    expect(await page.textContent('.card.working .n')).toBe('2');
    expect(await page.$$('svg.chart')).toHaveLength(2);
    await page.screenshot({ path: path.join(SHOTS, '2-tasks.png'), fullPage: true });

    // Filters: by status, by tool, by principal, by age.
    await page.check('input[name=status][value=failed]');
    await page.click('form.filters button');
    expect(await rowsOf(page)).toEqual([{ id: ids.failed, status: 'failed' }]);
    await page.uncheck('input[name=status][value=failed]');
    await page.selectOption('select[name=tool]', 'confirm_action');
    await page.click('form.filters button');
    expect(await rowsOf(page)).toEqual([{ id: ids.input_required, status: 'input_required' }]);
    await page.screenshot({ path: path.join(SHOTS, '3-filtered.png'), fullPage: true });
    await page.selectOption('select[name=tool]', '');
    await page.fill('input[name=principal]', 'somebody-else');
    await page.click('form.filters button');
    expect(await rowsOf(page)).toEqual([]);
    await page.fill('input[name=principal]', '');
    await page.selectOption('select[name=age]', '15m');
    await page.click('form.filters button');
    expect((await rowsOf(page)).length).toBe(6);

    // One task's page: its timeline (created, the attempt on a worker, its steps, the end) and result.
    await page.click(`a[href="/dashboard/tasks/${ids.completed}"]`);
    const timeline = await textOf(page, 'ol.timeline');
    expect(timeline).toContain('Created by');
    expect(timeline).toMatch(/Attempt 1 started on worker \S+, lease until/);
    expect(timeline).toMatch(/Attempt 1 ended completed/);
    // Its three chunk steps are one row, which opens onto each.
    const steps = page.locator('ol.timeline details.steps');
    expect((await steps.locator('summary').textContent())?.replace(/\s+/g, ' ')).toMatch(
      /^ ?Steps chunk-\* ×3 done \(first at \S+ \S+, last at \S+ \S+, attempt 1\) ?$/,
    );
    expect(await steps.locator('li code').allTextContents()).toEqual(['chunk-1', 'chunk-2', 'chunk-3']);
    expect(timeline).toContain('Ended completed');
    expect(await page.textContent('pre.outcome')).toContain('"sum"');
    expect(await page.textContent('pre.arguments')).toContain('"chunkSize": 1000');
    // Finished: nothing to cancel; it may be forked.
    expect(await page.$('a[href$="/cancel"]')).toBeNull();
    expect(await page.$(`a[href="/dashboard/tasks/${ids.completed}/fork"]`)).not.toBeNull();
    await page.screenshot({ path: path.join(SHOTS, '4-task-completed.png'), fullPage: true });

    // The task waiting for input: the question, first on the page and on the timeline; never an answer.
    await page.goto(`${base}/dashboard/tasks/${ids.input_required}`);
    const question = 'Do you confirm this action: drop the staging table?';
    expect(await textOf(page, 'section.waiting')).toContain(`Waiting for input: ${question}`);
    expect(await textOf(page, 'ol.timeline')).toContain(
      `Asked for input confirm (elicitation/create): ${question}`,
    );

    // A task its client cancelled: the timeline says the client asked.
    await page.goto(`${base}/dashboard/tasks/${ids.cancelled}`);
    expect(await textOf(page, 'ol.timeline')).toContain('Cancel requested by the client (local)');

    // Cancel a running task from its page: the button leads to a confirmation page, which cancels nothing.
    await page.goto(`${base}/dashboard/tasks/${ids.toCancel}`);
    expect(await page.textContent('h1 .badge')).toBe('working');
    await page.screenshot({ path: path.join(SHOTS, '5-task-running.png'), fullPage: true });
    await page.click('a.button.danger');
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${ids.toCancel}/cancel`);
    expect(await textOf(page, 'section.confirm h1')).toBe(
      `Cancel task ${ids.toCancel} (analyze_numbers, local)?`,
    );
    await page.screenshot({ path: path.join(SHOTS, '5b-confirm-cancel.png'), fullPage: true });
    const before = await tdb.db
      .selectFrom('tasks')
      .select(['status', 'cancel_requested_at'])
      .where('task_id', '=', ids.toCancel)
      .executeTakeFirstOrThrow();
    expect(before).toEqual({ status: 'working', cancel_requested_at: null });
    // Confirmed: the handler sees it and the task ends `cancelled`; the timeline says who cancelled.
    await page.click('form.confirm button');
    expect(new URL(page.url()).pathname).toBe(`/dashboard/tasks/${ids.toCancel}`);
    expect(await textOf(page, 'ol.timeline')).toMatch(/Cancel(led| requested) by dashboard:alice/);
    // The page refreshes itself every 2 s while the task is active.
    // (A locator waits from Playwright's own world: the page's CSP allows no script, not even this test's.)
    await page.locator('h1 .badge', { hasText: /^cancelled$/ }).waitFor({ timeout: 20_000 });
    expect(await textOf(page, 'ol.timeline')).toContain('Ended cancelled');
    expect(await textOf(page, 'ol.timeline')).toContain('Cancelled by dashboard:alice');
    await page.screenshot({ path: path.join(SHOTS, '6-task-cancelled.png'), fullPage: true });
    const viaMcp = await mcp.getTask(ids.toCancel);
    expect(viaMcp.status).toBe('cancelled');
    // The other running task was not touched.
    expect((await mcp.getTask(ids.working)).status).toBe('working');

    // Round robin: both instances served the pages, with the one sign-in.
    expect(upstreams.size).toBe(2);
    await page.context().close();
  }, 120_000);

  it("lists a task's artifacts on its page: name, type, size, digest, URI; a name is text, never markup", async () => {
    const { page } = await newPage();
    const exported = await mcp.callTool('export_csv', { megabytes: 2 });
    const odd = await mcp.callTool('odd_artifact', {});
    const task = await mcp.waitForTask(exported.taskId as string);
    expect(task.status).toBe('completed');
    expect((await mcp.waitForTask(odd.taskId as string)).status).toBe('completed');
    const { bytes, sha256 } = task.result.structuredContent as { bytes: number; sha256: string };
    const artifactRows = async () => {
      const rows = await page.locator('table.artifacts tbody tr').all();
      const cells = await Promise.all(rows.map((row) => row.locator('td').allTextContents()));
      return cells.map((texts) => texts.map((t) => t.replace(/\s+/g, ' ').trim()));
    };

    await page.goto(`${base}/dashboard/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button');
    await page.goto(`${base}/dashboard/tasks/${task.taskId as string}`);
    expect(await page.textContent('main h2:has(+ table.artifacts)')).toBe('Artifacts');
    expect(await artifactRows()).toEqual([
      [
        'export.csv',
        'text/csv; charset=utf-8',
        `2.0 MiB (${bytes} bytes)`,
        sha256.slice(0, 12),
        expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/),
        `tasks://${task.taskId as string}/artifacts/export.csv`,
      ],
    ]);
    // No download link: a download is the task's principal's, not the operator's.
    expect(await page.$$('table.artifacts a')).toHaveLength(0);
    await page.screenshot({ path: path.join(SHOTS, '7-task-artifacts.png'), fullPage: true });

    // The odd name is shown as the text it is: no element of it reached the page.
    await page.goto(`${base}/dashboard/tasks/${odd.taskId as string}`);
    const [row] = await artifactRows();
    expect(row?.[0]).toBe(ODD_NAME);
    expect(row?.[5]).toBe(`tasks://${odd.taskId as string}/artifacts/${encodeURIComponent(ODD_NAME)}`);
    expect(await page.$$('script, img, [onerror]')).toHaveLength(0);

    // A task without artifacts has no such section.
    await page.goto(`${base}/dashboard/tasks/${ids.completed}`);
    expect(await page.$('table.artifacts')).toBeNull();
    await page.context().close();
  }, 60_000);
});

describe('the charts', () => {
  /** A chart's time-axis ticks (label and the instant it marks), its y-axis maximum and its bars. */
  const chartOf = async (page: Page, chart: 'throughput' | 'backlog') => {
    const svg = page.locator(`svg.chart.${chart}`);
    const ticks = await svg
      .locator('text.x-tick')
      .evaluateAll((ts) =>
        ts.map((t) => ({ label: t.textContent ?? '', at: Date.parse(String(t.getAttribute('data-t'))) })),
      );
    const titles = await svg.locator('rect title').allTextContents();
    return {
      minutes: Number(await svg.getAttribute('data-minutes')),
      ticks,
      yMax: Number(await svg.locator('text.y-max').textContent()),
      bars: titles.map((t) => Number(/: (\d+) (?:created|finished)$/.exec(t)![1])),
    };
  };
  const expectAxis = (ticks: { label: string; at: number }[], everyMinutes: number) => {
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    for (const [i, t] of ticks.entries()) {
      expect(t.label).toBe(new Date(t.at).toISOString().slice(11, 16)); // HH:MM, UTC
      expect(t.at % (everyMinutes * 60_000)).toBe(0); // at round times
      if (i > 0) expect(t.at - ticks[i - 1]!.at).toBe(everyMinutes * 60_000);
    }
  };

  it('have a UTC time axis and a y-axis maximum, and the range links change their span', async () => {
    const page = await signedInPage(browser!, base, TOKEN);
    const defaults = await chartOf(page, 'throughput');
    expect(defaults.minutes).toBe(60);
    expectAxis(defaults.ticks, 10);
    expect(defaults.bars).toHaveLength(2 * 60); // created and finished, per minute
    // The y axis says the tallest bar's count; this file's tasks were all created within the hour.
    expect(defaults.yMax).toBe(Math.max(...defaults.bars));
    expect(defaults.bars.filter((_, i) => i % 2 === 0).reduce((a, b) => a + b)).toBeGreaterThanOrEqual(6);
    const backlog = await chartOf(page, 'backlog');
    expectAxis(backlog.ticks, 10);
    expect(backlog.yMax).toBeGreaterThanOrEqual(2); // at least the two running tasks
    expect(await page.textContent('.charts figcaption')).toContain('last 1h');
    expect(await page.getAttribute('nav.ranges a[aria-current]', 'href')).toContain('range=1h');

    // Six hours: 5-minute buckets, a tick every hour.
    await page.click('nav.ranges a:text-is("6h")');
    expect(new URL(page.url()).searchParams.get('range')).toBe('6h');
    const six = await chartOf(page, 'throughput');
    expect(six.minutes).toBe(360);
    expectAxis(six.ticks, 60);
    expect(six.bars.length / 2).toBeGreaterThanOrEqual(72);
    expect(six.bars.length / 2).toBeLessThanOrEqual(73);
    expect(six.yMax).toBe(Math.max(...six.bars));
    expectAxis((await chartOf(page, 'backlog')).ticks, 60);
    expect(await page.textContent('.charts figcaption')).toContain('per 5 min');

    // The filter form keeps the span, and the span links keep the filter.
    await page.selectOption('select[name=tool]', 'confirm_action');
    await page.click('form.filters button');
    const url = new URL(page.url());
    expect(url.searchParams.get('range')).toBe('6h');
    expect(url.searchParams.get('tool')).toBe('confirm_action');
    await page.click('nav.ranges a:text-is("24h")');
    expect(new URL(page.url()).searchParams.get('tool')).toBe('confirm_action');
    const day = await chartOf(page, 'throughput');
    expect(day.minutes).toBe(1440);
    expectAxis(day.ticks, 180);
    expect(day.bars.length / 2).toBeLessThanOrEqual(97);
    await page.click('nav.ranges a:text-is("15m")');
    expectAxis((await chartOf(page, 'throughput')).ticks, 5);
    await page.screenshot({ path: path.join(SHOTS, '8-charts-15m.png'), fullPage: true });
    await page.context().close();
  }, 60_000);
});

describe('the dashboard over plain HTTP', () => {
  const get = (p: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${p}`, { headers, redirect: 'manual' });

  it('needs its credential, and says nothing without it', async () => {
    const anon = await get('/dashboard');
    expect(anon.status).toBe(303);
    expect(anon.headers.get('location')).toBe('/dashboard/login');
    expect((await get(`/dashboard/tasks/${ids.working}`)).status).toBe(303);
    const bearer = await get('/dashboard', { authorization: `Bearer ${TOKEN}` });
    expect(bearer.status).toBe(200);
    expect(bearer.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(bearer.headers.get('x-frame-options')).toBe('DENY');
    expect(await bearer.text()).not.toContain('<script');
    const wrongCookie = await get('/dashboard', { cookie: 'durable_mcp_dashboard=forged' });
    expect(wrongCookie.status).toBe(303);
    const cancel = await fetch(`${base}/dashboard/tasks/${ids.working}/cancel`, {
      method: 'POST',
      redirect: 'manual',
    });
    expect(cancel.status).toBe(401);
  });

  it('sets an HttpOnly, SameSite=Strict cookie that every instance accepts', async () => {
    const login = await fetch(`${base}/dashboard/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN }),
      redirect: 'manual',
    });
    expect(login.status).toBe(303);
    const cookie = login.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/dashboard/);
    expect(cookie).not.toContain(TOKEN);
    const pair = cookie.split(';')[0]!;
    for (const rt of runtimes.slice(0, 2)) {
      const direct = await fetch(`${new URL(rt.url).origin}/dashboard`, { headers: { cookie: pair } });
      expect(direct.status).toBe(200);
    }
  });

  it('gives every sign-in its own cookie and CSRF token, and sign-out ends that cookie on every instance', async () => {
    const signIn = async () => {
      const login = await fetch(`${base}/dashboard/login`, {
        method: 'POST',
        body: new URLSearchParams({ token: TOKEN }),
        redirect: 'manual',
      });
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      const page = await (await get('/dashboard', { cookie })).text();
      return { cookie, csrf: /name="csrf" value="([^"]+)"/.exec(page)![1]! };
    };
    const a = await signIn();
    const b = await signIn();
    expect(a.cookie).not.toBe(b.cookie);
    expect(a.csrf).not.toBe(b.csrf);
    // One sign-in's form token is no good with another's cookie.
    const swapped = await fetch(`${base}/dashboard/logout`, {
      method: 'POST',
      headers: { cookie: b.cookie },
      body: new URLSearchParams({ csrf: a.csrf }),
      redirect: 'manual',
    });
    expect(swapped.status).toBe(403);
    const out = await fetch(`${base}/dashboard/logout`, {
      method: 'POST',
      headers: { cookie: a.cookie },
      body: new URLSearchParams({ csrf: a.csrf }),
      redirect: 'manual',
    });
    expect(out.status).toBe(303);
    for (const rt of runtimes.slice(0, 2)) {
      const origin = new URL(rt.url).origin;
      expect(
        (await fetch(`${origin}/dashboard`, { headers: { cookie: a.cookie }, redirect: 'manual' })).status,
      ).toBe(303);
      expect((await fetch(`${origin}/dashboard`, { headers: { cookie: b.cookie } })).status).toBe(200);
    }
  });

  it('shows a long status message cut, in the list and on the task page', async () => {
    const updated = await tdb.db
      .updateTable('tasks')
      .set({ status_message: `long ${'m'.repeat(250_000)}` })
      .where('task_id', '=', ids.failed)
      .returning('task_id')
      .execute();
    expect(updated).toHaveLength(1);
    const auth = { authorization: `Bearer ${TOKEN}` };
    const list = await (await get('/dashboard', auth)).text();
    const page = await (await get(`/dashboard/tasks/${ids.failed}`, auth)).text();
    expect(list.length).toBeLessThan(100_000);
    expect(page.length).toBeLessThan(100_000);
    expect(page).toContain('more characters');
  });

  it('refuses a form without its token, or from another origin, and cancels nothing', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const noCsrf = await fetch(`${base}/dashboard/tasks/${ids.working}/cancel`, {
      method: 'POST',
      headers: auth,
      body: new URLSearchParams({}),
    });
    expect(noCsrf.status).toBe(403);
    const page = await (await get(`/dashboard/tasks/${ids.working}`, auth)).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    const crossOrigin = await fetch(`${base}/dashboard/tasks/${ids.working}/cancel`, {
      method: 'POST',
      headers: { ...auth, origin: 'http://evil.example' },
      body: new URLSearchParams({ csrf }),
    });
    expect(crossOrigin.status).toBe(403);
    // The form checks answer 403 before the cancel handler runs, and a cancel is recorded (one guarded
    // UPDATE) before its reply: nothing is pending, so the task's state now is final.
    expect((await mcp.getTask(ids.working)).status).toBe('working');
    const { cancel_requested_at } = await tdb.db
      .selectFrom('tasks')
      .select('cancel_requested_at')
      .where('task_id', '=', ids.working)
      .executeTakeFirstOrThrow();
    expect(cancel_requested_at).toBeNull();
    const missing = await fetch(`${base}/dashboard/tasks/no-such-task/cancel`, {
      method: 'POST',
      headers: auth,
      body: new URLSearchParams({ csrf }),
    });
    expect(missing.status).toBe(404);
    // An id Postgres could not take (a NUL, 10 kB) names no task either: 404, not a 500. (Straight to an
    // instance: nginx itself refuses a %00 in a path.)
    const instance = new URL(runtimes[0]!.url).origin;
    for (const id of ['%00', 'x'.repeat(10_000)]) {
      expect((await fetch(`${instance}/dashboard/tasks/${id}`, { headers: auth })).status).toBe(404);
      const cancel = await fetch(`${instance}/dashboard/tasks/${id}/cancel`, {
        method: 'POST',
        headers: { ...auth, origin: instance },
        body: new URLSearchParams({ csrf }),
      });
      expect(cancel.status).toBe(404);
    }
  });

  it('is off unless DASHBOARD_TOKEN is set', async () => {
    const plain = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    try {
      expect((await fetch(`${new URL(plain.url).origin}/dashboard`)).status).toBe(404);
      expect((await fetch(`${new URL(plain.url).origin}/dashboard/login`)).status).toBe(404);
    } finally {
      await plain.stop();
    }
  });
});
