// Test tools that read steering messages (ctx.steering, SEP-2669 draft), and gates a test opens to let a
// running step go on (the workers run in the test's process).
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';

/** What each leg's reads returned, per task: one array of messages per leg (replayed reads included). */
export const legReads = new Map<string, string[][]>();

/** Tasks whose handler crashed once already (steer_collect's `crashAfter`). */
const crashed = new Set<string>();

interface Gate {
  entered: boolean;
  open: () => void;
  opened: Promise<void>;
}
const gates = new Map<string, Gate>();

function gate(key: string): Gate {
  let g = gates.get(key);
  if (g === undefined) {
    let open = () => {};
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { entered: false, open, opened };
    gates.set(key, g);
  }
  return g;
}

/** Whether a step is waiting at the gate `key` (`<taskId>:<step>`). */
export const atGate = (key: string) => gates.get(key)?.entered === true;

/** Lets the step waiting at (or coming to) `key` go on. */
export const openGate = (key: string) => gate(key).open();

/** Reads `count` messages with `ctx.steering.next()`, waiting for each; crashes once after `crashAfter`. */
export const steerCollect = defineTool({
  name: 'steer_collect',
  description: 'Reads steering messages one at a time (test tool)',
  inputSchema: z.object({ count: z.number().int(), crashAfter: z.number().int().optional() }),
  taskSupport: 'required',
  steering: true,
  async handler({ count, crashAfter }, ctx) {
    const taskId = ctx.taskId!;
    const read: string[] = [];
    legReads.set(taskId, [...(legReads.get(taskId) ?? []), read]);
    for (let i = 0; i < count; i++) {
      const next = await ctx.steering.next();
      read.push(`${next!.seq}:${next!.message}`);
      if (read.length === crashAfter && !crashed.has(taskId)) {
        crashed.add(taskId);
        throw new Error(`crash after reading ${crashAfter}`);
      }
    }
    return { content: [{ type: 'text', text: read.join(',') }] };
  },
});

/** One read that waits at most `timeoutMs`: the message, or "timed out". */
export const steerTimeout = defineTool({
  name: 'steer_timeout',
  description: 'Waits a while for one steering message (test tool)',
  inputSchema: z.object({ timeoutMs: z.number().int() }),
  taskSupport: 'required',
  steering: true,
  async handler({ timeoutMs }, ctx) {
    const next = await ctx.steering.next({ timeoutMs, statusMessage: 'Listening' });
    return { content: [{ type: 'text', text: next?.message ?? 'timed out' }] };
  },
});

/** `steps` steps, each held at its gate (`<taskId>:s<i>`) until the test opens it, then `pending()`. */
export const steerGated = defineTool({
  name: 'steer_gated',
  description: 'Gated steps, then every pending steering message (test tool)',
  inputSchema: z.object({ steps: z.number().int() }),
  taskSupport: 'required',
  steering: true,
  async handler({ steps }, ctx) {
    for (let i = 0; i < steps; i++) {
      await ctx.step(`s${i}`, async () => {
        const g = gate(`${ctx.taskId}:s${i}`);
        g.entered = true;
        await g.opened;
        return i;
      });
    }
    const pending = await ctx.steering.pending();
    const none = await ctx.steering.next({ timeoutMs: 0 });
    const text = pending.map((m) => `${m.seq}:${m.message}`).join(',');
    return { content: [{ type: 'text', text: `${text}|${none === undefined ? 'none' : 'more'}` }] };
  },
});

/** A tool that does not read steering: sleeps an hour, holding no slot. */
export const noSteering = defineTool({
  name: 'no_steering',
  description: 'Sleeps; reads no steering (test tool)',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async handler(_args, ctx) {
    await ctx.sleep('nap', 3_600_000);
    return { content: [{ type: 'text', text: 'woke' }] };
  },
});

export const STEERING_TOOLS = [steerCollect, steerTimeout, steerGated, noSteering];
