import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool } from '../define.ts';

/** x_i = (i × 48271) mod 1000003: a deterministic sequence, so results can be checked exactly. */
export function sequenceValue(i: number): number {
  return (i * 48271) % 1000003;
}

interface Partial {
  sum: number;
  min: number;
  max: number;
}

function summarize(from: number, to: number): Partial {
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (let i = from; i <= to; i++) {
    const x = sequenceValue(i);
    sum += x;
    if (x < min) min = x;
    if (x > max) max = x;
  }
  return { sum, min, max };
}

export const analyzeNumbers = defineTool({
  name: 'analyze_numbers',
  title: 'Analyze numbers',
  description:
    'A long-running data job: sum, min, max and mean of x_i = (i * 48271) mod 1000003 for i = 1..count, ' +
    'one durable step per chunk. Runs as a task when the client supports tasks.',
  inputSchema: z.object({
    count: z.number().int().min(1).max(10_000_000).describe('How many values to analyze'),
    chunkSize: z.number().int().min(1).max(10_000_000).default(100_000).describe('Values per durable step'),
    delayMsPerChunk: z
      .number()
      .int()
      .min(0)
      .max(10_000)
      .default(0)
      .describe('Artificial delay per chunk (ms)'),
  }),
  taskSupport: 'optional',
  async handler({ count, chunkSize, delayMsPerChunk }, ctx) {
    const chunks = Math.ceil(count / chunkSize);
    const total: Partial = { sum: 0, min: Infinity, max: -Infinity };
    for (let k = 1; k <= chunks; k++) {
      // Cancellation is honoured between chunks.
      ctx.signal.throwIfAborted();
      const part = await ctx.step(`chunk-${k}`, async () => {
        if (delayMsPerChunk > 0) await sleep(delayMsPerChunk, undefined, { signal: ctx.signal });
        return summarize((k - 1) * chunkSize + 1, Math.min(k * chunkSize, count));
      });
      total.sum += part.sum;
      total.min = Math.min(total.min, part.min);
      total.max = Math.max(total.max, part.max);
      ctx.status(`chunk ${k}/${chunks}`);
      await ctx.progress(k, chunks, `chunk ${k}/${chunks}`);
    }
    const summary = {
      count,
      sum: total.sum,
      min: total.min,
      max: total.max,
      mean: total.sum / count,
      chunks,
    };
    return {
      content: [
        {
          type: 'text',
          text: `Analyzed ${count} values in ${chunks} chunks: sum=${summary.sum} min=${summary.min} max=${summary.max} mean=${summary.mean}`,
        },
      ],
      structuredContent: summary,
    };
  },
});
