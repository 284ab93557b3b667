// A real server with a declared schedule: the dashboard's schedules page and /metrics show its next
// tick, lag and last task.
import { describe, expect, it } from 'vitest';
import { schedules, tick } from '../helpers/schedule-tools.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'dashboard-token-for-schedule-tests';

describe('schedules on the dashboard and in metrics', () => {
  const server = useTestServer({
    tools: [tick],
    schedules,
    env: { DASHBOARD_TOKEN: TOKEN, SCHEDULE_POLL_INTERVAL_MS: '100' },
  });

  it('lists each schedule with its clock, next tick, lag and last task; counts ticks and lag', async () => {
    const row = await waitFor(
      async () => {
        const r = await server.tdb.db.selectFrom('schedules').selectAll().executeTakeFirst();
        return r?.last_task_id != null && r;
      },
      { what: 'a task of the declared schedule' },
    );
    const origin = new URL(server.rt.url).origin;
    const page = await fetch(`${origin}/dashboard/schedules`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(page.status).toBe(200);
    const body = await page.text();
    expect(body).toContain('data-schedule="each-second"');
    expect(body).toContain('<code>* * * * * *</code>');
    expect(body).toMatch(/allow \/ max 100/);
    expect(body).toMatch(/data-lag="\d+"/);
    expect(body).toContain(`/dashboard/tasks/${row.last_task_id}`);
    expect(body).toContain('href="/dashboard/schedules"');

    const metrics = await (await fetch(`${origin}/metrics`)).text();
    expect(metrics).toMatch(
      /durable_mcp_schedule_ticks_total\{schedule="each-second",outcome="fired"\} [1-9]/,
    );
    expect(metrics).toMatch(/durable_mcp_schedule_lag_seconds\{schedule="each-second"\} \d/);
  });
});
