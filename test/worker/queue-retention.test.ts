/**
 * pg-boss's job table stays bounded (QUEUE_JOB_RETENTION_S, QUEUE_MAINTENANCE_INTERVAL_S): a finished
 * run job is deleted once past its retention by the workers' maintenance, while the task it ran stays.
 * With pg-boss's own defaults (kept 7 days, maintenance once a day) the wait below times out.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';
import { RUN_QUEUE } from '../../src/queue/boss.ts';
import { startTestProcess, useTestServer } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const quick = defineTool({
  name: 'quick',
  description: 'Answers at once, as a task.',
  inputSchema: z.object({ n: z.number().int() }),
  taskSupport: 'required',
  handler: ({ n }) => ({ content: [{ type: 'text', text: String(n) }] }),
});

const RETENTION = { QUEUE_JOB_RETENTION_S: '1', QUEUE_MAINTENANCE_INTERVAL_S: '1' };

// An HTTP-only instance: every run goes through a pg-boss job (no local start).
const server = useTestServer({ role: 'server', tools: [quick], env: RETENTION });
let worker: Awaited<ReturnType<typeof startTestProcess>> | undefined;

beforeAll(async () => {
  worker = await startTestProcess({
    databaseUrl: server.tdb.url,
    role: 'worker',
    tools: [quick],
    env: RETENTION,
  });
});
afterAll(async () => {
  await worker?.stop();
});

async function runJobs(state: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*) as n from pgboss.job where name = ${RUN_QUEUE} and state = ${state}`.execute(
    server.tdb.db,
  );
  return Number(rows[0]?.n ?? 0);
}

describe('pg-boss job retention', () => {
  it('deletes finished run jobs past QUEUE_JOB_RETENTION_S and keeps the tasks', async () => {
    const ids: string[] = [];
    for (let n = 0; n < 10; n++) ids.push((await server.mcp.callTool('quick', { n })).taskId as string);
    for (const id of ids) expect((await server.mcp.waitForTask(id)).status).toBe('completed');
    // Each task ran through its job, and the jobs finished.
    expect(await runJobs('completed')).toBeGreaterThan(0);

    await waitFor(async () => (await runJobs('completed')) === 0, {
      timeoutMs: 30_000,
      what: 'the finished run jobs to be deleted',
    });
    for (const id of ids) expect((await server.mcp.getTask(id)).status).toBe('completed');
  });
});
