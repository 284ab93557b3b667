// Reading artifacts back: a complete artifact's description, found through its task's principal (another
// principal's artifact is not found, exactly like an unknown one), and its bytes a chunk at a time.
import type { Kysely } from 'kysely';
import type pg from 'pg';
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

/** Where chunks are read from: a pg pool (Kysely's text-format bytea would arrive as hex, twice the bytes). */
export type ChunkPool = Pick<pg.Pool, 'query'>;

/** Binary-format results: a bytea arrives as its bytes (pg has already copied them out of its socket buffer). */
const RAW_BYTES = { getTypeParser: () => (value: Buffer) => value } as unknown as pg.CustomTypesConfig;

/** Chunks `from` … `from + count - 1` of an artifact, in order (fewer when it was purged meanwhile). */
export async function readArtifactChunks(
  pool: ChunkPool,
  artifactId: string,
  from: number,
  count = 1,
): Promise<Buffer[]> {
  const query = {
    text: 'select data from task_artifact_chunks where artifact_id = $1 and seq >= $2 and seq < $3 order by seq',
    values: [artifactId, from, from + count],
    // (Results in binary format: a config field @types/pg does not declare.)
    binary: true,
    types: RAW_BYTES,
  } as pg.QueryConfig;
  const { rows } = await pool.query<{ data: Buffer }>(query);
  return rows.map((r) => r.data);
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
