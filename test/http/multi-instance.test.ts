import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../../src/process/start.ts';
import { expectedAnalysis } from '../helpers/analysis.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { startTestProcess } from '../helpers/server-process.ts';

let tdb: TestDatabase;
let a: ServerProcess & { url: string };
let b: ServerProcess & { url: string };
let worker: (ServerProcess & { url: string }) | undefined;

beforeAll(async () => {
  tdb = await createTestDatabase();
  // Two HTTP-only instances; no worker yet, so tasks stay queued until one starts.
  a = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
  b = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
});
afterAll(async () => {
  await worker?.stop();
  await b?.stop();
  await a?.stop();
  await tdb?.drop();
});

describe('several HTTP instances over one database', () => {
  it('serves a task created on one instance from the other, and runs it on a separate worker process', async () => {
    const onA = new RawMcp(a.url);
    const onB = new RawMcp(b.url);
    const confirm = await onA.callTool('confirm_action', { action: 'migrate' });
    const job = await onA.callTool('analyze_numbers', { count: 3000, chunkSize: 1000 });
    const queuedCancel = await onB.callTool('analyze_numbers', { count: 10 });

    // Visible on B at once, still queued: no worker runs yet.
    expect(await onB.getTask(job.taskId)).toMatchObject({ status: 'working', taskId: job.taskId });
    // A task no worker holds is cancelled at once, through either instance.
    await onA.result('tasks/cancel', { taskId: queuedCancel.taskId });
    expect((await onB.getTask(queuedCancel.taskId)).status).toBe('cancelled');

    worker = await startTestProcess({ databaseUrl: tdb.url, role: 'worker' });
    expect(worker.app).toBeUndefined();

    const done = await onB.waitForTask(job.taskId);
    expect(done.result.structuredContent).toEqual(expectedAnalysis(3000, 1000));

    await onA.waitForTask(confirm.taskId, (t) => t.status === 'input_required');
    await onB.result('tasks/update', {
      taskId: confirm.taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    const confirmed = await onA.waitForTask(confirm.taskId);
    expect(confirmed.result.content[0].text).toBe('confirmed: migrate');

    // The cancelled task was never run by the worker that started later.
    expect(await onA.getTask(queuedCancel.taskId)).toMatchObject({ status: 'cancelled' });
    const row = await tdb.db
      .selectFrom('tasks')
      .select('attempt')
      .where('task_id', '=', queuedCancel.taskId)
      .executeTakeFirstOrThrow();
    expect(row.attempt).toBe(0);
  });
});
