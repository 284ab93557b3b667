// ctx.artifact in a task's attempt: the source is cut into chunks as it is produced, each chunk written
// (fenced on the attempt) while the next one fills, then the artifact completes and its step is recorded
// in one statement. A replay gets the recorded link back without reading the source.
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import {
  ARTIFACT_CHUNK_BYTES,
  artifactLink,
  artifactNameProblem,
  artifactUri,
  SPILLED_RESULT_NAME,
  type ArtifactLink,
  type ArtifactOptions,
  type ArtifactSource,
} from '../core/artifacts.ts';
import { ProtocolError, ProtocolErrorCode } from '../core/errors.ts';
import type { Metrics } from '../core/metrics.ts';
import type { Database } from '../db/database.ts';
import { beginArtifact, completeArtifact, writeArtifactChunk } from '../tasks/store/artifact-writes.ts';
import type { ClaimedTask } from '../tasks/store/lease.ts';
import { infra } from './leg-stops.ts';

/** The step an artifact records its link under. */
export const artifactStepName = (name: string) => `artifact:${name}`;

export interface ArtifactWriterOptions {
  db: Kysely<Database>;
  task: ClaimedTask;
  signal: AbortSignal;
  /** The step runner's self-recording checkpoint (see createStepRunner). */
  recorded: <T>(name: string, record: (position: number) => Promise<T>) => Promise<T>;
  /** An artifact's HTTP download URL. */
  artifactUrl: (taskId: string, name: string) => string;
  /** MAX_ARTIFACT_BYTES: a larger artifact fails the task (ArtifactTooLargeError); unlimited when undefined. */
  maxBytes?: number | undefined;
  metrics?: Metrics | undefined;
  chunkBytes?: number | undefined;
}

/** An artifact grew past MAX_ARTIFACT_BYTES: the task fails at once with this (a retry would do the same). */
export class ArtifactTooLargeError extends ProtocolError {
  constructor(name: string, maxBytes: number) {
    super(
      ProtocolErrorCode.InternalError,
      `artifact "${name}" is larger than MAX_ARTIFACT_BYTES (${maxBytes} bytes): what it wrote is discarded`,
    );
  }
}

/** `ctx.artifact` of one attempt. */
export function createArtifactWriter(opts: ArtifactWriterOptions) {
  return async function artifact(
    name: string,
    source: ArtifactSource,
    { mimeType }: ArtifactOptions = {},
  ): Promise<ArtifactLink> {
    const problem = artifactNameProblem(name);
    if (problem !== undefined) throw new TypeError(`ctx.artifact: ${problem}`);
    if (name === SPILLED_RESULT_NAME) {
      throw new TypeError(
        `ctx.artifact: "${SPILLED_RESULT_NAME}" is the name of a result too large to store inline`,
      );
    }
    const type =
      mimeType ?? (typeof source === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream');
    return opts.recorded(artifactStepName(name), (position) =>
      writeArtifact(opts, { name, mimeType: type, source, position }),
    );
  };
}

/**
 * Writes `source` as the attempt's artifact `name` and records the step `artifact:<name>` with its link.
 * At most two chunks are held: the one being written and the one filling.
 */
export async function writeArtifact(
  opts: Omit<ArtifactWriterOptions, 'recorded'>,
  a: { name: string; mimeType: string; source: ArtifactSource; position: number | null },
): Promise<ArtifactLink> {
  const { db, task, signal } = opts;
  const chunkSize = opts.chunkBytes ?? ARTIFACT_CHUNK_BYTES;
  const fence = { taskId: task.taskId, attempt: task.attempt };
  const artifactId = await beginArtifact(db, {
    ...fence,
    name: a.name,
    mimeType: a.mimeType,
    chunkSize,
  }).catch(infra);
  const hash = createHash('sha256');
  let size = 0;
  let seq = 0;
  let writing: Promise<void> = Promise.resolve();
  for await (const chunk of rechunk(a.source, chunkSize)) {
    await writing;
    signal.throwIfAborted();
    if (opts.maxBytes !== undefined && size + chunk.length > opts.maxBytes) {
      throw new ArtifactTooLargeError(a.name, opts.maxBytes);
    }
    hash.update(chunk);
    size += chunk.length;
    writing = writeArtifactChunk(db, { ...fence, artifactId, seq: seq++, data: chunk }).catch(infra);
    writing.catch(() => {}); // awaited before the next chunk, or below
  }
  await writing;
  signal.throwIfAborted();
  const sha256 = hash.digest('hex');
  const link = artifactLink({
    uri: artifactUri(task.taskId, a.name),
    name: a.name,
    mimeType: a.mimeType,
    size,
    downloadUrl: opts.artifactUrl(task.taskId, a.name),
    sha256,
  });
  await completeArtifact(db, {
    ...fence,
    artifactId,
    size,
    chunks: seq,
    sha256,
    step: { name: artifactStepName(a.name), position: a.position, value: link },
  }).catch(infra);
  opts.metrics?.artifactBytesWritten.inc(size);
  return link;
}

/**
 * The source's bytes in pieces of exactly `size` (the last one shorter), copied into two buffers taken
 * in turn: the caller must be done with a piece (its write awaited) before it asks for the one after the
 * next. No buffer is allocated per chunk, so the garbage a long artifact leaves is what its source makes.
 */
async function* rechunk(source: ArtifactSource, size: number): AsyncGenerator<Buffer> {
  const buffers = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
  let turn = 0;
  let held = 0;
  for await (const item of itemsOf(source)) {
    // A string that fits is encoded in place; only one that spans two chunks becomes a buffer first.
    const fits = typeof item === 'string' && Buffer.byteLength(item, 'utf8') <= size - held;
    const piece = fits ? undefined : asBuffer(item);
    if (fits) held += buffers[turn]!.write(item, held, 'utf8');
    let offset = 0;
    for (;;) {
      if (held === size) {
        yield buffers[turn]!;
        turn = 1 - turn;
        held = 0;
      }
      if (piece === undefined || offset === piece.length) break;
      const copied = piece.copy(buffers[turn]!, held, offset, Math.min(piece.length, offset + size - held));
      held += copied;
      offset += copied;
    }
  }
  if (held > 0) yield buffers[turn]!.subarray(0, held);
}

async function* itemsOf(source: ArtifactSource): AsyncGenerator<unknown> {
  if (typeof source === 'string' || source instanceof Uint8Array) {
    yield source;
    return;
  }
  if (
    source === null ||
    typeof source !== 'object' ||
    !(Symbol.asyncIterator in source || Symbol.iterator in source)
  ) {
    throw new TypeError(
      'ctx.artifact: the source must be a string, a Uint8Array, or an (async) iterable of them',
    );
  }
  yield* source;
}

function asBuffer(piece: unknown): Buffer {
  if (typeof piece === 'string') return Buffer.from(piece, 'utf8');
  if (piece instanceof Uint8Array) return Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
  throw new TypeError('ctx.artifact: the source yielded something other than a string or a Uint8Array');
}
