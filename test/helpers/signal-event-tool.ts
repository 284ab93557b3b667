// A tool whose events a test sees arrive while the task runs: it emits one event, waits for a signal
// (the test delivers it when it has seen that event), then emits another and completes.
import { z } from 'zod';
import { defineTool } from '../../src/tools/define.ts';

export const FIRST_EVENT = 'com.example.test/first';
export const SECOND_EVENT = 'com.example.test/second';

/** The status message while it waits: the signal's delivery URL after this prefix. */
const WAITING = 'Waiting for go: POST ';

export const emitAwaitSignal = defineTool({
  name: 'emit_await_signal',
  description: 'emits an event, waits for a signal, emits another (test tool)',
  inputSchema: z.object({ note: z.string().default('') }),
  taskSupport: 'required',
  async handler({ note }, ctx) {
    await ctx.emit(FIRST_EVENT, { note });
    const go = await ctx.createSignal('go');
    const got = await ctx.waitForSignal(go, { statusMessage: `${WAITING}${go.url}` });
    await ctx.emit(SECOND_EVENT, { got: got.status === 'delivered' ? got.payload : null });
    return { content: [{ type: 'text', text: 'done' }] };
  },
});

/** The signal's URL, from the status message of a task of this tool that waits for it (else undefined). */
export function signalUrlOf(statusMessage: unknown): string | undefined {
  return typeof statusMessage === 'string' && statusMessage.startsWith(WAITING)
    ? statusMessage.slice(WAITING.length)
    : undefined;
}
