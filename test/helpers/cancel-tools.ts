// Handlers that honour or ignore a cancel (CANCEL_GRACE_MS): for the tests that run workers in their own
// process, and as the `--tools` module of server and worker processes (the cluster test, `npm run bench --
// cancel`). A tag lets a test in the workers' process see when a handler started and returned, and let it go.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/tools/define.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';

/** `<tag>:started`, `<tag>:returned`, in the order the handlers of this process did them. */
export const handlerEvents: string[] = [];
const released = new Set<string>();

/** The ignoring handler of this tag returns now (with its result), as if its work had ended. */
export function release(tag: string): void {
  released.add(tag);
}

const args = z.object({ seconds: z.number().min(0).max(3_600), tag: z.string().default('') });

/** Works for `seconds` without ever looking at ctx.signal (a loop of short timers), then returns a result. */
export const ignoresCancel = defineTool({
  name: 'ignores_cancel',
  description: 'runs `seconds` ignoring its cancel signal, then returns (test tool)',
  inputSchema: args,
  taskSupport: 'required',
  async handler({ seconds, tag }) {
    handlerEvents.push(`${tag}:started`);
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until && !released.has(tag)) await new Promise((r) => setTimeout(r, 20));
    handlerEvents.push(`${tag}:returned`);
    return { content: [{ type: 'text', text: `the late result of ${tag}` }] };
  },
});

/** Waits `seconds` on ctx.signal: a cancel ends it at once. */
export const honoursCancel = defineTool({
  name: 'honours_cancel',
  description: 'waits `seconds` unless its cancel signal fires first (test tool)',
  inputSchema: args,
  taskSupport: 'required',
  async handler({ seconds, tag }, ctx) {
    handlerEvents.push(`${tag}:started`);
    await sleep(seconds * 1000, undefined, { signal: ctx.signal });
    handlerEvents.push(`${tag}:returned`);
    return { content: [{ type: 'text', text: `waited ${seconds} s` }] };
  },
});

export const CANCEL_TOOLS: readonly ToolDefinition[] = [ignoresCancel, honoursCancel];

/** The `--tools` module's export: the shipped tools and these. */
export const tools: readonly ToolDefinition[] = [...SHIPPED_TOOLS, ...CANCEL_TOOLS];
