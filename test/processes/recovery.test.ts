import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createBoss, RUN_QUEUE } from '../../src/queue/boss.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { databaseEnv } from '../helpers/database-env.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { mapItemsOf, mostItemsAtOnce } from '../helpers/map-items.ts';
import { FAST_ENV, startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
let tdb: TestDatabase;
let rt: ServerProcess & { url: string };
let mcp: RawMcp;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  tdb = await createTestDatabase();
  rt = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
  mcp = new RawMcp(rt.url);
});
// Each test starts its own workers: none may linger into the next one and take its tasks.
const killAll = async () => {
  const live = workers.splice(0).filter((w) => w.exitCode === null && w.signalCode === null);
  await Promise.all(live.map((w) => new Promise((resolve) => (w.once('exit', resolve), w.kill('SIGKILL')))));
};
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await rt?.stop();
  await tdb?.drop();
});

/** A real worker process (`npm run worker`'s command) on the test database. */
function worker(env: Record<string, string> = {}): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...FAST_ENV,
      ...databaseEnv(tdb.url),
      LOG_LEVEL: 'warn',
      SWEEP_INTERVAL_MS: '200',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  workers.push(child);
  return { child, exited: new Promise((resolve) => child.once('exit', () => resolve())) };
}

const steps = (taskId: string) =>
  tdb.db
    .selectFrom('task_steps')
    .select(['name', 'attempt'])
    .where('task_id', '=', taskId)
    .orderBy('created_at')
    .execute();

const job = { count: 40_000, chunkSize: 1000, delayMsPerChunk: 100 }; // 40 durable steps, ~4 s

async function startedTask(minSteps: number): Promise<string> {
  const { taskId } = await mcp.callTool('analyze_numbers', job);
  const deadline = Date.now() + 20_000;
  while ((await steps(taskId)).length < minSteps) {
    if (Date.now() > deadline) throw new Error('the task never got going');
    await sleep(20);
  }
  return taskId;
}

async function expectFinishedOnce(taskId: string) {
  const done = await mcp.waitForTask(taskId, undefined, 30_000);
  expect(done.status).toBe('completed');
  expect(done.result.structuredContent).toEqual(expectedAnalysis(job.count, job.chunkSize));
  const rows = await steps(taskId);
  // Every chunk checkpointed exactly once (the primary key forbids more), none lost.
  expect(rows.map((r) => r.name).sort()).toEqual(
    Array.from({ length: 40 }, (_, i) => `chunk-${i + 1}`).sort(),
  );
  return rows;
}

