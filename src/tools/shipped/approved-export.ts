import { z } from 'zod';
import { defineTool } from '../define.ts';

/** One batch of the export: its row count (a stand-in for a query and an upload). */
const exportBatch = (batch: number) => 1_000 * batch;

/**
 * The workflow primitives in one data job: it waits for an approval link (a signal: whoever holds the
 * link approves, with no other credential), then exports in batches (a step each), pausing between them
 * (a durable sleep). No worker slot is held while it waits or pauses.
 */
export const approvedExport = defineTool({
  name: 'approved_export',
  title: 'Export after an approval',
  description:
    'A data job that waits for an approval (POST {"approve": true} to the link in its status message), then ' +
    'exports `batches` batches, pausing `pauseMs` between them. Always a task.',
  inputSchema: z.object({
    batches: z.number().int().min(1).max(100).default(3).describe('Batches to export'),
    pauseMs: z.number().int().min(0).max(86_400_000).default(2_000).describe('Pause between batches (ms)'),
    approvalTimeoutMs: z
      .number()
      .int()
      .min(1_000)
      .max(7 * 86_400_000)
      .default(3_600_000)
      .describe('How long the approval may take (ms)'),
  }),
  taskSupport: 'required',
  async handler({ batches, pauseMs, approvalTimeoutMs }, ctx) {
    const approval = await ctx.createSignal('approval', { timeoutMs: approvalTimeoutMs });
    // The requestor sees the link: in this example they approve themselves (or forward it).
    const outcome = await ctx.waitForSignal(approval, {
      statusMessage: `Waiting for approval: POST ${approval.url}`,
    });
    if (outcome.status === 'timed_out') {
      return { content: [{ type: 'text', text: 'not exported: no approval in time' }], isError: true };
    }
    const approved = (outcome.payload as { approve?: unknown } | null)?.approve === true;
    if (!approved) return { content: [{ type: 'text', text: 'not exported: declined' }] };
    let rows = 0;
    for (let batch = 1; batch <= batches; batch++) {
      // A downstream hiccup retries the batch alone, backing off; five failures fail the task.
      rows += await ctx.step(`batch-${batch}`, () => exportBatch(batch), {
        retry: { maxAttempts: 5, backoff: { initialMs: 1_000, factor: 2 } },
      });
      ctx.status(`batch ${batch}/${batches}`);
      if (batch < batches) await ctx.sleep(`pause-${batch}`, pauseMs);
    }
    return {
      content: [{ type: 'text', text: `exported ${rows} rows in ${batches} batches` }],
      structuredContent: { rows, batches },
    };
  },
});
