import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type RunningPostgres } from '../../src/db/embedded.ts';
import { createLogger } from '../../src/log.ts';
import type { ServerProcess } from '../../src/process/start.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { startTestProcess } from '../helpers/server-process.ts';

// A Postgres of this test's own, so that it can be stopped and started under load.
const dir = mkdtempSync(path.join(tmpdir(), 'mcp-dbfault-'));
chmodSync(dir, 0o755);
const pgOptions = {
  dataDir: path.join(dir, 'pg'),
  port: await freePort(),
  database: 'faults',
  log: createLogger('warn'),
};
let postgres: RunningPostgres;
let rt: ServerProcess & { url: string };
let mcp: RawMcp;

beforeAll(async () => {
  postgres = await startEmbeddedPostgres(pgOptions);
  rt = await startTestProcess({
    databaseUrl: postgres.connectionString,
    env: {
      LEASE_MS: '1500',
      SWEEP_INTERVAL_MS: '200',
      DB_CONNECT_TIMEOUT_MS: '1000',
      WORKER_POLL_INTERVAL_MS: '500',
    },
  });
  mcp = new RawMcp(rt.url);
}, 120_000);
afterAll(async () => {
  await rt?.stop();
  await postgres?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a Postgres restart under load', () => {
  it('fails requests fast during the outage, reconnects by itself, and loses no acknowledged task', async () => {
    const waiting = await mcp.callTool('confirm_action', { action: 'outlive the outage' });
    const job = await mcp.callTool('analyze_numbers', {
      count: 30_000,
      chunkSize: 1000,
      delayMsPerChunk: 100,
    });
    await mcp.waitForTask(waiting.taskId, (t) => t.status === 'input_required');
    await mcp.waitForTask(job.taskId, (t) => /^chunk \d+\/30$/.test(t.statusMessage ?? ''));

    await postgres.stop();
    // During the outage: an answer, not a hang. The process keeps serving.
    for (const [method, params] of [
      ['tasks/get', { taskId: job.taskId }],
      ['tools/call', { name: 'analyze_numbers', arguments: { count: 10 } }],
    ] as const) {
      // (A hang would fail the test by its timeout; the connect timeout here is 1 s.)
      const error = await mcp.error(method, params);
      expect(error).toMatchObject({ code: -32603, data: { retryAfterMs: 5_000 } });
      expect(error.message).toMatch(/cannot reach its database.*retry/);
    }
    expect(
      (await mcp.result('tools/call', { name: 'echo', arguments: { text: 'still here' } })).content[0].text,
    ).toBe('still here');

    postgres = await startEmbeddedPostgres(pgOptions);
    // Back without a restart of ours: the running job resumes from its checkpoints and finishes.
    const done = await mcp.waitForTask(job.taskId, undefined, 30_000);
    expect(done.status).toBe('completed');
    expect(done.result.structuredContent).toEqual(expectedAnalysis(30_000, 1000));
    // The task acknowledged before the outage is still there and still answerable.
    await mcp.result('tasks/update', {
      taskId: waiting.taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    expect((await mcp.waitForTask(waiting.taskId)).result.content[0].text).toBe(
      'confirmed: outlive the outage',
    );
    // New work flows again.
    const fresh = await mcp.callTool('analyze_numbers', { count: 100 });
    expect((await mcp.waitForTask(fresh.taskId)).status).toBe('completed');
  }, 90_000);
});

describe('a Postgres restart while processes start', () => {
  it('every process that starts during the outage, at any step of its start-up, waits and comes up', async () => {
    // Start-up runs several steps (connect, migrate, pg-boss, queue, LISTEN, secret); the restart lands
    // in a different one each round, as it did when a worker started during the cluster test's restart.
    const started: Array<ServerProcess & { url: string }> = [];
    try {
      for (const delayMs of [0, 20, 40, 60, 80, 120, 160, 200]) {
        const starting = startTestProcess({
          databaseUrl: postgres.connectionString,
          role: delayMs % 40 === 0 ? 'worker' : 'server',
          env: { DB_CONNECT_TIMEOUT_MS: '1000', DB_STARTUP_TIMEOUT_MS: '60000' },
        });
        await new Promise((r) => setTimeout(r, delayMs));
        await postgres.stop({ mode: 'fast' });
        postgres = await startEmbeddedPostgres(pgOptions);
        started.push(await starting);
      }
      // Each came up whole: the servers answer, the workers run tasks.
      for (const s of started.filter((r) => r.url !== '')) {
        expect((await new RawMcp(s.url).result('server/discover')).resultType).toBe('complete');
      }
      const fresh = await mcp.callTool('analyze_numbers', { count: 100 });
      expect((await mcp.waitForTask(fresh.taskId, undefined, 30_000)).status).toBe('completed');
    } finally {
      await Promise.all(started.map((s) => s.stop()));
    }
  }, 120_000);
});
