// Writing an artifact from a task's attempt: begun, filled chunk by chunk, completed with its step. Every
// statement is fenced on the attempt that began it (the task still `working` under that attempt), so an
// attempt that lost its lease can add nothing and complete nothing; what it began stays `writing`,
// invisible to readers, until the sweeper deletes it.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { LeaseLostError } from './lease.ts';

/** Starts an artifact of the attempt; its id. LeaseLostError when the attempt no longer holds the task. */
export async function beginArtifact(
  db: Kysely<Database>,
  a: { taskId: string; attempt: number; name: string; mimeType: string; chunkSize: number },
): Promise<string> {
  const { rows } = await sql<{ artifact_id: string }>`
    insert into task_artifacts (task_id, name, mime_type, attempt, state, chunk_size)
    select t.task_id, ${a.name}, ${a.mimeType}, t.attempt, 'writing', ${a.chunkSize}
    from tasks t where t.task_id = ${a.taskId} and t.attempt = ${a.attempt} and t.status = 'working'
    returning artifact_id`.execute(db);
  if (rows.length === 0) throw new LeaseLostError(a.taskId, a.attempt);
  return rows[0]!.artifact_id;
}

/** Adds chunk `seq` (sent as a binary parameter), fenced like every write of the attempt. */
export async function writeArtifactChunk(
  db: Kysely<Database>,
  c: { taskId: string; attempt: number; artifactId: string; seq: number; data: Uint8Array },
): Promise<void> {
  const { rows } = await sql<{ seq: number }>`
    insert into task_artifact_chunks (artifact_id, seq, data)
    select a.artifact_id, ${c.seq}, ${Buffer.from(c.data.buffer, c.data.byteOffset, c.data.byteLength)}
    from task_artifacts a join tasks t on t.task_id = a.task_id
    where a.artifact_id = ${c.artifactId} and a.state = 'writing'
      and t.attempt = a.attempt and t.status = 'working'
    returning seq`.execute(db);
  if (rows.length === 0) throw new LeaseLostError(c.taskId, c.attempt);
}

export interface CompletedArtifact {
  taskId: string;
  attempt: number;
  artifactId: string;
  size: number;
  chunks: number;
  sha256: string;
  /** The step that records it (its value is the link the handler gets back, on every replay too). */
  step: { name: string; position: number | null; value: unknown };
}

/**
 * Makes the artifact readable and records its step, in one statement: both or neither. LeaseLostError
 * when the attempt no longer holds the task.
 */
export async function completeArtifact(db: Kysely<Database>, c: CompletedArtifact): Promise<void> {
  const { rows } = await sql<{ artifact_id: string }>`
    with done as (
      update task_artifacts a set state = 'complete', size = ${c.size}, chunks = ${c.chunks},
        sha256 = ${c.sha256}, completed_at = now()
      from tasks t
      where a.artifact_id = ${c.artifactId} and a.state = 'writing' and t.task_id = a.task_id
        and t.attempt = a.attempt and t.status = 'working'
      returning a.artifact_id, a.task_id, a.attempt
    ), step as (
      insert into task_steps (task_id, name, output, attempt, position)
      select task_id, ${c.step.name}, ${JSON.stringify({ value: c.step.value })}::jsonb, attempt, ${c.step.position}
      from done
      on conflict (task_id, name) do nothing
    )
    select artifact_id from done`.execute(db);
  if (rows.length === 0) throw new LeaseLostError(c.taskId, c.attempt);
}
