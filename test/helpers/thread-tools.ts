// A tools module for sync-call threads (they import it, as a `--tools` module): a handler that holds
// its thread's CPU without ever yielding until the test lets it go, and handlers that use what crosses
// from a thread to the HTTP process (progress, input, the abort signal, errors). Files are how the test
// sees into a thread.
import { existsSync, writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';

/** How long a spin waits at most for its release file before it gives up (a failing test must not hang). */
const GIVE_UP_MS = 30_000;

/** Writes `startedFile`, then spins (no await, no timer: its event loop never turns) until `releaseFile` exists. */
export const cpuSpin = defineTool({
  name: 'cpu_spin',
  description: 'Holds the CPU, never yielding, until releaseFile exists (test tool)',
  inputSchema: z.object({ startedFile: z.string().optional(), releaseFile: z.string() }),
  handler({ startedFile, releaseFile }) {
    if (startedFile !== undefined) writeFileSync(startedFile, '');
    const giveUpAt = Date.now() + GIVE_UP_MS;
    while (!existsSync(releaseFile)) {
      if (Date.now() > giveUpAt) return { content: [{ type: 'text', text: 'gave up' }], isError: true };
    }
    return { content: [{ type: 'text', text: 'released' }] };
  },
});

/** Asks for a name (MRTR), reports progress twice, greets; throws when the name is `fail`. */
export const askName = defineTool({
  name: 'thread_ask_name',
  description: 'Asks for a name, then greets (test tool)',
  inputSchema: z.object({}),
  async handler(_args, ctx) {
    const answer = await ctx.elicit('name', {
      message: 'Your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    });
    const name = String(answer.content?.name);
    await ctx.progress(1, 2, 'asked');
    if (name === 'fail') throw new Error('no one is called fail');
    await ctx.progress(2, 2, 'greeting');
    return { content: [{ type: 'text', text: `hello ${name}` }] };
  },
});

/** Reports progress, then waits until its signal fires, and writes `abortedFile` when it does. */
export const waitForAbort = defineTool({
  name: 'thread_wait_for_abort',
  description: 'Waits until aborted (test tool)',
  inputSchema: z.object({ abortedFile: z.string() }),
  async handler({ abortedFile }, ctx) {
    await ctx.progress(1);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    writeFileSync(abortedFile, String(ctx.signal.reason));
    throw ctx.signal.reason;
  },
});

/** Says where it ran: `loop` (the HTTP process's event loop) or `thread`; spins `spinMs` first. */
export const whereRun = defineTool({
  name: 'thread_where',
  description: 'Says whether it ran on the event loop or a thread (test tool)',
  inputSchema: z.object({ spinMs: z.number().int().min(0).default(0) }),
  handler({ spinMs }) {
    const until = performance.now() + spinMs;
    while (performance.now() < until);
    return { content: [{ type: 'text', text: isMainThread ? 'loop' : 'thread' }] };
  },
});

export const tools = [cpuSpin, askName, waitForAbort, whereRun];

/** This module's URL, for the test server's `toolsModule`. */
export const THREAD_TOOLS_MODULE = import.meta.url;
