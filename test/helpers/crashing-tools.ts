// A tools module for real worker processes (`worker --tools test/fixtures/crashing-tools.ts`) whose
// tools kill the worker that runs them: crashes no handler could catch.
import { appendFileSync } from 'node:fs';
import { z } from 'zod';
import { defineTool } from '../../src/index.ts';

/**
 * A step whose body SIGKILLs its own worker each time it starts, after appending its attempt number to
 * the file `starts`: only the step's `maxAttempts`, counted as the body starts, ends it (paused).
 */
export const killsItsWorker = defineTool({
  name: 'kills_its_worker',
  description: 'A step that kills its worker each time (test tool)',
  inputSchema: z.object({ starts: z.string() }),
  taskSupport: 'required',
  retry: { onExhausted: 'pause' },
  async handler({ starts }, ctx) {
    await ctx.step(
      'gate',
      (_signal, { attempt }) => {
        appendFileSync(starts, `${attempt}\n`);
        process.kill(process.pid, 'SIGKILL');
      },
      { retry: { maxAttempts: 2, backoff: { initialMs: 0 } } },
    );
    return { content: [{ type: 'text', text: 'the gate let it through' }] };
  },
});

export const tools = [killsItsWorker];
