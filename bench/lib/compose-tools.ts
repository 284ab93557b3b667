// The `--tools` module of the compose scenario's processes (bench/compose.ts): one unit of work, the same
// work as a child task (`bench_parent`: ctx.callTool), as n spawned and joined children (`bench_fanout`),
// and as n items of ctx.map (`bench_map`); and, only in processes started with BENCH_COMPOSE_SCHEDULE=1,
// a schedule calling `bench_tick` every second.
import { z } from 'zod';
import { defineSchedule, defineTool, type ScheduleDefinition, type ToolDefinition } from '../../src/index.ts';

/** The schedule the schedule part counts ticks of (its name and arguments make each tick's key). */
export const EVERY_SECOND = {
  name: 'bench-every-second',
  tool: 'bench_tick',
  arguments: {},
  principal: 'bench',
};

/** The unit of work: answers at once, so that what is measured is the composition around it. */
const work = defineTool({
  name: 'bench_work',
  description: 'answers `i` at once (benchmark tool)',
  inputSchema: z.object({ i: z.number().int() }),
  taskSupport: 'required',
  handler: ({ i }) => ({ content: [{ type: 'text', text: String(i) }] }),
});

const parent = defineTool({
  name: 'bench_parent',
  description: 'calls bench_work as one child task and answers its result (benchmark tool)',
  inputSchema: z.object({ i: z.number().int() }),
  taskSupport: 'required',
  handler: async ({ i }, ctx) => ctx.callTool('bench_work', { i }),
});

const fanout = defineTool({
  name: 'bench_fanout',
  description: 'spawns n bench_work children, then joins them all (benchmark tool)',
  inputSchema: z.object({ n: z.number().int().min(1).max(1_000) }),
  taskSupport: 'required',
  handler: async ({ n }, ctx) => {
    const handles = [];
    for (let i = 0; i < n; i++) handles.push(await ctx.spawn('bench_work', { i }));
    const results = await ctx.join(handles);
    return { content: [{ type: 'text', text: `${results.length} children` }] };
  },
});

const mapped = defineTool({
  name: 'bench_map',
  description: "runs bench_work's work over n items with ctx.map, all of them at once (benchmark tool)",
  inputSchema: z.object({ n: z.number().int().min(1).max(1_000) }),
  taskSupport: 'required',
  handler: async ({ n }, ctx) => {
    const items = Array.from({ length: n }, (_, i) => i);
    const results = await ctx.map('work', items, (i) => String(i), { concurrency: n });
    return { content: [{ type: 'text', text: `${results.length} items` }] };
  },
});

const tick = defineTool({
  name: 'bench_tick',
  description: 'answers at once (benchmark tool, called by a schedule)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  handler: () => ({ content: [{ type: 'text', text: 'tick' }] }),
});

export const tools: readonly ToolDefinition[] = [work, parent, fanout, mapped, tick];

export const schedules: readonly ScheduleDefinition[] =
  process.env.BENCH_COMPOSE_SCHEDULE === '1'
    ? [
        defineSchedule({
          ...EVERY_SECOND,
          cron: '* * * * * *',
          tool: tick,
          // Every tick has its task: none skipped while another runs, none dropped while one restarts.
          overlap: 'allow',
          catchUp: { max: 100 },
        }),
      ]
    : [];