describe('crash recovery across processes', () => {
  it('a task waiting for a signal, then asleep, survives SIGKILL of every worker and a restart of the server', async () => {
    const first = worker();
    const { taskId } = await mcp.callTool('approved_export', { batches: 2, pauseMs: 2_000 });
    const waiting = await mcp.waitForTask(
      taskId,
      (t) => /^Waiting for approval: POST /.test(t.statusMessage ?? ''),
      20_000,
    );
    const link = new URL(waiting.statusMessage.slice('Waiting for approval: POST '.length));
    first.child.kill('SIGKILL');
    await first.exited;
    // Every instance restarts too: the wait lives in Postgres only.
    await rt.stop();
    rt = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    mcp = new RawMcp(rt.url);
    const approve = await fetch(new URL(link.pathname, rt.url), { method: 'POST', body: '{"approve":true}' });
    expect(approve.status).toBe(202);
    const second = worker();
    await mcp.waitForTask(taskId, (t) => /^Sleeping until /.test(t.statusMessage ?? ''), 20_000);
    second.child.kill('SIGKILL');
    await second.exited;
    worker();
    const done = await mcp.waitForTask(taskId, undefined, 30_000);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toEqual({ rows: 3_000, batches: 2 });
    expect(
      (await steps(taskId))
        .map((r) => r.name)
        .filter((n) => n.startsWith('batch-'))
        .sort(),
    ).toEqual(['batch-1', 'batch-2']);
  });

  it('a map of 200 items, 8 at a time, finishes on two workers with one SIGKILLed midway; no finished item runs again', async () => {
    const pair = [worker({ LEASE_MS: '1500' }), worker({ LEASE_MS: '1500' })];
    const { taskId } = await mcp.callTool('checksum_shards', { shards: 200, concurrency: 8, shardMs: 100 });
    // Midway: kill the worker that holds the most items right now (each holds a chain of its own).
    const holders = await waitFor(
      async () => {
        const items = await mapItemsOf(tdb.db, taskId);
        const completed = items.filter((i) => i.status === 'completed').length;
        const { rows } = await sql<{ leased_by: string; n: number }>`
        select leased_by, count(*)::int as n from tasks
        where parent_task_id = ${taskId} and status = 'working' and leased_by is not null
        group by leased_by order by n desc`.execute(tdb.db);
        return completed >= 50 && rows.length > 0 ? rows : undefined;
      },
      { timeoutMs: 30_000, what: 'the map getting halfway' },
    );
    const victim = pair.find((w) => holders[0]!.leased_by.split(':')[1] === String(w.child.pid))!;
    victim.child.kill('SIGKILL');
    await victim.exited;
    const finishedBeforeKill = new Set(
      (await mapItemsOf(tdb.db, taskId)).filter((i) => i.status === 'completed').map((i) => i.map_index),
    );

    const done = await mcp.waitForTask(taskId, undefined, 60_000);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toMatchObject({ shards: 200 });
    const items = await mapItemsOf(tdb.db, taskId);
    expect(items.map((i) => i.status)).toEqual(Array(200).fill('completed'));
    // An item that had finished was never claimed again; only those the dead worker held ran twice.
    for (const i of items) {
      expect(i.claims.length, `item ${i.map_index}`).toBe(
        finishedBeforeKill.has(i.map_index) ? 1 : i.claims.length,
      );
    }
    const rerun = items.filter((i) => i.claims.length > 1);
    expect(rerun.length).toBeGreaterThan(0);
    expect(rerun.length).toBeLessThanOrEqual(8);
    expect(rerun.every((i) => i.claims.length === 2)).toBe(true);
    // Both workers ran items, never more than 8 at once (the dead worker's items count until retaken).
    expect(new Set(items.flatMap((i) => i.claims.map((c) => c.worker))).size).toBe(2);
    expect(mostItemsAtOnce(items)).toBeLessThanOrEqual(8);
  });

  it('a worker killed with SIGKILL: another one takes the task over once the lease lapses and resumes it', async () => {
    const a = worker({ LEASE_MS: '1500' });
    const taskId = await startedTask(5);
    a.child.kill('SIGKILL');
    await a.exited;
    const killedAt = Date.now();
    const before = (await steps(taskId)).length;
    worker({ LEASE_MS: '1500' });
    const rows = await expectFinishedOnce(taskId);
    // The steps done before the kill stayed done: written by the first attempt, not repeated.
    expect(rows.slice(0, before).every((r) => r.attempt === 1)).toBe(true);
    expect(rows.slice(before).every((r) => r.attempt === 2)).toBe(true);
    const firstResumed = await tdb.db
      .selectFrom('task_steps')
      .select('created_at')
      .where('task_id', '=', taskId)
      .where('attempt', '=', 2)
      .orderBy('created_at')
      .executeTakeFirstOrThrow();
    console.log(
      `SIGKILL → first step of the new attempt: ${firstResumed.created_at.getTime() - killedAt} ms (lease 1500 ms)`,
    );
  });

  it('a worker frozen past its lease (SIGSTOP) cannot overwrite the attempt that replaced it', async () => {
    const a = worker({ LEASE_MS: '1500' });
    const taskId = await startedTask(5);
    a.child.kill('SIGSTOP');
    worker({ LEASE_MS: '1500' });
    // The replacement takes over, then the frozen worker wakes up mid-step, still believing it runs the task.
    await mcp.waitForTask(taskId, () => true);
    const deadline = Date.now() + 20_000;
    while (!(await steps(taskId)).some((r) => r.attempt === 2) && Date.now() < deadline) await sleep(20);
    a.child.kill('SIGCONT');
    const rows = await expectFinishedOnce(taskId);
    const firstOfAttempt2 = rows.findIndex((r) => r.attempt === 2);
    expect(firstOfAttempt2).toBeGreaterThan(0);
    // After the takeover every checkpoint belongs to the new attempt: the stale one wrote nothing more.
    expect(rows.slice(firstOfAttempt2).every((r) => r.attempt === 2)).toBe(true);
    const row = await tdb.db
      .selectFrom('tasks')
      .select('attempt')
      .where('task_id', '=', taskId)
      .executeTakeFirstOrThrow();
    expect(row.attempt).toBe(2);
  });

  it('a delivery fetched by a worker that died before claiming the task is redelivered', async () => {
    const { taskId } = await mcp.callTool('analyze_numbers', { count: 100 });
    // The "dead worker": fetches the run job and never acknowledges it (pg-boss keeps it active).
    const thief = createBoss({ connectionString: tdb.url, max: 1 });
    thief.on('error', () => {});
    await thief.start();
    const stolen = await thief.fetch(RUN_QUEUE, { batchSize: 10 });
    expect(stolen.map((j) => (j.data as { taskId: string }).taskId)).toContain(taskId);
    await thief.stop({ graceful: false });
    const jobs = await sql<{
      state: string;
    }>`select state from pgboss.job where data->>'taskId' = ${taskId}`.execute(tdb.db);
    expect(jobs.rows.map((j) => j.state)).toEqual(['active']); // pg-boss alone would wait for its expiry
    // Its claim deadline passes (REDELIVERY_MS; moved into the past here instead of waiting for it).
    await tdb.db
      .updateTable('tasks')
      .set({ lease_expires_at: new Date(Date.now() - 1) })
      .where('task_id', '=', taskId)
      .execute();
    worker();
    const done = await mcp.waitForTask(taskId, undefined, 20_000);
    expect(done.result.structuredContent).toEqual(expectedAnalysis(100, 100_000));
  });

  it('SIGTERM hands running tasks back at once instead of waiting for the lease', async () => {
    // A lease far longer than the test: only a hand-off lets the other worker continue in time.
    const a = worker({ LEASE_MS: '600000', SHUTDOWN_GRACE_MS: '5000' });
    const taskId = await startedTask(5);
    worker({ LEASE_MS: '600000' });
    a.child.kill('SIGTERM');
    await a.exited;
    const rows = await expectFinishedOnce(taskId);
    expect(rows.some((r) => r.attempt === 2)).toBe(true);
  });
});
