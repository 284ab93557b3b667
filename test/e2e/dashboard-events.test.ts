// A task's event log on its dashboard page, in a real headless Chromium (Debian's, driven by playwright-core)
// through real nginx (deploy/mcp-locations.conf) in front of a server with workers: the latest events
// server-rendered, and a new event appearing while the page is open, without a reload. Screenshots go to
// test-output/dashboard/.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../../src/process/start.ts';
import { SHIPPED_TOOLS, SHIPPED_TOOLS_MODULE } from '../../src/tools/shipped/index.ts';
import { launchChromium, signedInPage, textOf } from '../helpers/dashboard-browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { emitAwaitSignal, FIRST_EVENT, SECOND_EVENT, signalUrlOf } from '../helpers/signal-event-tool.ts';
import { startNginx, type Nginx } from '../helpers/system/nginx.ts';

const TOKEN = 'dashboard-events-token-0123456789';
const SHOTS = path.resolve(import.meta.dirname, '../../test-output/dashboard');
const STATUS = 'dev.durable-mcp-tasks/status';

let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
let nginx: Nginx;
let base: string;
let mcp: RawMcp;
let browser: Browser | undefined;

beforeAll(async () => {
  tdb = await createTestDatabase();
  rt = await startTestProcess({
    databaseUrl: tdb.url,
    env: { DASHBOARD_TOKEN: TOKEN, SSE_KEEPALIVE_MS: '1000' },
    tools: [...SHIPPED_TOOLS, emitAwaitSignal],
    toolsModule: SHIPPED_TOOLS_MODULE,
  });
  nginx = await startNginx([Number(new URL(rt.url).port)]);
  base = `http://127.0.0.1:${nginx.port}`;
  mcp = new RawMcp(nginx.url);
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await nginx?.stop();
  await rt?.stop();
  await tdb?.drop();
});

/** The log's rows as the page shows them: seq, type, payload. */
const logRows = (page: Page) =>
  page.$$eval('#event-log tbody tr', (trs) =>
    trs.map((tr) => {
      const cells = [...tr.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim());
      return { seq: Number(tr.getAttribute('data-seq')), at: cells[1]!, type: cells[2]!, payload: cells[3]! };
    }),
  );

/** What went wrong in the page: its errors, and console errors (a CSP refusal is one). */
function problemsOf(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  return problems;
}

/** Counts the page's loads (a navigation, a reload): a live update must not be one. */
function loadsOf(page: Page): { count: number } {
  const loads = { count: 0 };
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) loads.count++;
  });
  return loads;
}

describe("a task's event log on its dashboard page", () => {
  it('shows each new event as it is written, without a reload, then the final status', async () => {
    const { taskId } = await mcp.callTool('emit_await_signal', { note: 'shown live' });
    const waiting = await mcp.waitForTask(
      taskId as string,
      (t) => signalUrlOf(t.statusMessage) !== undefined,
    );
    const page = await signedInPage(browser!, base, TOKEN, 'erin');
    const problems = problemsOf(page);
    const loads = loadsOf(page);
    const streamed = page.waitForResponse((r) =>
      r.url().includes(`/tasks/${taskId as string}/events?after=1`),
    );
    const response = await page.goto(`${base}/dashboard/tasks/${taskId as string}`);
    // The page's one script, allowed by its hash alone; it may connect to its own origin only.
    expect(response!.headers()['content-security-policy']).toMatch(
      /default-src 'none'; .*script-src 'sha256-[A-Za-z0-9+/]+=*'; connect-src 'self'/,
    );
    expect(await logRows(page)).toEqual([
      {
        seq: 1,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/),
        type: FIRST_EVENT,
        payload: '{"note":"shown live"}',
      },
    ]);
    const loaded = loads.count;

    // The page's EventSource is connected, from after the last event shown; the signal lets the task go on.
    const events = await streamed;
    expect(events.status()).toBe(200);
    expect(events.headers()['content-type']).toBe('text/event-stream');
    const delivered = await fetch(signalUrlOf(waiting.statusMessage)!, {
      method: 'POST',
      body: '{"ok":true}',
    });
    expect(delivered.status).toBe(202);
    await page.locator(`#event-log tr[data-seq="2"]`).waitFor({ timeout: 15_000 });
    await page.locator(`#event-log tr[data-seq="3"]`).waitFor({ timeout: 15_000 });
    const rows = await logRows(page);
    expect(rows.map((r) => [r.seq, r.type, r.payload])).toEqual([
      [1, FIRST_EVENT, '{"note":"shown live"}'],
      [2, SECOND_EVENT, '{"got":{"ok":true}}'],
      [3, STATUS, expect.stringMatching(/^\{"status":"completed"/)],
    ]);
    expect(rows[1]!.at).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    // The rest of the page caught up too, read again in place (no reload: the new rows are still there).
    await page.locator('h1 .badge', { hasText: /^completed$/ }).waitFor({ timeout: 15_000 });
    expect(loads.count).toBe(loaded);
    expect(await page.locator('#event-log tbody tr').count()).toBe(3);
    expect(problems).toEqual([]);
    await page.screenshot({ path: path.join(SHOTS, '13-task-events-live.png'), fullPage: true });
    await page.context().close();
  }, 60_000);

  it("shows a finished task's latest 200 events, newest last, with no script", async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 1_000, batchSize: 250, threshold: 1_000 });
    const task = await mcp.waitForTask(taskId as string);
    const latest = task._meta['dev.durable-mcp-tasks/latestEventSeq'] as number;
    expect(latest).toBe(1_000 + 4 + 1);
    const page = await signedInPage(browser!, base, TOKEN);
    await page.goto(`${base}/dashboard/tasks/${taskId as string}`);
    const rows = await logRows(page);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 200 }, (_, i) => latest - 199 + i));
    expect(rows.at(-1)).toMatchObject({
      type: STATUS,
      payload: '{"status":"completed","statusMessage":"Scanned 1000 of 1000 rows"}',
    });
    expect(rows.at(-2)!.type).toBe('dev.durable-mcp-tasks/partial');
    expect(await textOf(page, '#event-log p.muted')).toBe('The latest 200 events, newest last.');
    expect(await page.$$('script')).toHaveLength(0);
    await page.context().close();
  }, 60_000);

  it('streams to the signed-in only: a bearer of the token gets any task’s events, nobody else', async () => {
    const { taskId } = await mcp.callTool('scan_rows', { rows: 10, batchSize: 10 });
    await mcp.waitForTask(taskId as string);
    const url = `${base}/dashboard/tasks/${taskId as string}/events`;
    const anonymous = await fetch(url, { redirect: 'manual' });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toBe('/dashboard/login');
    const bearer = { authorization: `Bearer ${TOKEN}` };
    const stream = await fetch(url, { headers: { ...bearer, 'last-event-id': '9' } });
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    expect(await stream.text()).toMatch(/^retry: 3000\n\nid: 10\ndata: \{"taskId":/);
    const unknown = await fetch(`${base}/dashboard/tasks/no-such-task/events`, { headers: bearer });
    expect(unknown.status).toBe(404);
    const bad = await fetch(url, { headers: { ...bearer, 'last-event-id': 'x' } });
    expect(bad.status).toBe(400);
  });
});
