// The tools module (`--tools`) of the events scenario's servers and worker: the shipped tools and two
// that emit task events. `bench_ticks` emits at a steady pace, each event stamped with the wall-clock
// time of its emit (for the latency from emit to client, and as steady traffic for readers);
// `bench_flood` emits as fast as a plain loop can (for the write path's throughput).
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/index.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';

/** The type of every event these tools emit. */
export const BENCH_EVENT = 'com.example.bench/tick';

/**
 * Wall-clock time in milliseconds with sub-millisecond precision, comparable between processes of the
 * same machine (each maps its monotonic clock onto the wall clock once, when it starts).
 */
export const wallClockMs = (): number => performance.timeOrigin + performance.now();

const benchTicks = defineTool({
  name: 'bench_ticks',
  description:
    'emits `events` events `intervalMs` apart, each `{i, at}` with `at` the wall-clock time of its emit (benchmark tool)',
  inputSchema: z.object({
    events: z.number().int().min(1).max(10_000_000),
    intervalMs: z.number().min(0).max(60_000),
  }),
  taskSupport: 'required',
  async handler({ events, intervalMs }, ctx) {
    for (let i = 1; i <= events; i++) {
      // (A cancel ends the wait: the task ends cancelled.)
      await delay(intervalMs, undefined, { signal: ctx.signal });
      await ctx.emit(BENCH_EVENT, { i, at: wallClockMs() });
    }
    return { content: [{ type: 'text', text: `${events} events` }] };
  },
});

const benchFlood = defineTool({
  name: 'bench_flood',
  description: 'emits `{i}` events in a plain awaited loop for `seconds` (benchmark tool)',
  inputSchema: z.object({ seconds: z.number().positive().max(3_600) }),
  taskSupport: 'required',
  async handler({ seconds }, ctx) {
    const end = performance.now() + seconds * 1000;
    let i = 0;
    // The loop a tool author writes: each emit awaited (it resolves at once until 1,000 are queued).
    while (performance.now() < end) await ctx.emit(BENCH_EVENT, { i: ++i });
    return { content: [{ type: 'text', text: `${i} events` }], structuredContent: { emitted: i } };
  },
});

export const tools: readonly ToolDefinition[] = [...SHIPPED_TOOLS, benchTicks, benchFlood];
