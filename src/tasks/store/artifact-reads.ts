// Reading artifacts back: a complete artifact's description, found through its task's principal (another
// principal's artifact is not found, exactly like an unknown one), and its bytes a chunk at a time.
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { Database } from '../../db/database.ts';

export interface ArtifactInfo {
  artifactId: string;
  taskId: string;
  name: string;
  mimeType: string;
  size: number;
  chunkSize: number;
  chunks: number;
  sha256: string;
  completedAt: Date;
}

const INFO_COLUMNS = [
  'a.artifact_id',
  'a.task_id',
  'a.name',
  'a.mime_type',
  'a.size',
  'a.chunk_size',
  'a.chunks',
  'a.sha256',
  'a.completed_at',
] as const;

type InfoRow = {
  artifact_id: string;
  task_id: string;
  name: string;
  mime_type: string;
  size: string;
  chunk_size: number;
  chunks: number;
  sha256: string | null;
  completed_at: Date | null;
};

const toInfo = (r: InfoRow): ArtifactInfo => ({
  artifactId: r.artifact_id,
  taskId: r.task_id,
  name: r.name,
  mimeType: r.mime_type,
  size: Number(r.size),
  chunkSize: r.chunk_size,
  chunks: r.chunks,
  sha256: r.sha256 ?? '',
  completedAt: r.completed_at ?? new Date(0),
});

/** The complete artifact `name` of the principal's task, or undefined (unknown, unfinished, or not theirs). */
export async function findArtifact(
  db: Kysely<Database>,
  { taskId, name, principal }: { taskId: string; name: string; principal: string },
): Promise<ArtifactInfo | undefined> {
  const row = await db
    .selectFrom('task_artifacts as a')
    .innerJoin('tasks as t', 't.task_id', 'a.task_id')
    .select(INFO_COLUMNS)
    .where('a.task_id', '=', taskId)
    .where('a.name', '=', name)
    .where('a.state', '=', 'complete')
    .where('t.principal', '=', principal)
    .executeTakeFirst();
  return row === undefined ? undefined : toInfo(row);
}

/** A task's complete artifacts, by name (the operator's view: no principal check). */
export async function listArtifacts(db: Kysely<Database>, taskId: string): Promise<ArtifactInfo[]> {
  const rows = await db
    .selectFrom('task_artifacts as a')
    .select(INFO_COLUMNS)
    .where('a.task_id', '=', taskId)
    .where('a.state', '=', 'complete')
    .orderBy('a.name')
    .execute();
  return rows.map(toInfo);
}

/** Where chunks are read from: a pg pool (each read takes a client for one COPY). */
export type ChunkPool = Pick<pg.Pool, 'connect'>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Chunks `from` … `from + count - 1` of an artifact, in order (fewer when it was purged meanwhile), as
 * their exact bytes: a binary COPY. (A query's bytea arrives as hex text, twice the bytes and a large
 * string per chunk; and pg cannot read results in binary: its parser decodes every field as UTF-8.)
 * COPY takes no parameters: the id is checked to be a uuid and the numbers to be integers first.
 */
export async function readArtifactChunks(
  pool: ChunkPool,
  artifactId: string,
  from: number,
  count = 1,
): Promise<Buffer[]> {
  if (!UUID.test(artifactId) || !Number.isSafeInteger(from) || !Number.isSafeInteger(count)) {
    throw new TypeError(`not an artifact chunk: ${artifactId.slice(0, 40)} ${from}+${count}`);
  }
  const client = await pool.connect();
  let failure: Error | undefined;
  try {
    const stream = client.query(
      copyTo(
        `COPY (SELECT data FROM task_artifact_chunks WHERE artifact_id = '${artifactId}' ` +
          `AND seq >= ${from} AND seq < ${from + count} ORDER BY seq) TO STDOUT (FORMAT binary)`,
      ),
    );
    const parts: Buffer[] = [];
    for await (const part of stream) parts.push(part as Buffer);
    return binaryCopyFields(Buffer.concat(parts));
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    // A client whose COPY failed midway is not reused.
    client.release(failure);
  }
}

const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/** The one field of each tuple of a binary COPY of one column (PostgreSQL docs, "Binary Format"). */
export function binaryCopyFields(copy: Buffer): Buffer[] {
  if (copy.length < 21 || !copy.subarray(0, 11).equals(COPY_SIGNATURE)) {
    throw new Error('not a binary COPY stream');
  }
  let offset = 19 + copy.readUInt32BE(15);
  const fields: Buffer[] = [];
  for (;;) {
    const count = copy.readInt16BE(offset);
    offset += 2;
    if (count === -1) return fields;
    if (count !== 1) throw new Error(`a binary COPY tuple of ${count} fields, not 1`);
    const length = copy.readInt32BE(offset);
    offset += 4;
    if (length < 0 || offset + length > copy.length) throw new Error('a truncated binary COPY stream');
    fields.push(copy.subarray(offset, offset + length));
    offset += length;
  }
}

/** An artifact changed under a reader (purged, or chunks missing): the read cannot go on. */
export class ArtifactGoneError extends Error {
  override readonly name = 'ArtifactGoneError';
  constructor(readonly artifactId: string) {
    super(`artifact ${artifactId} is no longer stored`);
  }
}

/**
 * Bytes `start` … `end` (inclusive) of an artifact, a chunk per read: a reader holds one chunk at a time
 * and each read takes a pooled connection only while it runs.
 */
export async function* artifactBytes(
  pool: ChunkPool,
  info: Pick<ArtifactInfo, 'artifactId' | 'chunkSize' | 'size'>,
  start = 0,
  end = info.size - 1,
): AsyncGenerator<Buffer> {
  let offset = start;
  while (offset <= end) {
    const seq = Math.floor(offset / info.chunkSize);
    const [chunk] = await readArtifactChunks(pool, info.artifactId, seq);
    if (chunk === undefined) throw new ArtifactGoneError(info.artifactId);
    const chunkStart = seq * info.chunkSize;
    const piece = chunk.subarray(offset - chunkStart, Math.min(chunk.length, end - chunkStart + 1));
    if (piece.length === 0) throw new ArtifactGoneError(info.artifactId);
    offset += piece.length;
    yield piece;
  }
}
