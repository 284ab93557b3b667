import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool } from '../define.ts';

/** One shard's checksum (a stand-in for reading and hashing a file of a dataset). */
const checksum = (shard: string) => createHash('sha256').update(shard).digest('hex').slice(0, 16);

/**
 * Fan-out in one data job: the shards are listed once (a step), then checksummed in parallel by
 * `ctx.map`, `concurrency` at a time over every worker of the pool, each shard checkpointed on its own;
 * the task waits without a slot, its statusMessage counting shards, and returns the checksums in order.
 */
export const checksumShards = defineTool({
  name: 'checksum_shards',
  title: 'Checksum a dataset shard by shard',
  description:
    'A data job fanned out: checksums `shards` shards in parallel, at most `concurrency` at a time on any ' +
    'worker, each taking `shardMs`; returns the checksums in shard order. Always a task.',
  inputSchema: z.object({
    shards: z.number().int().min(1).max(100_000).describe('Shards to checksum'),
    concurrency: z.number().int().min(1).max(1_000).default(8).describe('Shards at once'),
    shardMs: z.number().int().min(0).max(60_000).default(0).describe('Time each shard takes (ms)'),
  }),
  taskSupport: 'required',
  async handler({ shards, concurrency, shardMs }, ctx) {
    const names = await ctx.step('list', () => Array.from({ length: shards }, (_, i) => `shard-${i}`));
    const sums = await ctx.map(
      'checksum',
      names,
      async (shard, _index, signal) => {
        if (shardMs > 0) await delay(shardMs, undefined, { signal });
        return checksum(shard);
      },
      { concurrency, retry: { maxAttempts: 3, backoff: { initialMs: 500 } } },
    );
    return {
      content: [{ type: 'text', text: `${sums.length} shards checksummed` }],
      structuredContent: { shards: sums.length, first: sums[0]!, last: sums.at(-1)! },
    };
  },
});
