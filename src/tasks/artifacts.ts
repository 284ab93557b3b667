import type { Kysely } from 'kysely';
import { artifactNameProblem } from '../core/artifacts.ts';
import type { Database } from '../db/database.ts';
import { isWellFormedTaskId } from './ids.ts';
import { artifactBytes, findArtifact, type ArtifactInfo, type ChunkPool } from './store/artifact-reads.ts';

export type { ArtifactInfo };

/**
 * Reading tasks' artifacts back, for `resources/read` and the HTTP download: only the task's principal
 * finds one (another principal's is not found, exactly like an unknown one).
 */
export class ArtifactReader {
  readonly #db: Kysely<Database>;
  readonly #pool: ChunkPool;

  /** `pool`: the pool behind `db`, for the chunks' bytes in binary form. */
  constructor(db: Kysely<Database>, pool: ChunkPool) {
    this.#db = db;
    this.#pool = pool;
  }

  /** The complete artifact, or undefined; an id or name that cannot be one never reaches Postgres. */
  find(principal: string, taskId: string, name: string): Promise<ArtifactInfo | undefined> {
    if (!isWellFormedTaskId(taskId) || artifactNameProblem(name) !== undefined) {
      return Promise.resolve(undefined);
    }
    return findArtifact(this.#db, { taskId, name, principal });
  }

  /** Bytes `start` … `end` (inclusive), a chunk at a time. */
  bytes(info: ArtifactInfo, start?: number, end?: number): AsyncGenerator<Buffer> {
    return artifactBytes(this.#pool, info, start, end);
  }
}
