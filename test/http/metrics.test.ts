// GET /metrics: Prometheus text format from every process, parsed by a real parser; counters move with
// real requests and tasks, store gauges come from Postgres, labels never carry a task id or a principal.
import { describe, expect, it } from 'vitest';
import { mcpHeaders, mcpRequest, RawMcp } from '../helpers/mcp.ts';
import { sample, scrape, type Scrape } from '../helpers/prometheus.ts';
import { startTestProcess, useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const origin = (url: string) => new URL(url).origin;

describe('metrics of a process serving HTTP and running workers', () => {
  const server = useTestServer();

  it('counts requests, tasks by tool and status, and reads the store gauges from Postgres', async () => {
    const { mcp } = server;
    const before = await scrape(origin(server.rt.url));
    const created = (tool: string) => sample(before, 'durable_mcp_tasks_created_total', { tool }) ?? 0;
    const analyze = await mcp.callTool('analyze_numbers', { count: 10_000 });
    const failing = await mcp.callTool('fail_with', { kind: 'protocol' });
    const asking = await mcp.callTool('confirm_action', { action: 'scrape' });
    await mcp.waitForTask(analyze.taskId as string);
    await mcp.waitForTask(failing.taskId as string);
    await mcp.waitForTask(asking.taskId as string, (t) => t.status === 'input_required');
    await mcp.error('tasks/get', { taskId: 'no-such-task' });
    await mcp.error('tasks/list', {});

    const after = await scrape(origin(server.rt.url));
    const value = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels);
    expect(value('durable_mcp_tasks_created_total', { tool: 'analyze_numbers' })).toBe(
      created('analyze_numbers') + 1,
    );
    expect(value('durable_mcp_tasks_created_total', { tool: 'fail_with' })).toBe(created('fail_with') + 1);
    expect(
      value('durable_mcp_tasks_finished_total', { tool: 'analyze_numbers', status: 'completed' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value('durable_mcp_tasks_finished_total', { tool: 'fail_with', status: 'failed' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value('durable_mcp_task_time_to_start_seconds', { tool: 'analyze_numbers' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value('durable_mcp_task_run_duration_seconds', { tool: 'confirm_action', outcome: 'input_required' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value('durable_mcp_requests_total', { method: 'tools/call', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(3);
    expect(
      value('durable_mcp_requests_total', { method: 'tasks/get', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(1);
    // An unknown task: its error code; an unknown method: one "unknown" label, whatever the client sent.
    const taskGetErrors = after.families
      .find((f) => f.name === 'durable_mcp_requests_total')!
      .metrics.filter((m) => m.labels?.method === 'tasks/get' && m.labels.outcome !== 'ok');
    expect(taskGetErrors.length).toBeGreaterThanOrEqual(1);
    expect(
      value('durable_mcp_requests_total', { method: 'unknown', outcome: '-32601' }),
    ).toBeGreaterThanOrEqual(1);
    expect(value('durable_mcp_request_duration_seconds', { method: 'tools/call' })).toBeGreaterThanOrEqual(3);
    // Cluster-wide gauges, read from the store at scrape time.
    expect(value('durable_mcp_tasks', { status: 'input_required' })).toBe(1);
    expect(value('durable_mcp_tasks', { status: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(value('durable_mcp_queue_runs_waiting')).toBeGreaterThanOrEqual(0);
    expect(value('durable_mcp_queue_oldest_waiting_run_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(value('durable_mcp_tasks_expired_not_swept')).toBe(0);
    // The process: Node's default metrics and both pg pools.
    expect(value('process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(value('durable_mcp_db_pool_connections', { pool: 'app', state: 'total' })).toBeGreaterThanOrEqual(
      1,
    );
    expect(
      value('durable_mcp_db_pool_connections', { pool: 'queue', state: 'total' }),
    ).toBeGreaterThanOrEqual(0);
    expectLowCardinality(after, [
      analyze.taskId as string,
      failing.taskId as string,
      asking.taskId as string,
    ]);
  });

  it('measures the time a task waited for input, once, when the answer resumes it', async () => {
    const { mcp } = server;
    const task = await mcp.callTool('confirm_action', { action: 'measure' });
    await mcp.waitForTask(task.taskId as string, (t) => t.status === 'input_required');
    // The wait itself is what is measured: the task waits at least 300 ms for its answer, and the
    // histogram must say so (a sleep under test, not a wait for a condition).
    await new Promise((resolve) => setTimeout(resolve, 300));
    await mcp.result('tasks/update', {
      taskId: task.taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    expect((await mcp.waitForTask(task.taskId as string)).status).toBe('completed');
    const after = await scrape(origin(server.rt.url));
    expect(sample(after, 'durable_mcp_task_input_wait_seconds', { tool: 'confirm_action' })).toBe(1);
    const sum = /^durable_mcp_task_input_wait_seconds_sum\{tool="confirm_action"\} (\S+)$/m.exec(after.text);
    expect(Number(sum?.[1])).toBeGreaterThanOrEqual(0.3);
  });

  it('counts a request whose client went away as aborted, not as a server error', async () => {
    const before = await scrape(origin(server.rt.url));
    const count = (s: Scrape, outcome: string) =>
      sample(s, 'durable_mcp_requests_total', { method: 'tools/call', outcome }) ?? 0;
    // Synchronous (no tasks extension declared): the handler runs in the request, 20 chunks of 200 ms.
    const body = mcpRequest(
      'tools/call',
      { name: 'analyze_numbers', arguments: { count: 20, chunkSize: 1, delayMsPerChunk: 200 } },
      { caps: {} },
    );
    const abort = new AbortController();
    const call = fetch(server.rt.url, {
      method: 'POST',
      headers: mcpHeaders('tools/call', body.params),
      body: JSON.stringify(body),
      signal: abort.signal,
    }).catch(() => undefined);
    setTimeout(() => abort.abort(), 300);
    await call;
    const after = await waitFor(
      async () => {
        const s = await scrape(origin(server.rt.url));
        return count(s, 'aborted') > count(before, 'aborted') && s;
      },
      { what: 'the aborted call counted', timeoutMs: 15_000 },
    );
    expect(count(after, 'aborted')).toBe(count(before, 'aborted') + 1);
    expect(count(after, '-32603')).toBe(count(before, '-32603'));
  });

  it('counts a cancel that reaches a running handler', async () => {
    const { mcp } = server;
    const task = await mcp.callTool('analyze_numbers', { count: 1_000_000, delayMsPerChunk: 300 });
    await mcp.waitForTask(task.taskId as string, (t) => typeof t.statusMessage === 'string');
    await mcp.result('tasks/cancel', { taskId: task.taskId });
    await mcp.waitForTask(task.taskId as string);
    const after = await scrape(origin(server.rt.url));
    expect(sample(after, 'durable_mcp_task_cancels_delivered_total', { tool: 'analyze_numbers' })).toBe(1);
    expect(
      sample(after, 'durable_mcp_tasks_finished_total', { tool: 'analyze_numbers', status: 'cancelled' }),
    ).toBe(1);
  });
});

/** No label value is a task id, and no label is about who asked. */
function expectLowCardinality({ families, text }: Scrape, taskIds: string[]): void {
  for (const id of taskIds) expect(text).not.toContain(id);
  for (const family of families) {
    for (const m of family.metrics) {
      for (const [label, v] of Object.entries(m.labels ?? {})) {
        expect(['principal', 'task_id', 'taskId', 'session']).not.toContain(label);
        expect(taskIds).not.toContain(v);
      }
    }
  }
}

describe('metrics of split processes, and the token', () => {
  const server = useTestServer({ role: 'server', env: { METRICS_TOKEN: 'metrics-secret-0123' } });

  it('a worker exposes its own on METRICS_PORT; /metrics wants the token when one is set', async () => {
    const worker = await startTestProcess({
      databaseUrl: server.tdb.url,
      role: 'worker',
      env: { METRICS_PORT: '0', METRICS_TOKEN: 'metrics-secret-0123' },
    });
    try {
      const base = origin(server.rt.url);
      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      expect(
        (await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer wrong-secret-01234' } })).status,
      ).toBe(401);
      const mcp = new RawMcp(server.rt.url);
      const analyze = await mcp.callTool('analyze_numbers', { count: 1000 });
      await mcp.waitForTask(analyze.taskId as string);
      const onServer = await scrape(base, 'metrics-secret-0123');
      const onWorker = await scrape(worker.metricsUrl!, 'metrics-secret-0123');
      expect(sample(onServer, 'durable_mcp_tasks_created_total', { tool: 'analyze_numbers' })).toBe(1);
      expect(
        sample(onServer, 'durable_mcp_tasks_finished_total', {
          tool: 'analyze_numbers',
          status: 'completed',
        }),
      ).toBeUndefined();
      expect(
        sample(onWorker, 'durable_mcp_tasks_finished_total', {
          tool: 'analyze_numbers',
          status: 'completed',
        }),
      ).toBe(1);
      expect(
        sample(onWorker, 'durable_mcp_requests_total', { method: 'tools/call', outcome: 'ok' }),
      ).toBeUndefined();
      // The store gauges are cluster-wide: both see the same task.
      expect(sample(onWorker, 'durable_mcp_tasks', { status: 'completed' })).toBe(
        sample(onServer, 'durable_mcp_tasks', { status: 'completed' }),
      );
    } finally {
      await worker.stop();
    }
  });
});
