// A tools module for real worker processes (`worker --tools test/helpers/child-tools.ts`): a parent that
// starts children and joins them, children that write their body's starts and ends to files (so a test
// counts them across processes), one that SIGKILLs its worker on its first run, and one that runs until
// cancelled.
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';

/** What a child does: `run` for `ms`, `kill-once` (SIGKILLs its worker the first time), `until-cancelled`. */
const BEHAVIOURS = ['run', 'kill-once', 'until-cancelled'] as const;

const mark = (dir: string, id: string, what: 'start' | 'end' | 'stopped') =>
  appendFileSync(path.join(dir, `${id}.${what}`), `${process.pid}\n`);

/** A child whose body's starts and ends are appended to `<dir>/<id>.start` and `<dir>/<id>.end`. */
export const countedChild = defineTool({
  name: 'counted_child',
  description: 'A child task whose starts and ends are counted in files (test tool)',
  inputSchema: z.object({ dir: z.string(), id: z.string(), ms: z.number().int(), does: z.enum(BEHAVIOURS) }),
  taskSupport: 'required',
  async handler({ dir, id, ms, does }, ctx) {
    mark(dir, id, 'start');
    if (does === 'kill-once' && !existsSync(path.join(dir, `${id}.killed`))) {
      writeFileSync(path.join(dir, `${id}.killed`), '');
      process.kill(process.pid, 'SIGKILL');
    }
    try {
      await sleep(does === 'until-cancelled' ? 600_000 : ms, undefined, { signal: ctx.signal });
    } catch (err) {
      mark(dir, id, 'stopped');
      throw err;
    }
    mark(dir, id, 'end');
    return { content: [{ type: 'text', text: id }] };
  },
});

/** Starts one counted_child per entry of `children` and joins them all: their ids, joined. */
export const countingParent = defineTool({
  name: 'counting_parent',
  description: 'Starts counted children and joins them (test tool)',
  inputSchema: z.object({
    dir: z.string(),
    children: z.array(z.object({ id: z.string(), ms: z.number().int(), does: z.enum(BEHAVIOURS) })),
  }),
  taskSupport: 'required',
  async handler({ dir, children }, ctx) {
    mark(dir, 'parent', 'start');
    const handles = [];
    for (const child of children) handles.push(await ctx.spawn('counted_child', { dir, ...child }));
    const results = await ctx.join(handles);
    mark(dir, 'parent', 'end');
    return {
      content: [
        { type: 'text', text: results.map((r) => (r.content[0] as { text: string }).text).join(',') },
      ],
    };
  },
});

export const tools = [countedChild, countingParent];
