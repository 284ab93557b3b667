// The `--tools` module of the compose-rate scenario (bench/compose-rate.ts): one tool whose starts are
// rate limited to BENCH_RATE_PER_SECOND a second, read here so that the server and every worker agree.
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/tools/define.ts';

export const RATE_PER_SECOND = Number(process.env.BENCH_RATE_PER_SECOND ?? 20);

/** Answers at once: the rate limit is all the scenario measures. */
export const rateLimitedNoop = defineTool({
  name: 'rate_limited_noop',
  description: `answers at once; at most ${RATE_PER_SECOND} starts a second (bench tool)`,
  inputSchema: z.object({ n: z.number().int() }),
  taskSupport: 'required',
  rateLimit: { limit: RATE_PER_SECOND, per: 1_000 },
  handler: ({ n }) => ({ content: [{ type: 'text', text: `n=${n}` }] }),
});

/** The `--tools` module's export. */
export const tools: readonly ToolDefinition[] = [rateLimitedNoop];
