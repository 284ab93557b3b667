/**
 * The operator's actions on stopped tasks, against a real server process, Postgres and pg-boss: a tool
 * with `onExhausted: 'pause'` pauses when its attempts run out (holding no slot, no run queued), and
 * `durable-mcp-tasks tasks resume` (the CLI as a child process) runs it again from its last completed
 * step while an ext-tasks client polls it; `tasks fork --from-step` re-runs a finished task's later
 * steps under a new id; a bulk resume touches exactly the tasks its filter selects; every action is
 * recorded on the task.
 */
import { withTasks, type TaskExecutionEvent } from '@modelcontextprotocol/ext-tasks/client';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { adminGetTask } from '../../src/tasks/store/admin-task.ts';
import { MAX_RESUME_BATCH } from '../../src/tasks/store/pause.ts';
import { runCli } from '../helpers/cli.ts';
import { extTasksPort } from '../helpers/ext-tasks.ts';
import { useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const STEPS = ['s1', 's2', 's3', 's4', 's5'] as const;

/** The downstream step s3 calls: down until a test brings it back, per tool run key. */
const downstreamUp = new Map<string, boolean>();
/** Each step's calls, by task: what ran (the handler's own view of its replay is not trusted). */
const calls = new Map<string, string[]>();

/** Five steps; s3 calls a downstream that may be down. Pauses when its attempts run out. */
function fiveStepTool(name: string) {
  return defineTool({
    name,
    description: 'Five steps; s3 calls a downstream that may be down. Pauses when its attempts run out.',
    inputSchema: z.object({ downstream: z.string(), apiKey: z.string() }),
    taskSupport: 'required',
    retry: { maxAttempts: 2, backoff: { initialMs: 0 }, onExhausted: 'pause' },
    secretArguments: ['apiKey'],
    async handler({ downstream }, ctx) {
      for (const step of STEPS) {
        await ctx.step(step, () => {
          calls.set(ctx.taskId!, [...(calls.get(ctx.taskId!) ?? []), step]);
          if (step === 's3' && downstreamUp.get(downstream) !== true) {
            throw new Error(`downstream ${downstream} unavailable`);
          }
          return step;
        });
      }
      return { content: [{ type: 'text', text: 'all five steps done' }] };
    },
  });
}

const quick = defineTool({
  name: 'quick',
  description: 'Completes at once.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: 'quick' }] }),
});

// One slot: a paused task that held one would keep `quick` from ever running.
const server = useTestServer({
  tools: [fiveStepTool('five_steps'), fiveStepTool('five_steps_other'), quick],
  env: { WORKER_CONCURRENCY: '1' },
});

const cli = (...args: string[]) => runCli(['tasks', ...args], { env: { DATABASE_URL: server.tdb.url } });

async function startFiveSteps(downstream: string, tool = 'five_steps'): Promise<string> {
  const created = await server.mcp.callTool(tool, { downstream, apiKey: 'sk-live-SECRET' });
  return created.taskId as string;
}

async function waitForPaused(taskId: string): Promise<void> {
  await waitFor(async () => (await adminGetTask(server.rt.db, taskId))?.task.pausedAt != null, {
    what: `task ${taskId} paused`,
    timeoutMs: 20_000,
  });
}

/** The task's step rows: name → the attempt that recorded it. */
async function stepAttempts(taskId: string): Promise<Record<string, number>> {
  const { rows } = await sql<{ name: string; attempt: number }>`
    select name, attempt from task_steps where task_id = ${taskId} order by position`.execute(server.rt.db);
  return Object.fromEntries(rows.map((r) => [r.name, r.attempt]));
}

async function queuedRuns(taskId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pgboss.job
     where name = 'task-run' and data->>'taskId' = ${taskId} and state in ('created', 'retry', 'active')`.execute(
    server.rt.db,
  );
  return rows[0]!.n;
}

describe("onExhausted: 'pause', then tasks resume", () => {
  it('pauses at s3 holding no slot; resumed, runs s3–s5 only and completes for the client polling it', async () => {
    const session = withTasks(extTasksPort(server.rt.url), {});
    const events: TaskExecutionEvent<unknown>[] = [];
    try {
      const ex = await session.callTool('five_steps', { downstream: 'billing', apiKey: 'sk-live-SECRET' });
      expect(ex.kind).toBe('task');
      const taskId = ex.handle!.taskId;
      const settled = ex.settle({ onEvent: (e) => void events.push(e) });
      await waitForPaused(taskId);

      // Paused: still working for the client, saying so; released, nothing queued, no slot held.
      const paused = await server.mcp.getTask(taskId);
      expect(paused.status).toBe('working');
      expect(paused.statusMessage).toMatch(/^Paused: failed after 2 attempts; waiting for an operator/);
      expect(paused.statusMessage).not.toContain('unavailable'); // (the exception is for operators)
      expect(await queuedRuns(taskId)).toBe(0);
      expect(server.rt.workers!.running.has(taskId)).toBe(false);
      const other = await server.mcp.callTool('quick', {});
      expect((await server.mcp.waitForTask(other.taskId as string, undefined, 10_000)).status).toBe(
        'completed',
      );
      expect(await stepAttempts(taskId)).toEqual({ s1: 1, s2: 1 });

      // What operators see: paused, arguments redacted, each attempt's error.
      const listed = await cli('list', '--status', 'paused', '--json');
      expect(listed.code, listed.stderr).toBe(0);
      expect((JSON.parse(listed.stdout) as { taskId: string }[]).map((t) => t.taskId)).toEqual([taskId]);
      const history = (await adminGetTask(server.rt.db, taskId))!;
      expect(history.arguments).toEqual({ downstream: 'billing', apiKey: '[redacted]' });
      expect(history.attempts.map((a) => a.outcome)).toEqual(['crash_retry', 'paused']);
      expect(history.attempts[1]!.errorMessage).toBe('Error: downstream billing unavailable');
      expect(history.attempts[1]!.errorStack).toMatch(/at /);
      const shown = await cli('show', taskId);
      expect(shown.stdout).toContain('[redacted]');
      expect(shown.stdout).not.toContain('sk-live-SECRET');
      const metrics = await (await fetch(new URL('/metrics', server.rt.url))).text();
      expect(metrics).toMatch(/durable_mcp_tasks\{status="paused"\} 1/);

      downstreamUp.set('billing', true);
      const resumed = await cli('resume', taskId);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stdout).toBe(`${taskId}: resumed\n`);

      const { outcome } = await settled;
      expect(outcome.status).toBe('completed');
      // s1 and s2 ran once (attempt 1); s3 to s5 ran in the resumed attempt, once each after the outage.
      expect(await stepAttempts(taskId)).toEqual({ s1: 1, s2: 1, s3: 3, s4: 3, s5: 3 });
      expect(calls.get(taskId)).toEqual(['s1', 's2', 's3', 's3', 's3', 's4', 's5']);
      // The client saw it working and paused, then completed: never failed.
      const seen = events.flatMap((e) => (e.type === 'task' ? [e.task.status] : []));
      expect(seen).toContain('working');
      expect(seen).not.toContain('failed');

      const after = (await adminGetTask(server.rt.db, taskId))!;
      expect(after.task.pausedAt).toBeNull();
      // The step's own count started afresh with the resume (its last error kept for operators).
      expect(after.stepFailures).toEqual([
        expect.objectContaining({ name: 's3', failures: 0, lastError: 'downstream billing unavailable' }),
      ]);
      expect(after.actions).toEqual([
        expect.objectContaining({ action: 'resume', actor: expect.stringMatching(/^cli:.+@.+/), detail: {} }),
      ]);
      expect((await cli('show', taskId)).stdout).toMatch(/actions \(1\)[\s\S]*cli:.*resume/);
    } finally {
      await session.close();
    }
  });

  it('a cancel ends a paused task at once, recorded with who asked', async () => {
    const taskId = await startFiveSteps('ledger');
    await waitForPaused(taskId);
    const cancelled = await cli('cancel', taskId);
    expect(cancelled.stdout).toBe(`${taskId}: cancelled\n`);
    expect((await server.mcp.getTask(taskId)).status).toBe('cancelled');
    const history = (await adminGetTask(server.rt.db, taskId))!;
    expect(history.actions.map((a) => a.action)).toEqual(['cancel']);
    // Paused no more: not listed, nor counted, as paused.
    expect(history.task.pausedAt).toBeNull();
    const pausedGauge = async () =>
      (await (await fetch(new URL('/metrics', server.rt.url))).text()).match(
        /durable_mcp_tasks\{status="paused"\} (\d+)/,
      )?.[1];
    await waitFor(async () => (await pausedGauge()) === '0', { what: 'no task counted paused' });
    // A second cancel of the finished task changes nothing, and records nothing.
    expect((await cli('cancel', taskId)).stdout).toBe(`${taskId}: already cancelled\n`);
    expect((await adminGetTask(server.rt.db, taskId))!.actions.map((a) => a.action)).toEqual(['cancel']);
    // A paused task no longer: resuming it is refused by name.
    const resumed = await cli('resume', taskId);
    expect(resumed.code).toBe(1);
    expect(resumed.stdout).toBe(`${taskId}: not paused (no such task, or not paused now)\n`);
  });
});

describe('tasks fork', () => {
  it('re-runs steps s2–s5 of a finished task under a new id, s1 copied', async () => {
    downstreamUp.set('warehouse', true);
    const sourceId = await startFiveSteps('warehouse');
    expect((await server.mcp.waitForTask(sourceId, undefined, 20_000)).status).toBe('completed');

    const forked = await cli('fork', sourceId, '--from-step', 's2', '--json');
    expect(forked.code, forked.stderr).toBe(0);
    const { taskId } = JSON.parse(forked.stdout) as { taskId: string };
    expect(taskId).not.toBe(sourceId);
    const done = await server.mcp.waitForTask(taskId, undefined, 20_000);
    expect(done.status).toBe('completed');

    // The same principal reads it (the test client's), and its steps: s1 copied (as the fork's attempt 1),
    // s2–s5 run again in its first run (attempt 2).
    expect(await stepAttempts(taskId)).toEqual({ s1: 1, s2: 2, s3: 2, s4: 2, s5: 2 });
    expect(calls.get(taskId)).toEqual(['s2', 's3', 's4', 's5']);
    const source = (await adminGetTask(server.rt.db, sourceId))!;
    const fork = (await adminGetTask(server.rt.db, taskId))!;
    expect(fork.task.principal).toBe(source.task.principal);
    expect(fork.arguments).toEqual(source.arguments);
    expect(source.actions).toEqual([
      expect.objectContaining({ action: 'fork', detail: { fromStep: 's2', newTaskId: taskId } }),
    ]);
    expect(fork.actions).toEqual([
      expect.objectContaining({ action: 'forked', detail: { fromStep: 's2', sourceTaskId: sourceId } }),
    ]);
  });

  it('refuses a running task and an unknown step with one clear line', async () => {
    const runningId = await startFiveSteps('crm');
    await waitForPaused(runningId);
    const refused = await cli('fork', runningId);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      `durable-mcp-tasks: task ${runningId} is working: only a finished task can be forked`,
    );
    expect((await cli('cancel', runningId)).code).toBe(0);

    downstreamUp.set('mail', true);
    const doneId = await startFiveSteps('mail');
    await server.mcp.waitForTask(doneId, undefined, 20_000);
    const unknown = await cli('fork', doneId, '--from-step', 'nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim()).toBe(
      `durable-mcp-tasks: task ${doneId} has no step "nope"; its steps: s1, s2, s3, s4, s5`,
    );
  });
});

describe('bulk resume', () => {
  it('counts first, then resumes exactly the tasks its filter selects', async () => {
    const selected = await Promise.all([1, 2, 3].map(() => startFiveSteps('bulk-a')));
    const other = await startFiveSteps('bulk-b', 'five_steps_other');
    for (const id of [...selected, other]) await waitForPaused(id);
    downstreamUp.set('bulk-a', true);
    downstreamUp.set('bulk-b', true);

    // Without --yes: what it would resume, and nothing touched.
    const dryRun = await cli('resume', '--tool', 'five_steps', '--json');
    expect(dryRun.code, dryRun.stderr).toBe(0);
    const planned = JSON.parse(dryRun.stdout) as { wouldResume: number; tasks: { taskId: string }[] };
    expect(planned.wouldResume).toBe(3);
    expect(planned.tasks.map((t) => t.taskId).sort()).toEqual([...selected].sort());
    for (const id of selected) expect(await queuedRuns(id)).toBe(0);
    expect((await cli('resume', '--tool', 'five_steps')).stdout).toMatch(
      /^would resume 3 paused tasks:\n[\s\S]*run it again with --yes to resume them\n$/,
    );
    expect((await cli('resume', '--tool', 'five_steps', '--principal', 'nobody', '--yes')).stdout).toBe(
      'resumed 0 tasks\n',
    );

    const bulk = await cli('resume', '--tool', 'five_steps', '--since', '1h', '--yes', '--json');
    expect(bulk.code, bulk.stderr).toBe(0);
    const { resumed } = JSON.parse(bulk.stdout) as { resumed: string[] };
    expect([...resumed].sort()).toEqual([...selected].sort());
    for (const id of selected) {
      expect((await server.mcp.waitForTask(id, undefined, 20_000)).status).toBe('completed');
      expect((await adminGetTask(server.rt.db, id))!.actions).toEqual([
        expect.objectContaining({
          action: 'resume',
          detail: { filter: { tool: 'five_steps', pausedWithinMs: 3_600_000 } },
        }),
      ]);
    }
    // The other tool's task is untouched: still paused, nothing queued, no action recorded.
    const untouched = (await adminGetTask(server.rt.db, other))!;
    expect(untouched.task.pausedAt).not.toBeNull();
    expect(untouched.actions).toEqual([]);
    expect(await queuedRuns(other)).toBe(0);
  });

  it('pages through more than one batch, each task once, even one that pauses again meanwhile', async () => {
    // One paused task, copied row for row (new ids) past a batch of MAX_RESUME_BATCH.
    const source = await startFiveSteps('bulk-big', 'five_steps_other');
    await waitForPaused(source);
    await sql`
      insert into tasks
      select (jsonb_populate_record(null::tasks,
        to_jsonb(t) || jsonb_build_object('task_id', 'bulkcopy' || lpad(g::text, 16, '0')))).*
      from tasks t, generate_series(1, ${MAX_RESUME_BATCH + 4}) g
      where t.task_id = ${source}`.execute(server.tdb.db);
    const paused = await sql<{ task_id: string }>`
      select task_id from tasks where tool_name = 'five_steps_other' and paused_at is not null`.execute(
      server.tdb.db,
    );
    const expected = paused.rows.map((r) => r.task_id).sort();
    expect(expected.length).toBeGreaterThan(MAX_RESUME_BATCH);

    const dryRun = await cli('resume', '--tool', 'five_steps_other');
    expect(dryRun.stdout).toMatch(
      new RegExp(
        `^would resume ${expected.length} paused tasks \\(the first ${MAX_RESUME_BATCH} listed\\):\n`,
      ),
    );
    // (The downstream stays down: a resumed task that runs pauses again, and must not be resumed twice.)
    const bulk = await cli('resume', '--tool', 'five_steps_other', '--yes', '--json');
    expect(bulk.code, bulk.stderr).toBe(0);
    const { resumed } = JSON.parse(bulk.stdout) as { resumed: string[] };
    expect([...resumed].sort()).toEqual(expected);
    // Each one queued like any run: a delivery lost before its claim would be redelivered past its deadline.
    const undated = await sql<{ n: string }>`
      select count(*)::text as n from tasks
      where task_id in (${sql.join(expected)}) and status = 'working' and lease_expires_at is null`.execute(
      server.tdb.db,
    );
    expect(undated.rows[0]!.n).toBe('0');
    const audited = await sql<{ n: string }>`
      select count(*)::text as n from task_actions
      where action = 'resume' and task_id in (${sql.join(expected)})`.execute(server.tdb.db);
    expect(Number(audited.rows[0]!.n)).toBe(expected.length);
  });

  it('a bulk resume without a filter is refused', async () => {
    const refused = await cli('resume');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      'durable-mcp-tasks: name task ids, or select them with --tool, --principal or --since',
    );
  });
});
