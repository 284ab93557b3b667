// Our tasks/stream read by a reader written from the SEP-2694 draft alone
// (test/helpers/independent-event-reader.ts): a scan_rows task's events, read while the task runs,
// disconnecting and resuming with `after` several times: no gap, no repeat, the draft's rules kept.
import { describe, expect, it } from 'vitest';
import { SCAN_ROW_EVENT, scanValue } from '../../src/tools/shipped/scan-rows.ts';
import { readDraftTaskStream, type DraftTaskEvent } from '../helpers/independent-event-reader.ts';
import { useTestServer } from '../helpers/server-process.ts';

describe('tasks/stream, read by the draft-only reader', () => {
  const server = useTestServer();

  it('reads a running scan_rows task in pieces, resuming after the last seq each time, each event once', async () => {
    const rows = 600;
    const args = { rows, batchSize: 50, batchMs: 150, threshold: 100 };
    const { taskId } = await server.mcp.callTool('scan_rows', args);
    const events: DraftTaskEvent[] = [];
    const violations: string[] = [];
    let after: number | undefined;
    let disconnectsWhileWorking = 0;
    for (let reads = 0; ; reads++) {
      expect(reads, 'reads before the stream ended').toBeLessThan(200);
      const read = await readDraftTaskStream(server.rt.url, taskId, {
        ...(after === undefined ? {} : { after }),
        stopAfter: 7,
      });
      violations.push(...read.violations);
      events.push(...read.events);
      if (read.end === 'result') break;
      expect(read.end, JSON.stringify(read.error)).toBe('stopped');
      after = read.events.at(-1)!.seq;
      if ((await server.mcp.getTask(taskId)).status === 'working') disconnectsWhileWorking++;
    }
    expect(violations).toEqual([]);
    expect(disconnectsWhileWorking).toBeGreaterThanOrEqual(3);
    // Our departure from the draft: a task's first event is 1, not 0 (so `after: 0` is "from the start").
    expect(events[0]?.seq).toBe(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const matching = Array.from({ length: rows }, (_, i) => i).filter((i) => scanValue(i) < 100);
    expect(events.filter((e) => e.type === SCAN_ROW_EVENT).map((e) => e.payload.row)).toEqual(matching);
    expect(events.filter((e) => e.type === 'dev.durable-mcp-tasks/partial')).toHaveLength(rows / 50);
    expect(events.at(-1)).toMatchObject({
      type: 'dev.durable-mcp-tasks/status',
      payload: { status: 'completed' },
    });

    // At the end: an empty result at once, nothing sent (the draft's "MUST return immediately").
    const atEnd = await readDraftTaskStream(server.rt.url, taskId, { after: events.at(-1)!.seq });
    expect(atEnd).toMatchObject({ end: 'result', events: [], violations: [] });
    // Without a cursor: every event kept, from the earliest, the same as read in pieces.
    const whole = await readDraftTaskStream(server.rt.url, taskId);
    expect(whole.violations).toEqual([]);
    expect(whole.events).toEqual(events);
  }, 60_000);

  it('answers a cursor that is not a non-negative integer with -32602', async () => {
    const { taskId } = await server.mcp.callTool('scan_rows', { rows: 10 });
    for (const after of [-1, 2.5]) {
      const read = await readDraftTaskStream(server.rt.url, taskId, { after });
      expect(read).toMatchObject({ end: 'error', error: { code: -32602 } });
    }
  });
});
