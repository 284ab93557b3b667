import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool } from '../define.ts';

/** The event type each matching row goes out as (a tool's types are vendor-prefixed, SEP-2694). */
export const SCAN_ROW_EVENT = 'com.example.scan/row';

/** Row `i`'s value, the same on every run (a stand-in for reading a table). */
export const scanValue = (i: number) => (i * 7_919) % 1_000;

/**
 * A data job that says what it finds as it goes: the rows are scanned a batch per step, each matching
 * row emitted as an event the moment it is found, and a line of partial output after each batch. A
 * client follows them live with tasks/stream (or GET /mcp/tasks/{taskId}/events) and resumes after a
 * disconnect; a worker killed mid-batch runs the batch again, and no reader sees a row twice.
 */
export const scanRows = defineTool({
  name: 'scan_rows',
  title: 'Scan rows, reporting matches live',
  description:
    'A data job with live output: scans `rows` rows, `batchSize` per step (each taking `batchMs`), and ' +
    'emits every row whose value is under `threshold` as a `com.example.scan/row` event, with a line of ' +
    'partial output per batch; returns the count. Always a task: follow its events with tasks/stream.',
  inputSchema: z.object({
    rows: z.number().int().min(1).max(1_000_000).default(1_000).describe('Rows to scan'),
    batchSize: z.number().int().min(1).max(10_000).default(100).describe('Rows per step'),
    batchMs: z.number().int().min(0).max(60_000).default(0).describe('Time each batch takes (ms)'),
    threshold: z.number().int().min(0).max(1_000).default(1_000).describe('Rows valued under it match'),
  }),
  taskSupport: 'required',
  async handler({ rows, batchSize, batchMs, threshold }, ctx) {
    let matches = 0;
    for (let start = 0, batch = 0; start < rows; start += batchSize, batch++) {
      const end = Math.min(rows, start + batchSize);
      const found = await ctx.step(`batch-${batch}`, async (signal) => {
        if (batchMs > 0) await delay(batchMs, undefined, { signal });
        let n = 0;
        for (let row = start; row < end; row++) {
          const value = scanValue(row);
          if (value >= threshold) continue;
          n++;
          await ctx.emit(SCAN_ROW_EVENT, { row, value });
        }
        return n;
      });
      matches += found;
      ctx.status(`Scanned ${end} of ${rows} rows`);
      await ctx.partial([{ type: 'text', text: `rows ${start}–${end - 1}: ${found} matching` }]);
    }
    return {
      content: [{ type: 'text', text: `${matches} of ${rows} rows matched` }],
      structuredContent: { rows, matches },
    };
  },
});
