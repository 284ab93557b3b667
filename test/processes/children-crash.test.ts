/**
 * Child tasks over real worker processes SIGKILLed: the worker that ran the parent dies while its
 * children run, or a child kills its own worker; either way each child's body runs to its end exactly
 * once (counted in files across processes), no child is created twice, and the parent gets every
 * result. A cancel of the parent stops every child it did not start detached, on whichever worker.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databaseEnv } from '../helpers/database-env.ts';
import { tools as childTools } from '../helpers/child-tools.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { FAST_ENV, startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { Processes, type ClusterProcess } from '../helpers/system/processes.ts';

let tdb: TestDatabase;
let server: Awaited<ReturnType<typeof startTestProcess>>;
let procs: Processes;
let mcp: RawMcp;
const started: ClusterProcess[] = [];

beforeAll(async () => {
  tdb = await createTestDatabase();
  server = await startTestProcess({ databaseUrl: tdb.url, role: 'server', tools: childTools });
  mcp = new RawMcp(server.url);
  // A lapsed lease is found by the workers' sweep: short leases and sweeps keep the takeovers quick.
  procs = new Processes({
    ...FAST_ENV,
    ...databaseEnv(tdb.url),
    LOG_LEVEL: 'warn',
    LEASE_MS: '1000',
    SWEEP_INTERVAL_MS: '200',
    WORKER_CONCURRENCY: '8',
  });
}, 60_000);
// Each test starts its own workers: none may linger into the next one and take its tasks.
afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.kill()));
});
afterAll(async () => {
  await procs?.stopAll();
  await server?.stop();
  await tdb?.drop();
});

/** A worker process serving the child tools; the tests kill it. */
function startWorker(): ClusterProcess {
  const worker = procs.start(`worker-${started.length}`, {
    args: ['workers/main.ts', '--tools', 'test/helpers/child-tools.ts'],
  });
  worker.expectExit();
  started.push(worker);
  return worker;
}

/** The lines of `<dir>/<id>.<what>`: one per body start (or end, or stop), each the worker's pid. */
function marks(dir: string, id: string, what: 'start' | 'end' | 'stopped'): string[] {
  try {
    return readFileSync(path.join(dir, `${id}.${what}`), 'utf8')
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

const childRows = async (parent: string) =>
  (
    await sql<{ task_id: string; status: string; spawn_name: string }>`
      select task_id, status, spawn_name from tasks where spawned_by = ${parent} order by spawn_name`.execute(
      tdb.db,
    )
  ).rows;

/** Polls tasks/get until the task ended, restarting the worker whenever it died meanwhile. */
async function endedWithWorkers(taskId: string, worker: { current: ClusterProcess }) {
  return waitFor(
    async () => {
      if (!worker.current.alive) worker.current = startWorker();
      const task = await mcp.getTask(taskId);
      return ['completed', 'failed', 'cancelled'].includes(task.status as string) && task;
    },
    { timeoutMs: 60_000, intervalMs: 100, what: `task ${taskId} ending` },
  );
}

describe('child tasks under killed workers', () => {
  it(
    'the parent’s worker SIGKILLed while its children run: each child ends once, the parent gets every result',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'children-'));
      const children = ['a', 'b', 'c'].map((id) => ({ id, ms: 1_500, does: 'run' as const }));
      const first = startWorker();
      const { taskId } = await mcp.callTool('counting_parent', { dir, children });
      // Every child's body runs on the worker that ran the parent: then it dies.
      await waitFor(() => children.every((c) => marks(dir, c.id, 'start').length === 1), {
        timeoutMs: 30_000,
        what: 'every child started',
      });
      expect(marks(dir, 'a', 'start')).toEqual([String(first.pid)]);
      await first.kill();
      const worker = { current: startWorker() };
      const done = await endedWithWorkers(taskId as string, worker);
      expect(done.status).toBe('completed');
      expect(done.result.content[0].text).toBe('a,b,c');
      for (const { id } of children) expect(marks(dir, id, 'end')).toHaveLength(1);
      expect((await childRows(taskId as string)).map((c) => c.status)).toEqual([
        'completed',
        'completed',
        'completed',
      ]);
    },
  );

  it(
    'a child that SIGKILLs its worker runs again elsewhere; every child ends once, the parent gets every result',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'children-'));
      const children = [
        { id: 'steady', ms: 200, does: 'run' as const },
        { id: 'killer', ms: 200, does: 'kill-once' as const },
        { id: 'slow', ms: 2_000, does: 'run' as const },
      ];
      const worker = { current: startWorker() };
      const { taskId } = await mcp.callTool('counting_parent', { dir, children });
      const done = await endedWithWorkers(taskId as string, worker);
      expect(done.status).toBe('completed');
      expect(done.result.content[0].text).toBe('steady,killer,slow');
      expect(readdirSync(dir)).toContain('killer.killed');
      expect(marks(dir, 'killer', 'start')).toHaveLength(2);
      for (const { id } of children) expect(marks(dir, id, 'end')).toHaveLength(1);
      expect(await childRows(taskId as string)).toHaveLength(3);
    },
  );

  it(
    'a cancel of the parent stops every child, on whichever worker it runs',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'children-'));
      const children = ['x', 'y', 'z'].map((id) => ({ id, ms: 0, does: 'until-cancelled' as const }));
      startWorker();
      startWorker();
      const { taskId } = await mcp.callTool('counting_parent', { dir, children });
      await waitFor(() => children.every((c) => marks(dir, c.id, 'start').length === 1), {
        timeoutMs: 30_000,
        what: 'every child started',
      });
      await mcp.result('tasks/cancel', { taskId });
      await waitFor(async () => (await childRows(taskId as string)).every((c) => c.status === 'cancelled'), {
        timeoutMs: 30_000,
        what: 'every child cancelled',
      });
      expect((await mcp.getTask(taskId as string)).status).toBe('cancelled');
      // Each body was told (its abort signal fired), and none ran to its end.
      await waitFor(() => children.every((c) => marks(dir, c.id, 'stopped').length === 1), {
        timeoutMs: 30_000,
        what: 'every child body stopped',
      });
      for (const { id } of children) expect(marks(dir, id, 'end')).toEqual([]);
    },
  );
});
