/**
 * A step's `maxAttempts` bounds how often its body starts, whatever crashes: a step whose body SIGKILLs
 * its real worker process every time (so no failure is ever recorded by the worker that ran it) starts
 * exactly `maxAttempts` times, under as many workers, and its task then pauses (`onExhausted: 'pause'`)
 * saying so. Without counting starts durably, each new worker would run the body again, forever.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseEnv } from '../helpers/database-env.ts';
import { runCli } from '../helpers/cli.ts';
import { killsItsWorker } from '../helpers/crashing-tools.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { FAST_ENV, startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { Processes, type ClusterProcess } from '../helpers/system/processes.ts';

let tdb: TestDatabase;
let server: Awaited<ReturnType<typeof startTestProcess>>;
let procs: Processes;
let mcp: RawMcp;

beforeAll(async () => {
  tdb = await createTestDatabase();
  server = await startTestProcess({ databaseUrl: tdb.url, role: 'server', tools: [killsItsWorker] });
  mcp = new RawMcp(server.url);
  // A lapsed lease is found by the workers' sweep: short leases and sweeps keep the takeovers quick.
  procs = new Processes({
    ...FAST_ENV,
    ...databaseEnv(tdb.url),
    LOG_LEVEL: 'warn',
    LEASE_MS: '1000',
    SWEEP_INTERVAL_MS: '200',
  });
}, 60_000);
afterAll(async () => {
  await procs?.stopAll();
  await server?.stop();
  await tdb?.drop();
});

/** A worker process serving the crashing tools; it is expected to die. */
function startWorker(): ClusterProcess {
  const worker = procs.start('worker', {
    args: ['workers/main.ts', '--tools', 'test/helpers/crashing-tools.ts'],
  });
  worker.expectExit();
  return worker;
}

/**
 * Keeps a worker running (each one dies in the step's body; the next takes the task over once the lease
 * lapses) until the task pauses: the task as polled, and how many workers it took.
 */
async function untilPaused(
  taskId: string,
  starts: string,
): Promise<{ task: Record<string, any>; workers: number }> {
  let worker = startWorker();
  let workers = 1;
  const task = await waitFor(
    async () => {
      if (!worker.alive) {
        worker = startWorker();
        workers++;
      }
      const polled = await mcp.getTask(taskId);
      return typeof polled.statusMessage === 'string' && polled.statusMessage.startsWith('Paused:') && polled;
    },
    {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: () => `the task paused (body starts: ${readStarts(starts).join(', ')})`,
    },
  );
  await worker.kill();
  return { task, workers };
}

describe("a step's maxAttempts under workers killed mid-step", () => {
  it(
    'starts the body exactly maxAttempts times, then pauses the task; a resume counts afresh',
    { timeout: 150_000 },
    async () => {
      const starts = path.join(mkdtempSync(path.join(tmpdir(), 'step-starts-')), 'starts');
      const { taskId } = await mcp.callTool('kills_its_worker', { starts });
      const paused = await untilPaused(taskId as string, starts);
      expect(readStarts(starts)).toEqual(['1', '2']);
      expect(paused.workers).toBe(3);
      expect(paused.task).toMatchObject({
        status: 'working',
        statusMessage: 'Paused: step "gate" failed after 2 attempts; waiting for an operator to resume it',
      });

      const resumed = await runCli(['tasks', 'resume', taskId as string], { env: { DATABASE_URL: tdb.url } });
      expect(resumed.code).toBe(0);
      await untilPaused(taskId as string, starts);
      expect(readStarts(starts)).toEqual(['1', '2', '1', '2']);
    },
  );
});

function readStarts(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}
