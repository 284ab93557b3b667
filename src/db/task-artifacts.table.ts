import type { ColumnType, Generated } from 'kysely';

/** A task's artifact: its bytes are in task_artifact_chunks, readable once `state` is `complete`. */
export interface TaskArtifactsTable {
  artifact_id: Generated<string>;
  task_id: string;
  /** Unique among the task's complete artifacts; the last segment of its URI. */
  name: string;
  mime_type: string;
  /** The task's attempt that writes it: every chunk's insert is fenced on it. */
  attempt: number;
  state: 'writing' | 'complete';
  /** Bytes per chunk (the last one may hold fewer): a byte range's first chunk is `floor(start / chunk_size)`. */
  chunk_size: number;
  /** Total bytes (bigint: pg returns it as a string). */
  size: ColumnType<string, number | string | undefined, number | string>;
  chunks: ColumnType<number, number | undefined, number>;
  /** Hex SHA-256 of the whole artifact, once complete. */
  sha256: string | null;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
  completed_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

/** One chunk of an artifact's bytes, `seq` 0, 1, 2, … */
export interface TaskArtifactChunksTable {
  artifact_id: string;
  seq: number;
  data: Buffer;
}
