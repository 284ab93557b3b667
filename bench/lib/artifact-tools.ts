// The tools module (`--tools`) of the artifacts scenario's server and worker: the shipped tools and
// `bench_bytes`, which writes pre-built 64 KiB blocks through ctx.artifact. Its producer costs nothing (no
// rows to format, no allocation), so what a write measures is ctx.artifact's path into Postgres.
import { createCipheriv, createHash } from 'node:crypto';
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../../src/index.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';

export const MIB = 1_048_576;
const BLOCK_BYTES = 65_536;
export const BENCH_ARTIFACT = 'bytes.bin';

/**
 * One MiB of incompressible bytes, the same in every process (AES-CTR of zeros under a fixed key): each
 * MiB of an artifact, and each chunk of the floor's table.
 */
export const MIB_OF_BYTES: Buffer = createCipheriv(
  'aes-128-ctr',
  Buffer.alloc(16, 7),
  Buffer.alloc(16),
).update(Buffer.alloc(MIB));

const BLOCKS = Array.from({ length: MIB / BLOCK_BYTES }, (_, i) =>
  MIB_OF_BYTES.subarray(i * BLOCK_BYTES, (i + 1) * BLOCK_BYTES),
);

function* blocks(mebibytes: number): Generator<Buffer> {
  for (let i = 0; i < mebibytes * BLOCKS.length; i++) yield BLOCKS[i % BLOCKS.length]!;
}

/** The SHA-256 of a `mebibytes` MiB artifact of bench_bytes (hex). */
export function benchBytesSha256(mebibytes: number): string {
  const hash = createHash('sha256');
  for (let i = 0; i < mebibytes; i++) hash.update(MIB_OF_BYTES);
  return hash.digest('hex');
}

const benchBytes = defineTool({
  name: 'bench_bytes',
  description: `writes \`mebibytes\` MiB of pre-built 64 KiB blocks as the artifact ${BENCH_ARTIFACT} (benchmark tool)`,
  inputSchema: z.object({ mebibytes: z.number().int().min(0).max(65_536) }),
  taskSupport: 'required',
  async handler({ mebibytes }, ctx) {
    return { content: [await ctx.artifact(BENCH_ARTIFACT, blocks(mebibytes))] };
  },
});

export const tools: readonly ToolDefinition[] = [...SHIPPED_TOOLS, benchBytes];
