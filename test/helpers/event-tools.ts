// Tools that emit task events (ctx.emit, ctx.partial), for the event tests: one that crashes once after
// emitting (its re-run must not write them twice), one whose emits break the rules.
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';

const runs = new Map<string, number>();

/**
 * Emits between steps and inside a step's body, then crashes on its first run (after the events were
 * written); the second run emits the same events again, and the store must keep one of each.
 */
export const emitThenCrash = defineTool({
  name: 'emit_then_crash',
  description: 'emits 5 events, crashes once, emits 5 more (test tool)',
  inputSchema: z.object({ tag: z.string() }),
  taskSupport: 'required',
  async handler({ tag }, ctx) {
    const run = (runs.get(tag) ?? 0) + 1;
    runs.set(tag, run);
    for (let i = 0; i < 3; i++) await ctx.emit('com.example.test/before', { i });
    await ctx.step('body', async () => {
      for (let i = 0; i < 2; i++) await ctx.emit('com.example.test/body', { i });
      return 'done';
    });
    if (run === 1) {
      await ctx.step('flush-point', () => 'flushed');
      // (Written before the crash: the leg's end flushes them whatever it came to.)
      throw new Error('first run crashes after emitting');
    }
    for (let i = 0; i < 5; i++) await ctx.emit('com.example.test/after', { i });
    return { content: [{ type: 'text', text: `run ${run}` }] };
  },
});

/** Emits what its arguments say, to see each rule refused with its message. */
export const emitBadly = defineTool({
  name: 'emit_badly',
  description: 'emits an event that breaks a rule (test tool)',
  inputSchema: z.object({
    type: z.string(),
    payload: z.unknown().optional(),
    count: z.number().int().default(1),
    // (Arguments holding a NUL are refused before any task exists: the tool makes one itself.)
    withNul: z.boolean().default(false),
  }),
  taskSupport: 'required',
  async handler({ type, payload, count, withNul }, ctx) {
    for (let i = 0; i < count; i++) await ctx.emit(type, withNul ? { s: 'nul \u0000' } : payload);
    return { content: [{ type: 'text', text: 'emitted' }] };
  },
});

/**
 * Emits one type on its first run and crashes, another type at the same place on its second: as if its
 * code changed under the task. The determinism guard must fail it.
 */
export const emitChangesType = defineTool({
  name: 'emit_changes_type',
  description: 'emits a different type where its first run emitted another (test tool)',
  inputSchema: z.object({ tag: z.string() }),
  taskSupport: 'required',
  async handler({ tag }, ctx) {
    const run = (runs.get(tag) ?? 0) + 1;
    runs.set(tag, run);
    await ctx.emit(run === 1 ? 'com.example.test/old' : 'com.example.test/new', {});
    await ctx.step('point', () => 'p');
    if (run === 1) throw new Error('first run crashes after emitting');
    return { content: [{ type: 'text', text: 'unreachable' }] };
  },
});
